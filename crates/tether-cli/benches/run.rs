//! `tether run -- /bin/true` against `timeout 10 /bin/true`: the fixed cost
//! of one contained command from the command line (issue 20, item 1), with a
//! fresh ledger and with a week of a busy user's runs in it.
//!
//! `cargo bench -p process-tether-cli --bench run` prints a markdown table;
//! with `TETHER_BASELINE=<another build's tether>` that build is measured
//! too, interleaved round by round, and with
//! `TETHER_BASELINE_KEEPER=<that build's static tether-keeper>` also with
//! that keeper beside it. This build is measured dynamically linked (as
//! `cargo build` links it) and statically (as the Python wheel ships it:
//! `$TETHER_STATIC_BIN`, else built by the bench).
//!
//! The benchmark itself is in `run/linux.rs`.

#[cfg(target_os = "linux")]
#[path = "support/mod.rs"]
mod support;

#[cfg(target_os = "linux")]
#[path = "run/linux.rs"]
mod linux;

fn main() {
    #[cfg(target_os = "linux")]
    linux::main();
    #[cfg(not(target_os = "linux"))]
    eprintln!("this benchmark runs on Linux only");
}
