"""``python -m tether …`` runs the bundled ``tether`` executable (``tether
mcp``, ``tether run``, …) in place of this interpreter."""

from __future__ import annotations

import os
import subprocess
import sys

from ._keeper import executable


def main() -> None:
    exe = executable()
    if exe is None:
        sys.exit("tether: the tether executable is missing from this install (set TETHER_BIN)")
    argv = [exe, *sys.argv[1:]]
    if sys.platform == "win32":
        sys.exit(subprocess.call(argv))
    os.execv(exe, argv)


if __name__ == "__main__":
    main()
