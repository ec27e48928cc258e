//! Regression tests, one per bug, named by what went wrong. Each names the
//! issue item it came from and failed on the code before its fix.

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

mod common;

use common::TestInstall;
use tether_ledger::{Ledger, LedgerError};

// issue 8 ("Also"): a dangling ledger symlink said "is corrupt again right after being recreated: " with no reason.
#[test]
fn a_dangling_ledger_symlink_is_a_precise_error() {
    let t = TestInstall::new();
    std::fs::create_dir_all(t.state_dir()).unwrap();
    let target = t.dir.path().join("elsewhere.db");
    std::os::unix::fs::symlink(&target, t.ledger_path()).unwrap();

    let err = Ledger::open(&t.install).unwrap_err();
    let message = err.to_string();
    eprintln!("{message}");
    assert!(
        matches!(&err, LedgerError::Insecure { path, .. } if *path == t.ledger_path()),
        "{err:?}"
    );
    assert!(
        message.contains("symbolic link") && message.contains(&target.display().to_string()),
        "the error names the link and where it points: {message}"
    );
    assert!(!target.exists(), "the link was not followed");
    assert!(
        t.ledger_path().symlink_metadata().unwrap().is_symlink(),
        "the link is left for the user to look at"
    );
}
