"""The documentation's MCP client examples, taken from the pages and run as
written: docs/first-steps.md's Python client (the official SDK starting
`tether mcp` itself) must print what the page says it printed.

A page's blocks are found by their `.ci/examples` markers, which name the
test that runs them (`<!-- example: tested by …/test_doc_examples.py
(test_first_steps_mcp_client) -->`): the code block, then the output block.
The example starts `tether` from PATH, so PATH gets a `tether` that runs the
server under test (TETHER_MCP_CMD) with this test's tag and state directory
(the SDK passes the server only HOME, PATH, SHELL, TERM, USER and LOGNAME).
"""

import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from conftest import BOUND, TAG_VAR, server_command, tether_home, wait_all_dead

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
