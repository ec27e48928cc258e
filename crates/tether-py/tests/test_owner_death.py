"""G2 from Python: a SIGKILLed Python owner takes every process it started
with it — setsid, double-fork and nohup escapes included — with no Python
code, atexit or destructor on the path."""

from __future__ import annotations

import signal

from conftest import ESCAPING_TREE, ESCAPING_TREE_MIN, python_owner, wait_all_dead, wait_for_count

OWNER = f"""
import time, tether
p = tether.Popen({ESCAPING_TREE!r}, shell=True, stdout=tether.PIPE)
assert p.stdout.readline() == b"ready\\n"
s = tether.start({ESCAPING_TREE!r}, shell=True)
assert s.wait(until="ready", timeout=30).matched
print("ready", flush=True)
time.sleep(1000)
"""


def test_sigkilled_python_owner_takes_both_trees_with_it(tag: str) -> None:
    owner = python_owner(OWNER, tag)
    assert owner.stdout is not None
    assert owner.stdout.readline() == "ready\n"
    # The owner, its two keepers, and two escaping trees.
    assert wait_for_count(tag, 2 * ESCAPING_TREE_MIN + 1, 10) >= 2 * ESCAPING_TREE_MIN + 1
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    assert wait_all_dead(tag, 10) == []
