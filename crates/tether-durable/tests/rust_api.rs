//! Durable sessions from the Rust API alone: a `tether::Command` or a
//! `RunSpec` started durable outlives its owner's `SIGKILL` (a plain
//! session beside it does not), is re-adopted by name from another
//! process, and carries its settings whole — with no `tether` executable
//! anywhere: the program that links this crate is its own holder.
//!
//! Each test has a `TETHER_HOME` of its own (so a holder of its own),
//! which [`Home`]'s drop kills by pid — after which the keepers'
//! lifelines take every session it held down.

#![cfg(target_os = "linux")]

use std::io::BufRead;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tether::registry::{OutputMode, Registry, RegistryConfig, RunSpec, StdinMode};
use tether::terminal::PtySize;
use tether::{ContainmentPolicy, Install, Limits};
use tether_durable::{DurableError, DurableExt, DurableOptions, DurableRegistryExt};
use tether_testkit::{TAG_VAR, TagGuard, tagged_pids, wait_all_dead, wait_for_count};

/// A `PATH` with the tools the fixtures use and no `tether` in it.
const NO_TETHER_PATH: &str = "/usr/bin:/bin";

/// A test's own state directory, and the holder started in it.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        Home {
            dir: tempfile::Builder::new()
                .prefix("tether-durable-rust.")
                .tempdir()
                .expect("a tether home"),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn install(&self) -> Install {
        Install::at(self.path())
    }

    /// The holder's pid, from its lock file — believed only for a process
    /// started as an embedded holder (`__tether-holder`) of this very home.
    fn holder_pid(&self) -> Option<u32> {
        let text = std::fs::read_to_string(self.path().join("holder.lock")).ok()?;
        let pid: u32 = text.trim().parse().ok()?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
        let home = format!("TETHER_HOME={}", self.path().display());
        let ours = cmdline.split(|b| *b == 0).nth(1) == Some(b"__tether-holder")
            && environ.split(|b| *b == 0).any(|v| v == home.as_bytes());
        (ours && !tether_testkit::is_zombie(pid)).then_some(pid)
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        if let Some(pid) = self.holder_pid() {
            tether_testkit::sigkill(pid);
        }
    }
}

fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists() && !tether_testkit::is_zombie(pid)
}

fn this_test_binary() -> PathBuf {
    std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .unwrap()
}

/// The owner of `owner_sigkill_keeps_the_durable_session_only`: this
/// test binary run again as this one test, which starts a durable session
/// and a plain one through the Rust API only, says `ready ID`, and waits
/// to be killed. Does nothing when run any other way.
#[test]
#[ignore = "the owner process of owner_sigkill_keeps_the_durable_session_only, run by it"]
fn owner_role() {
    let (Ok(durable), Ok(plain), Ok(mark)) = (
        std::env::var("ROLE_DURABLE_TAG"),
        std::env::var("ROLE_PLAIN_TAG"),
        std::env::var("ROLE_MARK"),
    ) else {
        return;
    };
    // Prints, waits for a line on the FIFO (written once its owner is
    // dead), prints again — output nobody was attached for — and sleeps,
    // one process throughout (`read` is the shell's own, `exec`).
    let script =
        format!("echo before; read line < '{mark}'; echo \"after $line\"; exec sleep 1000");
    let session = tether::Command::shell(&script)
        .env(TAG_VAR, &durable)
        .spawn_durable(
            &DurableOptions::new()
                .name("dev")
                .ttl(Duration::from_secs(600)),
        )
        .expect("the durable session starts");
    let _plain = tether::Command::new("sleep")
        .arg("1000")
        .env(TAG_VAR, &plain)
        .spawn()
        .expect("the plain session starts");
    println!("ready {}", session.id());
    loop {
        std::thread::park();
    }
}

