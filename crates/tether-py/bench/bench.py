"""Benchmarks of the Python package against subprocess, measured in one run
(ratios, never absolute targets). Prints a markdown table.

    python crates/tether-py/bench/bench.py   # with process-tether installed
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time


def interleaved(a, b, n: int):  # type: ignore[no-untyped-def]
    ta, tb = [], []
    for _ in range(n):
        t = time.perf_counter(); a(); ta.append(time.perf_counter() - t)
        t = time.perf_counter(); b(); tb.append(time.perf_counter() - t)
    return statistics.median(ta), statistics.median(tb)


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def idle_keeper_memory() -> str:
    """RSS, PSS and private (USS) memory of each idle warm keeper (children
    of this process running `__tether-keeper`), from smaps_rollup."""
    me = os.getpid()
    keepers = []
    for task in os.listdir(f"/proc/{me}/task"):
        with open(f"/proc/{me}/task/{task}/children") as f:
            keepers += [int(p) for p in f.read().split()]
    rows = []
    for pid in keepers:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"__tether-keeper" not in f.read().split(b"\0"):
                continue
        fields = {}
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and parts[2] == "kB":
                    fields[parts[0].rstrip(":")] = int(parts[1])
        private = fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)
        rows.append(f"RSS {fields.get('Rss', 0)} KiB, PSS {fields.get('Pss', 0)} KiB, private {private} KiB")
    return "; ".join(rows) or "none found"


def main() -> None:
    t = time.perf_counter()
    import tether  # noqa: F401
    import_ms = (time.perf_counter() - t) * 1000
    rows = []
    n = int(os.environ.get("BENCH_N", "200"))
    # The default: warm keepers (the keeper of the last command serves the
    # next one).
    tether.run(["/bin/true"]); subprocess.run(["/bin/true"])
    t_tether, t_sub = interleaved(lambda: tether.run(["/bin/true"]), lambda: subprocess.run(["/bin/true"]), n)
    rows.append((f"`run(['/bin/true'])` (default: warm keepers), median of {n}", t_tether * 1e3, t_sub * 1e3))
    keeper_memory = idle_keeper_memory()
    # A keeper started per command (the default before warm keepers).
    tether.set_warm_keepers(0)
    t_tether, t_sub = interleaved(lambda: tether.run(["/bin/true"]), lambda: subprocess.run(["/bin/true"]), n)
    rows.append((f"`run(['/bin/true'])` with `set_warm_keepers(0)`, median of {n}", t_tether * 1e3, t_sub * 1e3))
    size = 100 * 1024 * 1024
    cmd = ["head", "-c", str(size), "/dev/zero"]

    def big(mod):  # type: ignore[no-untyped-def]
        p = mod.Popen(cmd, stdout=subprocess.PIPE)
        out, _ = p.communicate()
        assert len(out) == size

    t_tether, t_sub = interleaved(lambda: big(tether), lambda: big(subprocess), 5)
    rows.append(("`Popen` + `communicate()` of 100 MB, median of 5", t_tether * 1e3, t_sub * 1e3))
    print("| what | tether (ms) | subprocess (ms) | ratio |")
    print("|---|---|---|---|")
    for what, a, b in rows:
        print(f"| {what} | {a:.2f} | {b:.2f} | {a / b:.2f}× |")
    # Memory per idle background session (the extension's side).
    base = rss_kib()
    sessions = [tether.start(["sleep", "1000"]) for _ in range(50)]
    per = (rss_kib() - base) / len(sessions)
    for s in sessions:
        s.kill(grace=0)
    print(f"\nidle background session: {per:.0f} KiB of this process's RSS each (50 `sleep` sessions)")
    print(f"idle warm keeper: {keeper_memory}")
    print(f"`import tether` (in this process, first): {import_ms:.1f} ms")
    # Descriptors a finished, communicated Popen holds (30 of each).
    for mod in (tether, subprocess):
        base = len(os.listdir("/proc/self/fd"))
        held = []
        for _ in range(30):
            p = mod.Popen(["echo", "hi"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            p.communicate()
            held.append(p)
        print(f"descriptors held by 30 finished, communicated {mod.__name__}.Popen: "
              f"{len(os.listdir('/proc/self/fd')) - base}")
    # `import tether` in a fresh interpreter, against one that imports
    # nothing (and against `import subprocess`), interleaved; then what the
    # first use of `run` loads on top.
    m = int(os.environ.get("BENCH_IMPORT_N", "40"))
    codes = {
        "nothing": "pass",
        "import subprocess": "import subprocess",
        "import tether": "import tether",
        "import tether; tether.run": "import tether; tether.run",
    }
    times = {k: [] for k in codes}
    for _ in range(m):
        for k, code in codes.items():
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            times[k].append(time.perf_counter() - t)
    base_ms = statistics.median(times["nothing"]) * 1e3
    for k in codes:
        if k != "nothing":
            med = statistics.median(times[k]) * 1e3
            print(f"{k}: +{med - base_ms:.1f} ms over an interpreter that imports nothing "
                  f"({base_ms:.1f} ms), median of {m} interleaved")


if __name__ == "__main__":
    main()
