"""PTY sessions through MCP, driven by the official client SDK: `run` with
`pty: true`, `write` with text and named keys, the `screen` tool, and the
same containment as pipe sessions (kill ends every process, verified)."""

import re

import pytest

from conftest import BOUND, call, connect, tagged_pids, wait_for_count

pytestmark = pytest.mark.anyio


def running(tag: str, argv: list[str]) -> list[int]:
    """Tagged processes running exactly `argv` (the server and keepers carry
    the tag too)."""
    found = []
    for pid in tagged_pids(tag):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read().split(b"\0")[:-1] == [a.encode() for a in argv]:
                    found.append(pid)
        except OSError:
            pass
    return found


async def error(s, tool: str, args: dict) -> str:
    """The message of a call that must fail."""
    return (await call(s, tool, args, error=True))["error"]


async def test_a_pty_command_has_a_terminal_and_agent_defaults(tag):
    async with connect(tag) as s:
        body = await call(
            s, "run", {"command": "tty; test -t 0 && test -t 1 && echo both; echo $TERM $PAGER", "pty": True}
        )
        assert body["status"] == "exited" and body["exit_code"] == 0, body
        # CR LF from the terminal renders as plain lines.
        lines = body["output"].splitlines()
        assert re.fullmatch(r"/dev/pts/\d+", lines[0]), body["output"]
        assert lines[1:] == ["both", "xterm-256color cat"]

        # A terminal gets a real editor (the failing stand-in is for pipes).
        body = await call(s, "run", {"command": "echo ${EDITOR:-none}", "pty": True})
        assert body["output"] == "none\n", body
        body = await call(s, "run", {"command": "echo $EDITOR"})
        assert "tether-no-editor" in body["output"]

        body = await call(s, "run", {"command": "stty size", "pty": True, "rows": 40, "cols": 100})
        assert body["output"] == "40 100\n"
        # Without pty the same command has no terminal.
        body = await call(s, "run", {"command": "test -t 1 || echo no-terminal"})
        assert body["output"] == "no-terminal\n"


async def test_a_repl_answers_and_keys_drive_it(tag):
    async with connect(tag) as s:
        body = await call(s, "run", {"argv": ["python3", "-i", "-q"], "pty": True, "until": ">>> "})
        assert body["status"] == "running" and body["matched"] is True, body
        sid = body["id"]
        body = await call(s, "write", {"id": sid, "data": "1+1", "submit": True})
        assert "2" in body["output"].splitlines(), body
        # Keys: a typo erased with Backspace, then Enter.
        body = await call(s, "write", {"id": sid, "data": "6*7x", "keys": ["Backspace", "Enter"]})
        assert "42" in body["output"].splitlines(), body
        # Ctrl-D at the prompt (eof) ends the REPL. The REPL prints a newline
        # at once and exits later (interpreter shutdown); with the quiet rule
        # on, the call would return 0.2 s after that newline, before the exit
        # on a loaded machine ("running": 2 of 3 runs at load ~345). The exit
        # is the event: quiet_s 0 makes the call return at it.
        body = await call(s, "write", {"id": sid, "eof": True, "quiet_s": 0, "yield_s": BOUND})
        assert body["status"] == "exited" and body["exit_code"] == 0, body


async def test_ctrl_c_interrupts_and_the_shell_keeps_serving(tag):
    async with connect(tag) as s:
        body = await call(
            s, "run", {"argv": ["sh", "-i"], "env": {"PS1": "prompt$ "}, "pty": True, "until": r"prompt\$ "}
        )
        sid = body["id"]
        before = len(tagged_pids(tag))  # the server and the shell
        await call(s, "write", {"id": sid, "data": "sleep 100", "submit": True, "yield_s": 0.5})
        assert wait_for_count(tag, before + 1) >= before + 1
        assert len(running(tag, ["sleep", "100"])) == 1
        body = await call(s, "write", {"id": sid, "keys": ["Ctrl-C"], "until": r"prompt\$ "})
        assert body["matched"] is True and body["status"] == "running", body
        body = await call(s, "write", {"id": sid, "data": "echo alive-$((6*7))", "submit": True, "until": "alive-42"})
        assert body["matched"] is True, body
        assert running(tag, ["sleep", "100"]) == [], "the sleep survived Ctrl-C"
        body = await call(s, "kill", {"id": sid})
        assert body["status"] == "killed"
        assert running(tag, ["sh", "-i"]) == []


