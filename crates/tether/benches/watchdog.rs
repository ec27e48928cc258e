//! Owner `SIGKILL` → helper gone: `tether::watchdog` against the seed
//! system's `getppid()` poll (every 2 s, plus a 5 s grace when a request is
//! in flight). Run: `cargo bench -p process-tether --bench watchdog`.
//!
//! The benchmark itself is in `watchdog/linux.rs`: it drives real Linux
//! processes (pidfds, `/proc`), so elsewhere this target only says so.

#[cfg(target_os = "linux")]
#[path = "watchdog/linux.rs"]
mod linux;

fn main() {
    #[cfg(target_os = "linux")]
    linux::main();
    #[cfg(not(target_os = "linux"))]
    eprintln!("this benchmark runs on Linux only");
}
