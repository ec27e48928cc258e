//! Finding the keeper: `$TETHER_KEEPER` wins, a wrong one is a clear error,
//! and without it the `tether-keeper` beside the program is used; any
//! program that links tether can be its own keeper.
//!
//! One test function: it changes this process's environment.

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

use tether::{Command, Error};

#[test]
fn tether_keeper_variable_and_sibling_lookup() {
    // Without the variable: the sibling `tether-keeper` (cargo builds it
    // next to the test binaries' directory).
    assert!(Command::new("true").status().unwrap().success());

    // SAFETY: this test binary runs this one test; no other thread reads
    // the environment concurrently.
    unsafe { std::env::set_var("TETHER_KEEPER", "/nonexistent/tether-keeper") };
    match Command::new("true").status() {
        Err(Error::KeeperNotFound { searched }) => {
            assert_eq!(
                searched,
                vec![std::path::PathBuf::from("/nonexistent/tether-keeper")]
            );
        }
        other => panic!("expected KeeperNotFound, got {other:?}"),
    }
    let message = Command::new("true").status().unwrap_err().to_string();
    assert!(
        message.contains("TETHER_KEEPER") && message.contains("run_if_requested"),
        "{message}"
    );

    // Any program that calls `run_if_requested()` can be the keeper: the
    // `tether-keeper` binary does, and so does the `tether` CLI.
    let sibling = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("tether-keeper");
    unsafe { std::env::set_var("TETHER_KEEPER", &sibling) };
    let out = Command::new("sh")
        .args(["-c", "echo via-variable"])
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"via-variable\n");

    // Any program that links tether is its own keeper, without calling
    // `run_if_requested()` (this test binary does not): the library's
    // constructor runs the keeper before `main` (Linux).
    unsafe { std::env::set_var("TETHER_KEEPER", "/proc/self/exe") };
    let out = Command::new("sh")
        .args(["-c", "echo via-self; readlink /proc/$PPID/exe"])
        .output()
        .unwrap();
    let me = std::fs::read_link("/proc/self/exe").unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("via-self\n{}\n", me.display()),
        "the keeper is this very program"
    );
    unsafe { std::env::remove_var("TETHER_KEEPER") };
}
