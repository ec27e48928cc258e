//! `wait`: returns at the main exit, at a regex match (found across chunk
//! boundaries), or with "still running" at the timeout — not an error.
//! `run_and_wait` returns finished results or the id and output so far.

mod registry_support;

use std::time::Duration;

use registry_support::{BOUND, registry, settled, shell};
use tether::Error;
use tether::registry::{SessionState, StdinMode, WaitOptions, WaitOutcome};
use tether_testkit::{TagGuard, tagged_pids};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn until_matches_across_chunk_boundaries() {
    let guard = TagGuard::new("registry-until");
    let registry = registry();
    // The line arrives in two writes, the second only after the test has
    // seen the first (it sends a line to stdin when it has): the two
    // halves are certainly two chunks.
    let script = "printf 'Listen'; read go; printf 'ing on :8080\\n'; exec sleep 1000";
    let spec = shell(guard.tag(), script).stdin(StdinMode::Piped);
    let id = registry.run(spec).await.unwrap();
    let half = registry
        .wait(id.as_str(), WaitOptions::new(BOUND).until("Listen"))
        .await
        .unwrap();
    assert_eq!(half.outcome, WaitOutcome::Matched { start: 0, end: 6 });
    assert_eq!(half.info.output_bytes, 6, "the first write is alone so far");

    let waiter = registry.wait(
        id.as_str(),
        WaitOptions::new(BOUND).until(r"Listening on :(\d+)$"),
    );
    let (waited, wrote) = tokio::join!(waiter, registry.write(id.as_str(), b"go\n"));
    wrote.unwrap();
    let waited = waited.unwrap();
    assert_eq!(waited.outcome, WaitOutcome::Matched { start: 0, end: 18 });
    assert_eq!(waited.info.state, SessionState::Running);

    // From a later offset the same text is not seen again: timeout.
    let later = registry
        .wait(
            id.as_str(),
            WaitOptions::new(Duration::from_millis(100))
                .until("Listening")
                .from(18),
        )
        .await
        .unwrap();
    assert_eq!(later.outcome, WaitOutcome::StillRunning);
    registry.kill(id.as_str(), Duration::ZERO).await.unwrap();
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_returns_still_running_and_exit_returns_exited() {
    let guard = TagGuard::new("registry-wait-timeout");
    let registry = registry();
    let id = registry
        .run(shell(guard.tag(), "read line; echo got $line; exit 4").stdin(StdinMode::Piped))
        .await
        .unwrap();
    let running = registry
        .wait(id.as_str(), WaitOptions::new(Duration::from_millis(50)))
        .await
        .unwrap();
    assert_eq!(running.outcome, WaitOutcome::StillRunning);
    assert!(running.info.is_running());
    assert!(running.info.exit.is_none());

    registry.write(id.as_str(), b"x\n").await.unwrap();
    let exited = registry
        .wait(id.as_str(), WaitOptions::new(BOUND))
        .await
        .unwrap();
    assert_eq!(exited.outcome, WaitOutcome::Exited);
    assert_eq!(exited.info.state, SessionState::Exited);
    assert_eq!(exited.info.exit.unwrap().code(), Some(4));
    assert_eq!(registry.read(id.as_str(), 0, 100).unwrap().data, b"got x\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_regex_is_a_clear_error() {
    let guard = TagGuard::new("registry-bad-regex");
    let registry = registry();
    let id = registry.run(shell(guard.tag(), "true")).await.unwrap();
    let err = registry
        .wait(id.as_str(), WaitOptions::new(BOUND).until("(unclosed"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidInput {
                what: "until pattern",
                ..
            }
        ),
        "{err}"
    );
    settled(&registry, id.as_str()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_and_wait_returns_finished_or_yields_with_output_so_far() {
    let guard = TagGuard::new("registry-yield");
    let registry = registry();
    let done = registry
        .run_and_wait(shell(guard.tag(), "echo quick; exit 2"), BOUND)
        .await
        .unwrap();
    assert!(done.finished);
    assert_eq!(done.info.exit.unwrap().code(), Some(2));
    assert_eq!(done.output.data, b"quick\n");

    let slow = registry
        .run_and_wait(
            shell(guard.tag(), "echo started; exec sleep 1000"),
            Duration::from_millis(300),
        )
        .await
        .unwrap();
    assert!(!slow.finished);
    assert!(slow.info.is_running());
    // Output so far: at least what came before the yield.
    let so_far = registry
        .wait(slow.id.as_str(), WaitOptions::new(BOUND).until("started\n"))
        .await
        .unwrap();
    assert!(matches!(so_far.outcome, WaitOutcome::Matched { .. }));
    let killed = registry
        .kill(slow.id.as_str(), Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(killed.state, SessionState::Killed);
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}
