"""Durable sessions from Python (issue 37): ``start(..., durable=True)``
starts a session that outlives this process — held by the user's tether
holder until its TTL — and ``attach(id_or_name)`` drives one from any later
process of the same user.

Starting goes through the bundled ``tether run --durable`` (which starts the
holder if none runs, detached from this process); driving speaks the
holder's protocol (one JSON object per line each way) on its socket in the
state directory, the one ``tether sessions`` reads. No thread and no
process of this interpreter is involved once a call has returned: the
session is the holder's, not this process's (it survives our exit by
design; it dies at its TTL, by ``kill()``, or with the holder).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, TypeVar, Union, cast

_F = TypeVar("_F", bound=Callable[..., Any])

#: Bytes ``read`` returns at most per call (the holder's own bound).
MAX_READ = 256 << 10


def _state_dir() -> str:
    """The state directory, chosen as ``tether::Install::from_env`` does."""
    env = os.environ
    home = env.get("TETHER_HOME")
    if home:
        return os.path.abspath(home)
    for var, sub in (("XDG_STATE_HOME", "tether"), ("HOME", ".local/state/tether")):
        value = env.get(var)
        if value and os.path.isabs(value):
            return os.path.join(value, sub)
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        return os.path.join(runtime, "tether")
    return f"/tmp/tether-{os.geteuid()}"


def _socket_path() -> str:
    return os.path.join(_state_dir(), "holder.sock")


def _error(kind: str, message: str) -> Exception:
    from ._errors import SessionNotFound, TetherError

    if kind == "unknown_session":
        return SessionNotFound(message)
    if kind == "bad_request":
        return ValueError(message)
    if kind == "program_not_found":
        return FileNotFoundError(message)
    if kind == "not_executable":
        return PermissionError(message)
    return TetherError(message)


class _Connection:
    """One connection to the holder: a request, its reply."""

    def __init__(self) -> None:
        if sys.platform == "win32":
            from ._errors import Unsupported

            raise Unsupported("durable sessions are not supported on Windows yet")
        path = _socket_path()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.connect(path)
        except (FileNotFoundError, ConnectionRefusedError):
            self._sock.close()
            raise _error("unknown_session", "no durable session runs (no holder at " + path + ")")
        except OSError:
            self._sock.close()
            raise
        self._file = self._sock.makefile("rb")

    def call(self, request: Dict[str, Any], timeout: float = 30.0) -> Any:
        self._sock.settimeout(timeout + 30.0)
        self._sock.sendall(json.dumps(request).encode() + b"\n")
        line = self._file.readline()
        if not line:
            from ._errors import TetherError

            raise TetherError("the durable-session holder closed the connection")
        reply = json.loads(line)
        if not reply.get("ok"):
            error = reply.get("error") or {}
            raise _error(error.get("kind", "failed"), error.get("message", "failed"))
        return reply.get("result")

    def close(self) -> None:
        self._file.close()
        self._sock.close()


def _call(request: Dict[str, Any], timeout: float = 30.0) -> Any:
    conn = _Connection()
    try:
        return conn.call(request, timeout)
    finally:
        conn.close()


class DurableSession:
    """A durable session: held by the user's holder, not by this process.

    ``id`` and ``name`` name it; ``read`` pages through its output from
    absolute offsets (``offset=None`` goes on where the last read of this
    handle ended); ``write`` feeds its stdin (or terminal); ``wait`` waits
    for its exit or a line; ``kill`` is the verified kill of its whole
    tree; ``extend`` sets its TTL from now; ``info`` is the holder's row
    (``status``, ``pid``, ``ttl_left_s``, ``output_bytes``, …)."""

    def __init__(self, info: Dict[str, Any]) -> None:
        self.id: str = info["id"]
        self.name: Optional[str] = info.get("name")
        self.pid: int = info["pid"]
        self._offset = 0

    def __repr__(self) -> str:
        return f"DurableSession(id={self.id!r}, name={self.name!r})"

    def info(self) -> Dict[str, Any]:
        """The holder's row for this session."""
        return dict(_call({"op": "info", "session": self.id}))

    def read(self, offset: Optional[int] = None, max_bytes: int = MAX_READ,
             wait: float = 0.0) -> bytes:
        """Output from ``offset`` (default: where this handle's last read
        ended), at most ``max_bytes``; with ``wait``, waits up to that many
        seconds for output when there is none yet."""
        start = self._offset if offset is None else offset
        result = _call({"op": "read", "session": self.id, "offset": start,
                        "max_bytes": max_bytes, "wait_ms": int(wait * 1000)}, wait)
        self._offset = result["next_offset"]
        return bytes.fromhex(result["data_hex"])

    def write(self, data: Union[str, bytes]) -> None:
        """Writes to its stdin (its terminal with a PTY)."""
        if isinstance(data, str):
            data = data.encode()
        _call({"op": "write", "session": self.id, "data_hex": data.hex()})

    def wait(self, timeout: float, until: Optional[str] = None) -> Dict[str, Any]:
        """Waits up to ``timeout`` seconds for its main process to exit, or
        for ``until`` (a regex) to match its output: ``{"outcome":
        "exited"|"matched"|"timeout", "status", "exit_code"}``."""
        request: Dict[str, Any] = {"op": "wait", "session": self.id,
                                   "timeout_ms": int(timeout * 1000)}
        if until is not None:
            request["until"] = until
        return dict(_call(request, timeout))

    def kill(self, grace: float = 2.0) -> Dict[str, Any]:
        """The verified kill of its whole tree (``SIGTERM``, ``SIGKILL``
        after ``grace``)."""
        return dict(_call({"op": "kill", "session": self.id,
                           "grace_ms": int(grace * 1000)}, 2 * grace))

    def extend(self, ttl: float) -> Dict[str, Any]:
        """Sets its TTL to ``ttl`` seconds from now (at most 7 days)."""
        return dict(_call({"op": "extend", "session": self.id, "ttl_s": max(1, int(ttl))}))

    def screen(self) -> List[str]:
        """A PTY session's visible rows."""
        return list(_call({"op": "screen", "session": self.id})["lines"])


