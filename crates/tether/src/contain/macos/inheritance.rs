//! What a keeper inherits from its owner that only macOS shows (see
//! `contain/unix/inheritance.rs`): nothing beyond the shared part. The
//! umask is not compared — only `umask(2)` reads it, by setting it, which
//! would race this process's other threads — so a warm keeper's command
//! gets the umask its owner had when that keeper started.

/// Nothing more to compare here.
pub(crate) fn extra() -> Vec<u8> {
    Vec::new()
}
