//! Which keeper `tether run` starts: the small `tether-keeper` beside the
//! `tether` executable when it is of this build (it starts in a fraction
//! of the time `tether` itself takes), `tether` itself when there is none,
//! and `tether` itself when the one beside is of another build — which
//! exits at once, before reading anything, so the command still runs
//! exactly once.

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

mod support;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use support::{home, tether_path};

/// This build's `tether-keeper`: cargo builds it beside `tether` (the
/// README's `cargo test --workspace` builds every binary of the workspace).
fn built_keeper() -> PathBuf {
    let keeper = tether_path().with_file_name("tether-keeper");
    assert!(
        keeper.is_file(),
        "{} is missing: build it (cargo build -p process-tether --bin tether-keeper) or run \
         the workspace's tests",
        keeper.display()
    );
    keeper
}

/// `dir/tether run` of a command that prints its parent's executable (its
/// keeper) and appends a line to `dir/runs`; returns that executable and
/// how many times the command ran.
fn keeper_of_a_run(dir: &Path) -> (PathBuf, usize) {
    let runs = dir.join("runs");
    let out = std::process::Command::new(dir.join("tether"))
        .env("TETHER_HOME", home())
        .env_remove("TETHER_KEEPER")
        .args(["run", "--", "sh", "-c"])
        .arg(format!(
            "readlink /proc/$PPID/exe; echo ran >> '{}'",
            runs.display()
        ))
        .stdin(Stdio::null())
        .output()
        .expect("run tether");
    assert!(
        out.status.success(),
        "{}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).unwrap();
    let ran = std::fs::read_to_string(&runs)
        .unwrap_or_default()
        .lines()
        .count();
    std::fs::remove_file(&runs).ok();
    (PathBuf::from(printed.trim()), ran)
}

/// A directory with a copy of this build's `tether`, and `keeper` beside
/// it as `tether-keeper` if given.
fn install(keeper: Option<&[u8]>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(tether_path(), dir.path().join("tether")).unwrap();
    if let Some(keeper) = keeper {
        let path = dir.path().join("tether-keeper");
        std::fs::write(&path, keeper).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    dir
}

/// One test: it writes executables and then runs them, and a fork on a
/// parallel test's thread between the two could hold a write descriptor
/// open across the exec (`ETXTBSY`).
#[test]
fn tether_run_starts_the_keeper_beside_it_of_this_build_else_itself() {
    // This build's keeper beside it: used.
    let dir = install(Some(&std::fs::read(built_keeper()).unwrap()));
    let (keeper, ran) = keeper_of_a_run(dir.path());
    assert_eq!(
        (keeper, ran),
        (dir.path().join("tether-keeper"), 1),
        "the tether-keeper beside it was not used: is {} of this build? \
         (cargo build -p process-tether --bin tether-keeper)",
        built_keeper().display()
    );

    // None beside it: `tether` is its own keeper.
    let dir = install(None);
    let (keeper, ran) = keeper_of_a_run(dir.path());
    assert_eq!((keeper, ran), (dir.path().join("tether"), 1));

    // One of another build beside it: the real keeper program, told by a
    // wrapper that its owner is of build 0000000000000000, refuses at once;
    // `tether` runs the command through itself instead, once.
    let wrapper = format!(
        "#!/bin/sh\nexec '{}' \"$1\" 0000000000000000\n",
        built_keeper().display()
    );
    let dir = install(Some(wrapper.as_bytes()));
    let (keeper, ran) = keeper_of_a_run(dir.path());
    assert_eq!((keeper, ran), (dir.path().join("tether"), 1));

    // The keeper refuses an owner of another build before it reads: its
    // socket (fd 0) is a pipe with a request-sized frame waiting, and a
    // keeper that read it would fail with 125, not refuse with 122.
    let mut keeper = std::process::Command::new(built_keeper())
        .args(["__tether-keeper", "0000000000000000"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _ = keeper
        .stdin
        .take()
        .unwrap()
        .write_all(&[8, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(keeper.wait().unwrap().code(), Some(122));
}
