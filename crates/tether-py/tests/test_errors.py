"""Every error mapping: the library's errors as the exceptions Python code
already catches."""

from __future__ import annotations

import errno
import os
import subprocess
import sysconfig

import pytest

import tether


def test_program_not_found_is_file_not_found() -> None:
    with pytest.raises(FileNotFoundError) as raised:
        tether.run(["tether-no-such-program"])
    assert raised.value.errno == errno.ENOENT
    assert raised.value.filename == "tether-no-such-program"
    with pytest.raises(FileNotFoundError):
        tether.Popen(["/nonexistent/prog"])
    with pytest.raises(FileNotFoundError):
        tether.start(["tether-no-such-program"])


def test_not_executable_is_permission_error(tmp_path) -> None:
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    with pytest.raises(PermissionError) as raised:
        tether.run([str(script)])
    assert raised.value.errno == errno.EACCES
    with pytest.raises(PermissionError):
        tether.run([str(tmp_path)])  # a directory


def test_bad_cwd_is_file_not_found(tmp_path) -> None:
    with pytest.raises(FileNotFoundError):
        tether.run(["true"], cwd=tmp_path / "missing")


def test_bad_arguments_are_value_and_type_errors() -> None:
    with pytest.raises(ValueError):
        tether.run([])
    with pytest.raises(ValueError):
        tether.run(["echo", "nul\0byte"])
    with pytest.raises(ValueError):
        tether.run(["true"], purpose="not a purpose!")
    with pytest.raises(ValueError):
        tether.run(["true"], env={"A=B": "c"})
    with pytest.raises(ValueError):
        tether.run(["true"], grace=-1)
    with pytest.raises(ValueError):
        tether.start(["true"], pty=(0, 80))
    with pytest.raises(TypeError):
        tether.run([1, 2])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        tether.run(["true"], stdout=object())  # type: ignore[arg-type]


def test_session_errors() -> None:
    s = tether.start(["sleep", "1000"])
    try:
        with pytest.raises(ValueError):  # no stdin pipe
            s.write(b"x")
        with pytest.raises(ValueError):  # not a terminal
            s.screen()
        with pytest.raises(ValueError):  # a bad regex
            s.wait(until="(", timeout=1)
        with pytest.raises(tether.SessionNotFound):
            tether.session("nosuchsession")
        with pytest.raises(LookupError):  # what SessionNotFound also is
            tether.session("nosuchsession")
    finally:
        s.kill()
    fed = tether.start(["cat"], stdin=True)
    fed.close_stdin()
    with pytest.raises(BrokenPipeError):
        fed.write(b"late")
    fed.kill()


def test_timeout_and_check_are_subprocess_exceptions() -> None:
    assert issubclass(tether.TimeoutExpired, subprocess.TimeoutExpired)
    assert issubclass(tether.CalledProcessError, subprocess.CalledProcessError)
    with pytest.raises(subprocess.TimeoutExpired):
        tether.run(["sleep", "1000"], timeout=0.2)
    with pytest.raises(subprocess.CalledProcessError):
        tether.run(["false"], check=True)


def test_a_missing_keeper_is_a_keeper_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_KEEPER", "/nonexistent/tether")
    with pytest.raises(tether.KeeperError) as raised:
        tether.run(["true"])
    assert "/nonexistent/tether" in str(raised.value)


def test_kill_incomplete_carries_the_survivors() -> None:
    # A process that survives SIGKILL cannot be made without a kernel in
    # trouble; the mapping is checked on the exception itself.
    e = tether.KillIncomplete("kill incomplete: 1 process(es) survived: 7 x", [(7, "x")])
    assert isinstance(e, tether.TetherError) and e.survivors == [(7, "x")]


def test_the_executable_is_the_one_installed_on_path_once() -> None:
    # The wheel carries it once, in its scripts: the environment's bin/
    # (on PATH), where the package finds it through its RECORD.
    exe = tether.executable()
    assert exe is not None and os.path.dirname(exe) == sysconfig.get_path("scripts")
    assert os.access(exe, os.X_OK)
    assert not os.path.exists(os.path.join(os.path.dirname(tether.__file__), "bin"))
