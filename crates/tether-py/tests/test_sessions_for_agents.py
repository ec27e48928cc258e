"""Sessions for agents (issue 36, item 6): ``AsyncSession.kill`` outside a
running loop, lookup of a session by pid, and the live-session cap."""

from __future__ import annotations

import asyncio

import pytest

import tether
from conftest import ESCAPING_TREE, ESCAPING_TREE_MIN, fd_count, tagged_env, tagged_pids, wait_for_count


def _started(tag: str) -> tether.AsyncSession:
    async def start() -> tether.AsyncSession:
        s = await tether.start_async(ESCAPING_TREE, shell=True, env=tagged_env(tag))
        assert (await s.wait(until="ready", timeout=30)).matched
        return s

    s = asyncio.run(start())
    assert wait_for_count(tag, ESCAPING_TREE_MIN, 10) >= ESCAPING_TREE_MIN
    return s


def test_async_kill_outside_a_running_loop(tag: str) -> None:
    # The loop that started it is gone: kill() is an ordinary call.
    s = _started(tag)
    killing = s.kill(grace=1)
    killed = killing.result(timeout=30)
    assert killed.state == "killed" and killed.descendants_killed >= ESCAPING_TREE_MIN - 1
    assert killing.done()
    assert tagged_pids(tag) == []


def test_async_kill_acts_when_called_even_if_never_awaited(tag: str) -> None:
    s = _started(tag)

    async def drop_it() -> None:
        s.kill(grace=1)  # as asyncio's Process.kill(): acts now, nothing to await

    asyncio.run(drop_it())
    # The kill went on on tether's thread: the session settles, its tree gone.
    assert tether.session(s.id).wait(timeout=30, settled=True).status == "exited"
    assert s.info().state == "killed"
    assert tagged_pids(tag) == []


def test_async_kill_is_still_awaitable(tag: str) -> None:
    s = _started(tag)

    async def kill() -> str:
        return (await s.kill(grace=1)).state  # type: ignore[no-any-return]

    assert asyncio.run(kill()) == "killed"
    assert tagged_pids(tag) == []


def test_session_by_pid(tag: str) -> None:
    with tether.start(["sleep", "1000"], env=tagged_env(tag)) as a, \
            tether.start(["sleep", "1000"], env=tagged_env(tag)) as b:
        assert tether.session(pid=a.pid).id == a.id
        assert tether.session(pid=b.pid).id == b.id
        # A pid that is no session's main process (this one's own).
        import os

        with pytest.raises(tether.SessionNotFound, match=str(os.getpid())):
            tether.session(pid=os.getpid())
        with pytest.raises(TypeError):
            tether.session()
        with pytest.raises(TypeError):
            tether.session(a.id, pid=a.pid)
    assert tagged_pids(tag) == []
    # A finished session is still found by its pid while it is kept.
    assert tether.session(pid=a.pid).info().state == "killed"


def test_the_live_session_cap_is_configurable(tag: str) -> None:
    assert tether.max_sessions() == 64
    for bad in (0, -1, 4097, 2**70):
        with pytest.raises(ValueError, match="1 to 4096"):
            tether.set_max_sessions(bad)
    with pytest.raises(TypeError):
        tether.set_max_sessions("100")  # type: ignore[arg-type]
    assert tether.max_sessions() == 64
    # 200 concurrent start_async: with the default cap 136 were refused.
    n = 200
    assert tether.set_max_sessions(n) == 64
    try:
        async def many() -> list:
            return await asyncio.gather(
                *(tether.start_async(["sleep", "1000"], env=tagged_env(tag)) for _ in range(n)),
                return_exceptions=True)

        started = asyncio.run(many())
        refused = [s for s in started if not isinstance(s, tether.AsyncSession)]
        live = [s for s in started if isinstance(s, tether.AsyncSession)]
        try:
            assert refused == []
            # One past the cap: refused, clearly, nothing started.
            with pytest.raises(tether.TooManySessions) as info:
                tether.start(["sleep", "1000"], env=tagged_env(tag))
            assert info.value.limit == n
        finally:
            killings = [s.kill(grace=0) for s in live]
            # (Verified kills: each tree is gone when its report says so.)
            assert all(k.result(timeout=60).state == "killed" for k in killings)
    finally:
        tether.set_max_sessions(64)
    assert tagged_pids(tag) == []


