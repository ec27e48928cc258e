"""The examples in examples/python/ — the three moves (from subprocess,
asyncio, pexpect) and the agent terminal tool — run against the installed
package: each must exit 0 and leave no process of its own behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import tagged_env, wait_all_dead

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "python"


@pytest.mark.parametrize("name", ["subprocess_move", "asyncio_agent", "pexpect_move", "terminal_tool"])
def test_example_runs(name: str, tag: str) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py")],
        env=tagged_env(tag), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # Every process the example started carried the test's tag.
    assert wait_all_dead(tag, 10) == []
