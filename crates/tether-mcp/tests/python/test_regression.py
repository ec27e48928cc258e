"""Regression tests of issue 16, one per defect, named by what went wrong. Each
failed on the server before its fix (TETHER_MCP_CMD=<old tether-mcp> shows it)."""

import json
import re

import anyio
import pytest
from mcp import MCPError

from conftest import RawServer, call, connect, wait_all_dead, wait_for_count

pytestmark = pytest.mark.anyio

# Lines of words with non-ASCII letters, and every 1000th line one word of 20
# ASCII letters: a Unicode word boundary over this needs the regex crate's slow
# engine (its fast ones give up on non-ASCII text around \b).
SLOW_TEXT = (
    "import sys\n"
    "words = ('überprüfung ärger öl straße ' * 2 + 'übel\\n').encode()\n"
    "block = words * 999 + b'abcdefghijklmnopqrst\\n'\n"
    "for _ in range({blocks}):\n"
    "    sys.stdout.buffer.write(block)\n"
)
SLOW_REGEX = r"\b\w{20}\b"
WORDS_LINE = len(("überprüfung ärger öl straße " * 2 + "übel\n").encode())
BLOCK = 999 * WORDS_LINE + len("abcdefghijklmnopqrst\n")


def line_at(offset: int) -> int:
    """Number of the line of SLOW_TEXT's output that starts at `offset`."""
    blocks, rest = divmod(offset, BLOCK)
    assert rest % WORDS_LINE == 0 or rest == 999 * WORDS_LINE, offset
    return blocks * 1000 + rest // WORDS_LINE + 1


def grep_server(tag: str, seconds: str, stderr: bool = False) -> RawServer:
    # One tokio worker: a scan that ran on the request loop would hold up every
    # other call (on two workers one grep still left room for a `list`; a
    # machine with one core, or two greps, did not).
    env = {"TOKIO_WORKER_THREADS": "1"}
    if stderr:
        env["TETHER_LOG"] = "info,rmcp=error"
    server = RawServer(tag, ["--grep-time-s", seconds], env=env, stderr=stderr)
    server.initialize()
    return server


def slow_output(server: RawServer, blocks: int) -> str:
    """A finished session with `blocks` × 1000 lines of SLOW_TEXT's output."""
    script = SLOW_TEXT.format(blocks=blocks)
    body = server.tool("run", {"argv": ["python3", "-c", script], "yield_s": 50})
    assert body["status"] == "exited" and body["exit_code"] == 0, body
    return body["id"]


def test_a_long_grep_holds_up_no_other_call_and_says_where_it_stopped(tag):
    """Item 3: one `read` with a slow-engine grep over ~250 MB stalled every other
    call (a `list` sent 0.5 s later was answered after 29–42 s), and a grep had no
    bound. Now the list is answered while the grep runs, and the grep returns
    after --grep-time-s with where it stopped and the exact call that goes on."""
    # 5 s: the list must be answered while the grep runs; it takes ms.
    server = grep_server(tag, "5")
    try:
        # ~50 MB: far more than 5 s of searching with the slow engine.
        sid = slow_output(server, 1000)
        server.send({"jsonrpc": "2.0", "id": 500, "method": "tools/call",
                     "params": {"name": "read", "arguments": {"id": sid, "grep": SLOW_REGEX,
                                                              "max_matches": 10000}}})
        server.send({"jsonrpc": "2.0", "id": 501, "method": "tools/call",
                     "params": {"name": "list", "arguments": {}}})
        first, second = server.recv(), server.recv()
        # The order the answers arrive in is the assertion: the list does not
        # wait behind the grep.
        assert (first["id"], second["id"]) == (501, 500), (first["id"], second["id"])
        assert first["result"]["structuredContent"]["sessions"][0]["id"] == sid
        found = second["result"]["structuredContent"]
        assert found["partial"] is True, found
        stopped = found["next_offset"]
        assert 0 < stopped < found["end_offset"], found
        assert f"at offset {stopped} of {found['end_offset']}" in found["note"]
        # The matches so far are every 1000th line, numbered, all listed.
        lines = [m["line"] for m in found["matches"]]
        assert lines == [1000 * (i + 1) for i in range(len(lines))], lines
        assert len(lines) == found["match_count"], found["match_count"]
        # The hint is the exact next call: make it.
        call_text = re.search(r"call read (\{.*\}) \(each call", found["hint"]).group(1)
        args = json.loads(call_text)
        assert args["offset"] == stopped and args["grep"] == SLOW_REGEX, args
        assert args["max_matches"] == 10000, args
        assert args["first_line"] == line_at(stopped), (args, stopped)
        rest = server.tool("read", args)
        assert rest["offset"] == stopped and rest["next_offset"] > stopped, rest
        more = [m["line"] for m in rest["matches"]]
        # Numbering goes on where the first call stopped.
        assert more and more[0] == (lines[-1] if lines else 0) + 1000, (lines[-3:], more[:3])
        assert more == [more[0] + 1000 * i for i in range(len(more))]
    finally:
        server.close()


