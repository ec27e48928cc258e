//! The spawn tag: an environment variable every spawned process inherits, so
//! that a process can be proven to be tether's, and proven orphaned, from the
//! process table alone (even when every record of it was lost).
//!
//! Format (version 1), in `TETHER_SPAWN`:
//!
//! ```text
//! v1:<install>:<purpose>:<owner_pid>:<owner_start>:<session>
//! ```
//!
//! - `install`: 16 lowercase hex digits naming the tether state directory
//!   (see [`Install`](crate::Install)), so two installs never reap each
//!   other's processes.
//! - `purpose`: what the owner spawned it for (`run`, `mcp`, `test`, …):
//!   1–64 of `[A-Za-z0-9._-]`.
//! - `owner_pid`, `owner_start`: the owner's pid and start time, decimal,
//!   in the process table's unit (clock ticks since boot on Linux,
//!   microseconds since the Unix epoch on macOS, 100 ns units on Windows). With the boot id they identify the owner; a tag
//!   whose owner identity no longer matches a live process is an orphan's.
//! - `session`: the session id, 1–64 of `[A-Za-z0-9_-]`.
//!
//! Every field is validated on parse; a malformed tag is rejected, never
//! guessed at.

use std::fmt;
use std::str::FromStr;

use crate::error::TagError;

/// Name of the environment variable that carries the tag.
pub const SPAWN_TAG_VAR: &str = "TETHER_SPAWN";

/// A parsed, valid spawn tag: `v1:<install>:<purpose>:<owner_pid>:<owner_start>:<session>`
/// in the environment variable [`SPAWN_TAG_VAR`] (`TETHER_SPAWN`), set on
/// every process tether starts and inherited by every descendant. Its
/// `Display` is that text; `parse` accepts nothing else.
///
/// - `install`: 16 lowercase hex digits naming the state directory
///   ([`Install::id`](crate::Install::id)), so two installs never reap each
///   other's processes;
/// - `purpose`: 1–64 of `[A-Za-z0-9._-]`;
/// - `owner_pid`, `owner_start`: the owner's pid and start time, decimal,
///   in the process table's unit (clock ticks since boot on Linux,
///   microseconds since the Unix epoch on macOS, 100 ns units on Windows);
/// - `session`: 1–64 of `[A-Za-z0-9_-]`.
///
/// ```
/// use tether::{SpawnTag, TagError};
///
/// let tag: SpawnTag = "v1:0123456789abcdef:run:4242:987654:k3x9q2".parse()?;
/// assert_eq!((tag.owner_pid, tag.session.as_str()), (4242, "k3x9q2"));
/// assert_eq!(tag.to_string(), "v1:0123456789abcdef:run:4242:987654:k3x9q2");
///
/// // Malformed tags are rejected, never guessed at.
/// assert_eq!("v1:0123".parse::<SpawnTag>(), Err(TagError::FieldCount(2)));
/// assert!("v1:0123456789abcdef:run:-1:987654:k3x9q2".parse::<SpawnTag>().is_err());
///
/// // The tag this process carries, if tether started it.
/// if let Ok(text) = std::env::var(tether::SPAWN_TAG_VAR) {
///     println!("started by {}", text.parse::<SpawnTag>()?.owner_pid);
/// }
/// # Ok::<(), TagError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SpawnTag {
    /// Id of the tether install (state directory) that spawned the process.
    pub install: String,
    /// Why the owner spawned it.
    pub purpose: String,
    /// The owner's pid.
    pub owner_pid: u32,
    /// The owner's start time, in the process table's unit (clock ticks
    /// since boot on Linux; see [`crate::sys::ProcessInfo::start_time`]).
    pub owner_start: u64,
    /// The session the process belongs to.
    pub session: String,
}

