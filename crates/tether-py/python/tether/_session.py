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
from typing import (Any, AsyncIterator, Dict, Generator, Iterator, List, Mapping, Optional, Sequence,
                    Tuple, Union)

from . import _native
from ._errors import InheritedHandleError, SessionNotFound
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
    "Killing",
    "max_sessions",
    "set_max_sessions",
]

#: Seconds ``wait`` waits by default.
DEFAULT_WAIT = 30.0
#: Longest single wait of ``iter_output`` (it waits again after).
_ITER_SLICE = 3600.0


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

    @property
    def rusage(self) -> Any:
        """What the tree used once the main process exited (the whole
        tree's once settled): ``ru_utime``, ``ru_stime``, ``ru_maxrss``."""
        return self.info.rusage

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


async def _async(op: Any, cancel: bool = True) -> Any:
    """Awaits an engine operation; cancelling the awaiting task cancels it
    (what it waited for is left as it was: the session runs on) — unless
    ``cancel`` is false (a kill: it goes on to its end)."""
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
        if cancel:
            op.cancel()
        raise
    return op.result()


class _Kept:
    """An engine operation whose result can be taken more than once (a
    close: the handle's last snapshot, and what ``await`` gives)."""

    __slots__ = ("_op", "_value", "_error")

    def __init__(self, op: Any) -> None:
        #: The operation until its result is taken: let go then (an ended
        #: operation's task holds the runtime's epoll and eventfd).
        self._op: Any = op
        self._value: Any = None
        self._error: Optional[BaseException] = None

    def add_done_callback(self, callback: Any) -> None:
        if self._op is None:
            callback()
        else:
            self._op.add_done_callback(callback)

    def cancel(self) -> None:
        pass  # a close goes on to its end

    def done(self) -> bool:
        return self._op is None or bool(self._op.done())

    def wait(self, timeout: Optional[float] = None) -> bool:
        return self._op is None or bool(self._op.wait(timeout))

    def result(self) -> Any:
        if self._op is not None:
            self._op.wait()
            try:
                self._value = self._op.result()
            except BaseException as e:  # noqa: B036 — kept, raised to every taker
                self._error = e
            self._op = None
        if self._error is not None:
            raise self._error
        return self._value


class Killing:
    """A kill in flight, as ``AsyncSession.kill`` returns it: the kill
    started when ``kill()`` was called — in a running loop or not, awaited
    or not — and goes on to its verified end on tether's own thread.
    ``await`` it in a coroutine, or call ``result()`` outside one, for
    what it reported (``state``, ``already_exited``,
    ``descendants_killed``; ``KillIncomplete`` otherwise). Cancelling the
    ``await`` stops the waiting, never the kill."""

    __slots__ = ("_op",)

    def __init__(self, op: Any) -> None:
        self._op = op

    def __await__(self) -> Generator[Any, None, Any]:
        return _async(self._op, cancel=False).__await__()

    def done(self) -> bool:
        """Whether the kill ended (``result()`` would not block)."""
        return bool(self._op.done())

    def result(self, timeout: Optional[float] = None) -> Any:
        """Blocks (not for a coroutine: ``await`` there) until the kill
        ended and returns its report; ``TimeoutError`` if ``timeout``
        seconds pass first (the kill goes on)."""
        if not self._op.wait(timeout):
            raise TimeoutError(f"the kill did not end within {timeout} s (it goes on)")
        return self._op.result()

    def __repr__(self) -> str:
        return f"<tether.Killing {'done' if self.done() else 'in flight'}>"


