"""tether.Popen and tether.run where they behave as subprocess's: each
checked against what subprocess itself does (CPython's own suite runs
against them too: cpython_subprocess.py)."""

from __future__ import annotations

import errno
import gc
import inspect
import os
import signal
import subprocess
import sys
import types
import warnings
from pathlib import Path

import pytest

import tether
from conftest import require_root, tagged_env, tagged_pids, wait_all_dead, wait_for_count

PY = sys.executable


def test_kill_is_sigkill_to_the_tree_at_once(tag: str) -> None:
    # The main process ignores SIGTERM: the graceful ladder would take the
    # grace (60 s here) and end in SIGKILL anyway; kill() does not ask.
    script = "trap '' TERM; sh -c 'trap \"\" TERM; sleep 1000' & echo ready; exec sleep 1000"
    p = tether.Popen(["sh", "-c", script], env=tagged_env(tag), stdout=tether.PIPE, grace=60)
    assert p.stdout is not None and p.stdout.readline() == b"ready\n"
    assert wait_for_count(tag, 2, 10) >= 2
    assert p.kill() is None  # as subprocess: returns at once
    assert p.wait(timeout=30) == -signal.SIGKILL
    assert wait_all_dead(tag, 10) == []
    p.kill()  # finished: nothing, no error
    p.stdout.close()


def test_kill_tree_is_the_graceful_verified_kill(tag: str) -> None:
    p = tether.Popen(["sleep", "1000"], env=tagged_env(tag))
    killed = p.kill_tree()
    assert killed.returncode == p.returncode == -signal.SIGTERM
    assert tagged_pids(tag) == []


def test_module_functions_as_subprocess() -> None:
    for module in (subprocess, tether):
        assert module.call(["sh", "-c", "exit 3"]) == 3
        assert module.check_call(["true"]) == 0
        with pytest.raises(subprocess.CalledProcessError):
            module.check_call(["false"])
        assert module.check_output(["echo", "out"]) == b"out\n"
        assert module.check_output(["cat"], input="in", text=True) == "in"
        assert module.getoutput("echo xyzzy; echo err >&2") == "xyzzy\nerr"
        assert module.getstatusoutput("echo no; exit 4") == (4, "no")
    with pytest.raises(tether.CalledProcessError):
        tether.check_output(["false"])


def test_executable_keeps_argv0() -> None:
    for module in (subprocess, tether):
        out = module.run(["my-name", "-c", "echo $0"], executable="/bin/sh", capture_output=True)
        assert out.stdout == b"my-name\n"
        # With a shell, `executable` is the shell.
        out = module.run("echo $0", shell=True, executable="/bin/sh", capture_output=True)
        assert out.stdout == b"/bin/sh\n"


def test_start_new_session_and_process_group(tag: str) -> None:
    ids = "import os; print(os.getpid(), os.getsid(0), os.getpgid(0))"
    out = tether.run([PY, "-c", ids], start_new_session=True, capture_output=True, text=True)
    pid, sid, pgid = map(int, out.stdout.split())
    assert sid == pid == pgid
    out = tether.run([PY, "-c", ids], process_group=0, capture_output=True, text=True)
    pid, sid, pgid = map(int, out.stdout.split())
    assert pgid == pid and sid != pid
    with pytest.raises(ValueError):
        tether.run(["true"], process_group=os.getpgid(0))
    # In a session of its own, still contained: what it leaves is killed.
    p = tether.Popen("sleep 1000 & exit 0", shell=True, start_new_session=True, env=tagged_env(tag))
    assert p.wait(timeout=30) == 0
    assert tagged_pids(tag) == []


def test_pass_fds_and_close_fds_false() -> None:
    passed_r, passed_w = os.pipe()
    kept_r, kept_w = os.pipe()  # not inheritable (as os.pipe makes them)
    try:
        code = f"import os; os.write({passed_w}, b'passed'); os.write({kept_w}, b'x')"
        done = tether.run([PY, "-c", code], pass_fds=[passed_w], capture_output=True)
        assert done.returncode == 1 and b"Bad file descriptor" in done.stderr  # kept_w was not passed
        assert os.read(passed_r, 100) == b"passed"
        os.set_inheritable(passed_w, True)
        done = tether.run([PY, "-c", f"import os; os.write({passed_w}, b'inherited')"], close_fds=False)
        assert done.returncode == 0 and os.read(passed_r, 100) == b"inherited"
        done = tether.run([PY, "-c", f"import os; os.fstat({passed_w})"], capture_output=True)
        assert done.returncode == 1, "close_fds=True (the default) passes nothing on"
    finally:
        for fd in (passed_r, passed_w, kept_r, kept_w):
            os.close(fd)


