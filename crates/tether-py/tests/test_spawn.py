"""tether.spawn: pexpect.spawn's shape on a PTY session, driven against
real programs (python3, sh, cat) on real terminals."""

from __future__ import annotations

import gc
import os
import select
import signal
import sys
import threading

import pytest

import tether
from conftest import ESCAPING_TREE, ESCAPING_TREE_MIN, fd_count, python_owner, tagged_env, tagged_pids, wait_all_dead, wait_for_count


def test_python_repl_prompt_sendline_before_after(tag: str) -> None:
    with tether.spawn(sys.executable, ["-q", "-i"], env=tagged_env(tag), encoding="utf-8") as c:
        assert c.expect(">>> ") == 0
        assert (c.before, c.after) == ("", ">>> ")
        c.sendline("print(6 * 7)")
        assert c.expect(r"(\d+)\r\n") == 0
        # The terminal echoed the line before the program's answer.
        assert c.before == "print(6 * 7)\r\n"
        assert c.after == "42\r\n" and c.match.group(1) == "42"
        c.expect(">>> ")
        c.sendline("exit(3)")
        assert c.expect(tether.EOF) == 0
        assert c.after is tether.EOF and "exit(3)" in c.before
        assert c.wait() == 3
        assert (c.exitstatus, c.signalstatus, c.isalive()) == (3, None, False)
        # tether's rendered screen of the same terminal.
        assert "42" in c.screen().lines
    assert tagged_pids(tag) == []


def test_pattern_lists_with_eof_and_timeout_markers(tag: str) -> None:
    c = tether.spawn("sh", ["-c", "echo one; read x; echo two:$x"], env=tagged_env(tag))
    # As pexpect, a bytes spawn takes ASCII str patterns too.
    assert c.expect([b"two", "one", tether.EOF, tether.TIMEOUT]) == 1
    assert c.after == b"one"
    # Nothing more comes until we write: the TIMEOUT marker matches, the
    # buffer is kept.
    assert c.expect([b"two", tether.EOF, tether.TIMEOUT], timeout=0.2) == 2
    assert c.after is tether.TIMEOUT
    c.sendline(b"x")
    assert c.expect_exact([b"two:x", tether.EOF]) == 0
    assert c.expect([b"never", tether.EOF, tether.TIMEOUT]) == 1
    assert c.wait() == 0
    c.close()


def test_timeout_and_eof_are_raised_when_not_in_the_list(tag: str) -> None:
    c = tether.spawn("sh", ["-c", "echo start; read x; exit 4"], env=tagged_env(tag))
    c.expect(b"start")
    with pytest.raises(tether.TIMEOUT):
        c.expect(b"never", timeout=0.2)
    with pytest.raises(tether.TIMEOUT):
        c.read_nonblocking(10, timeout=0.1)
    c.sendline(b"")
    with pytest.raises(tether.EOF):
        c.expect(b"never")
    with pytest.raises(tether.EOF):
        c.read_nonblocking(10, timeout=1)
    c.wait()
    assert c.exitstatus == 4 and c.status == 4 << 8
    c.close()
    with pytest.raises(ValueError):
        c.expect(b"x")


def test_terminate_force_kills_a_term_ignoring_tree(tag: str) -> None:
    # Ignores everything but SIGKILL (its sleeps inherit the ignoring).
    c = tether.spawn("sh", ["-c", "trap '' HUP TERM INT; echo ready; while :; do sleep 1; done"],
                     env=tagged_env(tag))
    c.expect(b"ready")
    assert c.terminate(force=True)
    assert (c.signalstatus, c.exitstatus, c.isalive()) == (9, None, False)
    assert tagged_pids(tag) == []
    c.close()


def test_terminate_reports_the_signal_that_ended_it(tag: str) -> None:
    # The PTY ladder's first signals are SIGHUP and SIGTERM together (a
    # hung-up terminal); a program that ignores only SIGHUP dies of SIGTERM.
    c = tether.spawn("sh", ["-c", "trap '' HUP; echo ready; exec sleep 1000"], env=tagged_env(tag))
    c.expect(b"ready")
    assert c.terminate()
    assert c.signalstatus == signal.SIGTERM and c.session.returncode == -signal.SIGTERM
    c.close()
    assert tagged_pids(tag) == []


