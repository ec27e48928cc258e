"""Moving from subprocess to tether: the same calls — `run`, `Popen` +
`communicate`, `check_output` — with `import tether as subprocess`, and a
command whose children escape its process group (setsid, nohup, a double
fork). Under subprocess they outlive the call (and this process); under
tether they are dead when it returns. Then what an agent gets on top: a
background session read as it comes (`iter_output`, `fileno()` for
`select`), what the command's tree cost (`rusage`), and `close()`.

    python examples/python/subprocess_move.py               # tether
    python examples/python/subprocess_move.py --subprocess  # the same with subprocess

Needs `pip install process-tether` (or `pip install .` at the repository
root).
"""

from __future__ import annotations

import os
import select
import sys
import uuid

if "--subprocess" in sys.argv:
    import subprocess
else:
    import tether as subprocess  # type: ignore[no-redef]  # the one-line move

#: A build that starts a "daemon" which escapes its process group.
BUILD = "setsid sh -c 'exec sleep 300' >/dev/null 2>&1 & nohup sleep 300 >/dev/null 2>&1 & echo built"
TAG = f"SUBPROCESS_MOVE={uuid.uuid4().hex}"


def left_running() -> list:
    """Processes of this demo still running (found by a tag in their
    environment, never by name)."""
    mine = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if TAG.encode() in f.read().split(b"\0"):
                    mine.append(int(pid))
        except OSError:
            pass
    return mine


def main() -> int:
    env = {**os.environ, TAG.split("=")[0]: TAG.split("=")[1]}
    done = subprocess.run(BUILD, shell=True, capture_output=True, text=True, env=env)
    print("run:", done.returncode, done.stdout.strip())
    p = subprocess.Popen(["sh", "-c", BUILD], stdout=subprocess.PIPE, env=env)
    out, _ = p.communicate(timeout=30)
    print("Popen:", p.returncode, out)
    print("check_output:", subprocess.check_output(["echo", "ok"], text=True).strip())
    left = left_running()
    print("left running:", len(left))
    if "--subprocess" in sys.argv:
        for pid in left:  # clean up what subprocess left, by pid
            os.kill(pid, 9)
        return 0

    import tether

    # What the command's whole tree used: the keeper reaps it, so this
    # process's own RUSAGE_CHILDREN never sees it.
    cost = tether.run([sys.executable, "-c", "x = bytearray(32 << 20)"]).rusage
    if cost is not None:  # (None where not measured: macOS, Windows)
        print(f"rusage: {cost.ru_utime + cost.ru_stime:.3f} s CPU, {cost.ru_maxrss >> 10} MiB max RSS")

    # A background session, read as it comes; fileno() for select().
    s = tether.start(["sh", "-c", "for i in 1 2 3; do echo step $i; read x; done"], stdin=True)
    assert select.select([s.fileno()], [], [], 30)[0], "no output"
    for chunk in s.iter_output(timeout=30):
        print("session:", chunk.decode().strip())
        s.write("go\n")
    s.close()  # everything it held, released at once
    print("session:", s.info().state, s.returncode)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