def test_pass_fds_that_are_no_descriptors_are_refused(tag: str) -> None:
    # Before, -1 reached BorrowedFd::borrow_raw unchecked (a Rust panic).
    with pytest.raises(ValueError, match="pass_fds: -1 is not a file descriptor"):
        tether.Popen(["sleep", "1000"], pass_fds=[-1], env=tagged_env(tag))
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    with pytest.raises(OSError) as raised:
        tether.Popen(["sleep", "1000"], pass_fds=[w], env=tagged_env(tag))
    assert raised.value.errno == errno.EBADF
    assert tagged_pids(tag) == []


def _status_line(out: str, name: str) -> str:
    return next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith(name + ":"))


def test_umask_and_restore_signals() -> None:
    out = tether.run(["cat", "/proc/self/status"], umask=0o027, capture_output=True, text=True).stdout
    assert _status_line(out, "Umask") == "0027"
    # CPython ignores SIGPIPE and SIGXFSZ: restore_signals=False keeps them
    # ignored in the command, as subprocess does; True (the default) not.
    mask = {r: int(_status_line(tether.check_output(["cat", "/proc/self/status"], restore_signals=r, text=True),
                                "SigIgn"), 16) for r in (False, True)}
    assert mask[False] & (1 << (signal.SIGPIPE - 1)) and mask[False] & (1 << (signal.SIGXFSZ - 1))
    assert mask[True] & (1 << (signal.SIGPIPE - 1)) == 0


def test_user_group_extra_groups() -> None:
    require_root("changing credentials")
    out = tether.run(["id", "-u", "-g", "-G"], capture_output=True, text=True)
    args = dict(user=65534, group=65534, extra_groups=[65534, 4])
    uid = tether.check_output(["id", "-u"], text=True, **args).strip()  # type: ignore[arg-type]
    gid = tether.check_output(["id", "-g"], text=True, **args).strip()  # type: ignore[arg-type]
    groups = tether.check_output(["id", "-G"], text=True, **args).split()  # type: ignore[arg-type]
    assert (uid, gid, sorted(groups)) == ("65534", "65534", ["4", "65534"]), out.stdout
    with pytest.raises(ValueError):
        tether.run(["true"], user=-1)
    with pytest.raises(OverflowError):
        tether.run(["true"], group=2**64)


def test_pipesize() -> None:
    import fcntl

    p = tether.Popen(["cat"], stdin=tether.PIPE, stdout=tether.PIPE, pipesize=2 * 65536)
    assert p.stdin is not None and p.stdout is not None
    assert fcntl.fcntl(p.stdin.fileno(), fcntl.F_GETPIPE_SZ) == 2 * 65536
    assert p.communicate(b"x")[0] == b"x"


def test_non_utf8_arguments_environment_and_cwd(tmp_path: Path) -> None:
    raw = b"caf\xe9"
    (tmp_path / os.fsdecode(raw)).mkdir()
    code = "import os, sys; sys.stdout.buffer.write(os.fsencode(sys.argv[1]) + os.environb[b'V'] + os.getcwdb())"
    for arg in (raw, os.fsdecode(raw)):  # bytes, or str with surrogate escapes
        env = {**os.environ, "V": os.fsdecode(raw)}
        done = tether.run([PY, "-c", code, arg], env=env, cwd=tmp_path / os.fsdecode(raw), capture_output=True)
        assert done.stdout == raw + raw + bytes(tmp_path) + b"/" + raw, done.stderr


def test_exceptions_as_subprocess(tmp_path: Path) -> None:
    no_shebang = tmp_path / "noexec"
    no_shebang.write_bytes(b"\x00\x01 not a program")
    no_shebang.chmod(0o755)
    for module in (subprocess, tether):
        with pytest.raises(OSError) as raised:
            module.run([str(no_shebang)])
        assert type(raised.value) is OSError and raised.value.errno == errno.ENOEXEC
        assert raised.value.strerror == os.strerror(errno.ENOEXEC)
        with pytest.raises(NotADirectoryError):
            module.run(["true"], cwd=str(no_shebang))
        with pytest.raises(FileNotFoundError) as missing:
            module.run(["/no/such/dir/prog"])
        assert (missing.value.strerror, missing.value.filename) == (os.strerror(errno.ENOENT), "/no/such/dir/prog")
        with pytest.raises(ValueError):
            module.run(["tr\0ue"])
        with pytest.raises(ValueError):
            module.run(["true"], startupinfo=object())
        with pytest.raises(ValueError):
            module.run(["true"], creationflags=1)
        with pytest.raises(TypeError):
            module.run(Path("/bin/true"), shell=True)


