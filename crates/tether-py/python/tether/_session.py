"""Background sessions: what an agent's terminal tool keeps running while
it does other things — a dev server, a build, a REPL on a PTY — read from
an offset, written to, waited on for a line, killed, listed.

Every session's tree is contained like ``Popen``'s and dies with this
process. Output is captured byte-exact with absolute offsets: 1 MiB per
stream in memory, older bytes in a nameless spill file (256 MiB), so a read
from an old offset loses nothing until that cap (``dropped`` says when it
did). The sync and ``asyncio`` forms share one engine, whose thread runs
only while a session is live.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _native
from ._errors import InheritedHandleError
from ._popen import Size, StrOrBytesPath, _environment

__all__ = [
    "Session",
    "AsyncSession",
    "Match",
    "WaitResult",
    "start",
    "start_async",
    "sessions",
    "session",
]

#: Seconds ``wait`` waits by default.
DEFAULT_WAIT = 30.0


class Match:
    """Where ``until`` matched: ``[start, end)`` offsets and the text."""

    __slots__ = ("start", "end", "text")

    def __init__(self, start: int, end: int, text: bytes) -> None:
        self.start = start
        self.end = end
        self.text = text

    def __repr__(self) -> str:
        return f"Match(start={self.start}, end={self.end}, text={self.text!r})"


class WaitResult:
    """Why ``wait`` returned: ``status`` is ``"exited"`` (the main process
    ended), ``"matched"`` (``until`` matched: see ``match``) or
    ``"running"`` (the timeout passed — not an error); ``info`` is the
    session then."""

    __slots__ = ("status", "match", "info")

    def __init__(self, status: str, match: Optional[Match], info: Any) -> None:
        self.status = status
        self.match = match
        self.info = info

    @property
    def matched(self) -> bool:
        return self.match is not None

    @property
    def returncode(self) -> Optional[int]:
        return self.info.returncode  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"WaitResult(status={self.status!r}, match={self.match!r}, returncode={self.returncode})"


def _check_pty(pty: Union[bool, Tuple[int, int]]) -> Optional[Tuple[int, int]]:
    if pty is True:
        return (30, 120)
    if pty is False or pty is None:
        return None
    rows, cols = pty
    return (int(rows), int(cols))


def _start_op(
    args: Union[str, Sequence[StrOrBytesPath]],
    shell: bool,
    cwd: Optional[StrOrBytesPath],
    env: Optional[Mapping[Any, Any]],
    stdin: bool,
    separate_stderr: bool,
    pty: Union[bool, Tuple[int, int]],
    timeout: Optional[float],
    idle_timeout: Optional[float],
    grace: float,
    purpose: str,
    max_memory: Optional[int],
    spill_cap: Optional[int],
    memory: Optional[Size],
    pids: Optional[int],
    cpu: Optional[float],
    require_limits: bool = False,
) -> Any:
    if shell:
        if not isinstance(args, str):
            raise TypeError("with shell=True, args is one script (a str)")
        argv, script = None, args
    else:
        if isinstance(args, (str, bytes, os.PathLike)):
            args = [args]  # type: ignore[list-item]
        argv, script = [os.fspath(a) for a in args], None  # type: ignore[union-attr]
    pairs = _environment(env)
    return _native.start(
        argv,
        script,
        cwd=os.fspath(cwd) if cwd is not None else None,
        env=pairs or [],
        env_clear=pairs is not None,
        stdin=stdin,
        separate_stderr=separate_stderr,
        pty=_check_pty(pty),
        timeout=timeout,
        idle_timeout=idle_timeout,
        grace=grace,
        max_memory=max_memory,
        spill_cap=spill_cap,
        purpose=purpose,
        memory=memory,
        pids=pids,
        cpu=cpu,
        require_limits=require_limits,
    )


def _sync(op: Any) -> Any:
    op.wait()
    return op.result()


async def _async(op: Any) -> Any:
    """Awaits an engine operation; cancelling the awaiting task cancels it
    (what it waited for is left as it was: the session runs on)."""
    import asyncio  # here, not at import: it costs more than all of tether

    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def wake() -> None:
        def settle() -> None:
            if not future.done():
                future.set_result(None)

        try:
            loop.call_soon_threadsafe(settle)
        except RuntimeError:
            pass  # the loop is closed: nobody awaits any more

    op.add_done_callback(wake)
    try:
        await future
    except BaseException:
        op.cancel()
        raise
    return op.result()


class _Base:
    """What the sync and async sessions share: everything that does not block."""

    id: str
    pid: int
    command: str
    owner_pid: int

    def __init__(self, id: str) -> None:
        self.id = id
        self.owner_pid = os.getpid()
        info = self._info()
        self.pid = info.pid
        self.command = info.command
        #: Where the last ``until`` match ended (where the next looks from).
        self._matched = 0
        #: Where ``read_new`` goes on from.
        self._read = 0

    def _check(self) -> None:
        if os.getpid() != self.owner_pid:
            raise InheritedHandleError(
                f"session {self.id} belongs to process {self.owner_pid}: it was inherited "
                "across fork(), and only its owner can use it (start the child's own sessions "
                "in the child)",
                self.owner_pid,
            )

    def _info(self) -> Any:
        return _native.info(self.id)

    def info(self) -> Any:
        """The session now: ``state``, ``returncode``, ``pid``,
        ``descendants``, ``output_bytes``, ``settled``, ``limits`` (as
        applied, each with how it is enforced), ``limit_hit``
        (``"memory"``, ``"pids"`` or ``None``), …"""
        self._check()
        return self._info()

    def poll(self) -> Optional[int]:
        """The main process's return code once it exited, else ``None``."""
        return self.info().returncode  # type: ignore[no-any-return]

    @property
    def returncode(self) -> Optional[int]:
        return self.poll()

    def read(self, offset: int = 0, max_bytes: int = 65536, *, stderr: bool = False) -> Any:
        """Up to ``max_bytes`` of output from ``offset`` (absolute; they
        never shift): ``data``, ``offset``, ``next_offset``, ``dropped``,
        ``end_offset``, ``eof``. ``stderr`` reads the separate stderr stream."""
        self._check()
        return _native.read(self.id, offset, max_bytes, stderr)

    def read_new(self, max_bytes: int = 65536) -> bytes:
        """The output since the last ``read_new`` (bytes)."""
        chunk = self.read(self._read, max_bytes)
        self._read = chunk.next_offset
        return chunk.data  # type: ignore[no-any-return]

    def close_stdin(self) -> None:
        """Ends stdin (a PTY session gets its end-of-file character)."""
        self._check()
        _native.close_stdin(self.id)

    def screen(self) -> Any:
        """A PTY session's rendered screen: ``lines``, ``text``, cursor,
        ``alternate_screen``."""
        self._check()
        return _native.screen(self.id)

    def resize(self, rows: int, cols: int) -> None:
        """Resizes a PTY session's terminal (its programs get ``SIGWINCH``)."""
        self._check()
        _native.resize(self.id, rows, cols)

    def _keys(self, names: Sequence[str]) -> bytes:
        self._check()
        return _native.keys(self.id, list(names))  # type: ignore[no-any-return]

    def _wait_op(
        self, until: Optional[str], timeout: float, offset: Optional[int], settled: bool
    ) -> Tuple[Any, int]:
        self._check()
        start = self._matched if offset is None else offset
        op = _native.wait(
            self.id,
            timeout,
            until=until,
            offset=start,
            settled=settled,
            through_exit=until is not None,
        )
        return op, start

    def _waited(self, waited: Any) -> WaitResult:
        match = None
        if waited.span is not None:
            start, end = waited.span
            text = _native.read(self.id, start, end - start, False).data
            match = Match(start, end, text)
            self._matched = end
        return WaitResult(waited.outcome, match, waited.info)

    def __repr__(self) -> str:
        return f"<tether.{type(self).__name__} {self.id} pid={self.pid} {self.command!r}>"


