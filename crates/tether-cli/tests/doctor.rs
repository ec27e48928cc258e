//! `tether doctor` says what this machine gives tether, and is right about
//! it: each answer is checked against an independent probe of the same
//! mechanism (Python's `os.pidfd_open`, util-linux `unshare`), as root and
//! as an unprivileged user.

// Real Linux mechanisms (pidfds, namespaces, /proc): the suite runs on
// Linux; the Windows finding set is exercised by the Windows stage.
#![cfg(target_os = "linux")]

mod support;

use std::os::unix::fs::{PermissionsExt, chown};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;
use support::tether_path;
use tether_testkit::require_root;

/// A uid and gid no account uses here: the throwaway unprivileged user
/// (`setpriv` needs no passwd entry, and nothing of it outlives the test
/// but what the test's temporary directories hold).
const NOBODY_ID: u32 = 61_717;

/// How a command is run: as this process (root in CI), or as
/// [`NOBODY_ID`] through `setpriv`.
#[derive(Clone, Copy, Debug)]
enum As {
    Root,
    Unprivileged,
}

impl As {
    fn command(self, program: &Path) -> Command {
        match self {
            As::Root => Command::new(program),
            As::Unprivileged => {
                let mut cmd = Command::new("setpriv");
                let id = NOBODY_ID.to_string();
                // From `/`: the test's own working directory (the crate,
                // inside a checkout that may be root's alone) is one the
                // user cannot enter, and the keeper refuses to start a
                // session there ("bad working directory").
                cmd.args(["--reuid", &id, "--regid", &id, "--clear-groups", "--"])
                    .arg(program)
                    .current_dir("/");
                cmd
            }
        }
    }
}

/// `tether doctor --json` as `who`, with the state directory `home`.
fn doctor(who: As, tether: &Path, home: &Path) -> (Option<i32>, Value) {
    let out = who
        .command(tether)
        .args(["doctor", "--json"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("TETHER_HOME", home)
        .stdin(Stdio::null())
        .output()
        .expect("run tether doctor");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "{who:?}: not JSON ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), json)
}

fn finding<'a>(report: &'a Value, topic: &str) -> &'a Value {
    report["findings"]
        .as_array()
        .expect("findings[]")
        .iter()
        .find(|f| f["topic"] == topic)
        .unwrap_or_else(|| panic!("no {topic} finding in {report}"))
}

fn status<'a>(report: &'a Value, topic: &str) -> &'a str {
    finding(report, topic)["status"].as_str().unwrap()
}

