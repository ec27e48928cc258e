"""tether's exceptions. Each subclasses what Python code already catches
where one fits: a program that is not found raises ``FileNotFoundError``,
one that cannot be executed ``PermissionError``, bad arguments
``ValueError``/``TypeError`` (those are the builtins themselves); a
timeout raises a ``subprocess.TimeoutExpired``, ``check=True`` a
``subprocess.CalledProcessError``."""

from __future__ import annotations

import subprocess
from typing import Any, List, Optional, Tuple

__all__ = [
    "TetherError",
    "KillIncomplete",
    "SessionNotFound",
    "TooManySessions",
    "StdinQueueFull",
    "ContainmentUnavailable",
    "KeeperError",
    "InheritedHandleError",
    "Unsupported",
    "TimeoutExpired",
    "CalledProcessError",
]


class TetherError(Exception):
    """Base of tether's own errors."""


class KillIncomplete(TetherError):
    """A kill could not empty the tree: ``survivors`` lists ``(pid,
    command)`` of what is still alive. The command stays tracked and
    killable."""

    survivors: List[Tuple[int, str]]

    def __init__(self, message: str, survivors: List[Tuple[int, str]]) -> None:
        super().__init__(message)
        self.survivors = list(survivors)


class SessionNotFound(TetherError, LookupError):
    """No background session has this id (or the prefix is ambiguous or too
    short; the message says which)."""


class TooManySessions(TetherError):
    """The registry runs its maximum of live sessions (``limit``); nothing
    was started and nothing running was touched."""

    limit: int

    def __init__(self, message: str, limit: int) -> None:
        super().__init__(message)
        self.limit = limit


class StdinQueueFull(TetherError):
    """Too many bytes are queued for a session's stdin and not yet read."""


class ContainmentUnavailable(TetherError):
    """The containment asked for cannot be had on this system."""


class KeeperError(TetherError):
    """tether's keeper (the bundled ``tether`` executable) could not be
    found, started or talked to, or died."""


class InheritedHandleError(TetherError):
    """The handle was inherited across ``fork()``: its tree belongs to
    process ``owner_pid`` (which still holds it, and whose death still kills
    it). Start the child's own commands in the child."""

    owner_pid: int

    def __init__(self, message: str, owner_pid: int) -> None:
        super().__init__(message)
        self.owner_pid = owner_pid


class Unsupported(TetherError, NotImplementedError):
    """This platform cannot do what was asked; nothing was started."""


class TimeoutExpired(subprocess.TimeoutExpired):
    """The timeout passed. Raised only after the whole tree is dead;
    ``output``/``stderr`` hold what was captured until then,
    ``descendants_killed`` how many processes besides the main one the kill
    ended."""

    descendants_killed: int

    def __init__(
        self,
        cmd: Any,
        timeout: float,
        output: Optional[Any] = None,
        stderr: Optional[Any] = None,
        descendants_killed: int = 0,
    ) -> None:
        super().__init__(cmd, timeout, output, stderr)
        self.descendants_killed = descendants_killed


class CalledProcessError(subprocess.CalledProcessError):
    """``check=True`` and the command exited non-zero. ``limit_hit`` says
    when a limit was why (``"memory"``: the kernel killed it for its memory
    limit; ``"pids"``: forks were refused), else ``None``."""

    descendants_killed: int
    limit_hit: Optional[str]

    def __init__(
        self,
        returncode: int,
        cmd: Any,
        output: Optional[Any] = None,
        stderr: Optional[Any] = None,
        descendants_killed: int = 0,
        limit_hit: Optional[str] = None,
    ) -> None:
        super().__init__(returncode, cmd, output, stderr)
        self.descendants_killed = descendants_killed
        self.limit_hit = limit_hit

    def __str__(self) -> str:
        text = super().__str__()
        if self.limit_hit is not None:
            text += f" (it ran into its {self.limit_hit} limit)"
        return text
