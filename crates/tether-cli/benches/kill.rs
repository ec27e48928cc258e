//! How long a kill takes when every process of the tree dies on the first
//! signal it gets (issue 20, item 2): the grace is an upper bound for
//! stragglers, so these should take milliseconds, never the grace.
//!
//! `cargo bench -p process-tether-cli --bench kill` prints markdown tables:
//! 1. `SIGTERM` to `tether run` (grace 2 s) until it has exited, for a
//!    command whose background child is in the command's process group,
//!    and for one whose child is in a session of its own (`setsid`);
//! 2. `tether mcp`'s `kill` of a PTY session (grace 2 s), send to answer,
//!    when every member dies of `SIGHUP`, and when one ignores it
//!    (`nohup`) but dies of `SIGTERM`;
//! 3. `tether mcp`'s `kill` of an interactive `bash` on pipes (grace 2 s),
//!    which ignores `SIGTERM`: the forced end at once, not after the grace.
//!
//! With `TETHER_BASELINE=<another build's tether>` that build is measured
//! too, interleaved round by round. The benchmark is in `kill/linux.rs`.

#[cfg(target_os = "linux")]
#[path = "support/mod.rs"]
mod support;

#[cfg(target_os = "linux")]
#[path = "kill/linux.rs"]
mod linux;

fn main() {
    #[cfg(target_os = "linux")]
    linux::main();
    #[cfg(not(target_os = "linux"))]
    eprintln!("this benchmark runs on Linux only");
}