class _OutputReading:
    """One ``iter_output``'s state, the same for the sync and the async
    loop (they differ only in how they wait): ``op()`` starts the wait for
    the next chunk; ``take(chunk)`` returns its bytes, ``b""`` when a wait
    slice passed with none, or raises ``TimeoutError`` once ``timeout``
    passed without output; ``ended`` once the output did."""

    def __init__(self, session: "_Base", timeout: Optional[float], max_bytes: int) -> None:
        self.session = session
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.waited = 0.0  # seconds waited for the next chunk so far
        self.ended = False

    def op(self) -> Any:
        left = None if self.timeout is None else self.timeout - self.waited
        return self.session._read_wait_op(left, self.max_bytes)

    def take(self, chunk: Any) -> bytes:
        if not (chunk.data or chunk.eof):
            if self.timeout is not None:
                self.waited += _ITER_SLICE
                if self.waited >= self.timeout:
                    raise TimeoutError(
                        f"no output from session {self.session.id} within {self.timeout} s")
            return b""
        self.waited = 0.0
        self.ended = bool(chunk.eof)
        return self.session._took(chunk)


class _Base:
    """What the sync and async sessions share: everything that does not block."""

    id: str
    pid: int
    command: str
    owner_pid: int

    def __init__(self, id: str) -> None:
        self.id = id
        self.owner_pid = os.getpid()
        #: The close under way or done (``close()``), whose value is the
        #: session's last snapshot.
        self._closing: Any = None
        info = self._info()
        self.pid = info.pid
        self.command = info.command
        #: Where the last ``until`` match ended (where the next looks from).
        self._matched = 0
        #: Where ``read_new`` goes on from.
        self._read = 0

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closing is not None

    def _check(self) -> None:
        if self._closing is not None:
            raise ValueError(f"I/O operation on closed session {self.id}")
        if os.getpid() != self.owner_pid:
            raise InheritedHandleError(
                f"session {self.id} belongs to process {self.owner_pid}: it was inherited "
                "across fork(), and only its owner can use it (start the child's own sessions "
                "in the child)",
                self.owner_pid,
            )

    def _info(self) -> Any:
        if self._closing is not None:
            # Its last snapshot (the close goes on to its end first).
            self._closing.wait()
            return self._closing.result()
        return _native.info(self.id)

    def info(self) -> Any:
        """The session now: ``state``, ``returncode``, ``pid``,
        ``descendants``, ``output_bytes``, ``settled``, ``limits`` (as
        applied, each with how it is enforced), ``limit_hit``
        (``"memory"``, ``"pids"`` or ``None``), ``rusage`` (what the tree
        used: ``ru_utime``, ``ru_stime``, ``ru_maxrss``), … — after
        ``close()``, as it was then."""
        if self._closing is None:
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
        """The output since the last ``read_new`` (bytes; ``b''`` if none
        came). Never blocks; ``iter_output`` waits."""
        return self._took(self.read(self._read, max_bytes))

    def _took(self, chunk: Any) -> bytes:
        """Moves this handle's read position past ``chunk`` (and tells the
        ``fileno()`` descriptor how far it is read)."""
        self._read = chunk.next_offset
        _native.output_seen(self.id, self._read)
        return chunk.data  # type: ignore[no-any-return]

    def _read_wait_op(self, timeout: Optional[float], max_bytes: int) -> Any:
        self._check()
        # (A bounded slice when unbounded: the loop waits again.)
        wait = _ITER_SLICE if timeout is None else min(float(timeout), _ITER_SLICE)
        return _native.read_wait(self.id, self._read, max_bytes, wait)

    def fileno(self) -> int:
        """A descriptor that is readable while output not yet read through
        this handle (``read_new``, ``iter_output``) is waiting, and once the
        output ended — for ``select``/``selectors``/``loop.add_reader``.
        Never read or close it yourself; ``close()`` closes it. One per
        session (Linux: an ``eventfd``; elsewhere a pipe), rung by tether's
        own thread as output arrives: no thread and no copy of the output."""
        self._check()
        return int(_native.output_fd(self.id))

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

    def iter_output(self, timeout: Optional[float] = None, max_bytes: int = 65536) -> Iterator[bytes]:
        """The output as it comes, from where this handle last read
        (``read_new`` shares the position): each chunk as soon as it is
        there, until the output ended (every writer gone). ``timeout``: the
        most seconds to wait for each chunk (``TimeoutError``; ``None``:
        no bound). Ctrl-C while it waits raises at once."""
        reading = _OutputReading(self, timeout, max_bytes)
        while not reading.ended:
            data = reading.take(_sync(reading.op()))
            if data:
                yield data

    def close(self, grace: float = 2.0) -> None:
        """Kills what is left of the tree (verified, as ``kill``), then
        releases everything the session holds — its output buffers, spill
        file, terminal, ``fileno()`` and every other descriptor — at once,
        not at its retention's end. ``info()``, ``poll()`` and
        ``returncode`` still answer (as of the close); reads and writes
        raise ``ValueError``. Again: nothing."""
        if self._closing is not None:
            return
        if os.getpid() != self.owner_pid:
            self._check()
        op = _Kept(_native.close(self.id, grace))
        op.result()  # KillIncomplete: the session stays open and killable
        self._closing = op

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        if os.getpid() == self.owner_pid:
            self.kill()


