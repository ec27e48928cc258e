//! 10,000 sessions started and finished in one registry: descriptors,
//! zombies and memory return to their baseline (G5). Retention keeps at
//! most `max_finished` of them, so nothing accumulates either.

use crate::support::{registry, settled, status_kib};
use tether::registry::RunSpec;
use tether_testkit::{TAG_VAR, TagGuard, fd_count, tagged_pids, zombie_children};

const SESSIONS: usize = 10_000;
/// Sessions in flight at once (under the default live limit of 64).
const CONCURRENT: usize = 32;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_sessions_return_to_baseline() {
    // Counts of this process's descriptors, zombies and memory: alone.
    if !tether_testkit::alone(module_path!(), "ten_thousand_sessions_return_to_baseline") {
        return;
    }
    let guard = TagGuard::new("registry-cycles");
    let registry = registry();
    let spec = || RunSpec::argv(["true"]).env(TAG_VAR, guard.tag());
    let batch = |n: usize| {
        let registry = &registry;
        async move {
            let mut ids = Vec::with_capacity(n);
            for _ in 0..n {
                ids.push(registry.run(spec()).await.unwrap());
            }
            for id in ids {
                let info = settled(registry, id.as_str()).await;
                assert_eq!(info.exit.unwrap().code(), Some(0));
            }
        }
    };
    // Warm-up: runtime and blocking-pool threads, allocator arenas, and a
    // full retention window, so the baseline is the steady state.
    for _ in 0..4 {
        batch(CONCURRENT).await;
    }
    let fds = fd_count();
    let rss = status_kib("VmRSS");

    let mut done = 0;
    while done < SESSIONS {
        let n = CONCURRENT.min(SESSIONS - done);
        // Two batches in flight: one spawning while the other finishes.
        tokio::join!(batch(n / 2), batch(n - n / 2));
        done += n;
    }

    assert_eq!(fd_count(), fds, "descriptors leaked");
    assert_eq!(zombie_children(), 0, "zombies left");
    assert_eq!(registry.live_count(), 0);
    assert!(registry.list().len() <= tether::registry::DEFAULT_MAX_FINISHED);
    let grown = status_kib("VmRSS").saturating_sub(rss);
    // A leak of even 1 KiB per session would be 10 MiB here.
    assert!(
        grown < 4 * 1024,
        "RSS grew by {grown} KiB over {SESSIONS} sessions"
    );
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}
