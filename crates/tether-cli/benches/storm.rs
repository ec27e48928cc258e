//! Issue 34 item 10: a bounded fork storm — 3,003 processes, 3,000 of them
//! `setsid sleep`s — torn down at its owner's `SIGKILL`, against the
//! kernel's floor for the same tree in the same run.
//!
//! Interleaved, run by run: (a) the floor — the storm built without
//! tether (`/bin/sh -c` started by the bench), every process `SIGKILL`ed
//! by the bench through a pidfd it already holds; (b) `tether run` owning
//! the same storm, the owner `SIGKILL`ed; (c) the same with `--pids
//! 100000` and with `--memory 8G` (cgroup leaves of the session's own;
//! root only). Each is timed from the kill to the last of the storm's
//! pidfds turning readable (the process exited).
//!
//! `cargo bench -p process-tether-cli --bench storm` prints a markdown
//! table: p50/min/max and the p50 ratio to (a); `TETHER_STORM_RUNS` sets
//! the runs of each case (default 7); `TETHER_BASELINE=<another build's
//! tether>` adds its rows, interleaved; `TETHER_STORM_NO_CGROUP` leaves
//! out the cgroup rows. The benchmark itself is in
//! `storm/linux.rs`: it drives real Linux process trees.

#[cfg(target_os = "linux")]
#[path = "support/mod.rs"]
mod support;

#[cfg(target_os = "linux")]
#[path = "storm/linux.rs"]
mod linux;

fn main() {
    #[cfg(target_os = "linux")]
    linux::main();
    #[cfg(not(target_os = "linux"))]
    eprintln!("this benchmark runs on Linux only");
}
