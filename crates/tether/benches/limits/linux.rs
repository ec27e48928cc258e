//! See the bench target's own docs (`../limits.rs`).

use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

use tether::unix::CommandExt;
use tether::{Command, Limits, Stdio};
use tether_testkit::{TAG_VAR, TagGuard, tagged_pids, wait_for_count};

/// Processes of the storm: two loops of 1,500 `setsid sleep`s each.
const STORM: usize = 3_000;
const STORM_RUNS: usize = 7;
const SPAWNS: usize = 400;

/// A limit far above anything here: it gives the session cgroups of its
/// own (a v2 leaf: `cgroup.kill`) without ever being reached.
fn cgroup_only() -> Limits {
    Limits::new().pids(100_000)
}

/// Builds a storm of [`STORM`] processes in one session, then kills it
/// with no grace; returns the time `kill` took to verify the tree empty
/// and how many processes it held.
fn storm_teardown(limits: Limits, term_first: bool) -> (Duration, usize) {
    let guard = TagGuard::new("bench-storm");
    let script = format!(
        "for j in 1 2; do (i=0; while [ $i -lt {} ]; do setsid sleep 1000 & i=$((i+1)); done; wait) & done; \
         echo ready; exec sleep 1000",
        STORM / 2
    );
    let mut command = Command::new("/bin/sh");
    command
        .args(["-c", &script])
        .env(TAG_VAR, guard.tag())
        .limits(limits)
        .keep_descendants(true)
        .stdout(Stdio::Piped);
    if !term_first {
        // Straight to SIGKILL: the forced end alone.
        command.kill_signals(&[]);
    }
    let mut child = command.spawn().expect("spawn the storm");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let built = wait_for_count(guard.tag(), STORM, Duration::from_secs(120));
    assert!(built >= STORM, "only {built} of {STORM} built");
    let start = Instant::now();
    child
        .kill_with_grace(Duration::ZERO)
        .expect("verified kill");
    let took = start.elapsed();
    assert!(tagged_pids(guard.tag()).is_empty());
    (took, built)
}

