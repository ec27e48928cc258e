"""A command that reads the owner's controlling terminal works, as under
`subprocess`: `run` (from the main thread) and `Popen(foreground=True)`
give the command's process group the terminal's foreground while it runs,
as a shell gives it to a job, and the owner has it back afterwards — after
an exit, a timeout, a kill, an interrupted wait. An owner in the
background, or a `run` from another thread, leaves the terminal alone.

The test plays the terminal: it holds the master of a PTY whose slave is
the owner's controlling terminal (`setsid -c`: a session of its own, the
PTY its terminal, the owner's group its foreground).

Before the fix, `tether.run(["sh", "-c", "read x"])` on a terminal stopped
the command with SIGTTIN (its group was never the foreground) and waited
for ever."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

from conftest import tagged_env, wait_all_dead

#: Long enough for events that come in milliseconds.
BOUND = 20.0

#: The command: reads a line, then says what its process group is and which
#: group has the terminal's foreground (`/proc/$$/stat`: fields 5 and 8).
READER = ["sh", "-c", "read x; set -- $(cat /proc/$$/stat); echo got:$x pgrp:$5 fg:$8"]


class Terminal:
    """An owner running `script` on a terminal of the test's."""

    def __init__(self, script: str, tag: str) -> None:
        self.master, slave = os.openpty()
        self.owner = subprocess.Popen(
            ["setsid", "-c", sys.executable, "-c", script],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env={**tagged_env(tag), "READER": repr(READER)},
        )
        os.close(slave)
        self.text = ""

    def expect(self, needle: str) -> str:
        """Waits (bounded) for a line containing `needle`; returns it."""
        deadline = time.monotonic() + BOUND
        while True:
            for line in self.text.splitlines():
                if needle in line:
                    self.text = self.text[self.text.index(line) + len(line) :]
                    return line
            left = deadline - time.monotonic()
            ready = select.select([self.master], [], [], max(left, 0))[0] if left > 0 else []
            if not ready:
                raise AssertionError(f"{needle!r} never came; the terminal shows {self.text!r}")
            try:
                chunk = os.read(self.master, 4096)
            except OSError:  # EIO: every slave closed
                chunk = b""
            if not chunk:
                raise AssertionError(f"{needle!r} never came before EOF: {self.text!r}")
            self.text += chunk.decode(errors="replace")

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def close(self) -> int:
        """The owner's exit status (bounded). Called while an assertion is
        on its way out too: then an owner still waiting for input is killed
        rather than waited for, so that the assertion is what the test
        reports (a TimeoutExpired here hid it once in CI)."""
        try:
            if sys.exc_info()[0] is not None:
                self.owner.kill()
            return self.owner.wait(BOUND)
        finally:
            os.close(self.master)


def words(line: str) -> dict:
    return dict(w.split(":", 1) for w in line.split() if ":" in w)


#: The owner: each way a foreground command can end, then whether the
#: owner's group has the terminal back (`back:True`).
OWNER = r"""
import ast, os, signal, sys, threading, tether
signal.signal(signal.SIGINT, signal.default_int_handler)
READER = ast.literal_eval(os.environ["READER"])
def back(what):
    print(f"{what} back:{os.tcgetpgrp(0) == os.getpgrp()}", flush=True)
print("owner pgrp:%d" % os.getpgrp(), flush=True)

# 1. run: the typed line reaches the command.
r = tether.run(READER)
print("run rc:%d" % r.returncode, flush=True)
back("run")

# 2. run with a timeout that passes while the command waits for a line.
try:
    tether.run(["sh", "-c", "echo reading; read x"], timeout=1)
except tether.TimeoutExpired:
    print("timed-out", flush=True)
back("timeout")

# 3. Ctrl-C typed at the terminal: it reaches the command's group, which
# dies of it; the owner then takes it as its own, as under subprocess.
try:
    tether.run(["sh", "-c", "echo reading; read x"])
    print("ctrl-c not-interrupted", flush=True)
except KeyboardInterrupt:
    print("ctrl-c interrupted", flush=True)
back("ctrl-c")

# 3b. A command that handles Ctrl-C itself (as an editor does) and exits
# normally: the owner is not interrupted.
r = tether.run(["sh", "-c", "trap 'echo trapped; exit 7' INT; echo reading; read x"])
print("trap rc:%d" % r.returncode, flush=True)

# 4. Popen(foreground=True), killed while it waits for a line.
p = tether.Popen(["sh", "-c", "echo reading; read x"], foreground=True)
p.kill()
p.wait()
back("kill")

# 5. The owner interrupted (SIGINT to the owner itself) in a wait.
try:
    print("interrupt-me pid:%d" % os.getpid(), flush=True)
    tether.run(["sh", "-c", "echo reading; read x"])
except KeyboardInterrupt:
    print("interrupted", flush=True)
back("interrupt")

# 6. Popen(foreground=True) reads a line too.
p = tether.Popen(READER, foreground=True)
print("popen rc:%d" % p.wait(), flush=True)
back("popen")

# 6b. A prompt on /dev/tty while stdin is not the terminal (as sudo and
# ssh ask for a password): the command still gets the terminal.
r = tether.run(["sh", "-c", "echo prompt; read x </dev/tty; echo tty:$x"], stdin=tether.DEVNULL, capture_output=True)
print("devtty rc:%d out:%s" % (r.returncode, r.stdout.decode().split()[-1]), flush=True)
back("devtty")

# 7. run from another thread: the terminal stays with the owner.
t = threading.Thread(target=lambda: tether.run(["sh", "-c", "set -- $(cat /proc/$$/stat); echo thread pgrp:$5 fg:$8"]))
t.start(); t.join()
back("thread")
"""


