"""tether.create_subprocess_exec/_shell: asyncio's contract (streams,
communicate, wait, signals, limit=) over a contained tree — escapes die
with the main process, cancelled awaits leak nothing, a grandchild holding
the pipe does not hold communicate(), a SIGKILLed owner leaves nothing."""

from __future__ import annotations

import asyncio
import gc
import signal
import sys

import pytest

import tether
from conftest import (
    ESCAPING_TREE,
    ESCAPING_TREE_MIN,
    python_owner,
    tagged_env,
    tagged_pids,
    wait_all_dead,
    wait_for_count,
)


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def waiter_threads_left() -> list:
    """tether's waiter threads still alive once each had 10 s to end (a
    join: they end when their command's end is reported)."""
    import threading

    for thread in threading.enumerate():
        if thread.name.startswith("tether-wait-"):
            thread.join(10)
    return [t.name for t in threading.enumerate() if t.name.startswith("tether-wait-")]


@pytest.fixture(autouse=True)
def no_waiter_threads_after() -> object:
    """Later tests count this process's threads: each test here ends with
    its waiter threads gone."""
    yield
    assert waiter_threads_left() == []


def test_communicate_echoes_stdin_to_stdout() -> None:
    async def scenario() -> None:
        p = await tether.create_subprocess_exec(
            "cat", stdin=tether.PIPE, stdout=tether.PIPE, stderr=tether.PIPE
        )
        assert isinstance(p.stdin, asyncio.StreamWriter)
        assert isinstance(p.stdout, asyncio.StreamReader)
        out, err = await p.communicate(b"hello\n" * 10000)
        assert out == b"hello\n" * 10000
        assert err == b""
        assert p.returncode == 0

    run(scenario())


def test_returncode_wait_and_shell() -> None:
    async def scenario() -> None:
        p = await tether.create_subprocess_shell("exit 7")
        assert p.pid > 0
        assert await p.wait() == 7
        assert p.returncode == 7
        assert await p.wait() == 7
        with pytest.raises(ProcessLookupError):
            p.send_signal(signal.SIGTERM)
        p = await tether.create_subprocess_shell("echo out; echo err >&2",
                                                 stdout=tether.PIPE, stderr=tether.STDOUT)
        out, err = await p.communicate()
        assert (out, err) == (b"out\nerr\n", None)

    run(scenario())


def test_kill_is_sigkill_and_terminate_is_sigterm() -> None:
    async def scenario() -> None:
        p = await tether.create_subprocess_exec("sleep", "1000")
        p.kill()
        assert await p.wait() == -signal.SIGKILL
        p = await tether.create_subprocess_exec("sleep", "1000")
        p.terminate()
        assert await p.wait() == -signal.SIGTERM
        p = await tether.create_subprocess_exec("sleep", "1000")
        p.send_signal(signal.SIGINT)
        assert await p.wait() == -signal.SIGINT

    run(scenario())


def test_readline_and_limit() -> None:
    async def scenario() -> None:
        p = await tether.create_subprocess_exec(
            "sh", "-c", "echo one; echo two; head -c 300 /dev/zero | tr '\\0' x; echo",
            stdout=tether.PIPE, limit=100,
        )
        assert p.stdout is not None
        assert await p.stdout.readline() == b"one\n"
        assert await p.stdout.readline() == b"two\n"
        # A line longer than limit= raises, as asyncio's StreamReader does.
        with pytest.raises(ValueError):
            await p.stdout.readline()
        assert await p.wait() == 0

    run(scenario())


def test_stdin_writer_drain_and_eof() -> None:
    async def scenario() -> None:
        p = await tether.create_subprocess_exec("wc", "-c", stdin=tether.PIPE, stdout=tether.PIPE)
        assert p.stdin is not None and p.stdout is not None
        for _ in range(100):
            p.stdin.write(b"x" * 10000)
            await p.stdin.drain()
        p.stdin.close()
        await p.stdin.wait_closed()
        assert (await p.stdout.read()).strip() == b"1000000"
        assert await p.wait() == 0

    run(scenario())


def test_bad_arguments_raise_as_asyncio() -> None:
    async def scenario() -> None:
        with pytest.raises(FileNotFoundError):
            await tether.create_subprocess_exec("/nonexistent/program")
        with pytest.raises(ValueError):
            await tether.create_subprocess_exec("true", text=True)
        with pytest.raises(ValueError):
            await tether.create_subprocess_exec("true", bufsize=1)
        with pytest.raises(ValueError):
            await tether.create_subprocess_exec("true", shell=True)
        with pytest.raises(ValueError):
            await tether.create_subprocess_shell("true", shell=False)

    run(scenario())


def test_escaping_tree_is_dead_after_communicate(tag: str) -> None:
    async def scenario() -> None:
        p = await tether.create_subprocess_shell(
            ESCAPING_TREE.replace("exec sleep 1000", "exit 0"), stdout=tether.PIPE, env=tagged_env(tag)
        )
        out, _ = await p.communicate()
        assert out == b"ready\n"
        assert p.returncode == 0
        assert p.descendants_killed > 0

    run(scenario())
    assert tagged_pids(tag) == []


