//! A `tether run` that fails before its command starts (program not found,
//! bad `--cwd`) has already started its keeper ahead: that keeper is
//! reaped before `tether` exits, never left to die after it.
//!
//! One test in this binary: it makes the test process a subreaper, so that
//! a keeper `tether` left behind would become its child — and stay one, a
//! zombie nobody reaps — where a scan of the machine would race its exit.

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

mod support;

use std::process::Stdio;

use support::tether;

/// Every child of this process, alive or zombie.
fn children() -> Vec<u32> {
    let me = std::process::id();
    std::fs::read_dir(format!("/proc/{me}/task"))
        .unwrap()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|text| {
            text.split_ascii_whitespace()
                .filter_map(|p| p.parse::<u32>().ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn a_run_that_fails_to_start_leaves_no_keeper() {
    assert_eq!(
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) },
        0
    );
    let failures: [&[&str]; 2] = [
        &["run", "--", "/nonexistent/tether-test-program"],
        &["run", "--cwd", "/nonexistent/dir", "--", "true"],
    ];
    for args in failures {
        let out = tether()
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run tether");
        assert!(!out.status.success(), "{args:?}: {}", out.status);
        // `output` reaped `tether`; anything else here is what it left.
        let left = children();
        assert!(
            left.is_empty(),
            "{args:?} left children of ours: {:?}",
            left.iter()
                .map(|&pid| tether::sys::describe(pid))
                .collect::<Vec<_>>()
        );
    }
}