class Session(_Base):
    """A background session (made by ``tether.start``). Its blocking calls
    release the GIL; Ctrl-C in one raises ``KeyboardInterrupt`` at once and
    leaves the session running, contained."""

    def write(self, data: Union[bytes, str]) -> None:
        """Writes all of ``data`` to stdin (``stdin=True`` or a PTY)."""
        self._check()
        _sync(_native.write(self.id, data.encode() if isinstance(data, str) else bytes(data)))

    def send_keys(self, *names: str) -> None:
        """Types named keys into a PTY session: ``"Enter"``, ``"C-c"``,
        ``"Up"``, ``"Tab"``, ``"F5"``, …"""
        self.write(self._keys(names))

    def wait(
        self,
        until: Optional[str] = None,
        timeout: float = DEFAULT_WAIT,
        *,
        offset: Optional[int] = None,
        settled: bool = False,
    ) -> WaitResult:
        """Waits — as the MCP server's ``wait`` — until the main process
        exits, the output matches ``until`` (a regex over bytes, multi-line),
        or ``timeout`` seconds pass (``status == "running"``, not an error).
        ``until`` looks from ``offset``, by default from the end of this
        handle's last match, and keeps looking after the main process exited
        while what it left can still print. ``settled``: wait until nothing
        of the session is left (every process gone, output at its end)."""
        op, _ = self._wait_op(until, timeout, offset, settled)
        return self._waited(_sync(op))

    def kill(self, grace: float = 2.0) -> Any:
        """Kills the whole tree (verified; ``KillIncomplete`` otherwise):
        ``state``, ``already_exited``, ``descendants_killed``."""
        self._check()
        return _sync(_native.kill(self.id, grace))

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        if os.getpid() == self.owner_pid:
            self.kill()


