//! Session ids: opaque, short, unique, never a pid.

use std::fmt;

/// The id of one session. 12 characters of `[a-z0-9]` (62 bits of
/// randomness from the kernel), so ids are unique without coordination and
/// a short prefix is usually enough to name one (the registry accepts a
/// unique prefix of at least [`MIN_ID_PREFIX`](crate::registry::MIN_ID_PREFIX)
/// characters).
///
/// ```
/// use tether::SessionId;
///
/// let id = SessionId::generate();
/// assert_eq!(id.as_str().len(), 12);
/// assert_eq!(SessionId::parse(id.as_str()), Some(id));
/// assert_eq!(SessionId::parse("no:colons"), None);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(String);

const ALPHABET: &[u8; 36] = b"abcdefghijklmnopqrstuvwxyz0123456789";

impl SessionId {
    /// A fresh random id (from the kernel's random source; where that
    /// cannot be read, from the standard library's per-process random
    /// hasher keys mixed with the time and a counter).
    pub fn generate() -> SessionId {
        let mut bytes = [0u8; 12];
        fill_random(&mut bytes);
        SessionId(
            bytes
                .iter()
                .map(|b| ALPHABET[(*b as usize) % ALPHABET.len()] as char)
                .collect(),
        )
    }

    /// Wraps an existing id (e.g. read back from a ledger). Valid ids are
    /// 1–64 characters of `[A-Za-z0-9_-]`; `None` for anything else.
    pub fn parse(s: &str) -> Option<SessionId> {
        let ok = (1..=64).contains(&s.len())
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        ok.then(|| SessionId(s.to_owned()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn fill_random(buf: &mut [u8]) {
    if !crate::contain::random_bytes(buf) {
        // The system gave none (Windows; no /dev/urandom in a bare
        // chroot): the hasher's per-process random keys, mixed with time
        // and a counter.
        use std::hash::{BuildHasher, Hasher};
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        for chunk in buf.chunks_mut(8) {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
            h.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_nanos(),
            );
            chunk.copy_from_slice(&h.finish().to_le_bytes()[..chunk.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_distinct_and_valid() {
        let a = SessionId::generate();
        let b = SessionId::generate();
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), 12);
        assert_eq!(SessionId::parse(a.as_str()), Some(a));
        assert!(SessionId::parse("a:b").is_none());
        assert!(SessionId::parse("").is_none());
    }
}
