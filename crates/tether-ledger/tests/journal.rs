//! Run journals: what `tether run` writes instead of opening the store, and
//! how every open of the store folds them in.

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use common::TestInstall;
use tether::SessionId;
use tether_ledger::{ABANDONED_AFTER, Ledger, Outcome, RUNS_DIR, RunJournal, SessionStart};

fn runs(t: &TestInstall) -> PathBuf {
    t.state_dir().join(RUNS_DIR)
}

fn journal_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn start(t: &TestInstall, command: &str) -> (RunJournal, SessionId) {
    let id = SessionId::generate();
    let mut session = SessionStart::new(id.clone(), "run");
    session.command = vec!["sh".into(), "-c".into(), command.into()];
    session.main = Some(tether::ProcessIdentity::current().unwrap());
    let journal = RunJournal::prepare(&t.install, "run")
        .unwrap()
        .start(&session)
        .unwrap();
    (journal, id)
}

#[test]
fn a_live_run_is_folded_and_its_journal_kept_until_it_ends() {
    let t = TestInstall::new();
    let (journal, id) = start(&t, "exit 3");
    let path = runs(&t).join(format!("{id}.run"));
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);

    // Live (its lock held): folded, and kept for the end line.
    let ledger = Ledger::open(&t.install).unwrap();
    let sessions = ledger.sessions().unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].id, id.as_str());
    assert_eq!(sessions[0].command, ["sh", "-c", "exit 3"]);
    assert!(sessions[0].ended_at_ms.is_none());
    let owners = ledger.owners().unwrap();
    assert_eq!(owners.len(), 1);
    assert!(owners[0].ended_at_ms.is_none());
    drop(ledger);
    assert!(path.exists(), "a live run's journal was removed");

    // Folding again adds nothing.
    let ledger = Ledger::open_to_record(&t.install).unwrap();
    assert_eq!(ledger.sessions().unwrap().len(), 1);
    assert_eq!(ledger.owners().unwrap().len(), 1);
    drop(ledger);

    journal
        .finish(
            Outcome::Exited { code: 3 },
            Some(tether::LimitHit::Pids { refused: 1 }),
        )
        .unwrap();
    let ledger = Ledger::open(&t.install).unwrap();
    let sessions = ledger.sessions().unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].outcome, Some(Outcome::Exited { code: 3 }));
    assert_eq!(sessions[0].limit_hit.as_deref(), Some("pids"));
    assert!(ledger.owners().unwrap()[0].ended_at_ms.is_some());
    assert!(!path.exists(), "an ended run's journal was kept");
}

#[test]
fn a_run_that_died_without_its_end_line_is_folded_as_started() {
    let t = TestInstall::new();
    let (journal, id) = start(&t, "sleep 1000");
    // What a SIGKILL leaves: the start line, and the lock dropped with the
    // file (the kernel closes a dead process's files).
    drop(journal);
    let ledger = Ledger::open(&t.install).unwrap();
    let sessions = ledger.sessions().unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].id, id.as_str());
    assert!(sessions[0].ended_at_ms.is_none(), "no end was written");
    assert!(ledger.owners().unwrap()[0].ended_at_ms.is_none());
    assert!(journal_names(&runs(&t)).is_empty());
}

#[test]
fn many_openers_at_once_fold_every_journal_exactly_once() {
    let t = TestInstall::new();
    let mut ids = Vec::new();
    for code in 0..40 {
        let (journal, id) = start(&t, &format!("exit {code}"));
        if code % 2 == 0 {
            journal.finish(Outcome::Exited { code }, None).unwrap();
        } else {
            drop(journal); // died without an end line
        }
        ids.push(id);
    }
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                Ledger::open_to_record(&t.install).unwrap();
            });
        }
    });
    let ledger = Ledger::open(&t.install).unwrap();
    let sessions = ledger.sessions().unwrap();
    assert_eq!(sessions.len(), 40, "a run lost or written twice");
    for (code, id) in ids.iter().enumerate() {
        let s = sessions.iter().find(|s| s.id == id.as_str()).unwrap();
        let expected = (code % 2 == 0).then_some(Outcome::Exited { code: code as i32 });
        assert_eq!(s.outcome, expected, "session {code}");
    }
    assert_eq!(ledger.owners().unwrap().len(), 1, "one owner: this process");
    assert!(journal_names(&runs(&t)).is_empty());
}

#[test]
fn unreadable_journals_are_set_aside_and_unfinished_ones_waited_for() {
    let t = TestInstall::new();
    // A journal of a run that is over, and the rest of the directory.
    let (journal, id) = start(&t, "true");
    journal.finish(Outcome::Exited { code: 0 }, None).unwrap();
    let dir = runs(&t);
    let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
    write("garbage1.run", "{\"start\": 1}\n");
    write("garbage2.run", &"x".repeat(70 * 1024));
    write("young.run", "{\"start\": {\"ow");
    write("old.run", "");
    write("notes.txt", "not a journal\n");
    write("no id here!.run", "\n");
    let old = SystemTime::now() - ABANDONED_AFTER - Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(dir.join("old.run"))
        .unwrap()
        .set_modified(old)
        .unwrap();

    let ledger = Ledger::open(&t.install).unwrap();
    let sessions = ledger.sessions().unwrap();
    assert_eq!(sessions.len(), 1, "only the good journal was read");
    assert_eq!(sessions[0].id, id.as_str());
    assert_eq!(
        journal_names(&dir),
        [
            "garbage1.run.bad",
            "garbage2.run.bad",
            "no id here!.run",
            "notes.txt",
            "young.run"
        ]
    );
}

#[test]
fn a_journal_directory_of_another_user_or_a_link_is_refused() {
    let t = TestInstall::new();
    drop(Ledger::open(&t.install).unwrap());
    let elsewhere = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), runs(&t)).unwrap();
    let err = RunJournal::prepare(&t.install, "run").unwrap_err();
    assert!(
        matches!(err, tether_ledger::LedgerError::Insecure { .. }),
        "{err}"
    );
    assert!(matches!(
        Ledger::open(&t.install).unwrap_err(),
        tether_ledger::LedgerError::Insecure { .. }
    ));
    assert!(journal_names(elsewhere.path()).is_empty());
}
