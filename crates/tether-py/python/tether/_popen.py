"""``tether.Popen`` and ``tether.run``: ``subprocess``'s shape, with the
whole process tree contained.

What differs from ``subprocess``:

* the command and everything it starts (``setsid``, double forks,
  ``nohup … &``, daemons) die with their owner — however this Python
  process ends, ``SIGKILL`` included — and with the ``Popen`` object if it
  is collected;
* when the main process exits, what it left behind is killed (``SIGTERM``,
  then ``SIGKILL`` after ``grace`` seconds), so ``wait()`` and
  ``communicate()`` return even when a grandchild holds the pipe
  (``keep_descendants=True`` lets them run on, still contained);
* ``kill()`` sends ``SIGKILL`` to the whole tree at once (returncode
  ``-9``, as ``subprocess``); ``kill_tree()`` is the graceful kill
  (``SIGTERM``, ``grace``, ``SIGKILL``) that returns only once the tree is
  verified empty (else ``KillIncomplete`` lists the survivors);
* ``run(timeout=…)`` raises ``TimeoutExpired`` after the whole tree is
  dead, never with a grandchild still holding the pipe;
* ``memory=``, ``pids=`` and ``cpu=`` limit the whole tree (see
  ``Popen``); ``limits`` says how each is enforced and ``limit_hit`` which
  one the command ran into.
"""

from __future__ import annotations

import io
import math
import os
import signal
import subprocess
import sys
import threading
import time
import types
import warnings
from typing import IO, Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _native
from ._errors import CalledProcessError, TimeoutExpired

__all__ = [
    "PIPE", "STDOUT", "DEVNULL", "Popen", "run", "call", "check_call", "check_output",
    "getoutput", "getstatusoutput", "CompletedProcess", "KillResult",
]

PIPE = subprocess.PIPE
STDOUT = subprocess.STDOUT
DEVNULL = subprocess.DEVNULL

#: Bytes written to a pipe at once by ``communicate`` (as ``subprocess``).
_PIPE_BUF = getattr(__import__("select"), "PIPE_BUF", 512)

StrOrBytesPath = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
Args = Union[StrOrBytesPath, Sequence[StrOrBytesPath]]
File = Union[None, int, IO[Any]]
#: A memory limit: bytes, or a size string such as ``"512M"``, ``"2G"``.
Size = Union[int, str]


class CompletedProcess(subprocess.CompletedProcess):  # type: ignore[type-arg]
    """What ``run`` returns: ``subprocess.CompletedProcess`` plus
    ``descendants_killed`` (processes besides the main one killed on the way
    to an empty tree), ``containment`` (what held the tree: ``subreaper``,
    ``pidns``, ``pgroup+tag``, ``job``), ``limits`` (the limits as applied,
    each with how it was enforced; falsy when none was asked for), ``limit_hit`` (``"memory"``, ``"pids"`` or ``None``),
    ``limits_escaped`` (processes found outside the session's cgroups, out
    of its limits: a command that could write its owner's cgroup moved
    them; they died with it all the same) and ``rusage``: what the whole tree used (``ru_utime``, ``ru_stime``
    in seconds, ``ru_maxrss`` in KiB, as ``os.wait4`` reports one
    process), ``None`` where not measured (macOS, Windows)."""

    descendants_killed: int
    containment: str
    limits: Optional[_native.LimitReport]
    limit_hit: Optional[str]
    limits_escaped: int
    rusage: Optional[_native.ResourceUsage]

    def __init__(
        self,
        args: Any,
        returncode: int,
        stdout: Any = None,
        stderr: Any = None,
        descendants_killed: int = 0,
        containment: str = "",
        limits: Optional[_native.LimitReport] = None,
        limit_hit: Optional[str] = None,
        rusage: Optional[_native.ResourceUsage] = None,
        limits_escaped: int = 0,
    ) -> None:
        super().__init__(args, returncode, stdout, stderr)
        self.descendants_killed = descendants_killed
        self.containment = containment
        self.limits = limits
        self.limit_hit = limit_hit
        self.limits_escaped = limits_escaped
        self.rusage = rusage


class KillResult:
    """What ``Popen.kill_tree()`` did: the main process's ``returncode``,
    ``descendants_killed`` (exact, from the keeper) and ``descendants``, the
    ``(pid, command)`` of the tree's other processes seen as the kill
    began."""

    __slots__ = ("returncode", "descendants_killed", "descendants")

    def __init__(
        self, returncode: int, descendants_killed: int, descendants: List[Tuple[int, str]]
    ) -> None:
        self.returncode = returncode
        self.descendants_killed = descendants_killed
        self.descendants = descendants

    def __repr__(self) -> str:
        return (
            f"KillResult(returncode={self.returncode}, "
            f"descendants_killed={self.descendants_killed}, descendants={self.descendants!r})"
        )


#: The selector's mark for the keeper's events in `_communicate_select`.
_EVENTS = object()
#: Seconds between two looks at the keeper of a `run` waiting on its pipes
#: (the guard thread's period, `link.rs`'s GUARD_PERIOD).
_PATROL = 0.2


def _holds_terminal() -> bool:
    """Whether stdin is a terminal whose foreground this process's group
    holds (what a foreground command is handed)."""
    tcgetpgrp = getattr(os, "tcgetpgrp", None)  # not on Windows
    try:
        return tcgetpgrp is not None and os.isatty(0) and tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


def _os_arg(value: Any) -> Any:
    """``value`` as ``subprocess`` passes it to ``execve``: ``os.fsencode``
    (bytes, surrogate escapes undone) on POSIX; a NUL is a ``ValueError``."""
    value = os.fspath(value)
    if not isinstance(value, (str, bytes)):
        raise TypeError(f"expected str, bytes or os.PathLike object, not {type(value).__name__}")
    if ("\0" in value) if isinstance(value, str) else (b"\0" in value):
        raise ValueError("embedded null byte")
    if os.name == "posix" and isinstance(value, str) and not value.isascii():
        return os.fsencode(value)
    return value


