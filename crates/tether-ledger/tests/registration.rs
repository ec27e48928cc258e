//! Self-registration in the ledger: rows round-trip with identity, purpose
//! and spawner; rows of processes that are gone are pruned on the next
//! write; a version-1 store migrates with its rows kept; an untagged
//! registration is listed but never planned for reaping.

#![cfg(target_os = "linux")]

mod common;

use std::process::Command;

use common::TestInstall;
use tether::ProcessIdentity;
use tether_ledger::{
    Census, Ledger, LedgerView, ReapOptions, RegisteredReap, RegistrationRecord, SkipReason,
    Spawner, SpawnerSource,
};

#[test]
fn a_registration_round_trips_and_gone_processes_are_pruned() {
    let t = TestInstall::new();
    let mut ledger = Ledger::open(&t.install).unwrap();
    let spawner = ProcessIdentity::current().unwrap();
    // A registration of this process, naming itself as spawner (given).
    let me = RegistrationRecord::current(&t.install, "serve", &Spawner::Process(spawner.clone()))
        .unwrap();
    assert_eq!(me.spawner_source, SpawnerSource::Given);
    ledger.register_process(&me).unwrap();
    ledger.register_process(&me).unwrap(); // idempotent
    let rows = ledger.registrations().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].identity, me.identity);
    assert_eq!(rows[0].purpose, "serve");
    assert_eq!(rows[0].spawner.as_ref(), Some(&spawner));
    assert!(rows[0].cwd.is_some());

    // A registration of a process that then exits is pruned on the next
    // registration (by identity, from the process table).
    let mut gone = Command::new("sleep").arg("1000").spawn().unwrap();
    let mut record = me.clone();
    record.identity = ProcessIdentity::of_pid(gone.id()).unwrap();
    ledger.register_process(&record).unwrap();
    assert_eq!(ledger.registrations().unwrap().len(), 2);
    gone.kill().unwrap();
    gone.wait().unwrap();
    ledger.register_process(&me).unwrap();
    let rows = ledger.registrations().unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].identity, me.identity);

    assert!(ledger.unregister_process(&me.identity).unwrap());
    assert!(ledger.registrations().unwrap().is_empty());
}

#[test]
fn an_untagged_registration_is_listed_and_never_planned_for_reaping() {
    let t = TestInstall::new();
    let mut ledger = Ledger::open(&t.install).unwrap();
    // A registered `sleep` without a spawn tag whose given spawner is dead.
    let mut dead = Command::new("true").spawn().unwrap();
    let dead_id = ProcessIdentity::of_pid(dead.id()).ok();
    dead.wait().unwrap();
    let Some(dead_id) = dead_id else {
        return; // it exited before it could be identified: nothing to test
    };
    let mut sleeper = Command::new("sleep")
        .arg("1000")
        .env_remove(tether::SPAWN_TAG_VAR)
        .spawn()
        .unwrap();
    let mut record =
        RegistrationRecord::current(&t.install, "serve", &Spawner::Process(dead_id)).unwrap();
    record.identity = ProcessIdentity::of_pid(sleeper.id()).unwrap();
    ledger.register_process(&record).unwrap();

    let census = Census::take(t.id(), t.ledger_path(), Ok(&ledger), false);
    let entry = census
        .registered
        .iter()
        .find(|r| r.pid == sleeper.id())
        .expect("listed");
    assert_eq!(entry.reap, RegisteredReap::NoTag);

    let rows = ledger.registrations().unwrap();
    let view = LedgerView {
        registrations: &rows,
        ..Default::default()
    };
    let plan = tether_ledger::plan(t.id(), view, &ReapOptions::default());
    assert!(plan.targets.iter().all(|p| p.pid != sleeper.id()));
    let reap = tether_ledger::reap_install(
        &t.install,
        &ReapOptions {
            dry_run: true,
            ..Default::default()
        },
    );
    assert!(
        reap.report
            .skipped
            .iter()
            .any(|s| s.pid == sleeper.id() && s.reason == SkipReason::RegisteredWithoutTag),
        "{:?}",
        reap.report.skipped
    );
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
}

#[test]
fn a_version_1_store_is_migrated_keeping_its_rows() {
    let t = TestInstall::new();
    {
        let mut ledger = Ledger::open(&t.install).unwrap();
        let owner = tether_ledger::OwnerRecord::current(&t.install, "run").unwrap();
        ledger.register_owner(&owner).unwrap();
    }
    // Make it a version-1 store again (as an older tether left it).
    {
        let conn = rusqlite_open(&t.ledger_path());
        conn.execute_batch(
            "DROP TABLE registrations;
             DROP TABLE durable;
             ALTER TABLE sessions DROP COLUMN limits;
             ALTER TABLE sessions DROP COLUMN limit_hit;
             ALTER TABLE sessions DROP COLUMN cgroups;
             PRAGMA user_version = 1;",
        )
        .unwrap();
    }
    let ledger = Ledger::open(&t.install).unwrap();
    assert!(ledger.quarantined().is_none(), "an old store is not damage");
    assert_eq!(ledger.owners().unwrap().len(), 1);
    assert!(ledger.registrations().unwrap().is_empty());
}

fn rusqlite_open(path: &std::path::Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).unwrap()
}
