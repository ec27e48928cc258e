//! A `SessionObserver` hears every session start and settle — the hook a
//! front-end uses to record sessions in the ledger.

use std::sync::{Arc, Mutex};

use crate::support::{settled, shell};
use tether::registry::{Registry, RegistryConfig, SessionInfo, SessionObserver, SessionState};
use tether_testkit::TagGuard;

#[derive(Debug, Default)]
struct Recorder {
    events: Mutex<Vec<(String, String, SessionState)>>,
}

impl SessionObserver for Recorder {
    fn started(&self, info: &SessionInfo) {
        self.events
            .lock()
            .unwrap()
            .push(("started".into(), info.id.to_string(), info.state));
    }
    fn settled(&self, info: &SessionInfo) {
        self.events
            .lock()
            .unwrap()
            .push(("settled".into(), info.id.to_string(), info.state));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observer_hears_start_and_settle_of_every_session() {
    let guard = TagGuard::new("registry-observer");
    let recorder = Arc::new(Recorder::default());
    let registry = Registry::new(RegistryConfig {
        observer: Some(recorder.clone()),
        ..RegistryConfig::default()
    });
    let a = registry.run(shell(guard.tag(), "exit 3")).await.unwrap();
    let b = registry
        .run(shell(guard.tag(), "sleep 1000"))
        .await
        .unwrap();
    settled(&registry, a.as_str()).await;
    registry
        .kill(b.as_str(), std::time::Duration::from_millis(100))
        .await
        .unwrap();
    settled(&registry, b.as_str()).await;
    let events = recorder.events.lock().unwrap().clone();
    for id in [&a, &b] {
        let of: Vec<&str> = events
            .iter()
            .filter(|e| e.1 == id.as_str())
            .map(|e| e.0.as_str())
            .collect();
        assert_eq!(of, ["started", "settled"], "{id}: {events:?}");
    }
    let final_state = |id: &tether::SessionId| {
        events
            .iter()
            .find(|e| e.1 == id.as_str() && e.0 == "settled")
            .unwrap()
            .2
    };
    assert_eq!(final_state(&a), SessionState::Exited);
    assert_eq!(final_state(&b), SessionState::Killed);
}
