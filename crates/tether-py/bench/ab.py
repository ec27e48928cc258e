"""`tether.run(ARGV)` of two installs of the package (say, main's release
wheel and this tree's, each in a venv of its own), each against
`subprocess.run(ARGV)` in its own interpreter, interleaved in one run:
every round runs tether then subprocess in A, then in B, so machine noise
falls on all four alike. Prints the medians and both ratios.

    python crates/tether-py/bench/ab.py BASE/bin/python NEW/bin/python
    N=300 ARGV='/bin/true' python crates/tether-py/bench/ab.py A B
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys

CHILD = r"""
import sys, time, subprocess, tether
argv = sys.argv[1:]
tether.run(argv); subprocess.run(argv)
for line in sys.stdin:
    f = (lambda: tether.run(argv)) if line.strip() == "t" else (lambda: subprocess.run(argv))
    t = time.perf_counter(); f(); d = time.perf_counter() - t
    sys.stdout.write(f"{d}\n"); sys.stdout.flush()
"""


def main() -> None:
    pythons = {"A": sys.argv[1], "B": sys.argv[2]}
    n = int(os.environ.get("N", "300"))
    argv = os.environ.get("ARGV", "/bin/true").split()
    procs = {
        k: subprocess.Popen([py, "-c", CHILD, *argv], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, bufsize=1)
        for k, py in pythons.items()
    }
    times: dict = {(k, w): [] for k in pythons for w in "ts"}
    for _ in range(n):
        for k, p in procs.items():
            for w in "ts":
                assert p.stdin is not None and p.stdout is not None
                p.stdin.write(w + "\n")
                p.stdin.flush()
                times[k, w].append(float(p.stdout.readline()))
    for p in procs.values():
        assert p.stdin is not None
        p.stdin.close()
        p.wait()
    med = {key: statistics.median(v) * 1e3 for key, v in times.items()}
    for k in pythons:
        print(f"{k}: tether.run {med[k, 't']:.3f} ms, subprocess.run {med[k, 's']:.3f} ms, "
              f"ratio {med[k, 't'] / med[k, 's']:.3f}")
    print(f"median of {n}, load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
