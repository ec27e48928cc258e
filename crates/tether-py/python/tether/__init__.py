"""tether for Python: run commands whose whole process tree is contained,
identified, and dead when this process is done with it — however it ends,
``SIGKILL`` included.

``run`` and ``Popen`` have ``subprocess``'s shape, ``create_subprocess_exec``
and ``create_subprocess_shell`` ``asyncio``'s; ``start`` runs background
sessions (pipes or a PTY) to read from an offset, write to, wait on for a
line, and kill. Errors are the exceptions Python code already
catches (``FileNotFoundError``, ``PermissionError``, ``ValueError``,
``subprocess.TimeoutExpired``, ``subprocess.CalledProcessError``) or
tether's own (``KillIncomplete``, …), all in this module.

The wheel carries the ``tether`` executable: the extension's keeper (a
small process per command that holds its tree and kills it when this
process dies; kept for the next command, see ``set_warm_keepers``) and the
CLI on ``PATH`` (``tether mcp`` is the MCP server).
Install: ``pip install process-tether``.
"""

from __future__ import annotations

import os as _os

from . import _native
from ._native import Limit, LimitReport

# What `import tether` loads is only the extension and the keeper's path:
# the rest — `subprocess` (which brings `re`, `enum`, `locale`, `signal`,
# `threading`, …: ~2/3 of the old import's 20–70 ms), `typing`, the
# modules of `Popen`, sessions, `spawn`, asyncio — loads at the first use
# of a name that needs it (PEP 562), so a program that imports tether and
# runs nothing yet pays ~2 ms (docs/benchmarks.md, "Python").
#: Every public name and the module it lives in.
_LAZY = {
    **dict.fromkeys(
        ("CalledProcessError", "ContainmentUnavailable", "InheritedHandleError", "KeeperError",
         "KillIncomplete", "SessionNotFound", "StdinQueueFull", "TetherError", "TimeoutExpired",
         "TooManySessions", "Unsupported"),
        "_errors",
    ),
    **dict.fromkeys(("Process", "create_subprocess_exec", "create_subprocess_shell"), "_asyncio"),
    **dict.fromkeys(
        ("DEVNULL", "PIPE", "STDOUT", "CompletedProcess", "KillResult", "Popen", "call", "check_call",
         "check_output", "getoutput", "getstatusoutput", "run"),
        "_popen",
    ),
    **dict.fromkeys(
        ("AsyncSession", "Killing", "Match", "Session", "WaitResult", "max_sessions", "session",
         "sessions", "set_max_sessions", "start_async"),
        "_session",
    ),
    # `start` is `_session.start` with durable=True added (_durable.py).
    **dict.fromkeys(("DurableSession", "attach", "durable_sessions", "start"), "_durable"),
    **dict.fromkeys(("EOF", "TIMEOUT", "spawn"), "_spawn"),
    "executable": "_keeper",
}

#: `typing.TYPE_CHECKING` without importing `typing` (type checkers take
#: any name `TYPE_CHECKING` as true).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._asyncio import Process, create_subprocess_exec, create_subprocess_shell
    from ._errors import (
        CalledProcessError,
        ContainmentUnavailable,
        InheritedHandleError,
        KeeperError,
        KillIncomplete,
        SessionNotFound,
        StdinQueueFull,
        TetherError,
        TimeoutExpired,
        TooManySessions,
        Unsupported,
    )
    from ._keeper import executable
    from ._popen import (
        DEVNULL,
        PIPE,
        STDOUT,
        CompletedProcess,
        KillResult,
        Popen,
        call,
        check_call,
        check_output,
        getoutput,
        getstatusoutput,
        run,
    )
    from ._session import (
        AsyncSession,
        Killing,
        Match,
        Session,
        WaitResult,
        max_sessions,
        session,
        sessions,
        set_max_sessions,
        start_async,
    )
    from ._durable import DurableSession, attach, durable_sessions, start
    from ._spawn import EOF, TIMEOUT, spawn


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tether' has no attribute {name!r}")
    value = getattr(__import__(f"{__name__}.{module}", fromlist=[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(_LAZY))


__version__: str = _native.__version__


#: Keepers of finished commands kept for the next ones (see
#: ``set_warm_keepers``).
DEFAULT_WARM_KEEPERS = 2


def set_warm_keepers(n: int) -> None:
    """Keeps up to ``n`` keepers of finished commands waiting for the next
    ones (default ``DEFAULT_WARM_KEEPERS``, 2), which takes the keeper's own
    exec off every command but the first: ``run(['/bin/true'])`` costs
    ~1.35× ``subprocess.run`` instead of ~2.8× here. An idle keeper is a
    small child process of this one that dies with it (``SIGKILL``
    included); no thread of tether's runs for it, so an idle program still
    has none (``fork`` stays warning-free). A warm keeper serves a command
    only while this process still has the credentials, limits, umask,
    namespaces, … it had when that keeper started (else a fresh one does).
    0 lets them go (reaped before this returns) and starts a keeper per
    command."""
    if n < 0:
        raise ValueError(f"n must be >= 0, not {n}")
    _native.set_warm_keepers(n)


__all__ = [
    "AsyncSession",
    "DurableSession",
    "attach",
    "durable_sessions",
    "CalledProcessError",
    "CompletedProcess",
    "ContainmentUnavailable",
    "DEFAULT_WARM_KEEPERS",
    "DEVNULL",
    "EOF",
    "InheritedHandleError",
    "KeeperError",
    "KillIncomplete",
    "KillResult",
    "Killing",
    "Limit",
    "LimitReport",
    "Match",
    "PIPE",
    "Popen",
    "Process",
    "STDOUT",
    "Session",
    "SessionNotFound",
    "StdinQueueFull",
    "TIMEOUT",
    "TetherError",
    "TimeoutExpired",
    "TooManySessions",
    "Unsupported",
    "WaitResult",
    "call",
    "check_call",
    "check_output",
    "create_subprocess_exec",
    "create_subprocess_shell",
    "executable",
    "getoutput",
    "getstatusoutput",
    "max_sessions",
    "run",
    "session",
    "sessions",
    "spawn",
    "set_max_sessions",
    "set_warm_keepers",
    "start",
    "start_async",
]

from . import _keeper  # noqa: E402

_keeper.install()
set_warm_keepers(DEFAULT_WARM_KEEPERS)

if hasattr(_os, "register_at_fork"):
    # A child forked without exec is not the owner: it drops the parent's
    # background-session state (the library already cut its copies of the
    # parent's keeper sockets); its handles then raise InheritedHandleError.
    _os.register_at_fork(after_in_child=_native.after_fork_in_child)
