"""``tether.create_subprocess_exec`` and ``tether.create_subprocess_shell``:
``asyncio.create_subprocess_*``'s signature and ``Process`` object, with
the whole process tree contained.

What differs from ``asyncio``:

* the command and everything it starts (``setsid``, double forks,
  ``nohup … &``) die with their owner — however this Python process ends,
  ``SIGKILL`` included — and with the ``Process`` object if it is
  collected while running;
* when the main process exits, what it left behind is killed (``SIGTERM``,
  then ``SIGKILL`` after ``grace`` seconds), so ``communicate()`` returns
  even when a grandchild holds the pipe (under ``asyncio`` it waits for the
  grandchild);
* ``send_signal``/``terminate``/``kill`` signal the main process's process
  group (the command and what it started without leaving its group); the
  rest of the tree dies when the main process does;
* cancelling ``wait()`` or ``communicate()`` (``asyncio.wait_for``, task
  cancellation) stops the waiting, never the containment: the tree still
  dies at ``kill()``, with the ``Process`` and with this process.
"""

from __future__ import annotations

import os
import signal
import threading
import weakref
from typing import IO, TYPE_CHECKING, Any, List, Mapping, Optional, Tuple, Union

if TYPE_CHECKING:
    import asyncio

from . import _native
from ._popen import DEVNULL, PIPE, STDOUT, Size, StrOrBytesPath, _argv, _environment

__all__ = ["Process", "create_subprocess_exec", "create_subprocess_shell"]

#: asyncio's default StreamReader buffer limit (64 KiB).
_DEFAULT_LIMIT = 2**16

File = Union[None, int, IO[Any]]


class _PipeProtocol:
    """One end of one pipe: feeds a ``StreamReader`` (stdout/stderr), or
    gives a ``StreamWriter`` its flow control and close waiter (stdin) —
    what ``asyncio``'s ``FlowControlMixin`` does, written out so that
    ``import tether`` need not import ``asyncio`` (which costs more than all
    of tether)."""

    def __init__(self, loop: "asyncio.AbstractEventLoop", reader: "Optional[asyncio.StreamReader]") -> None:
        self._loop = loop
        self._reader = reader
        self._closed: "asyncio.Future[None]" = loop.create_future()
        self._paused = False
        self._lost = False
        self._drain_waiters: "List[asyncio.Future[None]]" = []

    def connection_made(self, transport: Any) -> None:
        if self._reader is not None:
            self._reader.set_transport(transport)

    def data_received(self, data: bytes) -> None:
        if self._reader is not None:
            self._reader.feed_data(data)

    def eof_received(self) -> bool:
        if self._reader is not None:
            self._reader.feed_eof()
        return False

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake(None)

    def _wake(self, exc: Optional[BaseException]) -> None:
        for waiter in self._drain_waiters:
            if not waiter.done():
                if exc is None:
                    waiter.set_result(None)
                else:
                    waiter.set_exception(exc)

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        self._lost = True
        if self._paused:
            self._wake(exc)
        if self._reader is not None:
            if exc is None:
                self._reader.feed_eof()
            else:
                self._reader.set_exception(exc)  # type: ignore[arg-type]
        if not self._closed.done():
            if exc is None:
                self._closed.set_result(None)
            else:
                self._closed.set_exception(exc)
                self._closed.exception()  # retrieved: no "never retrieved" noise

    async def _drain_helper(self) -> None:
        if self._lost:
            raise ConnectionResetError("Connection lost")
        if not self._paused:
            return
        waiter = self._loop.create_future()
        self._drain_waiters.append(waiter)
        try:
            await waiter
        finally:
            self._drain_waiters.remove(waiter)

    def _get_close_waiter(self, stream: Any) -> "asyncio.Future[None]":
        return self._closed


def _reading(loop: "asyncio.AbstractEventLoop", reader: "asyncio.StreamReader") -> Any:
    """A protocol factory feeding ``reader``."""
    return lambda: _PipeProtocol(loop, reader)