/// Issue 37: the owner's `SIGKILL` ends its plain session and leaves its
/// durable one running, held by the owner program's own embedded holder
/// (no `tether` on `PATH`); a new process finds it by name, reads from
/// offset 0 what it printed meanwhile, and kills it — nothing survives.
#[test]
fn owner_sigkill_keeps_the_durable_session_only() {
    let home = Home::new();
    let durable = TagGuard::new("rust-durable-kept");
    let plain = TagGuard::new("rust-durable-plain");
    // The owner carries a tag of its own, so a failing run leaves no
    // parked owner behind (the guard kills it); its sessions get theirs.
    let owner_tag = TagGuard::new("rust-durable-owner");
    let mark = home.path().join("fifo");
    let status = std::process::Command::new("mkfifo")
        .arg(&mark)
        .status()
        .unwrap();
    assert!(status.success());
    for dir in std::env::split_paths(NO_TETHER_PATH) {
        assert!(
            !dir.join("tether").exists(),
            "{} has a tether",
            dir.display()
        );
    }
    let mut owner = std::process::Command::new(this_test_binary())
        .args([
            "owner_role",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("TETHER_HOME", home.path())
        .env("PATH", NO_TETHER_PATH)
        .env(TAG_VAR, owner_tag.tag())
        .env("ROLE_DURABLE_TAG", durable.tag())
        .env("ROLE_PLAIN_TAG", plain.tag())
        .env("ROLE_MARK", &mark)
        .env_remove(tether::SPAWN_TAG_VAR)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the owner starts");
    let id = std::io::BufReader::new(owner.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        // libtest's `test owner_role ... ` precedes it on the line.
        .find_map(|line| line.split_once("ready ").map(|(_, id)| id.to_owned()))
        .expect("the owner started both sessions");
    assert!(wait_for_count(plain.tag(), 1, Duration::from_secs(20)) >= 1);
    let kept = tagged_pids(durable.tag());
    assert_eq!(kept.len(), 1, "the durable session runs: {kept:?}");

    // The holder is the owner's own program, started as one.
    let holder = home.holder_pid().expect("an embedded holder of this home");
    assert_eq!(
        std::fs::read_link(format!("/proc/{holder}/exe")).unwrap(),
        this_test_binary()
    );

    owner.kill().unwrap(); // SIGKILL
    owner.wait().unwrap();
    assert!(
        wait_all_dead(plain.tag(), Duration::from_secs(15)).is_empty(),
        "the plain session outlived its owner's SIGKILL"
    );
    assert!(
        kept.iter().copied().all(pid_alive),
        "the durable session died with its owner"
    );

    std::fs::write(&mark, b"meanwhile\n").unwrap();
    // A new process (this one) re-adopts it by name.
    let install = home.install();
    let mut session = tether_durable::attach(&install, "dev").expect("attach by name");
    assert_eq!(session.id(), id);
    assert_eq!(session.name(), Some("dev"));
    let waited = session
        .wait(Duration::from_secs(20), Some("^after"))
        .unwrap();
    assert_eq!(waited.outcome, "matched");
    let read = session.read(0, 1 << 16, Duration::ZERO).unwrap();
    assert_eq!((read.offset, read.dropped), (0, 0));
    assert_eq!(
        String::from_utf8_lossy(&read.data),
        "before\nafter meanwhile\n"
    );
    let listed = tether_durable::list(&install).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name.as_deref(), Some("dev"));
    assert_eq!(listed[0].status, "running");
    assert_eq!(listed[0].owner.as_ref().map(|o| o.pid), Some(owner.id()));
    assert!(listed[0].ttl_s == 600 && listed[0].ttl_left_s <= 600);

    let killed = session.kill(Some(Duration::from_millis(500))).unwrap();
    assert_eq!(killed.status, "killed");
    assert!(
        wait_all_dead(durable.tag(), Duration::from_secs(10)).is_empty(),
        "the durable session survived its kill"
    );
}

/// What a `tether::Command` says reaches the session: environment (here
/// cleared and set), working directory, PTY and its size, limits, purpose,
/// stdin written through the handle — and a Command's default of killing
/// what the main process leaves behind when it exits.
#[test]
fn a_command_is_carried_whole() {
    let home = Home::new();
    let guard = TagGuard::new("rust-durable-carried");
    let cwd = tempfile::tempdir().unwrap();
    let cwd = std::fs::canonicalize(cwd.path()).unwrap();
    let mut session = tether::Command::shell(
        "echo \"$GREETING from $(pwd)\"; [ -t 0 ] && echo on-a-tty; \
         echo \"home=${HOME-unset}\"; setsid sleep 1000 & echo started; read line; echo \"got $line\"",
    )
    .env_clear()
    .env("PATH", NO_TETHER_PATH)
    .env("GREETING", "hello")
    .env(TAG_VAR, guard.tag())
    .current_dir(&cwd)
    .pty(PtySize::new(30, 100).unwrap())
    .limits(Limits::new().pids(64))
    .purpose("dev-server")
    .install(home.install())
    .spawn_durable(&DurableOptions::new())
    .expect("starts");
    let waited = session
        .wait(Duration::from_secs(20), Some("started"))
        .unwrap();
    assert_eq!(waited.outcome, "matched");
    // The main process and its setsid sleep, both tagged as asked.
    assert!(wait_for_count(guard.tag(), 2, Duration::from_secs(10)) >= 2);
    for pid in tagged_pids(guard.tag()) {
        let tag = tether::sys::spawn_tag(pid).expect("a spawn tag");
        assert_eq!(tag.purpose, "dev-server");
        assert_eq!(tag.install, home.install().id());
    }
    let screen = session.screen().unwrap();
    assert_eq!((screen.rows, screen.cols), (30, 100));
    let info = session.info().unwrap();
    assert!(info.limits.contains("pids 64"), "{}", info.limits);
    session.write(b"hi\n").unwrap();
    let waited = session.wait(Duration::from_secs(20), None).unwrap();
    assert_eq!(
        (waited.outcome.as_str(), waited.exit_code),
        ("exited", Some(0))
    );
    let out = session.read(0, 1 << 16, Duration::ZERO).unwrap();
    let out = String::from_utf8_lossy(&out.data);
    assert!(
        out.contains(&format!("hello from {}", cwd.display())),
        "{out}"
    );
    assert!(out.contains("on-a-tty"), "{out}");
    assert!(out.contains("home=unset"), "{out}");
    assert!(out.contains("got hi"), "{out}");
    assert!(
        wait_all_dead(guard.tag(), Duration::from_secs(10)).is_empty(),
        "the setsid sleep outlived the main process (a Command kills it)"
    );
}

/// A Command's timeout reaches the holder: the session ends `timed_out`.
#[test]
fn a_command_timeout_is_carried() {
    let home = Home::new();
    let guard = TagGuard::new("rust-durable-timeout");
    let mut session = tether::Command::new("sleep")
        .arg("1000")
        .env(TAG_VAR, guard.tag())
        .timeout(Duration::from_millis(200))
        .grace(Duration::from_millis(100))
        .install(home.install())
        .spawn_durable(&DurableOptions::new())
        .expect("starts");
    let waited = session.wait(Duration::from_secs(20), None).unwrap();
    assert_eq!(waited.status, "timed_out");
    assert!(wait_all_dead(guard.tag(), Duration::from_secs(10)).is_empty());
}

/// `run_durable` beside a Registry: the session is the holder's, so it
/// outlives the registry's shutdown, and a RunSpec's defaults hold (stdin
/// null unless asked; descendants kept after the main process exits).
#[test]
fn a_registry_spec_outlives_the_registry() {
    let home = Home::new();
    let guard = TagGuard::new("rust-durable-registry");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut session = runtime.block_on(async {
        let registry = Registry::new(RegistryConfig::default());
        let session = registry
            .run_durable(
                RunSpec::shell("sleep 1000 & echo up")
                    .env(TAG_VAR, guard.tag())
                    .install(home.install()),
                DurableOptions::new().name("kept-by-holder"),
            )
            .await
            .expect("starts");
        registry.shutdown().await.unwrap();
        session
    });
    drop(runtime);
    let waited = session.wait(Duration::from_secs(20), None).unwrap();
    assert_eq!(waited.outcome, "exited");
    // The main process exited; its background sleep runs on, held.
    let left = tagged_pids(guard.tag());
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(pid_alive(left[0]));
    assert!(session.write(b"x").is_err(), "stdin is the null device");
    session.kill(None).unwrap();
    assert!(wait_all_dead(guard.tag(), Duration::from_secs(10)).is_empty());
}

/// What a session cannot carry is an error naming it, before any holder
/// or command starts; unknown sessions and missing holder programs are
/// clear errors too.
#[test]
fn what_cannot_be_carried_is_refused_before_anything_starts() {
    let home = Home::new();
    let refused = |command: &mut tether::Command| match command
        .install(home.install())
        .spawn_durable(&DurableOptions::new())
    {
        Err(DurableError::Command(e)) => e.to_string(),
        other => panic!("expected a Command error, got {other:?}"),
    };
    let mut command = tether::Command::new("true");
    assert!(refused(command.stdout(tether::Stdio::Null)).contains("stdout"));
    let mut command = tether::Command::new("true");
    assert!(refused(command.containment(ContainmentPolicy::PidNamespace)).contains("containment"));
    let mut command = tether::Command::new("true");
    assert!(refused(command.session_id(tether::SessionId::generate())).contains("session id"));
    let not_utf8 =
        RunSpec::argv([std::ffi::OsStr::from_bytes(b"tr\xffue")]).install(home.install());
    assert!(matches!(
        tether_durable::start(&not_utf8, &DurableOptions::new()),
        Err(DurableError::Command(e)) if e.to_string().contains("UTF-8")
    ));
    assert!(
        !home.path().join("holder.lock").exists(),
        "a holder was started for a refused command"
    );

    // No holder runs and the one named is not there.
    let missing = tether_durable::start(
        &RunSpec::argv(["true"])
            .stdin(StdinMode::Piped)
            .install(home.install()),
        &DurableOptions::new().holder_program("/nonexistent/tether"),
    );
    assert!(
        matches!(&missing, Err(DurableError::HolderStart(m)) if m.contains("/nonexistent/tether")),
        "{missing:?}"
    );
    assert!(matches!(
        tether_durable::attach(&home.install(), "nobody"),
        Err(DurableError::UnknownSession(_))
    ));
    assert!(tether_durable::list(&home.install()).unwrap().is_empty());
}

/// `OutputMode::Separate` is carried: stdout and stderr are read apart,
/// and closing stdin ends a program that reads it to the end.
#[test]
fn stderr_apart_and_the_end_of_input_are_carried() {
    let home = Home::new();
    let guard = TagGuard::new("rust-durable-separate");
    let spec = RunSpec::shell("echo out; echo err >&2; cat >/dev/null; echo done")
        .output(OutputMode::Separate)
        .stdin(StdinMode::Piped)
        .env(TAG_VAR, guard.tag())
        .install(home.install());
    let mut session = tether_durable::start(&spec, &DurableOptions::new()).expect("starts");
    let waited = session
        .wait(Duration::from_secs(20), Some("^out$"))
        .unwrap();
    assert_eq!(waited.outcome, "matched", "{waited:?}");
    session.close_stdin().unwrap();
    let waited = session.wait(Duration::from_secs(20), None).unwrap();
    assert_eq!(waited.outcome, "exited", "{waited:?}");
    let out = session.read(0, 1 << 16, Duration::ZERO).unwrap();
    assert_eq!(out.data, b"out\ndone\n");
    let err = session.read_stderr(0, 1 << 16).unwrap();
    assert_eq!(err.data, b"err\n");
    assert!(wait_all_dead(guard.tag(), Duration::from_secs(10)).is_empty());
}

/// A write to a session whose command closed its stdin is an error for
/// that write, not the embedded holder's death by `SIGPIPE` (it runs
/// before Rust's start-up, which ignores the signal): every other session
/// it holds lives on.
#[test]
fn a_write_to_a_closed_stdin_does_not_kill_the_embedded_holder() {
    let home = Home::new();
    let guard = TagGuard::new("rust-durable-sigpipe");
    let start = |script: &str| {
        let spec = RunSpec::shell(script)
            .stdin(StdinMode::Piped)
            .env(TAG_VAR, guard.tag())
            .install(home.install());
        tether_durable::start(&spec, &DurableOptions::new()).expect("starts")
    };
    let mut bystander = start("sleep 1000");
    let mut closer = start("exec 0<&-; echo closed; sleep 1000");
    let holder = closer.holder_pid();
    let waited = closer
        .wait(Duration::from_secs(20), Some("^closed$"))
        .unwrap();
    assert_eq!(waited.outcome, "matched", "{waited:?}");
    // The holder may write before it learns the pipe is gone: a few tries.
    for _ in 0..3 {
        let _ = closer.write(b"hi\n");
    }
    assert!(
        pid_alive(holder),
        "the holder died writing to a closed stdin"
    );
    assert_eq!(bystander.info().unwrap().status, "running");
    bystander.kill(None).unwrap();
    closer.kill(None).unwrap();
    assert!(wait_all_dead(guard.tag(), Duration::from_secs(10)).is_empty());
}

/// A start sends this process's environment, so it goes only to a holder
/// in a state directory proven this user's — also when a holder already
/// answers there: once the directory is writable by others (anyone could
/// have replaced the socket), a start is refused before anything is sent.
#[test]
fn a_start_sends_nothing_through_an_untrusted_state_directory() {
    use std::os::unix::fs::PermissionsExt;
    let home = Home::new();
    let guard = TagGuard::new("rust-durable-statedir");
    let spec = || {
        RunSpec::argv(["sleep", "1000"])
            .env(TAG_VAR, guard.tag())
            .install(home.install())
    };
    let mut first = tether_durable::start(&spec(), &DurableOptions::new()).expect("starts");
    let mode = |m| std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(m));
    mode(0o777).unwrap();
    let refused = tether_durable::start(&spec(), &DurableOptions::new());
    mode(0o700).unwrap();
    assert!(
        matches!(refused, Err(DurableError::StateDir(_))),
        "{refused:?}"
    );
    assert_eq!(tether_durable::list(&home.install()).unwrap().len(), 1);
    first.kill(None).unwrap();
    assert!(wait_all_dead(guard.tag(), Duration::from_secs(10)).is_empty());
}
