"""The `tether` the wheel puts on the environment's PATH is the real
executable, and serves MCP with no Python in between."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path


def test_tether_on_the_venv_path_answers_mcp_tools_list(tmp_path: Path) -> None:
    exe = os.path.join(sysconfig.get_path("scripts"), "tether")
    assert os.path.isfile(exe), exe
    with open(exe, "rb") as f:
        assert f.read(4) == b"\x7fELF"  # the binary itself, not a Python shim
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "tether-py-test", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    # A ledger of its own: not the machine's shared ~/.local/state/tether,
    # which other builds write (one at a newer schema makes the server warn).
    env = dict(os.environ, TETHER_HOME=str(tmp_path))
    server = subprocess.Popen([exe, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    assert server.stdin is not None and server.stdout is not None
    for request in requests:
        server.stdin.write(json.dumps(request) + "\n")
    server.stdin.flush()
    replies = {}
    while 2 not in replies:
        line = server.stdout.readline()
        assert line, "the server closed its output"
        message = json.loads(line)
        if "id" in message:
            replies[message["id"]] = message
    server.stdin.close()  # stdin EOF: the server exits
    assert server.wait(timeout=30) == 0
    names = {tool["name"] for tool in replies[2]["result"]["tools"]}
    assert {"run", "read", "write", "wait", "kill", "list"} <= names, names
    # `python -m tether` reaches the same executable.
    version = subprocess.run([sys.executable, "-m", "tether", "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith("tether ")
