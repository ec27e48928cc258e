//! Stdin: `write` delivers bytes, `close_stdin` is a real EOF, and writing
//! where nobody can read is a clear error.

use crate::support::{BOUND, read_all, registry, settled, shell};
use tether::Error;
use tether::registry::{StdinMode, WaitOptions, WaitOutcome};
use tether_testkit::{TagGuard, tagged_pids};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_then_close_delivers_bytes_and_a_real_eof() {
    let guard = TagGuard::new("registry-stdin");
    let registry = registry();
    // `wc -c` prints only once it reads EOF.
    let spec = shell(guard.tag(), "wc -c").stdin(StdinMode::Piped);
    let id = registry.run(spec).await.unwrap();
    assert!(registry.info(id.as_str()).unwrap().stdin_open);
    // More than a pipe buffer: the write waits for the reader, and
    // finishes.
    let big = vec![b'x'; 1 << 20];
    registry.write(id.as_str(), &big).await.unwrap();
    registry.write(id.as_str(), b"\0\xff").await.unwrap();
    let before = registry
        .wait(
            id.as_str(),
            WaitOptions::new(std::time::Duration::from_millis(50)),
        )
        .await
        .unwrap();
    assert_eq!(
        before.outcome,
        WaitOutcome::StillRunning,
        "EOF before close"
    );
    registry.close_stdin(id.as_str()).unwrap();
    settled(&registry, id.as_str()).await;
    let out = String::from_utf8(read_all(&registry, id.as_str())).unwrap();
    assert_eq!(out.trim(), ((1 << 20) + 2).to_string());
    assert!(!registry.info(id.as_str()).unwrap().stdin_open);
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_without_a_reader_are_clear_errors() {
    let guard = TagGuard::new("registry-stdin-errors");
    let registry = registry();
    let no_pipe = registry
        .run(shell(guard.tag(), "exec sleep 1000"))
        .await
        .unwrap();
    let err = registry.write(no_pipe.as_str(), b"x").await.unwrap_err();
    assert!(matches!(err, Error::NoStdin { .. }), "{err}");
    assert!(matches!(
        registry.close_stdin(no_pipe.as_str()),
        Err(Error::NoStdin { .. })
    ));

    let closed = registry
        .run(shell(guard.tag(), "exec sleep 1000").stdin(StdinMode::Piped))
        .await
        .unwrap();
    registry.close_stdin(closed.as_str()).unwrap();
    let err = registry.write(closed.as_str(), b"x").await.unwrap_err();
    assert!(matches!(err, Error::StdinClosed { .. }), "{err}");
    assert!(err.to_string().contains("close_stdin"), "{err}");

    let exited = registry
        .run(shell(guard.tag(), "true").stdin(StdinMode::Piped))
        .await
        .unwrap();
    registry
        .wait(exited.as_str(), WaitOptions::new(BOUND))
        .await
        .unwrap();
    let err = registry.write(exited.as_str(), b"x").await.unwrap_err();
    assert!(matches!(err, Error::StdinClosed { .. }), "{err}");
    assert!(err.to_string().contains("exited"), "{err}");
    registry.shutdown().await.unwrap();
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}

/// Issue 9 (item 6): the stdin queue the MCP server kept on the side is a
/// registry capability: `queue_write` never waits for the reader, keeps
/// order, is bounded, and says clearly when it is full or closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_writes_never_block_keep_order_and_are_bounded() {
    use std::time::Duration;
    let guard = TagGuard::new("registry-stdin-queue");
    let registry = tether::registry::Registry::new(tether::registry::RegistryConfig {
        stdin_queue_limit: 2 << 20,
        ..tether::registry::RegistryConfig::default()
    });
    // A reader that does not read until told: opening the fifo blocks
    // until the test opens its other end.
    let dir = tempfile::tempdir().unwrap();
    let gate = dir.path().join("go");
    nix::unistd::mkfifo(&gate, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let script = format!("exec 3<{}; exec wc -c", gate.display());
    let id = registry
        .run(shell(guard.tag(), &script).stdin(StdinMode::Piped))
        .await
        .unwrap();
    // 1.5 MiB is far more than the pipe holds: queue_write returns anyway.
    let first = registry
        .queue_write(id.as_str(), vec![b'a'; 3 << 19], false)
        .unwrap();
    let info = registry.info(id.as_str()).unwrap();
    assert!(info.stdin_queued > 0, "{}", info.stdin_queued);
    let err = registry
        .queue_write(id.as_str(), vec![b'b'; 1 << 20], false)
        .unwrap_err();
    assert!(
        matches!(err, Error::StdinQueueFull { limit, .. } if limit == 2 << 20),
        "{err}"
    );
    assert!(
        err.to_string().contains("wait until it reads them"),
        "{err}"
    );
    // Bounded: the reader is held; 100 ms shows the write is not done.
    let mut first = Box::pin(first);
    assert!(
        tokio::time::timeout(Duration::from_millis(100), first.as_mut())
            .await
            .is_err()
    );
    let second = registry
        .queue_write(id.as_str(), b"xyz".to_vec(), true)
        .unwrap();
    let err = registry
        .queue_write(id.as_str(), b"late".to_vec(), false)
        .unwrap_err();
    assert!(matches!(err, Error::StdinClosed { .. }), "{err}");
    drop(std::fs::OpenOptions::new().write(true).open(&gate).unwrap());
    first.await.unwrap();
    second.await.unwrap();
    settled(&registry, id.as_str()).await;
    let out = String::from_utf8(read_all(&registry, id.as_str())).unwrap();
    assert_eq!(out.trim(), ((3 << 19) + 3).to_string());
    assert_eq!(registry.info(id.as_str()).unwrap().stdin_queued, 0);
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}
