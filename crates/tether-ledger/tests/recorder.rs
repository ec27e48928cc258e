//! A registry with a `Recorder` records its owner and every session,
//! start and outcome, in the install's ledger.

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

use std::time::Duration;

use tether::Install;
use tether::registry::{Registry, RegistryConfig, RunSpec, WaitOptions, WaitOutcome};
use tether_ledger::{Ledger, Outcome, Recorder};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_sessions_are_recorded() {
    let home = tempfile::tempdir().unwrap();
    let install = Install::at(home.path());
    let observer = std::sync::Arc::new(Recorder::register(&install, "mcp").unwrap());
    let registry = Registry::new(RegistryConfig {
        observer: Some(observer.clone()),
        ..RegistryConfig::default()
    });
    let spec = |script: &str| RunSpec::shell(script).grace(Duration::from_millis(100));
    let exited = registry.run(spec("exit 7")).await.unwrap();
    let killed = registry.run(spec("sleep 1000")).await.unwrap();
    registry
        .kill(killed.as_str(), Duration::from_millis(100))
        .await
        .unwrap();
    for id in [&exited, &killed] {
        let waited = registry
            .wait(
                id.as_str(),
                WaitOptions::new(Duration::from_secs(30)).settled(),
            )
            .await
            .unwrap();
        assert_eq!(waited.outcome, WaitOutcome::Exited);
    }
    observer.finish();

    let ledger = Ledger::open(&install).unwrap();
    let owners = ledger.owners().unwrap();
    assert_eq!(owners.len(), 1);
    assert_eq!(owners[0].purpose, "mcp");
    let sessions = ledger.sessions().unwrap();
    let row = |id: &tether::SessionId| {
        sessions
            .iter()
            .find(|s| s.id == id.as_str())
            .expect("recorded")
    };
    assert!(matches!(
        row(&exited).outcome,
        Some(Outcome::Exited { code: 7 })
    ));
    assert!(matches!(row(&killed).outcome, Some(Outcome::Killed)));
    assert_eq!(
        row(&exited).main.as_ref().map(|m| m.pid),
        Some(registry.info(exited.as_str()).unwrap().identity.pid)
    );
}

/// Issue 34, item 12: a recorder's callers never wait on the store. With
/// another process's write transaction open (here another connection's
/// `BEGIN IMMEDIATE`), a registry's sessions start and settle, and the
/// owner finishes, while the lock is still held; once it is released, the
/// next open of the store has every session and its outcome (what the
/// store could not take was journaled at `finish`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_store_lock_holds_up_nothing() {
    let home = tempfile::tempdir().unwrap();
    let install = Install::at(home.path());
    let path = Ledger::open(&install).unwrap().path().to_owned();
    let locker = rusqlite::Connection::open(&path).unwrap();
    locker.execute_batch("BEGIN IMMEDIATE").unwrap();

    let observer = std::sync::Arc::new(Recorder::register(&install, "mcp").unwrap());
    let registry = Registry::new(RegistryConfig {
        observer: Some(observer.clone()),
        ..RegistryConfig::default()
    });
    let spec = |script: &str| RunSpec::shell(script).grace(Duration::from_millis(100));
    let ran = registry
        .run_and_wait(spec("exit 3"), Duration::from_secs(30))
        .await
        .unwrap();
    assert!(ran.finished);
    let id = ran.id.clone();
    let waited = registry
        .wait(
            id.as_str(),
            WaitOptions::new(Duration::from_secs(30)).settled(),
        )
        .await
        .unwrap();
    assert_eq!(waited.outcome, WaitOutcome::Exited);
    observer.finish();
    // Everything above happened with the lock held.
    assert!(!locker.is_autocommit(), "the lock was held throughout");
    drop(locker);

    let ledger = Ledger::open(&install).unwrap();
    let sessions = ledger.sessions().unwrap();
    let row = sessions
        .iter()
        .find(|s| s.id == id.as_str())
        .unwrap_or_else(|| panic!("{id} not recorded: {sessions:?}"));
    assert!(
        matches!(row.outcome, Some(Outcome::Exited { code: 3 })),
        "{row:?}"
    );
    assert!(ledger.owners().unwrap().iter().any(|o| o.purpose == "mcp"));
}
