"""The documentation's Python examples that run as written, taken from the
pages and run against the installed package.

A page's blocks are found by their `.ci/examples` markers, which name the
test that runs them (`<!-- example: tested by
crates/tether-py/tests/test_doc_examples.py (NAME) -->`); the other Python
blocks say why they cannot run (they stand for the reader's own project).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

from conftest import tagged_env, wait_all_dead

ROOT = Path(__file__).resolve().parents[3]


def marked_blocks(page: str, test: str) -> List[Tuple[str, str]]:
    """(language, text) of each fenced block of `page` whose marker names `test`."""
    lines = (ROOT / page).read_text(encoding="utf-8").split("\n")
    blocks = []
    for i, line in enumerate(lines):
        if line.lstrip().startswith("<!-- example: tested by ") and f"({test})" in line:
            fence = lines[i + 1].strip()
            assert fence.startswith("```"), f"{page}:{i + 2}: no block after the marker"
            end = next(j for j in range(i + 2, len(lines)) if lines[j].strip() == "```")
            blocks.append((fence[3:].strip(), "\n".join(lines[i + 2:end]) + "\n"))
    return blocks


def test_python_md_moving_from_pexpect(tag: str) -> None:
    blocks = marked_blocks("docs/python.md", "test_python_md_moving_from_pexpect")
    assert [lang for lang, _ in blocks] == ["python"], blocks
    done = subprocess.run([sys.executable, "-c", blocks[0][1]], env=tagged_env(tag),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # print(child.before, child.after, child.match): the terminal's echo of
    # the line, then the answer the pattern stopped at (text mode turns the
    # terminal's \r\n into \n).
    assert done.stdout.startswith("print(6 * 7)\n 42\n <re.Match object"), done.stdout
    assert wait_all_dead(tag, 10.0) == []
