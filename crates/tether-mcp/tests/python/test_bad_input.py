"""Bad input: each case gets a JSON-RPC or tool error that says what to send
instead, and the very next call on the same connection succeeds, with no
session lost."""

import json

import pytest
from mcp import MCPError

from conftest import RawServer, call, connect

pytestmark = pytest.mark.anyio


async def still_serving(s, sid: str) -> None:
    """A successful call, and the session started before the bad input is intact."""
    body = await call(s, "run", {"command": "echo ok"})
    assert body["output"] == "ok\n"
    listed = [x["id"] for x in (await call(s, "list", {}))["sessions"]]
    assert sid in listed


@pytest.mark.parametrize(
    "tool, args, expected",
    [
        ("run", {}, "`command` is required"),
        ("run", {"command": 5}, "`command` must be a string, got 5"),
        ("run", {"argv": "ls -l"}, "`argv` must be an array of strings"),
        ("run", {"command": "ls", "argv": ["ls"]}, "not both"),
        ("run", {"command": "ls", "timeout_s": 0}, "`timeout_s` must be a number of seconds above 0"),
        ("run", {"command": "ls", "timeout_s": 100000}, "at most 86400"),
        ("run", {"command": "ls", "yield_s": 51}, "`yield_s` must be a number of seconds from 0 to 50"),
        ("run", {"command": "ls", "yield_s": "soon"}, "`yield_s` must be a number"),
        ("run", {"command": "ls", "keep_stdin_open": "yes"}, "true or false"),
        ("run", {"command": "ls", "env": {"A=B": "x"}}, "not a variable name"),
        ("run", {"command": "ls", "cmd": "x"}, "unknown argument `cmd`"),
        ("read", {}, "`id` is required"),
        ("read", {"id": "nosuchsession"}, "no session \"nosuchsession\""),
        ("read", {"id": "ab"}, "too short"),
        ("read", {"id": "SID", "offset": -5}, "`offset` must be a byte offset"),
        ("read", {"id": "SID", "offset": 10**9}, "past the end of the output"),
        ("read", {"id": "SID", "max_bytes": 0}, "`max_bytes` must be an integer from 1"),
        ("write", {"id": "SID"}, "`data` is required"),
        ("write", {"id": "SID", "data": "x"}, "takes no input"),
        ("wait", {"id": "SID"}, "`timeout_s` is required"),
        ("wait", {"id": "SID", "timeout_s": -1}, "`timeout_s` must be a number of seconds from 0 to 50"),
        ("wait", {"id": "SID", "timeout_s": 1, "until": "(unclosed"}, "not a valid regex"),
        ("kill", {"id": "SID", "grace_s": 1000}, "`grace_s` must be a number of seconds from 0 to 30"),
        ("kill", {"id": 12345678}, "no session \"12345678\""),
        ("list", {"all": True}, "unknown argument `all`"),
    ],
)
async def test_bad_arguments_get_a_tool_error_then_the_next_call_works(tag, tool, args, expected):
    async with connect(tag) as s:
        sid = (await call(s, "run", {"command": "exec sleep 1000", "yield_s": 0}))["id"]
        args = {k: (sid if v == "SID" else v) for k, v in args.items()}
        body = await call(s, tool, args, error=True)
        assert expected in body["error"], body
        await still_serving(s, sid)


async def test_unknown_tool_is_a_protocol_error_naming_the_tools(tag):
    async with connect(tag) as s:
        sid = (await call(s, "run", {"command": "exec sleep 1000", "yield_s": 0}))["id"]
        with pytest.raises(MCPError) as err:
            await s.call_tool("terminal", {"command": "ls"})
        assert err.value.code == -32602
        assert "run, read, write, wait, kill, list" in err.value.message
        await still_serving(s, sid)


