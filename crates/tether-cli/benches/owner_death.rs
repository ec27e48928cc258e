//! Owner SIGKILL → every process of a 100-process tree (setsid sessions,
//! double-fork orphans, nested shells) dead, timed on pidfds. Also against
//! a fork storm (two loops spawning setsid children during the kill).
//!
//! `cargo bench -p process-tether-cli --bench owner_death` prints markdown
//! tables: the end-to-end figures, then where the time goes (issue 20,
//! item 3) — the keeper's own phases, which it reports on stderr under
//! `TETHER_KEEPER_DEBUG`, on the same clock as the bench — and the
//! kernel's floor: the same tree killed by the bench itself with one
//! `SIGKILL` per process through pidfds it already holds.
//!
//! With `TETHER_BASELINE=<another build's tether>` that build is measured
//! too, interleaved run by run.
//!
//! The benchmark itself is in `owner_death/linux.rs`: it drives real Linux process
//! trees, so elsewhere this target only says so.

#[cfg(target_os = "linux")]
#[path = "support/mod.rs"]
mod support;

#[cfg(target_os = "linux")]
#[path = "owner_death/linux.rs"]
mod linux;

fn main() {
    #[cfg(target_os = "linux")]
    linux::main();
    #[cfg(not(target_os = "linux"))]
    eprintln!("this benchmark runs on Linux only");
}
