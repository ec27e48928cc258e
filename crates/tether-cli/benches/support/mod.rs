//! What the CLI benches share: the builds they compare and how they report.
//!
//! Every bench measures this build's `tether` against a baseline in the same
//! run. Set `TETHER_BASELINE` to another build's `tether` binary (say the
//! commit before a change, built with `cargo build --release` in a second
//! worktree) and the bench interleaves that build's rows with this one's,
//! round by round, so the machine's noise hits both alike.

#![allow(dead_code)]

pub mod owner;

use std::path::PathBuf;
use std::time::Duration;

/// A `tether` binary under measurement.
pub struct Build {
    /// How the tables name it.
    pub name: String,
    pub path: PathBuf,
}

/// This build, then the baseline build if `TETHER_BASELINE` names one.
pub fn builds() -> Vec<Build> {
    let mut builds = vec![Build {
        name: "this build".into(),
        path: env!("CARGO_BIN_EXE_tether").into(),
    }];
    if let Some(path) = std::env::var_os("TETHER_BASELINE").filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        builds.push(Build {
            name: format!("baseline ({})", path.display()),
            path,
        });
    }
    builds
}

/// The `p`-quantile of `samples` (nearest rank).
pub fn percentile(samples: &[Duration], p: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// `cargo test --benches` runs each bench with `--list`: nothing to list.
pub fn listing() -> bool {
    std::env::args().any(|a| a == "--list")
}
