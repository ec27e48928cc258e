//! `tether::watchdog`: a helper ends when its owner dies — promptly after a
//! `SIGKILL`, never while the owner lives, never fooled or triggered by a
//! recycled pid (root, private pid namespace, `ns_last_pid`), and a
//! request in flight gets its grace, bounded.
//!
//! The helper is this test binary re-run with [`ROLE_VAR`] set (the
//! `helper_role` test), started by an owner `sh` that reads the spawn tag
//! naming itself from its stdin and exports it; the helper's stdin and
//! stdout are the test's pipes. Every process carries the test's unique
//! tag; clean-up goes by it.

#![cfg(target_os = "linux")]

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use tether::{ProcessIdentity, SpawnTag};
use tether_testkit::{TAG_VAR, TagGuard};

/// Set in the re-run test binary that plays the helper.
const ROLE_VAR: &str = "TETHER_WATCHDOG_TEST_ROLE";
/// The helper's in-flight grace, ms (default: the library's).
const GRACE_VAR: &str = "TETHER_WATCHDOG_TEST_GRACE_MS";
/// Set in the re-run test binary that runs the pid-reuse scenario as pid 1.
const PIDNS_VAR: &str = "TETHER_WATCHDOG_TEST_PIDNS";

/// Generous bound for "promptly": the benchmark measures the real latency
/// (about a millisecond); this only has to catch a watchdog that never fires.
const PROMPT: Duration = Duration::from_secs(30);

/// How long "the helper is still alive" is watched for. Nothing is
/// expected to happen, so the wait is bounded: a watchdog that fires
/// wrongly does so within a millisecond of the event that fools it (see
/// the benchmark), far inside this window.
const QUIET: Duration = Duration::from_millis(300);

// ---------------------------------------------------------------------------
// The helper.
// ---------------------------------------------------------------------------

/// The helper: starts its watchdog first thing, says `WD ready`, then
/// serves `begin` / `end` lines from stdin (a request in flight between
/// them). With a grace set it reports how it ended on stdout (the
/// callback) before exiting with status 7; without, the library's default
/// exit is used.
#[test]
fn helper_role() {
    if std::env::var_os(ROLE_VAR).is_none() {
        return; // only meaningful as the re-run helper
    }
    let watchdog = match std::env::var(GRACE_VAR) {
        Err(_) => tether::watchdog::exit_when_orphaned().expect("watchdog"),
        Ok(ms) => tether::watchdog::Builder::new()
            .grace(Duration::from_millis(ms.parse().unwrap()))
            .on_orphaned(|o| {
                say(&format!(
                    "orphaned in_flight={} abandoned={} waited_ms={}",
                    o.in_flight,
                    o.abandoned,
                    o.waited.as_millis()
                ));
                std::process::exit(7);
            })
            .start()
            .expect("watchdog"),
    };
    say(&format!("ready {}", watchdog.owner().pid));
    let mut guard = None;
    let mut line = String::new();
    while std::io::stdin().read_line(&mut line).unwrap_or(0) > 0 {
        match line.trim() {
            "begin" => guard = Some(watchdog.in_flight()),
            "end" => guard = None,
            _ => {}
        }
        say(&format!("ack {}", line.trim()));
        line.clear();
    }
    drop(guard);
    // Stdin closed while the owner lives: wait for the watchdog to act.
    loop {
        std::thread::park();
    }
}

fn say(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "WD {text}");
    let _ = out.flush();
}

// ---------------------------------------------------------------------------
// Fixtures.
// ---------------------------------------------------------------------------

/// An owner `sh` and the helper it started.
struct Pair {
    owner: Child,
    owner_id: ProcessIdentity,
    helper: u32,
    helper_fd: std::os::fd::OwnedFd,
    to_helper: ChildStdin,
    from_helper: ChildStdout,
    pending: Vec<u8>,
    /// `WD` lines read and not yet expected.
    lines: Vec<String>,
}

