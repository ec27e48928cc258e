//! A damaged store is quarantined — renamed, never emptied or rewritten —
//! and a fresh one is rebuilt from the spawn tags of live processes.

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

mod common;

use std::path::{Path, PathBuf};

use common::{TestInstall, dead_owner, me, reap};
use tether::SessionId;
use tether_ledger::{Ledger, OwnerRecord, SessionStart, Source};

fn corrupt_files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with("ledger.db.corrupt-")
                && !name.ends_with("-wal")
                && !name.ends_with("-shm")
        })
        .collect();
    out.sort();
    out
}

/// A store with one registered owner and session, then damaged by `damage`.
/// Returns the bytes the damaged file held.
fn damaged_store(t: &TestInstall, damage: impl FnOnce(&Path)) -> Vec<u8> {
    let mut ledger = Ledger::open(&t.install).unwrap();
    let owner = ledger
        .register_owner(&OwnerRecord::current(&t.install, "run").unwrap())
        .unwrap();
    ledger
        .record_session_start(owner, &SessionStart::new(SessionId::generate(), "run"))
        .unwrap();
    let path = ledger.path().to_path_buf();
    drop(ledger);
    damage(&path);
    std::fs::read(&path).unwrap()
}

fn assert_quarantined(t: &TestInstall, damaged: &[u8]) -> Ledger {
    let ledger = Ledger::open(&t.install).unwrap();
    let q = ledger
        .quarantined()
        .expect("this open quarantined the store")
        .clone();
    let moved = corrupt_files(t.state_dir());
    assert_eq!(moved, vec![q.moved_to.clone()]);
    assert!(
        std::fs::read(&q.moved_to).unwrap() == damaged,
        "the damaged bytes are kept as they were"
    );
    let name = q
        .moved_to
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let stamp = name.strip_prefix("ledger.db.corrupt-").unwrap();
    assert!(
        stamp.len() == 16 && stamp.ends_with('Z') && stamp.as_bytes()[8] == b'T',
        "{name}"
    );
    // The fresh store records the quarantine, so a later `ps` can say so.
    let recorded = ledger.quarantines().unwrap();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].moved_to, q.moved_to);
    assert!(!recorded[0].reason.is_empty());
    drop(ledger);
    // And a second open finds a healthy store.
    let again = Ledger::open(&t.install).unwrap();
    assert!(again.quarantined().is_none());
    assert_eq!(again.quarantines().unwrap().len(), 1);
    again
}

#[test]
fn garbage_is_quarantined() {
    let t = TestInstall::new();
    let bytes = damaged_store(&t, |p| {
        let garbage: Vec<u8> = (0..9000u32).map(|i| (i * 7919 % 251) as u8).collect();
        std::fs::write(p, garbage).unwrap();
    });
    let ledger = assert_quarantined(&t, &bytes);
    assert!(
        ledger.owners().unwrap().is_empty(),
        "nothing live to rebuild"
    );
}

#[test]
fn truncated_stores_are_quarantined() {
    for keep in [0usize, 1, 50, 99, 100, 4096, 6000] {
        let t = TestInstall::new();
        let bytes = damaged_store(&t, |p| {
            // Grow the store first so truncation cuts real pages.
            let mut ledger = Ledger::open(&t.install).unwrap();
            let owner = ledger
                .register_owner(&OwnerRecord::current(&t.install, "run").unwrap())
                .unwrap();
            for _ in 0..200 {
                let mut s = SessionStart::new(SessionId::generate(), "run");
                s.command = vec!["x".repeat(200)];
                ledger.record_session_start(owner, &s).unwrap();
            }
            drop(ledger);
            let len = std::fs::metadata(p).unwrap().len() as usize;
            assert!(len > keep, "store has {len} bytes");
            let file = std::fs::OpenOptions::new().write(true).open(p).unwrap();
            file.set_len(keep as u64).unwrap();
        });
        let ledger = Ledger::open(&t.install).unwrap();
        assert!(ledger.quarantined().is_some(), "cut to {keep} bytes");
        assert!(ledger.owners().unwrap().is_empty());
        drop(ledger);
        let moved = corrupt_files(t.state_dir());
        assert_eq!(moved.len(), 1, "truncated to {keep}");
        assert!(std::fs::read(&moved[0]).unwrap() == bytes, "bytes kept");
    }
}

