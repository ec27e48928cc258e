"""The interpreter exits with the status it was given whatever daemon
threads are blocked in tether — no abort, no hang — and nothing tagged
survives its exit (the keepers kill the trees of an owner that is gone).

Before the fix: at finalization CPython (< 3.14) ends a daemon thread that
takes the GIL back with `pthread_exit`, whose forced unwind reached PyO3's
`catch_unwind` around the blocking call: glibc aborted the process
("FATAL: exception not rethrown", SIGABRT) — 6 of 18 exits of the issue's
reproducer, and 9-10 of 20 runs of this script here (0 of 140 since)."""

from __future__ import annotations

import subprocess
import sys

from conftest import tagged_env, wait_all_dead

#: Daemon threads blocked in each kind of tether wait — `run`, `run` with
#: its output captured, `Popen.wait`, `Session.wait` — three of each; the
#: main thread exits with status 3 once all twelve commands run, at a
#: moment that falls anywhere in the waits' wake-ups (every 50-100 ms they
#: take the GIL back to look at Python's signals).
OWNER = r"""
import os, random, sys, threading, time, tether

COMMAND = ["sleep", "30"]

def sleeps():
    mine = 0
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read()
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        tag = ("TETHER_TEST_TAG=" + os.environ["TETHER_TEST_TAG"]).encode()
        if argv == b"sleep\0" + b"30\0" and tag in env:
            mine += 1
    return mine

def in_run():
    tether.run(COMMAND)

def in_communicate():
    tether.run(COMMAND, capture_output=True)

def in_popen_wait():
    tether.Popen(COMMAND).wait()

def in_session_wait():
    tether.start(COMMAND).wait(timeout=60)

for target in (in_run, in_communicate, in_popen_wait, in_session_wait) * 3:
    threading.Thread(target=target, daemon=True).start()
deadline = time.monotonic() + 30
while sleeps() < 12 and time.monotonic() < deadline:
    time.sleep(0.01)  # polling the process table: no event for "started"
if sleeps() < 12:
    sys.exit("the commands never all started")
# Anywhere in the waits' 50-100 ms wake-up cycle.
time.sleep(random.random() * 0.2)
sys.exit(3)
"""

RUNS = 20


def test_exit_with_daemon_threads_blocked_in_tether(tag: str) -> None:
    outcomes = []
    for _ in range(RUNS):
        owner = subprocess.run(
            [sys.executable, "-c", OWNER],
            env=tagged_env(tag),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        outcomes.append((owner.returncode, owner.stderr.strip()[-300:]))
    bad = [o for o in outcomes if o != (3, "")]
    assert bad == [], f"{len(bad)} of {RUNS} exits were not a clean status 3: {bad[:3]}"
    # The owners are gone: their keepers kill every tree they held.
    assert wait_all_dead(tag, 20) == []
