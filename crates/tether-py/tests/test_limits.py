"""Limits (G9) from Python: ``memory=``, ``pids=``, ``cpu=`` on ``run``,
``Popen`` and background sessions; what was applied and how
(``limits``), and which limit hit (``limit_hit``) — a result of the
command, never the owner's death. Root here: creating cgroups needs it on
this machine (the tests fail instead of skipping under
TETHER_REQUIRE_ROOT=1)."""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import pytest

import tether
from conftest import fd_count, require_root, tagged_env, tagged_pids, wait_all_dead, wait_for_count

CGROUPS = ("cgroup2", "cgroup1")

#: Allocates (and touches: bytearray zeroes it) 2 GiB.
ALLOCATE = "x = bytearray(2 << 30)\nprint('allocated', len(x))"

#: Every process forks as fast as it can, forever; a refused fork is tried
#: again every 200 ms (a failed fork of a Python process still copies its
#: page tables before the pids check refuses it: retrying every few ms kept
#: both vCPUs here busy).
FORK_BOMB = "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.2)\n"


def test_a_2_gib_allocation_under_256m_is_killed_and_reported_while_the_owner_lives(tag: str) -> None:
    require_root("creating cgroups")
    done = tether.run([sys.executable, "-c", ALLOCATE], memory="256M", capture_output=True, env=tagged_env(tag))
    assert done.limit_hit == "memory", done
    assert done.returncode == -9, "the kernel's OOM killer ended it"
    assert done.stdout == b"", "the allocation never completed"
    assert done.limits.memory is not None
    assert done.limits.memory.value == 256 << 20
    assert done.limits.memory.enforced in CGROUPS
    # The owner — this process — lives on (it is running this line), and
    # nothing of the session does.
    assert tagged_pids(tag) == []
    # check=True says why it failed.
    with pytest.raises(tether.CalledProcessError) as raised:
        tether.run([sys.executable, "-c", ALLOCATE], memory=256 << 20, check=True, env=tagged_env(tag))
    assert raised.value.limit_hit == "memory" and raised.value.returncode == -9
    assert "memory limit" in str(raised.value)


def test_popen_reports_the_memory_hit_once_it_exited(tag: str) -> None:
    require_root("creating cgroups")
    p = tether.Popen([sys.executable, "-c", "import sys; sys.stdin.read()\n" + ALLOCATE],
                     stdin=tether.PIPE, memory="256M", env=tagged_env(tag))
    assert p.limit_hit is None, "nothing hit while it waits"
    assert p.limits.memory is not None and p.limits.memory.enforced in CGROUPS
    p.communicate(b"")
    assert p.returncode == -9 and p.limit_hit == "memory"


def test_a_session_reports_the_memory_hit(tag: str) -> None:
    require_root("creating cgroups")
    s = tether.start([sys.executable, "-c", ALLOCATE], memory="256M", env=tagged_env(tag))
    result = s.wait(settled=True, timeout=60)
    assert result.info.limit_hit == "memory", result.info
    assert result.info.returncode == -9
    info = s.info()
    assert info.limit_hit == "memory"
    assert info.limits.memory is not None and info.limits.memory.value == 256 << 20
    assert info.limits.memory.enforced in CGROUPS


def test_a_fork_bomb_under_32_pids_is_contained(tag: str) -> None:
    require_root("creating cgroups")
    p = tether.Popen([sys.executable, "-c", FORK_BOMB], pids=32, stdout=tether.DEVNULL,
                     stderr=tether.DEVNULL, env=tagged_env(tag))
    try:
        assert p.limits.pids is not None and p.limits.pids.enforced in CGROUPS
        # The bomb is at its ceiling: 32 processes, the whole session.
        assert wait_for_count(tag, 32, 60) == 32
        # The machine keeps its pids: this process can still start one.
        assert subprocess.run(["/bin/true"]).returncode == 0
        # Still at most 32, however long it keeps trying.
        for _ in range(20):
            assert len(tagged_pids(tag)) <= 32
        killed = p.kill_tree(grace=0)
        assert killed.descendants_killed >= 31
        assert p.limit_hit == "pids"
        assert tagged_pids(tag) == []
    finally:
        p.kill_tree(grace=0)


