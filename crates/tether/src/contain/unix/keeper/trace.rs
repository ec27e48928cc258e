//! When the phases of a kill happened, for `TETHER_KEEPER_DEBUG`: the
//! owner-death bench reads them to say where the time goes between the
//! owner's death and the last exit (issue 20).

/// Set in the keeper's environment (by the owner, when it has it) to make
/// the keeper report on its stderr, which it then shares with the owner.
pub(crate) const DEBUG_VAR: &str = "TETHER_KEEPER_DEBUG";

/// Moments of one kill on `CLOCK_MONOTONIC`, in nanoseconds — the clock
/// every process of the machine shares, so a bench can set them against
/// its own.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct KillTrace {
    began: u64,
    listed: u64,
    signalled: u64,
}

impl KillTrace {
    /// A kill begins now.
    pub(super) fn begin() -> KillTrace {
        KillTrace {
            began: monotonic_ns(),
            ..KillTrace::default()
        }
    }

    /// The tree's members are listed and pinned.
    pub(super) fn listed(&mut self) {
        self.listed = monotonic_ns();
    }

    /// The first signals reached every listed member.
    pub(super) fn signalled(&mut self) {
        self.signalled = monotonic_ns();
    }

    /// Reports the kill (if there was one) as the tree is seen empty.
    pub(super) fn report(&self, killed: u32) {
        if self.began == 0 {
            return;
        }
        eprintln!(
            "tether-keeper: kill phases: began={} listed={} signalled={} empty={} killed={killed}",
            self.began,
            self.listed,
            self.signalled,
            monotonic_ns()
        );
    }
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime fills the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
