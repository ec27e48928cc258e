"""Background sessions: offsets, lossless output, wait, write, PTY, kill."""

from __future__ import annotations

import pytest

import tether
from conftest import ESCAPING_TREE, ESCAPING_TREE_MIN, tagged_env, tagged_pids, threads, wait_for_count


def test_output_is_lossless_with_offsets_past_the_memory_ring(tag: str) -> None:
    # 3 MiB through a 1 MiB ring: 2 MiB go to the spill file, and a read
    # from 0 still gets every byte, in order.
    lines = 3 * 1024 * 1024 // 16
    script = f"i=0; while [ $i -lt {lines} ]; do printf '%015d\\n' $i; i=$((i+1)); done"
    s = tether.start(["sh", "-c", script], env=tagged_env(tag))
    assert s.wait(timeout=120, settled=True).status == "exited"
    data = bytearray()
    offset = 0
    while True:
        chunk = s.read(offset, 256 * 1024)
        assert chunk.offset == offset and chunk.dropped == 0
        data += chunk.data
        offset = chunk.next_offset
        if chunk.eof:
            break
    assert offset == chunk.end_offset == lines * 16
    assert bytes(data) == b"".join(b"%015d\n" % i for i in range(lines))
    # A read from the middle starts exactly there.
    middle = s.read(16 * 1000, 16)
    assert (middle.offset, middle.data) == (16 * 1000, b"%015d\n" % 1000)


def test_wait_until_write_and_matches_like_the_mcp_server() -> None:
    s = tether.start(["sh", "-c", "echo ready; while read l; do echo got:$l; done"], stdin=True)
    first = s.wait(until="ready", timeout=30)
    assert first.status == "matched" and first.match is not None and first.match.text == b"ready"
    s.write("one\n")
    got = s.wait(until=r"got:\w+", timeout=30)
    assert got.match is not None and got.match.text == b"got:one"
    # The next wait looks after the last match: the old line does not match again.
    again = s.wait(until=r"got:\w+", timeout=0.2)
    assert again.status == "running" and not again.matched
    s.close_stdin()
    ended = s.wait(timeout=30)
    assert ended.status == "exited" and ended.returncode == 0
    assert s.read_new() == b"ready\ngot:one\n"


def test_kill_ends_the_tree_and_reports(tag: str) -> None:
    s = tether.start(ESCAPING_TREE, shell=True, env=tagged_env(tag))
    assert s.wait(until="ready", timeout=30).matched
    assert wait_for_count(tag, ESCAPING_TREE_MIN, 10) >= ESCAPING_TREE_MIN
    killed = s.kill(grace=1)
    assert killed.state == "killed" and killed.descendants_killed >= ESCAPING_TREE_MIN - 1
    assert tagged_pids(tag) == []
    assert s.info().settled


def test_pty_session_keys_and_screen() -> None:
    s = tether.start(["sh"], pty=(24, 80), env={"PS1": "$ ", "PATH": "/usr/bin:/bin", "TERM": "xterm"})
    assert s.wait(until=r"\$ ", timeout=30).matched
    s.write("echo hel''lo\n")
    assert s.wait(until="hello", timeout=30).matched
    s.send_keys("C-d")
    assert s.wait(timeout=30).status == "exited"
    screen = s.screen()
    assert (screen.rows, screen.cols) == (24, 80)
    assert "hello" in screen.text


def test_sessions_are_listed_and_found_by_prefix() -> None:
    s = tether.start(["sleep", "1000"], purpose="listing")
    try:
        assert any(i.id == s.id and i.state == "running" for i in tether.sessions())
        assert tether.session(s.id[:6]).pid == s.pid
        with pytest.raises(tether.SessionNotFound):
            tether.session("zzzzzzzz")
    finally:
        s.kill()


def test_no_thread_of_ours_once_no_session_is_live() -> None:
    before = threads()
    s = tether.start(["sh", "-c", "echo hi"])
    s.wait(settled=True, timeout=30)
    assert threads() == before
    tether.run(["true"])
    assert threads() == before
    with tether.start(["sleep", "1000"]) as live:
        assert live.poll() is None
        assert threads() > before  # the engine runs while a session is live
    assert threads() == before