def test_the_report_says_how_each_limit_is_enforced(tag: str) -> None:
    require_root("creating cgroups")
    p = tether.Popen(["sh", "-c", "cat /proc/self/cgroup; echo ready; exec sleep 1000"],
                     memory=512 << 20, pids=100, cpu=0.5, stdout=tether.PIPE, env=tagged_env(tag))
    try:
        limits = p.limits
        assert limits, "limits were asked for"
        assert limits.memory is not None and limits.memory.value == 512 << 20
        assert limits.pids is not None and limits.pids.value == 100
        assert limits.cpu is not None and limits.cpu.value == 0.5
        for limit in (limits.memory, limits.pids, limits.cpu):
            assert limit.enforced in CGROUPS and limit.reason is None, limit
        assert limits.cgroup is not None and os.path.isdir(limits.cgroup)
        assert "cgroup" in repr(limits)
        # The command runs in its session's cgroup from its first
        # instruction: the shell's own view, printed first, names it.
        assert p.stdout is not None
        lines = []
        for line in p.stdout:
            if line == b"ready\n":
                break
            lines.append(line.decode())
        leaf = os.path.basename(limits.cgroup)
        assert any(line.rstrip().endswith("/" + leaf) for line in lines), lines
        p.kill_tree()
        assert not os.path.exists(limits.cgroup), "the leaf goes with the session"
        assert p.limit_hit is None
    finally:
        p.kill_tree(grace=0)
    # No limit asked for: an empty report, nothing hit.
    done = tether.run(["true"])
    assert not done.limits and done.limits.memory is None and done.limit_hit is None


def test_session_limits_sync_and_async(tag: str) -> None:
    require_root("creating cgroups")
    s = tether.start(["sleep", "1000"], pids=8, cpu=1, env=tagged_env(tag))
    try:
        info = s.info()
        assert info.limits.pids is not None and info.limits.pids.value == 8
        assert info.limits.cpu is not None and info.limits.cpu.value == 1.0
        assert info.limits.memory is None and info.limit_hit is None
    finally:
        s.kill(grace=0)

    async def main() -> Any:
        a = await tether.start_async(["sleep", "1000"], memory="64M", env=tagged_env(tag))
        try:
            return a.info().limits
        finally:
            await a.kill(grace=0)

    limits = asyncio.run(main())
    assert limits.memory is not None and limits.memory.value == 64 << 20
    assert limits.memory.enforced in CGROUPS
    assert wait_all_dead(tag, 10) == []