def attach(id_or_name: str) -> DurableSession:
    """A handle on this user's durable session ``id_or_name`` (an id, a
    unique id prefix of 4+ characters, or its name), from any process;
    ``SessionNotFound`` when there is none."""
    return DurableSession(_call({"op": "info", "session": id_or_name}))


def durable_sessions() -> List[Dict[str, Any]]:
    """This user's durable sessions (the rows ``tether sessions --json``
    prints); empty when no holder runs."""
    try:
        return list(_call({"op": "list"}))
    except LookupError:
        return []


def start_durable(
    args: Union[str, Sequence[Any]],
    *,
    name: Optional[str] = None,
    ttl: Optional[float] = None,
    shell: bool = False,
    cwd: Optional[Any] = None,
    env: Optional[Mapping[Any, Any]] = None,
    pty: Union[bool, Any] = False,
    grace: float = 2.0,
    purpose: str = "durable",
    memory: Optional[Any] = None,
    pids: Optional[int] = None,
    cpu: Optional[float] = None,
    require_limits: bool = False,
    replace: bool = False,
) -> DurableSession:
    """``start(..., durable=True)``: see ``tether.start``."""
    from ._keeper import executable

    if sys.platform == "win32":
        from ._errors import Unsupported

        raise Unsupported("durable sessions are not supported on Windows yet")
    exe = executable()
    if exe is None:
        from ._errors import KeeperError

        raise KeeperError("no tether executable (set TETHER_BIN)")
    argv: List[str] = [exe, "run", "--durable", "--json", "--grace", f"{grace}s",
                       "--purpose", purpose]
    if name is not None:
        argv += ["--name", name]
    if ttl is not None:
        argv += ["--ttl", f"{max(1, int(ttl))}s"]
    if replace:
        argv.append("--replace")
    if cwd is not None:
        argv += ["--cwd", os.fsdecode(cwd)]
    if pty:
        argv.append("--pty")
    if memory is not None:
        argv += ["--memory", str(memory)]
    if pids is not None:
        argv += ["--pids", str(pids)]
    if cpu is not None:
        argv += ["--cpu", str(cpu)]
    if require_limits:
        argv.append("--require-limits")
    if shell:
        if not isinstance(args, str):
            raise TypeError("with shell=True, args is one command string")
        argv += ["--shell", "--", args]
    else:
        if isinstance(args, (str, bytes)):
            args = [args]
        argv += ["--"] + [os.fsdecode(a) for a in args]
    child_env = None if env is None else {os.fsdecode(k): os.fsdecode(v) for k, v in env.items()}
    if child_env is not None:
        # The executable's own settings come along (where its state is).
        for key in ("TETHER_HOME", "XDG_STATE_HOME", "HOME", "XDG_RUNTIME_DIR"):
            if key in os.environ and key not in child_env:
                child_env[key] = os.environ[key]
    done = subprocess.run(argv, env=child_env, stdin=subprocess.DEVNULL,
                          capture_output=True)
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().removeprefix("tether: ")
        if done.returncode == 127:
            raise FileNotFoundError(message)
        if done.returncode == 126:
            raise PermissionError(message)
        from ._errors import TetherError

        raise TetherError(message)
    started = json.loads(done.stdout)
    return attach(started["id"])


def _with_durable(plain: _F) -> _F:
    """``tether.start``: ``_session.start``, plus ``durable=True`` (with
    ``name``, ``ttl``, ``replace``) for a session that outlives this
    process (see ``start_durable``). Kept apart from ``_session.start`` so
    the plain path is untouched."""
    import functools

    durable_options = {"shell", "cwd", "env", "pty", "grace", "purpose", "memory", "pids",
                       "cpu", "require_limits"}

    @functools.wraps(plain)
    def start(args: Any, *, durable: bool = False, name: Optional[str] = None,
              ttl: Optional[float] = None, replace: bool = False, **kwargs: Any) -> Any:
        if not durable:
            if name is not None or ttl is not None or replace:
                raise ValueError("name, ttl and replace belong to durable=True")
            return plain(args, **kwargs)
        other = sorted(set(kwargs) - durable_options)
        if other:
            raise ValueError(f"{', '.join(other)}: not for a durable session (it is the "
                             "holder's, not this process's: no timeout, stdin is its own)")
        return start_durable(args, name=name, ttl=ttl, replace=replace, **kwargs)

    start.__doc__ = (plain.__doc__ or "") + """

    ``durable=True``: the session outlives this process — held by the
    user's tether holder until ``ttl`` seconds (default 24 h, at most 7
    days), re-adoptable from any later process with ``attach(id or
    name)``, ``tether sessions``/``attach``/``kill`` or ``tether mcp``.
    ``name`` is unique among the user's running durable sessions
    (``replace=True`` kills the first). Returns a ``DurableSession``.
    ``shell``, ``cwd``, ``env``, ``pty``, ``grace``, ``purpose`` and the
    limits apply; the other options do not."""
    return cast(_F, start)


from ._session import start as _plain_start  # noqa: E402 (after _with_durable)

#: ``tether.start``: ``_session.start`` with ``durable=True`` added.
start = _with_durable(_plain_start)
