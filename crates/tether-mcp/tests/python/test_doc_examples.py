"""The documentation's MCP examples, taken from the pages and run as written:
docs/first-steps.md's Python client (the official SDK starting `tether mcp`
itself) must print what the page says it printed, and its transcripts (→
a call, ← its structuredContent) are replayed call by call, each result
compared with the page's.

A page's blocks are found by their `.ci/examples` markers, which name the
test that runs them (`<!-- example: tested by …/test_doc_examples.py
(test_first_steps_mcp_client) -->`): the code block, then the output block.
The example starts `tether` from PATH, so PATH gets a `tether` that runs the
server under test (TETHER_MCP_CMD) with this test's tag and state directory
(the SDK passes the server only HOME, PATH, SHELL, TERM, USER and LOGNAME).
"""

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import BOUND, TAG_VAR, call, connect, server_command, tether_home, wait_all_dead

DOCS = Path(__file__).resolve().parents[4] / "docs"


def marked_blocks(page: str, test: str) -> list[tuple[str, str]]:
    """(language, text) of each fenced block of docs/<page> whose marker names `test`."""
    lines = (DOCS / page).read_text(encoding="utf-8").split("\n")
    blocks = []
    for i, line in enumerate(lines):
        if line.startswith("<!-- example: tested by ") and f"({test})" in line:
            fence = lines[i + 1]
            assert fence.startswith("```"), f"{page}:{i + 2}: no block after the marker"
            end = lines.index("```", i + 2)
            blocks.append((fence[3:].strip(), "\n".join(lines[i + 2:end]) + "\n"))
    return blocks


def test_first_steps_mcp_client(tag: str) -> None:
    blocks = marked_blocks("first-steps.md", "test_first_steps_mcp_client")
    assert [lang for lang, _ in blocks] == ["python", "text"], blocks
    (_, script), (_, printed) = blocks
    with tempfile.TemporaryDirectory() as tmp:
        tether = Path(tmp) / "tether"
        server = shlex.join(server_command())
        tether.write_text(
            "#!/bin/sh\n"
            '[ "$1" = mcp ] && shift\n'  # the server command says `mcp` already
            f"export {TAG_VAR}={shlex.quote(tag)} TETHER_HOME={shlex.quote(tether_home(tag))}\n"
            f'exec {server} "$@"\n'
        )
        tether.chmod(0o755)
        env = {**os.environ, "PATH": f"{tmp}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
        done = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp,
                              capture_output=True, text=True, timeout=BOUND)
    assert done.returncode == 0, done.stderr
    # The port is the one the kernel gave `http.server 0`; the rest is exact.
    expected = re.escape(printed).replace("port\\ ", "port ")
    expected = re.sub(r"port (\d+)", r"port \\d+", expected)
    assert re.fullmatch(expected, done.stdout), f"printed:\n{done.stdout}\nthe page says:\n{printed}"
    assert wait_all_dead(tag) == [], "the example's processes outlived it"


# What differs from run to run in a transcript's results: the session id
# (mapped: the page's id stands for the one the server gave), pids,
# durations, the port the kernel gave `http.server 0`, and where `python3`
# is (a pyenv shim execs it by its full path, which the process then shows).
VARIES = [
    (r'"pid": \d+', '"pid": …'),
    (r'"command": "python3 ', '"command": "…python3 '),
    (r'"duration_ms": \d+', '"duration_ms": …'),
    (r"port \d+", "port …"),
    (r":\d+/\)", ":…/)"),
    # http.server's `print` writes its line and the newline in two writes:
    # the newline comes with the line or after it, in the next result.
    (r' \.\.\.(\\n)?"', ' ...…"'),
    (r'"output": "(\\n)?"', '"output": "…"'),
    (r'"next_offset": \d+', '"next_offset": …'),
]


def transcript(text: str) -> list[tuple[str, str]]:
    """(arrow, text) of each entry; continuation lines join their entry."""
    entries: list[list[str]] = []
    for line in text.rstrip("\n").split("\n"):
        if line.startswith(("→ ", "← ")):
            entries.append([line[0], line[2:]])
        else:
            assert entries and line.startswith(" "), line
            entries[-1][1] += " " + line.strip()
    return [(arrow, body) for arrow, body in entries]


def fits(expected: str, actual: str) -> bool:
    """Whether `actual` is `expected` with each `…` standing for any text."""
    for pattern, replacement in VARIES:
        expected = re.sub(pattern, replacement, expected)
    regex = ".*?".join(re.escape(part) for part in expected.split("…"))
    return re.fullmatch(regex, actual) is not None


@pytest.mark.anyio
async def test_first_steps_transcripts(tag: str) -> None:
    blocks = marked_blocks("first-steps.md", "test_first_steps_transcripts")
    assert [lang for lang, _ in blocks] == ["text", "text"], blocks
    for _, text in blocks:
        ids: dict[str, str] = {}  # the page's session id -> the server's
        async with connect(tag) as s:
            entries = transcript(text)
            for (arrow, sent), (back, expected) in zip(entries[::2], entries[1::2]):
                assert (arrow, back) == ("→", "←"), (sent, expected)
                for page_id, real_id in ids.items():
                    sent = sent.replace(f'"{page_id}"', f'"{real_id}"')
                tool, args = sent.split(" ", 1)
                body = await call(s, tool, json.loads(args))
                page_id = re.search(r'"id": "(\w+)"', expected)
                if page_id and page_id.group(1) not in ids:
                    ids[page_id.group(1)] = body["id"]
                for page, real in ids.items():
                    expected = expected.replace(f'"{page}"', f'"{real}"')
                actual = json.dumps(body, ensure_ascii=False)
                assert fits(expected, actual), f"{sent}\nreturned:\n{actual}\nthe page says:\n{expected}"
    assert wait_all_dead(tag) == [], "the transcripts' processes outlived them"