/// The spawn tag naming `owner` (any install: the watchdog reads only the
/// owner's pid and start time).
fn tag_naming(owner: &ProcessIdentity) -> String {
    SpawnTag::new(
        "00000000000000fe",
        "test",
        owner.pid,
        owner.start_time,
        "wdtest",
    )
    .unwrap()
    .to_string()
}

/// Starts an owner `sh` that starts the helper with a spawn tag naming
/// itself; returns once the helper said it is watching.
fn start_pair(tag: &str, grace_ms: Option<u64>) -> Pair {
    start_pair_with(tag, grace_ms, |_| {})
}

fn start_pair_with(tag: &str, grace_ms: Option<u64>, adjust: impl FnOnce(&mut Command)) -> Pair {
    let mut cmd = Command::new("/bin/sh");
    cmd.args([
        "-c",
        // An asynchronous list's stdin is /dev/null: the helper gets the
        // pipe through fd 3.
        "exec 3<&0; read tag; export TETHER_SPAWN=\"$tag\"; \"$@\" <&3 3<&- & exec 3<&-; \
         echo \"WD helper $!\"; wait",
        "sh",
    ])
    .arg(std::env::current_exe().unwrap())
    .args(["--exact", "helper_role", "--nocapture", "--test-threads=1"])
    .env(ROLE_VAR, "1")
    .env(TAG_VAR, tag)
    .env_remove(tether::SPAWN_TAG_VAR)
    .stdin(Stdio::piped())
    .stdout(Stdio::piped());
    match grace_ms {
        Some(ms) => cmd.env(GRACE_VAR, ms.to_string()),
        None => cmd.env_remove(GRACE_VAR),
    };
    adjust(&mut cmd);
    let mut owner = cmd.spawn().unwrap();
    let owner_id = ProcessIdentity::of_pid(owner.id()).unwrap();
    let mut to_helper = owner.stdin.take().unwrap();
    writeln!(to_helper, "{}", tag_naming(&owner_id)).unwrap();
    let from_helper = owner.stdout.take().unwrap();
    let mut pair = Pair {
        owner,
        owner_id,
        helper: 0,
        helper_fd: tether_testkit::pidfd(std::process::id()).unwrap(),
        to_helper,
        from_helper,
        pending: Vec::new(),
        lines: Vec::new(),
    };
    let helper: u32 = pair.expect("helper ").parse().unwrap();
    pair.helper_fd = tether_testkit::pidfd(helper).expect("helper alive");
    pair.helper = helper;
    assert_eq!(pair.expect("ready "), pair.owner_id.pid.to_string());
    pair
}

impl Pair {
    /// The rest of the first line holding `WD <prefix>` not taken yet (the
    /// test harness's own lines are skipped), within [`PROMPT`].
    fn expect(&mut self, prefix: &str) -> String {
        let want = format!("WD {prefix}");
        let deadline = Instant::now() + PROMPT;
        loop {
            while let Some(pos) = self.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=pos).collect();
                let line = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
                // The harness may have begun the line ("test helper_role ... ").
                if let Some(at) = line.find("WD ") {
                    self.lines.push(line[at..].to_owned());
                }
            }
            // Lines of the owner and the helper race each other (`WD helper`
            // may come after `WD ready`): take the first that matches, keep
            // the others.
            if let Some(i) = self.lines.iter().position(|l| l.starts_with(&want)) {
                return self.lines.remove(i)[want.len()..].to_owned();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "no {want:?} line within {PROMPT:?}");
            let mut pfd = libc::pollfd {
                fd: self.from_helper.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            if unsafe { libc::poll(&mut pfd, 1, left.as_millis() as i32) } <= 0 {
                continue; // the deadline check above ends it
            }
            let mut buf = [0u8; 4096];
            match self.from_helper.read(&mut buf) {
                Ok(0) => panic!("helper output closed before {want:?}"),
                Ok(n) => self.pending.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => panic!("{e}"),
            }
        }
    }

    fn send(&mut self, line: &str) {
        writeln!(self.to_helper, "{line}").unwrap();
        assert_eq!(self.expect("ack "), line);
    }

    /// Whether the helper exits within `bound` (on its pidfd).
    fn helper_exits_within(&self, bound: Duration) -> bool {
        exits_within(&self.helper_fd, bound)
    }

    /// SIGKILLs the owner and reaps it (its pid is free afterwards).
    fn kill_owner(&mut self) {
        self.owner.kill().unwrap();
        self.owner.wait().unwrap();
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        let _ = self.owner.kill();
        let _ = self.owner.wait();
    }
}

