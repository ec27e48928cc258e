//! `tether init`: no zombies left from 100 double-forked children, each
//! forwarded signal reaches the program's process group, exit codes
//! propagate (128+N for signal N), and what the program leaves behind is
//! killed with the ladder (`SIGTERM` first, `SIGKILL` after the grace).
//!
//! Every scenario runs twice: as PID 1 of a fresh pid namespace (`unshare
//! --pid --fork --mount-proc`, root), where it is a container's init; and
//! as an ordinary process, where it is a child subreaper.

#![cfg(target_os = "linux")]

mod support;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::{read_line_bounded, tether};
use tether_testkit::{TAG_VAR, TagGuard, tagged_pids};

/// Where `tether init` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// PID 1 of a private pid namespace with its own /proc (root).
    Pid1,
    /// An ordinary process (a child subreaper).
    Subreaper,
}

/// Whether `mode` can run here (PID 1 needs root and unshare(1)).
fn available(mode: Mode) -> bool {
    match mode {
        Mode::Subreaper => true,
        Mode::Pid1 => {
            tether_testkit::require_root("tether init as PID 1 of a pid namespace")
                && tether_testkit::require(
                    Command::new("unshare")
                        .arg("--version")
                        .output()
                        .is_ok_and(|o| o.status.success()),
                    "no unshare(1) (util-linux)",
                )
        }
    }
}

/// `tether init --grace 500ms -- ARGS`, as `mode` says, tagged.
fn init(mode: Mode, tag: &str, args: &[&str]) -> Command {
    let mut cmd = match mode {
        Mode::Subreaper => tether(),
        Mode::Pid1 => {
            let mut c = Command::new("unshare");
            c.args(["--pid", "--fork", "--mount-proc"])
                .arg(env!("CARGO_BIN_EXE_tether"))
                .env("TETHER_HOME", support::home());
            c
        }
    };
    cmd.args(["init", "--grace", "500ms", "--"])
        .args(args)
        .env(TAG_VAR, tag)
        .env_remove(tether::SPAWN_TAG_VAR);
    cmd
}

/// The `tether init` process of a started `init` command (the child of
/// `unshare` in PID 1 mode).
fn init_pid(mode: Mode, child: &Child) -> u32 {
    match mode {
        Mode::Subreaper => child.id(),
        Mode::Pid1 => {
            let kids = tether::sys::children(child.id());
            assert_eq!(kids.len(), 1, "unshare --fork has one child");
            kids[0]
        }
    }
}

// ---------------------------------------------------------------------------
// Zombies.
// ---------------------------------------------------------------------------

/// 100 double-forked children: each intermediate exits at once, so the
/// grandchild is orphaned to init, then exits itself 0.2 s later. The
/// program waits until none of the 100 is still a child of init (alive or
/// zombie: an unreaped one would stay forever), bounded at 20 s, and prints
/// how many were left.
const DOUBLE_FORKS: &str = r#"
import os, time
r, w = os.pipe()
for i in range(100):
    pid = os.fork()
    if pid == 0:
        g = os.fork()
        if g == 0:
            os.close(r); os.close(w)
            time.sleep(0.2)
            os._exit(0)
        os.write(w, b"%d\n" % g)
        os._exit(0)
    os.waitpid(pid, 0)
os.close(w)
data = b""
while True:
    chunk = os.read(r, 65536)
    if not chunk:
        break
    data += chunk
pids = [int(x) for x in data.split()]
init = os.getppid()
def children_of_init():
    left = []
    for p in pids:
        try:
            with open("/proc/%d/stat" % p) as f:
                rest = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(rest[1]) == init:
            left.append(rest[0])
    return left
# Reaping by another process raises no event here: poll, bounded.
deadline = time.time() + 20
left = children_of_init()
while left and time.time() < deadline:
    time.sleep(0.02)
    left = children_of_init()
print("forked %d left %d zombies %d" % (len(pids), len(left), left.count("Z")), flush=True)
"#;

fn no_zombies_from_double_forks(mode: Mode) {
    if !available(mode) {
        return;
    }
    let guard = TagGuard::new("init-zombies");
    let out = init(mode, guard.tag(), &["python3", "-c", DOUBLE_FORKS])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.trim(),
        "forked 100 left 0 zombies 0",
        "{mode:?}: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{mode:?}");
}

#[test]
fn no_zombies_from_100_double_forked_children_as_pid1() {
    no_zombies_from_double_forks(Mode::Pid1);
}

#[test]
fn no_zombies_from_100_double_forked_children_as_subreaper() {
    no_zombies_from_double_forks(Mode::Subreaper);
}

// ---------------------------------------------------------------------------
// Signals.
// ---------------------------------------------------------------------------

/// Reports every signal it gets, and so does a child in its process group;
/// exits 3 once the program itself got all seven. The signals are blocked
/// and taken with `sigwaitinfo`: a Python handler waiting in
/// `signal.pause()` misses a signal that lands between its last check and
/// the `pause(2)` call (it reports it only at the next signal), and the
/// test then waited in vain (seen once in CI).
const SIGNAL_REPORTER: &str = r#"
import os, signal, sys
names = ["SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGWINCH"]
sigs = {getattr(signal, n) for n in names}
# Before the fork: the member inherits the mask, and nothing sent after
# "ready" can be lost or act by default.
signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
def take(who):
    name = signal.Signals(signal.sigwaitinfo(sigs).si_signo).name
    os.write(1, ("%s got %s\n" % (who, name)).encode())
    return name
