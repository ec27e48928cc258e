"""How the server ends: on stdin EOF, a broken stdout, SIGTERM, SIGINT or
SIGHUP it kills every session's tree and verifies it empty before it exits;
SIGKILLed, its keepers kill everything."""

import os
import signal

import pytest

from conftest import RawServer, tagged_pids, wait_all_dead, wait_for_count

TREES = [
    # setsid + double fork
    "setsid sh -c 'sleep 1000 & exec sleep 1000' & (setsid sh -c 'sleep 1000 &' &); echo ready; exec sleep 1000",
    # ignores TERM, HUP and INT
    "trap '' TERM HUP INT; sh -c 'trap \"\" TERM; while :; do sleep 1; done' & echo ready; while :; do sleep 1; done",
    # left behind by a command that exited
    "nohup sleep 1000 >/dev/null 2>&1 & echo ready",
]


def start_trees(server: RawServer, tag: str) -> None:
    server.initialize()
    for script in TREES:
        body = server.tool("run", {"command": script, "yield_s": 0})
        if "ready" not in body["output"]:
            body = server.tool("wait", {"id": body["id"], "timeout_s": 30, "until": "ready"})
            assert body["matched"], body
    assert wait_for_count(tag, 8) >= 8


@pytest.mark.parametrize("how", ["eof", "SIGTERM", "SIGINT", "SIGHUP"])
def test_server_kills_everything_before_it_exits(tag, how):
    server = RawServer(tag)
    try:
        start_trees(server, tag)
        if how == "eof":
            server.proc.stdin.close()
        else:
            os.kill(server.proc.pid, getattr(signal, how))
        code = server.wait()
        expected = 0 if how == "eof" else 128 + getattr(signal, how)
        assert code == expected
        # Verified before the exit: nothing is left the moment it is gone.
        assert tagged_pids(tag) == []
    finally:
        server.close()


def test_server_exits_when_its_stdout_breaks(tag):
    server = RawServer(tag)
    try:
        start_trees(server, tag)
        server.proc.stdout.close()  # nobody reads the answers any more
        server.send({"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {"name": "list", "arguments": {}}})
        assert server.wait() == 0
        assert tagged_pids(tag) == []
    finally:
        server.close()


def test_sigkilled_server_is_cleaned_up_by_its_keepers(tag):
    server = RawServer(tag)
    try:
        start_trees(server, tag)
        server.proc.kill()
        server.wait()
        # No code of the server ran: the keepers saw their lifelines close.
        assert wait_all_dead(tag) == []
    finally:
        server.close()


def test_eof_before_initialize_exits_cleanly(tag):
    server = RawServer(tag)
    try:
        server.proc.stdin.close()
        assert server.wait() == 0
    finally:
        server.close()
