"""The asyncio forms: awaited waits, and cancellation (asyncio.wait_for)
that stops the waiting, never the session."""

from __future__ import annotations

import asyncio

import tether
from conftest import tagged_env, tagged_pids, threads


def test_wait_for_cancellation_leaves_the_session_running_and_usable(tag: str) -> None:
    before = threads()

    async def scenario() -> None:
        s = await tether.start_async(["sh", "-c", "echo up; read line; echo got:$line; sleep 1000"],
                                     stdin=True, env=tagged_env(tag))
        assert (await s.wait(until="up", timeout=30)).matched
        for _ in range(3):
            try:
                await asyncio.wait_for(s.wait(until="never", timeout=30), 0.2)
            except asyncio.TimeoutError:
                pass
            else:
                raise AssertionError("the wait should have been cancelled")
        assert s.poll() is None
        await s.write("x\n")
        got = await s.wait(until=r"got:\w", timeout=30)
        assert got.match is not None and got.match.text == b"got:x"
        # Concurrent waits on one session.
        waits = [asyncio.ensure_future(s.wait(until="never", timeout=0.3)) for _ in range(5)]
        assert [w.status for w in await asyncio.gather(*waits)] == ["running"] * 5
        killed = await s.kill()
        assert killed.state == "killed"

    asyncio.run(scenario())
    assert tagged_pids(tag) == []
    assert threads() == before


def test_a_cancelled_task_does_not_leak_the_runtime() -> None:
    async def scenario() -> None:
        s = await tether.start_async(["sleep", "1000"])
        task = asyncio.ensure_future(s.wait(timeout=1000))
        await asyncio.sleep(0)  # let the wait begin
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        await s.kill()

    asyncio.run(scenario())
    assert threads() == 1
