//! `tether run` where `/dev` is what the kernel alone makes (issue 35): no
//! `/dev/fd`, `/dev/stdin`, … — the links udev, systemd or a container
//! runtime usually add — as in an initramfs, a `FROM scratch` image, a
//! chroot. And a keeper that cannot start says why.

// Mount namespaces and device nodes: Linux.
#![cfg(target_os = "linux")]

mod support;

use std::process::{Command, Stdio};

use support::{home, tether_path};
use tether_testkit::require_root;

/// Runs `script` with `sh` in a private mount namespace whose `/dev` is a
/// fresh tmpfs holding only `null`, `zero` and `urandom` (a bare
/// devtmpfs has a few more nodes, and no links either); `$TETHER` is the
/// binary under test. Stdout, stderr and exit code.
fn in_bare_dev(script: &str) -> (String, String, Option<i32>) {
    let setup = "mount -t tmpfs -o mode=755 tmpfs /dev \
                 && mknod -m 666 /dev/null c 1 3 \
                 && mknod -m 666 /dev/zero c 1 5 \
                 && mknod -m 666 /dev/urandom c 1 9 \
                 && test ! -e /dev/fd && test ! -e /dev/stdin || exit 99";
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(format!("{setup}\n{script}"))
        .env("TETHER", tether_path())
        .env("TETHER_HOME", home())
        .stdin(Stdio::null())
        .output()
        .expect("run unshare");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code(),
    )
}

// issue 35 item 1: the keeper listed /dev/fd to close what it inherited;
// without it the keeper exited 125 silently and `tether run -- echo hi`
// failed with "Connection reset by peer (os error 104)".
#[test]
fn a_command_runs_where_dev_has_no_fd_link() {
    if !require_root("a private /dev") {
        return;
    }
    let (out, err, code) = in_bare_dev(r#""$TETHER" run -- echo hi"#);
    assert_eq!((out.as_str(), code), ("hi\n", Some(0)), "stderr: {err}");
    // What the owner left inheritable still reaches neither keeper nor
    // command: fd 7, open (not close-on-exec) in the shell that runs
    // `tether run`, is not among the command's descriptors.
    let (out, err, code) = in_bare_dev(
        r#"exec 7</dev/zero
        "$TETHER" run -- sh -c 'cd /proc/self/fd && echo *'"#,
    );
    assert_eq!(code, Some(0), "stderr: {err}");
    let fds: Vec<&str> = out.split_whitespace().collect();
    assert!(fds.contains(&"0") && !fds.contains(&"7"), "{out}");
}

// A PTY needs devpts behind /dev/ptmx, which a bare /dev lacks: the error
// says so instead of a bare "No such file or directory".
#[test]
fn a_pty_without_devpts_is_a_clear_error() {
    if !require_root("a private /dev") {
        return;
    }
    let (out, err, code) = in_bare_dev(r#""$TETHER" run --pty -- echo hi"#);
    assert_eq!((out.as_str(), code), ("", Some(125)), "stderr: {err}");
    assert!(err.contains("/dev/ptmx") && err.contains("devpts"), "{err}");
}

// issue 35 item 1: a keeper that could not start said nothing; the owner
// reported "Broken pipe" or "Connection reset by peer". With a descriptor
// limit of 10 the keeper cannot move its socket above fd 9 (where it
// keeps it, clear of the command's descriptors): it must say so.
#[test]
fn a_keeper_that_cannot_start_says_why() {
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -n 10 && exec "$TETHER" run -- echo hi"#)
        .env("TETHER", tether_path())
        .env("TETHER_HOME", home())
        .stdin(Stdio::null())
        .output()
        .expect("run sh");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(out.stdout.is_empty());
    assert!(
        err.contains("the keeper could not start: no descriptor above 9 for its socket"),
        "{err}"
    );
}
