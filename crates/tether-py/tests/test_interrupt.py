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


#: An owner whose spawns are interrupted by a SIGINT that arrives while it
#: waits for the keeper's "started" (sent by preexec_fn, which runs in the
#: child the owner forks before that child becomes the keeper). Its own
#: process: under pytest, logging's at-fork handler would take the signal
#: (raised in the handler, swallowed by the interpreter).
SPAWN_INTERRUPTED = r"""
import os, signal, sys, tether
signal.signal(signal.SIGINT, signal.default_int_handler)
env = {**os.environ, "TETHER_TEST_TAG": os.environ["COMMAND_TAG"]}
for i in range(8):
    try:
        tether.Popen(["sh", "-c", "trap '' TERM; exec sleep 1000"], env=env,
                     grace=0.2,  # it ignores SIGTERM: SIGKILL after 0.2 s
                     preexec_fn=lambda: os.kill(os.getppid(), signal.SIGINT))
        print("not-interrupted", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    sys.stdin.readline()
"""


def test_a_ctrl_c_during_the_spawn_ends_the_tree_before_it_is_raised(tag: str) -> None:
    # Python raised the SIGINT as the spawn returned, and the Popen it
    # returned was dropped unseen: its tree lived on until the keeper's own
    # kill, with the grace (a foreground one kept reading the terminal,
    # which had been given back: the test_terminal flake, "world" read as
    # "orld"). Now the tree is dead when KeyboardInterrupt is raised.
    import subprocess
    import sys

    from conftest import tagged_env

    command_tag = f"{tag}-command"
    owner = subprocess.Popen([sys.executable, "-c", SPAWN_INTERRUPTED],
                             env={**tagged_env(tag), "COMMAND_TAG": command_tag},
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert owner.stdin is not None and owner.stdout is not None
    try:
        for _ in range(8):
            assert owner.stdout.readline() == "interrupted\n"
            # At once, while the owner waits for the next line.
            assert tagged_pids(command_tag) == []
            owner.stdin.write("\n")
            owner.stdin.flush()
        assert owner.wait(30) == 0
    finally:
        owner.kill()
        owner.wait()
    assert wait_all_dead(tag, 10) == [] and wait_all_dead(command_tag, 10) == []
