//! Owner `SIGKILL` → helper gone: `tether::watchdog` (the owner's pidfd)
//! against the seed system's design, reimplemented faithfully — a thread
//! comparing `getppid()` with the original parent every 2 s (plus a 5 s
//! grace when a request is in flight; none is here, so this measures its
//! best case).
//!
//! The owner is killed at a random point of the 2 s poll period (as a real
//! death would come), the same way for both designs.
//!
//! `cargo bench -p process-tether --bench watchdog` prints a markdown table. The
//! helper is this bench binary re-run with `--helper <design>`, started by
//! an owner `sh` that passes it a spawn tag naming itself.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TETHER_RUNS: usize = 30;
const SEED_RUNS: usize = 15;
/// The seed system's poll interval (`HERMES_SLASH_WATCHDOG_POLL_S`).
const SEED_POLL: Duration = Duration::from_secs(2);

fn helper(design: &str) -> ! {
    match design {
        "tether" => {
            tether::watchdog::exit_when_orphaned().expect("watchdog");
        }
        "seed" => {
            // SAFETY: getppid cannot fail.
            let original = unsafe { libc::getppid() };
            std::thread::spawn(move || {
                loop {
                    std::thread::sleep(SEED_POLL);
                    // SAFETY: as above.
                    if unsafe { libc::getppid() } != original {
                        std::process::exit(0);
                    }
                }
            });
        }
        other => panic!("unknown design {other}"),
    }
    println!("ready");
    let _ = std::io::stdout().flush();
    loop {
        std::thread::park();
    }
}

/// One run: the time from the owner's SIGKILL until the helper has exited.
fn one_run(design: &str) -> Duration {
    let mut owner = Command::new("/bin/sh")
        .args([
            "-c",
            "read tag; export TETHER_SPAWN=\"$tag\"; \"$@\" & echo \"$!\"; wait",
            "sh",
        ])
        .arg(std::env::current_exe().unwrap())
        .args(["--helper", design])
        .env_remove(tether::SPAWN_TAG_VAR)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let id = tether::ProcessIdentity::of_pid(owner.id()).unwrap();
    let tag =
        tether::SpawnTag::new("00000000000000fe", "bench", id.pid, id.start_time, "bench").unwrap();
    writeln!(owner.stdin.as_mut().unwrap(), "{tag}").unwrap();
    // Two lines, in either order: the helper's pid (from `sh`) and the
    // helper's `ready`.
    let mut out = BufReader::new(owner.stdout.take().unwrap());
    let (mut helper, mut ready) = (None, false);
    while helper.is_none() || !ready {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "owner output closed");
        match line.trim() {
            "ready" => ready = true,
            pid => helper = Some(pid.parse::<u32>().unwrap()),
        }
    }
    let helper = helper.unwrap();
    // Kill at a random point of the seed design's poll period, as a real
    // owner's death would come (the same for both designs).
    std::thread::sleep(Duration::from_micros(random_below(
        SEED_POLL.as_micros() as u64
    )));
    let fd = tether_testkit::pidfd(helper).expect("helper alive");
    owner.kill().unwrap();
    let start = Instant::now();
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let rc = unsafe { libc::poll(&mut pfd, 1, 30_000) };
    let elapsed = start.elapsed();
    assert_eq!(rc, 1, "the helper outlived its owner by 30 s ({design})");
    owner.wait().unwrap();
    elapsed
}

/// A number below `n` (xorshift seeded from the clock: only spreads kill
/// times over the poll period).
fn random_below(n: u64) -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static STATE: AtomicU64 = AtomicU64::new(0);
    let mut x = STATE.load(Ordering::Relaxed);
    if x == 0 {
        x = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0x9e37_79b9, |d| d.as_nanos() as u64)
            | 1;
    }
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    STATE.store(x, Ordering::Relaxed);
    x % n
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

pub fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--helper") {
        helper(&args[at + 1]);
    }
    if args.iter().any(|a| a == "--list") {
        return;
    }
    println!("| design | runs | p50 ms | p90 ms | max ms |");
    println!("|---|---|---|---|---|");
    for (design, label, runs) in [
        ("tether", "tether::watchdog (owner pidfd)", TETHER_RUNS),
        ("seed", "seed: getppid() every 2 s", SEED_RUNS),
    ] {
        let mut times: Vec<Duration> = (0..runs).map(|_| one_run(design)).collect();
        times.sort();
        println!(
            "| {label} | {runs} | {} | {} | {} |",
            ms(percentile(&times, 0.5)),
            ms(percentile(&times, 0.9)),
            ms(*times.last().unwrap())
        );
    }
    println!(
        "\n(The seed design adds up to 5 s more when a request is in flight: up to 7 s in all.)"
    );
}
