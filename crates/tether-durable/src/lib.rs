//! Durable sessions: background work that deliberately outlives the
//! process that started it — identified, re-adoptable, bounded in time,
//! never an orphan (tether's G10).
//!
//! # How it works
//!
//! A per-user **holder** — the `tether` executable in its hidden `holder`
//! mode, or on Linux any program that links this crate, started again as
//! its own holder ([`HolderProgram`]) — is started on demand by the first
//! durable request, detached
//! (new session, double fork, stdio on `/dev/null`, no spawn tag of its
//! requester), so it is in none of its requester's process groups,
//! sessions or keeper trees. It listens on `holder.sock` in the user's
//! state directory (0700, socket 0600) and judges every connection by the
//! uid the kernel reports for it (`SO_PEERCRED`/`getpeereid`), never by a
//! file's owner. One holder per state directory (`holder.lock`, `flock`).
//!
//! The holder owns an ordinary [`tether::registry::Registry`]: a durable
//! session is an ordinary session whose owner is the holder. So
//! everything holds as for any session — containment, limits, PTYs,
//! spawn tags, lossless output with absolute offsets and spill — and the
//! keepers' lifelines tie every durable session to the holder: if the
//! holder dies (even by `SIGKILL`), every session it holds dies (G2).
//!
//! Each durable session has a TTL ([`DEFAULT_TTL`], at most [`MAX_TTL`]);
//! at its end the holder kills it with the verified ladder. The holder
//! records itself as an owner (purpose `holder`) and its sessions in the
//! ledger, with their names, owners of record and deadlines, so `tether
//! ps` shows them held, and `tether reap` leaves them alone while the
//! holder lives. It exits by itself after [`HOLDER_IDLE`] without a live
//! session or connection. A reboot ends every durable session.
//!
//! Clients ([`Client`]) speak [`protocol`]: one JSON object per line.
//!
//! # From Rust
//!
//! A [`tether::Command`] becomes durable with [`DurableExt::spawn_durable`],
//! a [`RunSpec`](tether::registry::RunSpec) with [`start`] (or, beside a
//! [`Registry`](tether::registry::Registry),
//! [`DurableRegistryExt::run_durable`]); each returns a [`DurableSession`],
//! a handle whose drop detaches. Any later process of the same user finds
//! the session again with [`attach`] (by id or name) or [`list`]. The
//! command's settings are carried whole; one a session cannot honour is
//! [`DurableError::Command`], before anything starts.
//!
//! ```no_run
//! # fn main() -> Result<(), tether_durable::DurableError> {
//! use std::time::Duration;
//! use tether_durable::{DurableExt, DurableOptions};
//!
//! let session = tether::Command::new("npm")
//!     .args(["run", "dev"])
//!     .spawn_durable(&DurableOptions::new().name("dev").ttl(Duration::from_secs(8 * 3600)))?;
//! drop(session); // detaches; "dev" runs on
//!
//! let mut dev = tether_durable::attach(&tether::Install::from_env(), "dev")?;
//! let printed = dev.read(0, 1 << 16, Duration::ZERO)?;
//! dev.kill(None)?;
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod client;
mod error;
pub mod holder;
mod holder_program;
pub mod protocol;
mod session;

use std::path::PathBuf;
use std::time::Duration;

pub use client::{Client, own_identity};
pub use error::{DurableError, Result};
pub use holder_program::{EMBEDDED_HOLDER_ARG, HolderProgram};
pub use protocol::{
    DurableInfo, KillReply, ReadReply, RunSettings, ScreenReply, StartRequest, WaitReply,
};
pub use session::{
    DurableExt, DurableOptions, DurableRead, DurableRegistryExt, DurableSession, attach, list,
    start,
};

/// TTL of a durable session when none is given: 24 hours.
pub const DEFAULT_TTL: Duration = Duration::from_secs(24 * 3600);
/// Longest TTL accepted (and longest an extension reaches): 7 days.
pub const MAX_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// How long the holder stays with no live session and no connection
/// before it exits: 10 minutes (`$TETHER_HOLDER_IDLE`, in seconds,
/// overrides it). Finished sessions' output is readable until then.
pub const HOLDER_IDLE: Duration = Duration::from_secs(600);
/// The argument that starts the `tether` executable as a holder.
pub const HOLDER_ARG: &str = "holder";

/// The holder's socket in `install`'s state directory.
pub fn socket_path(install: &tether::Install) -> PathBuf {
    install.state_dir().join("holder.sock")
}
