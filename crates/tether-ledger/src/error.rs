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
}

/// Result with [`LedgerError`].
pub type Result<T, E = LedgerError> = std::result::Result<T, E>;
