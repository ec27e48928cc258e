"""tether.spawn against pexpect.spawn, interleaved in one run (ratios, never
absolute targets). Prints a markdown table.

    pip install pexpect
    python crates/tether-py/bench/bench_spawn.py   # with process-tether installed
"""

from __future__ import annotations

import statistics
import sys
import time

import pexpect

import tether


def interleaved(a, b, n: int):  # type: ignore[no-untyped-def]
    ta, tb = [], []
    for _ in range(n):
        t = time.perf_counter(); a(); ta.append(time.perf_counter() - t)
        t = time.perf_counter(); b(); tb.append(time.perf_counter() - t)
    return statistics.median(ta), statistics.median(tb)


def session(make):  # type: ignore[no-untyped-def]
    """Start `cat`, one sendline/expect round trip, close (the tree killed)."""
    def run() -> None:
        c = make("cat")
        c.sendline(b"ping")
        c.expect(b"ping\r\nping\r\n")  # the echo, then cat's copy
        c.close()
    return run


def round_trip(child):  # type: ignore[no-untyped-def]
    def run() -> None:
        child.sendline(b"ping")
        child.expect(b"ping\r\nping\r\n")
    return run


def quick_pexpect(command: str):  # type: ignore[no-untyped-def]
    """pexpect without its 50 ms sleep before each send (tether.spawn has
    none). Its sleeps in close/terminate stay: without them ptyprocess
    fails to terminate `cat` ("Could not terminate the child")."""
    child = pexpect.spawn(command)
    child.delaybeforesend = None
    return child


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    rows = []
    for label, make in (("", pexpect.spawn), (" (pexpect's send delay off)", quick_pexpect)):
        a, b = interleaved(session(tether.spawn), session(make), n)
        rows.append((f"spawn `cat` + 1 expect round trip + close{label}", a, b))
        t, p = tether.spawn("cat"), make("cat")
        a, b = interleaved(round_trip(t), round_trip(p), n * 5)
        t.close(), p.close()
        rows.append((f"1 sendline/expect round trip, `cat` running{label}", a, b))
    print(f"n = {n}, medians, interleaved")
    print("| | tether.spawn | pexpect.spawn | ratio |\n|---|---|---|---|")
    for name, a, b in rows:
        print(f"| {name} | {a * 1e3:.2f} ms | {b * 1e3:.2f} ms | {a / b:.2f}× |")


if __name__ == "__main__":
    main()
