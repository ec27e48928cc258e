"""Where the ``tether`` executable is: the one the wheel carries beside
this package (``tether/bin/tether``), else ``$TETHER_BIN`` (for a build
without one) — never a ``tether`` found on ``PATH`` by surprise. The
extension uses it as its keeper (``$TETHER_KEEPER``, the library's own
override, still wins)."""

from __future__ import annotations

import os
import sys
from typing import Optional

from . import _native

_EXE = "tether.exe" if sys.platform == "win32" else "tether"

#: Where the wheel puts the executable.
BUNDLED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", _EXE)


def executable() -> Optional[str]:
    """The ``tether`` executable this package uses, or ``None`` if there is
    none (spawns then fail with ``KeeperError`` naming where it looked)."""
    if os.path.isfile(BUNDLED):
        return BUNDLED
    override = os.environ.get("TETHER_BIN")
    if override and os.path.isfile(override):
        return override
    return None


#: The small keeper program the wheel puts beside it (not on Windows).
BUNDLED_KEEPER = os.path.join(os.path.dirname(BUNDLED), "tether-keeper")


def install() -> None:
    """Points the extension at its keeper: the small ``tether-keeper`` the
    wheel carries beside the executable (it starts several times faster),
    else the executable itself."""
    if executable() == BUNDLED and os.path.isfile(BUNDLED_KEEPER):
        _native.set_keeper(BUNDLED_KEEPER)
    else:
        _native.set_keeper(executable() or BUNDLED)
