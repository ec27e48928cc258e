"""Durable sessions from Python (issue 37): ``tether.start(...,
durable=True)`` outlives the Python process that started it (even its
SIGKILL), and ``tether.attach`` re-adopts it from another one — reading
from offset 0 what it printed meanwhile, writing to it, killing it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from typing import Iterator

import pytest

import tether
from conftest import tagged_env, tagged_pids, wait_all_dead, wait_for_count

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="real Linux process trees")


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A state directory (so a holder) of the test's own; its holder is
    SIGKILLed at the end (by the pid in its lock file, checked to be a
    `tether holder` of this home), which kills every session it held."""
    with tempfile.TemporaryDirectory(prefix="tether-py-durable.") as directory:
        monkeypatch.setenv("TETHER_HOME", directory)
        yield directory
        try:
            with open(os.path.join(directory, "holder.lock")) as f:
                pid = int(f.read().strip())
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                ours = b"holder" in f.read().split(b"\0")
            with open(f"/proc/{pid}/environ", "rb") as f:
                ours = ours and f"TETHER_HOME={directory}".encode() in f.read().split(b"\0")
            if ours:
                os.kill(pid, signal.SIGKILL)
        except (OSError, ValueError):
            pass


def test_a_durable_session_outlives_its_python_owner_and_is_re_adopted(home: str, tag: str) -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c",
         "import tether\n"
         "s = tether.start('echo first; read line; echo got $line; exec sleep 1000', shell=True,\n"
         "                 durable=True, name='py-dev', ttl=3600)\n"
         "print(s.id, flush=True)\n"
         "import time; time.sleep(1000)\n"],
        env=tagged_env(tag), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    session_id = owner.stdout.readline().strip()
    assert session_id, "the durable start failed"
    owner.kill()  # SIGKILL
    owner.wait()
    assert wait_for_count(tag, 1, 10) >= 1
    assert len(tagged_pids(tag)) == 1, "the durable session died with its owner"

    session = tether.attach("py-dev")
    assert session.id == session_id
    assert session.info()["status"] == "running"
    assert session.read(0, wait=10) == b"first\n"
    session.write("hello\n")
    assert session.wait(10, until="got hello")["outcome"] == "matched"
    assert session.read(0) == b"first\ngot hello\n"
    assert any(row["id"] == session_id for row in tether.durable_sessions())
    killed = session.kill()
    assert killed["status"] == "killed"
    assert wait_all_dead(tag, 10) == []


def test_unknown_durable_sessions_and_options(home: str) -> None:
    with pytest.raises(tether.SessionNotFound):
        tether.attach("nosuch")
    with pytest.raises(ValueError):
        tether.start(["sleep", "1"], durable=True, timeout=5)
    with pytest.raises(ValueError):
        tether.start(["sleep", "1"], name="x")
    with pytest.raises(FileNotFoundError):
        tether.start(["/nonexistent/program"], durable=True)
    assert tether.durable_sessions() == []
