"""tether.create_subprocess_exec against asyncio's, interleaved in one run
(a ratio, never an absolute target): `/bin/true` started with stdout and
stderr piped, then communicate().

    python crates/tether-py/bench/asyncio_subprocess.py [N]   # with process-tether installed
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time

import tether


async def once(create) -> None:  # type: ignore[no-untyped-def]
    p = await create("/bin/true", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    await p.communicate()
    assert p.returncode == 0


async def main(n: int) -> None:
    # Warm both (the keeper, the loop's child watcher).
    for _ in range(5):
        await once(tether.create_subprocess_exec)
        await once(asyncio.create_subprocess_exec)
    ours, theirs = [], []
    for _ in range(n):
        t = time.perf_counter()
        await once(tether.create_subprocess_exec)
        ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        await once(asyncio.create_subprocess_exec)
        theirs.append(time.perf_counter() - t)
    a, b = statistics.median(ours), statistics.median(theirs)
    print("| what | tether | asyncio | ratio |")
    print("|---|---|---|---|")
    print(f"| `create_subprocess_exec('/bin/true')` + `communicate()`, median of {n} | "
          f"{a * 1e3:.2f} ms | {b * 1e3:.2f} ms | {a / b:.2f}× |")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 300))
