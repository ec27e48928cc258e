//! The OOM killer's order: session processes before their owner.
//!
//! Every process of a session has `oom_score_adj` 1000 — the kernel's
//! first choice when memory runs out, machine-wide or in a cgroup — while
//! owner and keeper keep theirs. Raising it needs no privilege. The keeper
//! raises its own value around the spawn, so the command inherits it from
//! its first instruction whichever way it is started (`posix_spawn`, fork,
//! the namespace init), then lowers it back: lowering to a value the
//! process had needs no privilege either (the kernel's floor is
//! `oom_score_adj_min`, which only a privileged write sets).

use std::io::{Read, Seek, Write};

/// What every session process gets: the OOM killer's first choice.
pub(crate) const SESSION_OOM_SCORE_ADJ: i32 = 1000;

/// The keeper's raised `oom_score_adj`, lowered back when dropped.
pub(crate) struct OomPriority {
    file: Option<std::fs::File>,
    restore: Option<i32>,
}

impl OomPriority {
    /// Raises this process's `oom_score_adj` to [`SESSION_OOM_SCORE_ADJ`]
    /// for what it starts next. Best effort: without `/proc` nothing
    /// changes.
    pub(crate) fn raise() -> OomPriority {
        let mut priority = OomPriority {
            file: None,
            restore: None,
        };
        let Ok(mut file) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/proc/self/oom_score_adj")
        else {
            return priority;
        };
        let mut text = String::new();
        let Ok(current) = file
            .read_to_string(&mut text)
            .ok()
            .and_then(|_| text.trim().parse::<i32>().ok())
            .ok_or(())
        else {
            return priority;
        };
        if current < SESSION_OOM_SCORE_ADJ
            && file.rewind().is_ok()
            && file
                .write_all(SESSION_OOM_SCORE_ADJ.to_string().as_bytes())
                .is_ok()
        {
            priority.restore = Some(current);
        }
        priority.file = Some(file);
        priority
    }
}

impl Drop for OomPriority {
    fn drop(&mut self) {
        if let (Some(file), Some(value)) = (self.file.as_mut(), self.restore) {
            let _ = file.rewind();
            let _ = file.write_all(value.to_string().as_bytes());
        }
    }
}
