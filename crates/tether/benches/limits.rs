//! What limits cost and what a session's own cgroup buys, in the same run
//! (this machine is shared and noisy: only ratios mean anything):
//!
//! 1. teardown of a 3,000-process fork storm: today's ladder (a keeper's
//!    per-process sweep) against the same session with a cgroup v2 of its
//!    own (`cgroup.kill`);
//! 2. spawn + wait of `/bin/true`: without limits, with a process limit
//!    (a v2 leaf for the kill, a v1 `pids` leaf here), with all three.
//!
//! `cargo bench -p process-tether --bench limits` (root: cgroups) prints
//! markdown tables. The owner-SIGKILL comparison is in `tether-cli`'s
//! `owner_death` bench.

#[cfg(target_os = "linux")]
#[path = "limits/linux.rs"]
mod linux;

fn main() {
    #[cfg(target_os = "linux")]
    linux::main();
    #[cfg(not(target_os = "linux"))]
    eprintln!("this benchmark runs on Linux only");
}
