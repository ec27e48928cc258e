//! What is left when a keeper dies before reporting its tree empty: its
//! orphans, killed by the owner.
//!
//! Where they go: to the nearest subreaper above the keeper — this process,
//! if it called [`become_subreaper`] (the `tether` CLI and `tether mcp` do)
//! — or to init. Two ways find them, and every kill is preceded by proof
//! through a held handle:
//!
//! - **adopted children** (only when this process is a subreaper): every
//!   child of ours that is not a keeper of ours came from a keeper's tree —
//!   such a process starts processes only through tether, by contract of
//!   [`become_subreaper`] — tagged or not (a process that ran `env -i` has
//!   no tag, and is killed all the same);
//! - **the session's tag**, for orphans that went to init (or to another
//!   subreaper): every process whose spawn tag names the session.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::contain::sys::{self, Pinned};

/// Set once this process is a child subreaper through [`become_subreaper`].
static SUBREAPER: AtomicBool = AtomicBool::new(false);

/// Makes this process a child subreaper (Linux; elsewhere a no-op, and
/// its children are never taken for orphans).
pub(crate) fn become_subreaper() -> std::io::Result<()> {
    if crate::contain::os::set_child_subreaper()? {
        SUBREAPER.store(true, Ordering::SeqCst);
    }
    Ok(())
}

/// Durable-session holders this process adopted (they were started
/// detached from one of its requests and re-parented to it, a subreaper):
/// not orphans of a keeper, never killed as such — killing one would end
/// every durable session it holds.
static SPARED: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

/// Spares `pid` (a holder that is our child) from [`kill_orphans`], and
/// reaps it when it exits, on a thread of its own, so an idle holder's exit
/// leaves no zombie under a long-lived subreaper (`tether mcp`).
pub(crate) fn spare_holder(pid: u32) {
    if !sys::process(pid).is_ok_and(|p| p.ppid == std::process::id()) {
        return;
    }
    let mut spared = SPARED.lock().unwrap_or_else(|e| e.into_inner());
    if spared.contains(&pid) {
        return;
    }
    spared.push(pid);
    drop(spared);
    let _ = std::thread::Builder::new()
        .name("tether-holder-reap".into())
        .spawn(move || {
            let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid as i32), None);
            SPARED
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|p| *p != pid);
        });
}

fn is_spared(pid: u32) -> bool {
    SPARED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains(&pid)
}

/// How long a cleanup keeps trying before it gives up on a process that
/// survives SIGKILL (uninterruptible sleep).
const GIVE_UP: Duration = Duration::from_secs(5);

/// Kills the orphans of the lost keeper of `session` (see the module docs),
/// round after round until none is left — a process forked during the
/// cleanup is found in the next round. Returns how many were killed.
pub(crate) fn kill_orphans(session: &str) -> usize {
    let me = std::process::id();
    let mut killed: HashSet<(u32, u64)> = HashSet::new();
    let give_up = Instant::now() + GIVE_UP;
    loop {
        let mut round: Vec<(Pinned, bool)> = Vec::new();
        if SUBREAPER.load(Ordering::SeqCst) {
            for pid in sys::children(me) {
                if super::link::is_keeper(pid) || is_spared(pid) {
                    continue;
                }
                let Some(pin) = pin(pid) else { continue };
                // Re-checked through the pin: still our child, so it came
                // from a keeper's tree (see above).
                if sys::process(pid).is_ok_and(|p| p.ppid == me) && pin.kill().unwrap_or(false) {
                    round.push((pin, true));
                }
            }
        }
        for pid in sys::all_pids() {
            if sys::spawn_tag(pid).is_none_or(|t| t.session != session) || pid == me {
                continue;
            }
            let Some(pin) = pin(pid) else { continue };
            // Re-read through the pin: the pid may have been recycled
            // between the scan and the pin.
            if pin.spawn_tag().is_some_and(|t| t.session == session) && pin.kill().unwrap_or(false)
            {
                let ours = sys::process(pid).is_ok_and(|p| p.ppid == me);
                round.push((pin, ours));
            }
        }
        if round.is_empty() {
            return killed.len();
        }
        for (pin, _) in &round {
            let id = pin.identity();
            killed.insert((id.pid, id.start_time));
        }
        // Wait for the deaths just caused (SIGKILL is prompt), then reap
        // those that are our children (init reaps the others).
        let pins: Vec<&Pinned> = round.iter().map(|(p, _)| p).collect();
        sys::wait_exited(&pins, Duration::from_millis(100));
        for (pin, ours) in &round {
            if *ours {
                let _ = nix::sys::wait::waitpid(
                    nix::unistd::Pid::from_raw(pin.identity().pid as i32),
                    Some(nix::sys::wait::WaitPidFlag::WNOHANG),
                );
            }
        }
        if Instant::now() >= give_up {
            return killed.len();
        }
    }
}

fn pin(pid: u32) -> Option<Pinned> {
    let identity = sys::identity_of(pid).ok()?;
    Pinned::pin(&identity).ok().flatten()
}