/// Whether `script` succeeds in python3 as `who`.
fn python_says(who: As, script: &str) -> bool {
    who.command(Path::new("/usr/bin/python3"))
        .args(["-c", script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run python3")
        .success()
}

/// Whether `unshare ARGS true` succeeds as `who`: the kernel's own answer
/// to "may this user have a PID namespace".
fn unshare_works(who: As, args: &[&str]) -> bool {
    who.command(Path::new("/usr/bin/unshare"))
        .args(args)
        .arg("true")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run unshare")
        .success()
}

/// The doctor's answers, checked against independent probes as `who`.
fn check(who: As, tether: &Path, home: &Path) {
    let (code, report) = doctor(who, tether, home);
    assert_eq!(code, Some(0), "{who:?}: {report}");
    assert_eq!(report["can_run"], true, "{who:?}: {report}");
    for topic in ["system", "open_files"] {
        assert_eq!(status(&report, topic), "info", "{who:?} {topic}");
    }
    let system = finding(&report, "system")["found"].as_str().unwrap();
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert!(system.contains(release.trim()), "{system}");
    for topic in ["keeper", "subreaper"] {
        assert_eq!(status(&report, topic), "available", "{who:?} {topic}");
    }
    // The slot the limits work fills.
    assert_eq!(status(&report, "cgroups"), "not_probed");

    let pidfd = python_says(who, "import os; os.pidfd_open(os.getpid())");
    assert_eq!(
        status(&report, "pidfd"),
        if pidfd { "available" } else { "unavailable" },
        "{who:?}"
    );
    // pidfs: a pidfd's inode differs from the anonymous inode an eventfd has.
    let pidfs = python_says(
        who,
        "import os, sys\n\
         p = os.fstat(os.pidfd_open(os.getpid())).st_ino\n\
         e = os.fstat(os.eventfd(0)).st_ino\n\
         sys.exit(0 if p != e else 1)",
    );
    assert_eq!(
        status(&report, "pidfs"),
        if pidfs { "available" } else { "unavailable" },
        "{who:?}: {report}"
    );
    // PID namespaces: root directly, a user through a user namespace.
    let pidns = match who {
        As::Root => unshare_works(who, &["--pid", "--fork"]),
        As::Unprivileged => unshare_works(who, &["--user", "--pid", "--fork"]),
    };
    let found = finding(&report, "pidns")["found"].as_str().unwrap();
    assert_eq!(
        status(&report, "pidns"),
        if pidns { "available" } else { "unavailable" },
        "{who:?}: {found}"
    );
    if pidns {
        let how = match who {
            As::Root => "CAP_SYS_ADMIN",
            As::Unprivileged => "unprivileged user namespace",
        };
        assert!(found.contains(how), "{who:?}: {found}");
    }
    let ulimit = finding(&report, "open_files")["found"].as_str().unwrap();
    assert!(ulimit.starts_with("ulimit -n: soft "), "{ulimit}");
    let state = finding(&report, "state_dir");
    assert_eq!(state["status"], "available", "{who:?}: {state}");
    assert!(
        state["found"]
            .as_str()
            .unwrap()
            .contains(home.to_str().unwrap()),
        "{state}"
    );
    // Every finding says what it means.
    for f in report["findings"].as_array().unwrap() {
        assert!(!f["meaning"].as_str().unwrap().is_empty(), "{f}");
    }

    // A state directory someone else owns is refused, and said so.
    let foreign = tempfile::tempdir().unwrap();
    let foreign_owner = match who {
        As::Root => NOBODY_ID,
        As::Unprivileged => 0,
    };
    chown(foreign.path(), Some(foreign_owner), Some(foreign_owner)).unwrap();
    std::fs::set_permissions(foreign.path(), PermissionsExt::from_mode(0o755)).unwrap();
    let (code, report) = doctor(who, tether, foreign.path());
    assert_eq!(
        code,
        Some(0),
        "an untrusted state directory does not stop runs"
    );
    let state = finding(&report, "state_dir");
    assert_eq!(state["status"], "unavailable", "{who:?}: {state}");
    assert!(
        state["found"].as_str().unwrap().contains("owned by"),
        "{state}"
    );
}

#[test]
fn doctor_is_right_as_root_and_as_an_unprivileged_user() {
    if !require_root("running tether doctor as another user") {
        return;
    }
    // A copy of the binary the throwaway user can execute, in a directory
    // it can traverse.
    let bin_dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(bin_dir.path(), PermissionsExt::from_mode(0o755)).unwrap();
    let tether = bin_dir.path().join("tether");
    std::fs::copy(tether_path(), &tether).unwrap();
    std::fs::set_permissions(&tether, PermissionsExt::from_mode(0o755)).unwrap();

    let root_home = tempfile::tempdir().unwrap();
    check(As::Root, &tether, &root_home.path().join("state"));

    let user_home = tempfile::tempdir().unwrap();
    chown(user_home.path(), Some(NOBODY_ID), Some(NOBODY_ID)).unwrap();
    check(As::Unprivileged, &tether, &user_home.path().join("state"));
}

#[test]
fn text_report_has_two_lines_per_finding() {
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(tether_path())
        .arg("doctor")
        .env("TETHER_HOME", home.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= 16 && lines.len().is_multiple_of(2), "{text}");
    for pair in lines.chunks(2) {
        let (topic, rest) = pair[0].split_once(": ").expect("topic: status: found");
        assert!(!topic.contains(' '), "{}", pair[0]);
        assert!(
            [
                "available",
                "not available",
                "info",
                "not probed",
                "untested"
            ]
            .iter()
            .any(|s| rest.starts_with(&format!("{s}: "))),
            "{}",
            pair[0]
        );
        assert!(
            pair[1].starts_with("    ") && pair[1].len() > 8,
            "{}",
            pair[1]
        );
    }
    for topic in [
        "subreaper",
        "pidfd",
        "pidns",
        "cgroups",
        "state_dir",
        "open_files",
    ] {
        assert!(
            lines.iter().any(|l| l.starts_with(&format!("{topic}: "))),
            "no {topic} line:\n{text}"
        );
    }
}
