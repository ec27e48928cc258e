//! Owner teardown: dropping the registry, or shutting it down, kills every
//! session's tree — escapes included — and verifies it empty before
//! returning.

use crate::support::{registry, shell};
use tether::registry::{SessionState, WaitOptions, WaitOutcome};
use tether_testkit::{TagGuard, Tree, tagged_pids, wait_for_count};

use std::time::Duration;

const BOUND: Duration = crate::support::BOUND;

/// Starts every adversarial tree that keeps running, each in a session,
/// and waits until each printed `ready`.
async fn start_trees(registry: &tether::registry::Registry, tag: &str) -> Vec<tether::SessionId> {
    let mut ids = Vec::new();
    for tree in [
        Tree::SetsidDoubleFork,
        Tree::Nohup,
        Tree::Daemon,
        Tree::TrapIgnore,
    ] {
        let id = registry.run(shell(tag, tree.script())).await.unwrap();
        let ready = registry
            .wait(id.as_str(), WaitOptions::new(BOUND).until("ready"))
            .await
            .unwrap();
        assert!(
            matches!(ready.outcome, WaitOutcome::Matched { .. }),
            "{tree:?}"
        );
        ids.push(id);
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_registry_kills_every_tree() {
    let guard = TagGuard::new("registry-drop");
    let registry = registry();
    start_trees(&registry, guard.tag()).await;
    let alive = wait_for_count(guard.tag(), 8, BOUND);
    assert!(alive >= 8, "fixtures did not start ({alive} alive)");
    drop(registry);
    // No waiting here: the drop returned only after every keeper reported
    // its tree empty.
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_kills_every_tree_and_keeps_results_readable() {
    let guard = TagGuard::new("registry-shutdown");
    let registry = registry();
    let ids = start_trees(&registry, guard.tag()).await;
    registry.shutdown().await.unwrap();
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
    for id in ids {
        let info = registry.info(id.as_str()).unwrap();
        assert!(info.settled && info.output_eof, "{info:?}");
        assert!(info.descendants.is_empty());
        // A tree whose main process was still running was killed; one
        // whose main process had exited keeps its natural ending.
        assert!(
            matches!(info.state, SessionState::Killed | SessionState::Exited),
            "{info:?}"
        );
        assert!(
            registry
                .read(id.as_str(), 0, 100)
                .unwrap()
                .data
                .starts_with(b"ready")
        );
    }
}