def _watch(child: Any, loop: asyncio.AbstractEventLoop, settle: "weakref.WeakMethod[Any]") -> None:
    """The waiter thread: blocks (GIL released) until the keeper reports
    the main process's exit and the end of what it left, then hands the
    status to the loop. It holds the native child, never the ``Process``,
    so a dropped ``Process`` is still collected (its finalizer kills the
    tree, which ends this wait)."""
    try:
        status: Any = child.wait()
    except BaseException as error:  # closed (the Process was collected), …
        status = error
    def deliver() -> None:
        method = settle()
        if method is not None:
            method(status)

    try:
        loop.call_soon_threadsafe(deliver)
    except RuntimeError:
        pass  # the loop is closed: nobody awaits any more


def _let_go(child: Any) -> None:
    try:
        child.start_kill()
    except Exception:
        pass  # inherited across fork (not ours to kill), or already gone


class Process:
    """What ``create_subprocess_exec``/``_shell`` return: ``asyncio``'s
    ``Process`` (``stdin`` a ``StreamWriter``, ``stdout``/``stderr``
    ``StreamReader``s, ``pid``, ``returncode``, ``wait()``,
    ``communicate()``, ``send_signal``, ``terminate``, ``kill``) over a
    contained tree (see the module docs for what differs)."""

    stdin: Optional[asyncio.StreamWriter]
    stdout: Optional[asyncio.StreamReader]
    stderr: Optional[asyncio.StreamReader]
    pid: int

    def __init__(self, child: Any, loop: asyncio.AbstractEventLoop, args: Any) -> None:
        self._child = child
        self._loop = loop
        self.args = args
        self.pid = child.pid
        self.stdin = self.stdout = self.stderr = None
        self._returncode: Optional[int] = None
        self._status: Any = None
        self._exit_waiters: List["asyncio.Future[None]"] = []
        # Collected while running: the tree is killed, as a collected
        # tether.Popen's (asyncio would leave it running). start_kill, not
        # close: close waits for the waiter thread's slice (up to 100 ms)
        # on the loop's thread; the kill ends that wait, then the thread
        # drops the child.
        self._finalizer = weakref.finalize(self, _let_go, child)

    def _settle(self, status: Any) -> None:
        if isinstance(status, BaseException):
            error: BaseException = status
            for waiter in self._exit_waiters:
                if not waiter.done():
                    waiter.set_exception(error)
            self._exit_waiters.clear()
            return
        self._status = status
        self._returncode = int(status.returncode)
        for waiter in self._exit_waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._exit_waiters.clear()

    @property
    def returncode(self) -> Optional[int]:
        """The main process's return code (``-N`` for signal ``N``) once the
        keeper reported its exit and the end of what it left, else ``None``."""
        return self._returncode

    @property
    def containment(self) -> str:
        """What holds the tree: ``subreaper``, ``pidns``, ``pgroup+tag``, ``job``."""
        return str(self._child.containment)

    @property
    def descendants_killed(self) -> int:
        """Processes besides the main one killed on the way to an empty
        tree (0 until it is)."""
        return int(self._status.descendants_killed) if self._status is not None else 0

    def descendants(self) -> List[Tuple[int, str]]:
        """``(pid, command)`` of the tree's live processes besides the main one."""
        return list(self._child.descendants())

    async def wait(self) -> int:
        """Waits for the main process to exit (and what it left to be
        killed); returns the return code. Cancelling it stops the waiting
        only."""
        if self._returncode is not None:
            return self._returncode
        waiter = self._loop.create_future()
        self._exit_waiters.append(waiter)
        try:
            await waiter
        finally:
            if waiter in self._exit_waiters:
                self._exit_waiters.remove(waiter)
        assert self._returncode is not None
        return self._returncode

    def send_signal(self, signal: int) -> None:
        """Sends ``signal`` to the main process's process group;
        ``ProcessLookupError`` once it exited (as ``asyncio``)."""
        if self._returncode is not None:
            raise ProcessLookupError()
        self._child.send_signal(signal)

    def terminate(self) -> None:
        """``SIGTERM`` to the main process's group."""
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """``SIGKILL`` to the main process's group, at once (returncode
        −9); the keeper then kills what escaped the group. For tether's
        verified kill of the whole tree, ``await kill_tree()``."""
        # (Windows has no SIGKILL: there, as under asyncio, it terminates.)
        self.send_signal(getattr(signal, "SIGKILL", signal.SIGTERM))

    async def kill_tree(self, grace: Optional[float] = None) -> int:
        """Kills the whole tree — ``SIGTERM``, ``grace`` seconds (default:
        the ``Process``'s), ``SIGKILL`` — and returns the return code once
        the keeper verified it empty. Also after the main process exited."""
        if self._returncode is None:
            self._child.start_kill(grace)
        return await self.wait()

    async def _feed_stdin(self, input: Optional[bytes]) -> None:
        assert self.stdin is not None
        try:
            if input:
                self.stdin.write(input)
                await self.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the command exited or closed its stdin
        self.stdin.close()

    async def _read_stream(self, stream: asyncio.StreamReader) -> bytes:
        output = await stream.read()
        transport = getattr(stream, "_transport", None)
        if transport is not None:
            transport.close()
        return output

    async def _none(self) -> None:
        return None

    async def communicate(self, input: Optional[bytes] = None) -> Tuple[Optional[bytes], Optional[bytes]]:
        """Sends ``input`` (then closes stdin), reads stdout and stderr to
        their end and waits: ``(stdout, stderr)``. A grandchild holding a
        pipe cannot delay it past the main process's exit: it is killed
        then. Cancelling it stops the waiting only (the tree stays
        contained and killable)."""
        stdin = self._feed_stdin(input) if self.stdin is not None else self._none()
        stdout = self._read_stream(self.stdout) if self.stdout is not None else self._none()
        stderr = self._read_stream(self.stderr) if self.stderr is not None else self._none()
        import asyncio

        _, out, err = await asyncio.gather(stdin, stdout, stderr)
        await self.wait()
        return out, err

    def __repr__(self) -> str:
        return f"<tether.Process {self.pid}>"


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
        raise TypeError(
            f"{name} must be None, PIPE, DEVNULL, a descriptor or a file object, not {type(spec).__name__}"
        )
    return int(fileno()), None


