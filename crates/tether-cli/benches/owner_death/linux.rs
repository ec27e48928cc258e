//! See the bench target's own docs (`../owner_death.rs`).

use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::time::Duration;

use tether_testkit::{Tree, pidfd, tagged_pids, unique_tag, wait_all_dead, wait_for_count};

use crate::support::owner::{keeper_phases, monotonic_ns, sigkill_all, start_owner};
use crate::support::{Build, builds, listing, ms, percentile};

const RUNS: usize = 15;

/// Who kills the tree.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Killer {
    /// The owner (`tether run`) is SIGKILLed; its keeper does the rest.
    OwnerDeath,
    /// The bench SIGKILLs every process of the tree itself through pidfds
    /// it already holds: the kernel's floor for this tree.
    Bench,
}

/// The keeper's report of one kill (`TETHER_KEEPER_DEBUG`), in
/// `CLOCK_MONOTONIC` nanoseconds.
#[derive(Clone, Copy, Debug, Default)]
struct KeeperPhases {
    /// The kill began (here: the keeper read the lifeline's EOF).
    began: u64,
    /// The tree's members were listed and pinned (one walk of the tree).
    listed: u64,
    /// The first signal reached every listed member.
    signalled: u64,
    /// The keeper saw its tree empty.
    empty: u64,
}

fn parse_phases(stderr: &str) -> Option<KeeperPhases> {
    let line = keeper_phases(stderr)?;
    let field = |name: &str| -> Option<u64> {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))?
            .parse()
            .ok()
    };
    Some(KeeperPhases {
        began: field("began")?,
        listed: field("listed")?,
        signalled: field("signalled")?,
        empty: field("empty")?,
    })
}

/// One run's figures.
struct Run {
    /// Processes of the tree when the kill was sent.
    processes: usize,
    /// When the kill was sent (monotonic ns).
    kill_at: u64,
    /// When the first and the last process of the tree were seen dead.
    first_dead: u64,
    all_dead: u64,
    keeper: Option<KeeperPhases>,
}

impl Run {
    fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.all_dead - self.kill_at)
    }
}

fn one_run(build: &Build, tree: Tree, containment: &str, extra: &[&str], killer: Killer) -> Run {
    let tag = unique_tag("bench-owner-death");
    let home = tempfile::tempdir().unwrap();
    let mut owner = start_owner(
        Command::new(&build.path)
            .args(["run", "--grace", "1s", "--containment", containment])
            .args(extra)
            .args(["--", "/bin/sh", "-c", tree.script()])
            .env("TETHER_KEEPER_DEBUG", "1")
            .stderr(Stdio::piped()),
        &tag,
        home.path(),
    );
    assert!(
        wait_for_count(&tag, tree.min_processes(), Duration::from_secs(30)) >= tree.min_processes()
    );
    let pids: Vec<u32> = tagged_pids(&tag)
        .into_iter()
        .filter(|&p| p != owner.id())
        .collect();
    let fds: Vec<OwnedFd> = pids.iter().filter_map(|&p| pidfd(p)).collect();
    let kill_at = monotonic_ns();
    match killer {
        Killer::OwnerDeath => owner.kill().unwrap(),
        Killer::Bench => sigkill_all(&fds),
    }
    let (first_dead, all_dead) = wait_dead(&fds);
    // Anything forked after the snapshot must be gone too.
    let rest = wait_all_dead(&tag, Duration::from_secs(10));
    assert!(rest.is_empty(), "leftovers: {rest:?}");
    owner.wait().unwrap();
    // The keeper (which shares the owner's stderr) reports when it is done.
    let mut stderr = String::new();
    let _ = owner.stderr.take().unwrap().read_to_string(&mut stderr);
    Run {
        processes: pids.len(),
        kill_at,
        first_dead,
        all_dead,
        keeper: parse_phases(&stderr),
    }
}

