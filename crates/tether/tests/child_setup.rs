//! The command's side of a spawn beyond its streams (`tether::unix::CommandExt`,
//! what `subprocess.Popen` offers): argv[0], descriptors passed on, umask,
//! ignored signals, credentials, and a hook run in the keeper's process.

// Real Linux processes (/proc): the suite runs on Linux; macOS is
// type-checked.
#![cfg(target_os = "linux")]

use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};

use tether::unix::CommandExt;
use tether::{Command, Error};
use tether_testkit::{assert_nothing_left, require_root};

/// One `/proc/self/status` field of the command `sh` runs.
fn status_field(status: &str, name: &str) -> String {
    status
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in {status}"))
        .trim()
        .to_owned()
}

#[test]
fn arg0_passed_descriptors_umask_and_ignored_signals_reach_the_command() {
    let (mut read, write) = std::io::pipe().unwrap();
    let write = OwnedFd::from(write);
    let script = "echo $0; umask; grep SigIgn /proc/self/status; echo passed >&7";
    let output = Command::new("sh")
        .args(["-c", script])
        .arg0("my-name")
        .pass_fd(7, write)
        .umask(0o027)
        .ignore_signals(&[libc::SIGUSR1])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some("my-name"));
    assert_eq!(lines.next(), Some("0027"));
    let ignored = u64::from_str_radix(&status_field(&stdout, "SigIgn"), 16).unwrap();
    assert_eq!(ignored & 0x7fff_ffff, 1 << (libc::SIGUSR1 - 1), "{stdout}");
    // Our copy of the write end went with the command: EOF after its line.
    let mut passed = String::new();
    read.read_to_string(&mut passed).unwrap();
    assert_eq!(passed, "passed\n");
    assert_nothing_left();
}

#[test]
fn a_descriptor_passed_on_must_not_take_a_streams_place() {
    let (_read, write) = std::io::pipe().unwrap();
    let err = Command::new("true")
        .pass_fd(2, OwnedFd::from(write))
        .spawn()
        .unwrap_err();
    assert!(
        matches!(err, Error::InvalidInput { .. }),
        "{err}: a target below 3 is refused"
    );
}

#[test]
fn credentials_are_changed_before_exec() {
    if !require_root("changing a command's credentials") {
        return;
    }
    let output = Command::new("sh")
        .args(["-c", "id -u; id -g; id -G"])
        .uid(65534)
        .gid(65534)
        .groups(&[65534, 4])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(&lines[..2], ["65534", "65534"]);
    let mut groups: Vec<&str> = lines[2].split_whitespace().collect();
    groups.sort();
    assert_eq!(groups, ["4", "65534"]);
    assert_nothing_left();
}

#[test]
fn the_keeper_hook_runs_in_the_keepers_process_and_is_passed_on() {
    let mut command = Command::new("sh");
    command.args(["-c", "echo $PPID $(cut -d' ' -f6 /proc/$$/stat) $FRUIT"]);
    // SAFETY: setsid(2) is async-signal-safe; setenv is not, but nothing
    // else runs in the child.
    unsafe {
        command.pre_exec_keeper(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::setenv(c"FRUIT".as_ptr(), c"apple".as_ptr(), 1);
            Ok(())
        });
    }
    let output = command.output().unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    let mut words = stdout.split_whitespace();
    let ids: Vec<u32> = words.by_ref().take(2).map(|n| n.parse().unwrap()).collect();
    // The environment as the hook left it reaches a command that sets
    // none of its own.
    assert_eq!(words.next(), Some("apple"), "{stdout}");
    // The command's session is its parent's, the keeper's: the hook made
    // the keeper a session leader, not the owner (this process).
    assert_eq!(ids[0], ids[1], "{stdout}");
    // SAFETY: getsid(0) reads our own session.
    assert_ne!(ids[1], unsafe { libc::getsid(0) } as u32);
    assert_nothing_left();
}

#[test]
fn a_failing_keeper_hook_fails_the_spawn_with_its_errno() {
    let mut command = Command::new("true");
    // SAFETY: nothing but a return.
    unsafe {
        command.pre_exec_keeper(|| Err(std::io::Error::from_raw_os_error(libc::EDOM)));
    }
    match command.spawn() {
        Err(Error::Keeper(e)) => assert_eq!(e.raw_os_error(), Some(libc::EDOM)),
        other => panic!("{other:?}"),
    }
    // The descriptor count is back: nothing of the failed keeper is held.
    let (read, _write) = std::io::pipe().unwrap();
    assert!(read.as_raw_fd() > 2);
    assert_nothing_left();
}

// A descriptor passed on onto the number of the keeper's own pipe for the
// child's report of a failed exec replaced that pipe: the spawn looked
// started (the pipe's end closed without a word), the command "exited 127",
// and the errno went into the passed descriptor. Found in review of the
// `pass_fds` work (here: target 12 looked started before the fix).
#[test]
fn a_failed_exec_is_reported_whatever_numbers_the_passed_descriptors_take() {
    // A file that is found and executable but that exec refuses
    // (ENOEXEC: no ELF header, no `#!`): the failure comes from the
    // command's side, after its descriptors are in place.
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("not-a-program");
    std::fs::write(&program, [0u8, 1, 2, 3]).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    // One descriptor per spawn, on each number a keeper's pipe may have.
    for target in 3..=64 {
        let (mut read, write) = std::io::pipe().unwrap();
        let spawned = Command::new(&program)
            .pass_fd(target, OwnedFd::from(write))
            .spawn();
        assert!(
            spawned.is_err(),
            "target {target}: the failed exec looked started"
        );
        // Nothing was written into the descriptor passed on: its read end
        // sees EOF (the child and our copy are gone).
        let mut got = Vec::new();
        read.read_to_end(&mut got).unwrap();
        assert!(got.is_empty(), "target {target} received {got:?}");
    }
    // And a command that starts, on each of those numbers too: the spawn
    // returns (the first version of the fix kept a copy of the pipe's
    // write end in the keeper, and the keeper waited for ever for the EOF
    // a successful exec gives).
    for target in 3..=64 {
        let (mut read, write) = std::io::pipe().unwrap();
        let status = Command::new("sh")
            // (dash's `>&N` takes one digit: the descriptor's /proc name.)
            .args(["-c", &format!("echo passed > /proc/self/fd/{target}")])
            .pass_fd(target, OwnedFd::from(write))
            .status()
            .unwrap_or_else(|e| panic!("target {target}: {e}"));
        assert!(status.success(), "target {target}: {status:?}");
        let mut got = String::new();
        read.read_to_string(&mut got).unwrap();
        assert_eq!(got, "passed\n", "target {target}");
    }
    assert_nothing_left();
}
