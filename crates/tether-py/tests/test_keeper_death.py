"""A keeper SIGKILLed while processes of its tree hold the output pipes
(issue 34, item 6): `communicate()` follows the keeper beside the pipes, so
its death is noticed at once — the orphans killed and counted, the pipes
ended by their deaths, `KeeperError` raised — instead of reading until the
orphans end by themselves (here: never)."""

from __future__ import annotations

import os
import signal
import threading
from typing import Any, Dict

import pytest

import tether
from conftest import keepers, kill_tagged, tagged_env, wait_all_dead, wait_for_count

#: The main `sh`, a background `sleep` and a `setsid` one (out of the
#: command's session): all three hold stdout and stderr.
TREE = ["sh", "-c", "sleep 1000 & setsid sleep 1000 & echo ready; wait"]


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        return int(f.read().rsplit(b")", 1)[1].split()[1])


@pytest.mark.parametrize("stderr", [None, tether.PIPE], ids=["stdout", "stdout-stderr"])
def test_communicate_notices_a_sigkilled_keeper_while_orphans_hold_the_pipes(
    tag: str, stderr: Any
) -> None:
    # stdout alone takes communicate()'s one-stream path; with stderr too,
    # its selector loop.
    p = tether.Popen(TREE, stdout=tether.PIPE, stderr=stderr, env=tagged_env(tag))
    assert p.stdout is not None
    assert p.stdout.readline() == b"ready\n"
    assert wait_for_count(tag, 3, 10) >= 3
    keeper = parent_of(p.pid)
    assert keeper in keepers(os.getpid())
    os.kill(keeper, signal.SIGKILL)

    done: Dict[str, Any] = {}

    def talk() -> None:
        try:
            done["result"] = p.communicate()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            done["error"] = e

    # The bound only tells a hang from an answer: unfixed, communicate()
    # reads until the sleeps end (1000 s); the CLI notices a keeper's death
    # in 7-16 ms. 20 s leaves room for a loaded CI machine.
    talker = threading.Thread(target=talk, daemon=True)
    talker.start()
    talker.join(20)
    if talker.is_alive():
        kill_tagged(tag)  # ends the pipes, so the thread ends too
        talker.join(10)
        pytest.fail("communicate() still reading 20 s after the keeper was SIGKILLed")
    error = done.get("error")
    assert isinstance(error, tether.KeeperError), done
    assert "3 orphaned process(es) killed" in str(error)
    assert wait_all_dead(tag, 10) == []
    # The loss stays the answer.
    with pytest.raises(tether.KeeperError):
        p.wait()
    for stream in (p.stdout, p.stderr):
        if stream is not None:
            stream.close()