def _argv(
    args: Args, shell: bool, executable: Optional[StrOrBytesPath]
) -> Tuple[List[Any], Optional[Any]]:
    """(argv, the program to run when it is not argv[0]), as
    ``subprocess``'s ``_execute_child`` builds them."""
    if isinstance(args, (str, bytes)):
        argv: List[Any] = [args]
    elif isinstance(args, os.PathLike):
        if shell:
            raise TypeError("path-like args is not allowed when shell is true")
        argv = [args]
    else:
        argv = list(args)
    if shell:
        if sys.platform == "win32":
            argv = [os.environ.get("COMSPEC", "cmd.exe"), "/d", "/s", "/c", " ".join(map(str, argv))]
        else:
            argv = ["/bin/sh", "-c", *argv]
        if executable is not None:
            # As subprocess: with a shell, `executable` replaces it.
            argv[0] = executable
            executable = None
    if not argv:
        raise ValueError("args must name a program")
    argv = [_os_arg(a) for a in argv]
    return argv, (_os_arg(executable) if executable is not None else None)


def _environment(env: Optional[Mapping[Any, Any]]) -> Optional[List[Tuple[Any, Any]]]:
    if env is None:
        return None
    pairs = []
    for key, value in env.items():
        key, value = os.fspath(key), os.fspath(value)
        if not isinstance(key, (str, bytes)) or not isinstance(value, (str, bytes)):
            raise TypeError("environment keys and values must be str or bytes")
        if (b"=" in key) if isinstance(key, bytes) else ("=" in key):
            raise ValueError(f"illegal environment variable name: {key!r}")
        pairs.append((_os_arg(key), _os_arg(value)))
    return pairs


def _finite(timeout: Optional[float]) -> Optional[float]:
    """``None`` for no timeout or an infinite one (``subprocess`` takes
    ``float('inf')``)."""
    if timeout is not None and math.isinf(timeout) and timeout > 0:
        return None
    return timeout


def _gid(group: Any) -> int:
    if isinstance(group, str):
        import grp

        return grp.getgrnam(group).gr_gid
    if isinstance(group, int):
        return group
    raise TypeError(f"Group must be a string or an integer, not {type(group)}")


#: What ``restore_signals=True`` resets in ``subprocess`` (CPython ignores
#: them in itself).
_RESTORED = {getattr(signal, n) for n in ("SIGPIPE", "SIGXFZ", "SIGXFSZ") if hasattr(signal, n)}


#: The signals a disposition can be asked of (below 32: what the keeper
#: passes on), listed once: `signal.valid_signals()` per spawn cost ~75 µs.
_IGNORABLE = (
    [int(s) for s in signal.valid_signals() if 0 < s < 32 and s not in (signal.SIGKILL, signal.SIGSTOP)]
    if os.name == "posix" else []
)


def _ignored_signals(restore_signals: bool) -> List[int]:
    """The signals a command starts with ignored, as it would from
    ``subprocess``: those this process ignores (an exec keeps them),
    less ``SIGPIPE``/``SIGXFSZ`` with ``restore_signals``."""
    # `_signal`'s, not `signal`'s: the latter's enum conversion was ~1 µs
    # a call, 29 per spawn.
    raw = __import__("_signal")
    getsignal, ignore = raw.getsignal, raw.SIG_IGN
    return [
        sig for sig in _IGNORABLE
        if getsignal(sig) == ignore and not (restore_signals and sig in _RESTORED)
    ]


def _inheritable_fds(skip: Sequence[int]) -> List[int]:
    """This process's inheritable descriptors above 2 (what a command
    started with ``close_fds=False`` gets)."""
    try:
        names = os.listdir("/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd")
    except OSError:
        return []
    fds = []
    for name in names:
        fd = int(name)
        if fd <= 2 or fd in skip:
            continue
        try:
            if os.get_inheritable(fd):
                fds.append(fd)
        except OSError:  # the directory's own descriptor, closed by now
            continue
    return sorted(fds)


def _text_encoding(encoding: Optional[str]) -> str:
    if encoding is not None:
        return encoding
    text_encoding = getattr(io, "text_encoding", None)
    if text_encoding is not None:
        encoding = str(text_encoding(None))
        if encoding != "locale":
            return encoding
    import locale

    return locale.getpreferredencoding(False)


