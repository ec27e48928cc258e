//! `tether ps` and `tether reap --dry-run` on a crowded machine: 10,000
//! extra processes, 1,000 of them tagged (500 orphans of a dead owner, 500
//! of a live one). Goal: ≤ 100 ms each, end to end (exec included). Wall
//! time on this shared 2-core machine swings with its load, so the figures
//! give the minimum and the median wall time and the median CPU time.
//!
//! Baselines measured in the same run: `tether --version` (the cost of
//! starting the binary at all) and procps `ps -e -o pid,args` (which reads
//! every process's command line, as `tether ps` reads every environment).
//! The divan section times the library calls behind the commands, in
//! process: the tag scan, the census, the reap plan. `tether ps --holding
//! DIR` (a directory nothing holds: every object of every process is
//! compared) is timed end to end too, against the same goal.
//!
//! The crowd is cheap: three "forker" processes (this binary re-run) fork
//! the rest, and every member blocks reading a pipe from this process, so
//! they all exit when it closes — even if this process dies.
//!
//! Run: `cargo bench -p process-tether-cli --bench ps_reap`. The figures print first.
//!
//! The benchmark itself is in `ps_reap/linux.rs`: it drives real Linux process
//! trees, so elsewhere this target only says so.

#[cfg(target_os = "linux")]
#[path = "ps_reap/linux.rs"]
mod linux;

fn main() {
    #[cfg(target_os = "linux")]
    linux::main();
    #[cfg(not(target_os = "linux"))]
    eprintln!("this benchmark runs on Linux only");
}
