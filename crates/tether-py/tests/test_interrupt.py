"""Ctrl-C during a blocking wait raises KeyboardInterrupt at once, and the
tree stays contained: alive and held until it is killed or its owner
dies."""

from __future__ import annotations

import signal
import time

from conftest import ESCAPING_TREE, python_owner, tagged_pids, wait_all_dead

# The owner takes Python's own Ctrl-C handler whatever it inherited: a
# shell without job control starts background jobs (`.ci/run … &`) with
# SIGINT ignored, Python then installs no KeyboardInterrupt handler, and the
# SIGINT below did nothing — the wait went on for its 1000 s (seen in a
# fresh-clone CI run started in the background).
OWNER = f"""
import signal, time, tether
signal.signal(signal.SIGINT, signal.default_int_handler)
p = tether.Popen({ESCAPING_TREE!r}, shell=True, stdout=tether.PIPE)
assert p.stdout.readline() == b"ready\\n"
s = tether.start(["sleep", "1000"])
for name, wait in (("popen", p.wait), ("session", lambda: s.wait(timeout=1000))):
    try:
        print("waiting", name, flush=True)
        wait()
        print("returned", name, flush=True)
    except KeyboardInterrupt:
        print("interrupted", name, len(p.descendants()), s.poll(), flush=True)
print("done", flush=True)
time.sleep(1000)
"""


def blocked_in(pid: int, syscalls: set, bound: float) -> bool:
    """Whether `pid`'s main thread is (within `bound` seconds) sleeping in
    one of `syscalls` (numbers, as /proc/PID/syscall shows them)."""
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/syscall") as f:
                if f.read().split()[0] in syscalls:
                    return True
        except (OSError, IndexError):
            pass
        time.sleep(0.005)  # no event for "entered a syscall": poll /proc
    return False


def test_ctrl_c_interrupts_waits_and_the_tree_stays_contained(tag: str) -> None:
    owner = python_owner(OWNER, tag)
    assert owner.stdout is not None
    for name in ("popen", "session"):
        assert owner.stdout.readline().split() == ["waiting", name]
        # Ctrl-C *during* the blocking call: once the owner's main thread
        # sleeps in it (poll(2) on the keeper socket; a futex for a
        # session's condition variable).
        # (x86_64: poll 7, ppoll 271, futex 202; aarch64: ppoll 73, futex 98.)
        assert blocked_in(owner.pid, {"7", "271", "202", "73", "98"}, 10), "the owner never blocked"
        owner.send_signal(signal.SIGINT)
        words = owner.stdout.readline().split()
        # Both waits would otherwise last 1000 s.
        assert words[:2] == ["interrupted", name], words
        descendants, session_returncode = int(words[2]), words[3]
        assert descendants >= 1 and session_returncode == "None"
    assert owner.stdout.readline() == "done\n"
    assert len(tagged_pids(tag)) > 2  # owner, keepers, trees: still there
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    assert wait_all_dead(tag, 10) == []