def test_run_text_timeout_carries_bytes_as_subprocess() -> None:
    for module in (subprocess, tether):
        with pytest.raises(subprocess.TimeoutExpired) as raised:
            module.run(["sh", "-c", "echo partial; exec sleep 1000"], text=True, capture_output=True, timeout=1)
        assert raised.value.output == b"partial\n"
        assert raised.value.stderr is None


def test_infinite_timeout() -> None:
    assert tether.run(["true"], timeout=float("inf")).returncode == 0
    p = tether.Popen(["true"])
    assert p.wait(timeout=float("inf")) == 0


def test_text_line_buffering_warns_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = tether.Popen(["cat"], stdin=tether.PIPE, stdout=tether.PIPE, text=True, bufsize=1)
        assert p.communicate("line\n")[0] == "line\n"


def test_attributes_signature_and_generic_alias() -> None:
    p = tether.Popen(["true"], stdout=tether.PIPE, encoding="latin-1", errors="replace")
    assert (p.encoding, p.errors, p.text_mode, p.universal_newlines) == ("latin-1", "replace", "latin-1", True)
    p.communicate()
    q = tether.Popen(["true"])
    assert (q.encoding, q.errors, q.text_mode, q.universal_newlines) == (None, None, None, False)
    q.wait()
    ours = [n for n, x in inspect.signature(tether.Popen.__init__).parameters.items()
            if x.kind is x.POSITIONAL_OR_KEYWORD]
    theirs = [n for n, x in inspect.signature(subprocess.Popen.__init__).parameters.items()
              if x.kind is x.POSITIONAL_OR_KEYWORD]
    assert ours == theirs
    assert isinstance(tether.Popen[bytes], types.GenericAlias)


def test_exit_raises_broken_pipe_as_subprocess() -> None:
    for module in (subprocess, tether):
        p = module.Popen(["true"], stdin=module.PIPE, bufsize=4 << 20)
        p.__enter__()
        p.wait()
        assert p.stdin is not None
        p.stdin.write(b"x" * (1 << 20))  # held in the buffer until the close
        with pytest.raises(BrokenPipeError):
            p.__exit__(None, None, None)
        assert p.returncode == 0 and p.stdin.closed


def test_dropped_running_popen_warns_and_is_killed(tag: str) -> None:
    p = tether.Popen(["sleep", "1000"], env=tagged_env(tag))
    assert wait_for_count(tag, 1, 10) == 1
    with pytest.warns(ResourceWarning, match="still running"):
        del p
        gc.collect()
    assert wait_all_dead(tag, 10) == []


def test_preexec_fn_runs_before_the_keeper_and_is_passed_on(tag: str) -> None:
    import resource

    def prepare() -> None:
        os.setsid()
        resource.setrlimit(resource.RLIMIT_NOFILE, (123, 123))

    code = "import os, resource; print(os.getsid(0), os.getppid(), resource.getrlimit(resource.RLIMIT_NOFILE)[0])"
    out = tether.check_output([PY, "-c", code], preexec_fn=prepare, text=True, env=tagged_env(tag))
    sid, parent, nofile = map(int, out.split())
    # The keeper (the command's parent) ran it: its session, its limit.
    assert sid == parent and sid != os.getsid(0)
    assert nofile == 123
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] != 123  # not in this process
    for module in (subprocess, tether):
        with pytest.raises(subprocess.SubprocessError, match="Exception occurred in preexec_fn"):
            module.run(["true"], preexec_fn=lambda: 1 / 0)
        # Its environment changes reach a command that sets none of its own.
        fruit = [PY, "-c", "import os; print(os.getenv('FRUIT'))"]
        assert module.check_output(fruit, preexec_fn=lambda: os.putenv("FRUIT", "apple")) == b"apple\n"
        assert module.check_output(fruit, preexec_fn=lambda: os.putenv("FRUIT", "apple"),
                                   env={"PATH": os.environ["PATH"]}) == b"None\n"
    assert "FRUIT" not in os.environ
    # Still contained: what the command leaves is killed.
    p = tether.Popen("sleep 1000 & exit 0", shell=True, preexec_fn=os.setsid, env=tagged_env(tag))
    assert p.wait(timeout=30) == 0
    assert tagged_pids(tag) == []
