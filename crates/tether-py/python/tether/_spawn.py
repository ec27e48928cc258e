"""``pexpect.spawn``'s shape on a tether PTY session: ``expect`` a prompt,
``sendline`` a command, read ``before``/``after`` — with the session's tree
contained (it dies with this process, ``SIGKILL`` included) and its screen
rendered (``screen()``).

The session's output is also pumped, by one thread per ``spawn``, into a
pipe whose read end is ``fileno()``: it is readable exactly when output is
waiting and reads end-of-file when the session's output ended, as a PTY
master would — so ``select``/``selectors`` work on it, and ``expect`` reads
from it. ``close()`` stops the thread and closes both ends.
"""

from __future__ import annotations

import codecs
import os
import re
import select
import shlex
import signal
import threading
import time
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Type, Union

from . import _native
from ._errors import SessionNotFound, TetherError, Unsupported
from ._popen import Size, StrOrBytesPath
from ._session import Session, start

__all__ = ["EOF", "TIMEOUT", "spawn"]


class EOF(TetherError):
    """The session's output ended (``pexpect.EOF``): raised by ``expect`` and
    ``read_nonblocking``, and usable as a pattern in ``expect``'s list."""


class TIMEOUT(TetherError):
    """``expect``'s or ``read_nonblocking``'s timeout passed
    (``pexpect.TIMEOUT``): raised, or usable as a pattern in the list."""


#: Seconds each wait of the pump thread lasts before it waits again.
_PUMP_WAIT = 3600.0

#: What the ``echo=False`` wrapper prints once echo is off (as printf
#: spells it), and what it prints.
_NOECHO_SHELL = "\\033]2;\\007"
_NOECHO = b"\x1b]2;\x07"

_Marker = Union[Type[EOF], Type[TIMEOUT]]


class _Pump:
    """Copies the session's output into a pipe, in a thread of its own. It
    holds no reference to the ``spawn``, so a dropped ``spawn`` is collected
    (and closed)."""

    def __init__(self, session_id: str) -> None:
        self.id = session_id
        self.read_fd, self.write_fd = os.pipe2(os.O_CLOEXEC)
        self.stopping = False
        self.op: Any = None
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.run, name=f"tether-spawn-{session_id[:8]}", daemon=True)
        self.thread.start()

    def run(self) -> None:
        offset = 0
        try:
            while True:
                with self.lock:
                    if self.stopping:
                        return
                    # Returns as soon as one byte past `offset` is there,
                    # or the output ended (through the main process's exit).
                    self.op = _native.wait(self.id, _PUMP_WAIT, until="(?s).", offset=offset, through_exit=True)
                op = self.op
                op.wait()
                if self.stopping:
                    return
                try:
                    op.result()
                except Exception:
                    return
                chunk = _native.read(self.id, offset, 65536, False)
                if chunk.data:
                    view = memoryview(chunk.data)
                    while view:
                        written = os.write(self.write_fd, view)
                        view = view[written:]
                    offset = chunk.next_offset
                elif chunk.eof and chunk.next_offset >= chunk.end_offset:
                    return
                elif offset < chunk.next_offset:
                    offset = chunk.next_offset  # bytes dropped past the spill cap
        except OSError:
            return  # the read end was closed (close()): nobody reads any more
        finally:
            os.close(self.write_fd)

    def stop(self) -> None:
        with self.lock:
            self.stopping = True
            op = self.op
        if op is not None:
            op.cancel()
        # A write blocked on a full pipe gets EPIPE.
        os.close(self.read_fd)
        self.thread.join()


def _control(char: str) -> bytes:
    """pexpect's ``sendcontrol``: ``'c'`` → ``b'\\x03'``, ``'?'`` → DEL."""
    char = char.lower()
    if "a" <= char <= "z":
        return bytes([ord(char) - ord("a") + 1])
    table = {"@": 0, "`": 0, "[": 27, "{": 27, "\\": 28, "|": 28, "]": 29, "}": 29, "^": 30, "~": 30, "_": 31, "?": 127}
    if char not in table:
        raise ValueError(f"no control character for {char!r}")
    return bytes([table[char]])


