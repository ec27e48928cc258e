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
