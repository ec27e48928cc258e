//! PID namespaces do not exist on macOS. The shared keeper asks for one
//! under `ContainmentPolicy::Auto` and `::PidNamespace`; the answer is
//! always `ENOTSUP`, unspent, so `Auto` falls back to process group + tag
//! and `PidNamespace` fails with `Error::ContainmentUnavailable` ("containment
//! pidns is not available here: Operation not supported"). [`InitLink`]
//! and [`Started`] exist only so the shared keeper type-checks: they
//! cannot be constructed.

use std::convert::Infallible;
use std::io;
use std::os::fd::RawFd;

use nix::errno::Errno;

use crate::contain::Termination;
use crate::contain::unix::keeper::Exec;
use crate::contain::unix::protocol::SpawnStage;

/// Why a PID namespace could not be had (on macOS: never can).
#[derive(Clone, Copy, Debug)]
pub(crate) struct NamespaceError {
    pub(crate) errno: Errno,
    /// Whether the keeper was changed anyway: never on macOS.
    pub(crate) spent: bool,
}

/// Fails: macOS has no PID namespaces.
pub(crate) fn enter() -> Result<(), NamespaceError> {
    Err(NamespaceError {
        errno: Errno::ENOTSUP,
        spent: false,
    })
}

/// The keeper's end of a namespace init's report pipe: uninhabited here.
#[derive(Debug)]
pub(crate) struct InitLink {
    never: Infallible,
}

impl InitLink {
    pub(crate) fn fd(&self) -> RawFd {
        match self.never {}
    }

    pub(crate) fn read_exit(&mut self) -> io::Result<Option<Termination>> {
        match self.never {}
    }

    pub(crate) fn last_exit(&mut self) -> Option<Termination> {
        match self.never {}
    }
}

/// A command started in a fresh namespace: never, here.
#[allow(dead_code)] // Named by the shared keeper, constructed by nobody.
pub(crate) struct Started {
    pub init: u32,
    pub main: u32,
    pub identity: (u64, Option<u64>),
    pub link: InitLink,
}

/// Fails like [`enter`] (the keeper never gets this far on macOS).
pub(crate) fn start(
    _exec: &Exec,
    _stdio: [RawFd; 3],
    _ctl: RawFd,
) -> Result<Started, (SpawnStage, Errno)> {
    Err((SpawnStage::PidNamespace, Errno::ENOTSUP))
}