#[test]
fn a_foreign_sqlite_database_is_quarantined_not_adopted() {
    let t = TestInstall::new();
    let bytes = damaged_store(&t, |p| {
        std::fs::remove_file(p).unwrap();
        let conn = rusqlite::Connection::open(p).unwrap();
        conn.execute_batch("CREATE TABLE notes (x TEXT); INSERT INTO notes VALUES ('mine');")
            .unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
    });
    assert_quarantined(&t, &bytes);
}

#[test]
fn live_entries_are_rebuilt_from_spawn_tags() {
    let t = TestInstall::new();
    let dead = dead_owner();
    let alive = me();
    let a = SessionId::generate();
    let b = SessionId::generate();
    let children = vec![
        t.spawn_tagged(&t.tag("keeper", alive, a.as_str())),
        t.spawn_tagged(&t.tag("run", alive, a.as_str())),
        t.spawn_tagged(&t.tag("mcp", dead, b.as_str())),
        t.spawn_tagged(&t.tag("mcp", dead, b.as_str())),
    ];
    let keeper = tether::ProcessIdentity::of_pid(children[0].id()).unwrap();
    // Another install's process is not this ledger's business.
    let other = TestInstall::new();
    let foreign = other.spawn_tagged(&other.tag("run", alive, "zzz"));

    let bytes = damaged_store(&t, |p| std::fs::write(p, b"not a database at all").unwrap());
    let ledger = assert_quarantined(&t, &bytes);
    let owners = ledger.owners().unwrap();
    assert_eq!(owners.len(), 2, "{owners:?}");
    let live_owner = owners.iter().find(|o| o.identity.pid == alive.0).unwrap();
    assert_eq!(live_owner.identity.start_time, alive.1);
    assert!(live_owner.identity.pidfs_inode.is_some() || keeper.pidfs_inode.is_none());
    assert!(
        !live_owner.argv.is_empty(),
        "a live owner's command line is read"
    );
    let dead_row = owners.iter().find(|o| o.identity.pid == dead.0).unwrap();
    assert_eq!(dead_row.identity.start_time, dead.1);
    assert!(owners.iter().all(|o| o.source == Source::Rebuilt));

    let sessions = ledger.sessions().unwrap();
    assert_eq!(sessions.len(), 2);
    let sa = sessions.iter().find(|s| s.id == a.as_str()).unwrap();
    assert_eq!(sa.purpose, "run", "purpose from the non-keeper process");
    assert_eq!(sa.keeper.as_ref(), Some(&keeper));
    let sb = sessions.iter().find(|s| s.id == b.as_str()).unwrap();
    assert_eq!(sb.purpose, "mcp");
    let q = &ledger.quarantines().unwrap()[0];
    assert_eq!((q.rebuilt_owners, q.rebuilt_sessions), (2, 2));

    for c in children {
        reap(c);
    }
    reap(foreign);
}

#[test]
fn concurrent_openers_quarantine_once() {
    let t = TestInstall::new();
    let bytes = damaged_store(&t, |p| std::fs::write(p, vec![0xAB; 8192]).unwrap());
    let install = t.install.clone();
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let install = install.clone();
            std::thread::spawn(move || {
                let mut l = Ledger::open(&install).unwrap();
                let owner = l
                    .register_owner(&OwnerRecord::current(&install, "run").unwrap())
                    .unwrap();
                l.record_session_start(owner, &SessionStart::new(SessionId::generate(), "run"))
                    .unwrap();
                l.quarantined().is_some()
            })
        })
        .collect();
    let did: usize = handles
        .into_iter()
        .map(|h| usize::from(h.join().unwrap()))
        .sum();
    assert_eq!(did, 1, "exactly one opener quarantined");
    let moved = corrupt_files(t.state_dir());
    assert_eq!(moved.len(), 1);
    assert!(std::fs::read(&moved[0]).unwrap() == bytes, "bytes kept");
    let ledger = Ledger::open(&t.install).unwrap();
    assert_eq!(ledger.sessions().unwrap().len(), 8, "no write was lost");
}