class AsyncSession(_Base):
    """A background session for ``asyncio`` (made by
    ``tether.start_async``): ``write``, ``send_keys``, ``wait`` and ``kill``
    are coroutines; cancelling one (``asyncio.wait_for``, task
    cancellation) stops the waiting, never the session."""

    async def write(self, data: Union[bytes, str]) -> None:
        self._check()
        await _async(_native.write(self.id, data.encode() if isinstance(data, str) else bytes(data)))

    async def send_keys(self, *names: str) -> None:
        await self.write(self._keys(names))

    async def wait(
        self,
        until: Optional[str] = None,
        timeout: float = DEFAULT_WAIT,
        *,
        offset: Optional[int] = None,
        settled: bool = False,
    ) -> WaitResult:
        """As ``Session.wait``, awaited."""
        op, _ = self._wait_op(until, timeout, offset, settled)
        return self._waited(await _async(op))

    async def kill(self, grace: float = 2.0) -> Any:
        self._check()
        return await _async(_native.kill(self.id, grace))

    async def __aenter__(self) -> "AsyncSession":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if os.getpid() == self.owner_pid:
            await self.kill()


def start(
    args: Union[str, Sequence[StrOrBytesPath]],
    *,
    shell: bool = False,
    cwd: Optional[StrOrBytesPath] = None,
    env: Optional[Mapping[Any, Any]] = None,
    stdin: bool = False,
    separate_stderr: bool = False,
    pty: Union[bool, Tuple[int, int]] = False,
    timeout: Optional[float] = None,
    idle_timeout: Optional[float] = None,
    grace: float = 2.0,
    purpose: str = "session",
    max_memory: Optional[int] = None,
    spill_cap: Optional[int] = None,
    memory: Optional[Size] = None,
    pids: Optional[int] = None,
    cpu: Optional[float] = None,
    require_limits: bool = False,
) -> Session:
    """Starts a background session and returns once it runs.

    ``args``: an argv, or with ``shell=True`` one ``/bin/sh -c`` script.
    ``env`` replaces the environment (as ``subprocess``). ``stdin=True``
    gives a pipe to ``write`` to (else ``/dev/null``). Output is one merged
    stream unless ``separate_stderr``. ``pty=True`` (30×120) or ``(rows,
    cols)`` runs it on a terminal (one stream, ``screen()``, ``send_keys``).
    ``timeout``/``idle_timeout`` (no output for that long) kill the tree.
    ``grace``: seconds between ``SIGTERM`` and ``SIGKILL`` in its kills.
    ``max_memory``/``spill_cap``: bytes of output per stream kept in this
    process's memory (1 MiB) and in the spill file (256 MiB).
    ``memory``/``pids``/``cpu``: limits of the session's whole tree (bytes
    or ``"512M"``, processes, cores), as ``Popen``'s; ``info().limits``
    says how each is enforced, ``info().limit_hit`` which one hit;
    ``require_limits=True`` refuses to start unless all are enforced."""
    op = _start_op(args, shell, cwd, env, stdin, separate_stderr, pty, timeout,
                   idle_timeout, grace, purpose, max_memory, spill_cap, memory, pids, cpu,
                   require_limits)
    return Session(_sync(op))


async def start_async(
    args: Union[str, Sequence[StrOrBytesPath]],
    *,
    shell: bool = False,
    cwd: Optional[StrOrBytesPath] = None,
    env: Optional[Mapping[Any, Any]] = None,
    stdin: bool = False,
    separate_stderr: bool = False,
    pty: Union[bool, Tuple[int, int]] = False,
    timeout: Optional[float] = None,
    idle_timeout: Optional[float] = None,
    grace: float = 2.0,
    purpose: str = "session",
    max_memory: Optional[int] = None,
    spill_cap: Optional[int] = None,
    memory: Optional[Size] = None,
    pids: Optional[int] = None,
    cpu: Optional[float] = None,
    require_limits: bool = False,
) -> AsyncSession:
    """``start``, awaited: returns an ``AsyncSession``."""
    op = _start_op(args, shell, cwd, env, stdin, separate_stderr, pty, timeout,
                   idle_timeout, grace, purpose, max_memory, spill_cap, memory, pids, cpu,
                   require_limits)
    return AsyncSession(await _async(op))


def sessions() -> List[Any]:
    """Every session of this process (live and recently finished), oldest
    first, as ``SessionInfo`` snapshots."""
    return list(_native.sessions())


def session(id: str) -> Session:
    """A handle on the session ``id`` names (a full id or a unique prefix of
    4+ characters); ``SessionNotFound`` otherwise."""
    return Session(_native.info(id).id)
