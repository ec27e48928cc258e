"""Helpers for the suite, which runs against the *installed* package (see
.ci/python): real process trees on the real kernel, found and cleaned up
by a unique tag in their environment, never by name."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Iterator, List

import pytest

import tether

TAG_VAR = "TETHER_TEST_TAG"

#: setsid children, a double-forked setsid orphan and nohup'd jobs: every
#: way out of a process group a shell offers. Prints `ready` once launched.
ESCAPING_TREE = (
    "setsid sh -c 'sleep 1000 & exec sleep 1000' & "
    "(setsid sh -c 'sleep 1000 &' &); "
    "nohup sleep 1000 >/dev/null 2>&1 & "
    "nohup sh -c 'sleep 1000' >/dev/null 2>&1 & "
    "echo ready; exec sleep 1000"
)
#: Live processes ESCAPING_TREE has once it printed `ready`, at least.
ESCAPING_TREE_MIN = 6


def pytest_sessionstart(session: object) -> None:
    # The suite is about the installed wheel, never the source tree.
    source = Path(__file__).resolve().parents[1] / "python"
    installed = Path(tether.__file__).resolve()
    if source in installed.parents:
        raise pytest.UsageError(f"tether was imported from the source tree ({installed}), not the installed package")


def tagged_pids(tag: str) -> List[int]:
    """Live (not zombie) processes whose environment has TETHER_TEST_TAG=tag."""
    needle = f"{TAG_VAR}={tag}".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read()
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if state in (b"Z", b"X"):
            continue
        if needle in env.split(b"\0"):
            pids.append(int(entry))
    return pids


def wait_all_dead(tag: str, bound: float) -> List[int]:
    """Waits — on pidfds, not by sleeping — until no live process carries
    `tag`, for at most `bound` seconds; returns the survivors."""
    deadline = time.monotonic() + bound
    while True:
        alive = tagged_pids(tag)
        left = deadline - time.monotonic()
        if not alive or left <= 0:
            return alive
        poller = select.poll()
        fds = []
        for pid in alive:
            try:
                fd = os.pidfd_open(pid)
            except OSError:
                continue
            fds.append(fd)
            poller.register(fd, select.POLLIN)
        try:
            if fds:
                # Wakes at the first death; re-scans for the rest.
                poller.poll(min(left, 1.0) * 1000)
        finally:
            for fd in fds:
                os.close(fd)


def wait_for_count(tag: str, n: int, bound: float) -> int:
    """How many tagged processes live once there are `n` (or `bound` passed):
    a tree's escapes are launched asynchronously after it says ready."""
    deadline = time.monotonic() + bound
    while True:
        count = len(tagged_pids(tag))
        if count >= n or time.monotonic() >= deadline:
            return count
        time.sleep(0.01)  # polling the process table: no event to wait on


def kill_tagged(tag: str) -> None:
    for pid in tagged_pids(tag):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture
def tag(request: pytest.FixtureRequest) -> Iterator[str]:
    """A unique tag for the test's processes; whatever still carries it at
    the end is killed (the assertions come first)."""
    value = f"{request.node.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    yield value
    kill_tagged(value)


def tagged_env(tag: str) -> dict:
    env = dict(os.environ)
    env[TAG_VAR] = tag
    return env


def threads() -> int:
    """OS threads of this process."""
    return len(os.listdir("/proc/self/task"))


def python_owner(script: str, tag: str, **env: str) -> subprocess.Popen:
    """A Python process running `script` (with `tether` installed), tagged
    (plus `env`): an owner the test can SIGKILL."""
    return subprocess.Popen(
        [sys.executable, "-c", script],
        env={**tagged_env(tag), **env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )


def require_root(what: str) -> None:
    """Skips a test that needs root for `what` — or fails it under
    TETHER_REQUIRE_ROOT=1 (as CI sets it), so it never passes silently."""
    if os.geteuid() == 0:
        return
    message = f"needs root ({what})"
    if os.environ.get("TETHER_REQUIRE_ROOT") == "1":
        pytest.fail(message + ", and TETHER_REQUIRE_ROOT=1")
    pytest.skip(message)


def children(pid: int) -> List[int]:
    """Children of `pid`, live or zombie (every thread's list)."""
    found: List[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found.extend(int(p) for p in f.read().split())
        except OSError:
            continue
    return found


def state(pid: int) -> str:
    """The one-letter state of `pid` (R, S, T, Z, …), or "" once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except OSError:
        return ""


def keepers(pid: int) -> List[int]:
    """The live tether keepers among `pid`'s children (a zombie's command
    line is empty: see `zombie_children`)."""
    found = []
    for child in children(pid):
        try:
            with open(f"/proc/{child}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"__tether-keeper" in argv:
            found.append(child)
    return found


def zombie_children() -> List[int]:
    """Children of this process that exited and were not reaped."""
    return [pid for pid in children(os.getpid()) if state(pid) == "Z"]


def fd_count() -> int:
    """Open descriptors of this process."""
    return len(os.listdir("/proc/self/fd"))


def wait_exited(pids: List[int], bound: float) -> List[int]:
    """Waits on pidfds — not by sleeping — until every one of `pids` has
    exited (zombies count as exited), for at most `bound` seconds; returns
    those still running."""
    fds = {}
    for pid in pids:
        try:
            fds[pid] = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
    try:
        poller = select.poll()
        for fd in fds.values():
            poller.register(fd, select.POLLIN)
        deadline = time.monotonic() + bound
        running = dict(fds)
        while running:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for fd, _ in poller.poll(left * 1000):
                poller.unregister(fd)
                running = {p: f for p, f in running.items() if f != fd}
        return sorted(running)
    finally:
        for fd in fds.values():
            os.close(fd)
