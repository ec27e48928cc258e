"""Warm keepers, on by default: the keeper of a finished command waits for
the next one (no keeper exec per command), yet an idle program has no
thread of tether's, leaks no descriptor or zombie, and its idle keepers
die with it — SIGKILL, a stopped keeper and a forked child included."""

from __future__ import annotations

import gc
import os
import resource
import select
import signal
import subprocess
import sys

import tether
from conftest import (
    fd_count,
    keepers,
    require_root,
    state,
    tagged_pids,
    threads,
    wait_exited,
    zombie_children,
)


def test_an_idle_program_keeps_its_keeper_and_no_thread() -> None:
    tether.run(["true"])
    idle = keepers(os.getpid())
    assert idle, "the finished command's keeper is kept for the next one"
    # Regression: an idle keeper kept the library's guard thread (and,
    # right after a run, the pool's refill thread) alive, so the default
    # was the slow path to keep /proc/self/task at 1.
    assert threads() == 1, os.listdir("/proc/self/task")
    assert tether.run(["echo", "again"], capture_output=True).stdout == b"again\n"
    assert set(keepers(os.getpid())) == set(idle), "the next command reused it"
    assert threads() == 1, os.listdir("/proc/self/task")


def test_descriptors_and_zombies_return_to_baseline() -> None:
    tether.run(["true"])  # fills the pool: its keeper's socket is the baseline
    # Handles earlier tests dropped (their keeper sockets) are not the
    # baseline: collected during the loop, they made it 4 lower.
    gc.collect()
    fds = fd_count()
    for i in range(300):
        p = tether.Popen(["sh", "-c", f"echo {i}; sleep 1000 &"], stdout=tether.PIPE)
        out, _ = p.communicate()
        assert out == f"{i}\n".encode() and p.descendants_killed == 1
    del p  # a finished Popen still holds its (inert) end of the keeper
    assert fd_count() == fds
    assert zombie_children() == []
    assert len(keepers(os.getpid())) <= tether.DEFAULT_WARM_KEEPERS


def test_an_idle_keeper_that_dies_is_reaped_by_the_next_call() -> None:
    tether.run(["true"])
    for pid in keepers(os.getpid()):
        os.kill(pid, signal.SIGKILL)
        assert wait_exited([pid], 10) == []
        assert state(pid) == "Z", "no thread reaps an idle keeper"
    # The next spawn reaps the dead keeper, and runs on a fresh one.
    assert tether.run(["echo", "fresh"], capture_output=True).stdout == b"fresh\n"
    assert zombie_children() == []


def test_turning_the_pool_off_reaps_the_idle_keepers_at_once() -> None:
    tether.run(["true"])
    assert keepers(os.getpid())
    try:
        tether.set_warm_keepers(0)
        assert keepers(os.getpid()) == [] and zombie_children() == []
        tether.run(["true"])
        assert keepers(os.getpid()) == [] and zombie_children() == []
    finally:
        tether.set_warm_keepers(tether.DEFAULT_WARM_KEEPERS)


# The owner leaves two idle keepers (two commands finished while neither
# could reuse the other's keeper), stops one of them (a stopped keeper acts
# on nothing until it is continued), forks a child that lives on holding
# copies of every descriptor the library does not cut at the fork, and
# waits to be SIGKILLed.
OWNER = """
import os, signal, sys, time, tether
a = tether.Popen(["sleep", "1000"])
tether.run(["true"])
a.kill()
me = os.getpid()
keepers = []
for task in os.listdir(f"/proc/{me}/task"):
    with open(f"/proc/{me}/task/{task}/children") as f:
        keepers += [int(p) for p in f.read().split()]
os.kill(keepers[0], signal.SIGSTOP)
os.waitid(os.P_PID, keepers[0], os.WSTOPPED | os.WNOWAIT)
child = os.fork()
if child == 0:
    time.sleep(1000)
    os._exit(0)
print(child, *keepers, flush=True)
time.sleep(1000)
"""


