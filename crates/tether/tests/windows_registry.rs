//! Windows: registry sessions — `cmd.exe` scripts, complete output at the
//! main process's exit, stdin, kills, PTY sessions on ConPTY — through the
//! async pipes that work without a reactor (see
//! `contain/windows/async_pipe.rs`).
#![cfg(windows)]

mod windows_support;

use std::time::Duration;

use tether::Containment;
use tether::registry::{Registry, RegistryConfig, RunSpec, StdinMode, WaitOptions, WaitOutcome};
use tether::terminal::PtySize;
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

// PTY sessions on ConPTY, through the same driver and async pipes as pipe
// sessions. Wine 8 runs the containment, the kill and the ending order (a
// session settles only once its output reached EOF, after the job's end
// and the pseudoconsole's close); what cmd.exe shows, reads or is resized
// to needs real Windows (cross-platform.md).

fn pty_size() -> PtySize {
    PtySize::default()
}

fn cmd_exe() -> std::ffi::OsString {
    std::path::Path::new(&std::env::var_os("SystemRoot").unwrap())
        .join(r"System32\cmd.exe")
        .into_os_string()
}

/// Waits until the output from `from` on matches `pattern`; the offset
/// just past the match.
async fn until(registry: &Registry, id: &str, from: u64, pattern: &str) -> u64 {
    let waited = registry
        .wait(id, WaitOptions::new(BOUND).from(from).until(pattern))
        .await
        .unwrap();
    match waited.outcome {
        WaitOutcome::Matched { end, .. } => end,
        other => panic!(
            "{pattern:?} never came ({other:?}); output: {:?}",
            String::from_utf8_lossy(&read_all(registry, id))
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pty_session_runs_in_its_job_and_its_output_reaches_the_stream_and_screen() {
    let registry = registry();
    let id = registry
        .run(RunSpec::shell("echo hello-pty& exit /b 4").pty(pty_size()))
        .await
        .unwrap();
    // Settled: the job emptied, the pseudoconsole closed, the output at EOF.
    let info = settled(&registry, id.as_str()).await;
    assert_eq!(info.containment, Containment::Job);
    assert_eq!(info.pty, Some(pty_size()));
    assert_eq!(info.exit.unwrap().code(), Some(4));
    assert!(info.output_eof);
    let screen = registry.screen(id.as_str()).unwrap();
    assert_eq!(screen.size, pty_size());
    assert_eq!(screen.lines.len(), usize::from(pty_size().rows()));
    let out = String::from_utf8_lossy(&read_all(&registry, id.as_str())).into_owned();
    match wine() {
        Some(v) => eprintln!(
            "output not checked under Wine {v}: a pseudoconsole child's std handles are never \
             connected to it, so cmd.exe's echo does not reach the pipe ({out:?})"
        ),
        None => {
            assert!(out.contains("hello-pty"), "{out:?}");
            assert!(screen.text().contains("hello-pty"), "{}", screen.text());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pty_session_kill_ends_the_whole_tree_and_is_verified() {
    let registry = registry();
    let spec = RunSpec::argv([helper().into_os_string(), "tree".into(), "60".into()])
        .pty(pty_size())
        // The console's close does not end its clients under Wine 8: keep
        // the wait for the forced end short.
        .grace(Duration::from_millis(300));
    let id = registry.run(spec).await.unwrap();
    let main = pin(registry.info(id.as_str()).unwrap().pid());
    // No event announces a new job member: look every 10 ms, 10 s at most
    // (`tree` starts its grandchild at once).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let grandchild = loop {
        if let Some(d) = registry.info(id.as_str()).unwrap().descendants.first() {
            break pin(d.pid);
        }
        assert!(std::time::Instant::now() < deadline, "no grandchild");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let killed = registry
        .kill(id.as_str(), Duration::from_millis(300))
        .await
        .unwrap();
    assert_eq!(killed.descendants_killed, 1);
    assert_eq!(killed.state, tether::registry::SessionState::Killed);
    assert_dies(&main, "main on a pseudoconsole");
    assert_dies(&grandchild, "grandchild of a PTY session");
    let info = settled(&registry, id.as_str()).await;
    assert!(info.output_eof, "the output reached EOF after the kill");
    assert!(info.descendants.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_input_and_named_keys_reach_cmd_k() {
    if let Some(v) = wine() {
        eprintln!(
            "skipped under Wine {v}: a pseudoconsole child's std handles are never connected to \
             it, so cmd /k reads a NULL stdin and exits at once"
        );
        return;
    }
    let registry = registry();
    let id = registry
        .run(RunSpec::argv([cmd_exe(), "/d".into(), "/k".into()]).pty(pty_size()))
        .await
        .unwrap();
    registry
        .write(id.as_str(), b"echo typed-%OS%")
        .await
        .unwrap();
    let enter = registry.keys(id.as_str(), &["Enter"]).unwrap();
    assert_eq!(enter, b"\r");
    registry.write(id.as_str(), &enter).await.unwrap();
    let at = until(&registry, id.as_str(), 0, "typed-Windows_NT").await;
    registry.write(id.as_str(), b"exit 5\r").await.unwrap();
    let info = settled(&registry, id.as_str()).await;
    assert_eq!(info.exit.unwrap().code(), Some(5));
    assert!(at > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_stdin_on_a_pty_is_ctrl_z_enter_an_end_of_file() {
    if let Some(v) = wine() {
        eprintln!(
            "skipped under Wine {v}: typed input never reaches a pseudoconsole child there (its \
             stdin is NULL, so `cat` ends at once with nothing)"
        );
        return;
    }
    let registry = registry();
    let id = registry
        .run(RunSpec::argv([helper().into_os_string(), "cat".into()]).pty(pty_size()))
        .await
        .unwrap();
    registry.write(id.as_str(), b"line-one\r").await.unwrap();
    until(&registry, id.as_str(), 0, "line-one").await;
    registry.close_stdin(id.as_str()).unwrap();
    let info = settled(&registry, id.as_str()).await;
    assert_eq!(info.exit.unwrap().code(), Some(0), "cat saw end of file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resize_reaches_the_console_and_the_screen() {
    let registry = registry();
    let bigger = PtySize::new(40, 100).unwrap();
    if let Some(v) = wine() {
        // cmd /k ends at once there (NULL stdin): hold the console open
        // with a sleeper instead.
        let spec =
            RunSpec::argv([helper().into_os_string(), "sleep".into(), "60".into()]).pty(pty_size());
        let id = registry.run(spec).await.unwrap();
        match registry.resize(id.as_str(), bigger) {
            Err(e) => {
                eprintln!("skipped under Wine {v}: ResizePseudoConsole returns E_NOTIMPL ({e})");
                // A refused resize leaves the screen as it was.
                assert_eq!(registry.screen(id.as_str()).unwrap().size, pty_size());
            }
            Ok(()) => assert_eq!(registry.screen(id.as_str()).unwrap().size, bigger),
        }
        registry.kill(id.as_str(), Duration::ZERO).await.unwrap();
        return;
    }
    let id = registry
        .run(RunSpec::argv([cmd_exe(), "/d".into(), "/k".into()]).pty(pty_size()))
        .await
        .unwrap();
    registry.resize(id.as_str(), bigger).unwrap();
    assert_eq!(registry.screen(id.as_str()).unwrap().size, bigger);
    registry.write(id.as_str(), b"mode con\r").await.unwrap();
    until(&registry, id.as_str(), 0, r"Columns:\s+100").await;
    registry.write(id.as_str(), b"exit\r").await.unwrap();
    settled(&registry, id.as_str()).await;
}
