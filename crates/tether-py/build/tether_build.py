"""PEP 517 backend of `process-tether`: maturin, after building the
`tether` executable the wheel must carry.

maturin builds the extension (one binding per wheel) but not a second
binary (PyO3/maturin#368), and silently leaves out an `include` file it
cannot find. So `build_wheel` here

1. builds `tether` (crates/tether-cli) with cargo, release, into the same
   target dir maturin uses (`$CARGO_TARGET_DIR`, else `target/` at the
   root) — one build after the other, never nested; on a glibc Linux host
   with the static C library, linked statically (`_static_glibc`);
2. copies it (and, not on Windows, the small `tether-keeper` beside it)
   into the wheel's `scripts` data, once: installers put it in the
   environment's `bin/` (on PATH, so `tether mcp` needs no Python), and
   the package finds it there through its installed RECORD
   (`tether/_keeper.py`) — not a second copy inside the package, nor a
   launcher in front of it (the choice is measured in docs/python.md);
3. has it write its man pages and shell completions (`tether man --dir`,
   `tether completions SHELL`) into the wheel's `data`, which installers
   put under the environment's prefix — `share/man/man1/tether.1` (and
   `tether-run.1`, … one per subcommand),
   `share/bash-completion/completions/tether`,
   `share/zsh/site-functions/_tether`,
   `share/fish/vendor_completions.d/tether.fish` — where `man` (from the
   `bin` on PATH) and bash-completion find them for a venv, and every
   tool finds them for `/usr/local` (not on Windows: it has no place for
   either);
4. has maturin build the wheel;
5. fails unless the wheel holds the executable (and the keeper) exactly
   once, executable, and (not on Windows) the man pages and the three
   completion scripts.

`prepare_metadata_for_build_wheel` (what `pip install .` calls first) is
maturin's, once the `data` directory it insists on exists. `build_sdist`
is maturin's metadata (PKG-INFO) with the whole Cargo workspace the wheel
builds — every member crate, Cargo.lock, this backend — where maturin's
own sdist has only the extension's crates and cannot build `tether`.
"""

from __future__ import annotations

import io
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Dict, List, Optional

import maturin
from maturin import (  # noqa: F401  (the rest of the PEP 517 interface)
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
)

ROOT = Path(__file__).resolve().parents[3]
EXE = "tether.exe" if sys.platform == "win32" else "tether"
KEEPER = "tether-keeper"
#: Where earlier builds put a second copy of the executable, inside the
#: package: removed, so no stale copy can reach a wheel.
OLD_PACKAGE_BIN = ROOT / "crates/tether-py/python/tether/bin"
#: The wheel's data (pyproject.toml's `tool.maturin.data`): maturin's
#: metadata step refuses to run unless it exists.
WHEEL_DATA = ROOT / "crates/tether-py/build/wheel.data"
SCRIPTS = WHEEL_DATA / "scripts"
#: The wheel's `data`: installed under the environment's prefix.
DATA = WHEEL_DATA / "data"
#: Where the man pages go under `DATA` (`tether man --dir` writes them).
MAN1 = "share/man/man1"
#: What goes under `DATA` (prefix-relative), and the `tether` arguments
#: that print it. Empty on Windows, which has no place for either.
SHARE = {} if sys.platform == "win32" else {
    "share/bash-completion/completions/tether": ["completions", "bash"],
    "share/zsh/site-functions/_tether": ["completions", "zsh"],
    "share/fish/vendor_completions.d/tether.fish": ["completions", "fish"],
}


def _log(message: str) -> None:
    print(f"tether_build: {message}", file=sys.stderr, flush=True)


def _profile() -> str:
    """`release` (the default), or `dev` with `TETHER_WHEEL_PROFILE=dev`:
    CI builds its test wheel from the debug build `cargo test` already made
    (minutes instead of a second, release, build of every crate)."""
    profile = os.environ.get("TETHER_WHEEL_PROFILE", "release")
    if profile not in ("release", "dev"):
        raise RuntimeError(f"TETHER_WHEEL_PROFILE must be release or dev, not {profile!r}")
    return profile


