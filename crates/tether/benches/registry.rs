//! Registry benchmarks. Every figure is a ratio against a raw baseline
//! measured in the same run, or an absolute resource count:
//!
//! * capture throughput of `head -c 1G /dev/zero` through a session, vs a
//!   plain read loop on the same kind of pipe (goal ≥ 0.9);
//! * memory per idle session in the registry (goal ≤ 32 KiB, output
//!   buffers excluded — an idle session has none allocated) and per keeper;
//! * time to start 1,000 concurrent sessions;
//! * (divan) one short command through the registry vs `std::process`.
//!
//! Run: `cargo bench -p process-tether --bench registry`. The figures print first.
//!
//! The benchmark itself is in `registry/linux.rs`: it drives real Linux process
//! trees, so elsewhere this target only says so.

#[cfg(target_os = "linux")]
#[path = "registry/linux.rs"]
mod linux;

fn main() {
    #[cfg(target_os = "linux")]
    linux::main();
    #[cfg(not(target_os = "linux"))]
    eprintln!("this benchmark runs on Linux only");
}