def test_a_long_wait_until_scan_holds_up_no_other_call(tag):
    """Item 3, the same stall through `wait`: `until` with a slow-engine regex
    from offset 0 searched all the output on the request loop (4 MB held a
    `list` up 4.1 s on one worker) and past the wait's own timeout. The search
    now runs on a blocking thread and ends at the timeout."""
    # One tokio worker, as in grep_server (no grep here, so no --grep-time-s).
    server = RawServer(tag, env={"TOKIO_WORKER_THREADS": "1"})
    try:
        server.initialize()
        sid = slow_output(server, 1000)
        # No 25-letter word: the search goes through everything it can.
        server.send({"jsonrpc": "2.0", "id": 700, "method": "tools/call",
                     "params": {"name": "wait", "arguments": {"id": sid, "until": r"\b\w{25}\b",
                                                              "offset": 0, "timeout_s": 5}}})
        server.send({"jsonrpc": "2.0", "id": 701, "method": "tools/call",
                     "params": {"name": "list", "arguments": {}}})
        first, second = server.recv(), server.recv()
        assert (first["id"], second["id"]) == (701, 700), (first, second)
        waited = second["result"]["structuredContent"]
        assert waited["matched"] is False, waited
    finally:
        server.close()


def test_a_cancelled_grep_stops_searching(tag):
    """Item 3: a grep the client cancels (notifications/cancelled) stops at once
    instead of searching on for its whole time."""
    server = grep_server(tag, "50", stderr=True)
    try:
        sid = slow_output(server, 1000)
        server.send({"jsonrpc": "2.0", "id": 600, "method": "tools/call",
                     "params": {"name": "read", "arguments": {"id": sid, "grep": SLOW_REGEX}}})
        assert server.tool("list", {})["sessions"]  # the grep is under way
        server.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": 600, "reason": "the user pressed stop"}})
        # The search logs where it stopped, and why: the event this waits for
        # (bounded; a search that ignored the cancel would run 50 s).
        line = server.wait_log(f"grep of {sid} stopped at offset", bound=30)
        assert "Cancelled" in line, line
        assert server.tool("run", {"command": "echo ok"})["output"] == "ok\n"
    finally:
        server.close()