BAD: Dict[str, Any] = {
    "memory": [(0, ValueError), (-1, ValueError), ("lots", ValueError), ("0", ValueError),
               ("12X", ValueError), (2**64, ValueError), (1.5, TypeError), (True, TypeError),
               (b"1G", TypeError), ([1], TypeError)],
    "pids": [(0, ValueError), (-3, ValueError), (2**64, ValueError), ("32", TypeError),
             (2.0, TypeError), (True, TypeError)],
    "cpu": [(0, ValueError), (0.001, ValueError), (-1, ValueError), (float("nan"), ValueError),
            (float("inf"), ValueError), ("1", TypeError), (True, TypeError)],
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_limits_raise_and_start_nothing(name: str, tag: str) -> None:
    tether.run(["true"])  # the warm keeper's socket is part of the baseline
    gc.collect()  # earlier tests' handles, freed now rather than mid-count
    fds = fd_count()
    sessions = len(tether.sessions())
    for value, error in BAD[name]:
        kwargs = {name: value}
        with pytest.raises(error, match=name if error is TypeError else None):
            tether.run(["echo", "never"], capture_output=True, env=tagged_env(tag), **kwargs)
        with pytest.raises(error):
            tether.Popen(["echo", "never"], stdin=tether.PIPE, stdout=tether.PIPE, **kwargs)
        with pytest.raises(error):
            tether.start(["echo", "never"], **kwargs)
        with pytest.raises(error):
            asyncio.run(tether.start_async(["echo", "never"], **kwargs))
    gc.collect()
    assert fd_count() == fds, "the pipes made for the command were closed"
    assert tagged_pids(tag) == [] and len(tether.sessions()) == sessions
    # Sizes the way people write them.
    for text, expected in (("512M", 512 << 20), ("2g", 2 << 30), ("1.5GiB", 3 << 29), ("4096", 4096)):
        p = tether.Popen(["true"], memory=text)
        assert p.limits.memory is not None and p.limits.memory.value == expected
        p.wait()


def test_require_limits_refuses_to_start_without_them_and_runs_with_them(tmp_path: Any) -> None:
    require_root("creating cgroups")
    marker = tmp_path / "started"
    script = f"open({str(marker)!r}, 'w').close()"
    # pids above the kernel's most processes is refused before the start,
    # with or without require_limits; require_limits with enforced limits runs.
    with pytest.raises(ValueError):
        tether.run([sys.executable, "-c", script], pids=4194305)
    done = tether.run([sys.executable, "-c", "print('ran')"], memory="64M", pids=16,
                      require_limits=True, capture_output=True)
    assert done.returncode == 0 and done.stdout == b"ran\n", done
    assert not marker.exists()
    # As a user without a delegated cgroup the limits would be none: refused
    # before the command starts, with the reason.
    env = dict(os.environ)
    code = (
        # (What it uses is imported before the privileges go: tether loads
        # its parts at first use, and this interpreter's own library may
        # not be readable by the user it becomes.)
        "import os, sys\n"
        "from tether import TetherError, run\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "try:\n"
        f"    run(['/bin/sh', '-c', 'touch {marker}'], memory='64M', require_limits=True)\n"
        "except TetherError as e:\n"
        "    print('refused:', e)\n"
    )
    home = tmp_path / "home"
    home.mkdir()
    os.chown(home, 65534, 65534)
    os.chmod(tmp_path, 0o777)
    env["TETHER_HOME"] = str(home)
    env["HOME"] = str(home)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd="/")
    assert "refused: memory limit not applied" in out.stdout, (out.stdout, out.stderr)
    assert "delegat" in out.stdout
    assert not marker.exists(), "the command never started"


#: A command that writes itself into its owner's cgroups (the parents of its
#: ``tether-*`` leaves, from /proc/self/cgroup and mountinfo) — out of its
#: limits — then starts 5 sleepers there and exits: the fixture the Rust
#: tests share (``tether_testkit::ESCAPE_LIMITS``).
ESCAPE = (Path(__file__).resolve().parents[2] / "tether-testkit/fixtures/escape_limits.py").read_text()


def test_a_command_that_leaves_its_limits_is_reported(tag: str) -> None:
    require_root("creating cgroups")
    done = tether.run([sys.executable, "-c", ESCAPE], memory="256M", pids=64, env=tagged_env(tag))
    assert done.returncode == 0
    # The 5 sleepers; and the command itself if the keeper's membership
    # check (every 250 ms) ran before it exited.
    assert done.limits_escaped in (5, 6), done
    assert done.descendants_killed == 5, done
    assert wait_all_dead(tag, 10) == []
    p = tether.Popen([sys.executable, "-c", ESCAPE], memory="256M", pids=64, env=tagged_env(tag))
    assert p.limits_escaped == 0, "nothing walked yet"
    p.wait()
    p.kill_tree()
    assert p.limits_escaped in (5, 6)
    assert wait_all_dead(tag, 10) == []
