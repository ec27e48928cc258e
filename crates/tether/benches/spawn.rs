//! Spawn cost: `tether::Command` against `std::process::Command` in the same
//! run (this machine is shared and noisy, so only ratios mean anything).
//!
//! `cargo bench -p process-tether --bench spawn` prints markdown tables:
//! 1. spawn + wait of `/bin/true`: std, tether with a cold keeper, tether
//!    with warm keepers, and std plus one round trip to a waiting process
//!    (the least a keeper can cost), and that plus the reads of a warm
//!    keeper's inheritance check and of the command's identity (Linux: the
//!    least a warm keeper can cost while it passes on what the owner has
//!    and identifies what it started); p50, p90 and the p50 ratio to std.
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

/// What a warm keeper makes the owner read before each command, replayed
/// here (a copy of `Inheritance::now`, `src/contain/unix/inheritance.rs`
/// and `src/contain/linux/inheritance.rs`: the same files, links and
/// calls): the check that the keeper still passes on the owner's umask,
/// credentials, capabilities, seccomp filters, limits, namespaces and
/// cgroup. With one round trip, the least a warm keeper can cost while it
/// keeps that guarantee; keep it in step with those two files.
#[cfg(target_os = "linux")]
fn inheritance_reads() -> usize {
    use std::io::Read;
    let read = |path: &str| {
        let mut buf = vec![0u8; 4096];
        let mut file = std::fs::File::open(path).unwrap();
        let n = file.read(&mut buf).unwrap();
        buf.truncate(n);
        buf
    };
    let mut seen = 0;
    // SAFETY: getuid & co. touch no memory; getrlimit and getgroups write
    // into buffers owned here.
    unsafe {
        seen += (libc::getuid() + libc::geteuid() + libc::getgid() + libc::getegid()) as usize;
        let mut groups = [0 as libc::gid_t; 64];
        seen += libc::getgroups(64, groups.as_mut_ptr()).max(0) as usize;
        for resource in 0..16 {
            let mut rlim = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::getrlimit(resource, &mut rlim);
            seen += rlim.rlim_cur as usize & 1;
        }
        seen += libc::getpriority(libc::PRIO_PROCESS, 0) as usize;
    }
    seen += read("/proc/thread-self/status").len();
    seen += std::fs::read_link("/proc/thread-self/root")
        .unwrap()
        .as_os_str()
        .len();
    let ns = std::fs::File::open("/proc/thread-self/ns").unwrap();
    for name in [
        "cgroup",
        "ipc",
        "mnt",
        "net",
        "pid_for_children",
        "time_for_children",
        "user",
        "uts",
    ] {
        seen += nix::fcntl::readlinkat(&ns, name).map_or(0, |t| t.len());
    }
    seen + read("/proc/self/cgroup").len()
}

/// A command's identity as the keeper takes it before it answers: a pidfd
/// and the start time from `/proc/PID/stat`.
#[cfg(target_os = "linux")]
fn identity(pid: u32) -> usize {
    use std::io::Read;
    // SAFETY: pidfd_open takes no memory; the descriptor is closed below.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    assert!(
        pidfd >= 0,
        "pidfd_open: {}",
        std::io::Error::last_os_error()
    );
    let mut stat = [0u8; 1024];
    let n = std::fs::File::open(format!("/proc/{pid}/stat"))
        .unwrap()
        .read(&mut stat)
        .unwrap();
    // SAFETY: our descriptor, closed once.
    unsafe { libc::close(pidfd as libc::c_int) };
    n
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
    // The least a warm keeper adds while it keeps its guarantees: the
    // owner's inheritance check, the command's identity taken while it is
    // unreaped (what the keeper does: a pidfd and `/proc/PID/stat`), one
    // round trip. The spawn and the wait are std's.
    #[cfg(target_os = "linux")]
    let floor = || {
        std::hint::black_box(inheritance_reads());
        let mut child = std::process::Command::new("/bin/true").spawn().unwrap();
        std::hint::black_box(identity(child.id()));
        assert!(child.wait().unwrap().success());
        echo.borrow_mut().round_trip();
    };
    #[cfg_attr(not(target_os = "linux"), allow(unused_mut))]
    let mut warm_cases: Vec<(&str, &dyn Fn())> = vec![
        ("std::process::Command", &std_true),
        ("tether, warm keepers", &tether_true),
        (
            "std::process::Command + one round trip to a waiting process",
            &std_and_round_trip,
        ),
    ];
    #[cfg(target_os = "linux")]
    warm_cases.push((
        "… + the inheritance check's reads + the command's identity (pidfd, /proc/PID/stat)",
        &floor,
    ));
    let warm = measure(&warm_cases, ITERATIONS);
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
