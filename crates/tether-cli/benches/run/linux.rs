//! See the bench target's own docs (`../run.rs`).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{Build, builds, listing, percentile, us};

const ROUNDS: usize = 200;

/// One command line to time, from spawn to reaped.
struct Case {
    name: String,
    command: Command,
    samples: Vec<Duration>,
    /// Kept alive for as long as the case: its ledger directory.
    _home: Option<tempfile::TempDir>,
}

impl Case {
    fn timeout() -> Case {
        let mut command = Command::new("timeout");
        command.args(["10", "/bin/true"]);
        Case::new("`timeout 10 /bin/true`".into(), command, None)
    }

    /// `tether run -- /bin/true` with a ledger of its own (which grows by
    /// one owner and one session per run, as a user's does).
    fn tether(build: &Build) -> Case {
        let home = tempfile::tempdir().expect("temporary TETHER_HOME");
        let mut command = Command::new(&build.path);
        command
            .args(["run", "--", "/bin/true"])
            .env("TETHER_HOME", home.path());
        Case::new(
            format!("`tether run -- /bin/true`, {}", build.name),
            command,
            Some(home),
        )
    }

    fn new(name: String, mut command: Command, home: Option<tempfile::TempDir>) -> Case {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        Case {
            name,
            command,
            samples: Vec::with_capacity(ROUNDS),
            _home: home,
        }
    }

    fn once(&mut self) -> Duration {
        let start = Instant::now();
        let status = self.command.status().expect("spawn");
        let elapsed = start.elapsed();
        assert!(status.success(), "{}: {status}", self.name);
        elapsed
    }
}

pub fn main() {
    if listing() {
        return;
    }
    let mut cases = vec![Case::timeout()];
    cases.extend(builds().iter().map(Case::tether));
    for case in &mut cases {
        for _ in 0..5 {
            case.once(); // warm-up: page cache, ledger created
        }
    }
    for _ in 0..ROUNDS {
        for case in &mut cases {
            let took = case.once();
            case.samples.push(took);
        }
    }
    println!("## one contained command from the command line ({ROUNDS} rounds, interleaved)\n");
    println!("| case | p50 µs | p90 µs | p50 ratio to `timeout` |");
    println!("|---|---|---|---|");
    let base = percentile(&cases[0].samples, 0.5);
    for case in &cases {
        let p50 = percentile(&case.samples, 0.5);
        println!(
            "| {} | {:.0} | {:.0} | {:.2} |",
            case.name,
            us(p50),
            us(percentile(&case.samples, 0.9)),
            us(p50) / us(base)
        );
    }
}
