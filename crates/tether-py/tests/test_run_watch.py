"""`run` and `call` wait for their command on the calling thread at once,
so that thread watches the command's keeper — no guard thread is started
(and joined) per command — with every guarantee the thread gave: a keeper
its own command stopped (`kill -STOP $PPID`) is resumed, so the command's
end is still reported and its timeout still fires, whatever way the call
waits (a plain wait, one pipe read beside a follower, the loop over
several pipes)."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
from typing import Any, Callable

import pytest

import tether
from conftest import keepers, python_owner, tagged_env, wait_all_dead, wait_for_count

#: How the call under test waits: no pipe, one pipe (read beside a
#: follower thread that waits), two pipes (the select loop), stdin
#: closed at once (no input), and `call`.
MODES = {
    "plain": lambda argv, **kw: tether.run(argv, **kw).returncode,
    "stdout": lambda argv, **kw: tether.run(argv, stdout=tether.PIPE, **kw).returncode,
    "capture": lambda argv, **kw: tether.run(argv, capture_output=True, **kw).returncode,
    "stdin-closed": lambda argv, **kw: tether.run(
        argv, stdin=tether.PIPE, stdout=tether.PIPE, **kw).returncode,
    "call": lambda argv, **kw: tether.call(argv, **kw),
}


def owner_threads_seen_by(mode: Callable[..., Any]) -> str:
    """The names of this process's threads, as its command sees them while
    it runs (written to a file: the command's stdout may be a pipe)."""
    with tempfile.NamedTemporaryFile("r") as names:
        script = f"cat /proc/{os.getpid()}/task/*/comm > {names.name}"
        assert mode(["sh", "-c", script]) == 0
        return names.read()


@pytest.mark.parametrize("name", MODES)
def test_no_guard_thread_while_run_waits(name: str) -> None:
    names = owner_threads_seen_by(MODES[name])
    assert names, "the command saw no thread of its owner"
    assert "tether-guard" not in names.split(), names


def test_a_handed_out_popen_is_still_guarded_by_the_thread() -> None:
    # The control: a Popen the caller holds may be waited for anywhere, or
    # not at all; the guard thread watches its keeper.
    def popen(argv: Any) -> int:
        with tether.Popen(argv) as p:
            return p.wait()

    assert "tether-guard" in owner_threads_seen_by(popen).split()


def bounded(call: Callable[[], Any], tag: str) -> Any:
    """`call()` in a thread; a call still blocked after 30 s (a keeper left
    stopped reports nothing: the wait would never end) fails the test,
    after its tree is killed and the stopped keepers are resumed."""
    outcome: dict = {}

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            outcome["error"] = e

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(30)
    if worker.is_alive():
        for pid in keepers(os.getpid()):
            os.kill(pid, signal.SIGCONT)
        worker.join(30)
        pytest.fail("the call hung: nothing resumed the keeper its command stopped")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


@pytest.mark.parametrize("name", MODES)
def test_a_keeper_stopped_by_its_command_still_reports_the_end(name: str, tag: str) -> None:
    # (From the test's main thread run() would hand the command the
    # terminal: a worker thread's does not.)
    code = bounded(lambda: MODES[name](["sh", "-c", "kill -STOP $PPID; exit 3"],
                                      env=tagged_env(tag)), tag)
    assert code == 3
    assert wait_all_dead(tag, 10) == []


@pytest.mark.parametrize("name", [n for n in MODES if n != "call"])
def test_a_keeper_stopped_by_its_command_still_times_it_out(name: str, tag: str) -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        bounded(lambda: MODES[name](["sh", "-c", "kill -STOP $PPID; exec sleep 1000"],
                                    env=tagged_env(tag), timeout=0.5), tag)
    assert wait_all_dead(tag, 10) == []


def test_a_chatty_command_that_stops_its_keeper_is_still_timed_out(tag: str) -> None:
    # Both streams piped (the select loop) and output more often than the
    # patrol period: the selector is always ready, and the keeper it
    # stopped must be resumed by the clock all the same.
    script = "kill -STOP $PPID; while :; do echo x; echo y >&2; sleep 0.05; done"
    with pytest.raises(subprocess.TimeoutExpired):
        bounded(lambda: tether.run(["sh", "-c", script], capture_output=True,
                                   env=tagged_env(tag), timeout=1), tag)
    assert wait_all_dead(tag, 10) == []


#: An owner whose plain `run` (no pipe: no `Popen` is built for it) is
#: interrupted by Ctrl-C while the tree runs. While the KeyboardInterrupt is
#: handled (its traceback still holds the call's frame) it counts what is
#: left of the tree: the processes under its keepers.
INTERRUPTED = """
import os, signal, time, tether

def children(pid):
    return [int(c) for t in os.listdir(f"/proc/{pid}/task")
            for c in open(f"/proc/{pid}/task/{t}/children").read().split()]

signal.signal(signal.SIGINT, signal.default_int_handler)
print("waiting", flush=True)
try:
    tether.run(["sh", "-c", "sleep 1000 & exec sleep 1000"])
except KeyboardInterrupt:
    left = [p for keeper in children(os.getpid()) for p in children(keeper)]
    print("interrupted", len(left), flush=True)
time.sleep(1000)
"""


def test_ctrl_c_in_a_plain_run_kills_the_tree_before_it_raises(tag: str) -> None:
    owner = python_owner(INTERRUPTED, tag)
    try:
        assert owner.stdout is not None
        assert owner.stdout.readline() == "waiting\n"
        # The owner and sh's two sleeps (the keeper has a tag of its own).
        assert wait_for_count(tag, 3, 10) >= 3
        owner.send_signal(signal.SIGINT)
        # Verified dead (and reaped) before the KeyboardInterrupt reached
        # the caller.
        assert owner.stdout.readline() == "interrupted 0\n"
    finally:
        owner.kill()
        owner.wait()
    assert wait_all_dead(tag, 10) == []