def test_idle_keepers_die_with_their_owner_even_stopped_and_forked(tag: str) -> None:
    # A session of its own: once the owner is gone, its keepers' process
    # groups are orphaned whoever adopts them (an ancestor in the test's
    # session would not orphan them), and the kernel continues a stopped one.
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER],
        env={**os.environ, "TETHER_TEST_TAG": tag},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert owner.stdout is not None
        child, *idle = (int(w) for w in owner.stdout.readline().split())
        assert len(idle) == 2, "two idle keepers"
        assert state(idle[0]) == "T", "stopped"
        assert state(idle[1]) in ("S", "R"), "alive, waiting for a command"
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        # Bounded: keepers exit at their lifeline EOF, within milliseconds.
        assert wait_exited(idle, 10) == []
        assert child in tagged_pids(tag), "the forked child still lives"
    finally:
        owner.kill()
        for pid in tagged_pids(tag):
            os.kill(pid, signal.SIGKILL)


def test_a_forked_child_starts_its_own_keepers() -> None:
    tether.run(["true"])
    parent_keepers = set(keepers(os.getpid()))
    assert parent_keepers
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            out = tether.run(["echo", "child"], capture_output=True).stdout
            mine = set(keepers(os.getpid()))
            code = 0 if out == b"child\n" and mine and not mine & parent_keepers else 2
        finally:
            os._exit(code)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    os.close(r)
    assert os.waitstatus_to_exitcode(status) == 0
    # The parent's idle keepers were untouched by the child: still served.
    assert tether.run(["echo", "parent"], capture_output=True).stdout == b"parent\n"
    assert set(keepers(os.getpid())) == parent_keepers


def test_an_inheritable_descriptor_reaches_neither_the_command_nor_an_idle_keeper() -> None:
    # Regression: the keeper passed every descriptor the owner left
    # inheritable on to the command (subprocess closes them: close_fds), and
    # kept it itself — an idle keeper lives as long as this process, so the
    # pipe below never reached EOF.
    # An empty pool: the keeper below starts after the pipe exists.
    tether.set_warm_keepers(0)
    tether.set_warm_keepers(tether.DEFAULT_WARM_KEEPERS)
    r, w = os.pipe()
    try:
        os.set_inheritable(w, True)
        pipe = os.readlink(f"/proc/self/fd/{w}")
        listing = tether.run(["ls", "-l", "/proc/self/fd"], capture_output=True, text=True).stdout
        assert "/proc/" in listing and pipe not in listing, listing
        assert keepers(os.getpid()), "the command's keeper waits for the next one"
        os.close(w)
        w = -1
        # Bounded: EOF is there at once when nobody else holds the write
        # end; 10 s only keeps a failure from hanging the suite.
        assert select.select([r], [], [], 10)[0] == [r], "no EOF: someone still holds the write end"
        assert os.read(r, 1) == b""
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


def test_the_next_command_gets_the_umask_and_limits_of_now() -> None:
    # Regression: a warm keeper passed on the umask and resource limits its
    # owner had when it started, not those of the spawn (subprocess gives
    # those of the spawn).
    tether.run(["true"])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    old = os.umask(0o077)
    try:
        assert tether.run(["sh", "-c", "umask"], capture_output=True).stdout == b"0077\n"
        resource.setrlimit(resource.RLIMIT_NOFILE, (200, hard))
        assert tether.run(["sh", "-c", "ulimit -n"], capture_output=True).stdout == b"200\n"
    finally:
        os.umask(old)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert zombie_children() == [], "the keepers that no longer fit were reaped"
    assert len(keepers(os.getpid())) <= tether.DEFAULT_WARM_KEEPERS


def test_an_owner_that_changed_its_group_has_it_in_the_next_command() -> None:
    require_root("changing this process's group ids")
    # Regression: the warm keeper started before the owner changed its
    # credentials ran the next command with the old ones — after a drop
    # from root, as root (the library's regression suite drops the user;
    # here only the group changes, so the new keeper can still reach the
    # package in CI's private temporary directory).
    script = (
        "import os, tether\n"
        "before = tether.run(['id', '-g'], capture_output=True, cwd='/').stdout\n"
        "os.setgroups([]); os.setresgid(65534, 65534, 65534)\n"
        "after = tether.run(['id', '-g'], capture_output=True, cwd='/').stdout\n"
        "print(before.decode().strip(), after.decode().strip())\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "65534"], out
