"""tether.Popen and tether.run: subprocess's shape, the whole tree held."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

import tether
from conftest import ESCAPING_TREE, ESCAPING_TREE_MIN, tagged_env, tagged_pids, wait_all_dead, wait_for_count


def test_run_captures_like_subprocess() -> None:
    done = tether.run([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"],
                      capture_output=True, text=True)
    assert isinstance(done, subprocess.CompletedProcess)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")
    assert done.containment in ("subreaper", "pidns")
    echoed = tether.run(["cat"], input=b"\x00bytes\xff", capture_output=True)
    assert echoed.stdout == b"\x00bytes\xff"


def test_run_timeout_kills_the_whole_tree_then_raises(tag: str) -> None:
    began = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired) as raised:
        tether.run(ESCAPING_TREE, shell=True, env=tagged_env(tag), stdout=tether.PIPE, timeout=1)
    elapsed = time.monotonic() - began
    assert isinstance(raised.value, tether.TimeoutExpired)
    assert raised.value.output == b"ready\n"
    # Raised after the kill: nothing of the tree is left at that moment.
    assert tagged_pids(tag) == []
    assert raised.value.descendants_killed >= ESCAPING_TREE_MIN - 1
    assert elapsed < 1 + 2, elapsed  # timeout + at most the grace


def test_check_raises_called_process_error() -> None:
    with pytest.raises(subprocess.CalledProcessError) as raised:
        tether.run(["sh", "-c", "echo no; exit 7"], check=True, capture_output=True)
    assert isinstance(raised.value, tether.CalledProcessError)
    assert (raised.value.returncode, raised.value.stdout) == (7, b"no\n")


def test_communicate_returns_though_a_grandchild_holds_the_pipe(tag: str) -> None:
    # subprocess would block here until the grandchild exits (1000 s).
    began = time.monotonic()
    p = tether.Popen("sh -c 'sleep 1000' & echo ready", shell=True, env=tagged_env(tag),
                     stdout=tether.PIPE, stderr=tether.STDOUT)
    out, err = p.communicate(timeout=30)
    assert (out, err, p.returncode) == (b"ready\n", None, 0)
    assert p.descendants_killed >= 1
    assert tagged_pids(tag) == []
    assert time.monotonic() - began < 10


def test_wait_returns_though_a_grandchild_lives(tag: str) -> None:
    p = tether.Popen("setsid sleep 1000 & exit 0", shell=True, env=tagged_env(tag))
    assert p.wait(timeout=30) == 0
    assert tagged_pids(tag) == []


def test_kill_is_a_verified_tree_kill(tag: str) -> None:
    p = tether.Popen(ESCAPING_TREE, shell=True, env=tagged_env(tag), stdout=tether.PIPE)
    assert p.stdout is not None and p.stdout.readline() == b"ready\n"
    assert wait_for_count(tag, ESCAPING_TREE_MIN, 10) >= ESCAPING_TREE_MIN
    killed = p.kill_tree()
    # Verified before returning: not one tagged process is left.
    assert tagged_pids(tag) == []
    assert killed.descendants_killed >= ESCAPING_TREE_MIN - 1
    assert p.returncode == killed.returncode == -15
    p.stdout.close()


def test_poll_wait_timeout_signals() -> None:
    p = tether.Popen(["sleep", "1000"])
    assert p.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        p.wait(timeout=0.1)
    p.terminate()
    assert p.wait(timeout=30) == -15
    q = tether.Popen(["sh", "-c", "trap 'exit 42' USR1; while :; do sleep 0.01; done"])
    # The trap is set once the shell runs its loop; USR1 before that would
    # kill it: wait for the shell to be past the trap (a child sleep exists).
    deadline = time.monotonic() + 10
    while not q.descendants() and time.monotonic() < deadline:
        time.sleep(0.005)  # no event for "the trap is installed"
    q.send_signal(signal.SIGUSR1)
    assert q.wait(timeout=30) == 42


def test_context_manager_waits_then_leaves_nothing(tag: str) -> None:
    with tether.Popen("setsid sleep 1000 & echo hi", shell=True, env=tagged_env(tag), stdout=tether.PIPE) as p:
        assert p.stdout is not None and p.stdout.read() == b"hi\n"
    assert p.returncode == 0
    assert tagged_pids(tag) == []


def test_context_manager_kills_on_an_exception(tag: str) -> None:
    with pytest.raises(RuntimeError):
        with tether.Popen(ESCAPING_TREE, shell=True, env=tagged_env(tag), stdout=tether.PIPE) as p:
            assert p.stdout is not None and p.stdout.readline() == b"ready\n"
            raise RuntimeError("boom")
    assert tagged_pids(tag) == []


def test_a_collected_popen_takes_its_tree_with_it(tag: str) -> None:
    p = tether.Popen(ESCAPING_TREE, shell=True, env=tagged_env(tag), stdout=tether.PIPE)
    assert p.stdout is not None and p.stdout.readline() == b"ready\n"
    p.stdout.close()
    del p
    assert wait_all_dead(tag, 10) == []


def test_stdio_fds_files_and_devnull(tmp_path) -> None:
    path = tmp_path / "out"
    with open(path, "wb") as f:
        assert tether.run(["sh", "-c", "echo to-file; echo err >&2"], stdout=f, stderr=tether.STDOUT).returncode == 0
    assert path.read_bytes() == b"to-file\nerr\n"
    r, w = os.pipe()
    tether.run(["echo", "via-fd"], stdout=w)
    os.close(w)
    assert os.read(r, 100) == b"via-fd\n"
    os.close(r)
    assert tether.run(["cat"], stdin=tether.DEVNULL, capture_output=True).stdout == b""


def test_text_mode_and_stdin_pipe() -> None:
    p = tether.Popen(["cat"], stdin=tether.PIPE, stdout=tether.PIPE, text=True)
    out, _ = p.communicate("line\r\nnext")
    assert out == "line\nnext"