/// The kernel's own floor, without tether: [`STORM`] processes in a
/// cgroup v2 made for the bench (below this process's own), one write to
/// its `cgroup.kill`, then `cgroup.events` polled until `populated 0`.
fn raw_cgroup_kill() -> Option<Duration> {
    let ours = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = ours.lines().find_map(|l| l.strip_prefix("0::"))?.to_owned();
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let point = mountinfo.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        right
            .starts_with("cgroup2 ")
            .then(|| left.split(' ').nth(4).map(str::to_owned))?
    })?;
    let leaf = std::path::Path::new(&point)
        .join(path.trim_start_matches('/'))
        .join(format!("tether-bench-floor-{}", std::process::id()));
    std::fs::create_dir(&leaf).ok()?;
    let guard = TagGuard::new("bench-floor");
    let script = format!(
        "read go; for j in 1 2; do (i=0; while [ $i -lt {} ]; do setsid sleep 1000 & i=$((i+1)); done; wait) & done; \
         echo ready; exec sleep 1000",
        STORM / 2
    );
    let mut sh = std::process::Command::new("/bin/sh")
        .args(["-c", &script])
        .env(TAG_VAR, guard.tag())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .ok()?;
    std::fs::write(leaf.join("cgroup.procs"), sh.id().to_string()).ok()?;
    use std::io::Write;
    writeln!(sh.stdin.as_mut()?, "go").ok()?;
    let mut line = String::new();
    BufReader::new(sh.stdout.as_mut()?)
        .read_line(&mut line)
        .ok()?;
    let built = wait_for_count(guard.tag(), STORM, Duration::from_secs(120));
    assert!(built >= STORM, "only {built} of {STORM} built");
    let start = Instant::now();
    std::fs::write(leaf.join("cgroup.kill"), "1").ok()?;
    while !std::fs::read_to_string(leaf.join("cgroup.events"))
        .is_ok_and(|e| e.contains("populated 0"))
    {
        std::thread::sleep(Duration::from_micros(100));
    }
    let took = start.elapsed();
    let _ = sh.wait();
    let _ = std::fs::remove_dir(&leaf);
    Some(took)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(mut v: Vec<Duration>) -> (Duration, Duration, Duration) {
    v.sort();
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn spawn_true(limits: Limits) {
    let status = Command::new("/bin/true").limits(limits).status().unwrap();
    assert!(status.success());
}

pub fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    tether::keeper::run_if_requested();
    if !tether_testkit::is_root() {
        eprintln!("this benchmark needs root (cgroups)");
        return;
    }
    println!(
        "## fork-storm teardown: {STORM} processes, kill with no grace ({STORM_RUNS} runs each, interleaved)\n"
    );
    println!("| session | ladder | processes | p50 ms | min ms | max ms | p50 ratio |");
    println!("|---|---|---|---|---|---|---|");
    for term_first in [true, false] {
        let mut plain = Vec::new();
        let mut cgroup = Vec::new();
        let mut sizes = Vec::new();
        for _ in 0..STORM_RUNS {
            let (t, n) = storm_teardown(Limits::new(), term_first);
            plain.push(t);
            sizes.push(n);
            let (t, n) = storm_teardown(cgroup_only(), term_first);
            cgroup.push(t);
            sizes.push(n);
        }
        sizes.sort();
        let ladder = if term_first {
            "SIGTERM, then SIGKILL"
        } else {
            "SIGKILL only"
        };
        let (base, ..) = median(plain.clone());
        for (name, samples) in [
            ("no cgroup: per-process sweep", plain),
            ("own cgroup v2: cgroup.kill", cgroup),
        ] {
            let (p50, min, max) = median(samples);
            println!(
                "| {name} | {ladder} | {}–{} | {:.1} | {:.1} | {:.1} | {:.2} |",
                sizes[0],
                sizes[sizes.len() - 1],
                ms(p50),
                ms(min),
                ms(max),
                ms(p50) / ms(base)
            );
        }
    }

    let floor: Vec<Duration> = (0..STORM_RUNS).filter_map(|_| raw_cgroup_kill()).collect();
    if !floor.is_empty() {
        let (p50, min, max) = median(floor);
        println!(
            "| the kernel alone (no tether): `cgroup.kill` write → `populated 0` | — | {STORM} | {:.1} | {:.1} | {:.1} | — |",
            ms(p50),
            ms(min),
            ms(max)
        );
    }

    println!("\n## spawn + wait of /bin/true ({SPAWNS} iterations, interleaved)\n");
    println!("| limits | p50 µs | p90 µs | p50 ratio to none |");
    println!("|---|---|---|---|");
    let all = Limits::new().memory(1 << 30).pids(1_000).cpu(1.0);
    let cases: [(&str, Limits); 3] = [
        ("none", Limits::new()),
        ("pids (v2 leaf + v1 pids leaf)", Limits::new().pids(1_000)),
        ("memory + pids + cpu (v2 leaf + 3 v1 leaves)", all),
    ];
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); cases.len()];
    for (_, limits) in &cases {
        spawn_true(*limits); // warm-up
    }
    for _ in 0..SPAWNS {
        for (i, (_, limits)) in cases.iter().enumerate() {
            let start = Instant::now();
            spawn_true(*limits);
            samples[i].push(start.elapsed());
        }
    }
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let mut base = 0.0;
    for ((name, _), s) in cases.iter().zip(samples.iter_mut()) {
        s.sort();
        let p50 = us(s[s.len() / 2]);
        let p90 = us(s[s.len() * 9 / 10]);
        if base == 0.0 {
            base = p50;
        }
        println!("| {name} | {p50:.0} | {p90:.0} | {:.2} |", p50 / base);
    }
}