async def test_every_error_result_validates_against_the_output_schema(tag, tmp_path):
    """Item 9: error results carried structuredContent that did not match the
    declared outputSchema ({"error": …}, status "failed_start"), so the
    TypeScript SDK threw instead of showing tether's message. `call` validates
    every result against its tool's schema with jsonschema, errors included."""
    async with connect(tag) as s:
        sid = (await call(s, "run", {"command": "exec sleep 1000", "yield_s": 0}))["id"]
        done = (await call(s, "run", {"command": "echo done"}))["id"]
        cases = [
            ("run", {}, "`command` is required"),
            ("run", {"command": "  "}, "is empty"),
            ("run", {"command": "ls", "cwd": str(tmp_path / "missing")}, "failed_start"),
            ("run", {"argv": ["/no/such/program"]}, "failed_start"),
            ("run", {"command": "ls", "yield_s": 51}, "at most 50 s"),
            ("read", {"id": "nosuchsession"}, "no session"),
            ("read", {"id": sid, "grep": "(unclosed"}, "not a valid regex"),
            ("read", {"id": sid, "stream": "stderr"}, "merges stderr"),
            ("read", {"id": sid, "offset": 10**9}, "past the end"),
            ("read", {"id": sid, "first_line": 3}, "give it with grep and offset"),
            ("write", {"id": sid, "data": "x"}, "takes no input"),
            ("write", {"id": done, "data": "x"}, "exited"),
            ("write", {"id": sid, "keys": ["NoSuchKey"]}, "keys"),
            ("wait", {"id": "nosuchsession", "timeout_s": 1}, "no session"),
            ("wait", {"id": sid, "timeout_s": 51}, "call wait"),
            ("kill", {"id": "nosuchsession"}, "no session"),
            ("kill", {"id": sid, "grace_s": 31}, "from 0 to 30"),
            ("list", {"x": 1}, "unknown argument"),
            ("screen", {"id": sid}, "no screen"),
            ("screen", {"id": "nosuchsession"}, "no session"),
        ]
        for tool, args, expected in cases:
            body = await call(s, tool, args, error=True)
            text = json.dumps(body)
            assert expected in text, (tool, args, body)
        failed = await call(s, "run", {"argv": ["/no/such/program"]}, error=True)
        assert failed["status"] == "failed_start" and failed["cwd"] and failed["hint"], failed


def test_a_number_id_of_any_size_gets_its_answer(tag):
    """Item 10: a request with a 30-digit integer id got -32600 with "id": null,
    so the client could not match the answer. Any JSON number is echoed as sent,
    and a cancellation naming it reaches the request."""
    server = RawServer(tag)
    try:
        server.initialize()
        for rid, text in [(123456789012345678901234567890, "123456789012345678901234567890"),
                          (1.5, "1.5"), (-(10**20), "-100000000000000000000")]:
            server.send_line(('{"jsonrpc":"2.0","id":%s,"method":"tools/call",'
                              '"params":{"name":"list","arguments":{}}}' % text).encode())
            answer = server.recv()
            assert answer.get("id") == rid and "result" in answer, answer
        # The raw line carries the digits exactly (no float on the way).
        server.send_line(b'{"jsonrpc":"2.0","id":99999999999999999999999999999,"method":"ping"}')
        answer = server.recv()
        assert answer["id"] == 99999999999999999999999999999, answer
        # A wait in flight under such an id: a second request with the id is a
        # duplicate; after its cancellation the id is free again.
        big = 10**25
        sid = server.tool("run", {"command": "exec sleep 1000", "yield_s": 0})["id"]
        server.send({"jsonrpc": "2.0", "id": big, "method": "tools/call",
                     "params": {"name": "wait", "arguments": {"id": sid, "timeout_s": 50}}})
        server.send({"jsonrpc": "2.0", "id": big, "method": "ping"})
        duplicate = server.recv()
        assert duplicate["id"] == big and "duplicate request id" in duplicate["error"]["message"], duplicate
        server.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": big}})
        server.send({"jsonrpc": "2.0", "id": big, "method": "ping"})
        answer = server.recv()
        assert answer == {"jsonrpc": "2.0", "id": big, "result": {}}, answer
    finally:
        server.close()