class Popen:
    """Starts ``args`` contained (see the module docs for what differs from
    ``subprocess.Popen``). ``grace``: seconds between the polite signal and
    ``SIGKILL`` in every kill (default 2). ``purpose``: written into every
    process's spawn tag (``[A-Za-z0-9._-]``, 1–64). ``keep_descendants``:
    let what the main process leaves behind run on (still contained, killed
    by ``kill()``, the context manager's exit, or the owner's death).

    ``subprocess.Popen``'s arguments, in its order, behave as there:
    ``start_new_session`` (``setsid``), ``process_group`` (0 only: the
    command always has a group of its own), ``pass_fds``/``close_fds``
    (passed on through the keeper), ``user``/``group``/``extra_groups``/
    ``umask``/``restore_signals``, ``pipesize``. ``preexec_fn`` runs in a
    fresh keeper's process (forked from this one) before it becomes the
    keeper; what it changes there reaches the command (see
    docs/python.md). ``startupinfo``/``creationflags`` are Windows-only
    (``ValueError`` elsewhere, as ``subprocess``).
    ``foreground=True``: when stdin is a terminal whose foreground this
    process holds, the command's group gets it while it runs (so it can
    read the terminal, and Ctrl-C reaches it, not this process) and this
    process has it back once the command's end is seen (``wait``, ``poll``,
    ``kill``) — as ``run`` does from the main thread.

    Limits, for the whole tree together (default: none): ``memory`` in
    bytes or as a size string (``"512M"``, ``"2G"``; past it the kernel's
    OOM killer kills processes of the tree, never this one), ``pids`` (most
    processes at once; past it ``fork`` fails) and ``cpu`` (cores,
    fractional; throttled, never killed). Enforced by the strongest
    mechanism the machine offers and never pretended: ``limits`` says per
    limit how (``cgroup2``, ``cgroup1``, ``job``, ``rlimit``, or ``none``
    with the reason), ``limit_hit`` which one the command ran into.
    ``require_limits=True`` refuses to start the command unless every limit
    given is enforced (``TetherError`` with the reason).
    ``TypeError``/``ValueError`` for a limit of the wrong type or value."""

    args: Args
    stdin: Optional[IO[Any]]
    stdout: Optional[IO[Any]]
    stderr: Optional[IO[Any]]
    pid: int
    returncode: Optional[int]
    encoding: Optional[str]
    errors: Optional[str]
    text_mode: Any
    pipesize: int
    _child: _native.Child

    def __init__(
        self,
        args: Args,
        bufsize: int = -1,
        executable: Optional[StrOrBytesPath] = None,
        stdin: File = None,
        stdout: File = None,
        stderr: File = None,
        preexec_fn: Optional[Any] = None,
        close_fds: bool = True,
        shell: bool = False,
        cwd: Optional[StrOrBytesPath] = None,
        env: Optional[Mapping[Any, Any]] = None,
        universal_newlines: Optional[bool] = None,
        startupinfo: Optional[Any] = None,
        creationflags: int = 0,
        restore_signals: bool = True,
        start_new_session: bool = False,
        pass_fds: Sequence[int] = (),
        *,
        user: Optional[Union[str, int]] = None,
        group: Optional[Union[str, int]] = None,
        extra_groups: Optional[Sequence[Union[str, int]]] = None,
        encoding: Optional[str] = None,
        errors: Optional[str] = None,
        text: Optional[bool] = None,
        umask: int = -1,
        pipesize: int = -1,
        process_group: Optional[int] = None,
        grace: float = 2.0,
        purpose: str = "run",
        keep_descendants: bool = False,
        memory: Optional[Size] = None,
        pids: Optional[int] = None,
        cpu: Optional[float] = None,
        foreground: bool = False,
        require_limits: bool = False,
        _timeout: Optional[float] = None,
        _attended: bool = False,
    ) -> None:
        # Set first: __del__ looks at them whatever fails below.
        self._child = None  # type: ignore[assignment]
        #: The native handle let go of (``close()``, or a finished tree):
        #: its pidfd and keeper link closed.
        self._released = False
        self._keep_descendants = keep_descendants
        self.returncode = None
        self.stdin = self.stdout = self.stderr = None
        if bufsize is None:
            bufsize = -1
        if not isinstance(bufsize, int):
            raise TypeError("bufsize must be an integer")
        if pipesize is None:
            pipesize = -1
        if preexec_fn is not None and not callable(preexec_fn):
            raise TypeError("preexec_fn must be callable")
        if sys.platform != "win32":
            if pass_fds and not close_fds:
                warnings.warn("pass_fds overriding close_fds.", RuntimeWarning)
                close_fds = True
            if startupinfo is not None:
                raise ValueError("startupinfo is only supported on Windows platforms")
            if creationflags != 0:
                raise ValueError("creationflags is only supported on Windows platforms")
        elif startupinfo is not None or creationflags != 0 or pass_fds or not close_fds:
            raise ValueError("tether starts Windows commands itself: startupinfo, creationflags, "
                             "pass_fds and close_fds=False are not supported")
        if process_group is not None and process_group != 0:
            raise ValueError(
                "process_group must be 0 or None: the command's tree is held with its own "
                "process group (it cannot join another)"
            )
        if (text is not None and universal_newlines is not None
                and bool(universal_newlines) != bool(text)):
            raise subprocess.SubprocessError(
                "Cannot disambiguate when both text and universal_newlines are supplied but "
                "different. Pass one or the other.")
        self.args = args
        self.encoding = encoding
        self.errors = errors
        self.pipesize = pipesize
        self.text_mode = encoding or errors or text or universal_newlines
        if self.text_mode and encoding is None:
            self.encoding = encoding = _text_encoding(None)
        line_buffering = False
        if self.text_mode and bufsize == 1:
            line_buffering = True
            # The binary streams underneath cannot buffer by lines.
            bufsize = -1
        self._text = bool(self.text_mode)
        self._encoding = encoding if self._text else None
        self._errors = errors or "strict"
        self._communication_started = False
        self._output: dict = {}
        self._input_offset = 0
        self._input: Optional[bytes] = None
        self._status: Optional[Any] = None
        self._timeout = _finite(_timeout)
        #: `run`/`call`: this thread waits at once, in `wait`/`poll` calls
        #: (see `_native.spawn`'s `attended`), and never hands the Popen out.
        self._attended = _attended
        argv, program = _argv(args, shell, executable)
        pairs = _environment(env)
        gid = None if group is None else _gid(group)
        gids = None
        if extra_groups is not None:
            if isinstance(extra_groups, str):
                raise ValueError("Groups must be a list, not a string")
            gids = [_gid(g) for g in extra_groups]
        uid = None
        if user is not None:
            if isinstance(user, str):
                import pwd

                uid = pwd.getpwnam(user).pw_uid
            elif isinstance(user, int):
                uid = user
            else:
                raise TypeError("User must be a string or an integer")
        for what, value in (("Group", gid), ("User", uid), *(("Group", g) for g in gids or ())):
            if value is not None and value < 0:
                raise ValueError(f"{what} ID cannot be negative, got {value}")
        # Ids are 32-bit (uid_t, gid_t): the errors _posixsubprocess gives.
        if uid is not None and uid >= 1 << 32:
            raise OverflowError("uid is greater than maximum")
        if gid is not None and gid >= 1 << 32:
            raise OverflowError("gid is greater than maximum")
        if any(g >= 1 << 32 for g in gids or ()):
            raise ValueError("extra_groups: a group id is greater than maximum")
        child_cwd = _os_arg(cwd) if cwd is not None else None
        to_close: List[int] = []  # the child's ends of pipes we made
        ours: List[int] = []  # our ends, closed if the spawn fails
        try:
            child_in, our_in = self._stdio(stdin, "stdin", to_close, ours)
            child_out, our_out = self._stdio(stdout, "stdout", to_close, ours)
            if stderr == STDOUT:
                child_err: Optional[int] = child_out if child_out is not None else 1
                our_err = None
            else:
                child_err, our_err = self._stdio(stderr, "stderr", to_close, ours)
            if pipesize > 0 and sys.platform != "win32":
                import fcntl

                if hasattr(fcntl, "F_SETPIPE_SZ"):
                    for fd in ours:
                        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, pipesize)
            passed = sorted({int(fd) for fd in pass_fds})
            if not close_fds:
                passed = _inheritable_fds(skip=to_close + ours)
            setup: Dict[str, Any] = {
                "executable": program,
                "new_session": bool(start_new_session),
                "pass_fds": [(fd, fd) for fd in passed],
                "umask": umask if umask >= 0 else None,
                "uid": uid,
                "gid": gid,
                "groups": gids,
                "ignore_signals": _ignored_signals(restore_signals),
            }
            self._child = _native.spawn(
                argv,
                cwd=child_cwd,
                env=pairs,
                stdin=child_in,
                stdout=child_out,
                stderr=child_err,
                grace=grace,
                timeout=self._timeout,
                purpose=purpose,
                keep_descendants=keep_descendants,
                memory=memory,
                pids=pids,
                cpu=cpu,
                foreground=foreground,
                require_limits=require_limits,
                setup=setup,
                preexec_fn=preexec_fn,
                attended=_attended,
            )
        except BaseException:
            for fd in ours:
                os.close(fd)
            raise
        finally:
            for fd in to_close:
                os.close(fd)
        self.pid = self._child.pid
        try:
            if our_in is not None:
                self.stdin = io.open(our_in, "wb", bufsize)
                if self._text:
                    self.stdin = io.TextIOWrapper(
                        self.stdin, encoding=self._encoding, errors=self._errors,
                        write_through=True, line_buffering=line_buffering,
                    )
            if our_out is not None:
                self.stdout = io.open(our_out, "rb", bufsize)
                if self._text:
                    self.stdout = io.TextIOWrapper(self.stdout, encoding=self._encoding, errors=self._errors)
            if our_err is not None:
                self.stderr = io.open(our_err, "rb", bufsize)
                if self._text:
                    self.stderr = io.TextIOWrapper(self.stderr, encoding=self._encoding, errors=self._errors)
        except BaseException:
            # An interrupt (Ctrl-C) before the caller holds this Popen: the
            # tree must not outlive it, nor keep the terminal (verified).
            try:
                self._child.kill()
            except Exception:
                pass
            raise

    def __class_getitem__(cls, item: Any) -> types.GenericAlias:
        """``Popen[bytes]``, as ``subprocess.Popen[bytes]``."""
        return types.GenericAlias(cls, item)

    @property
    def universal_newlines(self) -> bool:
        """``text_mode`` (its old name)."""
        return bool(self.text_mode)

    @universal_newlines.setter
    def universal_newlines(self, value: bool) -> None:
        self.text_mode = bool(value)

    @staticmethod
    def _stdio(
        spec: File, name: str, to_close: List[int], ours: List[int]
    ) -> Tuple[Optional[int], Optional[int]]:
        """(the child's descriptor — None: inherit, -1: null —, our end)."""
        if spec is None:
            return None, None
        if spec == PIPE:
            r, w = os.pipe()
            child, mine = (r, w) if name == "stdin" else (w, r)
            to_close.append(child)
            ours.append(mine)
            return child, mine
        if spec == DEVNULL:
            return -1, None
        if spec == STDOUT:
            raise ValueError("STDOUT is only valid for stderr")
        if isinstance(spec, int):
            if spec < 0:
                raise ValueError(f"bad {name}: {spec}")
            return spec, None
        fileno = getattr(spec, "fileno", None)
        if fileno is None:
            raise TypeError(f"{name} must be None, PIPE, DEVNULL, a descriptor or a file object, not {type(spec).__name__}")
        return fileno(), None

    # --- the tree -----------------------------------------------------------

    @property
    def containment(self) -> str:
        """What holds the tree: ``subreaper``, ``pidns``, ``pgroup+tag``, ``job``."""
        return str(self._handle_facts[0] if self._released else self._child.containment)

    @property
    def limits(self) -> _native.LimitReport:
        """The limits as applied: ``memory``, ``pids``, ``cpu``, each
        ``None`` (not asked for) or a ``Limit`` with ``value``,
        ``enforced`` (``cgroup2``, ``cgroup1``, ``job``, ``rlimit``,
        ``none``) and ``reason`` (why ``none``)."""
        return self._handle_facts[1] if self._released else self._child.limits

    @property
    def limit_hit(self) -> Optional[str]:
        """The limit the command ran into — ``"memory"`` (the kernel killed
        processes of the tree for it), ``"pids"`` (forks were refused) — or
        ``None``; known once it exited (``None`` before)."""
        return self._status.limit_hit if self._status is not None else None

    @property
    def descendants_killed(self) -> int:
        """Processes besides the main one killed on the way to an empty
        tree (0 until it is)."""
        return self._status.descendants_killed if self._status is not None else 0

    @property
    def limits_escaped(self) -> int:
        """Processes found outside the session's cgroups (out of its
        limits) when the keeper walked the tree; killed with it all the
        same. 0 until the tree is empty."""
        return self._status.limits_escaped if self._status is not None else 0

    @property
    def rusage(self) -> Optional[_native.ResourceUsage]:
        """What the whole tree used — ``ru_utime``, ``ru_stime`` (seconds),
        ``ru_maxrss`` (KiB, the largest process), as ``os.wait4`` reports
        one process; the keeper reaps the tree, so this process's
        ``RUSAGE_CHILDREN`` never shows it. ``None`` until it ended, and
        where not measured (macOS, Windows)."""
        return self._status.rusage if self._status is not None else None

    def descendants(self) -> List[Tuple[int, str]]:
        """``(pid, command)`` of the tree's live processes besides the main one."""
        if self._released:
            return []  # finished and let go: the tree is empty
        return list(self._child.descendants())

    def _settle(self, status: Any) -> int:
        self._status = status
        self.returncode = status.returncode
        if not self._keep_descendants:
            # The tree is empty (the main process exited, what it left was
            # killed): nothing is left to signal, so the handle's pidfd and
            # keeper link go now, as subprocess holds nothing for a reaped
            # child (30 communicated Popens held 60 descriptors, now 0).
            self._release()
        return int(status.returncode)

    def _release(self) -> None:
        if not self._released and self._child is not None:
            child = self._child
            self._handle_facts = (child.containment, child.limits)
            self._released = True
            child.close()
            # The native handle itself holds a copy of the keeper's socket
            # (for kills from another thread): it goes too.
            self._child = None  # type: ignore[assignment]

    def close(self) -> None:
        """Releases every descriptor the ``Popen`` holds at once — its
        pipes and its link to the keeper. A running command's tree (or what
        a finished one left with ``keep_descendants``) is killed first,
        verified (``kill_tree(0)``: ``KillIncomplete`` otherwise, and then
        nothing is released). Afterwards ``returncode``, ``poll()`` and
        ``wait()`` still answer; calling it again does nothing."""
        if self._released or self._child is None:
            self._close_streams()
            return
        self.kill_tree(0)
        self._close_streams()
        self._release()

    def _close_streams(self) -> None:
        for stream in (self.stdin, self.stdout, self.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass  # a BrokenPipeError flushing stdin: it is closed anyway

    def poll(self) -> Optional[int]:
        """The return code if the main process has exited (and what it left
        is gone), else ``None``; never blocks."""
        child = self._child  # (None once released, by another thread too)
        if self.returncode is None and child is not None:
            status = child.poll()
            if status is not None:
                self._settle(status)
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        """Waits for the main process to exit and the descendants it left to
        be killed; raises ``subprocess.TimeoutExpired`` (``tether``'s) after
        ``timeout`` seconds. The GIL is released; Ctrl-C raises
        ``KeyboardInterrupt`` at once and the tree stays contained."""
        if self.returncode is not None:
            return self.returncode
        timeout = _finite(timeout)
        child = self._child
        if child is None:  # released meanwhile by another thread: settled
            return int(self.returncode or 0)  # (set before the release)
        status = child.wait(timeout)
        if status is None:
            raise TimeoutExpired(self.args, timeout if timeout is not None else 0.0)
        return self._settle(status)

    def send_signal(self, sig: int) -> None:
        """Sends ``sig`` to the main process's process group (the command and
        what it started without leaving its group). Nothing once it exited
        (looked at first, as ``subprocess`` does)."""
        self.poll()
        if self.returncode is None:
            self._child.send_signal(sig)

    def terminate(self) -> None:
        """``SIGTERM`` to the main process's group, as ``subprocess``'s."""
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """``SIGKILL`` to every process of the tree at once, as
        ``subprocess``'s ``kill()`` (``returncode`` -9; returns at once,
        ``wait()`` for the end). Nothing once the command finished. For the
        graceful kill that returns once the tree is verified empty, see
        ``kill_tree``."""
        if self.returncode is None:
            self._child.kill_now()

    def kill_tree(self, grace: Optional[float] = None) -> KillResult:
        """Kills the whole tree gracefully — ``SIGTERM``, ``grace`` seconds
        (default: the ``Popen``'s), ``SIGKILL``, until nothing is left — and
        returns once it is verified empty (what the context manager's exit
        does). Also after the main process exited (ends what it left).
        Raises ``KillIncomplete`` with the survivors."""
        if self._released:
            # Finished and let go: nothing of the tree is left to kill.
            return KillResult(int(self.returncode or 0), 0, [])  # (released: settled)
        seen = [] if self._status is not None else self.descendants()
        status = self._child.kill(grace)
        self._settle(status)
        return KillResult(status.returncode, status.descendants_killed, seen)

    # --- I/O ----------------------------------------------------------------

    def communicate(
        self, input: Optional[Union[str, bytes]] = None, timeout: Optional[float] = None
    ) -> Tuple[Any, Any]:
        """Sends ``input``, reads stdout and stderr to their end, waits. A
        grandchild holding the pipe cannot make this hang: it is killed when
        the main process exits (unless ``keep_descendants``). After a
        ``TimeoutExpired``, call again to go on (nothing read is lost)."""
        if self._communication_started and input:
            raise ValueError("Cannot send input after starting communication")
        timeout = _finite(timeout)
        if (
            timeout is None
            and not self._communication_started
            and [self.stdin, self.stdout, self.stderr].count(None) >= 2
        ):
            # One stream (as subprocess does): read or write it whole,
            # without a selector — a read-all takes large reads, several
            # times fewer system calls than 32 KiB selector rounds.
            out = err = None
            follower = None
            if self.stdin is not None:
                self._check_input(input)
                if self._input is not None:
                    try:
                        self._raw(self.stdin).write(self._input)
                    except BrokenPipeError:
                        pass
                    self._close_stdin()
            elif self.stdout is not None:
                out, follower = self._read_all(self.stdout)
            elif self.stderr is not None:
                err, follower = self._read_all(self.stderr)
            self._communication_started = True
            try:
                self.wait()
            except KeyboardInterrupt:
                raise  # the follower ends with the command
            except BaseException:
                if follower is not None:
                    follower.join()
                raise
            if follower is not None:
                follower.join()
            return out, err
        # A copy of the keeper's socket, polled beside the pipes (see
        # _read_all).
        events = (self._child.events_fd()
                  if os.name == "posix" and self._streams() and not self._released else None)
        endtime = None if timeout is None else time.monotonic() + timeout
        try:
            self._check_input(input)
            try:
                if os.name == "posix":
                    self._communicate_select(endtime, timeout, events)
                else:
                    self._communicate_threads(endtime, timeout)
            finally:
                self._communication_started = True
        finally:
            if events is not None:
                os.close(events)
        remaining = None if endtime is None else max(0.0, endtime - time.monotonic())
        try:
            self.wait(remaining)
        except subprocess.TimeoutExpired:
            raise TimeoutExpired(self.args, timeout or 0.0, *self._partial()) from None
        return self._collect()

    def _read_all(self, stream: Any) -> Tuple[Any, Optional[threading.Thread]]:
        """Reads `stream` to its end and closes it, following the keeper
        meanwhile (POSIX): processes of the tree may hold the pipe open as
        long as they live, so if the keeper is SIGKILLed only a wait on it
        notices. That wait runs in a thread beside the read (returned, to
        join after the caller's own `wait()`, which raises the loss): it
        kills the orphans then, which ends the read."""
        follower = None
        # (Released: the tree is empty, the pipes end without a keeper to follow.)
        if os.name == "posix" and not self._released:

            def follow() -> None:
                try:
                    self._child.wait()
                except BaseException:  # the caller's wait() raises it
                    pass

            follower = threading.Thread(target=follow, daemon=True)
            follower.start()
        try:
            return stream.read(), follower
        finally:
            stream.close()

    def _check_input(self, input: Optional[Union[str, bytes]]) -> None:
        if self._communication_started or self.stdin is None:
            return
        if isinstance(input, str):
            input = input.encode(self._encoding or "utf-8", self._errors)
        self._input = input if input else None
        self._input_offset = 0
        try:
            self.stdin.flush()
        except BrokenPipeError:
            pass
        if self._input is None:
            self._close_stdin()

    def _close_stdin(self) -> None:
        if self.stdin is not None:
            try:
                self.stdin.close()
            except BrokenPipeError:
                pass

    def _streams(self) -> List[Any]:
        return [s for s in (self.stdout, self.stderr) if s is not None and not s.closed]

    def _raw(self, stream: Any) -> Any:
        return stream.buffer if isinstance(stream, io.TextIOWrapper) else stream

    def _communicate_select(
        self, endtime: Optional[float], timeout: Optional[float], events: Optional[int]
    ) -> None:
        import selectors

        readers = self._streams()
        for s in readers:
            self._output.setdefault(id(s), [])
        with selectors.DefaultSelector() as selector:
            if self._input is not None and self.stdin is not None and not self.stdin.closed:
                selector.register(self._raw(self.stdin), selectors.EVENT_WRITE)
            for s in readers:
                selector.register(self._raw(s), selectors.EVENT_READ, s)
            # The keeper's events (`events`, see communicate) are followed
            # while any pipe is open, not after.
            watching = 0
            if events is not None and selector.get_map():
                selector.register(events, selectors.EVENT_READ, _EVENTS)
                watching = 1
            patrolled = time.monotonic()
            while len(selector.get_map()) > watching:
                remaining = None if endtime is None else endtime - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutExpired(self.args, timeout or 0.0, *self._partial())
                if self._attended:
                    # No guard thread watches this command's keeper (see
                    # `run`): this loop does, a `poll()` each patrol period
                    # (it resumes a keeper the command stopped, which
                    # would otherwise report nothing, not even the end).
                    remaining = _PATROL if remaining is None else min(remaining, _PATROL)
                ready = selector.select(remaining)
                for key, _ in ready:
                    if key.data is _EVENTS:
                        # Takes the events in. A lost keeper raises
                        # KeeperError here, its orphans killed (which ends
                        # the pipes they held); once the command finished,
                        # nothing more comes.
                        if self.poll() is not None:
                            selector.unregister(key.fileobj)
                            watching = 0
                    elif key.data is None:  # stdin
                        chunk = self._input[self._input_offset : self._input_offset + _PIPE_BUF]  # type: ignore[index]
                        try:
                            self._input_offset += os.write(key.fd, chunk)
                        except BrokenPipeError:
                            selector.unregister(key.fileobj)
                            self._close_stdin()
                        else:
                            if self._input_offset >= len(self._input):  # type: ignore[arg-type]
                                selector.unregister(key.fileobj)
                                self._close_stdin()
                    else:
                        data = os.read(key.fd, 32768)
                        if not data:
                            selector.unregister(key.fileobj)
                            key.data.close()
                        self._output[id(key.data)].append(data)
                # By the clock, not by readiness: a command that stopped its
                # keeper and writes more often than the period keeps the
                # selector ready, and its keeper must be resumed all the same.
                if self._attended and time.monotonic() - patrolled >= _PATROL:
                    patrolled = time.monotonic()
                    if self.poll() is not None and watching and events is not None:
                        selector.unregister(events)
                        watching = 0

    def _communicate_threads(self, endtime: Optional[float], timeout: Optional[float]) -> None:
        readers = self._streams()
        threads = []
        for s in readers:
            self._output.setdefault(id(s), [])

            def drain(stream: Any = s) -> None:
                self._output[id(stream)].append(self._raw(stream).read())
                stream.close()

            t = threading.Thread(target=drain, daemon=True)
            t.start()
            threads.append(t)
        if self._input is not None and self.stdin is not None:
            try:
                self._raw(self.stdin).write(self._input)
            except BrokenPipeError:
                pass
            self._close_stdin()
        for t in threads:
            t.join(None if endtime is None else max(0.0, endtime - time.monotonic()))
            if t.is_alive():
                raise TimeoutExpired(self.args, timeout or 0.0, *self._partial())

    def _decode(self, chunks: List[bytes]) -> Any:
        data = b"".join(chunks)
        if not self._text:
            return data
        text = data.decode(self._encoding or "utf-8", self._errors)
        return text.replace("\r\n", "\n").replace("\r", "\n")

    def _partial(self) -> Tuple[Any, Any]:
        """What was read so far, in bytes (``None`` for nothing), as
        ``subprocess``'s ``TimeoutExpired`` carries it."""
        out = self._output.get(id(self.stdout)) if self.stdout is not None else None
        err = self._output.get(id(self.stderr)) if self.stderr is not None else None
        return (b"".join(out) if out else None, b"".join(err) if err else None)

    def _collect(self) -> Tuple[Any, Any]:
        out = self._output.get(id(self.stdout)) if self.stdout is not None else None
        err = self._output.get(id(self.stderr)) if self.stderr is not None else None
        return (
            self._decode(out) if out is not None else None,
            self._decode(err) if err is not None else None,
        )

    # --- lifetime -----------------------------------------------------------

    def __enter__(self) -> "Popen":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        for s in (self.stdout, self.stderr):
            if s is not None:
                s.close()
        try:
            # As subprocess: an error flushing stdin (BrokenPipeError) is
            # raised, after the wait below.
            if self.stdin is not None:
                self.stdin.close()
        finally:
            if exc_type is None:
                # As subprocess: wait for the main process; then nothing of
                # the tree may outlive the block.
                self.wait()
                self.kill_tree()
            else:
                # An exception (Ctrl-C among them) leaves the block: the
                # tree must not outlive it.
                try:
                    self.kill_tree()
                except Exception:
                    pass

    def __del__(self, _warn: Any = warnings.warn) -> None:
        # As subprocess: a running command dropped is a ResourceWarning.
        # Unlike subprocess, it does not run on: the handle's end kills the
        # tree (its keeper does, with the grace).
        if getattr(self, "_child", None) is None or self.returncode is not None:
            return
        try:
            if self.poll() is None:
                _warn(f"subprocess {self.pid} is still running", ResourceWarning, source=self)
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"<tether.Popen: returncode: {self.returncode} args: {self.args!r}>"


def run(
    *popenargs: Any,
    input: Optional[Union[str, bytes]] = None,
    capture_output: bool = False,
    timeout: Optional[float] = None,
    check: bool = False,
    **kwargs: Any,
) -> CompletedProcess:
    """Runs the command contained and returns a ``CompletedProcess``, as
    ``subprocess.run`` does (every ``Popen`` argument, positional ones
    included). With ``timeout``, the keeper kills the whole tree when it
    passes (``SIGTERM``, ``grace``, ``SIGKILL``) and then ``TimeoutExpired``
    is raised with the output so far (bytes, as ``subprocess``'s).
    ``check=True`` raises ``CalledProcessError`` for a non-zero exit.
    ``memory``/``pids``/``cpu`` limit the whole tree (see ``Popen``); the
    result's ``limits`` and ``limit_hit`` say how they were enforced and
    which one hit; ``require_limits=True`` refuses to run without them.
    Called from the main thread, the command is the terminal's foreground
    job while it runs (``Popen``'s ``foreground``): it can read the terminal,
    and a Ctrl-C typed there reaches it; if that ends it, this process gets
    the ``SIGINT`` too (``KeyboardInterrupt``), as under ``subprocess``."""
    if input is not None:
        if kwargs.get("stdin") is not None:
            raise ValueError("stdin and input arguments may not both be used.")
        kwargs["stdin"] = PIPE
    if capture_output:
        if kwargs.get("stdout") is not None or kwargs.get("stderr") is not None:
            raise ValueError("stdout and stderr arguments may not be used with capture_output.")
        kwargs["stdout"] = PIPE
        kwargs["stderr"] = PIPE
    timeout = _finite(timeout)
    if timeout is not None and timeout < 0:
        raise ValueError(f"timeout must be >= 0, not {timeout}")
    # As a shell runs a job without `&`: the command may read the terminal
    # (subprocess's child shares our process group). Only from the main
    # thread: a `run` in a worker thread must not take the terminal from a
    # main thread that reads it.
    foreground = kwargs.setdefault(
        "foreground", threading.current_thread() is threading.main_thread()
    )
    held = foreground and _holds_terminal()
    if len(popenargs) == 1 and input is None and kwargs.keys() <= {"foreground"} and os.name == "posix":
        return _run_plain(popenargs[0], timeout, check, bool(foreground), held)
    # This thread waits for the command at once and hands the Popen out to
    # no one: its waits watch the keeper — in `wait`, the one-stream read's
    # follower, the pipe loop's patrol — and no guard thread is started and
    # joined per command (~0.1 ms of a ~1.1 ms run). Not with `input` to
    # write: written to the command's only pipe, that blocking write
    # watches nothing (an empty one closes the pipe at once).
    process = Popen(*popenargs, _timeout=timeout, _attended=not input, **kwargs)
    try:
        with process:
            out, err = process.communicate(input)
            status = process._status
    except BaseException:
        # Left unfinished (Ctrl-C; a kill that failed, already raised or
        # swallowed): no waiter watches the keeper any more. The handle
        # goes now — the keeper kills what is left, and a thread of ours
        # that resumes it, if stopped, reaps it — rather than with the
        # traceback that holds it.
        process._release()
        raise
    if held and process.returncode == -signal.SIGINT:
        # A Ctrl-C typed at the terminal reached only the command's group:
        # this process takes it as its own, as bash does for a job killed
        # by SIGINT — `KeyboardInterrupt` by default, as under subprocess,
        # where both got it.
        signal.raise_signal(signal.SIGINT)
    if status is not None and status.timed_out:
        # As subprocess: what was read, in bytes, None for nothing.
        def raw(data: Any) -> Optional[bytes]:
            if isinstance(data, str):
                data = data.encode(process._encoding or "utf-8", process._errors)
            return data or None

        raise TimeoutExpired(
            process.args, timeout or 0.0, raw(out), raw(err),
            descendants_killed=status.descendants_killed,
        )
    retcode = process.returncode if process.returncode is not None else 0
    if check and retcode:
        raise CalledProcessError(
            retcode, process.args, out, err,
            descendants_killed=status.descendants_killed if status is not None else 0,
            limit_hit=process.limit_hit,
        )
    return CompletedProcess(
        process.args,
        retcode,
        out,
        err,
        descendants_killed=status.descendants_killed if status is not None else 0,
        containment=process.containment,
        limits=process.limits,
        limit_hit=process.limit_hit,
        rusage=process.rusage,
        limits_escaped=process.limits_escaped,
    )


def _run_plain(args: Any, timeout: Optional[float], check: bool, foreground: bool,
               held: bool) -> CompletedProcess:
    """``run(args)`` with every ``Popen`` argument at its default (the
    common case: no pipe, no input), without building a ``Popen``: the same
    spawn, wait, verified kill on the way out and result, ~25–60 µs less
    of Python per call (`bench/ab.py`, real-time priority: 1.31× → 1.25×
    ``subprocess.run`` for ``/bin/true``). Attended, as `run`'s: this
    thread waits at once and watches the keeper."""
    argv, program = _argv(args, False, None)
    child = _native.spawn(
        argv,
        grace=2.0,
        timeout=timeout,
        purpose="run",
        foreground=foreground,
        setup={
            "executable": program,
            "new_session": False,
            "pass_fds": [],
            "umask": None,
            "uid": None,
            "gid": None,
            "groups": None,
            "ignore_signals": _ignored_signals(True),
        },
        attended=True,
    )
    status = None
    try:
        while status is None:  # (`None` only for a wait with a timeout)
            status = child.wait(None)
    except BaseException:
        # As `Popen`'s `with` block: the tree must not outlive the call
        # (Ctrl-C among the causes); then the handle goes.
        try:
            child.kill(None)
        except Exception:
            pass
        child.close()
        raise
    containment, limits = child.containment, child.limits
    # The tree is empty: the pidfd and keeper link go now (`Popen._settle`).
    child.close()
    if held and status.returncode == -signal.SIGINT:
        signal.raise_signal(signal.SIGINT)  # as `run` (see there)
    if status.timed_out:
        raise TimeoutExpired(args, timeout or 0.0, None, None,
                             descendants_killed=status.descendants_killed)
    if check and status.returncode:
        raise CalledProcessError(status.returncode, args, None, None,
                                 descendants_killed=status.descendants_killed,
                                 limit_hit=status.limit_hit)
    return CompletedProcess(
        args,
        status.returncode,
        None,
        None,
        descendants_killed=status.descendants_killed,
        containment=str(containment),
        limits=limits,
        limit_hit=status.limit_hit,
        rusage=status.rusage,
        limits_escaped=status.limits_escaped,
    )


def call(*popenargs: Any, timeout: Optional[float] = None, **kwargs: Any) -> int:
    """Runs the command contained, waits, returns its ``returncode`` (as
    ``subprocess.call``; on a timeout the whole tree is killed)."""
    # This thread waits at once, and the Popen stays here (see `run`).
    p = Popen(*popenargs, _attended=True, **kwargs)
    try:
        with p:
            try:
                return p.wait(timeout=timeout)
            except BaseException:
                p.kill()
                raise
    except BaseException:
        p._release()
        raise


def check_call(*popenargs: Any, **kwargs: Any) -> int:
    """``call``, raising ``CalledProcessError`` for a non-zero exit."""
    retcode = call(*popenargs, **kwargs)
    if retcode:
        cmd = kwargs.get("args")
        if cmd is None:
            cmd = popenargs[0]
        raise CalledProcessError(retcode, cmd)
    return 0


def check_output(*popenargs: Any, timeout: Optional[float] = None, **kwargs: Any) -> Any:
    """The command's stdout (as ``subprocess.check_output``), contained;
    ``CalledProcessError`` for a non-zero exit."""
    for kw in ("stdout", "check"):
        if kw in kwargs:
            raise ValueError(f"{kw} argument not allowed, it will be overridden.")
    if "input" in kwargs and kwargs["input"] is None:
        # As subprocess: input=None means no input, not an inherited stdin.
        if kwargs.get("universal_newlines") or kwargs.get("text") or kwargs.get("encoding") \
                or kwargs.get("errors"):
            empty: Any = ""
        else:
            empty = b""
        kwargs["input"] = empty
    return run(*popenargs, stdout=PIPE, timeout=timeout, check=True, **kwargs).stdout


def getstatusoutput(cmd: Any, *, encoding: Optional[str] = None, errors: Optional[str] = None) -> Tuple[int, str]:
    """``(exitcode, output)`` of ``cmd`` in a shell, contained (as
    ``subprocess.getstatusoutput``)."""
    try:
        data = check_output(cmd, shell=True, text=True, stderr=STDOUT, encoding=encoding, errors=errors)
        exitcode = 0
    except subprocess.CalledProcessError as ex:
        data = ex.output
        exitcode = ex.returncode
    if data[-1:] == "\n":
        data = data[:-1]
    return exitcode, data


def getoutput(cmd: Any, *, encoding: Optional[str] = None, errors: Optional[str] = None) -> str:
    """The output of ``cmd`` in a shell, contained (as
    ``subprocess.getoutput``)."""
    return getstatusoutput(cmd, encoding=encoding, errors=errors)[1]