def _warm() -> None:
    # The warm keepers (2 by default) hold their sockets: fill the pool
    # before the baseline.
    for _ in range(3):
        tether.Popen(["true"], stdout=tether.PIPE).communicate()


def test_a_communicated_popen_holds_no_descriptor_as_subprocess() -> None:
    import subprocess

    def held(module: object) -> int:
        before = fd_count()
        done = []
        for _ in range(30):
            p = module.Popen(["echo", "hi"], stdin=module.PIPE, stdout=module.PIPE,  # type: ignore[attr-defined]
                             stderr=module.PIPE)
            assert p.communicate() == (b"hi\n", b"")
            done.append(p)
        return fd_count() - before

    _warm()
    assert held(subprocess) == 0
    assert held(tether) == 0  # was 60: the keeper's socket and the kill handle's copy, each


def test_close_releases_a_finished_popen_at_once() -> None:
    _warm()
    before = fd_count()
    p = tether.Popen(["echo", "hi"], stdin=tether.PIPE, stdout=tether.PIPE, stderr=tether.PIPE)
    assert p.wait(timeout=30) == 0
    # Waited, not communicated: its three pipes are open still.
    assert fd_count() > before
    p.close()
    assert fd_count() == before
    assert p.stdin.closed and p.stdout.closed and p.stderr.closed  # type: ignore[union-attr]
    assert (p.returncode, p.poll(), p.wait()) == (0, 0, 0)
    p.close()  # again: nothing
    assert p.kill_tree().descendants_killed == 0


def test_close_kills_a_running_popen_first(tag: str) -> None:
    _warm()
    before = fd_count()
    p = tether.Popen(ESCAPING_TREE, shell=True, stdin=tether.PIPE, stdout=tether.PIPE,
                     env=tagged_env(tag))
    assert p.stdout is not None and p.stdout.readline() == b"ready\n"
    assert wait_for_count(tag, ESCAPING_TREE_MIN, 10) >= ESCAPING_TREE_MIN
    p.close()
    # Verified before it returned: nothing of the tree, no descriptor left.
    assert tagged_pids(tag) == []
    assert p.returncode is not None and p.returncode < 0
    assert fd_count() == before


# --- close(), iter_output(), fileno(), rusage -------------------------------


def _settled_baseline() -> int:
    """The descriptor count with warm keepers in place and no session
    live (so the engine's runtime is stopped)."""
    _warm()
    warm = tether.start(["true"])
    warm.wait(timeout=30, settled=True)
    warm.close()
    return fd_count()


@pytest.mark.parametrize("pty", [False, True])
def test_close_releases_every_descriptor_of_a_live_session_at_once(tag: str, pty: bool) -> None:
    before = _settled_baseline()
    s = tether.start(ESCAPING_TREE, shell=True, env=tagged_env(tag), stdin=True, pty=pty)
    assert s.wait(until="ready", timeout=30).matched
    assert wait_for_count(tag, ESCAPING_TREE_MIN, 10) >= ESCAPING_TREE_MIN
    s.fileno()
    assert fd_count() > before
    s.close(grace=1)
    # Verified before it returned: no process of the tree, no descriptor.
    assert tagged_pids(tag) == []
    assert fd_count() == before
    assert s.closed
    # What it was when closed still answers; I/O does not; the id is gone.
    assert s.info().state == "killed" and s.poll() is not None
    with pytest.raises(ValueError, match="closed session"):
        s.read_new()
    with pytest.raises(ValueError, match="closed session"):
        s.write("x")
    with pytest.raises(tether.SessionNotFound):
        tether.session(s.id)
    s.close()  # again: nothing


def test_close_releases_a_finished_sessions_spill_file() -> None:
    before = _settled_baseline()
    # 2 MiB of output: 1 MiB stays in memory, the rest goes to a spill file
    # (a descriptor), kept until the session is evicted (30 min) — or closed.
    s = tether.start(["head", "-c", str(2 << 20), "/dev/zero"])
    assert s.wait(timeout=30, settled=True).status == "exited"
    assert fd_count() == before + 1
    s.close()
    assert fd_count() == before
    assert s.info().output_bytes == 2 << 20 and s.returncode == 0


