//! Errors of the MCP front-end. Each message says what to send instead;
//! the model reads them.

use crate::names::Names;

/// A tool call's arguments cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgError {
    /// The arguments are not a JSON object.
    #[error("arguments must be a JSON object, e.g. {example}")]
    NotAnObject {
        /// A valid call.
        example: &'static str,
    },
    /// A required argument is missing.
    #[error("`{name}` is required: {}", Names::default().render(hint))]
    Missing {
        /// The argument.
        name: &'static str,
        /// What it should be: the argument's doc, which names tools as
        /// `§name` ([`ArgError::message`] renders them).
        hint: &'static str,
    },
    /// An argument has the wrong JSON type.
    #[error("`{name}` must be {expected}, got {got}")]
    WrongType {
        /// The argument.
        name: &'static str,
        /// The type it must have.
        expected: &'static str,
        /// What was sent.
        got: String,
    },
    /// A number outside its range.
    #[error("`{name}` must be {range}, got {got}")]
    OutOfRange {
        /// The argument.
        name: &'static str,
        /// The allowed range, in words.
        range: String,
        /// What was sent.
        got: String,
    },
    /// An argument this tool does not take.
    #[error("unknown argument `{name}`; this tool takes: {known}")]
    Unknown {
        /// The argument.
        name: String,
        /// The arguments it takes.
        known: String,
    },
    /// Any other invalid value.
    #[error("`{name}`: {reason}")]
    Invalid {
        /// The argument.
        name: &'static str,
        /// What is wrong and what to send instead.
        reason: String,
    },
}

impl ArgError {
    /// The message, naming tools as a client calls them (`names`, after
    /// `--tool-prefix`). Texts taken from the tool tables mark tool names
    /// as `§name`; only those are rendered, never what the client sent
    /// (echoed in `got` and `name`).
    pub fn message(&self, names: &Names) -> String {
        match self {
            ArgError::Missing { name, hint } => {
                format!("`{name}` is required: {}", names.render(hint))
            }
            other => other.to_string(),
        }
    }
}

/// `serve` could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// `--cwd` is not a usable directory.
    #[error("--cwd {path}: {reason}")]
    BadCwd {
        /// The directory as given.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The runtime or the signal handlers could not be set up.
    #[error("cannot start the server: {0}")]
    Io(#[from] std::io::Error),
}
