//! Warm keepers: keepers started ahead of need, each already holding its
//! lifeline and waiting for a command, so the keeper's own exec (~1.1 ms
//! here, ×2.6 a bare `/bin/true` spawn) is off the spawn path.
//!
//! Off by default (a one-shot program would start a keeper it never uses);
//! [`set_warm_keepers`] turns it on. A thread refills the pool when a take
//! leaves it below half its target, and exits once it has (an idle owner
//! has no thread of ours). A warm keeper whose owner dies exits at the lifeline EOF
//! like any other.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::fork::PerProcess;

use super::link::KeeperLink;
use crate::error::Result;

struct Pool {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    target: usize,
    keeper: Option<(PathBuf, String)>,
    idle: Vec<KeeperLink>,
    refiller: bool,
}

/// Each process's own: a child forked without `exec` starts with an empty
/// pool that is off (its parent's keepers are not its own; see `fork.rs`).
fn pool() -> &'static Pool {
    static POOL: PerProcess<Pool> = PerProcess::new();
    POOL.get(|| Pool {
        state: Mutex::new(State::default()),
    })
}

/// Keeps `n` keepers started ahead of need (0 turns the pool off and lets
/// idle keepers exit). Takes effect from the next spawn on.
///
/// Each command still gets the owner's environment, working directory and
/// stdio as of its own spawn; what it inherits from the keeper process
/// itself — umask and resource limits — is the owner's as of when that
/// keeper started.
pub fn set_warm_keepers(n: usize) {
    let pool = pool();
    let mut state = pool.state.lock().unwrap_or_else(|e| e.into_inner());
    state.target = n;
    state.idle.truncate(n);
}

/// A keeper for one spawn: a warm one if the pool has one for this keeper
/// program (`true`), else a freshly started one (`false`). A warm keeper
/// may have died while idle; the caller retries with a fresh one then.
pub(crate) fn take(keeper: &Path, tag: &str) -> Result<(KeeperLink, bool)> {
    let pool = pool();
    let mut state = pool.state.lock().unwrap_or_else(|e| e.into_inner());
    if state.target == 0 {
        drop(state);
        return Ok((KeeperLink::start(keeper, tag)?, false));
    }
    let same_keeper = state
        .keeper
        .as_ref()
        .is_some_and(|(path, _)| path == keeper);
    if !same_keeper {
        state.idle.clear();
        state.keeper = Some((keeper.to_owned(), warm_tag(tag)));
    }
    let warm = state.idle.pop();
    // Finished sessions hand their keepers back (`recycle`), which is
    // cheaper than starting new ones: refill only once the pool is down
    // to half its target. The refiller exits when it is done, so an idle
    // owner has no thread of ours (a forking host would be warned of it).
    if !state.refiller && state.idle.len() < state.target.div_ceil(2) {
        state.refiller = true;
        if std::thread::Builder::new()
            .name("tether-warm".into())
            .spawn(refill)
            .is_err()
        {
            state.refiller = false;
        }
    }
    drop(state);
    match warm {
        Some(link) => Ok((link, true)),
        None => Ok((KeeperLink::start(keeper, tag)?, false)),
    }
}

/// Takes back the keeper of a finished session (its tree is empty and it
/// waits for the next command) if the pool wants one more. `false`: the
/// caller should let it go.
pub(crate) fn recycle(link: &mut KeeperLink) -> bool {
    let pool = pool();
    let mut state = pool.state.lock().unwrap_or_else(|e| e.into_inner());
    let same_keeper = state
        .keeper
        .as_ref()
        .is_some_and(|(path, _)| path == link.path());
    if state.target == 0 || !same_keeper || state.idle.len() >= state.target {
        return false;
    }
    match link.detach() {
        Ok(fresh) => {
            state.idle.push(fresh);
            true
        }
        Err(_) => false,
    }
}

/// A warm keeper does not know its session yet: its tag says `pool`.
fn warm_tag(tag: &str) -> String {
    match tag.rsplit_once(':') {
        Some((head, _session)) => format!("{head}:pool"),
        None => tag.to_owned(),
    }
}

fn refill() {
    let pool = pool();
    let mut state = pool.state.lock().unwrap_or_else(|e| e.into_inner());
    while let Some((path, tag)) = state.keeper.clone() {
        if state.idle.len() >= state.target.div_ceil(2) {
            break;
        }
        drop(state);
        let started = KeeperLink::start(&path, &tag);
        state = pool.state.lock().unwrap_or_else(|e| e.into_inner());
        match started {
            Ok(link) if state.keeper.as_ref().is_some_and(|(p, _)| *p == path) => {
                state.idle.push(link)
            }
            Ok(_) => {}
            // Could not start one: stop refilling until the next take asks
            // again, rather than spinning on a broken keeper path.
            Err(_) => state.keeper = None,
        }
    }
    state.refiller = false;
}