async def _create(
    args: Any,
    argv: List[Any],
    executable: Optional[Any],
    stdin: File,
    stdout: File,
    stderr: File,
    limit: int,
    cwd: Optional[StrOrBytesPath],
    env: Optional[Mapping[Any, Any]],
    grace: float,
    purpose: str,
    keep_descendants: bool,
    memory: Optional[Size],
    pids: Optional[int],
    cpu: Optional[float],
    kwds: Mapping[str, Any],
) -> Process:
    import asyncio

    loop = asyncio.get_running_loop()
    for key in ("universal_newlines", "text", "encoding", "errors"):
        if kwds.get(key):
            raise ValueError(f"{key} must be False" if key != "encoding" and key != "errors" else f"{key} must be None")
    bufsize = kwds.get("bufsize", 0)
    if bufsize != 0:
        raise ValueError("bufsize must be 0")
    # close_fds=False is accepted and changes nothing: the command gets
    # only its three standard streams (CPython's own asyncio tests pass it
    # for portability, not to inherit anything).
    if kwds.get("pass_fds"):
        raise ValueError("pass_fds is not supported by tether.create_subprocess_*: the command "
                         "gets only its standard streams")
    for key in ("creationflags", "startupinfo"):
        if kwds.get(key):
            raise ValueError(f"{key} is only supported on Windows platforms")
    unknown = set(kwds) - {"universal_newlines", "text", "encoding", "errors", "bufsize", "close_fds",
                           "start_new_session", "pass_fds", "creationflags", "startupinfo"}
    if unknown:
        raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(unknown))}")
    pairs = _environment(env)
    to_close: List[int] = []
    ours: List[int] = []
    try:
        child_in, our_in = _stdio(stdin, "stdin", to_close, ours)
        child_out, our_out = _stdio(stdout, "stdout", to_close, ours)
        if stderr == STDOUT:
            child_err: Optional[int] = child_out if child_out is not None else 1
            our_err = None
        else:
            child_err, our_err = _stdio(stderr, "stderr", to_close, ours)
        # The spawn blocks (~0.3 ms with a warm keeper, a keeper's exec
        # without): short enough for the loop's thread, as asyncio's own
        # fork/exec is.
        child = _native.spawn(
            argv,
            cwd=os.fspath(cwd) if cwd is not None else None,
            env=pairs,
            stdin=child_in,
            stdout=child_out,
            stderr=child_err,
            grace=grace,
            purpose=purpose,
            keep_descendants=keep_descendants,
            memory=memory,
            pids=pids,
            cpu=cpu,
            # The program to run when it is not argv[0] (`executable=`, as
            # subprocess: argv[0] is kept).
            setup={"executable": executable} if executable is not None else None,
        )
    except BaseException:
        for fd in ours:
            os.close(fd)
        raise
    finally:
        for fd in to_close:
            os.close(fd)
    process = Process(child, loop, args)
    try:
        if our_in is not None:
            pipe = os.fdopen(our_in, "wb", 0)
            ours.remove(our_in)
            protocol: Any = _PipeProtocol(loop, None)  # an asyncio protocol by duck typing
            transport, _ = await loop.connect_write_pipe(lambda: protocol, pipe)
            process.stdin = asyncio.StreamWriter(transport, protocol, None, loop)
        for end, name in ((our_out, "stdout"), (our_err, "stderr")):
            if end is None:
                continue
            pipe = os.fdopen(end, "rb", 0)
            ours.remove(end)
            reader = asyncio.StreamReader(limit=limit, loop=loop)
            await loop.connect_read_pipe(_reading(loop, reader), pipe)
            setattr(process, name, reader)
    except BaseException:
        for fd in ours:
            os.close(fd)
        child.close()
        raise
    threading.Thread(
        target=_watch, args=(child, loop, weakref.WeakMethod(process._settle)), name=f"tether-wait-{process.pid}", daemon=True
    ).start()
    return process


