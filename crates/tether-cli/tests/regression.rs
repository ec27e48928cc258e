//! Regression tests, one per bug, named by what went wrong. Each names the
//! issue item it came from and failed on the code before its fix.

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

mod orphans;
mod support;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use orphans::{Home, session_processes};
use tether_testkit::{TAG_VAR, TagGuard, Tree};

/// Root-only tests skip as another user, except where CI asks for root
/// (`TETHER_REQUIRE_ROOT=1`): there a skip would be a silent pass.
fn root_or_skip(what: &str) -> bool {
    tether_testkit::require_root(what)
}

// issue 8 item 2(b): an edited owner inode made a live `tether run` read as dead, and `reap` killed its session.
#[test]
fn reap_spares_a_live_owner_whose_ledger_inode_was_edited() {
    let home = Home::new("regression-edited-inode");
    let run = home.run(&[], Tree::SetsidDoubleFork.script(), 4);
    let processes = session_processes(home.install().id(), &run.session);
    assert!(processes.len() >= 4, "{processes:?}");

    // The attacker's edit: the live owner's row gets another pidfs inode.
    let db = rusqlite::Connection::open(home.path().join(tether_ledger::LEDGER_FILE)).unwrap();
    db.busy_timeout(tether_ledger::BUSY_TIMEOUT).unwrap();
    let edited = db
        .execute(
            "UPDATE owners SET pidfs_inode = coalesce(pidfs_inode, 0) + 1
             WHERE pid = ?1 AND start_time = ?2",
            rusqlite::params![run.owner, run.owner_start],
        )
        .unwrap();
    assert_eq!(edited, 1, "the owner's row");
    drop(db);

    let (code, report) = home.json(&["reap", "--grace", "200ms"]);
    let killed = processes.iter().filter(|p| !p.is_alive()).count();
    eprintln!(
        "reap exit {code}; {killed} of {} processes of the live session killed",
        processes.len()
    );
    assert_eq!(killed, 0, "reap killed a live owner's session: {report}");
    assert_eq!(report["targets"].as_array().unwrap().len(), 0, "{report}");
    let unprovable: Vec<_> = report["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["session"] == run.session.as_str())
        .map(|s| s["reason"]["kind"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(
        !unprovable.is_empty() && unprovable.iter().all(|k| k == "owner_unknown"),
        "the session is listed as unprovable: {report}"
    );
    assert_eq!(code, 0);
}

/// Removes the planted directory however the test ends.
struct Planted(PathBuf);

impl Drop for Planted {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A uid with no passwd entry (so no home directory to fall back on),
/// distinct per test process.
fn uid_without_passwd_entry() -> u32 {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let taken: Vec<u32> = passwd
        .lines()
        .filter_map(|l| l.split(':').nth(2)?.parse().ok())
        .collect();
    (0..1000)
        .map(|i| 61_000 + (std::process::id() + i) % 3000)
        .find(|uid| !taken.contains(uid))
        .unwrap()
}

fn chown(path: &Path, uid: u32) {
    std::os::unix::fs::chown(path, Some(uid), Some(uid)).unwrap();
}

// issue 8 item 2(a): with HOME unset, a /tmp/tether-<uid> another user made (0777, planted ledger) was used.
#[test]
fn a_predictable_state_dir_made_by_another_user_is_refused() {
    if !root_or_skip("creating a directory as another user") {
        return;
    }
    let guard = TagGuard::new("regression-planted-state-dir");
    let victim = uid_without_passwd_entry();
    let attacker = 65534; // nobody
    // The directory the victim's tether falls back to with HOME,
    // XDG_STATE_HOME, XDG_RUNTIME_DIR and TETHER_HOME unset.
    let dir = PathBuf::from(format!("/tmp/tether-{victim}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    let _planted = Planted(dir.clone());
    chown(&dir, attacker);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    // A real ledger, built elsewhere and planted by the attacker.
    let scratch = tempfile::tempdir().unwrap();
    drop(tether_ledger::Ledger::open(&tether::Install::at(scratch.path())).unwrap());
    let ledger = dir.join(tether_ledger::LEDGER_FILE);
    std::fs::copy(scratch.path().join(tether_ledger::LEDGER_FILE), &ledger).unwrap();
    chown(&ledger, attacker);
    std::fs::set_permissions(&ledger, std::fs::Permissions::from_mode(0o666)).unwrap();
    let planted = std::fs::read(&ledger).unwrap();

    for args in [&["ps"][..], &["reap", "--dry-run"]] {
        let out = support::tether()
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env(TAG_VAR, guard.tag())
            .uid(victim)
            .gid(victim)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("tether {args:?} as uid {victim}:\n{text}");
        assert!(
            text.contains(&format!("{} is owned by uid {attacker}", dir.display()))
                && text.contains("TETHER_HOME"),
            "tether {args:?} refuses the planted directory, says why and what to do: {text}"
        );
    }
    assert!(
        std::fs::read(&ledger).unwrap() == planted,
        "the planted ledger was written to"
    );
    for side in ["-wal", "-shm"] {
        let path = PathBuf::from(format!("{}{side}", ledger.display()));
        assert!(!path.exists(), "{} was created", path.display());
    }
}