def _static_target() -> Optional[str]:
    """The Rust target the keeper is built for as a static program on this
    machine (Linux: musl, when rustup has it), else `None` (the host's)."""
    if not sys.platform.startswith("linux"):
        return None
    target = f"{os.uname().machine}-unknown-linux-musl"
    sysroot = subprocess.run(
        [os.environ.get("RUSTC", "rustc"), "--print", "sysroot"], check=True, stdout=subprocess.PIPE, text=True
    ).stdout.strip()
    if (Path(sysroot) / "lib/rustlib" / target).is_dir():
        return target
    _log(f"no {target} standard library (rustup target add {target}): the keeper is built for the host")
    return None


def _static_glibc() -> bool:
    """Whether `tether` can be linked statically against glibc here: a
    glibc (`*-linux-gnu`) host whose C compiler has the static C library.

    A static `tether` starts without the dynamic loader: no libraries to
    map, no symbols to bind, none of its ~13,000 relocations applied through
    copy-on-write pages — `tether run -- /bin/true` took 1.88x `timeout 10
    /bin/true` static where it took 2.17x dynamic, on this machine in one
    interleaved run (docs/benchmarks.md). It also runs on any Linux,
    whatever its glibc. (tether looks up no users or hosts, which is what
    static glibc cannot do; musl instead of glibc starts faster still but
    ran `tether run` no faster: its allocator is slower under SQLite.)"""
    if not sys.platform.startswith("linux"):
        return False
    host = subprocess.run(
        [os.environ.get("RUSTC", "rustc"), "-vV"], check=True, stdout=subprocess.PIPE, text=True
    ).stdout
    if not any(line.startswith("host:") and line.endswith("-linux-gnu") for line in host.splitlines()):
        return False
    cc = os.environ.get("CC", "cc")
    try:
        found = subprocess.run(
            [cc, "-print-file-name=libc.a"], check=True, stdout=subprocess.PIPE, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        found = ""
    if os.path.isabs(found) and os.path.isfile(found):
        return True
    _log(f"no static C library (libc.a) for {cc}: tether is linked dynamically")
    return False


def _packed_relocations() -> bool:
    """Whether the static `tether` can carry its relocations packed
    (`-z pack-relative-relocs`, DT_RELR): the static C library must be
    glibc 2.36 or later, whose start-up code (linked into the program, so
    this is about the build host, not the machine it runs on) applies
    them. Linkers older than binutils 2.38 ignore the option (with a
    warning): the program then keeps its plain relocations.

    Packed, its ~14,000 relative relocations take 4 KiB instead of
    336 KiB, read at every start: `tether run -- /bin/true` took 0.92x the
    time of the same program with plain relocations here (12 x 100
    interleaved runs, docs/benchmarks.md), 20 page faults fewer — the
    program stays position-independent (its address randomised), which
    linking it at a fixed address would not."""
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        return False
    name, _, number = version.partition(" ")
    try:
        major, minor = (int(part) for part in number.split(".")[:2])
    except ValueError:
        return False
    if name == "glibc" and (major, minor) >= (2, 36):
        return True
    _log(f"{version or 'no glibc'}: tether's relocations are not packed (glibc 2.36+ is needed)")
    return False


def _place(built: Path, name: str) -> None:
    """Copies `built` into the wheel's scripts."""
    SCRIPTS.mkdir(parents=True, exist_ok=True)
    copy = SCRIPTS / name
    shutil.copy2(built, copy)
    if sys.platform != "win32" and shutil.which("strip"):
        # Line tables are for backtraces in development; the wheel
        # ships without them (the release binary is several times
        # larger with them).
        subprocess.run(["strip", str(copy)], check=True)
    copy.chmod(copy.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def build_executable() -> Path:
    """Builds `tether` (and, not on Windows, `tether-keeper`) and puts them
    where the wheel takes them from."""
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    cargo = os.environ.get("CARGO", "cargo")
    profile = _profile()
    out = "release" if profile == "release" else "debug"
    command = [cargo, "build", "--profile", profile, "-p", "process-tether-cli", "--bin", "tether"]
    if _static_glibc():
        # For this one binary only (`cargo rustc` passes the flag to the
        # final crate, where the C library is linked): set for the whole
        # build, it would reach the proc-macro crates, which cannot be
        # static.
        command = [cargo, "rustc", *command[2:], "--", "-C", "target-feature=+crt-static"]
        if _packed_relocations():
            command += ["-C", "link-arg=-Wl,-z,pack-relative-relocs"]
    _log(" ".join(command))
    subprocess.run(command, cwd=ROOT, check=True)
    built = target / out / EXE
    if not built.is_file():
        raise RuntimeError(f"cargo built no {built}")
    shutil.rmtree(OLD_PACKAGE_BIN, ignore_errors=True)
    _place(built, EXE)
    if sys.platform != "win32":
        # The keeper as a small program of its own beside `tether` (which
        # then starts it rather than itself): a static (musl) one starts in
        # ~0.1 ms here, `tether` as its own keeper in ~1.5 ms (the dynamic
        # loader, and glibc probing the CPU, which traps in a VM).
        static = _static_target()
        command = [cargo, "build", "--profile", profile, "-p", "process-tether", "--bin", KEEPER]
        if static:
            command += ["--target", static]
        _log(" ".join(command))
        subprocess.run(command, cwd=ROOT, check=True)
        keeper = (target / static / out if static else target / out) / KEEPER
        if not keeper.is_file():
            raise RuntimeError(f"cargo built no {keeper}")
        _place(keeper, KEEPER)
    write_share(built)
    return built


def write_share(exe: Path) -> None:
    """Writes the man pages and completion scripts `exe` prints into the
    wheel's data (replacing what an earlier build left there)."""
    shutil.rmtree(DATA, ignore_errors=True)
    if not SHARE:
        return
    subprocess.run([str(exe), "man", "--dir", str(DATA / MAN1)], check=True, stdout=subprocess.DEVNULL)
    for name, args in SHARE.items():
        path = DATA / name
        path.parent.mkdir(parents=True, exist_ok=True)
        out = subprocess.run([str(exe), *args], check=True, stdout=subprocess.PIPE).stdout
        if not out:
            raise RuntimeError(f"`tether {' '.join(args)}` printed nothing")
        path.write_bytes(out)


def check_wheel(wheel: Path) -> None:
    """Fails unless `wheel` carries the executable (and, not on Windows, the
    keeper) in its scripts exactly once — no second copy anywhere in the
    wheel — with the execute bit, and the man pages and completions."""
    with zipfile.ZipFile(wheel) as zf:
        names = {info.filename: info for info in zf.infolist()}
    programs = [EXE] if sys.platform == "win32" else [EXE, KEEPER]
    found = []
    for program in programs:
        # (Not the bash completion script, `data/share/…/completions/tether`.)
        copies = [n for n in names if n.rsplit("/", 1)[-1] == program and ".data/data/" not in n]
        scripts = [n for n in copies if n.endswith(f".data/scripts/{program}")]
        if len(scripts) != 1 or len(copies) != 1:
            raise RuntimeError(
                f"{wheel.name} should carry {program} once, as <dist>.data/scripts/{program}; it has {copies or 'none'}"
            )
        if sys.platform != "win32":
            mode = names[scripts[0]].external_attr >> 16
            if not mode & stat.S_IXUSR:
                raise RuntimeError(f"{wheel.name}: {scripts[0]} is not executable (mode {oct(mode)})")
        found.append(scripts[0])
    data = found[0].split("/")[0] + "/data/"
    wanted = [*SHARE, *(f"{MAN1}/{page.name}" for page in sorted((DATA / MAN1).glob("*.1")))]
    if SHARE and f"{MAN1}/tether.1" not in wanted:
        raise RuntimeError(f"`tether man --dir` wrote no tether.1 into {DATA / MAN1}")
    absent = [name for name in wanted if data + name not in names]
    if absent:
        raise RuntimeError(f"{wheel.name} is missing {', '.join(data + n for n in absent)}")
    _log(f"{wheel.name} carries {' and '.join(found)} and {len(wanted)} files under {data}share/")


def prepare_metadata_for_build_wheel(
    metadata_directory: str, config_settings: Optional[Dict[str, Any]] = None
) -> str:
    # maturin checks that `tool.maturin.data` exists even when it only
    # writes the metadata; its content comes with `build_wheel`.
    WHEEL_DATA.mkdir(parents=True, exist_ok=True)
    return maturin.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


#: What the sdist carries besides PKG-INFO: the Cargo workspace (every
#: member: the wheel builds crates/tether-cli, which nothing in the
#: extension depends on, so maturin's sdist leaves it out), its lock file,
#: pyproject.toml and, under crates/tether-py/build, this backend.
SDIST_ROOTS = ["Cargo.toml", "Cargo.lock", "pyproject.toml", "LICENSE-MIT", "LICENSE-APACHE", "crates"]
#: Never in an sdist built from a tree without git: build output.
SDIST_SKIP = {"target", "node_modules", "__pycache__", "wheel.data", ".venv", ".pytest_cache", ".mypy_cache"}


def _sdist_files() -> List[str]:
    """The files under `SDIST_ROOTS`: git's (tracked, or new and not
    ignored) in a checkout, else every file but build output."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *SDIST_ROOTS],
            cwd=ROOT, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        ).stdout.decode()
        files = {f for f in listed.split("\0") if f and (ROOT / f).is_file()}
    except (OSError, subprocess.CalledProcessError):
        files = set()
        for top in SDIST_ROOTS:
            path = ROOT / top
            if path.is_file():
                files.add(top)
            for directory, subdirs, names in os.walk(path):
                subdirs[:] = [d for d in subdirs if d not in SDIST_SKIP]
                for name in names:
                    if not name.endswith((".so", ".pyd", ".pyc")):
                        files.add(str((Path(directory) / name).relative_to(ROOT)))
    files = {f for f in files if not f.startswith("crates/tether-py/python/tether/bin/")}
    for needed in ("Cargo.lock", "crates/tether-cli/Cargo.toml", "crates/tether-py/build/tether_build.py"):
        if needed not in files:
            raise RuntimeError(f"the sdist would lack {needed}")
    return sorted(files)


def build_sdist(sdist_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
    WHEEL_DATA.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="tether-sdist-"))
    try:
        name = maturin.build_sdist(str(scratch), config_settings)
        with tarfile.open(scratch / name) as theirs:
            pkg_info = next(m for m in theirs.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO"))
            top = pkg_info.name.split("/")[0]
            metadata = theirs.extractfile(pkg_info).read()  # type: ignore[union-attr]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    def clean(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    files = _sdist_files()
    out = Path(sdist_directory) / name
    with tarfile.open(out, "w:gz", format=tarfile.PAX_FORMAT) as sdist:
        for path in files:
            sdist.add(ROOT / path, arcname=f"{top}/{path}", recursive=False, filter=clean)
        info = clean(tarfile.TarInfo(f"{top}/PKG-INFO"))
        info.size, info.mode = len(metadata), 0o644
        info.mtime = int(os.environ.get("SOURCE_DATE_EPOCH", "0")) or int(os.path.getmtime(ROOT / "pyproject.toml"))
        sdist.addfile(info, io.BytesIO(metadata))
    _log(f"{name}: PKG-INFO and {len(files)} files of the workspace")
    return name


def build_wheel(
    wheel_directory: str,
    config_settings: Optional[Dict[str, Any]] = None,
    metadata_directory: Optional[str] = None,
) -> str:
    build_executable()
    if _profile() == "dev" and "MATURIN_PEP517_ARGS" not in os.environ:
        os.environ["MATURIN_PEP517_ARGS"] = "--profile dev"
    name = maturin.build_wheel(wheel_directory, config_settings, metadata_directory)
    check_wheel(Path(wheel_directory) / name)
    return name


def build_editable(
    wheel_directory: str,
    config_settings: Optional[Dict[str, Any]] = None,
    metadata_directory: Optional[str] = None,
) -> str:
    build_executable()
    name = maturin.build_editable(wheel_directory, config_settings, metadata_directory)
    return name


if __name__ == "__main__":
    # `python crates/tether-py/build/tether_build.py DIR`: builds a wheel
    # into DIR without pip in between (a debugging aid: .ci/python builds
    # as users do, with `pip install .` and `python -m build --sdist`).
    out = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "dist")
    os.makedirs(out, exist_ok=True)
    print(Path(out) / build_wheel(out))
