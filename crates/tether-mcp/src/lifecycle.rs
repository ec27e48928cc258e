//! When the server stops: its input ends, its output breaks, or it gets
//! SIGTERM, SIGINT or SIGHUP (on Windows: Ctrl-C, Ctrl-Break, console
//! close — how each OS asks a process to stop differs, hence the
//! `cfg`s). The first cause wins; everything that waits on [`Closing`]
//! (calls in flight, the MCP loop, `serve`) learns it at once.

use std::fmt;
use std::sync::Arc;

use tokio::sync::watch;

/// Why the server stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// Stdin reached EOF: the client closed it or went away.
    InputClosed,
    /// Writing stdout failed (EPIPE): nobody reads our answers.
    OutputClosed,
    /// A signal asked us to stop.
    Signal(i32),
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::InputClosed => f.write_str("stdin closed"),
            Cause::OutputClosed => f.write_str("stdout closed"),
            Cause::Signal(sig) => write!(f, "{}", crate::exit::signal_name(*sig)),
        }
    }
}

/// A one-way switch from open to closed, with the cause.
#[derive(Clone, Debug)]
pub struct Closing(Arc<watch::Sender<Option<Cause>>>);

impl Default for Closing {
    fn default() -> Closing {
        Closing(Arc::new(watch::Sender::new(None)))
    }
}

impl Closing {
    /// Closes, unless already closed (the first cause is kept).
    pub fn close(&self, cause: Cause) {
        self.0.send_if_modified(|current| {
            if current.is_none() {
                *current = Some(cause);
                true
            } else {
                false
            }
        });
    }

    /// Waits until closed.
    pub async fn closed(&self) -> Cause {
        let mut changes = self.0.subscribe();
        loop {
            if let Some(cause) = *changes.borrow_and_update() {
                return cause;
            }
            if changes.changed().await.is_err() {
                // Unreachable while we hold the sender; never wake.
                std::future::pending::<()>().await;
            }
        }
    }
}

/// Closes `closing` on SIGTERM, SIGINT or SIGHUP. The handlers are
/// installed before this returns, so a signal sent after it is never
/// lost to the default action (which would skip the verified kill).
#[cfg(unix)]
pub fn watch_signals(closing: Closing) -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut hup = signal(SignalKind::hangup())?;
    tokio::spawn(async move {
        let sig = tokio::select! {
            _ = term.recv() => libc::SIGTERM,
            _ = int.recv() => libc::SIGINT,
            _ = hup.recv() => libc::SIGHUP,
        };
        tracing::info!("received {}", crate::exit::signal_name(sig));
        closing.close(Cause::Signal(sig));
    });
    Ok(())
}

/// Closes `closing` on Ctrl-C, Ctrl-Break or the console's close (reported
/// as the signal numbers 2, 21 and 1 — `SIGINT`, `SIGBREAK`, `SIGHUP` in
/// the C runtime's terms).
#[cfg(windows)]
pub fn watch_signals(closing: Closing) -> std::io::Result<()> {
    use tokio::signal::windows::{ctrl_break, ctrl_c, ctrl_close};
    let mut c = ctrl_c()?;
    let mut brk = ctrl_break()?;
    let mut close = ctrl_close()?;
    tokio::spawn(async move {
        let sig = tokio::select! {
            _ = c.recv() => 2,
            _ = brk.recv() => 21,
            _ = close.recv() => 1,
        };
        closing.close(Cause::Signal(sig));
    });
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_cause_wins_and_wakes_every_waiter() {
        let closing = Closing::default();
        let waiter = tokio::spawn({
            let closing = closing.clone();
            async move { closing.closed().await }
        });
        assert!(!waiter.is_finished());
        closing.close(Cause::Signal(libc::SIGTERM));
        closing.close(Cause::InputClosed);
        assert_eq!(waiter.await.unwrap(), Cause::Signal(libc::SIGTERM));
        assert_eq!(closing.closed().await, Cause::Signal(libc::SIGTERM));
        assert_eq!(Cause::Signal(libc::SIGHUP).to_string(), "SIGHUP");
    }
}
