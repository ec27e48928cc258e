//! Spawning: clear errors for bad input, environment and tags, containment
//! reporting, output capture that cannot hang.

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

use std::time::Duration;
use tether::unix::ExitStatusExt;

use tether::{Command, Containment, ContainmentPolicy, Error, SpawnTag, Stdio};
use tether_testkit::{TAG_VAR, TagGuard, tagged_pids};

#[test]
fn program_not_found_names_the_search_path() {
    let err = Command::new("no-such-program-xyz")
        .env("PATH", "/nowhere:/also-not")
        .spawn()
        .unwrap_err();
    match err {
        Error::ProgramNotFound {
            program,
            path_searched,
        } => {
            assert_eq!(program, "no-such-program-xyz");
            assert_eq!(path_searched, "/nowhere:/also-not");
        }
        other => panic!("{other}"),
    }
}

#[test]
fn not_executable_and_bad_cwd_are_precise() {
    assert!(matches!(
        Command::new("/etc/passwd").spawn(),
        Err(Error::NotExecutable { .. })
    ));
    assert!(matches!(
        Command::new("/tmp").spawn(),
        Err(Error::NotExecutable { .. })
    ));
    assert!(matches!(
        Command::new("true").current_dir("/no/such/dir").spawn(),
        Err(Error::BadCwd { .. })
    ));
    assert!(matches!(
        Command::new("true").current_dir("/etc/passwd").spawn(),
        Err(Error::BadCwd { .. })
    ));
    assert!(matches!(
        Command::new("true").purpose("bad purpose").spawn(),
        Err(Error::InvalidInput { .. })
    ));
    assert!(matches!(
        Command::new("echo").arg("a\0b").spawn(),
        Err(Error::InvalidInput { .. })
    ));
    assert!(matches!(
        Command::new("").spawn(),
        Err(Error::InvalidInput { .. })
    ));
}

#[test]
fn environment_follows_std_semantics_plus_the_tag() {
    let out = Command::new("sh")
        .args(["-c", "echo \"$A|$B|$HOME|$TETHER_SPAWN\""])
        .env_clear()
        .env("A", "1")
        .env("B", "2")
        .env_remove("B")
        .purpose("env-test")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let fields: Vec<&str> = text.trim_end().split('|').collect();
    assert_eq!(&fields[..3], ["1", "", ""]);
    let tag: SpawnTag = fields[3].parse().unwrap();
    assert_eq!(tag.purpose, "env-test");
    assert_eq!(tag.owner_pid, std::process::id());
}

/// Set in the environment of this test binary run again as the owner of
/// [`an_owners_own_tag_is_replaced_not_passed_on`].
const TAGGED_OWNER_VAR: &str = "TETHER_TEST_TAGGED_OWNER";