impl SpawnTag {
    /// Builds a tag, validating every field.
    ///
    /// # Errors
    /// [`TagError::Field`] naming the first field out of its alphabet or
    /// length (see the type docs); pid and start time take any value.
    pub fn new(
        install: &str,
        purpose: &str,
        owner_pid: u32,
        owner_start: u64,
        session: &str,
    ) -> Result<SpawnTag, TagError> {
        validate_install(install)?;
        validate_purpose(purpose)?;
        validate_session(session)?;
        Ok(SpawnTag {
            install: install.to_owned(),
            purpose: purpose.to_owned(),
            owner_pid,
            owner_start,
            session: session.to_owned(),
        })
    }
}

impl fmt::Display for SpawnTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "v1:{}:{}:{}:{}:{}",
            self.install, self.purpose, self.owner_pid, self.owner_start, self.session
        )
    }
}

impl FromStr for SpawnTag {
    type Err = TagError;

    fn from_str(s: &str) -> Result<SpawnTag, TagError> {
        let fields: Vec<&str> = s.split(':').collect();
        let [version, install, purpose, pid, start, session] = fields[..] else {
            return Err(TagError::FieldCount(fields.len()));
        };
        if version != "v1" {
            return Err(TagError::Version(version.to_owned()));
        }
        let owner_pid = parse_decimal(pid, "owner_pid")?;
        let owner_start = parse_decimal(start, "owner_start")?;
        SpawnTag::new(install, purpose, owner_pid, owner_start, session)
    }
}

/// Strict decimal: no sign, no leading `+`, no whitespace, no empty string.
fn parse_decimal<T: FromStr>(s: &str, field: &'static str) -> Result<T, TagError> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(TagError::Field {
            field,
            value: s.to_owned(),
        });
    }
    s.parse().map_err(|_| TagError::Field {
        field,
        value: s.to_owned(),
    })
}

fn validate_install(s: &str) -> Result<(), TagError> {
    if s.len() == 16 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        Ok(())
    } else {
        Err(TagError::Field {
            field: "install",
            value: s.to_owned(),
        })
    }
}

/// Purposes are written into tags and ledgers: keep them to a safe alphabet.
pub(crate) fn validate_purpose(s: &str) -> Result<(), TagError> {
    let ok = (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(TagError::Field {
            field: "purpose",
            value: s.to_owned(),
        })
    }
}

fn validate_session(s: &str) -> Result<(), TagError> {
    let ok = (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(TagError::Field {
            field: "session",
            value: s.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INSTALL: &str = "0123456789abcdef";

    #[test]
    fn round_trips() {
        let tag = SpawnTag::new(INSTALL, "mcp.worker-1", 4242, 987654, "k3x9q2").unwrap();
        let text = tag.to_string();
        assert_eq!(text, "v1:0123456789abcdef:mcp.worker-1:4242:987654:k3x9q2");
        assert_eq!(text.parse::<SpawnTag>().unwrap(), tag);
    }

    #[test]
    fn rejects_malformed_tags() {
        let bad = [
            "",
            "v1",
            "v2:0123456789abcdef:run:1:2:s",
            "v1:0123456789ABCDEF:run:1:2:s",
            "v1:0123456789abcde:run:1:2:s",
            "v1:0123456789abcdef::1:2:s",
            "v1:0123456789abcdef:r n:1:2:s",
            "v1:0123456789abcdef:run:-1:2:s",
            "v1:0123456789abcdef:run:+1:2:s",
            "v1:0123456789abcdef:run:1: 2:s",
            "v1:0123456789abcdef:run:99999999999:2:s",
            "v1:0123456789abcdef:run:1:2:",
            "v1:0123456789abcdef:run:1:2:s:extra",
            "v1:0123456789abcdef:run:1:2:s/x",
        ];
        for text in bad {
            assert!(text.parse::<SpawnTag>().is_err(), "accepted {text:?}");
        }
    }

    #[test]
    fn purpose_length_is_bounded() {
        assert!(SpawnTag::new(INSTALL, &"p".repeat(64), 1, 1, "s").is_ok());
        assert!(SpawnTag::new(INSTALL, &"p".repeat(65), 1, 1, "s").is_err());
    }
}
