//! A registry that outlives the runtimes its sessions ran on, as the
//! Python package's does (it stops its runtime whenever no session is
//! live): once `release_ended_tasks` ran, a finished session holds nothing
//! of a runtime that shut down — before, its driver's task handle and its
//! runtime handle kept that runtime's epoll and eventfd open (2
//! descriptors per finished session, until evicted).

use crate::support::{read_all, registry, settled, shell};
use tether::registry::Registry;
use tether_testkit::{TagGuard, fd_count, tagged_pids};

/// One session to its end on a runtime of its own, then that runtime
/// shut down (as the Python engine's, between sessions).
fn one_session_on_its_own_runtime(registry: &Registry, tag: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let id = registry.run(shell(tag, "echo hi")).await.unwrap();
        settled(registry, id.as_str()).await;
    });
    drop(runtime);
    registry.release_ended_tasks();
}

#[test]
fn finished_sessions_let_go_of_runtimes_that_shut_down() {
    // Counts this process's descriptors: alone.
    if !tether_testkit::alone(
        module_path!(),
        "finished_sessions_let_go_of_runtimes_that_shut_down",
    ) {
        return;
    }
    let guard = TagGuard::new("registry-runtimes");
    let registry = registry();
    // Whatever is made once per process (the spill directory, …).
    one_session_on_its_own_runtime(&registry, guard.tag());
    let fds = fd_count();
    for _ in 0..5 {
        one_session_on_its_own_runtime(&registry, guard.tag());
    }
    assert_eq!(fd_count(), fds, "finished sessions hold descriptors");
    // Still there and readable, without a runtime.
    let sessions = registry.list();
    assert_eq!(sessions.len(), 6);
    for info in &sessions {
        assert_eq!(read_all(&registry, info.id.as_str()), b"hi\n");
    }
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}