async def test_failed_start_says_what_was_wrong(tag):
    async with connect(tag) as s:
        sid = (await call(s, "run", {"command": "exec sleep 1000", "yield_s": 0}))["id"]
        body = await call(s, "run", {"argv": ["no-such-program-xyz"]}, error=True)
        assert body["status"] == "failed_start" and "no-such-program-xyz" in body["error"]
        body = await call(s, "run", {"command": "ls", "cwd": "/no/such/dir"}, error=True)
        assert body["status"] == "failed_start" and "/no/such/dir" in body["error"]
        # Through the shell, a missing program is exit 127, explained.
        body = await call(s, "run", {"command": "no-such-program-xyz"})
        assert body["exit_code"] == 127 and "not found" in body["note"]
        await still_serving(s, sid)


async def test_ten_megabyte_arguments(tag):
    ten_mb = "x" * (10 * 1024 * 1024)
    async with connect(tag) as s:
        sid = (await call(s, "run", {"command": "exec sleep 1000", "yield_s": 0}))["id"]
        # As stdin: works (written while the command reads it).
        body = await call(s, "run", {"command": "wc -c", "stdin": ten_mb, "yield_s": 50})
        assert body["status"] == "exited" and body["output"].strip() == str(len(ten_mb))
        # As one exec argument: more than Linux takes; told to use stdin instead.
        body = await call(s, "run", {"command": ten_mb}, error=True)
        assert "stdin" in body["error"]
        # As data for a command that is not reading: the call returns; the rest
        # is written in the background.
        body = await call(s, "run", {"command": "exec sleep 1000", "keep_stdin_open": True, "yield_s": 0})
        body = await call(s, "write", {"id": body["id"], "data": ten_mb, "yield_s": 0.5})
        assert "written in the background" in body["stdin_error"]
        await still_serving(s, sid)


def test_malformed_json_rpc_gets_errors_and_the_connection_keeps_serving(tag):
    server = RawServer(tag, ["--max-request-bytes", str(1 << 20)])
    try:
        server.initialize()
        sid = server.tool("run", {"command": "exec sleep 1000", "yield_s": 0})["id"]

        def ok():
            assert server.tool("run", {"command": "echo ok"})["output"] == "ok\n"
            assert sid in [x["id"] for x in server.tool("list", {})["sessions"]]

        server.send_line(b"this is not json")
        answer = server.recv()
        assert answer["error"]["code"] == -32700 and "one JSON-RPC 2.0 message per line" in answer["error"]["message"]
        ok()

        server.send_line(b'{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "run", "arguments"')
        assert server.recv()["error"]["code"] == -32700
        ok()

        server.send_line(b"[1, 2, 3]")
        assert "batches" in server.recv()["error"]["message"]
        ok()

        server.send({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "run", "arguments": "ls"}})
        answer = server.recv()
        assert answer["id"] == 6 and answer["error"]["code"] == -32602
        assert "arguments is an object" in answer["error"]["message"]
        ok()

        server.send({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"arguments": {}}})
        answer = server.recv()
        assert answer["id"] == 7 and answer["error"]["code"] == -32602 and "name" in answer["error"]["message"]
        ok()

        server.send({"jsonrpc": "2.0", "id": 8, "method": "no/such/method"})
        answer = server.recv()
        assert answer["id"] == 8 and answer["error"]["code"] == -32601
        ok()

        # Over the request cap (1 MiB here): an error naming the limit, with the id.
        line = json.dumps(
            {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "run", "arguments": {"command": "x" * (2 << 20)}}}
        ).encode()
        server.send_line(line)
        answer = server.recv()
        assert answer["id"] == 9 and "request too large" in answer["error"]["message"], answer
        ok()
    finally:
        server.close()