/// Waits for every pidfd to turn readable: when the first and the last did
/// (monotonic ns).
fn wait_dead(fds: &[OwnedFd]) -> (u64, u64) {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|f| libc::pollfd {
            fd: f.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let mut first = None;
    while pfds.iter().any(|p| p.revents == 0) {
        let mut pending: Vec<libc::pollfd> =
            pfds.iter().copied().filter(|p| p.revents == 0).collect();
        // SAFETY: valid pollfd array.
        unsafe { libc::poll(pending.as_mut_ptr(), pending.len() as libc::nfds_t, 10_000) };
        let now = monotonic_ns();
        for p in pending.iter().filter(|p| p.revents != 0) {
            first.get_or_insert(now);
            pfds.iter_mut().find(|q| q.fd == p.fd).unwrap().revents = p.revents;
        }
    }
    let last = monotonic_ns();
    (first.unwrap_or(last), last)
}

fn p50_ms(values: impl Iterator<Item = u64>) -> String {
    let samples: Vec<Duration> = values.map(Duration::from_nanos).collect();
    if samples.is_empty() {
        return "—".into();
    }
    format!("{:.1}", ms(percentile(&samples, 0.5)))
}

/// How the tables name a containment given `tether run`'s extra options.
fn containment_name(containment: &str, extra: &[&str]) -> String {
    if extra.is_empty() {
        containment.to_owned()
    } else {
        format!("{containment} + own cgroup ({})", extra.join(" "))
    }
}

pub fn main() {
    if listing() {
        return;
    }
    let builds = builds();
    // A process limit far above the tree gives the session cgroups of its
    // own (root): the keeper's KILL rung is then `cgroup.kill`. (This
    // build only: a baseline may not know `--pids`.)
    let cgroup: &[&str] = &["--pids", "100000"];
    let mut cases = vec![
        (Tree::Hundred, "subreaper", &[][..], Killer::OwnerDeath),
        (Tree::Hundred, "pidns", &[][..], Killer::OwnerDeath),
        (Tree::Hundred, "subreaper", &[][..], Killer::Bench),
        (Tree::ForkStorm, "subreaper", &[][..], Killer::OwnerDeath),
    ];
    // Issue 34 item 10: a storm of 3,000 `setsid sleep`s, built, then the
    // owner SIGKILLed — against the same tree SIGKILLed process by process
    // by the bench (the floor), in the same run.
    cases.push((Tree::BoundedStorm, "subreaper", &[][..], Killer::OwnerDeath));
    cases.push((Tree::BoundedStorm, "subreaper", &[][..], Killer::Bench));
    if tether_testkit::is_root() {
        cases.push((Tree::Hundred, "subreaper", cgroup, Killer::OwnerDeath));
        cases.push((Tree::ForkStorm, "subreaper", cgroup, Killer::OwnerDeath));
        cases.push((Tree::BoundedStorm, "subreaper", cgroup, Killer::OwnerDeath));
        cases.push((
            Tree::BoundedStorm,
            "subreaper",
            &["--memory", "8G", "--pids", "100000"][..],
            Killer::OwnerDeath,
        ));
    }
    // `TETHER_BENCH_TREE=BoundedStorm`: only that tree's cases.
    if let Ok(only) = std::env::var("TETHER_BENCH_TREE") {
        cases.retain(|(tree, ..)| format!("{tree:?}") == only);
    }
    // runs[case][build]
    let mut runs: Vec<Vec<Vec<Run>>> = cases
        .iter()
        .map(|_| builds.iter().map(|_| Vec::new()).collect())
        .collect();
    for (c, &(tree, containment, extra, killer)) in cases.iter().enumerate() {
        let builds_here = if killer == Killer::Bench || !extra.is_empty() {
            1
        } else {
            builds.len()
        };
        for _ in 0..RUNS {
            for (b, build) in builds.iter().enumerate().take(builds_here) {
                runs[c][b].push(one_run(build, tree, containment, extra, killer));
            }
        }
    }

    println!("## owner SIGKILL → whole tree dead ({RUNS} runs each, builds interleaved)\n");
    println!(
        "| tree | containment | killed by | build | processes at kill: median (min–max) | p50 ms | max ms |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (c, &(tree, containment, extra, killer)) in cases.iter().enumerate() {
        let containment = containment_name(containment, extra);
        for (b, build) in builds.iter().enumerate() {
            let runs = &runs[c][b];
            if runs.is_empty() {
                continue;
            }
            let times: Vec<Duration> = runs.iter().map(Run::elapsed).collect();
            let mut counts: Vec<usize> = runs.iter().map(|r| r.processes).collect();
            counts.sort();
            let count = format!(
                "{} ({}–{})",
                counts[counts.len() / 2],
                counts[0],
                counts[counts.len() - 1]
            );
            let killed_by = match killer {
                Killer::OwnerDeath => "owner SIGKILL → keeper",
                Killer::Bench => "the bench: SIGKILL per pidfd (kernel floor)",
            };
            println!(
                "| {tree:?} | {containment} | {killed_by} | {} | {count} | {:.1} | {:.1} |",
                build.name,
                ms(percentile(&times, 0.5)),
                ms(percentile(&times, 1.0))
            );
        }
    }

    // Each tree's owner-death cases as a ratio to its floor (the bench's
    // own SIGKILLs) in this run, where the run has one.
    let floors: Vec<(Tree, Duration)> = cases
        .iter()
        .enumerate()
        .filter(|(_, case)| case.3 == Killer::Bench)
        .map(|(c, case)| {
            let times: Vec<Duration> = runs[c][0].iter().map(Run::elapsed).collect();
            (case.0, percentile(&times, 0.5))
        })
        .collect();
    if !floors.is_empty() {
        println!("\n## owner SIGKILL ÷ the floor (p50 over p50, same run)\n");
        println!("| tree | containment | build | ratio |");
        println!("|---|---|---|---|");
        for (c, &(tree, containment, extra, killer)) in cases.iter().enumerate() {
            let Some(&(_, floor)) = floors.iter().find(|(t, _)| *t == tree) else {
                continue;
            };
            if killer != Killer::OwnerDeath {
                continue;
            }
            for (b, build) in builds.iter().enumerate() {
                let times: Vec<Duration> = runs[c][b].iter().map(Run::elapsed).collect();
                if times.is_empty() {
                    continue;
                }
                println!(
                    "| {tree:?} | {} | {} | {:.2} |",
                    containment_name(containment, extra),
                    build.name,
                    percentile(&times, 0.5).as_secs_f64() / floor.as_secs_f64()
                );
            }
        }
    }

    println!("\n## where the time goes: p50 ms of each phase (owner SIGKILL, {RUNS} runs)\n");
    println!(
        "| tree | containment | build | SIGKILL → keeper reads EOF | → members listed and pinned | → the first signal at all of them | → first process dead | → last process dead | → keeper sees the tree empty |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (c, &(tree, containment, extra, killer)) in cases.iter().enumerate() {
        if killer != Killer::OwnerDeath {
            continue;
        }
        let containment = containment_name(containment, extra);
        for (b, build) in builds.iter().enumerate() {
            let runs = &runs[c][b];
            if runs.is_empty() {
                continue;
            }
            let keeper = || runs.iter().filter_map(|r| r.keeper.map(|k| (r, k)));
            println!(
                "| {tree:?} | {containment} | {} | {} | {} | {} | {} | {} | {} |",
                build.name,
                p50_ms(keeper().map(|(r, k)| k.began.saturating_sub(r.kill_at))),
                p50_ms(keeper().map(|(_, k)| k.listed.saturating_sub(k.began))),
                p50_ms(keeper().map(|(_, k)| k.signalled.saturating_sub(k.listed))),
                p50_ms(runs.iter().map(|r| r.first_dead - r.kill_at)),
                p50_ms(runs.iter().map(|r| r.all_dead - r.kill_at)),
                p50_ms(keeper().map(|(r, k)| k.empty.saturating_sub(r.kill_at))),
            );
        }
    }
    println!(
        "\n(the first three columns are steps; the last three are measured from the SIGKILL. \
         The keeper's phases need this build's `TETHER_KEEPER_DEBUG` report: — where a build has none)"
    );
}
