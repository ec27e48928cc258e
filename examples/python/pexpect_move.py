"""Moving from pexpect to tether: the same REPL-driving code, with
`pexpect.spawn` replaced by `tether.spawn` — whose program (and anything it
starts, setsid'd or double-forked) dies with this process however it ends,
and whose terminal screen is rendered for you.

    python examples/python/pexpect_move.py            # tether.spawn
    python examples/python/pexpect_move.py --pexpect  # the same with pexpect

Needs `pip install process-tether` (and `pexpect` for `--pexpect`).
"""

from __future__ import annotations

import select
import sys


def drive(module) -> None:  # type: ignore[no-untyped-def]
    """What an agent's REPL tool does: wait for the prompt, send code, read
    the answer, notice a hang, end it."""
    child = module.spawn(sys.executable, ["-q", "-i"], encoding="utf-8", timeout=10)
    child.expect(">>> ")
    child.sendline("print(sum(range(10)))")
    child.expect(r"(\d+)\r\n")
    print("answer:", child.match.group(1))

    # A hang: TIMEOUT as a list entry instead of an exception.
    child.expect(">>> ")
    child.sendline("import time; time.sleep(1000)")
    if child.expect([">>> ", module.TIMEOUT], timeout=0.5) == 1:
        print("no prompt after 0.5 s: interrupting")
        child.sendcontrol("c")
        child.expect("KeyboardInterrupt")
        child.expect(">>> ")

    # fileno() is selectable, as pexpect's child_fd.
    child.sendline("print('ready')")
    ready, _, _ = select.select([child], [], [], 10)
    print("selectable:", bool(ready))
    child.expect("ready\r\n")
    child.expect(">>> ")

    child.sendline("exit(3)")
    child.expect(module.EOF)
    child.wait()
    print("exitstatus:", child.exitstatus, "signalstatus:", child.signalstatus)
    if hasattr(child, "screen"):
        print("the screen, as a terminal shows it:")
        for line in child.screen().lines:
            if line:
                print("  |", line)
    child.close()


if __name__ == "__main__":
    if "--pexpect" in sys.argv:
        import pexpect

        drive(pexpect)
    else:
        import tether

        drive(tether)