class spawn:  # noqa: N801 — pexpect's name
    """A command on a tether PTY session, driven as ``pexpect.spawn``.

    ``command`` is the program (with ``args``), or with ``args`` empty a
    command line split as a shell would (no shell runs). ``timeout`` is
    ``expect``'s default. ``encoding`` (``'utf-8'``, …) makes it a text
    spawn (``str`` patterns and ``before``/``after``); ``None`` keeps bytes.
    ``dimensions`` is ``(rows, cols)`` (24×80 by default, as pexpect).
    ``echo=False`` turns the terminal's echo off before the program runs.
    ``grace``: seconds between ``SIGHUP``+``SIGTERM`` and ``SIGKILL`` when
    ``terminate()``/``close()`` end the tree; ``memory``/``pids``/``cpu``
    limit it as ``tether.start``'s.

    Differences from pexpect: ``terminate()`` always ends the whole tree
    (verified; ``force=True`` skips the grace), so it returns ``True``;
    ``close()`` does too; ``kill(sig)`` takes the signals that end a
    program only; there is no ``interact``, ``setecho`` or ``preexec_fn``
    (docs/python.md, "Moving from pexpect / ptyprocess").
    """

    def __init__(
        self,
        command: Union[str, StrOrBytesPath],
        args: Sequence[StrOrBytesPath] = [],
        timeout: Optional[float] = 30,
        maxread: int = 2000,
        searchwindowsize: Optional[int] = None,
        logfile: Any = None,
        cwd: Optional[StrOrBytesPath] = None,
        env: Optional[Mapping[Any, Any]] = None,
        ignore_sighup: bool = False,
        echo: bool = True,
        preexec_fn: None = None,
        encoding: Optional[str] = None,
        codec_errors: str = "strict",
        dimensions: Optional[Tuple[int, int]] = None,
        use_poll: bool = False,
        *,
        grace: float = 2.0,
        memory: Optional[Size] = None,
        pids: Optional[int] = None,
        cpu: Optional[float] = None,
    ) -> None:
        if preexec_fn is not None:
            raise ValueError("preexec_fn is not supported: the command starts in tether's keeper")
        if ignore_sighup:
            raise ValueError("ignore_sighup=True is not supported: the tree's kill starts with SIGHUP")
        self.closed = True  # until started: __del__ of a failed spawn does nothing
        self._pump: Optional[_Pump] = None
        if args:
            argv: List[Any] = [command, *args]
        elif isinstance(command, str):
            argv = shlex.split(command)
        else:
            argv = [command]
        if not argv:
            raise ValueError("empty command")
        self.command = os.fsdecode(argv[0]) if not isinstance(argv[0], str) else argv[0]
        self.args = [os.fsdecode(a) if isinstance(a, bytes) else os.fspath(a) for a in argv]
        self.name = "<" + " ".join(str(a) for a in self.args) + ">"
        if not echo:
            # The marker (an empty window title: nothing on the screen) says
            # echo is off, so nothing sent after __init__ is echoed.
            argv = ["/bin/sh", "-c", f'stty -echo 2>/dev/null; printf "{_NOECHO_SHELL}"; exec "$@"', "sh", *argv]
        self.timeout = timeout
        self.maxread = maxread
        self.searchwindowsize = searchwindowsize
        self.logfile = logfile
        self.logfile_read: Any = None
        self.logfile_send: Any = None
        self.delaybeforesend: Optional[float] = None
        #: Compile ``expect``'s string patterns with ``re.IGNORECASE``.
        self.ignorecase = False
        self.encoding = encoding
        self.codec_errors = codec_errors
        if encoding is None:
            self._decoder: Any = None
            self.string_type: type = bytes
            self.crlf: Any = b"\r\n"
            self.linesep: Any = os.linesep.encode()
        else:
            self._decoder = codecs.getincrementaldecoder(encoding)(codec_errors)
            self.string_type = str
            self.crlf = "\r\n"
            self.linesep = os.linesep
        empty: Any = self.string_type()
        self.buffer: Any = empty
        self.before: Any = None
        self.after: Any = None
        self.match: Any = None
        self.match_index: Optional[int] = None
        self.exitstatus: Optional[int] = None
        self.signalstatus: Optional[int] = None
        self.status: Optional[int] = None
        self.terminated = False
        self.flag_eof = False
        self.grace = grace
        rows, cols = dimensions if dimensions is not None else (24, 80)
        self.session: Session = start(argv, cwd=cwd, env=env, pty=(rows, cols), grace=grace,
                                      purpose="spawn", memory=memory, pids=pids, cpu=cpu)
        self.pid = self.session.pid
        self.child_fd = -1
        self._pump = _Pump(self.session.id)
        self.child_fd = self._pump.read_fd
        self.closed = False
        if not echo:
            self.expect_exact(_NOECHO.decode() if encoding else _NOECHO)
            self.before = self.after = self.match = self.match_index = None

    # -- reading ---------------------------------------------------------

    def fileno(self) -> int:
        """A descriptor readable when output is waiting (``select``-able)."""
        return self.child_fd

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed file.")

    def read_nonblocking(self, size: int = 1, timeout: Optional[float] = -1) -> Any:
        """Up to ``size`` bytes (characters in text mode) of output, waiting
        at most ``timeout`` seconds (``-1``: ``self.timeout``; ``None``:
        forever) for some: ``TIMEOUT`` if none came, ``EOF`` at the end."""
        self._check_open()
        if timeout == -1:
            timeout = self.timeout
        if self.flag_eof:
            raise EOF("End Of File (EOF). Exhausted the output of " + self.name)
        while True:
            ready, _, _ = select.select([self.child_fd], [], [], timeout)
            if not ready:
                raise TIMEOUT("Timeout exceeded.")
            data = os.read(self.child_fd, size)
            if not data:
                self.flag_eof = True
                self.isalive()
                tail = self._decoder.decode(b"", final=True) if self._decoder is not None else b""
                if tail:
                    return tail
                raise EOF("End Of File (EOF). Exhausted the output of " + self.name)
            out = data if self._decoder is None else self._decoder.decode(data)
            for log in (self.logfile, self.logfile_read):
                if log is not None and out:
                    log.write(out)
                    log.flush()
            if out:
                return out
            # Half a character so far: wait for the rest.

    def compile_pattern_list(self, patterns: Any) -> List[Any]:
        """``expect``'s patterns, compiled: regex strings, compiled patterns,
        ``EOF`` and ``TIMEOUT`` (as pexpect: a bytes spawn also takes ASCII
        ``str`` patterns, and compiled patterns are converted to its mode)."""
        if patterns is None:
            return []
        if not isinstance(patterns, list):
            patterns = [patterns]
        flags = re.DOTALL | (re.IGNORECASE if self.ignorecase else 0)
        compiled: List[Any] = []
        for p in patterns:
            if p is EOF or p is TIMEOUT:
                compiled.append(p)
            elif isinstance(p, (str, bytes)):
                compiled.append(re.compile(self._coerce(p), flags))
            elif isinstance(p, re.Pattern):
                if self._decoder is None and isinstance(p.pattern, str):
                    p = re.compile(p.pattern.encode("utf-8"), p.flags & ~re.UNICODE)
                elif self._decoder is not None and isinstance(p.pattern, bytes):
                    p = re.compile(p.pattern.decode("utf-8"), p.flags)
                compiled.append(p)
            else:
                self._pattern_type_error(p)
        return compiled

    def _pattern_type_error(self, p: Any) -> None:
        allowed = "bytes, str" if self._decoder is None else "str"
        raise TypeError(f"got {type(p)} ({p!r}) as pattern, must be one of: "
                        f"{allowed}, a compiled pattern, tether.EOF, tether.TIMEOUT")

    def _coerce(self, p: Any) -> Any:
        if self._decoder is None and isinstance(p, str):
            return p.encode("ascii")
        if not isinstance(p, self.string_type):
            self._pattern_type_error(p)
        return p

    def expect(self, pattern: Any, timeout: Optional[float] = -1, searchwindowsize: Optional[int] = -1,
               async_: bool = False) -> int:
        """Reads until one of the patterns matches and returns its index in
        the list (0 for one pattern); ``before`` is the output before the
        match, ``after`` the matched text, ``match`` the ``re.Match``. ``EOF``
        or ``TIMEOUT`` in the list is returned for as a match, else raised."""
        if async_:
            raise ValueError("async_=True is not supported (use tether.start_async)")
        return self.expect_list(self.compile_pattern_list(pattern), timeout)

    def expect_list(self, pattern_list: List[Any], timeout: Optional[float] = -1,
                    searchwindowsize: Optional[int] = -1, async_: bool = False) -> int:
        def search(buffer: Any) -> Optional[Tuple[int, int, int, Any]]:
            best = None
            for index, p in enumerate(pattern_list):
                if p is EOF or p is TIMEOUT:
                    continue
                m = p.search(buffer)
                if m is not None and (best is None or m.start() < best[1]):
                    best = (index, m.start(), m.end(), m)
            return best

        return self._expect_loop(pattern_list, search, timeout)

    def expect_exact(self, pattern_list: Any, timeout: Optional[float] = -1,
                     searchwindowsize: Optional[int] = -1, async_: bool = False) -> int:
        """``expect`` with plain strings (no regex): ``match`` is the string."""
        if not isinstance(pattern_list, (list, tuple)):
            pattern_list = [pattern_list]
        patterns: List[Any] = [p if p is EOF or p is TIMEOUT else self._coerce(p) for p in pattern_list]

        def search(buffer: Any) -> Optional[Tuple[int, int, int, Any]]:
            best = None
            for index, p in enumerate(patterns):
                if p is EOF or p is TIMEOUT:
                    continue
                at = buffer.find(p)
                if at >= 0 and (best is None or at < best[1]):
                    best = (index, at, at + len(p), p)
            return best

        return self._expect_loop(patterns, search, timeout)

    def _expect_loop(self, patterns: List[Any], search: Any, timeout: Optional[float]) -> int:
        self._check_open()
        if timeout == -1:
            timeout = self.timeout
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            found = search(self.buffer)
            if found is not None:
                index, start, stop, m = found
                self.before = self.buffer[:start]
                self.after = self.buffer[start:stop]
                self.match = m
                self.match_index = index
                self.buffer = self.buffer[stop:]
                return index  # type: ignore[no-any-return]
            left = None if end is None else max(0.0, end - time.monotonic())
            try:
                self.buffer += self.read_nonblocking(self.maxread, left)
            except EOF as e:
                self.before, self.after, self.match = self.buffer, EOF, EOF
                self.buffer = self.string_type()
                if EOF in patterns:
                    self.match_index = patterns.index(EOF)
                    return self.match_index
                self.match_index = None
                raise EOF(f"{e}\n{self!r}") from None
            except TIMEOUT as e:
                self.before, self.after, self.match = self.buffer, TIMEOUT, TIMEOUT
                if TIMEOUT in patterns:
                    self.match_index = patterns.index(TIMEOUT)
                    return self.match_index
                self.match_index = None
                raise TIMEOUT(f"{e}\n{self!r}\nbuffer (last 100 chars): {self.buffer[-100:]!r}") from None

    def readline(self, size: int = -1) -> Any:
        """One line (ending ``\\r\\n``, as a terminal writes it), or what is
        left at end of output."""
        if size == 0:
            return self.string_type()
        index = self.expect([re.compile(re.escape(self.crlf)), EOF])
        return self.before + self.crlf if index == 0 else self.before

    def read(self, size: int = -1) -> Any:
        """Everything until end of output (``size < 0``), or up to ``size``."""
        if size == 0:
            return self.string_type()
        if size < 0:
            self.expect(EOF, timeout=None)
            return self.before
        index = self.expect([re.compile(b"(?s).{%d}" % size if self._decoder is None else "(?s).{%d}" % size), EOF])
        return self.after if index == 0 else self.before

    def readlines(self, sizehint: int = -1) -> List[Any]:
        """Every line until end of output."""
        return list(self)

    def __iter__(self) -> "spawn":
        return self

    def __next__(self) -> Any:
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    # -- writing ---------------------------------------------------------

    def send(self, s: Union[str, bytes]) -> int:
        """Writes ``s`` to the terminal; returns the number of bytes."""
        self._check_open()
        if self.delaybeforesend:
            time.sleep(self.delaybeforesend)
        data = s.encode(self.encoding or "utf-8") if isinstance(s, str) else bytes(s)
        for log in (self.logfile, self.logfile_send):
            if log is not None:
                log.write(data if self._decoder is None else data.decode(self.encoding or "utf-8", "replace"))
                log.flush()
        self.session.write(data)
        return len(data)

    def sendline(self, s: Union[str, bytes] = "") -> int:
        data = s.encode(self.encoding or "utf-8") if isinstance(s, str) else bytes(s)
        linesep = self.linesep if isinstance(self.linesep, bytes) else self.linesep.encode()
        return self.send(data + linesep)

    def write(self, s: Union[str, bytes]) -> None:
        self.send(s)

    def writelines(self, sequence: Sequence[Union[str, bytes]]) -> None:
        for s in sequence:
            self.send(s)

    def sendcontrol(self, char: str) -> int:
        """Sends a control character: ``sendcontrol('c')`` is Ctrl-C. A
        character with none sends nothing and returns 0 (as pexpect)."""
        try:
            code = _control(char)
        except ValueError:
            return 0
        return self.send(code)

    def sendintr(self) -> None:
        self.send(b"\x03")

    def sendeof(self) -> None:
        self.send(b"\x04")

    # -- the process -----------------------------------------------------

    def _note(self, returncode: Optional[int]) -> None:
        if returncode is None or self.terminated:
            return
        self.terminated = True
        if returncode < 0:
            self.signalstatus, self.exitstatus, self.status = -returncode, None, -returncode
        else:
            self.exitstatus, self.signalstatus, self.status = returncode, None, returncode << 8

    def isalive(self) -> bool:
        """Whether the main process still runs."""
        if self.terminated:
            return False
        self._note(self.session.poll())
        return not self.terminated

    def wait(self) -> Optional[int]:
        """Waits for the main process to exit; returns ``exitstatus`` (``None``
        when a signal ended it: see ``signalstatus``). Unread output stays
        readable (it cannot block the program, unlike pexpect's)."""
        while self.isalive():
            self.session.wait(timeout=_PUMP_WAIT)
        return self.exitstatus

    def terminate(self, force: bool = False) -> bool:
        """Ends the whole tree: ``SIGHUP``+``SIGTERM``, then ``SIGKILL`` after
        ``grace`` seconds (at once with ``force``); returns once it is gone."""
        if self.isalive():
            self.session.kill(grace=0.0 if force else self.grace)
        self._note(self.session.poll())
        return not self.isalive()

    def kill(self, sig: int) -> None:
        """pexpect's ``kill(sig)``, for the signals that end a program:
        ``SIGKILL`` is ``terminate(force=True)``; ``SIGTERM``/``SIGHUP``
        ``terminate()`` (whose ladder ends in ``SIGKILL``: the tree always
        dies); ``SIGINT`` the terminal's Ctrl-C. Others raise ``Unsupported``
        (every signal tether sends goes through the keeper's verified kill)."""
        if sig == signal.SIGKILL:
            self.terminate(force=True)
        elif sig in (signal.SIGTERM, signal.SIGHUP):
            self.terminate()
        elif sig == signal.SIGINT:
            self.sendintr()
        else:
            raise Unsupported(f"kill({sig}): tether.spawn sends SIGKILL, SIGTERM, SIGHUP or SIGINT only")

    def close(self, force: bool = True) -> None:
        """Ends the tree (as ``terminate(force)``) and releases the
        descriptors (``fileno()`` and the thread's)."""
        if self.closed:
            return
        try:
            # Returns at once when nothing is left: it then only reports.
            self.session.kill(grace=0.0 if force else self.grace)
            self._note(self.session.poll())
        except SessionNotFound:
            pass  # finished long ago and evicted: nothing of it is left
        self.closed = True
        if self._pump is not None:
            self._pump.stop()
            self._pump = None
        self.child_fd = -1

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True

    def setwinsize(self, rows: int, cols: int) -> None:
        """Resizes the terminal (its programs get ``SIGWINCH``)."""
        self.session.resize(rows, cols)

    def getwinsize(self) -> Tuple[int, int]:
        size = self.session.info().pty
        return (size[0], size[1]) if size else (0, 0)

    def screen(self) -> Any:
        """tether's rendered screen of the terminal: ``lines``, ``text``,
        cursor, ``alternate_screen``."""
        return self.session.screen()

    def eof(self) -> bool:
        return self.flag_eof

    def __enter__(self) -> "spawn":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "closed", True) and os.getpid() == self.session.owner_pid:
            try:
                self.close()
            except Exception:
                pass

    def __repr__(self) -> str:
        return f"<tether.spawn {self.name} pid={getattr(self, 'pid', None)}>"
