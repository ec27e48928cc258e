//! `process-tether`'s native addon: the Node.js binding of the tether
//! library — as thin as the CLI. It maps types and errors; every process
//! decision is the library's. The `child_process`-shaped API (`spawn`,
//! `execFile`, `exec`, `run`, sessions) is the JavaScript around it
//! (`lib/`, see `docs/node.md`).
//!
//! # How it works
//!
//! - **One command** (`child.rs`): a [`tether::Child`] started on the
//!   calling thread — the keeper's spawn is as short as Node's own
//!   `uv_spawn` (~1 ms), and `child.pid` must be known when `spawn`
//!   returns. Its piped stdio goes back to JavaScript as raw descriptors,
//!   which the package wraps in Node's own pipe sockets (`net.Socket({fd})`),
//!   so output flows through libuv exactly as `child_process`'s does. The
//!   exit is waited for on a thread of ours, one per running command, and
//!   delivered through a threadsafe function that keeps the event loop
//!   alive while the command runs (`child.unref()` lets go, as Node's).
//! - **Sessions** (`session.rs`): one [`tether::registry::Registry`] per
//!   process on napi-rs's tokio runtime; every call that may block is an
//!   async function (a promise).
//! - **Owner death** needs nothing from JavaScript: the lifeline to each
//!   keeper is a descriptor of this process, so its end — `process.exit()`,
//!   an uncaught exception, `SIGKILL` — is what the keepers see. A worker
//!   thread's commands are killed when its environment is torn down.

// napi-derive registers the exported functions only outside `cfg(test)`;
// `clippy --all-targets` checks the lib's test build (never run: see
// Cargo.toml), where everything exported looks unused.
#![cfg_attr(test, allow(dead_code))]

mod child;
mod error;
mod limits;
mod session;

use napi_derive::napi;

/// Uses `path` (a `tether` or `tether-keeper` executable of this build) as
/// the keeper, or goes back to discovery with `null`.
#[napi]
pub fn set_keeper(path: Option<String>) {
    tether::keeper::set_program(path.map(std::path::PathBuf::from));
}

/// Keeps up to `n` keepers of finished commands for the next ones (the
/// package sets 2 at load; 0: a keeper per command).
#[napi]
pub fn set_warm_keepers(n: u32) {
    tether::set_warm_keepers(n as usize);
}

/// The library's version.
#[napi]
pub fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}
