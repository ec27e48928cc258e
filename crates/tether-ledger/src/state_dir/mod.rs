//! Trusting the state directory the way `ssh` trusts `~/.ssh`. (What a
//! file's trust rests on differs per OS — owners and mode bits on Unix, the
//! profile's ACLs on Windows — so this module picks an implementation with
//! `cfg`.)
//!
//! What the ledger says decides what `tether reap` may kill, so the files
//! it is read from must be this user's alone. Before the store is opened:
//!
//! - the state directory is created 0700 if missing; an existing one must
//!   be a real directory (not a symbolic link) owned by the effective uid
//!   and not writable by group or others — otherwise tether refuses it,
//!   saying what to do. Read or search bits for group or others are taken
//!   away (0700, as docs/security.md promises).
//! - the `runs/` directory of run journals (`journal.rs`) is checked as
//!   the state directory is, and each journal in it as the files below;
//! - `ledger.db`, its `-wal` and `-shm` and `ledger.lock`, where they
//!   exist, must be regular files (not links) owned by the effective uid
//!   and not writable by group or others; bits for group or others are
//!   taken away (0600).
//!
//! Once the directory passes, nobody else can add, rename or replace
//! anything in it, so checking by path and then letting SQLite open by
//! path leaves no window. The directory's ancestors are trusted, as `ssh`
//! trusts `/home`; `/tmp/tether-<uid>` — the one predictable path tether
//! falls back to — sits in the sticky `/tmp`, where only its owner can
//! rename it.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub(crate) use unix::{create_new_private, file_id, open_private, secure_dir, secure_file};

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::{create_new_private, file_id, open_private, secure_dir, secure_file};
