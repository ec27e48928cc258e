//! The state directory and the ledger's files are trusted only when they
//! are this user's alone (like `ssh` and `~/.ssh`): anything else is
//! refused with an error that says what to do, and nothing is read from or
//! written to it. Modes that only let others read are tightened instead.

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::TestInstall;
use tether_ledger::{Insecurity, Ledger, LedgerError};

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_state_dir_others_can_write_is_refused_untouched() {
    let t = TestInstall::new();
    std::fs::create_dir_all(t.state_dir()).unwrap();
    set_mode(t.state_dir(), 0o777);
    let err = Ledger::open(&t.install).unwrap_err();
    assert!(
        matches!(
            &err,
            LedgerError::Insecure { path, problem: Insecurity::Writable { mode: 0o777 } }
                if path == t.state_dir()
        ),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(message.contains("chmod go-w"), "{message}");
    assert_eq!(
        names(t.state_dir()),
        Vec::<String>::new(),
        "nothing written"
    );
    assert_eq!(mode(t.state_dir()), 0o777, "nothing changed");
}

#[test]
fn readable_modes_are_tightened_to_0700_and_0600() {
    let t = TestInstall::new();
    drop(Ledger::open(&t.install).unwrap());
    set_mode(t.state_dir(), 0o755);
    set_mode(&t.ledger_path(), 0o644);
    let ledger = Ledger::open(&t.install).unwrap();
    assert_eq!(mode(t.state_dir()), 0o700);
    assert_eq!(mode(&t.ledger_path()), 0o600);
    // SQLite gives -wal and -shm the store's mode.
    for side in ["-wal", "-shm"] {
        let path = t.state_dir().join(format!("ledger.db{side}"));
        if path.exists() {
            assert_eq!(mode(&path), 0o600, "{}", path.display());
        }
    }
    drop(ledger);
}

#[test]
fn a_symlinked_wal_is_refused_and_not_followed() {
    let t = TestInstall::new();
    drop(Ledger::open(&t.install).unwrap());
    let wal = t.state_dir().join("ledger.db-wal");
    let _ = std::fs::remove_file(&wal);
    let elsewhere = t.dir.path().join("elsewhere");
    std::os::unix::fs::symlink(&elsewhere, &wal).unwrap();
    let err = Ledger::open(&t.install).unwrap_err();
    assert!(
        matches!(&err, LedgerError::Insecure { path, problem: Insecurity::Symlink { target } }
            if *path == wal && *target == elsewhere),
        "{err:?}"
    );
    assert!(!elsewhere.exists());
}

#[test]
fn a_state_dir_replaced_by_a_symlink_is_refused() {
    // The install's path is canonical when computed; a link put at it
    // afterwards (or planted at the shared /tmp fallback) is not followed.
    let t = TestInstall::new();
    let real = t.dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    set_mode(&real, 0o700);
    std::os::unix::fs::symlink(&real, t.state_dir()).unwrap();
    let err = Ledger::open(&t.install).unwrap_err();
    assert!(
        matches!(&err, LedgerError::Insecure { problem: Insecurity::Symlink { target }, .. }
            if *target == real),
        "{err:?}"
    );
    assert!(err.to_string().contains("TETHER_HOME"), "{err}");
    assert_eq!(names(&real), Vec::<String>::new());
}

#[test]
fn a_ledger_another_user_owns_is_refused() {
    if !tether_testkit::require_root("giving a file to another user") {
        return;
    }
    let t = TestInstall::new();
    drop(Ledger::open(&t.install).unwrap());
    let before = std::fs::read(t.ledger_path()).unwrap();
    std::os::unix::fs::chown(t.ledger_path(), Some(65534), Some(65534)).unwrap();
    let err = Ledger::open(&t.install).unwrap_err();
    assert!(
        matches!(&err, LedgerError::Insecure { path, problem: Insecurity::OwnedBy { uid: 65534, euid: 0 } }
            if *path == t.ledger_path()),
        "{err:?}"
    );
    assert!(std::fs::read(t.ledger_path()).unwrap() == before);
}
