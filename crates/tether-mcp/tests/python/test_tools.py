"""The tools, driven by the official MCP client SDK as an agent would."""

import json
import re

import anyio
import jsonschema
import pytest

from conftest import BOUND, call, connect, tagged_pids, wait_for_count

pytestmark = pytest.mark.anyio

TOOLS = {"run", "read", "write", "wait", "kill", "list", "screen"}

# setsid children and a double-forked setsid orphan (tether-testkit's Tree::SetsidDoubleFork).
SETSID_TREE = (
    "setsid sh -c 'sleep 1000 & exec sleep 1000' & "
    "(setsid sh -c 'sleep 1000 &' &); "
    "echo ready; exec sleep 1000"
)


async def expect(s, prior: dict, pattern: str) -> str:
    """Output matching `pattern`: already shown by the call that returned `prior`
    (every result shows the output that arrived in time), or waited for with
    `wait … until`, which looks only at output not shown yet."""
    if re.search(pattern, prior["output"], re.M):
        return prior["output"]
    body = await call(s, "wait", {"id": prior["id"], "timeout_s": BOUND, "until": pattern})
    assert body["matched"] is True, body
    assert re.search(pattern, body["match"]["text"])
    return body["output"]


@pytest.mark.parametrize("mode", ["initialize", "discover"])
async def test_tools_list_has_valid_schemas(tag, mode):
    async with connect(tag, mode=mode) as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert set(tools) == TOOLS
        for tool in tools.values():
            jsonschema.Draft202012Validator.check_schema(tool.input_schema)
            assert tool.input_schema["type"] == "object"
            assert len(tool.description) > 80, tool.name  # written for a model
        assert tools["wait"].input_schema["required"] == ["id", "timeout_s"]
        body = await call(s, "run", {"command": "echo hi"})
        assert body["output"] == "hi\n"


async def test_finishing_run_returns_everything_at_once(tag):
    async with connect(tag) as s:
        # yield_s 50 (the most): status exited proves the call returned at the exit.
        body = await call(s, "run", {"command": "echo hello; echo oops >&2; exit 3", "yield_s": 50})
        assert body["status"] == "exited"
        assert body["exit_code"] == 3 and body["signal"] is None
        assert body["output"] == "hello\noops\n"
        assert body["next_offset"] == 11
        assert body["truncated_bytes"] == 0
        assert body["descendants_alive"] == []
        assert isinstance(body["duration_ms"], int)
        assert len(body["id"]) >= 4

        body = await call(s, "run", {"argv": ["printf", "%s|", "a b", "c"]})
        assert body["output"] == "a b|c|"

        # A signal is named; a SIGKILL nobody sent suggests the OOM killer.
        body = await call(s, "run", {"command": "kill -9 $$"})
        assert body["status"] == "exited" and body["signal"] == "SIGKILL"
        assert "OOM" in body["note"]

        # The hard timeout kills the tree and says so.
        body = await call(s, "run", {"command": "sleep 1000", "timeout_s": 0.3})
        assert body["status"] == "timed_out"
        assert "timeout_s" in body["note"]

        # Output is cleaned for the model: colours, progress, invalid UTF-8.
        body = await call(
            s,
            "run",
            {"command": r"printf '\033[1;31mred\033[0m\n10%%\r50%%\r100%%\n\377ok\n'"},
        )
        assert body["output"] == "red\n100%\n\ufffdok\n"

        body = await call(s, "run", {"command": "pwd", "cwd": "/tmp"})
        assert body["output"] == "/tmp\n"
        body = await call(s, "run", {"command": "echo $FOO", "env": {"FOO": "bar"}})
        assert body["output"] == "bar\n"
        body = await call(s, "run", {"command": "wc -c", "stdin": "12345"})
        assert body["output"].strip() == "5"


async def test_long_output_shows_head_and_tail_and_the_read_call(tag):
    async with connect(tag) as s:
        body = await call(s, "run", {"command": "seq 1 100000"})
        assert body["status"] == "exited"
        out = body["output"]
        assert out.startswith("1\n2\n3\n") and out.endswith("99999\n100000\n")
        assert len(out.encode()) < 16 * 1024 + 300
        assert body["truncated_bytes"] > 500_000
        marker = next(line for line in out.splitlines() if "bytes omitted" in line)
        # The marker names the exact read call; it returns exactly the omitted bytes' start.
        call_text = marker.split("call read ", 1)[1].split("}", 1)[0] + "}"
        args = json.loads(call_text)
        assert args["id"] == body["id"]
        # Pages of the output budget (16 KiB): what one result may show.
        assert args["max_bytes"] == 16384
        page = await call(s, "read", args)
        head_end = out.split("[…", 1)[0]
        assert page["offset"] == len(head_end.encode())
        assert page["output"].split("\n", 1)[0].isdigit()
        assert len(page["output"]) == args["max_bytes"]