r, w = os.pipe()
if os.fork() == 0:
    os.write(w, b"x")
    while True:
        take("member")
os.read(r, 1)
os.write(1, b"ready\n")
got = set()
while len(got) < len(names):
    got.add(take("program"))
sys.exit(3)
"#;

fn each_signal_reaches_the_group(mode: Mode) {
    if !available(mode) {
        return;
    }
    let guard = TagGuard::new("init-signals");
    let mut child = init(mode, guard.tag(), &["python3", "-c", SIGNAL_REPORTER])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pending = Vec::new();
    let ready = read_line_bounded(
        child.stdout.as_mut().unwrap(),
        &mut pending,
        Duration::from_secs(20),
    );
    assert_eq!(ready.as_deref(), Some("ready"), "{mode:?}");
    let target = init_pid(mode, &child);
    let init_id = tether::ProcessIdentity::of_pid(target).unwrap();
    for sig in [
        libc::SIGTERM,
        libc::SIGINT,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGWINCH,
    ] {
        assert!(tether::sys::signal_if_identity(&init_id, sig).unwrap());
        let mut seen = Vec::new();
        while seen.len() < 2 {
            let l = read_line_bounded(
                child.stdout.as_mut().unwrap(),
                &mut pending,
                Duration::from_secs(20),
            )
            .unwrap_or_else(|| panic!("{mode:?}: signal {sig} never reported ({seen:?})"));
            seen.push(l);
        }
        seen.sort();
        let name = signal_name(sig);
        assert_eq!(
            seen,
            [format!("member got {name}"), format!("program got {name}")],
            "{mode:?}"
        );
    }
    let status = child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(3),
        "{mode:?}: the program's own exit code"
    );
    assert!(
        tagged_pids(guard.tag()).is_empty(),
        "{mode:?}: the member outlived init"
    );
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGHUP => "SIGHUP",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGWINCH => "SIGWINCH",
        _ => "?",
    }
}

#[test]
fn each_forwarded_signal_reaches_the_program_group_as_pid1() {
    each_signal_reaches_the_group(Mode::Pid1);
}

#[test]
fn each_forwarded_signal_reaches_the_program_group_as_subreaper() {
    each_signal_reaches_the_group(Mode::Subreaper);
}

// ---------------------------------------------------------------------------
// Exit codes.
// ---------------------------------------------------------------------------

fn exit_codes_propagate(mode: Mode) {
    if !available(mode) {
        return;
    }
    let guard = TagGuard::new("init-exit");
    for (script, code) in [
        ("exit 0", 0),
        ("exit 7", 7),
        ("kill -TERM $$", 128 + libc::SIGTERM),
        ("kill -KILL $$", 128 + libc::SIGKILL),
    ] {
        let status = init(mode, guard.tag(), &["/bin/sh", "-c", script])
            .stdin(Stdio::null())
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(code), "{mode:?}: {script}");
    }
    let out = init(mode, guard.tag(), &["/nonexistent/program"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127), "{mode:?}");
}

#[test]
fn exit_codes_propagate_as_pid1() {
    exit_codes_propagate(Mode::Pid1);
}

#[test]
fn exit_codes_propagate_as_subreaper() {
    exit_codes_propagate(Mode::Subreaper);
}

// ---------------------------------------------------------------------------
// Leftovers.
// ---------------------------------------------------------------------------

fn leftovers_are_killed(mode: Mode) {
    if !available(mode) {
        return;
    }
    let guard = TagGuard::new("init-leftovers");
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("term");
    // A leftover that reports its SIGTERM (proof of the ladder's first
    // rung: a namespace teardown would SIGKILL it), one in its own session
    // ignoring SIGTERM (needs SIGKILL), and a double-forked daemon.
    // The main process exits once both traps are set (each touches a file
    // then; bounded at ~10 s of polling).
    let script = format!(
        "(trap 'echo got-term > {m}; exit 0' TERM; touch {m}.armed1; while :; do sleep 0.05; done) & \
         setsid sh -c 'trap \"\" TERM; touch {m}.armed2; while :; do sleep 0.05; done' & \
         (setsid sleep 1000 &) ; \
         i=0; while [ ! -e {m}.armed1 ] || [ ! -e {m}.armed2 ]; do \
           i=$((i + 1)); [ $i -lt 1000 ] || break; sleep 0.01; done; \
         echo ready; exit 5",
        m = marker.display()
    );
    let out = init(mode, guard.tag(), &["/bin/sh", "-c", &script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{mode:?}: {stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ready\n");
    // init returns only after verifying its tree is gone.
    assert!(
        tagged_pids(guard.tag()).is_empty(),
        "{mode:?}: leftovers outlived init: {:?}",
        tagged_pids(guard.tag())
    );
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap_or_default(),
        "got-term\n",
        "{mode:?}: the leftover never got SIGTERM first"
    );
    assert!(stderr.contains("needed SIGKILL"), "{mode:?}: {stderr}");
    assert!(!stderr.contains(" 0 needed SIGKILL"), "{mode:?}: {stderr}");
    assert!(stderr.contains("0 survived"), "{mode:?}: {stderr}");
}

#[test]
fn leftovers_are_killed_after_the_program_exits_as_pid1() {
    leftovers_are_killed(Mode::Pid1);
}

#[test]
fn leftovers_are_killed_after_the_program_exits_as_subreaper() {
    leftovers_are_killed(Mode::Subreaper);
}