fn exits_within(fd: &std::os::fd::OwnedFd, bound: Duration) -> bool {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut pfd, 1, bound.as_millis() as i32) > 0 }
}

// ---------------------------------------------------------------------------
// Owner death.
// ---------------------------------------------------------------------------

#[test]
fn helper_exits_promptly_after_owner_sigkill_and_not_before() {
    let guard = TagGuard::new("wd-sigkill");
    let mut pair = start_pair(guard.tag(), None);
    assert!(
        !pair.helper_exits_within(QUIET),
        "the helper exited while its owner lives"
    );
    pair.send("ping");
    pair.kill_owner();
    assert!(
        pair.helper_exits_within(PROMPT),
        "the helper outlived its SIGKILLed owner"
    );
    assert!(tether_testkit::wait_all_dead(guard.tag(), PROMPT).is_empty());
}

#[test]
fn a_helper_whose_owner_is_already_gone_exits_at_once() {
    let guard = TagGuard::new("wd-gone");
    let mut dead = Command::new("sleep").arg("1000").spawn().unwrap();
    let dead_id = ProcessIdentity::of_pid(dead.id()).unwrap();
    dead.kill().unwrap();
    dead.wait().unwrap();
    let mut helper = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "helper_role", "--nocapture", "--test-threads=1"])
        .env(ROLE_VAR, "1")
        .env(TAG_VAR, guard.tag())
        .env(tether::SPAWN_TAG_VAR, tag_naming(&dead_id))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let fd = tether_testkit::pidfd(helper.id()).unwrap();
    assert!(
        exits_within(&fd, PROMPT),
        "kept alive by a dead owner's tag"
    );
    assert_eq!(helper.wait().unwrap().code(), Some(0), "the default exit");
}

#[test]
fn a_malformed_or_missing_tag_is_a_clear_error() {
    // In this process: the test harness's environment has no tag.
    let missing = tether::watchdog::owner_from_env();
    if std::env::var_os(tether::SPAWN_TAG_VAR).is_none() {
        assert!(matches!(
            missing,
            Err(tether::watchdog::WatchdogError::NoOwner)
        ));
    }
    let me = ProcessIdentity::current().unwrap();
    let tag = SpawnTag::new("00000000000000fe", "t", me.pid, me.start_time, "s").unwrap();
    assert!(matches!(
        tether::watchdog::owner_of_tag(&tag),
        Err(tether::watchdog::WatchdogError::OwnerIsSelf)
    ));
    let no_start = SpawnTag::new("00000000000000fe", "t", 1, 0, "s").unwrap();
    assert!(matches!(
        tether::watchdog::owner_of_tag(&no_start),
        Err(tether::watchdog::WatchdogError::Unverifiable { pid: 1 })
    ));
}

