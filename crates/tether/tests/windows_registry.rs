//! Windows: registry sessions — `cmd.exe` scripts, complete output at the
//! main process's exit, stdin, kills — through the async pipes that work
//! without a reactor (see `contain/windows/async_pipe.rs`).
#![cfg(windows)]

mod windows_support;

use std::time::Duration;

use tether::Containment;
use tether::registry::{Registry, RegistryConfig, RunSpec, StdinMode, WaitOptions, WaitOutcome};
use windows_support::*;

const BOUND: Duration = Duration::from_secs(30);

fn registry() -> Registry {
    Registry::new(RegistryConfig::default())
}

async fn settled(registry: &Registry, id: &str) -> tether::registry::SessionInfo {
    let waited = registry
        .wait(id, WaitOptions::new(BOUND).settled())
        .await
        .unwrap();
    assert_eq!(
        waited.outcome,
        WaitOutcome::Exited,
        "session {id} never settled"
    );
    waited.info
}

fn read_all(registry: &Registry, id: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        let chunk = registry.read(id, at, 1 << 20).unwrap();
        assert_eq!(chunk.dropped, 0);
        if chunk.data.is_empty() {
            return out;
        }
        out.extend_from_slice(&chunk.data);
        at = chunk.next_offset;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_script_runs_in_cmd_exe_inside_a_job() {
    let registry = registry();
    let id = registry
        .run(RunSpec::shell("echo hello \"quoted  words\"& exit /b 3"))
        .await
        .unwrap();
    let info = settled(&registry, id.as_str()).await;
    assert_eq!(info.containment, Containment::Job);
    assert_eq!(info.exit.unwrap().code(), Some(3));
    let out = String::from_utf8(read_all(&registry, id.as_str())).unwrap();
    assert_eq!(out.replace("\r\n", "\n"), "hello \"quoted  words\"\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_byte_written_before_exit_is_there_at_exit() {
    let registry = registry();
    let n = 3 << 20;
    let spec = RunSpec::argv([
        helper().into_os_string(),
        "spew".into(),
        n.to_string().into(),
    ]);
    let id = registry.run(spec).await.unwrap();
    let info = settled(&registry, id.as_str()).await;
    assert_eq!(info.exit.unwrap().code(), Some(0));
    let out = read_all(&registry, id.as_str());
    assert_eq!(out.len(), n);
    assert!(
        out.iter()
            .enumerate()
            .all(|(i, &b)| b == ((i % 65536) % 251) as u8)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_writes_arrive_and_close_is_a_real_eof() {
    let registry = registry();
    let spec = RunSpec::argv([helper().into_os_string(), "cat".into()]).stdin(StdinMode::Piped);
    let id = registry.run(spec).await.unwrap();
    let big = vec![b'x'; 1 << 20];
    registry.write(id.as_str(), &big).await.unwrap();
    registry.write(id.as_str(), b"end").await.unwrap();
    let before = registry
        .wait(id.as_str(), WaitOptions::new(Duration::from_millis(100)))
        .await
        .unwrap();
    assert_eq!(
        before.outcome,
        WaitOutcome::StillRunning,
        "EOF before close"
    );
    registry.close_stdin(id.as_str()).unwrap();
    settled(&registry, id.as_str()).await;
    let out = read_all(&registry, id.as_str());
    assert_eq!(out.len(), (1 << 20) + 3);
    assert!(out.ends_with(b"xend"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_ends_the_whole_tree_and_counts_the_descendants() {
    let registry = registry();
    let spec = RunSpec::argv([helper().into_os_string(), "tree".into(), "60".into()]);
    let id = registry.run(spec).await.unwrap();
    // The first line names the pids; wait for it by pattern.
    let waited = registry
        .wait(id.as_str(), WaitOptions::new(BOUND).until(r"^\d+ \d+"))
        .await
        .unwrap();
    assert!(
        matches!(waited.outcome, WaitOutcome::Matched { .. }),
        "{:?}",
        waited.outcome
    );
    let line = String::from_utf8(read_all(&registry, id.as_str())).unwrap();
    let ids = pids(line.lines().next().unwrap());
    let (main, grandchild) = (pin(ids[0]), pin(ids[1]));
    let killed = registry
        .kill(id.as_str(), Duration::from_millis(200))
        .await
        .unwrap();
    assert_eq!(killed.descendants_killed, 1);
    assert_dies(&main, "main");
    assert_dies(&grandchild, "grandchild");
}
