//! What can go wrong talking to (or starting) the holder.

use std::path::PathBuf;

/// A durable-session error; each variant says what the user can do.
#[derive(Debug, thiserror::Error)]
pub enum DurableError {
    /// No session of this user has this id, id prefix or name (the
    /// message names it).
    #[error("{0}")]
    UnknownSession(String),
    /// A running session already has this name.
    #[error("{0}")]
    NameTaken(String),
    /// The holder refused the request (bad input, another user, …).
    #[error("{message}")]
    Refused {
        /// The holder's error kind (`bad_request`, `denied`, `start_failed`, `failed`).
        kind: String,
        /// The holder's message.
        message: String,
    },
    /// The holder could not be started; nothing was started.
    #[error("could not start the durable-session holder: {0}")]
    HolderStart(String),
    /// The holder's socket exists but cannot be reached.
    #[error("cannot reach the durable-session holder at {}: {source}", path.display())]
    Unreachable {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The connection broke, or the holder said something unreadable.
    #[error("durable-session holder: {0}")]
    Protocol(String),
    /// The command cannot be run as a durable session as given (a setting
    /// a session cannot carry, text that is not UTF-8); nothing started.
    #[error("{0}")]
    Command(tether::Error),
    /// The state directory cannot be trusted or made.
    #[error(transparent)]
    StateDir(#[from] tether_ledger::LedgerError),
    /// An I/O error.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Result of this crate.
pub type Result<T> = std::result::Result<T, DurableError>;
