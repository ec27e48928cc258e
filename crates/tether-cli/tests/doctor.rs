//! `tether doctor` says what this machine gives tether, and is right about
//! it: each answer is checked against an independent probe of the same
//! mechanism (Python's `os.pidfd_open`, util-linux `unshare`, `mkdir` in
//! the cgroup hierarchies as the same user), and each limit line against
//! what `tether run` then really applies (the kernel's files in the
//! session's cgroups, its `oom_score_adj`) — as root and as an
//! unprivileged user.

// Real Linux mechanisms (pidfds, namespaces, /proc): the suite runs on
// Linux; the Windows finding set is exercised by the Windows stage.
#![cfg(target_os = "linux")]

mod support;

use std::collections::BTreeMap;
use std::os::unix::fs::{PermissionsExt, chown};
use std::path::{Path, PathBuf};
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
    check_limits(who, tether, home, &report);

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
    // Every finding says what it means; a mechanism is named exactly on
    // the findings about a choice of one.
    for f in report["findings"].as_array().unwrap() {
        assert!(!f["meaning"].as_str().unwrap().is_empty(), "{f}");
        let topic = f["topic"].as_str().unwrap();
        let choice =
            LIMITS.iter().any(|(t, _, _)| *t == topic) || ["cgroup_kill", "oom"].contains(&topic);
        assert_eq!(f["mechanism"].is_string(), choice, "{f}");
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

/// The limit findings: topic, `tether run --json`'s key, controller.
const LIMITS: [(&str, &str, &str); 3] = [
    ("memory_limit", "memory", "memory"),
    ("pids_limit", "pids", "pids"),
    ("cpu_limit", "cpu", "cpu"),
];

/// This process's cgroups as the kernel lists them, read here without
/// tether's code: the directory of its cgroup v2 and, per v1 controller,
/// of its cgroup in that hierarchy. `tether doctor` and `tether run`
/// started from this process (through `setpriv`, which keeps the cgroup)
/// sit in the same ones.
#[derive(Debug, Default)]
struct OwnCgroups {
    v2_mounts: Vec<PathBuf>,
    v2: Option<PathBuf>,
    v1: BTreeMap<String, PathBuf>,
}

impl OwnCgroups {
    fn read() -> OwnCgroups {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let membership = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        let mut own = OwnCgroups::default();
        // (root, mount point, v2, super options) of every cgroup mount.
        let mounts: Vec<(&str, &str, bool, &str)> = mountinfo
            .lines()
            .filter_map(|line| {
                let (left, right) = line.split_once(" - ")?;
                let left: Vec<&str> = left.split(' ').collect();
                let right: Vec<&str> = right.split(' ').collect();
                let v2 = match right[0] {
                    "cgroup2" => true,
                    "cgroup" => false,
                    _ => return None,
                };
                Some((left[3], left[4], v2, right[2]))
            })
            .collect();
        own.v2_mounts = mounts
            .iter()
            .filter(|m| m.2)
            .map(|m| PathBuf::from(m.1))
            .collect();
        let dir = |path: &str, of: &dyn Fn(bool, &str) -> bool| {
            mounts.iter().find_map(|&(root, point, v2, options)| {
                if !of(v2, options) {
                    return None;
                }
                let rest = path.strip_prefix(root.trim_end_matches('/'))?;
                // Not `join("")`, which would add a trailing `/`.
                Some(match rest.trim_start_matches('/') {
                    "" => PathBuf::from(point),
                    rest => Path::new(point).join(rest),
                })
            })
        };
        for line in membership.lines() {
            let mut parts = line.splitn(3, ':');
            let (id, controllers, path) = (
                parts.next().unwrap(),
                parts.next().unwrap(),
                parts.next().unwrap(),
            );
            if id == "0" {
                own.v2 = dir(path, &|v2, _| v2);
                continue;
            }
            for controller in controllers.split(',') {
                let found = dir(path, &|v2, options: &str| {
                    !v2 && options.split(',').any(|o| o == controller)
                });
                if let Some(found) = found {
                    own.v1.insert(controller.to_owned(), found);
                }
            }
        }
        own
    }

    /// The controllers our cgroup v2 offers its children.
    fn v2_controllers(&self) -> String {
        self.v2
            .as_ref()
            .and_then(|dir| std::fs::read_to_string(dir.join("cgroup.controllers")).ok())
            .unwrap_or_default()
    }
}

/// Whether `who` may make a cgroup below `dir` — the kernel's own answer,
/// by making one (`mkdir` as `who`) and removing it — and whether it had
/// `cgroup.kill`.
fn may_make_cgroup(who: As, dir: &Path) -> Option<bool> {
    let probe = dir.join(format!("doctor-oracle-{}", std::process::id()));
    let made = who
        .command(Path::new("/bin/mkdir"))
        .arg(&probe)
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success();
    if !made {
        return None;
    }
    let kill = probe.join("cgroup.kill").exists();
    std::fs::remove_dir(&probe).unwrap();
    Some(kill)
}

/// The cgroups, limits, `cgroup.kill` and OOM lines of `report`, checked
/// against the kernel (what `who` may make in which hierarchy) and against
/// what `tether run --memory 64M --pids 16 --cpu 0.5` as `who` then really
/// applies: the same mechanism per limit (or `none` with the same reason),
/// the limits in the kernel's files of the session's leaves, a cgroup v2
/// leaf of its own exactly where `cgroup.kill` is said available, and
/// `oom_score_adj` 1000.
fn check_limits(who: As, tether: &Path, home: &Path, report: &Value) {
    let own = OwnCgroups::read();
    let cgroups = finding(report, "cgroups");
    assert_eq!(cgroups["status"], "info", "{who:?}: {cgroups}");
    let cgroups = cgroups["found"].as_str().unwrap();
    for point in &own.v2_mounts {
        assert!(
            cgroups.contains(&format!("cgroup v2 at {}", point.display())),
            "{cgroups}"
        );
    }
    let controllers = own.v2_controllers();

    // What the kernel lets `who` have, per limit.
    let mut expected = BTreeMap::new();
    for (topic, _, controller) in LIMITS {
        let in_v2 = controllers.split_whitespace().any(|c| c == controller);
        let how = match (in_v2, own.v1.get(controller)) {
            // Not on this project's machines (their cgroup v2 has no
            // memory, pids or cpu): whether tether may enable it depends on
            // what else shares our cgroup, so only the cross-check with
            // `tether run` below holds the answer to account there.
            (true, _) => None,
            (false, Some(dir)) => {
                assert!(cgroups.contains(&dir.display().to_string()), "{cgroups}");
                Some(if may_make_cgroup(who, dir).is_some() {
                    "cgroup1"
                } else {
                    "none"
                })
            }
            (false, None) => Some("none"),
        };
        expected.insert(topic, how);
    }
    let v2_leaf = own.v2.as_ref().and_then(|dir| may_make_cgroup(who, dir));
    // This project's machines (hybrid: cgroup v2 at /sys/fs/cgroup/unified
    // without memory or pids, both on v1): root gets both from v1, a user
    // with nothing delegated gets neither, and is told why.
    let hybrid = !own.v2_mounts.is_empty()
        && ["memory", "pids"]
            .iter()
            .all(|c| own.v1.contains_key(*c) && !controllers.split_whitespace().any(|x| x == *c));
    if hybrid {
        let want = match who {
            As::Root => "cgroup1",
            As::Unprivileged => "none",
        };
        for topic in ["memory_limit", "pids_limit"] {
            assert_eq!(expected[topic], Some(want), "{who:?} {topic}");
        }
        assert_eq!(v2_leaf.is_some(), matches!(who, As::Root), "{who:?}");
    }

    // The session `tether run` starts with the probe's limits, reading
    // the kernel's files of its own leaves while it runs.
    let mut files = Vec::new();
    for (_, key, controller) in LIMITS {
        let file = match controller {
            "memory" => ("memory.max", "memory.limit_in_bytes"),
            "pids" => ("pids.max", "pids.max"),
            _ => ("cpu.max", "cpu.cfs_quota_us"),
        };
        if let Some(dir) = &own.v2 {
            files.push((format!("{key} cgroup2"), dir.join("$n").join(file.0)));
        }
        if let Some(dir) = own.v1.get(controller) {
            files.push((format!("{key} cgroup1"), dir.join("$n").join(file.1)));
        }
    }
    let mut script = String::from(
        // The leaf's name: tether-<session>.<install>.<owner pid>.<owner
        // start>.<pid namespace inode>, from the spawn tag
        // (v1:<install>:<purpose>:<owner pid>:<owner start>:<session>).
        "IFS=:; set -- $TETHER_SPAWN; unset IFS; s=$6\n\
         n=\"tether-$6.$2.$4.$5.$(readlink /proc/self/ns/pid | tr -dc 0-9)\"\n\
         echo \"session $s\"\necho \"oom $(cat /proc/self/oom_score_adj)\"\n",
    );
    if let Some(dir) = &own.v2 {
        script.push_str(&format!(
            "test -e \"{}/$n/cgroup.kill\" && echo kill\n",
            dir.display()
        ));
    }
    for (label, path) in &files {
        script.push_str(&format!(
            "echo \"{label} $(cat \"{}\" 2>/dev/null)\"\n",
            path.display()
        ));
    }
    let out = who
        .command(tether)
        .args([
            "run", "--json", "--memory", "64M", "--pids", "16", "--cpu", "0.5",
        ])
        .args(["--", "/bin/sh", "-c", &script])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("TETHER_HOME", home)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let run: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{who:?}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(run["exit_code"], 0, "{who:?}: {run}");
    let said: BTreeMap<&str, &str> = run["stdout"]
        .as_str()
        .unwrap()
        .lines()
        .filter_map(|l| l.rsplit_once(' ').or(Some((l, ""))))
        .collect();
    let session = run["session"].as_str().unwrap();
    assert_eq!(said.get("session"), Some(&session), "{run}");

    for (topic, key, _) in LIMITS {
        let line = finding(report, topic);
        let applied = &run["limits"][key];
        let mechanism = line["mechanism"].as_str().unwrap();
        assert_eq!(
            applied["enforced"], mechanism,
            "{who:?} {topic}: {line} vs {run}"
        );
        if let Some(want) = expected[topic] {
            assert_eq!(mechanism, want, "{who:?} {topic}: {line}");
        }
        if mechanism == "none" {
            assert_eq!(line["status"], "unavailable", "{line}");
            // Word for word the reason `tether run` gives.
            assert_eq!(line["found"], applied["reason"], "{who:?} {topic}");
            if hybrid && topic != "cpu_limit" && matches!(who, As::Unprivileged) {
                let why = line["found"].as_str().unwrap();
                assert!(
                    why.contains("not writable (Permission denied)")
                        && why.contains("no cgroup is delegated to this user"),
                    "{why}"
                );
            }
        } else {
            assert_eq!(line["status"], "available", "{line}");
            assert!(
                line["found"].as_str().unwrap().starts_with(mechanism),
                "{line}"
            );
            // The kernel holds the limit in the session's leaf.
            let value = said.get(format!("{key} {mechanism}").as_str()).copied();
            let want = match (key, mechanism) {
                ("memory", _) => "67108864",
                ("pids", _) => "16",
                ("cpu", "cgroup2") => "50000 100000",
                _ => "50000",
            };
            assert_eq!(value, Some(want), "{who:?} {topic}: {run}");
        }
    }

    // cgroup.kill: a v2 leaf of the session's own, with the file, exactly
    // where doctor says so — and where `who` may make one.
    let kill = finding(report, "cgroup_kill");
    let has_leaf = run["limits"]["cgroup"].is_string();
    let has_kill = has_leaf && said.contains_key("kill");
    assert_eq!(
        kill["status"],
        if has_kill { "available" } else { "unavailable" },
        "{who:?}: {kill} vs {run}"
    );
    assert_eq!(
        kill["mechanism"],
        if has_kill { "cgroup.kill" } else { "signals" }
    );
    assert_eq!(has_kill, v2_leaf == Some(true), "{who:?}: {kill}");
    if let Some(leaf) = run["limits"]["cgroup"].as_str() {
        let base = own.v2.as_ref().unwrap();
        assert_eq!(Path::new(leaf).parent(), Some(base.as_path()));
        let name = Path::new(leaf).file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with(&format!("tether-{session}.")), "{leaf}");
        assert!(
            !Path::new(leaf).exists(),
            "{leaf} removed when the run ended"
        );
    }
    for (_, path) in &files {
        let leaf = PathBuf::from(
            path.parent()
                .unwrap()
                .to_str()
                .unwrap()
                .replace("$s", session),
        );
        assert!(!leaf.exists(), "{} left after the run", leaf.display());
    }

    // OOM order: the session's command at 1000, as doctor says.
    let oom = finding(report, "oom");
    assert_eq!(said.get("oom"), Some(&"1000"), "{who:?}: {run}");
    assert_eq!(oom["status"], "available", "{who:?}: {oom}");
    assert_eq!(oom["mechanism"], "oom_score_adj");
    assert!(
        oom["found"]
            .as_str()
            .unwrap()
            .starts_with("oom_score_adj 1000"),
        "{oom}"
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
    assert!(lines.len() >= 26 && lines.len().is_multiple_of(2), "{text}");
    for pair in lines.chunks(2) {
        let (topic, rest) = pair[0].split_once(": ").expect("topic: status: found");
        assert!(!topic.contains(' '), "{}", pair[0]);
        assert!(
            ["available", "not available", "info", "untested"]
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
        "memory_limit",
        "pids_limit",
        "cpu_limit",
        "cgroup_kill",
        "oom",
        "state_dir",
        "open_files",
    ] {
        assert!(
            lines.iter().any(|l| l.starts_with(&format!("{topic}: "))),
            "no {topic} line:\n{text}"
        );
    }
}
