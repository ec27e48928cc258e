//! See the bench target's own docs (`../storm.rs`).

use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::time::Duration;

use tether_testkit::{pidfd, tagged_pids, unique_tag, wait_all_dead};

use crate::support::owner::{keeper_phases, monotonic_ns, sigkill_all, start_owner};
use crate::support::{builds, listing, ms, percentile};

/// Two loops of 1,500 `setsid sleep`s, both done before the kill (the
/// storm is bounded), and the main process: 3,003 processes with the two
/// loops' subshells.
const SCRIPT: &str = "for j in 1 2; do (i=0; while [ $i -lt 1500 ]; do setsid sleep 1000 & \
                      i=$((i+1)); done; wait) & done; echo ready; exec sleep 1000";
const PROCESSES: usize = 3003;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Case {
    /// No tether: the bench `SIGKILL`s every process itself.
    Floor,
    /// `tether run` with these options, the owner `SIGKILL`ed; `true`:
    /// the `TETHER_BASELINE` build.
    Tether(&'static [&'static str], bool),
}

impl Case {
    fn name(self) -> String {
        match self {
            Case::Floor => "(a) no tether: the bench SIGKILLs every pid (floor)".into(),
            Case::Tether(extra, baseline) => format!(
                "({}) `tether run{}{}`, owner SIGKILLed{}",
                if extra.is_empty() { "b" } else { "c" },
                if extra.is_empty() { "" } else { " " },
                extra.join(" "),
                if baseline { " — baseline build" } else { "" }
            ),
        }
    }
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

struct Run {
    elapsed: Duration,
    processes: usize,
    /// The keeper's report (`TETHER_KEEPER_DEBUG`): its own line.
    keeper: Option<String>,
}

fn one_run(case: Case) -> Run {
    let tag = unique_tag("bench-storm");
    let home = tempfile::tempdir().unwrap();
    let mut command = match case {
        Case::Floor => Command::new("/bin/sh"),
        Case::Tether(extra, baseline) => {
            let build = builds();
            let mut c = Command::new(&build[usize::from(baseline)].path);
            c.arg("run").args(extra).arg("--").arg("/bin/sh");
            c
        }
    };
    let mut owner = start_owner(
        command
            .args(["-c", SCRIPT])
            .env("TETHER_KEEPER_DEBUG", "1")
            .stderr(Stdio::piped()),
        &tag,
        home.path(),
    );
    let _cleanup = Cleanup(&tag, owner.id());
    // The owner carries the tag too (tether's case; its keeper does not).
    let extra = if case == Case::Floor { 0 } else { 1 };
    let n = wait_for_storm(&tag, PROCESSES + extra);
    assert!(n >= PROCESSES + extra, "the storm built only {n} processes");
    let me = owner.id();
    let pids: Vec<u32> = tagged_pids(&tag)
        .into_iter()
        .filter(|&p| case == Case::Floor || (p != me && parent_of(p) != Some(me)))
        .collect();
    let fds: Vec<OwnedFd> = pids.iter().filter_map(|&p| pidfd(p)).collect();
    let kill_at = monotonic_ns();
    match case {
        Case::Tether(..) => owner.kill().unwrap(),
        Case::Floor => sigkill_all(&fds),
    }
    let all_dead = wait_dead(&fds);
    let rest = wait_all_dead(&tag, Duration::from_secs(30));
    assert!(rest.is_empty(), "leftovers: {}", rest.len());
    owner.wait().unwrap();
    let mut stderr = String::new();
    let _ = owner.stderr.take().unwrap().read_to_string(&mut stderr);
    Run {
        elapsed: Duration::from_nanos(all_dead - kill_at),
        processes: fds.len(),
        keeper: keeper_phases(&stderr).map(|l| {
            // Relative to the kill, in ms.
            l.split_whitespace()
                .filter_map(|w| {
                    let (k, v) = w.split_once('=')?;
                    let v: u64 = v.parse().ok()?;
                    Some(if k == "killed" {
                        format!("{k}={v}")
                    } else {
                        format!("{k}={:.1}", v.saturating_sub(kill_at) as f64 / 1e6)
                    })
                })
                .collect::<Vec<_>>()
                .join(" ")
        }),
    }
}

/// Waits until every pidfd is readable (its process exited): when the
/// last one was (monotonic ns). One epoll set: `poll(2)` over the
/// remaining descriptors after each exit costs O(n²) (3,003 pidfds: seconds).
fn wait_dead(fds: &[OwnedFd]) -> u64 {
    // SAFETY: epoll_create1 returns a new descriptor or -1.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    assert!(ep >= 0);
    for fd in fds {
        let mut event = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: fd.as_raw_fd() as u64,
        };
        // SAFETY: a valid epoll descriptor, a pidfd we hold.
        unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd.as_raw_fd(), &mut event) };
    }
    let mut left = fds.len();
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 512];
    while left > 0 {
        // SAFETY: `events` has room for its length.
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), events.len() as i32, 30_000) };
        assert!(n > 0, "processes still alive after 30 s");
        for event in &events[..n as usize] {
            // Level-triggered: taken out once seen.
            // SAFETY: as above.
            unsafe {
                libc::epoll_ctl(
                    ep,
                    libc::EPOLL_CTL_DEL,
                    event.u64 as i32,
                    std::ptr::null_mut(),
                )
            };
        }
        left -= n as usize;
    }
    let now = monotonic_ns();
    // SAFETY: ours.
    unsafe { libc::close(ep) };
    now
}