async def test_a_tool_prefix_renames_the_tools_and_every_text_that_names_them(tag):
    """Item 11: with a second MCP server in the agent, `run`/`read`/… collide
    (pydantic-ai refused to start); a client-side prefix left tether's hints
    saying `wait {"id": …}`. --tool-prefix renames the tools and every mention."""
    async with connect(tag, args=["--tool-prefix", "tether_"]) as s:
        tools = (await s.list_tools()).tools
        names = {"run", "read", "write", "wait", "kill", "list", "screen"}
        assert {t.name for t in tools} == {f"tether_{n}" for n in names}
        texts = [t.description for t in tools] + [
            p.get("description", "") for t in tools for p in t.input_schema["properties"].values()
        ]
        for text in texts:
            for n in names:
                assert f"`{n}`" not in text and f"`{n} {{" not in text, (n, text)
        assert any("`tether_wait`" in t for t in texts)
        body = await call(s, "tether_run", {"command": "seq 1 100000; exec sleep 1000", "yield_s": 1})
        assert body["status"] == "running"
        assert f'tether_wait {{"id": "{body["id"]}"' in body["hint"], body["hint"]
        assert "call tether_read {" in body["output"], body["output"][:200]
        wait = await call(s, "tether_wait", {"id": body["id"], "timeout_s": 0})
        assert "call tether_wait {" in wait["hint"], wait["hint"]
        error = await call(s, "tether_read", {"id": "nosuchsession"}, error=True)
        assert "tether_run returned (tether_list shows them all" in error["error"], error
        error = await call(s, "tether_wait", {"id": body["id"], "timeout_s": 99}, error=True)
        assert error["error"].startswith("tether_wait: "), error
        with pytest.raises(MCPError, match="tether_run"):
            await s.call_tool("run", {"command": "true"})
        await call(s, "tether_kill", {"id": body["id"]})


async def test_no_single_wait_outlasts_a_clients_request_timeout(tag):
    """Item 12: `wait`'s 300 s ceiling equalled pydantic-ai's read timeout (the
    client timed out first, and the model got a retry prompt instead of the
    result). The longest single call now waits 50 s (under the TypeScript SDK's
    60 s default too); the descriptions say so, and a result that is still
    running names the next call of the loop."""
    async with connect(tag) as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert tools["wait"].input_schema["properties"]["timeout_s"]["maximum"] == 50
        for name in ("run", "write"):
            assert tools[name].input_schema["properties"]["yield_s"]["maximum"] == 50
        assert tools["kill"].input_schema["properties"]["grace_s"]["maximum"] == 30
        for name in ("run", "write", "wait"):
            assert "No call waits longer than 50 s" in tools[name].description, name
        sid = (await call(s, "run", {"command": "exec sleep 1000", "yield_s": 0}))["id"]
        body = await call(s, "wait", {"id": sid, "timeout_s": 0.2, "until": "never"})
        assert body["status"] == "running"
        assert f'call wait {{"id": "{sid}", "timeout_s": 50, "until": "never"}} again' in body["hint"], body
        error = await call(s, "wait", {"id": sid, "timeout_s": 300}, error=True)
        assert "one call waits at most 50 s" in error["error"], error


async def test_descendants_killed_is_exact_for_identical_trees(tag):
    """Item 13: through MCP, three identical 4-process trees reported
    descendants_killed 1, 4 and 3 though all 4 died each time. The count is
    every tree member other than the main process alive when the kill began."""
    async with connect(tag) as s:
        for i in range(5):
            tree_tag = f"{tag}-tree{i}"
            # Main (the shell, exec'd into sleep) and three descendants: one in
            # a session of its own, one ignoring SIGTERM and SIGHUP, one plain.
            script = (
                "setsid sleep 1000 & "
                "(trap '' TERM HUP; exec sleep 1000) & "
                "nohup sleep 1000 >/dev/null 2>&1 & "
                "exec sleep 1000"
            )
            body = await call(s, "run", {"command": script, "env": {"TETHER_TEST_TAG": tree_tag}, "yield_s": 0})
            assert await anyio.to_thread.run_sync(wait_for_count, tree_tag, 4) == 4
            killed = await call(s, "kill", {"id": body["id"], "grace_s": 0.5})
            assert killed["status"] == "killed", killed
            assert killed["descendants_killed"] == 3, (i, killed)
            assert await anyio.to_thread.run_sync(wait_all_dead, tree_tag) == []
