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

/// An owner whose command was over before it was registered (what
/// `tether run` of a short command does) is recorded in one write as it
/// would be in two: the owner ended, the session with its start, its
/// outcome and the limit it ran into.
#[test]
fn an_owner_registered_after_its_command_ended_is_recorded_with_the_end() {
    let home = tempfile::tempdir().unwrap();
    let install = Install::at(home.path());
    let pending = Recorder::prepare(&install, "run").unwrap();
    let command = vec!["sh".to_owned(), "-c".to_owned(), "exit 7".to_owned()];
    let mut child = tether::Command::new(&command[0])
        .args(&command[1..])
        .spawn()
        .unwrap();
    let status = child.wait().unwrap();
    let session = tether_ledger::SessionStart::of_child(&child, "run", &command);
    pending
        .register_ended(
            &session,
            Outcome::of_status(&status),
            Some(tether::LimitHit::Pids { refused: 1 }),
        )
        .unwrap();

    let ledger = Ledger::open(&install).unwrap();
    let owners = ledger.owners().unwrap();
    assert_eq!(owners.len(), 1);
    assert_eq!(owners[0].purpose, "run");
    assert!(owners[0].ended_at_ms.is_some(), "the owner is ended");
    assert_eq!(owners[0].identity.pid, std::process::id());
    let sessions = ledger.sessions().unwrap();
    assert_eq!(sessions.len(), 1);
    let row = &sessions[0];
    assert_eq!(row.id, child.session_id().as_str());
    assert_eq!(row.owner, owners[0].id);
    assert_eq!(row.command, command);
    assert_eq!(row.main.as_ref().map(|m| m.pid), Some(child.id()));
    assert!(row.ended_at_ms.is_some(), "the session is ended");
    assert!(matches!(row.outcome, Some(Outcome::Exited { code: 7 })));
    assert_eq!(row.limit_hit.as_deref(), Some("pids"));
}
