"""A terminal tool of the shape Python agents have (hermes-agent's
`terminal` + `process` tools, OpenHands' and SWE-agent's shells), on
tether: every process a command starts is contained and dies with the
agent — also when the agent is SIGKILLed, which no atexit handler or
watchdog thread survives.

    python examples/python/terminal_tool.py          # a short demo
    python examples/python/terminal_tool.py --killed # SIGKILL the agent

Needs `pip install process-tether` (or `pip install .` at the repository
root).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Dict, List, Optional

import tether


class TerminalTool:
    """What an agent calls: foreground commands with a timeout, background
    sessions read from an offset, readiness by `wait(until=…)`, a PTY
    session driven by keys, kill, list."""

    def __init__(self) -> None:
        self.sessions: Dict[str, tether.Session] = {}

    # --- foreground --------------------------------------------------------

    def run(self, command: str, timeout: float = 60.0) -> dict:
        """Runs a shell command to completion. On timeout the whole tree is
        dead before this returns — also a grandchild holding the pipe."""
        try:
            done = tether.run(command, shell=True, capture_output=True, text=True,
                              timeout=timeout, errors="replace")
        except subprocess.TimeoutExpired as e:
            return {"status": "timed_out", "output": (e.output or b"").decode(errors="replace"),
                    "killed": getattr(e, "descendants_killed", 0) + 1}
        return {"status": "exited", "exit_code": done.returncode, "output": done.stdout + done.stderr,
                "leftovers_killed": done.descendants_killed}

    # --- background --------------------------------------------------------

    def start(self, command: str, *, pty: bool = False, ready: Optional[str] = None,
              timeout: float = 30.0) -> dict:
        """Starts a background session; with `ready`, waits for that line."""
        session = tether.start(command, shell=True, pty=pty, stdin=True)
        self.sessions[session.id] = session
        result = {"id": session.id, "pid": session.pid}
        if ready is not None:
            waited = session.wait(until=ready, timeout=timeout)
            result["ready"] = waited.matched
        return result

    def read(self, id: str, offset: int = 0) -> dict:
        """Output from `offset` (absolute, never shifts; nothing lost)."""
        chunk = self.sessions[id].read(offset, 64 * 1024)
        return {"output": chunk.data.decode(errors="replace"), "next_offset": chunk.next_offset,
                "eof": chunk.eof, "dropped": chunk.dropped}

    def write(self, id: str, text: str) -> None:
        self.sessions[id].write(text)

    def keys(self, id: str, *names: str) -> None:
        self.sessions[id].send_keys(*names)

    def screen(self, id: str) -> str:
        return str(self.sessions[id].screen().text)

    def wait(self, id: str, until: Optional[str] = None, timeout: float = 30.0) -> dict:
        waited = self.sessions[id].wait(until=until, timeout=timeout)
        return {"status": waited.status, "exit_code": waited.returncode,
                "match": waited.match.text.decode(errors="replace") if waited.match else None}

    def kill(self, id: str) -> dict:
        killed = self.sessions[id].kill()
        return {"state": killed.state, "descendants_killed": killed.descendants_killed}

    def list(self) -> List[dict]:
        return [{"id": i.id, "state": i.state, "pid": i.pid, "command": i.command,
                 "descendants": len(i.descendants)} for i in tether.sessions()]


def demo() -> None:
    tool = TerminalTool()
    print(tool.run("echo hello; setsid sleep 1000 &"))  # the setsid sleep is killed too
    print(tool.run("sleep 1000 & sleep 1000", timeout=1))  # the whole tree, at 1 s
    server = tool.start("python3 -m http.server 0 --bind 127.0.0.1", ready=r"Serving HTTP on \S+ port \d+")
    print(server, tool.read(server["id"]))
    repl = tool.start("python3 -q", pty=True, ready=">>> ")
    tool.write(repl["id"], "6 * 7\n")
    print(tool.wait(repl["id"], until=r"42"), repr(tool.screen(repl["id"])))
    tool.keys(repl["id"], "C-d")
    print(tool.wait(repl["id"]))
    print(tool.list())
    print(tool.kill(server["id"]))


def killed() -> None:
    """Starts an agent that starts a server and a setsid'd job, SIGKILLs it,
    and shows nothing it started survives."""
    marker = f"tether-demo-{os.getpid()}"
    agent = subprocess.Popen(
        [sys.executable, "-c", f"""
import sys, time
sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
from terminal_tool import TerminalTool
tool = TerminalTool()
tool.start("setsid sleep 1000 & nohup sleep 1000 >/dev/null 2>&1 & exec sleep 1000")
print("started", flush=True)
time.sleep(1000)
"""],
        stdout=subprocess.PIPE, text=True, env=dict(os.environ, DEMO_MARKER=marker))
    assert agent.stdout is not None
    agent.stdout.readline()
    def ours() -> List[int]:
        pids = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if f"DEMO_MARKER={marker}".encode() in f.read().split(b"\0"):
                        pids.append(int(pid))
            except OSError:
                pass
        return pids
    print("before SIGKILL:", len(ours()), "processes")
    agent.send_signal(signal.SIGKILL)
    agent.wait()
    deadline = time.monotonic() + 5
    while ours() and time.monotonic() < deadline:
        time.sleep(0.05)
    print("after SIGKILL:", len(ours()), "processes")


if __name__ == "__main__":
    killed() if "--killed" in sys.argv else demo()
