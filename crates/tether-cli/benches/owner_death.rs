//! Owner SIGKILL → every process of a 100-process tree (setsid sessions,
//! double-fork orphans, nested shells) dead, timed on pidfds. Also against
//! a fork storm (two loops spawning setsid children during the kill).
//!
//! `cargo bench -p process-tether-cli --bench owner_death` prints a markdown table.
//!
//! The benchmark itself is in `owner_death/linux.rs`: it drives real Linux process
//! trees, so elsewhere this target only says so.

#[cfg(target_os = "linux")]
#[path = "owner_death/linux.rs"]
mod linux;

fn main() {
    #[cfg(target_os = "linux")]
    linux::main();
    #[cfg(not(target_os = "linux"))]
    eprintln!("this benchmark runs on Linux only");
}
