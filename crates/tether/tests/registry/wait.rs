//! `wait`: returns at the main exit, at a regex match (found across chunk
//! boundaries), or with "still running" at the timeout — not an error.
//! `run_and_wait` returns finished results or the id and output so far.

use std::time::Duration;

use crate::support::{BOUND, registry, settled, shell};
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

/// Issue 12: `wait … until` after `(…; echo READY) & echo started` gave
/// up at the main process's exit although the line was still to come from
/// the descendant. `through_exit` keeps waiting while the stream is open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_exit_waits_for_a_line_from_a_descendant() {
    let guard = TagGuard::new("registry-through-exit");
    let registry = registry();
    // The descendant prints READY only after the main process exited: its
    // `read` (of stdin, kept as fd 3: `&` gives a job /dev/null) ends when
    // the registry closes stdin at the main exit.
    let script = "exec 3<&0; (read x <&3; echo READY) & echo started";
    let id = registry
        .run(shell(guard.tag(), script).stdin(StdinMode::Piped))
        .await
        .unwrap();
    let waited = registry
        .wait(
            id.as_str(),
            WaitOptions::new(BOUND).until("^READY$").through_exit(),
        )
        .await
        .unwrap();
    assert!(
        matches!(waited.outcome, WaitOutcome::Matched { start: 8, end: 13 }),
        "{:?}",
        waited.outcome
    );
    assert_eq!(waited.info.state, SessionState::Exited);

    // A descendant that holds the stream but prints nothing: without
    // through_exit the wait ends at the exit, with it at the timeout.
    let id = registry
        .run(shell(guard.tag(), "sleep 1000 & echo started"))
        .await
        .unwrap();
    let at_exit = registry
        .wait(id.as_str(), WaitOptions::new(BOUND).until("READY"))
        .await
        .unwrap();
    assert_eq!(at_exit.outcome, WaitOutcome::Exited);
    // Bounded: nothing will ever print READY; 200 ms shows it keeps waiting.
    let held = registry
        .wait(
            id.as_str(),
            WaitOptions::new(Duration::from_millis(200))
                .until("READY")
                .through_exit(),
        )
        .await
        .unwrap();
    assert_eq!(held.outcome, WaitOutcome::StillRunning);
    assert!(!held.info.descendants.is_empty());

    // A descendant that does not hold the stream: EOF ends the wait.
    let id = registry
        .run(shell(
            guard.tag(),
            "sleep 1000 >/dev/null 2>&1 & echo started",
        ))
        .await
        .unwrap();
    let ended = registry
        .wait(
            id.as_str(),
            WaitOptions::new(BOUND).until("READY").through_exit(),
        )
        .await
        .unwrap();
    assert_eq!(ended.outcome, WaitOutcome::Exited);
    assert!(ended.info.output_eof);
    registry.shutdown().await.unwrap();
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}

/// Issue 12: a REPL turn cost the whole yield window although the answer
/// came at once. `quiet` returns once new output has stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quiet_returns_after_new_output_stops() {
    let guard = TagGuard::new("registry-quiet");
    let registry = registry();
    let script = "while read line; do echo \"got $line\"; printf '> '; done";
    let id = registry
        .run(shell(guard.tag(), script).stdin(StdinMode::Piped))
        .await
        .unwrap();
    // Nothing arrives: silence alone is not "quiet" (bounded: 300 ms).
    let silent = registry
        .wait(
            id.as_str(),
            WaitOptions::new(Duration::from_millis(300)).quiet(Duration::from_millis(50)),
        )
        .await
        .unwrap();
    assert_eq!(silent.outcome, WaitOutcome::StillRunning);

    // The answer may arrive before the wait begins: `from` (the end before
    // the write) makes it count all the same.
    let before = registry.info(id.as_str()).unwrap().output_bytes;
    let queued = registry
        .queue_write(id.as_str(), b"1+1\n".to_vec(), false)
        .unwrap();
    queued.await.unwrap();
    let answered = registry
        .wait(id.as_str(), WaitOptions::new(BOUND).until("> $"))
        .await
        .unwrap();
    assert!(matches!(answered.outcome, WaitOutcome::Matched { .. }));
    let waited = registry
        .wait(
            id.as_str(),
            WaitOptions::new(BOUND)
                .from(before)
                .quiet(Duration::from_millis(100)),
        )
        .await
        .unwrap();
    assert_eq!(waited.outcome, WaitOutcome::Quiet { end: 10 });
    assert_eq!(waited.info.output_bytes, 10);
    assert_eq!(waited.info.output_lines, 1);
    registry.kill(id.as_str(), Duration::ZERO).await.unwrap();
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}

/// A prompt at the end of new output ends a quiet wait at once: the window
/// here is far longer than the wait's timeout, so only the prompt can make
/// the outcome `Quiet` (without it the wait would time out StillRunning).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_ends_a_quiet_wait_without_the_window() {
    let guard = TagGuard::new("registry-prompt");
    let registry = registry();
    let script = "printf '>>> '; while read line; do echo \"got $line\"; printf '>>> '; done";
    let id = registry
        .run(shell(guard.tag(), script).stdin(StdinMode::Piped))
        .await
        .unwrap();
    let ready = registry
        .wait(id.as_str(), WaitOptions::new(BOUND).until(">>> $"))
        .await
        .unwrap();
    assert!(matches!(ready.outcome, WaitOutcome::Matched { .. }));
    let before = registry.info(id.as_str()).unwrap().output_bytes;
    registry
        .queue_write(id.as_str(), b"1+1\n".to_vec(), false)
        .unwrap()
        .await
        .unwrap();
    let waited = registry
        .wait(
            id.as_str(),
            WaitOptions::new(Duration::from_secs(20))
                .from(before)
                .quiet(Duration::from_secs(600))
                .prompt(">>> "),
        )
        .await
        .unwrap();
    assert_eq!(waited.outcome, WaitOutcome::Quiet { end: before + 12 });
    // A line that merely contains the prompt's text is no prompt.
    let before = registry.info(id.as_str()).unwrap().output_bytes;
    registry
        .queue_write(id.as_str(), b"x\n".to_vec(), false)
        .unwrap()
        .await
        .unwrap();
    let not_yet = registry
        .wait(
            id.as_str(),
            WaitOptions::new(Duration::from_millis(300))
                .from(before)
                .quiet(Duration::from_secs(600))
                .prompt("got x"),
        )
        .await
        .unwrap();
    assert_eq!(not_yet.outcome, WaitOutcome::StillRunning);
    registry.kill(id.as_str(), Duration::ZERO).await.unwrap();
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}
