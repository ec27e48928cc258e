//! A kill racing an active writer never loses bytes written before it: the
//! kill answers only after the tree is verified empty and the pipe drained.

use std::time::Duration;

use crate::support::{BOUND, read_all, registry, shell};
use tether::registry::{KillReason, SessionState, WaitOptions, WaitOutcome};
use tether_testkit::{TagGuard, tagged_pids};

/// Line `i` of the writer's stream.
fn line(i: usize) -> String {
    format!("{i:08}\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_during_writes_keeps_every_byte_written_before_it() {
    let guard = TagGuard::new("registry-kill-race");
    let dir = tempfile::tempdir().unwrap();
    let registry = registry();
    for round in 0..12 {
        // Each line goes to the pipe first, then to a file: whatever the
        // file holds when the kill returns was written to the pipe before
        // the kill, so the capture must contain it. Half the rounds ignore
        // SIGTERM, so the writer keeps writing through the grace period.
        let ledger = dir.path().join(format!("written-{round}"));
        let trap = if round % 2 == 0 { "trap '' TERM;" } else { "" };
        let script = format!(
            "{trap} i=0; while :; do printf '%08d\\n' $i; printf '%08d\\n' $i >> '{}'; i=$((i+1)); done",
            ledger.display()
        );
        let id = registry.run(shell(guard.tag(), &script)).await.unwrap();
        let started = registry
            .wait(id.as_str(), WaitOptions::new(BOUND).until("00000200\n"))
            .await
            .unwrap();
        assert!(matches!(started.outcome, WaitOutcome::Matched { .. }));

        let grace = Duration::from_millis(if round % 3 == 0 { 0 } else { 50 });
        let outcome = registry.kill(id.as_str(), grace).await.unwrap();
        assert_eq!(outcome.state, SessionState::Killed);
        assert!(!outcome.already_exited);

        let captured = read_all(&registry, id.as_str());
        let info = registry.info(id.as_str()).unwrap();
        assert!(info.settled && info.output_eof, "kill answered before EOF");
        assert_eq!(info.kill_reason, Some(KillReason::Requested));
        let written = std::fs::read(&ledger).unwrap();
        // Nothing lost: every line known written before the kill is there.
        assert!(
            captured.starts_with(&written),
            "round {round}: capture ({} bytes) lacks bytes written before the kill ({} bytes)",
            captured.len(),
            written.len()
        );
        // Nothing invented or reordered: the capture is the known stream.
        let lines = captured.len() / 9;
        let expected: String = (0..lines).map(line).collect();
        assert_eq!(&captured[..lines * 9], expected.as_bytes(), "round {round}");
        assert!(
            line(lines).as_bytes().starts_with(&captured[lines * 9..]),
            "round {round}: torn tail"
        );
        assert!(lines >= 200);
    }
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}
