//! Finding the keeper program.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

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

/// Finds the keeper program. Order: `$TETHER_KEEPER`; the program set
/// with `set_keeper_program`; this program, if it called
/// `run_if_requested()`; `tether-keeper` beside this program or one
/// directory up (where cargo puts test binaries); `tether-keeper` on `PATH`.
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
    static FOUND: OnceLock<std::result::Result<PathBuf, Vec<PathBuf>>> = OnceLock::new();
    FOUND
        .get_or_init(discover)
        .clone()
        .map_err(|searched| Error::KeeperNotFound { searched })
}

fn discover() -> std::result::Result<PathBuf, Vec<PathBuf>> {
    let exe = std::env::current_exe().ok();
    if SELF_IS_KEEPER.load(Ordering::Relaxed)
        && let Some(exe) = &exe
    {
        return Ok(exe.clone());
    }
    let mut candidates = Vec::new();
    if let Some(dir) = exe.as_deref().and_then(Path::parent) {
        candidates.push(dir.join(KEEPER_BIN));
        if let Some(up) = dir.parent() {
            candidates.push(up.join(KEEPER_BIN));
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join(KEEPER_BIN)));
    }
    candidates
        .iter()
        .find(|c| c.is_file())
        .cloned()
        .ok_or(candidates)
}