class AsyncSession(_Base):
    """A background session for ``asyncio`` (made by
    ``tether.start_async``): ``write``, ``send_keys`` and ``wait`` are
    coroutines; cancelling one (``asyncio.wait_for``, task cancellation)
    stops the waiting, never the session. ``kill`` acts when called, in a
    loop or outside any, and returns an awaitable ``Killing``."""

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

    def kill(self, grace: float = 2.0) -> Killing:
        """Starts killing the whole tree at once — as
        ``asyncio.subprocess.Process.kill`` acts when called, in a running
        loop or outside any — and returns the kill in flight: ``await
        s.kill()`` in a coroutine, ``s.kill().result()`` outside one, or
        drop it (the kill still runs to its end)."""
        self._check()
        return Killing(_native.kill(self.id, grace))

    async def iter_output(self, timeout: Optional[float] = None,
                          max_bytes: int = 65536) -> AsyncIterator[bytes]:
        """``Session.iter_output``, for ``async for``."""
        reading = _OutputReading(self, timeout, max_bytes)
        while not reading.ended:
            data = reading.take(await _async(reading.op()))
            if data:
                yield data

    def close(self, grace: float = 2.0) -> Killing:
        """``Session.close``, started at once (as ``kill``): ``await`` it,
        or ``result()`` outside a loop, for the session's last snapshot.
        The handle is closed from this call on."""
        if self._closing is not None:
            return Killing(self._closing)
        self._check()
        self._closing = _Kept(_native.close(self.id, grace))
        return Killing(self._closing)

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


def session(id: Optional[str] = None, *, pid: Optional[int] = None) -> Session:
    """A handle on the session ``id`` names (a full id or a unique prefix of
    4+ characters), or whose main process is ``pid`` (the newest such
    session of this process, live or recently finished);
    ``SessionNotFound`` otherwise."""
    if (id is None) == (pid is None):
        raise TypeError("session() takes an id or pid=, one of the two")
    if id is not None:
        return Session(_native.info(id).id)
    if isinstance(pid, bool) or not isinstance(pid, int):
        raise TypeError(f"pid must be an int, not {type(pid).__name__}")
    for info in reversed(_native.sessions()):
        if info.pid == pid:
            return Session(info.id)
    raise SessionNotFound(f"no session of this process has main process {pid}")


#: The binding's ``MAX_SESSIONS_CEILING`` (engine.rs: ~6 descriptors each).
_MAX_SESSIONS_CEILING = 4096


def max_sessions() -> int:
    """How many background sessions may hold processes at once (64 unless
    ``set_max_sessions`` changed it)."""
    return int(_native.max_sessions())


def set_max_sessions(n: int) -> int:
    """Lets up to ``n`` background sessions hold processes at once (1 to
    4096; ``ValueError`` otherwise); returns the previous cap. A start
    past the cap raises ``TooManySessions`` and touches nothing; sessions
    already live are left alone when it is lowered. Each live session holds
    ~6 descriptors of this process: raise ``RLIMIT_NOFILE`` to match."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"the session cap must be an int, not {type(n).__name__}")
    if not 1 <= n <= _MAX_SESSIONS_CEILING:
        raise ValueError(f"max sessions must be 1 to {_MAX_SESSIONS_CEILING}, not {n}")
    return int(_native.set_max_sessions(n))