#[test]
fn the_low_level_handle_is_readable_exactly_when_the_owner_exits() {
    let mut owner = Command::new("sleep").arg("1000").spawn().unwrap();
    let id = ProcessIdentity::of_pid(owner.id()).unwrap();
    let watch = tether::watchdog::OwnerWatch::new(&id).unwrap();
    assert!(!watch.has_exited());
    let mut pfd = libc::pollfd {
        fd: watch.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd; zero timeout.
    assert_eq!(unsafe { libc::poll(&mut pfd, 1, 0) }, 0);
    owner.kill().unwrap();
    assert!(watch.wait_timeout(PROMPT).unwrap());
    // SAFETY: as above.
    assert_eq!(unsafe { libc::poll(&mut pfd, 1, 0) }, 1);
    owner.wait().unwrap();
    assert!(watch.has_exited(), "reaped: still exited");
    assert!(matches!(
        tether::watchdog::OwnerWatch::new(&id),
        Err(tether::watchdog::WatchdogError::OwnerGone { .. })
    ));
}

// ---------------------------------------------------------------------------
// In-flight grace.
// ---------------------------------------------------------------------------

#[test]
fn a_request_in_flight_is_finished_within_the_grace() {
    let guard = TagGuard::new("wd-inflight");
    let mut pair = start_pair(guard.tag(), Some(30_000));
    pair.send("begin");
    pair.kill_owner();
    assert!(
        !pair.helper_exits_within(QUIET),
        "the helper quit with a request in flight and 30 s of grace left"
    );
    // Ending the request lets the watchdog act at once — it may exit
    // before the helper acknowledges the line, so no acknowledgement is
    // awaited.
    writeln!(pair.to_helper, "end").unwrap();
    // Finished, nothing abandoned; how long it waited is a timing, left
    // to the benchmark.
    let waited = pair.expect("orphaned in_flight=1 abandoned=0 waited_ms=");
    assert!(waited.parse::<u64>().is_ok(), "{waited}");
    assert!(pair.helper_exits_within(PROMPT));
}

#[test]
fn the_in_flight_grace_is_bounded() {
    let guard = TagGuard::new("wd-bounded");
    let mut pair = start_pair(guard.tag(), Some(500));
    pair.send("begin");
    pair.kill_owner();
    let report = pair.expect("orphaned in_flight=1 abandoned=1 waited_ms=");
    let waited: u64 = report.parse().unwrap();
    assert!(waited >= 500, "acted before the grace ran out: {waited} ms");
    assert!(pair.helper_exits_within(PROMPT));
}

// ---------------------------------------------------------------------------
// Pid reuse, as root, as pid 1 of a private pid namespace (this binary
// re-run under `unshare --pid --fork --mount-proc`), where `ns_last_pid`
// decides the next pid.
// ---------------------------------------------------------------------------

#[test]
fn owner_pid_reuse_neither_fools_nor_triggers_the_watchdog() {
    if std::env::var_os(PIDNS_VAR).is_some() {
        return;
    }
    tether_testkit::run_in_private_pid_namespace("pid_reuse_inside", PIDNS_VAR);
}

/// Spawns `cmd` at pid `pid` (free, in this namespace) by setting
/// `ns_last_pid` to `pid - 1` first; nothing else forks here.
fn spawn_at(pid: u32, cmd: &mut Command) -> Child {
    for _ in 0..20 {
        std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).unwrap();
        let mut child = cmd.spawn().unwrap();
        if child.id() == pid {
            return child;
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("could not get pid {pid}");
}

fn sleeper(tag: &str) -> Command {
    let mut c = Command::new("sleep");
    c.arg("1000").env(TAG_VAR, tag).stdin(Stdio::null());
    c
}

/// Waits until every thread of `pid` is stopped. A stop is asynchronous:
/// `kill` returns once it is queued, and until each thread has taken it,
/// one that is about to return from a syscall still runs (here: the
/// watchdog thread, woken by the owner's death, exited the helper before
/// the stop reached it). A stop raises no event for a non-parent: this
/// polls the threads' states, bounded.
fn wait_stopped(pid: u32) {
    let deadline = Instant::now() + PROMPT;
    loop {
        let states: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("stat")).ok())
            .filter_map(|s| Some(s.rsplit_once(')')?.1.trim_start()[..1].to_owned()))
            .collect();
        if !states.is_empty() && states.iter().all(|s| s == "T") {
            return;
        }
        assert!(Instant::now() < deadline, "{pid} did not stop: {states:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Reaps every exited child (as pid 1 the orphaned helpers are ours).
fn reap_exited() {
    loop {
        let mut status = 0;
        // SAFETY: waitpid on any child, not blocking.
        if unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) } <= 0 {
            return;
        }
    }
}

#[test]
fn pid_reuse_inside() {
    if std::env::var_os(PIDNS_VAR).is_none() || std::process::id() != 1 {
        return; // only meaningful as pid 1 of the namespace (see above)
    }
    let guard = TagGuard::new("wd-pidns");
    let tag = guard.tag();

    // 1. Not fooled: the helper watches its owner, the owner dies and a
    //    stranger takes its pid while the helper is stopped (so it cannot
    //    have acted yet); resumed, the helper still exits — its handle is
    //    the dead owner's, not the pid's — and the stranger is untouched.
    let mut pair = start_pair(tag, None);
    let helper = tether::sys::Pinned::pin(&ProcessIdentity::of_pid(pair.helper).unwrap())
        .unwrap()
        .unwrap();
    assert!(helper.signal(libc::SIGSTOP).unwrap());
    wait_stopped(pair.helper);
    let owner_pid = pair.owner_id.pid;
    pair.kill_owner();
    let mut stranger = spawn_at(owner_pid, &mut sleeper(tag));
    let stranger_id = ProcessIdentity::of_pid(stranger.id()).unwrap();
    assert!(!stranger_id.matches(&pair.owner_id));
    assert!(helper.signal(libc::SIGCONT).unwrap());
    assert!(
        pair.helper_exits_within(PROMPT),
        "a stranger holding the dead owner's pid kept the helper alive"
    );
    assert!(stranger_id.is_alive(), "the stranger was touched");
    stranger.kill().unwrap();
    stranger.wait().unwrap();
    reap_exited();

    // 2. Not triggered: the owner itself took over a recycled pid (its
    //    previous holder is dead). The helper lives as long as the owner,
    //    and ends when it dies.
    let mut before = sleeper(tag).spawn().unwrap();
    let reused = before.id();
    before.kill().unwrap();
    before.wait().unwrap();
    let mut pair = start_pair_with(tag, None, |_| {
        std::fs::write("/proc/sys/kernel/ns_last_pid", (reused - 1).to_string()).unwrap();
    });
    assert_eq!(pair.owner_id.pid, reused, "the owner got the recycled pid");
    assert!(
        !pair.helper_exits_within(QUIET),
        "the helper of an owner on a recycled pid quit while the owner lives"
    );
    pair.send("ping");
    pair.kill_owner();
    assert!(pair.helper_exits_within(PROMPT));
    reap_exited();

    // 3. Not fooled at start: the tag names an owner that died before the
    //    helper started, and whose pid a stranger holds now.
    let mut dead = sleeper(tag).spawn().unwrap();
    let dead_id = ProcessIdentity::of_pid(dead.id()).unwrap();
    dead.kill().unwrap();
    dead.wait().unwrap();
    let mut stranger = loop {
        let s = spawn_at(dead_id.pid, &mut sleeper(tag));
        let id = ProcessIdentity::of_pid(s.id()).unwrap();
        if id.start_time != dead_id.start_time {
            break s;
        }
        // Started within the dead owner's clock tick: from the tag alone
        // (pid and start time) that is the owner — the documented limit.
        // This case is about a stranger that started later; try again
        // once the tick has passed.
        let mut s = s;
        s.kill().unwrap();
        s.wait().unwrap();
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut late = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "helper_role", "--nocapture", "--test-threads=1"])
        .env(ROLE_VAR, "1")
        .env(TAG_VAR, tag)
        .env(tether::SPAWN_TAG_VAR, tag_naming(&dead_id))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let fd = tether_testkit::pidfd(late.id()).unwrap();
    assert!(
        exits_within(&fd, PROMPT),
        "a stranger on the dead owner's pid kept a late helper alive"
    );
    assert_eq!(late.wait().unwrap().code(), Some(0));
    assert!(
        ProcessIdentity::of_pid(stranger.id()).is_ok_and(|i| i.is_alive()),
        "the stranger was touched"
    );
    stranger.kill().unwrap();
    stranger.wait().unwrap();
    reap_exited();
}
