//! Warm keepers: the keepers of finished sessions, kept waiting for the
//! next command (each still holding its lifeline), so the keeper's own
//! exec (~1.1 ms here, ×2.6 a bare `/bin/true` spawn) is off the spawn
//! path of every command but the first.
//!
//! Off by default in the library (a program's last command would leave a
//! keeper behind until it exits); [`set_warm_keepers`] turns it on, and
//! the Python package does at import. Nothing here runs on a thread of
//! ours: a keeper goes back to the pool when its session ends (`recycle`)
//! and out of it at the next spawn (`take`), and while it waits no thread
//! watches it (see `KeeperLink::detach`) — an owner with only idle keepers
//! has no thread of ours, so a host that forks is not warned of one
//! (CPython 3.12+). The pool starts no keeper ahead of need on its own
//! (that would take a thread, or a keeper exec on a spawn that does not
//! need it); a program that knows a spawn is coming asks for one
//! ([`start_ahead`], `tether::start_keeper_ahead`).
//!
//! A command inherits some things from its keeper rather than from its
//! spawn request — credentials, resource limits, umask, namespaces (see
//! `inheritance.rs`). A warm keeper is handed out only while the owner's
//! are what they were when that keeper started; one started before the
//! owner dropped root, say, is let go instead of running the next command
//! as root.
//!
//! An idle keeper whose owner dies exits at the lifeline EOF like any
//! other; one that dies while idle (killed, OOM) is reaped by the next
//! spawn or session end, whichever comes first (G5), and a spawn that
//! finds its warm keeper gone retries with a fresh one (`spawn.rs`).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::fork::PerProcess;
use super::inheritance::Inheritance;
use super::link::KeeperLink;
use crate::error::Result;

/// How many keepers the pool keeps: a setting, not state, so a child
/// forked without `exec` keeps it (its pool starts empty: its parent's
/// keepers are not its own; see `fork.rs`).
static TARGET: AtomicUsize = AtomicUsize::new(0);

struct Pool {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The keeper program the idle keepers run.
    keeper: Option<PathBuf>,
    idle: Vec<KeeperLink>,
}

impl State {
    /// Reaps the idle keepers that died (no thread watches them).
    fn sweep(&mut self) {
        self.idle.retain_mut(|link| !link.exited());
    }
}

/// Each process's own: a child forked without `exec` starts with an empty
/// pool (its parent's keepers are not its own; see `fork.rs`).
fn pool() -> &'static Pool {
    static POOL: PerProcess<Pool> = PerProcess::new();
    POOL.get(|| Pool {
        state: Mutex::new(State::default()),
    })
}

/// Keeps up to `n` keepers of finished sessions for the next commands (0
/// turns the pool off and lets idle keepers exit, reaped before this
/// returns). Takes effect from the next spawn on.
///
/// Each command gets the owner's environment, working directory and stdio
/// as of its own spawn; what it inherits from the keeper process itself
/// (credentials, resource limits, umask, namespaces, …) is checked to be
/// the owner's as of this spawn before a warm keeper is used (see
/// `inheritance.rs` for what cannot be checked).
pub fn set_warm_keepers(n: usize) {
    TARGET.store(n, Ordering::SeqCst);
    let pool = pool();
    let mut state = pool.state.lock().unwrap_or_else(|e| e.into_inner());
    let keep = n.min(state.idle.len());
    let surplus = state.idle.split_off(keep);
    if state.idle.is_empty() {
        AHEAD.store(0, Ordering::SeqCst);
    }
    drop(state);
    release(surplus);
}

/// Tells idle keepers to go (EOF) and reaps them, here: an idle keeper has
/// no tree to kill and exits at once, so no reaper thread is needed.
fn release(links: Vec<KeeperLink>) {
    for mut link in links {
        link.reap();
    }
}