/// Counts the processes carrying `tag` until there are `n` (a scan every
/// 200 ms: each reads 3,000 environments, on the CPUs the storm forks on).
fn wait_for_storm(tag: &str, n: usize) -> usize {
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    loop {
        let count = tagged_pids(tag).len();
        if count >= n || std::time::Instant::now() >= deadline {
            return count;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Kills what a failed run left (the owner first: its keeper ends the
/// rest; then anything tagged).
struct Cleanup<'a>(&'a str, u32);

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // SAFETY: our own unreaped child: its pid is still its own.
            unsafe { libc::kill(self.1 as libc::pid_t, libc::SIGKILL) };
            tether_testkit::kill_tagged(self.0);
        }
    }
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

pub fn main() {
    if listing() {
        return;
    }
    let runs: usize = std::env::var("TETHER_STORM_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    let verbose = std::env::var_os("TETHER_STORM_VERBOSE").is_some();
    let mut cases = vec![Case::Floor];
    // With `TETHER_BASELINE`, that build's rows too, interleaved.
    for baseline in [false, true].into_iter().take(builds().len()) {
        cases.push(Case::Tether(&[], baseline));
        // `TETHER_STORM_NO_CGROUP`: (a) and (b) only.
        if tether_testkit::is_root() && std::env::var_os("TETHER_STORM_NO_CGROUP").is_none() {
            cases.push(Case::Tether(&["--pids", "100000"], baseline));
            cases.push(Case::Tether(&["--memory", "8G"], baseline));
        }
    }
    let load_before = load();
    let mut results: Vec<Vec<Run>> = cases.iter().map(|_| Vec::new()).collect();
    for round in 0..runs {
        for (c, &case) in cases.iter().enumerate() {
            let run = one_run(case);
            if verbose {
                eprintln!(
                    "round {round} {}: {:.1} ms, {} processes {}",
                    case.name(),
                    ms(run.elapsed),
                    run.processes,
                    run.keeper.as_deref().unwrap_or("")
                );
            }
            results[c].push(run);
        }
    }
    let floor = percentile(
        &results[0].iter().map(|r| r.elapsed).collect::<Vec<_>>(),
        0.5,
    );
    println!(
        "## bounded fork storm ({PROCESSES} processes) → all dead ({runs} runs each, interleaved; \
         load average {load_before} before, {} after)\n",
        load()
    );
    println!("| case | processes timed | p50 ms | min ms | max ms | p50 ratio to (a) |");
    println!("|---|---|---|---|---|---|");
    for (c, case) in cases.iter().enumerate() {
        let times: Vec<Duration> = results[c].iter().map(|r| r.elapsed).collect();
        let mut counts: Vec<usize> = results[c].iter().map(|r| r.processes).collect();
        counts.sort();
        let p50 = percentile(&times, 0.5);
        println!(
            "| {} | {}–{} | {:.1} | {:.1} | {:.1} | {:.2} |",
            case.name(),
            counts[0],
            counts[counts.len() - 1],
            ms(p50),
            ms(percentile(&times, 0.0)),
            ms(percentile(&times, 1.0)),
            p50.as_secs_f64() / floor.as_secs_f64()
        );
    }
}