# Once a flake (1 in ~8 CI runs; 4 in 100 here under 6 busy loops): a
# Ctrl-C that reached the owner while it waited for the keeper's "started"
# (step 5) was raised as the spawn returned, the Popen dropped unseen, and
# the terminal given back while its command still sat in `read` — which
# then took the "w" of "world" typed for step 6 (and the owner waited for
# ever at step 6b). Fixed in the binding's spawn and the tree's drop
# (test_interrupt.py has the regression test).
def test_commands_read_the_terminal_and_the_owner_gets_it_back(tag: str) -> None:
    term = Terminal(OWNER, tag)
    try:
        owner_group = words(term.expect("owner pgrp:"))["pgrp"]
        term.type("hello\n")
        got = words(term.expect("got:"))
        assert got["got"] == "hello"
        assert got["fg"] == got["pgrp"] != owner_group, got  # the command's group had it
        assert term.expect("run rc:").endswith("rc:0")
        assert term.expect("run back:").endswith("back:True")

        term.expect("reading")
        term.expect("timed-out")
        assert term.expect("timeout back:").endswith("back:True")

        term.expect("reading")
        term.type("\x03")  # Ctrl-C: SIGINT to the terminal's foreground group
        assert term.expect("ctrl-c ").endswith("ctrl-c interrupted")
        assert term.expect("ctrl-c back:").endswith("back:True")

        term.expect("reading")
        term.type("\x03")
        assert term.expect("trap rc:").endswith("rc:7")

        assert term.expect("kill back:").endswith("back:True")

        pid = int(words(term.expect("interrupt-me"))["pid"])
        # Once the command runs, the owner is inside `run`: a SIGINT to the
        # owner alone (not the terminal's group) raises KeyboardInterrupt
        # there, and `run` kills the command on the way out.
        term.expect("reading")
        os.kill(pid, signal.SIGINT)
        term.expect("interrupted")
        assert term.expect("interrupt back:").endswith("back:True")

        term.type("world\n")
        got = words(term.expect("got:"))
        assert got["got"] == "world" and got["fg"] == got["pgrp"] != owner_group, got
        assert term.expect("popen rc:").endswith("rc:0")
        assert term.expect("popen back:").endswith("back:True")

        # Its output is captured: nothing says when it reads; the typed line
        # waits in the terminal's queue until it does.
        term.type("secret\n")
        assert term.expect("devtty rc:").endswith("rc:0 out:tty:secret")
        assert term.expect("devtty back:").endswith("back:True")

        thread = words(term.expect("thread pgrp:"))
        assert thread["fg"] == owner_group != thread["pgrp"], thread
        assert term.expect("thread back:").endswith("back:True")
    finally:
        status = term.close()
    assert status == 0
    assert wait_all_dead(tag, 10) == []


#: An owner in the background of its terminal (a group of its own that is
#: not the foreground): its command must not take the terminal.
BACKGROUND_OWNER = r"""
import os, subprocess, sys
print("leader pgrp:%d" % os.getpgrp(), flush=True)
child = subprocess.Popen([sys.executable, "-c", '''
import os, tether
r = tether.run(["sh", "-c", "set -- $(cat /proc/$$/stat); echo bg pgrp:$5 fg:$8"])
print("bg owner back:%s" % (os.tcgetpgrp(0) != os.getpgrp()), flush=True)
'''], preexec_fn=os.setpgrp)
child.wait()
print("leader back:%s" % (os.tcgetpgrp(0) == os.getpgrp()), flush=True)
"""


def test_a_background_owner_leaves_the_terminal_alone(tag: str) -> None:
    term = Terminal(BACKGROUND_OWNER, tag)
    try:
        leader = words(term.expect("leader pgrp:"))["pgrp"]
        bg = words(term.expect("bg pgrp:"))
        assert bg["fg"] == leader != bg["pgrp"], bg
        assert term.expect("bg owner back:").endswith("back:True")
        assert term.expect("leader back:").endswith("back:True")
    finally:
        status = term.close()
    assert status == 0
    assert wait_all_dead(tag, 10) == []
