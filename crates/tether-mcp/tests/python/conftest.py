"""Shared helpers: start the server under the official MCP client SDK (or a raw
JSON-RPC pipe for what the SDK cannot send), call tools, and find processes by
the unique tag every test gives the server.

The server command comes from TETHER_MCP_CMD (shell words, e.g.
"/path/to/tether mcp"); the Rust test
crates/tether-cli/tests/mcp_python_client.rs sets it.

Processes are found by the environment variable TETHER_TEST_TAG, which the
server inherits and passes to every command (it is not a credential), so a
test can prove that nothing it started is alive — by tag, never by name.
"""

import atexit
import itertools
import json
import os
import queue
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import asynccontextmanager

import jsonschema
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

TAG_VAR = "TETHER_TEST_TAG"

# Bound for waits that end by an event long before it; reaching it is a failure.
BOUND = 30.0


def server_command() -> list[str]:
    cmd = os.environ.get("TETHER_MCP_CMD")
    if not cmd:
        pytest.fail("TETHER_MCP_CMD is not set (run these tests through `cargo test -p process-tether-cli --test mcp_python_client`)")
    return shlex.split(cmd)


def new_tag(name: str) -> str:
    return f"mcp-{name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


# Each test's servers keep their state (the ledger) in a directory of the
# test's own, under this one, removed when the suite ends. Without it they
# would record into the machine's shared ~/.local/state/tether, where other
# builds leave their ledgers (one at a newer schema makes the server warn;
# `tether ps` and `reap` there see every build's sessions).
_HOMES = tempfile.mkdtemp(prefix="tether-mcp-homes.")
atexit.register(shutil.rmtree, _HOMES, ignore_errors=True)


def tether_home(tag: str) -> str:
    """The private TETHER_HOME of the test carrying `tag` (mode 0700, as the
    ledger requires)."""
    home = os.path.join(_HOMES, tag)
    os.makedirs(home, mode=0o700, exist_ok=True)
    return home


def server_env(tag: str, extra: dict | None = None) -> dict:
    env = {
        TAG_VAR: tag,
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "TETHER_HOME": tether_home(tag),
        "TETHER_LOG": "warn,rmcp=error",
    }
    for var in ("TETHER_KEEPER", "XDG_RUNTIME_DIR"):
        if var in os.environ:
            env[var] = os.environ[var]
    env.update(extra or {})
    return env


@asynccontextmanager
async def connect(tag: str, args: list[str] | None = None, env: dict | None = None, mode: str = "initialize"):
    """An initialized ClientSession to a fresh server carrying `tag`."""
    cmd = server_command()
    params = StdioServerParameters(command=cmd[0], args=cmd[1:] + (args or []), env=server_env(tag, env))
    async with stdio_client(params, errlog=sys.stderr) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=120) as session:
            if mode == "initialize":
                init = await session.initialize()
                assert init.server_info.name == "tether"
            else:
                await session.discover()
            yield session


async def output_schemas(session) -> dict:
    """Each tool's outputSchema, by name (listed once per session)."""
    schemas = getattr(session, "_tether_output_schemas", None)
    if schemas is None:
        tools = (await session.list_tools()).tools
        schemas = {t.name: t.output_schema for t in tools}
        session._tether_output_schemas = schemas
    return schemas


def check_schema(schemas: dict, tool: str, body: dict) -> None:
    """Every result — errors too — validates against the tool's outputSchema
    (issue 16: the TypeScript SDK rejected every error result; the Python SDK
    checks only successful ones, so this suite checks all of them)."""
    jsonschema.validate(body, schemas[tool])


async def call(session, tool: str, args: dict, *, error: bool = False, **kwargs) -> dict:
    """Calls a tool; returns its structured result, checking isError and that
    the result, error or not, validates against the tool's outputSchema."""
    result = await session.call_tool(tool, args, **kwargs)
    assert len(result.content) == 1 and result.content[0].type == "text"
    body = result.structured_content
    assert isinstance(body, dict), result
    assert bool(result.is_error) == error, body
    check_schema(await output_schemas(session), tool, body)
    text = result.content[0].text
    # The text is a short summary for people, not a JSON copy of the result.
    assert not text.lstrip().startswith("{"), text
    if error:
        assert body["error"] in text
    elif "output" in body and body["output"].strip():
        assert body["output"].strip() in text
    return body