/// A keeper for one spawn: a warm one if the pool has one for this keeper
/// program that the owner, as it is now, would have started too (`true`),
/// else a freshly started one (`false`). A warm keeper may have died since
/// the sweep here; the caller retries with [`fresh`] then.
pub(crate) fn take(keeper: &Path, tag: &str) -> Result<(KeeperLink, bool)> {
    if TARGET.load(Ordering::SeqCst) == 0 && AHEAD.load(Ordering::SeqCst) == 0 {
        return Ok((KeeperLink::start(keeper, tag)?, false));
    }
    // Taken before the keeper starts, on this thread: what it inherits.
    let now = Inheritance::now();
    let pool = pool();
    let mut state = pool.state.lock().unwrap_or_else(|e| e.into_inner());
    state.sweep();
    let mut stale = Vec::new();
    if state.keeper.as_deref() != Some(keeper) {
        stale = std::mem::take(&mut state.idle);
        state.keeper = Some(keeper.to_owned());
    }
    // A keeper started before the owner changed what it passes on (dropped
    // privileges, a tighter limit, another umask or namespace) would give
    // its command what the owner gave up: it goes, and so do the others
    // like it (the owner rarely changes back).
    let (same, changed): (Vec<KeeperLink>, Vec<KeeperLink>) = std::mem::take(&mut state.idle)
        .into_iter()
        .partition(|link| link.inheritance.as_ref() == Some(&now));
    state.idle = same;
    stale.extend(changed);
    let warm = state.idle.pop();
    AHEAD.store(0, Ordering::SeqCst);
    drop(state);
    release(stale);
    match warm {
        Some(mut link) => {
            link.busy();
            Ok((link, true))
        }
        None => Ok((started(keeper, tag, Some(now))?, false)),
    }
}

/// Keepers started ahead of need ([`start_ahead`]) not yet taken: they
/// make the next spawn look in the pool even while it is off.
static AHEAD: AtomicUsize = AtomicUsize::new(0);

/// Starts a keeper now and parks it in the pool for the next spawn, which
/// takes it whatever [`set_warm_keepers`] says (if the owner still passes
/// on what it did now; else it is let go then). Its tag (`tag`) names the
/// session the caller gives its next command. Nothing waits for it: it
/// starts while the caller goes on. One is enough: a keeper already
/// waiting makes this do nothing.
pub(crate) fn start_ahead(keeper: &Path, tag: &str) -> Result<()> {
    let pool = pool();
    {
        let mut state = pool.state.lock().unwrap_or_else(|e| e.into_inner());
        state.sweep();
        if state.keeper.as_deref() == Some(keeper) && !state.idle.is_empty() {
            return Ok(());
        }
    }
    // Started outside the pool's lock (an exec: spawns on other threads
    // do not wait for it). Taken before the keeper starts: what it
    // inherits. Idle until a spawn takes it (`busy` then): no thread of
    // ours watches it meanwhile, as for any idle keeper.
    let now = Inheritance::now();
    let mut link = KeeperLink::start_idle(keeper, tag)?;
    link.inheritance = Some(now);
    let mut state = pool.state.lock().unwrap_or_else(|e| e.into_inner());
    let stale = if state.keeper.as_deref() != Some(keeper) {
        state.keeper = Some(keeper.to_owned());
        std::mem::take(&mut state.idle)
    } else {
        Vec::new()
    };
    state.idle.push(link);
    AHEAD.fetch_add(1, Ordering::SeqCst);
    drop(state);
    release(stale);
    Ok(())
}

/// A freshly started keeper (after a warm one turned out dead), noted for
/// the pool if it is on.
pub(crate) fn fresh(keeper: &Path, tag: &str) -> Result<KeeperLink> {
    let now = (TARGET.load(Ordering::SeqCst) > 0).then(Inheritance::now);
    started(keeper, tag, now)
}

fn started(keeper: &Path, tag: &str, inheritance: Option<Inheritance>) -> Result<KeeperLink> {
    let mut link = KeeperLink::start(keeper, tag)?;
    link.inheritance = inheritance;
    Ok(link)
}

/// Takes back the keeper of a finished session (its tree is empty and it
/// waits for the next command) if the pool wants one more. `false`: the
/// caller should let it go.
pub(crate) fn recycle(link: &mut KeeperLink) -> bool {
    let pool = pool();
    let mut state = pool.state.lock().unwrap_or_else(|e| e.into_inner());
    state.sweep();
    if state.keeper.as_deref() != Some(link.path())
        || link.inheritance.is_none()
        || state.idle.len() >= TARGET.load(Ordering::SeqCst)
    {
        return false;
    }
    match link.detach() {
        Ok(idle) => {
            state.idle.push(idle);
            true
        }
        Err(_) => false,
    }
}
