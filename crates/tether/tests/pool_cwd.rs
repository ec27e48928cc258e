//! Warm keepers and the owner's working directory.

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

use tether::Command;

/// A warm keeper started before the owner changed directory still runs
/// commands in the owner's current directory. (Own binary: it changes the
/// process's cwd.)
#[test]
fn warm_keeper_follows_the_owners_current_directory() {
    tether::set_warm_keepers(1);
    Command::new("true").status().unwrap(); // the pool now holds a warm keeper
    let dir = tempfile::tempdir().unwrap();
    let before = std::env::current_dir().unwrap();
    std::env::set_current_dir(dir.path()).unwrap();
    let out = Command::new("pwd").output();
    std::env::set_current_dir(before).unwrap();
    tether::set_warm_keepers(0);
    let expected = format!("{}\n", dir.path().canonicalize().unwrap().display());
    assert_eq!(String::from_utf8(out.unwrap().stdout).unwrap(), expected);
}