def tagged_pids(tag: str) -> list[int]:
    """Live (not zombie) processes whose environment carries TETHER_TEST_TAG=tag."""
    needle = f"{TAG_VAR}={tag}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in (b"Z", b"X"):
            found.append(int(entry))
    return found


def wait_all_dead(tag: str, bound: float = BOUND) -> list[int]:
    """Waits on pidfds (not by sleeping) until no process carries `tag`; returns survivors."""
    deadline = time.monotonic() + bound
    while True:
        alive = tagged_pids(tag)
        left = deadline - time.monotonic()
        if not alive or left <= 0:
            return alive
        poller = select.poll()
        fds = []
        for pid in alive:
            try:
                fd = os.pidfd_open(pid)
            except OSError:
                continue
            fds.append(fd)
            poller.register(fd, select.POLLIN)
        try:
            if fds:
                poller.poll(left * 1000)  # one of them died (or the bound passed): look again
        finally:
            for fd in fds:
                os.close(fd)


def wait_for_count(tag: str, n: int, bound: float = BOUND) -> int:
    """Waits until at least n processes carry `tag`. Process creation raises no
    event visible from outside the tree, so this polls the table every 10 ms —
    only to be sure a fixture is built before the test tries to break it."""
    deadline = time.monotonic() + bound
    while True:
        count = len(tagged_pids(tag))
        if count >= n or time.monotonic() >= deadline:
            return count
        time.sleep(0.01)


def kill_tagged(tag: str) -> None:
    """Clean-up after a failed test: SIGKILL whatever still carries `tag`."""
    for _ in range(50):
        alive = tagged_pids(tag)
        if not alive:
            return
        for pid in alive:
            try:
                fd = os.pidfd_open(pid)
            except OSError:
                continue
            try:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            except OSError:
                pass
            finally:
                os.close(fd)
        wait_all_dead(tag, 1.0)


@pytest.fixture
def tag(request):
    """A unique tag for this test; whatever still carries it at the end is killed."""
    t = new_tag(request.node.name[:40].replace("[", "-").replace("]", ""))
    yield t
    kill_tagged(t)


@pytest.fixture
def anyio_backend():
    return "asyncio"


class RawServer:
    """The server on a plain pipe, for input no SDK would send (and signals)."""

    def __init__(self, tag: str, args: list[str] | None = None, env: dict | None = None, stderr: bool = False):
        """`env`: more variables for the server; `stderr`: keep its log
        lines for `wait_log` (else they go to this process's stderr)."""
        cmd = server_command()
        self.proc = subprocess.Popen(
            cmd + (args or []),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if stderr else sys.stderr,
            env=server_env(tag, env),
        )
        self.ids = itertools.count(1)
        self.buffer = b""
        self.log = queue.Queue()
        if stderr:
            def pump():
                for line in self.proc.stderr:
                    self.log.put(line.decode(errors="replace"))
            threading.Thread(target=pump, daemon=True).start()

    def wait_log(self, needle: str, bound: float = BOUND) -> str:
        """Waits for a log line of the server containing `needle`."""
        deadline = time.monotonic() + bound
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"the server logged no line with {needle!r}")
            try:
                line = self.log.get(timeout=left)
            except queue.Empty:
                continue
            if needle in line:
                return line

    def send_line(self, line: bytes) -> None:
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def send(self, message: dict) -> None:
        self.send_line(json.dumps(message).encode())

    def recv(self, bound: float = BOUND) -> dict:
        deadline = time.monotonic() + bound
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(left, 0))
            if not ready:
                raise TimeoutError("no answer from the server")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise EOFError("the server closed stdout")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def request(self, method: str, params: dict | None = None) -> dict:
        rid = next(self.ids) + 1000
        message = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        answer = self.recv()
        assert answer.get("id") == rid, answer
        return answer

    def initialize(self) -> dict:
        answer = self.request(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer["result"]

    def tool(self, name: str, arguments: dict) -> dict:
        answer = self.request("tools/call", {"name": name, "arguments": arguments})
        body = answer["result"]["structuredContent"]
        if not hasattr(self, "schemas"):
            tools = self.request("tools/list")["result"]["tools"]
            self.schemas = {t["name"]: t["outputSchema"] for t in tools}
        check_schema(self.schemas, name, body)
        return body

    def wait(self, bound: float = BOUND) -> int:
        return self.proc.wait(bound)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is None:
                continue
            try:
                stream.close()
            except OSError:
                pass
