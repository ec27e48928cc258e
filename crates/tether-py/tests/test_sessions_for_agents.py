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