def test_fileno_is_selectable_and_read_nonblocking(tag: str) -> None:
    c = tether.spawn("cat", env=tagged_env(tag))
    try:
        # No output can be there: cat has had no input.
        assert select.select([c], [], [], 0.1)[0] == []
        c.send(b"abc\n")
        assert select.select([c.fileno()], [], [], 30)[0] == [c.fileno()]
        got = b""
        while b"abc\r\nabc\r\n" not in got:  # the echo, then cat's copy
            got += c.read_nonblocking(100, timeout=30)
        c.sendeof()
        assert c.expect(tether.EOF) == 0
        # At the end the descriptor reads end-of-file, as a PTY master's would.
        assert select.select([c], [], [], 30)[0] == [c]
        assert os.read(c.fileno(), 10) == b""
        assert c.wait() == 0
    finally:
        c.close()


def test_setwinsize_is_what_stty_sees(tag: str) -> None:
    c = tether.spawn("sh", env=tagged_env(tag), dimensions=(24, 80))
    try:
        c.sendline(b"stty size")
        c.expect(rb"(\d+) (\d+)\r\n")
        assert c.match.groups() == (b"24", b"80")
        c.setwinsize(40, 100)
        assert c.getwinsize() == (40, 100)
        c.sendline(b"stty size")
        c.expect(rb"(\d+) (\d+)\r\n")
        assert c.match.groups() == (b"40", b"100")
    finally:
        c.close()
    assert tagged_pids(tag) == []


def test_sendcontrol_interrupts(tag: str) -> None:
    c = tether.spawn("sh", ["-c", "echo ready; exec sleep 1000"], env=tagged_env(tag))
    c.expect(b"ready")
    c.sendcontrol("c")
    c.expect(tether.EOF)
    assert c.wait() is None and c.signalstatus == signal.SIGINT
    c.close()


def test_readline_iteration_and_echo_off(tag: str) -> None:
    c = tether.spawn("sh", ["-c", "read x; echo got:$x; echo end"], env=tagged_env(tag),
                     echo=False, encoding="utf-8")
    c.sendline("hi")
    assert list(c) == ["got:hi\r\n", "end\r\n"]  # no echo of "hi"
    c.close()


def test_close_releases_the_descriptors_and_thread(tag: str) -> None:
    def once() -> None:
        c = tether.spawn("sh", ["-c", "echo hi"], env=tagged_env(tag))
        c.expect(tether.EOF)
        c.close()
        assert c.closed and c.fileno() == -1

    once()  # the engine, warm keepers: started once per process
    gc.collect()
    fds = fd_count()
    for _ in range(5):
        once()
    assert fd_count() == fds
    # Each pump thread was joined (the kernel may list a joined thread in
    # /proc/self/task a little longer: Python's view is the exact one).
    assert [t.name for t in threading.enumerate() if t.name.startswith("tether-spawn")] == []
    # A live one closed: killed, and its descriptors go too.
    c = tether.spawn("sleep", ["1000"], env=tagged_env(tag))
    c.close()
    assert c.signalstatus is not None and tagged_pids(tag) == []
    assert fd_count() == fds


def test_sigkilled_owner_takes_the_pty_tree(tag: str) -> None:
    owner = python_owner(
        f"""
import time, tether
c = tether.spawn("sh", ["-c", {ESCAPING_TREE!r}])
c.expect(b"ready")
print("ready", flush=True)
time.sleep(1000)
""",
        tag,
    )
    assert owner.stdout is not None
    assert owner.stdout.readline() == "ready\n"
    assert wait_for_count(tag, ESCAPING_TREE_MIN + 1, 10) >= ESCAPING_TREE_MIN + 1
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    assert wait_all_dead(tag, 10) == []


def test_owner_exits_with_a_spawn_left_open(tag: str) -> None:
    # The pump thread is blocked in a wait when the interpreter exits.
    owner = python_owner(
        """
import tether
c = tether.spawn("cat")
c.sendline(b"x")
c.expect(b"x")
print("ready", flush=True)
raise SystemExit(7)
""",
        tag,
    )
    out, _ = owner.communicate(timeout=60)
    assert (out, owner.returncode) == ("ready\n", 7)
    assert wait_all_dead(tag, 10) == []


def test_bad_input(tag: str) -> None:
    with pytest.raises(FileNotFoundError):
        tether.spawn("/nonexistent/program", env=tagged_env(tag))
    with pytest.raises(ValueError):
        tether.spawn("", env=tagged_env(tag))
    with tether.spawn("cat", env=tagged_env(tag)) as c:
        assert c.sendcontrol("1") == 0  # no such control character (as pexpect)
        with pytest.raises(TypeError):
            c.expect(1)
        with pytest.raises(tether.Unsupported):
            c.kill(signal.SIGUSR1)
    assert tagged_pids(tag) == []

