//! Start-to-return of a durable session from the Rust API against a plain
//! `Registry::run`, in the same run (this machine is shared and noisy, so
//! the ratio is what means something).
//!
//! `cargo bench -p process-tether-durable --bench rust_start` prints a
//! markdown table: the first durable start (the holder — this very
//! program, embedded — started for it), then p50 and p90 of 20 starts of
//! `sleep 1000` each way, the holder warm, and the p50 ratio. Every
//! session is killed (not timed) before the next start; the holder is
//! killed at the end, in a `TETHER_HOME` of the bench's own.

#[cfg(target_os = "linux")]
use std::time::{Duration, Instant};

#[cfg(target_os = "linux")]
const ITERATIONS: usize = 20;

#[cfg(target_os = "linux")]
fn main() {
    use tether::registry::{Registry, RegistryConfig, RunSpec};
    use tether_durable::{DurableExt, DurableOptions};

    let home = tempfile::Builder::new()
        .prefix("tether-durable-bench.")
        .tempdir()
        .unwrap();
    let install = tether::Install::at(home.path());
    let durable_start = || {
        let started = Instant::now();
        let mut session = tether::Command::new("sleep")
            .arg("1000")
            .install(install.clone())
            .spawn_durable(&DurableOptions::new())
            .expect("a durable start");
        let took = started.elapsed();
        session.kill(Some(Duration::ZERO)).unwrap();
        took
    };
    let first = durable_start();
    let durable: Vec<Duration> = (0..ITERATIONS).map(|_| durable_start()).collect();

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let plain: Vec<Duration> = runtime.block_on(async {
        let registry = Registry::new(RegistryConfig::default());
        let mut times = Vec::new();
        for _ in 0..ITERATIONS {
            let started = Instant::now();
            let id = registry
                .run(RunSpec::argv(["sleep", "1000"]).install(install.clone()))
                .await
                .unwrap();
            times.push(started.elapsed());
            registry.kill(id.as_str(), Duration::ZERO).await.unwrap();
        }
        registry.shutdown().await.unwrap();
        times
    });

    let (d50, d90) = percentiles(durable);
    let (p50, p90) = percentiles(plain);
    println!("| start-to-return, `sleep 1000` | p50 | p90 |");
    println!("|---|---|---|");
    println!(
        "| `spawn_durable`, first (starts the embedded holder) | {} | — |",
        ms(first)
    );
    println!(
        "| `spawn_durable`, holder warm | {} | {} |",
        ms(d50),
        ms(d90)
    );
    println!("| `Registry::run` | {} | {} |", ms(p50), ms(p90));
    println!(
        "| ratio durable ÷ plain (p50) | {:.2}× | |",
        d50.as_secs_f64() / p50.as_secs_f64()
    );
    kill_holder(home.path());
}

#[cfg(not(target_os = "linux"))]
fn main() {
    println!("the durable Rust-start bench runs on Linux (its holder is embedded there)");
}

#[cfg(target_os = "linux")]
fn percentiles(mut times: Vec<Duration>) -> (Duration, Duration) {
    times.sort();
    (times[times.len() / 2], times[times.len() * 9 / 10])
}

#[cfg(target_os = "linux")]
fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// SIGKILLs the bench's holder (its pid from `holder.lock`, believed only
/// for an embedded holder of this very home): its sessions die with it.
#[cfg(target_os = "linux")]
fn kill_holder(home: &std::path::Path) {
    let Ok(text) = std::fs::read_to_string(home.join("holder.lock")) else {
        return;
    };
    let Ok(pid) = text.trim().parse::<u32>() else {
        return;
    };
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    let want = format!("TETHER_HOME={}", home.display());
    if !environ.split(|b| *b == 0).any(|v| v == want.as_bytes()) {
        return;
    }
    tether_testkit::sigkill(pid);
}
