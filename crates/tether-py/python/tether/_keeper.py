"""Where the ``tether`` executable is: the one this distribution installed
on ``PATH`` (the wheel carries it once, in its scripts: ``<venv>/bin/tether``),
found through the distribution's installed ``RECORD`` — the installer's own
list of what it put where, so right for a venv, ``--user``, ``--prefix`` or
a system install alike — else ``$TETHER_BIN`` (for a build without one);
never a ``tether`` searched for on ``PATH``. The extension uses it as its
keeper (``$TETHER_KEEPER``, the library's own override, still wins)."""

from __future__ import annotations

import os
import sys

from . import _native

TYPE_CHECKING = False  # (not `typing`'s: importing it costs ~2 ms)
if TYPE_CHECKING:
    from typing import Dict, Optional

_EXE = "tether.exe" if sys.platform == "win32" else "tether"
#: The small keeper program the wheel installs beside it (not on Windows).
_KEEPER = "tether-keeper"
_PACKAGE = os.path.dirname(os.path.abspath(__file__))


def _record_path(line: str) -> str:
    """The path field of a RECORD row (CSV: path,hash,size)."""
    if line.startswith('"'):
        import csv

        return next(csv.reader([line]))[0]
    return line.rsplit(",", 2)[0]


def _from_record() -> Dict[str, str]:
    """The installed ``tether`` and ``tether-keeper`` that the RECORD of
    this distribution lists, by name (empty if there is none)."""
    found: Dict[str, str] = {}
    site = os.path.dirname(_PACKAGE)
    try:
        infos = sorted(n for n in os.listdir(site) if n.startswith("process_tether-") and n.endswith(".dist-info"))
    except OSError:
        infos = []
    for info in infos:
        try:
            with open(os.path.join(site, info, "RECORD"), encoding="utf-8") as f:
                rows = f.read().splitlines()
        except OSError:
            continue
        for row in rows:
            path = _record_path(row)
            name = path.replace("\\", "/").rsplit("/", 1)[-1]
            if name in (_EXE, _KEEPER) and name not in found:
                full = os.path.normpath(os.path.join(site, path))
                if os.path.isfile(full):
                    found[name] = full
        if _EXE in found:
            return found
        found.clear()
    if not infos:
        # An editable install: the package is the source tree, its
        # dist-info elsewhere on sys.path (slower to find: only here).
        try:
            from importlib import metadata

            files = metadata.distribution("process-tether").files or []
        except Exception:
            files = []
        for file in files:
            if file.name in (_EXE, _KEEPER) and file.name not in found:
                full = os.path.normpath(str(file.locate()))
                if os.path.isfile(full):
                    found[file.name] = full
        if _EXE not in found:
            found.clear()
    return found


#: What this install carries: ``tether`` and, beside it, ``tether-keeper``.
INSTALLED = _from_record()
#: The executable the wheel installed (``None`` for a build without one).
BUNDLED: Optional[str] = INSTALLED.get(_EXE)
#: The keeper the wheel installed beside it (not on Windows).
BUNDLED_KEEPER: Optional[str] = INSTALLED.get(_KEEPER)


def executable() -> Optional[str]:
    """The ``tether`` executable this package uses, or ``None`` if there is
    none (spawns then fail with ``KeeperError`` naming where it looked)."""
    if BUNDLED is not None and os.path.isfile(BUNDLED):
        return BUNDLED
    override = os.environ.get("TETHER_BIN")
    if override and os.path.isfile(override):
        return override
    return None


def install() -> None:
    """Points the extension at its keeper: the small ``tether-keeper`` the
    wheel installs beside the executable (it starts several times faster),
    else the executable itself."""
    exe = executable()
    if exe is not None and exe == BUNDLED and BUNDLED_KEEPER is not None and os.path.isfile(BUNDLED_KEEPER):
        _native.set_keeper(BUNDLED_KEEPER)
    else:
        _native.set_keeper(exe or os.path.join(_PACKAGE, "bin", _EXE))
