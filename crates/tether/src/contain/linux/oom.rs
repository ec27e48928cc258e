//! The OOM killer's order: session processes before their owner.
//!
//! Every process of a session has `oom_score_adj` 1000 — the kernel's
//! first choice when memory runs out, machine-wide or in a cgroup — while
//! owner and keeper keep theirs. Raising it needs no privilege. The keeper
//! raises its own value around the spawn, so the command inherits it from
//! its first instruction whichever way it is started (the vfork clone, fork,
//! the namespace init), then lowers it back: lowering to a value the
//! process had needs no privilege either (the kernel's floor is
//! `oom_score_adj_min`, which only a privileged write sets).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::OnceLock;

/// What every session process gets: the OOM killer's first choice.
pub(crate) const SESSION_OOM_SCORE_ADJ: i32 = 1000;

/// This process's `/proc/self/oom_score_adj`, opened for reading and
/// writing by [`hold_own`] while the keeper is still dumpable.
static OWN: OnceLock<Option<File>> = OnceLock::new();

/// Opens this process's `oom_score_adj` and keeps it for [`OomPriority`].
/// The keeper calls it before it makes itself non-dumpable: a
/// non-dumpable process's `/proc/self` files belong to root, so an
/// unprivileged keeper could no longer open its own (`EACCES`), and its
/// sessions kept its owner's value (0 here, found by `tether doctor` as
/// uid 61717). An open descriptor stays writable: the kernel checks the
/// file's permissions at open, and a write only against
/// `oom_score_adj_min`.
pub(crate) fn hold_own() {
    OWN.get_or_init(open_own);
}

fn open_own() -> Option<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/proc/self/oom_score_adj")
        .ok()
}

/// The keeper's raised `oom_score_adj`, lowered back when dropped.
pub(crate) struct OomPriority {
    restore: Option<i32>,
}

impl OomPriority {
    /// Raises this process's `oom_score_adj` to [`SESSION_OOM_SCORE_ADJ`]
    /// for what it starts next, through the descriptor [`hold_own`] opened
    /// (or one opened now, if it was not called). Best effort: without
    /// `/proc` nothing changes.
    pub(crate) fn raise() -> OomPriority {
        let mut priority = OomPriority { restore: None };
        let Some(file) = OWN.get_or_init(open_own) else {
            return priority;
        };
        let Some(current) = read(file) else {
            return priority;
        };
        if current < SESSION_OOM_SCORE_ADJ && write(file, SESSION_OOM_SCORE_ADJ) {
            priority.restore = Some(current);
        }
        priority
    }
}

impl Drop for OomPriority {
    fn drop(&mut self) {
        if let (Some(Some(file)), Some(value)) = (OWN.get(), self.restore) {
            write(file, value);
        }
    }
}

/// The value, read at offset 0 (no shared file offset to keep track of).
fn read(file: &File) -> Option<i32> {
    let mut buf = [0u8; 16];
    let n = file.read_at(&mut buf, 0).ok()?;
    std::str::from_utf8(&buf[..n]).ok()?.trim().parse().ok()
}

fn write(file: &File, value: i32) -> bool {
    file.write_at(value.to_string().as_bytes(), 0).is_ok()
}
