"""A forked child is not the owner: the parent's trees still die with the
parent, the child cannot touch them, and the child owns what it starts."""

from __future__ import annotations

import os
import signal
import warnings

import pytest

import tether
from conftest import ESCAPING_TREE, ESCAPING_TREE_MIN, python_owner, tagged_pids, threads, wait_all_dead, wait_for_count

# The owner starts a tree and a session, then forks a child that lives on
# (holding, before the fix, copies of the keepers' sockets), and waits to
# be SIGKILLed.
OWNER = f"""
import os, sys, time, tether
p = tether.Popen({ESCAPING_TREE!r}, shell=True, stdout=tether.PIPE,
                 env=dict(os.environ, TETHER_TEST_TAG=os.environ["TREE_TAG"]))
assert p.stdout.readline() == b"ready\\n"
child = os.fork()
if child == 0:
    time.sleep(1000)
    os._exit(0)
print("forked", child, flush=True)
time.sleep(1000)
"""


def test_parent_trees_die_with_the_parent_while_a_forked_child_lives(tag: str) -> None:
    tree_tag = f"{tag}-tree"
    try:
        owner = python_owner(OWNER, tag, TREE_TAG=tree_tag)
        assert owner.stdout is not None
        word, child = owner.stdout.readline().split()
        assert word == "forked"
        assert wait_for_count(tree_tag, ESCAPING_TREE_MIN, 10) >= ESCAPING_TREE_MIN
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        # The forked child still lives (it carries `tag`, the tree `tree_tag`).
        assert int(child) in tagged_pids(tag), "the forked child should still be alive"
        assert wait_all_dead(tree_tag, 10) == []
    finally:
        from conftest import kill_tagged

        kill_tagged(tree_tag)


def _in_child(body) -> int:  # type: ignore[no-untyped-def]
    """Runs `body()` in a forked child; its exit status (0: passed)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        code = 1
        try:
            body()
            code = 0
        except BaseException as e:  # reported through the exit status
            print("child failed:", repr(e), flush=True)
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_handles_inherited_across_fork_refuse_and_the_child_runs_its_own() -> None:
    p = tether.Popen(["sleep", "1000"])
    s = tether.start(["sleep", "1000"])

    def child() -> None:
        with pytest.raises(tether.InheritedHandleError) as raised:
            p.kill()
        assert raised.value.owner_pid == os.getppid()
        for call in (p.wait, p.poll):
            with pytest.raises(tether.InheritedHandleError):
                call()
        for call in (s.kill, s.wait, s.info):
            with pytest.raises(tether.InheritedHandleError):
                call()
        # The parent's sessions are not the child's registry.
        assert tether.sessions() == []
        # The child's own commands work, and are its own.
        assert tether.run(["echo", "mine"], capture_output=True).stdout == b"mine\n"
        own = tether.start(["sh", "-c", "echo own"])
        assert own.wait(settled=True, timeout=30).info.returncode == 0
        assert own.read(0).data == b"own\n"

    assert _in_child(child) == 0
    # The parent's handles are untouched by what the child did.
    assert p.poll() is None and s.poll() is None
    assert p.kill_tree().returncode == -15
    assert s.kill().state == "killed"


def test_no_thread_to_warn_about_at_fork() -> None:
    # CPython 3.12+ warns on fork() in a process with threads; an idle
    # tether user has none of ours.
    tether.run(["true"])
    s = tether.start(["true"])
    s.wait(settled=True, timeout=30)
    assert threads() == 1, os.listdir("/proc/self/task")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        pid = os.fork()
        if pid == 0:
            os._exit(0)
    os.waitpid(pid, 0)