async def test_yielding_run_then_read_offsets_wait_until_and_wait_to_exit(tag):
    script = 'printf "one\\ntwo\\n"; read a; echo "ready $a"; read b; echo "bye $b"'
    async with connect(tag) as s:
        # Blocked on `read a`: the 0.3 s yield passes with no event to wait for.
        body = await call(s, "run", {"command": script, "keep_stdin_open": True, "yield_s": 0.3})
        sid = body["id"]
        assert body["status"] == "running" and body["exit_code"] is None
        assert body["output"] == "one\ntwo\n" and body["next_offset"] == 8
        assert body["stdin_open"] is True

        page = await call(s, "read", {"id": sid, "offset": 4})
        assert (page["output"], page["offset"], page["next_offset"]) == ("two\n", 4, 8)
        page = await call(s, "read", {"id": sid, "offset": 0, "max_bytes": 4})
        assert (page["output"], page["next_offset"]) == ("one\n", 4)
        page = await call(s, "read", {"id": sid})  # continues where the last read ended
        assert (page["output"], page["next_offset"], page["eof"]) == ("two\n", 8, False)
        page = await call(s, "read", {"id": sid[:6]})  # a prefix names it too
        assert (page["output"], page["next_offset"]) == ("", 8)

        # A wait that times out is not an error (nothing arrives in 0.2 s: it is blocked on stdin).
        body = await call(s, "wait", {"id": sid, "timeout_s": 0.2, "until": "ready"})
        assert body["status"] == "running" and body["matched"] is False

        wrote = await call(s, "write", {"id": sid, "data": "A", "submit": True, "yield_s": 0})
        # `until` looks at output not yet *matched*: "ready A" matches even if the
        # write's result already showed it; once matched, it is not matched again.
        body = await call(s, "wait", {"id": sid, "timeout_s": BOUND, "until": "^ready"})
        assert body["matched"] is True and body["match"]["text"] == "ready", body
        assert wrote["output"] + body["output"] == "ready A\n"
        body = await call(s, "wait", {"id": sid, "timeout_s": 0.2, "until": "ready"})
        assert body["matched"] is False  # blocked on stdin: nothing arrives in 0.2 s
        assert body["earlier_match"]["start"] == 8, body  # ...and where it matched before

        wrote = await call(s, "write", {"id": sid, "data": "B", "submit": True, "yield_s": 0})
        body = await call(s, "wait", {"id": sid, "timeout_s": BOUND})
        assert body["status"] == "exited" and body["exit_code"] == 0
        # Each output shown once: in the write's result if it came in time, else here.
        assert wrote["output"] + body["output"] == "bye B\n"
        page = await call(s, "read", {"id": sid, "offset": 0})
        assert page["output"] == "one\ntwo\nready A\nbye B\n"


async def test_write_to_interactive_cat(tag):
    async with connect(tag) as s:
        body = await call(s, "run", {"command": "cat", "keep_stdin_open": True, "yield_s": 0})
        sid = body["id"]
        assert body["status"] == "running"
        wrote = await call(s, "write", {"id": sid, "data": "hello", "submit": True, "yield_s": 0})
        assert await expect(s, wrote, "hello") == "hello\n"
        # eof closes stdin: cat exits, and write returns at the exit (not at
        # yield_s: the status is exited). quiet_s 0: the quiet rule would
        # return 0.2 s after "last", before cat's exit on a loaded machine.
        body = await call(s, "write", {"id": sid, "data": "last", "eof": True, "quiet_s": 0, "yield_s": 50})
        assert body["status"] == "exited" and body["exit_code"] == 0
        assert body["output"] == "last"
        body = await call(s, "write", {"id": sid, "data": "more"}, error=True)
        assert "exited" in body["error"]


async def test_write_to_python_repl(tag):
    async with connect(tag) as s:
        body = await call(s, "run", {"command": "python3 -i -q", "keep_stdin_open": True, "yield_s": 0})
        sid = body["id"]
        await expect(s, body, ">>> ")
        wrote = await call(s, "write", {"id": sid, "data": "6 * 7", "submit": True, "yield_s": 0})
        assert "42" in await expect(s, wrote, "42")
        await call(s, "write", {"id": sid, "data": "import sys; sys.exit(5)", "submit": True, "yield_s": 0})
        body = await call(s, "wait", {"id": sid, "timeout_s": BOUND})
        assert body["status"] == "exited" and body["exit_code"] == 5