async def test_the_screen_tool_shows_a_full_screen_program(tag):
    async with connect(tag) as s:
        body = await call(s, "run", {"command": r"printf '\033[2J\033[5;10Hhello'", "pty": True})
        sid = body["id"]
        screen = await call(s, "screen", {"id": sid})
        assert screen["screen"].splitlines()[4] == " " * 9 + "hello", screen
        assert (screen["cursor_row"], screen["cursor_col"]) == (5, 15)
        assert screen["rows"] == 30 and screen["cols"] == 120
        assert screen["alternate_screen"] is False

        # A full-screen program: results carry the screen; resizing redraws.
        script = (
            r"""draw() { printf '\033[H\033[2Jsize %s' "$(stty size)"; }; """
            r"trap draw WINCH; printf '\033[?1049h'; draw; while :; do sleep 0.05; done"
        )
        body = await call(s, "run", {"command": script, "pty": True, "until": "size 30 120"})
        assert body["screen"].startswith("size 30 120"), body
        sid = body["id"]
        screen = await call(s, "screen", {"id": sid, "rows": 20, "cols": 60})
        assert screen["alternate_screen"] is True
        assert (screen["rows"], screen["cols"]) == (20, 60)
        assert screen["screen"] == "size 20 60", screen
        await call(s, "kill", {"id": sid})


async def test_bad_pty_arguments_are_clear_errors(tag):
    async with connect(tag) as s:
        for args, words in [
            ({"command": "true", "rows": 10}, "pty: true"),
            ({"command": "true", "pty": True, "rows": 0}, "rows"),
            ({"command": "true", "pty": True, "cols": 5000}, "cols"),
            ({"command": "true", "pty": True, "separate_stderr": True}, "one stream"),
        ]:
            text = await error(s, "run", args)
            assert words in text, (args, text)
        body = await call(s, "run", {"command": "sleep 1000", "pty": True, "yield_s": 0})
        sid = body["id"]
        text = await error(s, "write", {"id": sid, "keys": ["Enter", "Hyper-Q"]})
        assert "Hyper-Q" in text
        text = await error(s, "write", {"id": sid})
        assert "data" in text
        text = await error(s, "screen", {"id": sid, "rows": 10})
        assert "rows and cols" in text
        pipe = (await call(s, "run", {"command": "true"}))["id"]
        text = await error(s, "screen", {"id": pipe})
        assert "pty" in text
        # The server is fine, and the session still runs.
        assert (await call(s, "list", {}))["sessions"]
        await call(s, "kill", {"id": sid})


async def test_kill_ends_every_process_of_a_pty_session(tag):
    async with connect(tag) as s:
        script = (
            "nohup sleep 1000 >/dev/null 2>&1 & "
            "setsid sh -c 'exec sleep 1000' </dev/null >/dev/null 2>&1 & "
            "(trap '' HUP TERM; while :; do sleep 1; done) & "
            "echo ready; exec sleep 1000"
        )
        before = len(tagged_pids(tag))  # the server
        body = await call(s, "run", {"command": script, "pty": True, "until": "ready"})
        assert wait_for_count(tag, before + 4) >= before + 4  # main and 3 escapes
        body = await call(s, "kill", {"id": body["id"], "grace_s": 0.3})
        assert body["status"] == "killed" and body["descendants_killed"] >= 3, body
        assert running(tag, ["sleep", "1000"]) == []
        assert len(tagged_pids(tag)) == before