def test_async_close_acts_when_called_and_is_awaitable(tag: str) -> None:
    before = _settled_baseline()
    s = _started(tag)  # its loop is gone: close() outside any loop
    closing = s.close(grace=1)
    assert closing.result(timeout=30).state == "killed"
    assert tagged_pids(tag) == [] and fd_count() == before

    async def close_in_a_loop() -> str:
        t = await tether.start_async(["sleep", "1000"], env=tagged_env(tag))
        return (await t.close(grace=1)).state  # type: ignore[no-any-return]

    assert asyncio.run(close_in_a_loop()) == "killed"
    assert tagged_pids(tag) == [] and fd_count() == before


#: Prints a line, then another only once it read a line: what comes before
#: the write cannot be the end of the stream.
STEP = "echo one; read x; echo two:$x; read y; echo three:$y"


def test_iter_output_yields_each_chunk_as_it_comes() -> None:
    s = tether.start(["sh", "-c", STEP], stdin=True)
    chunks = s.iter_output(timeout=30)
    # Incremental: the first line arrives while the command waits for input.
    assert next(chunks) == b"one\n"
    s.write("a\n")
    assert next(chunks) == b"two:a\n"
    s.write("b\n")
    rest = b"".join(chunks)  # to the end of the output
    assert rest == b"three:b\n"
    # (The output's end can come before the keeper's word of the exit.)
    assert s.wait(timeout=30).returncode == 0
    # read_new shares the position: nothing is read twice.
    assert s.read_new() == b""


def test_iter_output_times_out_and_carries_on() -> None:
    s = tether.start(["sh", "-c", STEP], stdin=True)
    chunks = s.iter_output(timeout=0.3)
    assert next(chunks) == b"one\n"
    with pytest.raises(TimeoutError):
        next(chunks)
    s.write("a\nb\n")
    assert b"".join(s.iter_output(timeout=30)) == b"two:a\nthree:b\n"


def test_async_for_over_the_output() -> None:
    async def steps() -> list:
        s = await tether.start_async(["sh", "-c", STEP], stdin=True)
        got = []
        async for chunk in s.iter_output(timeout=30):
            got.append(chunk)
            if chunk == b"one\n":
                await s.write("a\n")
            elif chunk.startswith(b"two"):
                await s.write("b\n")
        return got

    assert b"".join(asyncio.run(steps())) == b"one\ntwo:a\nthree:b\n"


def test_fileno_is_readable_exactly_while_output_waits() -> None:
    import select

    def readable(fd: int, timeout: float = 0) -> bool:
        return bool(select.select([fd], [], [], timeout)[0])

    s = tether.start(["sh", "-c", STEP], stdin=True)
    fd = s.fileno()
    assert fd == s.fileno()  # one per session
    assert readable(fd, 30)  # "one" came
    assert s.read_new() == b"one\n"
    assert not readable(fd)  # read: nothing waits (the command waits for us)
    s.write("a\n")
    assert readable(fd, 30)
    assert s.read_new() == b"two:a\n"
    assert not readable(fd)
    s.write("b\n")
    assert s.wait(timeout=30, settled=True).status == "exited"
    # The end of the output: readable for good, as a pipe at EOF.
    assert readable(fd) and s.read_new() == b"three:b\n"
    assert readable(fd) and s.read_new() == b""


#: Burns CPU and touches 64 MiB in a grandchild, apart from the main
#: process — what the owner's RUSAGE_CHILDREN never sees (the keeper reaps).
HUNGRY = [
    "sh", "-c",
    "python3 -c 'import time; b = bytearray(64 << 20); t = time.process_time()\n"
    "while time.process_time() - t < 0.2: pass' & wait",
]


def _check_usage(usage: object) -> None:
    assert usage is not None
    assert usage.ru_maxrss >= 64 << 10  # type: ignore[attr-defined]  (KiB)
    assert usage.ru_utime + usage.ru_stime >= 0.2  # type: ignore[attr-defined]


def test_rusage_is_the_whole_trees_on_every_result() -> None:
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = tether.run(HUNGRY)
    _check_usage(done.rusage)
    p = tether.Popen(HUNGRY)
    assert p.rusage is None  # not before it ended
    p.wait(timeout=60)
    _check_usage(p.rusage)
    s = tether.start(HUNGRY)
    waited = s.wait(timeout=60, settled=True)
    _check_usage(waited.rusage)
    _check_usage(s.info().rusage)
    # This process's own accounting never saw any of it.
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert after.ru_utime - children.ru_utime < 0.2
