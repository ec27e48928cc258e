//! Spawn cost: `tether::Command` against `std::process::Command` in the same
//! run (this machine is shared and noisy, so only ratios mean anything).
//!
//! `cargo bench -p process-tether --bench spawn` prints markdown tables:
//! 1. spawn + wait of `/bin/true`: std, tether with a cold keeper, tether
//!    with warm keepers, and std plus one round trip to a waiting process
//!    (the least a keeper can cost); p50, p90 and the p50 ratio to std.
//! 2. the same at owner RSS 0, 1 GiB and 4 GiB resident: tether never forks
//!    the owner, so its cost stays flat.

use std::time::{Duration, Instant};

const ITERATIONS: usize = 400;

fn std_true() {
    let status = std::process::Command::new("/bin/true").status().unwrap();
    assert!(status.success());
}

/// A process that answers every byte it reads with that byte: the other
/// end of one round trip, as the keeper is.
struct Echo {
    child: std::process::Child,
}

impl Echo {
    fn start() -> Echo {
        let child = std::process::Command::new("cat")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        Echo { child }
    }

    fn round_trip(&mut self) {
        use std::io::{Read, Write};
        self.child.stdin.as_mut().unwrap().write_all(b"x").unwrap();
        let mut byte = [0u8];
        self.child
            .stdout
            .as_mut()
            .unwrap()
            .read_exact(&mut byte)
            .unwrap();
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

fn tether_true() {
    let status = tether::Command::new("/bin/true").status().unwrap();
    assert!(status.success());
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * p).round() as usize]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Runs the named cases round-robin so that noise hits them alike.
fn measure(cases: &[(&str, &dyn Fn())], iterations: usize) -> Vec<(String, Duration, Duration)> {
    let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(iterations); cases.len()];
    for (_, f) in cases {
        f(); // warm-up
    }
    for _ in 0..iterations {
        for (i, (_, f)) in cases.iter().enumerate() {
            let start = Instant::now();
            f();
            samples[i].push(start.elapsed());
        }
    }
    cases
        .iter()
        .zip(samples.iter_mut())
        .map(|((name, _), s)| (name.to_string(), percentile(s, 0.5), percentile(s, 0.9)))
        .collect()
}

/// Touches `bytes` of memory so the owner's RSS really is that large.
fn resident(bytes: usize) -> Vec<u8> {
    let mut v = vec![0u8; bytes];
    for i in (0..bytes).step_by(4096) {
        v[i] = 1;
    }
    v
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // cargo test --benches asks for a list; nothing to list
    }
    tether::keeper::run_if_requested();
    println!("## spawn + wait of /bin/true ({ITERATIONS} iterations, interleaved)\n");
    println!("| case | p50 µs | p90 µs | p50 ratio to std |");
    println!("|---|---|---|---|");
    let cold = measure(
        &[
            ("std::process::Command", &std_true),
            ("tether, cold keeper", &tether_true),
        ],
        ITERATIONS,
    );
    tether::set_warm_keepers(2);
    // What a keeper costs at the least: one round trip to a process that
    // waits for it (the spawn request and its answer; the exit and the
    // empty tree come back in one message).
    let echo = std::cell::RefCell::new(Echo::start());
    let std_and_round_trip = || {
        std_true();
        echo.borrow_mut().round_trip();
    };
    let warm = measure(
        &[
            ("std::process::Command", &std_true),
            ("tether, warm keepers", &tether_true),
            (
                "std::process::Command + one round trip to a waiting process",
                &std_and_round_trip,
            ),
        ],
        ITERATIONS,
    );
    drop(echo);
    for rows in [&cold[..], &warm[..]] {
        let base = &rows[0];
        for row in rows {
            println!(
                "| {} | {:.0} | {:.0} | {:.2} |",
                row.0,
                us(row.1),
                us(row.2),
                us(row.1) / us(base.1)
            );
        }
    }

    println!(
        "\n## spawn + wait p50 vs owner RSS (warm keepers, {} iterations)\n",
        ITERATIONS / 2
    );
    println!("| owner RSS | std p50 µs | tether p50 µs | ratio |");
    println!("|---|---|---|---|");
    for gib in [0usize, 1, 4] {
        let ballast = resident(gib << 30);
        let rows = measure(
            &[("std", &std_true), ("tether", &tether_true)],
            ITERATIONS / 2,
        );
        println!(
            "| {gib} GiB | {:.0} | {:.0} | {:.2} |",
            us(rows[0].1),
            us(rows[1].1),
            us(rows[1].1) / us(rows[0].1)
        );
        drop(ballast);
    }
}
