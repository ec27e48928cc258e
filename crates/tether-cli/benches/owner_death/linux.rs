//! See the bench target's own docs (`../owner_death.rs`).

use std::io::Read;
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tether_testkit::{
    TAG_VAR, Tree, pidfd, tagged_pids, unique_tag, wait_all_dead, wait_for_count,
};

const RUNS: usize = 15;

/// One run: returns the time from the owner's SIGKILL until every process
/// of the tree has exited.
fn one_run(tree: Tree, containment: &str, extra: &[&str]) -> (Duration, usize) {
    let tag = unique_tag("bench-owner-death");
    let mut owner = Command::new(env!("CARGO_BIN_EXE_tether"))
        .args(["run", "--grace", "1s", "--containment", containment])
        .args(extra)
        .args(["--", "/bin/sh", "-c", tree.script()])
        .env(TAG_VAR, &tag)
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let mut ready = [0u8; 6];
    owner
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut ready)
        .unwrap();
    assert!(
        wait_for_count(&tag, tree.min_processes(), Duration::from_secs(30)) >= tree.min_processes()
    );
    let pids = tagged_pids(&tag);
    let fds: Vec<_> = pids.iter().filter_map(|&p| pidfd(p)).collect();
    owner.kill().unwrap();
    let start = Instant::now();
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|f| libc::pollfd {
            fd: f.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // Wait for every pidfd to turn readable.
    while pfds.iter().any(|p| p.revents == 0) {
        let mut pending: Vec<libc::pollfd> =
            pfds.iter().copied().filter(|p| p.revents == 0).collect();
        // SAFETY: valid pollfd array.
        unsafe { libc::poll(pending.as_mut_ptr(), pending.len() as libc::nfds_t, 10_000) };
        for p in pending.iter().filter(|p| p.revents != 0) {
            pfds.iter_mut().find(|q| q.fd == p.fd).unwrap().revents = p.revents;
        }
    }
    let elapsed = start.elapsed();
    // Anything forked after the snapshot must be gone too.
    let rest = wait_all_dead(&tag, Duration::from_secs(10));
    assert!(rest.is_empty(), "leftovers: {rest:?}");
    owner.wait().unwrap();
    (elapsed, pids.len())
}

pub fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    println!("## owner SIGKILL → whole tree dead ({RUNS} runs each, interleaved)\n");
    println!("| tree | containment | processes at kill: median (min–max) | p50 ms | max ms |");
    println!("|---|---|---|---|---|");
    // A process limit far above the tree gives the session cgroups of its
    // own (root): the keeper's KILL rung is then `cgroup.kill`.
    let cgroup: &[&str] = &["--pids", "100000"];
    let mut cases = vec![
        (Tree::Hundred, "subreaper", &[][..]),
        (Tree::Hundred, "pidns", &[][..]),
        (Tree::ForkStorm, "subreaper", &[][..]),
    ];
    if tether_testkit::is_root() {
        cases.push((Tree::Hundred, "subreaper", cgroup));
        cases.push((Tree::ForkStorm, "subreaper", cgroup));
    }
    // Round-robin, so that the machine's noise hits every case alike.
    let mut results: Vec<Vec<(Duration, usize)>> = vec![Vec::new(); cases.len()];
    for _ in 0..RUNS {
        for (i, (tree, containment, extra)) in cases.iter().enumerate() {
            results[i].push(one_run(*tree, containment, extra));
        }
    }
    for ((tree, containment, extra), runs) in cases.into_iter().zip(results) {
        let mut times: Vec<Duration> = runs.iter().map(|r| r.0).collect();
        let mut counts: Vec<usize> = runs.iter().map(|r| r.1).collect();
        times.sort();
        counts.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let count = format!("{} ({}–{})", counts[RUNS / 2], counts[0], counts[RUNS - 1]);
        let containment = if extra.is_empty() {
            containment.to_owned()
        } else {
            format!("{containment} + own cgroup ({})", extra.join(" "))
        };
        println!(
            "| {tree:?} | {containment} | {count} | {:.1} | {:.1} |",
            ms(times[RUNS / 2]),
            ms(times[RUNS - 1])
        );
    }
}
