//! What can go wrong with the ledger, in terms a user can act on.

use std::path::PathBuf;

/// A ledger error.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The state directory or a file in it could not be created, opened,
    /// renamed or locked (permissions, read-only file system, full disk).
    #[error("ledger {path}: {source}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// SQLite reported an error that is not corruption (for instance the
    /// store stayed locked by another process for longer than the busy
    /// timeout). The store was left as it is.
    #[error("ledger {path}: {source}")]
    Sqlite {
        /// The store.
        path: PathBuf,
        /// The underlying error.
        source: rusqlite::Error,
    },
    /// The store was written by a newer tether whose schema this one does
    /// not know. It is left untouched; upgrade tether to read it.
    #[error(
        "ledger {path} has schema version {found}, newer than this tether knows ({known}): upgrade tether"
    )]
    NewerSchema {
        /// The store.
        path: PathBuf,
        /// Schema version found in the store.
        found: i64,
        /// Newest schema version this build knows.
        known: i64,
    },
    /// The store kept turning out corrupt, even after being quarantined and
    /// recreated (something else keeps damaging it).
    #[error("ledger {path} is corrupt again right after being recreated: {reason}")]
    StillCorrupt {
        /// The store.
        path: PathBuf,
        /// What the last check found.
        reason: String,
    },
    /// The store kept vanishing or being replaced while it was opened
    /// (something else keeps renaming or deleting it).
    #[error(
        "ledger {path} kept vanishing or being replaced while it was opened: \
         is another program deleting or renaming files in {}?",
        .path.parent().unwrap_or(.path).display()
    )]
    KeepsChanging {
        /// The store.
        path: PathBuf,
    },
    /// The state directory or a ledger file in it is not safe to trust —
    /// the way `ssh` judges `~/.ssh`: it is a symbolic link, not what it
    /// should be, owned by another user, or writable by group or others.
    /// Nothing was read from or written to it; the message says what to do.
    #[error("{path} {problem}; tether will not use it: {fix}", fix = .problem.fix(.path))]
    Insecure {
        /// The directory or file.
        path: PathBuf,
        /// What is wrong with it.
        problem: Insecurity,
    },
    /// A process registering itself could not determine its spawner as
    /// asked (no valid spawn tag, or the parent exited meanwhile).
    #[error("cannot determine the spawner: {reason}")]
    Spawner {
        /// Why not.
        reason: String,
    },
    /// A purpose outside `[A-Za-z0-9._-]{1,64}` (it goes into spawn tags).
    #[error("invalid purpose {purpose:?}: use 1-64 of A-Z a-z 0-9 . _ -")]
    InvalidPurpose {
        /// The purpose as given.
        purpose: String,
    },
}

/// What makes a state directory or ledger file unsafe to use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Insecurity {
    /// It is a symbolic link: tether follows none in its state directory,
    /// where a link could send its writes, or its trust, anywhere.
    Symlink {
        /// Where it points.
        target: PathBuf,
    },
    /// It should be a directory and is something else.
    NotADirectory,
    /// It should be a regular file and is something else.
    NotAFile,
    /// Another user owns it, so that user decides what it holds.
    OwnedBy {
        /// Its owner.
        uid: u32,
        /// The effective uid of this process.
        euid: u32,
    },
    /// Group or others may write it, so they may have put anything there.
    Writable {
        /// Its permission bits.
        mode: u32,
    },
}

impl std::fmt::Display for Insecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Insecurity::Symlink { target } => {
                write!(f, "is a symbolic link (to {})", target.display())
            }
            Insecurity::NotADirectory => f.write_str("is not a directory"),
            Insecurity::NotAFile => f.write_str("is not a regular file"),
            Insecurity::OwnedBy { uid, euid } => {
                write!(f, "is owned by uid {uid}, not by you (uid {euid})")
            }
            Insecurity::Writable { mode } => {
                write!(f, "is writable by group or others (mode {mode:03o})")
            }
        }
    }
}

impl Insecurity {
    /// What the user can do about it at `path`.
    pub fn fix(&self, path: &std::path::Path) -> String {
        let path = path.display();
        match self {
            Insecurity::Symlink { .. } => {
                format!("remove the link (rm {path}), or set TETHER_HOME to the real directory")
            }
            Insecurity::NotADirectory | Insecurity::NotAFile => {
                format!("move {path} out of the way, or set TETHER_HOME to another directory")
            }
            Insecurity::OwnedBy { uid, .. } => format!(
                "someone else created it: have it removed (as uid {uid} or root), \
                 or set TETHER_HOME to a directory of your own"
            ),
            Insecurity::Writable { .. } => format!(
                "check that nothing in it was put there by someone else, then \
                 chmod go-w {path} (or set TETHER_HOME to a directory of your own)"
            ),
        }
    }
}

/// Result with [`LedgerError`].
pub type Result<T, E = LedgerError> = std::result::Result<T, E>;