def test_escaping_tree_is_dead_after_kill(tag: str) -> None:
    async def scenario() -> None:
        p = await tether.create_subprocess_shell(ESCAPING_TREE, stdout=tether.PIPE, env=tagged_env(tag))
        assert p.stdout is not None
        assert await p.stdout.readline() == b"ready\n"
        assert wait_for_count(tag, ESCAPING_TREE_MIN, 10) >= ESCAPING_TREE_MIN
        p.kill()
        assert await p.wait() == -signal.SIGKILL

    run(scenario())
    assert tagged_pids(tag) == []


def test_kill_tree_ends_the_whole_tree_verified(tag: str) -> None:
    async def scenario() -> None:
        p = await tether.create_subprocess_shell(ESCAPING_TREE, stdout=tether.PIPE, env=tagged_env(tag))
        assert p.stdout is not None
        assert await p.stdout.readline() == b"ready\n"
        assert wait_for_count(tag, ESCAPING_TREE_MIN, 10) >= ESCAPING_TREE_MIN
        assert await p.kill_tree(grace=0.5) == -signal.SIGTERM
        assert p.descendants_killed >= ESCAPING_TREE_MIN - 1
        await p.communicate()

    run(scenario())
    assert tagged_pids(tag) == []


def test_a_grandchild_holding_stdout_does_not_delay_communicate(tag: str) -> None:
    async def scenario() -> None:
        # The grandchild keeps stdout open for 1000 s: under asyncio,
        # communicate() would wait for it.
        p = await tether.create_subprocess_shell(
            "setsid sleep 1000 & echo done", stdout=tether.PIPE, env=tagged_env(tag)
        )
        out, _ = await asyncio.wait_for(p.communicate(), 60)
        assert out == b"done\n"
        assert p.returncode == 0

    run(scenario())
    assert tagged_pids(tag) == []


def test_cancelled_communicate_and_wait_leave_the_tree_contained(tag: str) -> None:
    async def scenario() -> None:
        p = await tether.create_subprocess_shell(
            ESCAPING_TREE, stdin=tether.PIPE, stdout=tether.PIPE, env=tagged_env(tag)
        )
        assert wait_for_count(tag, ESCAPING_TREE_MIN, 10) >= ESCAPING_TREE_MIN
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(p.communicate(b"input"), 0.2)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(p.wait(), 0.2)
        assert p.returncode is None
        assert len(tagged_pids(tag)) >= ESCAPING_TREE_MIN
        p.kill()
        assert await p.wait() == -signal.SIGKILL

    run(scenario())
    assert tagged_pids(tag) == []
    assert waiter_threads_left() == []


def test_a_collected_process_takes_its_tree_with_it(tag: str) -> None:
    async def scenario() -> None:
        p = await tether.create_subprocess_shell(ESCAPING_TREE, stdout=tether.DEVNULL, env=tagged_env(tag))
        assert wait_for_count(tag, ESCAPING_TREE_MIN, 10) >= ESCAPING_TREE_MIN
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(p.wait(), 0.1)
        del p
        gc.collect()

    run(scenario())
    assert wait_all_dead(tag, 10) == []
    assert waiter_threads_left() == []


OWNER = f"""
import asyncio, time, tether, os
if os.environ.get("STOCK"): tether.create_subprocess_shell = asyncio.create_subprocess_shell
async def main():
    p = await tether.create_subprocess_shell({ESCAPING_TREE!r}, stdout=tether.PIPE)
    assert await p.stdout.readline() == b"ready\\n"
    print("ready", flush=True)
    await p.communicate()
asyncio.run(main())
"""


def test_sigkilled_asyncio_owner_leaves_no_survivors(tag: str) -> None:
    owner = python_owner(OWNER, tag)
    assert owner.stdout is not None
    assert owner.stdout.readline() == "ready\n"
    # The owner, its keeper and the escaping tree.
    assert wait_for_count(tag, ESCAPING_TREE_MIN + 1, 10) >= ESCAPING_TREE_MIN + 1
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    owner.stdout.close()
    assert wait_all_dead(tag, 10) == []


def test_import_tether_does_not_import_asyncio() -> None:
    # asyncio's import costs more than all of tether's: only the first
    # create_subprocess_* brings it in.
    import subprocess

    code = "import sys, tether; print('asyncio' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "False\n"


#: CPython's own tests that fail with tether's functions, and why.
CPYTHON_EXPECTED_FAILURES = {
    "test_stdin_broken_pipe",  # pass_fds: not supported (only the standard streams are passed)
}


def test_cpython_asyncio_subprocess_suite() -> None:
    """CPython's Lib/test/test_asyncio/test_subprocess.py with
    asyncio.create_subprocess_* replaced by tether's (tests/cpython/)."""
    import os
    import subprocess

    runner = os.path.join(os.path.dirname(__file__), "cpython", "run_asyncio_subprocess.py")
    try:
        import test.test_asyncio.test_subprocess  # noqa: F401
    except ImportError:
        pytest.skip("this interpreter has no test package")
    done = subprocess.run([sys.executable, runner], capture_output=True, text=True, timeout=300)
    failed = {line.split(":", 1)[1].strip() for line in done.stdout.splitlines()
              if line.startswith("  failed:")}
    assert failed == CPYTHON_EXPECTED_FAILURES, done.stdout + done.stderr[-3000:]
