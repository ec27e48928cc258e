//! `Registry::close` forgets a session at once (its tree killed first,
//! verified), `read_wait` reads output as it comes, the output doorbell is
//! readable exactly while unread output waits, and a session's exit status
//! carries what its whole tree used.

use std::os::fd::{BorrowedFd, RawFd};
use std::time::Duration;

use crate::support::{BOUND, registry, settled, shell};
use tether::registry::{RunSpec, SessionState, StdinMode, Stream, WaitOptions, WaitOutcome};
use tether::unix::RegistryOutputExt;
use tether_testkit::{TAG_VAR, TagGuard, Tree, fd_count, tagged_pids, wait_for_count};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_kills_the_tree_and_releases_every_descriptor() {
    // Counts this process's descriptors: alone.
    if !tether_testkit::alone(
        module_path!(),
        "close_kills_the_tree_and_releases_every_descriptor",
    ) {
        return;
    }
    let guard = TagGuard::new("registry-close");
    let registry = registry();
    // Warm-up: the runtime's threads and a finished session's traces.
    let warm = registry.run(shell(guard.tag(), "true")).await.unwrap();
    settled(&registry, warm.as_str()).await;
    registry.close(warm.as_str(), BOUND).await.unwrap();
    let fds = fd_count();

    let id = registry
        .run(shell(guard.tag(), Tree::SetsidDoubleFork.script()).stdin(StdinMode::Piped))
        .await
        .unwrap();
    let ready = registry
        .wait(id.as_str(), WaitOptions::new(BOUND).until("ready"))
        .await
        .unwrap();
    assert!(matches!(ready.outcome, WaitOutcome::Matched { .. }));
    assert!(wait_for_count(guard.tag(), Tree::SetsidDoubleFork.min_processes(), BOUND) > 0);
    registry.output_fd(id.as_str()).unwrap();
    assert!(fd_count() > fds);

    let last = registry
        .close(id.as_str(), Duration::from_millis(200))
        .await
        .unwrap();
    assert_eq!(last.state, SessionState::Killed);
    assert!(last.settled);
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
    assert_eq!(fd_count(), fds, "descriptors left after close");
    assert!(
        registry.info(id.as_str()).is_err(),
        "a closed session is forgotten"
    );
    assert_eq!(registry.live_count(), 0);
}

fn readable(fd: RawFd) -> bool {
    // SAFETY: the registry owns `fd` and keeps it open for this call.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    let mut fds = [nix::poll::PollFd::new(fd, nix::poll::PollFlags::POLLIN)];
    nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO).unwrap() == 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_wait_and_the_doorbell_follow_the_output() {
    let guard = TagGuard::new("registry-read-wait");
    let registry = registry();
    let id = registry
        .run(shell(guard.tag(), "echo one; read x; echo two:$x").stdin(StdinMode::Piped))
        .await
        .unwrap();
    let fd = registry.output_fd(id.as_str()).unwrap();
    // The first line, while the command waits for input.
    let first = registry
        .read_wait(id.as_str(), Stream::Output, 0, 1 << 16, BOUND)
        .await
        .unwrap();
    assert_eq!(first.data, b"one\n");
    assert!(readable(fd));
    registry
        .output_seen(id.as_str(), first.next_offset)
        .unwrap();
    assert!(!readable(fd), "read up to the end: nothing waits");
    // Nothing comes until we write: a bounded wait returns empty.
    let none = registry
        .read_wait(
            id.as_str(),
            Stream::Output,
            first.next_offset,
            1 << 16,
            Duration::from_millis(50),
        )
        .await
        .unwrap();
    assert!(none.data.is_empty() && !none.eof);
    registry.write(id.as_str(), b"a\n").await.unwrap();
    let second = registry
        .read_wait(
            id.as_str(),
            Stream::Output,
            first.next_offset,
            1 << 16,
            BOUND,
        )
        .await
        .unwrap();
    assert_eq!(second.data, b"two:a\n");
    settled(&registry, id.as_str()).await;
    let end = registry
        .read_wait(
            id.as_str(),
            Stream::Output,
            second.next_offset,
            1 << 16,
            BOUND,
        )
        .await
        .unwrap();
    assert!(end.eof && end.data.is_empty());
    // At the end: readable for good, as a pipe at EOF.
    registry.output_seen(id.as_str(), end.next_offset).unwrap();
    assert!(readable(fd));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exit_status_carries_what_the_whole_tree_used() {
    let guard = TagGuard::new("registry-usage");
    let registry = registry();
    // A grandchild burns ≥ 0.2 s of CPU and touches 64 MiB; the main
    // process itself next to nothing.
    let script = "python3 -c 'import time; b = bytearray(64 << 20); t = time.process_time()\n\
                  while time.process_time() - t < 0.2: pass' & wait";
    let id = registry
        .run(RunSpec::shell(script).env(TAG_VAR, guard.tag()))
        .await
        .unwrap();
    let info = settled(&registry, id.as_str()).await;
    let usage = info
        .exit
        .unwrap()
        .resource_usage()
        .expect("measured on Linux");
    assert!(usage.max_rss >= 64 << 20, "{usage:?}");
    assert!(
        usage.user_time + usage.system_time >= Duration::from_millis(200),
        "{usage:?}"
    );
    // The same through a Child.
    let status = tether::Command::new("sh")
        .args(["-c", script])
        .env(TAG_VAR, guard.tag())
        .status()
        .unwrap();
    let usage = status.resource_usage().expect("measured on Linux");
    assert!(
        usage.max_rss >= 64 << 20 && usage.user_time >= Duration::from_millis(100),
        "{usage:?}"
    );
}