/// An owner that runs inside a session itself (its environment carries a
/// tag) starts a command with its environment untouched, then one that
/// sets and removes a variable: each command sees the owner's variables
/// with its own changes, and exactly one tag, its own.
#[test]
fn an_owners_own_tag_is_replaced_not_passed_on() {
    if std::env::var_os(TAGGED_OWNER_VAR).is_some() {
        let out = Command::new("env").purpose("nested").output().unwrap();
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            println!("ENV {line}");
        }
        let out = Command::new("env")
            .env("TETHER_TEST_CHANGED", "new")
            .env_remove("TETHER_TEST_GONE")
            .purpose("changed")
            .output()
            .unwrap();
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            println!("SET {line}");
        }
        return;
    }
    let guard = TagGuard::new("spawn-nested-tag");
    let owner = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "an_owners_own_tag_is_replaced_not_passed_on",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(TAGGED_OWNER_VAR, "1")
        .env(TAG_VAR, guard.tag())
        .env(tether::SPAWN_TAG_VAR, "the-tag-of-an-outer-session")
        .env("TETHER_TEST_KEPT", "kept")
        .env("TETHER_TEST_CHANGED", "old")
        .env("TETHER_TEST_GONE", "gone")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(owner.status.success(), "{owner:?}");
    let text = String::from_utf8(owner.stdout).unwrap();
    let env: Vec<&str> = text
        .lines()
        .filter_map(|line| line.split_once("ENV ").map(|(_, var)| var))
        .collect();
    assert!(env.contains(&"TETHER_TEST_KEPT=kept"), "{text}");
    assert!(env.contains(&format!("{TAG_VAR}={}", guard.tag()).as_str()));
    let tags: Vec<&str> = env
        .iter()
        .filter_map(|var| var.strip_prefix(&format!("{}=", tether::SPAWN_TAG_VAR)))
        .collect();
    assert_eq!(tags.len(), 1, "{text}");
    let tag: SpawnTag = tags[0].parse().unwrap();
    assert_eq!(tag.purpose, "nested");
    // With changes: an inherited variable set anew appears once, with the
    // new value; a removed one not at all; the rest as inherited.
    let set: Vec<&str> = text
        .lines()
        .filter_map(|line| line.split_once("SET ").map(|(_, var)| var))
        .collect();
    assert!(set.contains(&"TETHER_TEST_KEPT=kept"), "{text}");
    let changed: Vec<&&str> = set
        .iter()
        .filter(|var| var.starts_with("TETHER_TEST_CHANGED="))
        .collect();
    assert_eq!(changed, [&"TETHER_TEST_CHANGED=new"], "{text}");
    assert!(
        !set.iter().any(|var| var.starts_with("TETHER_TEST_GONE=")),
        "{text}"
    );
    let tags: Vec<SpawnTag> = set
        .iter()
        .filter_map(|var| var.strip_prefix(&format!("{}=", tether::SPAWN_TAG_VAR)))
        .map(|tag| tag.parse().unwrap())
        .collect();
    assert_eq!(tags.len(), 1, "{text}");
    assert_eq!(tags[0].purpose, "changed");
}

#[test]
fn output_does_not_hang_on_a_grandchild_holding_stdout() {
    let guard = TagGuard::new("spawn-grandchild");
    let out = Command::new("sh")
        .args(["-c", "sleep 1000 & echo done"])
        .env(TAG_VAR, guard.tag())
        .grace(Duration::from_millis(100))
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"done\n");
    assert_eq!(out.status.descendants_killed(), 1);
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}

#[test]
fn output_is_byte_exact() {
    let out = Command::new("printf")
        .arg(r"\377\000\376abc")
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"\xff\x00\xfeabc");
}

#[test]
fn timeout_reports_timed_out() {
    let status = Command::new("sleep")
        .arg("1000")
        .timeout(Duration::from_millis(100))
        .status()
        .unwrap();
    assert!(status.timed_out());
    assert_eq!(status.signal(), Some(libc::SIGTERM));
}

#[test]
fn containment_is_reported_and_never_silently_degraded() {
    let mut child = Command::new("true").spawn().unwrap();
    assert_eq!(child.containment(), Containment::Subreaper);
    child.wait().unwrap();
    if !tether_testkit::require_root("the pid namespace checks") {
        return;
    }
    let child = Command::new("sh")
        .args(["-c", "echo $$"])
        .stdout(Stdio::Piped)
        .containment(ContainmentPolicy::PidNamespace)
        .spawn()
        .unwrap();
    assert_eq!(child.containment(), Containment::PidNamespace);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.stdout, b"2\n", "the command is pid 2 under its init");
    let mut child = Command::new("true")
        .containment(ContainmentPolicy::Auto)
        .spawn()
        .unwrap();
    assert_eq!(child.containment(), Containment::PidNamespace);
    child.wait().unwrap();
}

#[test]
fn identity_matches_the_live_process() {
    let mut child = Command::new("sleep").arg("1000").spawn().unwrap();
    let id = child.identity().clone();
    assert_eq!(id.pid, child.id());
    assert!(id.is_alive());
    assert!(id.matches(&tether::ProcessIdentity::of_pid(child.id()).unwrap()));
    child.kill().unwrap();
    assert!(!id.is_alive());
}

#[test]
fn missing_interpreter_is_named_not_reported_as_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script");
    std::fs::write(&script, "#!/nonexistent/interpreter\necho hi\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    match Command::new(&script).status() {
        Err(Error::NotExecutable { path, reason }) => {
            assert_eq!(path, script);
            assert!(reason.contains("interpreter"), "{reason}");
        }
        other => panic!("expected NotExecutable, got {other:?}"),
    }
    let err = Command::new("/nonexistent/program")
        .spawn()
        .unwrap_err()
        .to_string();
    assert!(err.contains("no such file"), "{err}");
}
