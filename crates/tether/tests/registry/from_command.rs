//! A `tether::Command` as a registry session (`RunSpec::try_from`, what
//! a durable session is started from): its settings reach the processes —
//! environment, purpose, install — and so does a Command's default of
//! killing what the main process leaves behind at its exit; what a session
//! cannot carry is refused, not dropped.

use std::time::Duration;

use crate::support::{BOUND, read_all, registry, settled};
use tether::registry::{RunSpec, WaitOptions, WaitOutcome};
use tether_testkit::{TAG_VAR, TagGuard, tagged_pids, wait_all_dead, wait_for_count};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_runs_as_a_session_with_its_settings() {
    let guard = TagGuard::new("registry-from-command");
    let home = tempfile::tempdir().unwrap();
    let install = tether::Install::at(home.path());
    let spec = RunSpec::try_from(
        tether::Command::shell("echo \"$GREETING\"; setsid sleep 1000 & echo started; read line")
            .env("GREETING", "hello")
            .env(TAG_VAR, guard.tag())
            .purpose("from-command")
            .grace(Duration::from_millis(200))
            .install(install.clone()),
    )
    .unwrap();
    let registry = registry();
    let id = registry.run(spec).await.unwrap();
    let started = registry
        .wait(id.as_str(), WaitOptions::new(BOUND).until("started"))
        .await
        .unwrap();
    assert!(matches!(started.outcome, WaitOutcome::Matched { .. }));
    assert!(wait_for_count(guard.tag(), 2, BOUND) >= 2);
    for pid in tagged_pids(guard.tag()) {
        let tag = tether::sys::spawn_tag(pid).expect("a spawn tag");
        assert_eq!(tag.purpose, "from-command");
        assert_eq!(tag.install, install.id());
    }
    // Stdin is a pipe (a Command's unset stdin): the line ends the shell.
    registry.write(id.as_str(), b"\n").await.unwrap();
    settled(&registry, id.as_str()).await;
    assert_eq!(read_all(&registry, id.as_str()), b"hello\nstarted\n");
    assert!(
        wait_all_dead(guard.tag(), Duration::from_secs(10)).is_empty(),
        "the setsid sleep outlived the main process (a Command kills it)"
    );
}

#[test]
fn what_a_session_cannot_carry_is_refused() {
    let refused = |command: &tether::Command| match RunSpec::try_from(command) {
        Err(tether::Error::InvalidInput { what, reason }) => {
            assert_eq!(what, "command");
            reason
        }
        other => panic!("expected InvalidInput, got {other:?}"),
    };
    let mut command = tether::Command::new("true");
    assert!(refused(command.stdout(tether::Stdio::Inherit)).contains("stdout"));
    let mut command = tether::Command::new("true");
    assert!(refused(command.stdin(tether::Stdio::Inherit)).contains("stdin"));
    let mut command = tether::Command::new("true");
    assert!(refused(command.foreground(true)).contains("foreground"));
    let mut command = tether::Command::new("true");
    use tether::unix::CommandExt;
    assert!(refused(command.new_session(true)).contains("new_session"));
}
