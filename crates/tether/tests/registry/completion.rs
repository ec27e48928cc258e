//! Completion: exactly one per session, even when a kill, the reader and
//! the exit race; a kill's reason is never overwritten by a late natural
//! exit; timeouts end sessions as `timed_out`; a kill after the exit ends
//! the descendants left behind without rewriting the exit.

use std::time::Duration;
use tether::unix::ExitStatusExt;

use crate::support::{BOUND, read_all, registry, settled, shell};
use tether::registry::{KillReason, SessionState, WaitOptions, WaitOutcome};
use tether_testkit::{TagGuard, tagged_pids};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_racing_exit_publishes_one_consistent_completion() {
    let guard = TagGuard::new("registry-race");
    let registry = registry();
    for round in 0..40 {
        // Exits on its own within microseconds of the kill being sent.
        let id = registry.run(shell(guard.tag(), "echo done")).await.unwrap();
        let waiters = (0..3).map(|_| registry.wait(id.as_str(), WaitOptions::new(BOUND)));
        let (killed, waited) = tokio::join!(
            registry.kill(id.as_str(), Duration::ZERO),
            futures_join(waiters.collect())
        );
        let killed = killed.unwrap();
        let final_info = settled(&registry, id.as_str()).await;
        // Every observer saw the same single completion.
        for w in waited {
            let w = w.unwrap();
            assert_eq!(w.outcome, WaitOutcome::Exited);
            assert_eq!(
                (w.info.state, w.info.exit),
                (final_info.state, final_info.exit)
            );
        }
        assert_eq!(killed.state, final_info.state, "round {round}");
        if killed.already_exited {
            // The exit came first: it stands, and no kill reason is made up.
            assert_eq!(final_info.state, SessionState::Exited);
            assert_eq!(final_info.kill_reason, None);
        } else {
            // The kill came first: its reason stands even if the process
            // then exited 0 on its own.
            assert_eq!(final_info.state, SessionState::Killed);
            assert_eq!(final_info.kill_reason, Some(KillReason::Requested));
        }
        // Whatever won, nothing written was lost.
        let out = read_all(&registry, id.as_str());
        assert!(out.is_empty() || out == b"done\n", "round {round}: {out:?}");
    }
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}

async fn futures_join<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut out = Vec::new();
    for f in futures {
        out.push(f.await);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_after_exit_ends_leftovers_and_keeps_the_exit() {
    let guard = TagGuard::new("registry-leftovers");
    let registry = registry();
    let id = registry
        .run(shell(
            guard.tag(),
            "sleep 1000 & setsid sleep 1000 & exit 3",
        ))
        .await
        .unwrap();
    let exited = registry
        .wait(id.as_str(), WaitOptions::new(BOUND))
        .await
        .unwrap();
    assert_eq!(exited.info.state, SessionState::Exited, "{exited:?}");
    assert_eq!(
        exited.info.descendants.len(),
        2,
        "{:?}",
        exited.info.descendants
    );
    assert!(
        exited
            .info
            .descendants
            .iter()
            .all(|d| d.pid != exited.info.pid() && !d.command.is_empty()),
        "{:?}",
        exited.info.descendants
    );

    let killed = registry
        .kill(id.as_str(), Duration::from_millis(100))
        .await
        .unwrap();
    assert!(killed.already_exited);
    assert_eq!(killed.descendants_killed, 2);
    assert_eq!(killed.state, SessionState::Exited);
    let info = registry.info(id.as_str()).unwrap();
    assert_eq!((info.state, info.kill_reason), (SessionState::Exited, None));
    assert_eq!(info.exit.unwrap().code(), Some(3));
    assert!(info.settled && info.descendants.is_empty());
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
    // Killing a settled session is harmless and says so.
    let again = registry.kill(id.as_str(), Duration::ZERO).await.unwrap();
    assert!(again.already_exited);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hard_and_idle_timeouts_end_as_timed_out() {
    let guard = TagGuard::new("registry-timeouts");
    let registry = registry();
    let hard = shell(guard.tag(), "while :; do echo tick; sleep 0.05; done")
        .timeout(Duration::from_millis(300));
    let idle =
        shell(guard.tag(), "echo once; exec sleep 1000").idle_timeout(Duration::from_millis(300));
    let hard = registry.run(hard).await.unwrap();
    let idle = registry.run(idle).await.unwrap();
    for (id, reason) in [(hard, KillReason::Timeout), (idle, KillReason::IdleTimeout)] {
        let info = settled(&registry, id.as_str()).await;
        assert_eq!(info.state, SessionState::TimedOut, "{info:?}");
        assert_eq!(info.kill_reason, Some(reason));
        assert!(info.exit.unwrap().signal().is_some());
    }
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}