def test_json_rpc_errors_carry_an_id_or_null(tag):
    """Issue 8 (item 9): errors without an `id` member left the client's call
    hanging; lone surrogates and huge numbers were refused as parse errors; object
    ids and duplicate in-flight ids got no answer."""
    server = RawServer(tag)
    try:
        server.initialize()

        # A lone surrogate escape (json.dumps of a non-UTF-8 file name) is replaced.
        server.send_line(
            b'{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"run",'
            b'"arguments":{"command":"printf %s \\"x\\ud800y\\""}}}'
        )
        answer = server.recv()
        assert answer["id"] == 21 and "result" in answer, answer
        assert answer["result"]["structuredContent"]["output"] == "x\ufffdy"

        # 1e309 is a number: out of range for timeout_s, said by the tool, to id 22.
        server.send_line(
            b'{"jsonrpc":"2.0","id":22,"method":"tools/call","params":{"name":"run",'
            b'"arguments":{"command":"true","timeout_s":1e309}}}'
        )
        answer = server.recv()
        assert answer["id"] == 22 and answer["result"]["isError"] is True, answer
        assert "timeout_s" in answer["result"]["structuredContent"]["error"]

        # Nesting deeper than 128: an error, to the id when it can be found...
        deep = "[" * 200 + "]" * 200
        server.send_line(
            ('{"jsonrpc":"2.0","id":23,"method":"tools/call","params":{"name":"run","arguments":'
             '{"command":"true","env":' + deep + "}}}").encode()
        )
        answer = server.recv()
        assert answer["id"] == 23 and answer["error"]["code"] == -32600, answer
        assert "nested" in answer["error"]["message"]
        # ...and with "id": null when it cannot.
        server.send_line(deep.encode())
        answer = server.recv()
        assert "id" in answer and answer["id"] is None, answer

        # A parse error names no id: "id": null, not a missing member.
        server.send_line(b"not json")
        answer = server.recv()
        assert answer["error"]["code"] == -32700 and "id" in answer and answer["id"] is None

        # An object id is an Invalid Request, answered with "id": null.
        server.send({"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"})
        answer = server.recv()
        assert answer["error"]["code"] == -32600 and answer["id"] is None, answer
        assert "string or an integer" in answer["error"]["message"]

        # Two requests in flight with one id: the second gets an error at once,
        # the first its answer.
        sid = server.tool("run", {"command": "exec sleep 1000", "yield_s": 0})["id"]
        wait = {"jsonrpc": "2.0", "id": 77, "method": "tools/call",
                "params": {"name": "wait", "arguments": {"id": sid, "timeout_s": 2}}}
        server.send(wait)
        server.send({"jsonrpc": "2.0", "id": 77, "method": "tools/list"})
        first = server.recv()
        assert first["id"] == 77 and first["error"]["code"] == -32600, first
        assert "duplicate request id" in first["error"]["message"]
        second = server.recv()
        assert second["id"] == 77 and second["result"]["structuredContent"]["status"] == "running"
        assert server.tool("run", {"command": "echo ok"})["output"] == "ok\n"
    finally:
        server.close()


def status_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def test_pipelined_requests_are_bounded_and_memory_comes_back(tag):
    """Issue 8 (Also): 20,000 pipelined `list` calls with 60 live sessions peaked
    at 1.18 GB and 500 MB stayed resident (2.1 GB / 1.5 GB here before the fix).
    5,000 calls keep the test short (the benchmark runs 20,000); the bounds are
    generous, and the unbounded server exceeds them several times over."""
    server = RawServer(tag)
    try:
        server.initialize()
        for _ in range(60):
            server.tool("run", {"command": "exec sleep 1000", "yield_s": 0})
        base = status_kib(server.proc.pid, "VmRSS")
        calls = 5_000
        line = b"".join(
            b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"list","arguments":{}}}\n' % (10_000 + i)
            for i in range(calls)
        )
        import threading

        writer = threading.Thread(target=lambda: (server.proc.stdin.write(line), server.proc.stdin.flush()))
        writer.start()
        seen = set()
        while len(seen) < calls:
            answer = server.recv(60)
            assert "result" in answer, answer
            seen.add(answer["id"])
        writer.join()
        peak = status_kib(server.proc.pid, "VmHWM")
        # Memory is given back at the end of the burst (by a task of its own):
        # ask once more so it has certainly run, then read what stays.
        assert server.tool("list", {})["sessions"]
        after = status_kib(server.proc.pid, "VmRSS")
        print(f"RSS before {base} KiB, peak {peak} KiB, after {after} KiB")
        assert peak < 120 * 1024, f"peak RSS {peak} KiB"
        assert after < base + 50 * 1024, f"RSS after {after} KiB (before {base} KiB)"
    finally:
        server.close()