async def test_kill_ends_a_tree_with_setsid_escapes(tag):
    session_tag = tag + "-tree"
    async with connect(tag) as s:
        body = await call(
            s, "run", {"command": SETSID_TREE, "env": {"TETHER_TEST_TAG": session_tag}, "yield_s": 0}
        )
        sid = body["id"]
        await expect(s, body, "ready")
        assert wait_for_count(session_tag, 4) >= 4
        body = await call(s, "kill", {"id": sid, "grace_s": 1})
        assert body["status"] == "killed"
        assert body["descendants_killed"] >= 3
        assert body["descendants_alive"] == []
        # Verified before kill returned: nothing of the tree is alive now.
        assert tagged_pids(session_tag) == []
        body = await call(s, "kill", {"id": sid})
        assert body["already_exited"] is True


async def test_background_ampersand_returns_at_once_and_reports_the_descendant(tag):
    async with connect(tag) as s:
        # Returns at the shell's exit although the server keeps running (not at
        # yield_s: the status is exited).
        body = await call(
            s, "run", {"command": "python3 -m http.server 0 >/dev/null 2>&1 & echo started", "yield_s": 50}
        )
        assert body["status"] == "exited" and body["exit_code"] == 0
        assert body["output"] == "started\n"
        # Named by its command line ("[comm]" if caught inside execve).
        assert any(
            "http.server" in d["command"] or d["command"].startswith("[") for d in body["descendants_alive"]
        ), body
        assert "descendants_alive" in body["hint"]
        sid = body["id"]

        body = await call(s, "run", {"command": "nohup sleep 1000 >/dev/null 2>&1 &"})
        assert body["status"] == "exited"
        # `nohup sleep 1000`, or `[nohup]` if caught inside its execve of sleep.
        assert any("sleep" in d["command"] or "nohup" in d["command"] for d in body["descendants_alive"]), body

        listed = {x["id"]: x for x in (await call(s, "list", {}))["sessions"]}
        assert listed[sid]["descendants_alive"] >= 1
        body = await call(s, "kill", {"id": sid})
        assert body["already_exited"] is True and body["descendants_killed"] >= 1
        assert body["descendants_alive"] == []


async def test_list_shows_every_session(tag):
    async with connect(tag) as s:
        assert (await call(s, "list", {}))["sessions"] == []
        done = await call(s, "run", {"command": "echo done"})
        running = await call(s, "run", {"command": "exec sleep 1000", "yield_s": 0})
        sessions = (await call(s, "list", {}))["sessions"]
        assert [x["id"] for x in sessions] == [done["id"], running["id"]]
        by_id = {x["id"]: x for x in sessions}
        assert by_id[done["id"]]["status"] == "exited"
        assert by_id[done["id"]]["exit_code"] == 0
        assert by_id[done["id"]]["unread_bytes"] == 0
        assert by_id[running["id"]]["status"] == "running"
        assert by_id[running["id"]]["command"] == "exec sleep 1000"


async def test_calls_run_concurrently_so_a_long_wait_never_blocks(tag):
    async with connect(tag) as s:
        body = await call(s, "run", {"command": "exec sleep 1000", "yield_s": 0})
        sid = body["id"]
        order = []

        async def long_wait():
            await call(s, "wait", {"id": sid, "timeout_s": 50})
            order.append("wait")

        async with anyio.create_task_group() as tg:
            tg.start_soon(long_wait)
            # Only the kill below ends the wait: were these calls queued behind
            # it, nothing would ever answer them.
            await call(s, "list", {})
            await call(s, "run", {"command": "echo quick"})
            order.append("others")
            # Ends the long wait by ending the command.
            await call(s, "kill", {"id": sid})
        assert order == ["others", "wait"]


async def test_disconnect_kills_everything_the_server_started(tag):
    async with connect(tag) as s:
        for script in (
            SETSID_TREE,
            "nohup sleep 1000 >/dev/null 2>&1 & nohup sh -c 'sleep 1000' >/dev/null 2>&1 & echo ready; exec sleep 1000",
            "trap '' TERM HUP INT; sh -c 'while :; do sleep 1; done' & setsid sleep 1000 & echo ready; while :; do sleep 1; done",
            "python3 -m http.server 0 >/dev/null 2>&1 & echo ready",
        ):
            body = await call(s, "run", {"command": script, "yield_s": 0})
            await expect(s, body, "ready")
        assert wait_for_count(tag, 12) >= 12
    # Leaving the block closed the server's stdin and waited for it to exit (that it
    # exits on EOF by itself, with no signal, is test_lifecycle's eof case). It exits
    # only after verifying every tree empty: nothing carrying the server's tag (the
    # server, its keepers, every command) is alive the moment it is gone.
    assert tagged_pids(tag) == []
