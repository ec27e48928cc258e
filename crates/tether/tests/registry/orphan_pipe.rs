//! A pipe held by an orphan: the main process exits, a descendant it left
//! writes 3 s later. The session completes at the main exit without
//! waiting for it; the late bytes are still captured; the descendant is
//! never SIGPIPEd; the read end is closed exactly when it exits.

use crate::support::{BOUND, read_all, registry, settled, shell};
use tether::registry::{SessionState, WaitOptions, WaitOutcome};
use tether_testkit::{TagGuard, fd_count, tagged_pids, zombie_children};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_writer_is_captured_and_the_fd_closes_at_its_exit() {
    // Counts of this process's descriptors, zombies and memory: alone.
    if !tether_testkit::alone(
        module_path!(),
        "late_writer_is_captured_and_the_fd_closes_at_its_exit",
    ) {
        return;
    }
    let guard = TagGuard::new("registry-orphan-pipe");
    let dir = tempfile::tempdir().unwrap();
    let status = dir.path().join("status");
    let registry = registry();
    // Warm up the runtime's threads and the keeper path, so the descriptor
    // baseline below holds only what every session returns.
    let warm = registry.run(shell(guard.tag(), "true")).await.unwrap();
    settled(&registry, warm.as_str()).await;
    let baseline = fd_count();

    // The descendant records how its late write went: `echo` reports the
    // failure (and sh dies of SIGPIPE before writing `rc=` at all) if the
    // pipe had no reader.
    let script = format!(
        "echo main; (sleep 3; echo late-bytes; echo \"rc=$?\" > '{}') & exit 7",
        status.display()
    );
    let id = registry.run(shell(guard.tag(), &script)).await.unwrap();
    let exited = registry
        .wait(id.as_str(), WaitOptions::new(BOUND))
        .await
        .unwrap();
    assert_eq!(exited.outcome, WaitOutcome::Exited);
    assert_eq!(exited.info.state, SessionState::Exited);
    assert_eq!(exited.info.exit.unwrap().code(), Some(7));
    // Completed at the main exit, with the orphan still holding the pipe.
    assert!(!exited.info.settled && !exited.info.output_eof);
    assert!(!exited.info.descendants.is_empty(), "{:?}", exited.info);
    assert_eq!(read_all(&registry, id.as_str()), b"main\n");
    assert!(
        fd_count() > baseline,
        "the read end must stay open for the orphan"
    );

    let done = settled(&registry, id.as_str()).await;
    assert!(done.output_eof && done.descendants.is_empty());
    assert_eq!(read_all(&registry, id.as_str()), b"main\nlate-bytes\n");
    assert_eq!(std::fs::read_to_string(&status).unwrap(), "rc=0\n");
    // Still `exited` with the main process's status: the descendant's end
    // changed nothing about the completion.
    assert_eq!(done.state, SessionState::Exited);
    assert_eq!(done.exit.unwrap().code(), Some(7));
    assert_eq!(fd_count(), baseline, "descriptors not released at EOF");
    assert_eq!(zombie_children(), 0);
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}