#[test]
fn a_long_lived_handle_follows_a_quarantine_by_someone_else() {
    let t = TestInstall::new();
    let mut long_lived = Ledger::open(&t.install).unwrap();
    let record = OwnerRecord::current(&t.install, "mcp").unwrap();
    long_lived.register_owner(&record).unwrap();
    // Another process finds the file damaged and quarantines it.
    let path = t.ledger_path();
    std::fs::write(&path, b"garbage").unwrap();
    let other = Ledger::open(&t.install).unwrap();
    assert!(other.quarantined().is_some());
    drop(other);
    // The long-lived handle writes into the new store, not the old file.
    let owner = long_lived.register_owner(&record).unwrap();
    long_lived
        .record_session_start(owner, &SessionStart::new(SessionId::generate(), "mcp"))
        .unwrap();
    let fresh = Ledger::open(&t.install).unwrap();
    assert_eq!(fresh.owners().unwrap().len(), 1);
    assert_eq!(fresh.sessions().unwrap().len(), 1);
}

/// An owner opens the ledger to record without `quick_check` (it read every
/// page: 5× the cost of a `tether run` with a week of a busy user's rows).
/// What its cheap checks see — a file that is not an SQLite database, too
/// short, or not the ledger's schema — it quarantines as the full open
/// does; damage inside a page it leaves for the next full open (`tether
/// ps`, `reap`, `doctor`), which quarantines it with the bytes kept.
#[test]
fn a_recording_open_quarantines_what_its_cheap_checks_find_and_a_full_open_the_rest() {
    type Damage = fn(&Path);
    let cheap: [(&str, Damage); 3] = [
        ("garbage", |p| std::fs::write(p, vec![0xAB; 8192]).unwrap()),
        ("short", |p| {
            let file = std::fs::OpenOptions::new().write(true).open(p).unwrap();
            file.set_len(50).unwrap();
        }),
        ("foreign", |p| {
            std::fs::remove_file(p).unwrap();
            let conn = rusqlite::Connection::open(p).unwrap();
            conn.execute_batch("CREATE TABLE notes (x TEXT);").unwrap();
        }),
    ];
    for (what, damage) in cheap {
        let t = TestInstall::new();
        let bytes = damaged_store(&t, damage);
        let ledger = Ledger::open_to_record(&t.install).unwrap();
        let q = ledger.quarantined().unwrap_or_else(|| panic!("{what}"));
        assert!(std::fs::read(&q.moved_to).unwrap() == bytes, "{what}");
    }

    // Damage inside a page the open does not read: the last page of a
    // grown store (a session's row), overwritten with garbage.
    let t = TestInstall::new();
    let bytes = damaged_store(&t, |p| {
        let mut ledger = Ledger::open(&t.install).unwrap();
        let owner = ledger
            .register_owner(&OwnerRecord::current(&t.install, "run").unwrap())
            .unwrap();
        for _ in 0..200 {
            let mut s = SessionStart::new(SessionId::generate(), "run");
            s.command = vec!["x".repeat(200)];
            ledger.record_session_start(owner, &s).unwrap();
        }
        drop(ledger);
        let len = std::fs::metadata(p).unwrap().len();
        use std::os::unix::fs::FileExt;
        let file = std::fs::OpenOptions::new().write(true).open(p).unwrap();
        file.write_all_at(&[0xAB; 4096], len - 4096).unwrap();
    });
    let recording = Ledger::open_to_record(&t.install).unwrap();
    assert!(recording.quarantined().is_none(), "not read, not judged");
    drop(recording);
    assert_quarantined(&t, &bytes);
}