async def create_subprocess_exec(
    program: StrOrBytesPath,
    *args: StrOrBytesPath,
    stdin: File = None,
    stdout: File = None,
    stderr: File = None,
    limit: int = _DEFAULT_LIMIT,
    cwd: Optional[StrOrBytesPath] = None,
    env: Optional[Mapping[Any, Any]] = None,
    executable: Optional[StrOrBytesPath] = None,
    grace: float = 2.0,
    purpose: str = "run",
    keep_descendants: bool = False,
    memory: Optional[Size] = None,
    pids: Optional[int] = None,
    cpu: Optional[float] = None,
    **kwds: Any,
) -> Process:
    """Starts ``program`` with ``args`` contained, as
    ``asyncio.create_subprocess_exec``: ``stdin``/``stdout``/``stderr``
    are ``None`` (inherit), ``PIPE``, ``DEVNULL``, a descriptor or a file
    (``stderr`` also ``STDOUT``); ``limit`` is the ``StreamReader``s'
    buffer limit. ``grace``, ``purpose``, ``keep_descendants``,
    ``memory``, ``pids``, ``cpu``: as ``tether.Popen``'s."""
    if kwds.pop("shell", False):
        raise ValueError("shell must be False")
    argv, exe = _argv([program, *args], False, executable)
    return await _create(argv, argv, exe, stdin, stdout, stderr, limit, cwd, env, grace, purpose,
                         keep_descendants, memory, pids, cpu, kwds)


async def create_subprocess_shell(
    cmd: Union[str, bytes],
    stdin: File = None,
    stdout: File = None,
    stderr: File = None,
    limit: int = _DEFAULT_LIMIT,
    cwd: Optional[StrOrBytesPath] = None,
    env: Optional[Mapping[Any, Any]] = None,
    executable: Optional[StrOrBytesPath] = None,
    grace: float = 2.0,
    purpose: str = "run",
    keep_descendants: bool = False,
    memory: Optional[Size] = None,
    pids: Optional[int] = None,
    cpu: Optional[float] = None,
    **kwds: Any,
) -> Process:
    """Runs ``cmd`` with ``/bin/sh -c`` contained, as
    ``asyncio.create_subprocess_shell`` (the other arguments as
    ``create_subprocess_exec``'s)."""
    if not isinstance(cmd, (str, bytes)):
        raise ValueError("cmd must be a string")
    if kwds.pop("shell", True) is not True:
        raise ValueError("shell must be True")
    argv, exe = _argv(cmd, True, executable)
    return await _create(cmd, argv, exe, stdin, stdout, stderr, limit, cwd, env, grace, purpose,
                         keep_descendants, memory, pids, cpu, kwds)

