"""An asyncio agent's shell tool, moved from asyncio.create_subprocess_shell
to tether's with one import: the same Process, but a command's whole tree —
setsid'd and nohup'd children included — is dead when its result comes
back, when a timeout cancels it, and when the agent dies.

    python examples/python/asyncio_agent.py           # tether
    python examples/python/asyncio_agent.py --asyncio # the same tool on asyncio, for comparison

Needs `pip install process-tether` (or `pip install .` at the repository
root).
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from typing import List, Tuple

import tether

if "--asyncio" in sys.argv:
    create_subprocess_shell = asyncio.create_subprocess_shell
else:
    create_subprocess_shell = tether.create_subprocess_shell  # the one line that changes

TAG = f"ASYNCIO_AGENT_DEMO={uuid.uuid4().hex}"


async def shell(command: str, timeout: float) -> Tuple[int, str]:
    """What the agent's tool calls: the command's exit code and output, or
    -9 and what it printed before a timeout."""
    env = {**os.environ, TAG.split("=")[0]: TAG.split("=")[1]}
    proc = await create_subprocess_shell(command, stdout=asyncio.subprocess.PIPE,
                                         stderr=asyncio.subprocess.STDOUT, env=env)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        try:
            # Under asyncio (3.11) wait() also waits for the pipes to close:
            # a grandchild holding stdout holds it too.
            await asyncio.wait_for(proc.wait(), 5)
        except asyncio.TimeoutError:
            return -9, "(timed out; the kill did not end it)"
        return -9, "(timed out)"
    return proc.returncode or 0, out.decode()


def survivors() -> List[int]:
    """Processes carrying this run's tag in their environment."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if TAG.encode() in f.read().split(b"\0"):
                    found.append(int(pid))
        except OSError:
            pass
    return found


async def main() -> None:
    # A build that leaves a daemon behind, holding the output pipe: under
    # asyncio, communicate() waits for the daemon (here: the timeout).
    print(await shell("setsid sleep 300 & echo built", timeout=5))
    # A command that outlives its timeout, with a nohup'd helper.
    print(await shell("nohup sleep 300 >/dev/null 2>&1 & sleep 300", timeout=1))
    left = survivors()
    print(f"left running: {len(left)} {left}")
    for pid in left:  # the demo cleans up after asyncio, by its tag
        os.kill(pid, 9)


if __name__ == "__main__":
    asyncio.run(main())
