//! A session whose keeper is SIGKILLed from outside is `lost`: its orphans
//! are found by spawn tag and killed, nothing of it survives, and the
//! registry keeps serving other sessions.

use crate::support::{registry, settled, shell};
use tether::registry::{SessionState, WaitOptions, WaitOutcome};
use tether_testkit::{TagGuard, Tree, wait_all_dead, wait_for_count};

const BOUND: std::time::Duration = crate::support::BOUND;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_keeper_makes_the_session_lost_and_its_orphans_die() {
    let guard = TagGuard::new("registry-lost");
    let registry = registry();
    let id = registry
        .run(shell(guard.tag(), Tree::SetsidDoubleFork.script()))
        .await
        .unwrap();
    let ready = registry
        .wait(id.as_str(), WaitOptions::new(BOUND).until("ready"))
        .await
        .unwrap();
    assert!(matches!(ready.outcome, WaitOutcome::Matched { .. }));
    assert!(wait_for_count(guard.tag(), Tree::SetsidDoubleFork.min_processes(), BOUND) >= 4);

    // The keeper is the main process's parent (subreaper containment).
    let main = registry.info(id.as_str()).unwrap().identity.pid;
    let keeper = tether::sys::process(main).unwrap().ppid;
    // SAFETY: kill(2) of the keeper, our own unreaped child: its pid
    // cannot have been reused.
    unsafe { libc::kill(keeper as i32, libc::SIGKILL) };

    let info = settled(&registry, id.as_str()).await;
    assert_eq!(info.state, SessionState::Lost);
    // Issue 8: the tag sweep killed them; the count says so (it said 0).
    assert!(
        info.descendants_killed as usize >= Tree::SetsidDoubleFork.min_processes() - 1,
        "descendants_killed {}",
        info.descendants_killed
    );
    assert!(
        wait_all_dead(guard.tag(), BOUND).is_empty(),
        "orphans of the lost keeper survived"
    );

    // The registry is unharmed.
    let other = registry
        .run_and_wait(shell(guard.tag(), "echo still-serving"), BOUND)
        .await
        .unwrap();
    assert!(other.finished);
    assert_eq!(
        String::from_utf8_lossy(&other.output.data),
        "still-serving\n"
    );
}
