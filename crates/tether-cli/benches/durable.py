#!/usr/bin/env python3
"""Durable sessions (issue 37): what they cost, against in-run baselines.

    python3 crates/tether-cli/benches/durable.py [path/to/tether]

Measures, in a private TETHER_HOME that is removed afterwards:

- start-to-return of `tether run --durable -- sleep 1000` (holder warm, and
  the first one, which starts the holder), against a plain background run
  `tether run -- sh -c 'echo ready; exec sleep 1000' &` timed until its
  command prints (the command is running in both);
- `tether attach ID --no-follow` to its first byte of output;
- the holder's RSS (VmRSS) and wake-ups per second (context switches of
  all its threads over 10 s) idle with 0, 1 and 100 sessions.

Medians of N runs; the machine's load is whatever it is (ratios in one run
are what to compare). No figure here is asserted anywhere.
"""

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

TETHER = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(__file__), "../../../target/debug/tether")
N = 30


def env(home):
    e = dict(os.environ)
    e["TETHER_HOME"] = home
    e["TETHER_HOLDER_IDLE"] = "3600"
    e.pop("TETHER_SPAWN", None)
    return e


def holder_pid(home):
    with open(os.path.join(home, "holder.lock")) as f:
        return int(f.read().strip())


def ctx_switches(pid):
    """Context switches per thread (tid -> count)."""
    counts = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                counts[tid] = sum(int(line.split()[1]) for line in f if line.startswith(
                    ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")))
        except OSError:
            pass
    return counts


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1])
    return 0


def idle(pid, seconds=10.0):
    # tokio's blocking threads linger 10 s after their last task and take
    # their counts with them when they exit: let them go first.
    time.sleep(12)
    before = ctx_switches(pid)
    time.sleep(seconds)
    after = ctx_switches(pid)
    woken = sum(n - before.get(tid, 0) for tid, n in after.items())
    return woken / seconds, len(after)


def start_durable(home):
    t = time.perf_counter()
    out = subprocess.run([TETHER, "run", "--durable", "--json", "--", "sleep", "1000"],
                         env=env(home), capture_output=True, check=True)
    return time.perf_counter() - t, json.loads(out.stdout)["id"]


def plain_background(home):
    t = time.perf_counter()
    p = subprocess.Popen([TETHER, "run", "--", "sh", "-c", "echo ready; exec sleep 1000"],
                         env=env(home), stdout=subprocess.PIPE)
    p.stdout.readline()
    took = time.perf_counter() - t
    p.send_signal(signal.SIGTERM)
    p.wait()
    return took


def attach_first_byte(home, session):
    t = time.perf_counter()
    p = subprocess.Popen([TETHER, "attach", session, "--no-follow"], env=env(home),
                         stdout=subprocess.PIPE)
    p.stdout.read(1)
    took = time.perf_counter() - t
    p.wait()
    return took


def ms(x):
    return f"{x * 1000:.1f} ms"


def main():
    home = tempfile.mkdtemp(prefix="tether-bench-durable.")
    try:
        first, _ = start_durable(home)
        pid = holder_pid(home)
        subprocess.run([TETHER, "kill", "--grace", "0", _], env=env(home),
                       capture_output=True, check=True)
        durable = []
        ids = []
        for _ in range(N):
            took, sid = start_durable(home)
            durable.append(took)
            ids.append(sid)
        for sid in ids:
            subprocess.run([TETHER, "kill", "--grace", "0", sid], env=env(home),
                           capture_output=True, check=True)
        plain = [plain_background(home) for _ in range(N)]
        out = subprocess.run([TETHER, "run", "--durable", "--json", "--", "sh", "-c",
                              "echo hello; exec sleep 1000"],
                             env=env(home), capture_output=True, check=True)
        talker = json.loads(out.stdout)["id"]
        subprocess.run([TETHER, "attach", talker, "--no-follow"], env=env(home),
                       capture_output=True, check=True)
        attach = [attach_first_byte(home, talker) for _ in range(N)]
        subprocess.run([TETHER, "kill", "--grace", "0", talker], env=env(home),
                       capture_output=True, check=True)

        print(f"start-to-return, tether run --durable (holder warm), median of {N}: "
              f"{ms(statistics.median(durable))}")
        print(f"  first one (starts the holder): {ms(first)}")
        print(f"plain background tether run until its command prints, median of {N}: "
              f"{ms(statistics.median(plain))}"
              f"  (durable/plain: {statistics.median(durable) / statistics.median(plain):.2f})")
        print(f"tether attach --no-follow to first byte, median of {N}: "
              f"{ms(statistics.median(attach))}")

        rows = []
        rows.append((0, rss_kib(pid), idle(pid)))
        _, one = start_durable(home)
        rows.append((1, rss_kib(pid), idle(pid)))
        for _ in range(99):
            start_durable(home)
        rows.append((100, rss_kib(pid), idle(pid)))
        for sessions, rss, (wakeups, threads) in rows:
            print(f"holder idle with {sessions:>3} sessions: RSS {rss / 1024:.1f} MiB, "
                  f"{wakeups:.2f} wake-ups/s (context switches of its {threads} threads "
                  f"over 10 s)")
    finally:
        try:
            os.kill(holder_pid(home), signal.SIGKILL)
        except (OSError, ValueError):
            pass
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
