//! Finding the keeper program.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::contain::os;
use crate::error::{Error, Result};

/// Set by [`run_if_requested`](super::keeper_entry::run_if_requested):
/// this very program can act as its own keeper.
pub(crate) static SELF_IS_KEEPER: AtomicBool = AtomicBool::new(false);

/// Name of the standalone keeper binary.
const KEEPER_BIN: &str = "tether-keeper";

/// The keeper program set by [`set_keeper_program`], ahead of discovery.
static PROGRAM: std::sync::RwLock<Option<PathBuf>> = std::sync::RwLock::new(None);

/// Uses `program` as the keeper from the next spawn on (`None`: discover
/// it again). `$TETHER_KEEPER` still wins.
pub(crate) fn set_keeper_program(program: Option<PathBuf>) {
    *PROGRAM.write().unwrap_or_else(|e| e.into_inner()) = program;
}

/// A keeper program found by discovery that refused to serve as of
/// another build of tether: discovery skips it from then on.
/// Set once (only the first discovered program can be refused), so no
/// lock a fork could catch held.
static REFUSED: OnceLock<PathBuf> = OnceLock::new();

/// `keeper` exited at once as of another build (see
/// `keeper_entry::OTHER_BUILD`): found by discovery, it is skipped from now
/// on, and `true` says to try again (with [`keeper_path`]). One set by
/// `$TETHER_KEEPER` or [`set_keeper_program`] is what was asked for: the
/// spawn fails with its error, `false`.
pub(crate) fn refuse(keeper: &Path) -> bool {
    let discovered = matches!(FOUND.get(), Some(Ok(path)) if path == keeper);
    if discovered {
        let _ = REFUSED.set(keeper.to_owned());
    }
    discovered
}

static FOUND: OnceLock<std::result::Result<PathBuf, Vec<PathBuf>>> = OnceLock::new();

/// This program's path, when discovery found it to be its own keeper:
/// named as it was then (`current_exe` names a replaced file
/// "… (deleted)" from then on).
static FOUND_SELF: OnceLock<PathBuf> = OnceLock::new();

/// Finds the keeper program. Order: `$TETHER_KEEPER`; the program set
/// with `set_keeper_program`; `tether-keeper` beside this program (a
/// small program starts faster than a large one that is its own keeper;
/// the Python wheel ships one beside `tether`) unless it refused as of
/// another build;
/// this program, if it called `run_if_requested()`; `tether-keeper` one
/// directory up (where cargo puts test binaries); `tether-keeper` on
/// `PATH`; and last this program again, started as its own keeper before
/// its `main` runs (Linux: `embedded.rs`), so that a program that links
/// tether needs neither a keeper program nor a hook in `main`.
pub(crate) fn keeper_path() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("TETHER_KEEPER").filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(Error::KeeperNotFound {
                searched: vec![path],
            })
        };
    }
    if let Some(path) = PROGRAM.read().unwrap_or_else(|e| e.into_inner()).clone() {
        return if path.is_file() {
            Ok(path)
        } else {
            Err(Error::KeeperNotFound {
                searched: vec![path],
            })
        };
    }
    let found = FOUND.get_or_init(|| discover(None));
    let found = match (found, REFUSED.get()) {
        (Ok(path), Some(refused)) if path == refused => {
            static INSTEAD: OnceLock<std::result::Result<PathBuf, Vec<PathBuf>>> = OnceLock::new();
            INSTEAD.get_or_init(|| discover(Some(refused)))
        }
        (found, _) => found,
    };
    let path = found
        .clone()
        .map_err(|searched| Error::KeeperNotFound { searched })?;
    // Found once and kept: if it is this program and its file has been
    // replaced since, the running file itself (`os::running_program`).
    if FOUND_SELF.get() == Some(&path) {
        return Ok(os::running_program(&path).unwrap_or(path));
    }
    Ok(path)
}

fn discover(refused: Option<&Path>) -> std::result::Result<PathBuf, Vec<PathBuf>> {
    let exe = std::env::current_exe().ok();
    let dir = exe.as_deref().and_then(Path::parent);
    let beside = dir.map(|dir| dir.join(KEEPER_BIN));
    if let Some(beside) = &beside
        && Some(beside.as_path()) != refused
        && beside.is_file()
    {
        return Ok(beside.clone());
    }
    if SELF_IS_KEEPER.load(Ordering::Relaxed)
        && let Some(exe) = &exe
    {
        let _ = FOUND_SELF.set(exe.clone());
        return Ok(exe.clone());
    }
    let mut candidates = Vec::new();
    candidates.extend(beside);
    if let Some(up) = dir.and_then(Path::parent) {
        candidates.push(up.join(KEEPER_BIN));
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join(KEEPER_BIN)));
    }
    if let Some(found) = candidates
        .iter()
        .find(|c| Some(c.as_path()) != refused && c.is_file())
    {
        return Ok(found.clone());
    }
    if let Some(program) = os::self_as_keeper() {
        return Ok(program);
    }
    Err(candidates)
}
