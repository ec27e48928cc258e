//! See the bench target's own docs (`../ps_reap.rs`).

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const FORKER_ROLE: &str = "TETHER_BENCH_FORKER";
const UNTAGGED: usize = 9_000;
const ORPHANS: usize = 500;
const OWNED: usize = 500;

static HOME: OnceLock<PathBuf> = OnceLock::new();

pub fn main() {
    if let Ok(n) = std::env::var(FORKER_ROLE) {
        forker(n.parse().expect("forker count"));
    }
    let home = tempfile::tempdir().expect("temp home");
    HOME.set(home.path().to_path_buf()).unwrap();
    let install = tether::Install::at(home.path());
    let started = Instant::now();
    let dead_owner = dead_process();
    let me = tether::ProcessIdentity::current().unwrap();
    let tag = |owner: (u32, u64), session: &str| {
        format!(
            "v1:{}:bench:{}:{}:{session}",
            install.id(),
            owner.0,
            owner.1
        )
    };
    let crowd = vec![
        Forker::start(UNTAGGED, None),
        Forker::start(ORPHANS, Some(&tag(dead_owner, "orphans"))),
        Forker::start(OWNED, Some(&tag((me.pid, me.start_time), "owned"))),
    ];
    let scan = tether_ledger::Scan::take();
    let tagged = scan.of_install(install.id()).count();
    println!(
        "crowd: {} processes on the machine, {tagged} tagged with the bench install (built in {:.1} s)",
        scan.scanned,
        started.elapsed().as_secs_f64()
    );
    assert_eq!(tagged, ORPHANS + OWNED, "the crowd is not complete");

    let tether = env!("CARGO_BIN_EXE_tether");
    let version = measure(Command::new(tether).arg("--version"));
    let procps = measure(Command::new("ps").args(["-e", "-o", "pid,args"]));
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{RUNS} runs each, end to end; wall min / median, and median CPU (user+sys) — \
         CPU does not depend on what else the 2 cores here are doing:"
    );
    let line = |name: &str, m: &Measured, note: &str| {
        println!(
            "  {name:<30} wall {:6.1} / {:6.1} ms   cpu {:6.1} ms  {note}",
            ms(m.wall_min),
            ms(m.wall_median),
            ms(m.cpu_median)
        );
    };
    line("tether --version", &version, "(baseline: exec + startup)");
    line(
        "ps -e -o pid,args (procps)",
        &procps,
        "(baseline: reads every cmdline)",
    );
    let free_dir = HOME.get().unwrap().to_str().expect("UTF-8 temp path");
    for (name, args) in [
        ("tether ps", &["ps"][..]),
        // Every process's exe, cwd, descriptors and maps, each object
        // compared with a directory nothing holds (text, then identity).
        (
            "tether ps --holding DIR",
            &["ps", "--holding", free_dir][..],
        ),
        ("tether ps --json", &["ps", "--json"][..]),
        ("tether reap --dry-run", &["reap", "--dry-run"][..]),
        (
            "tether reap --dry-run --json",
            &["reap", "--dry-run", "--json"][..],
        ),
    ] {
        let m = measure(&mut tether_cmd(tether, args));
        let verdict = if m.wall_min <= Duration::from_millis(100) {
            "met"
        } else {
            "MISSED"
        };
        line(
            name,
            &m,
            &format!(
                "({:.2}x procps wall; goal <= 100 ms: {verdict})",
                m.wall_median.as_secs_f64() / procps.wall_median.as_secs_f64()
            ),
        );
    }
    divan::main();
    drop(crowd);
    drop(home);
}

fn tether_cmd(tether: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(tether);
    cmd.args(args).env("TETHER_HOME", HOME.get().unwrap());
    cmd
}

const RUNS: usize = 11;

/// Wall time (min, median) and CPU time (median) of running a command.
struct Measured {
    wall_min: Duration,
    wall_median: Duration,
    cpu_median: Duration,
}

fn measure(cmd: &mut Command) -> Measured {
    let mut wall = Vec::with_capacity(RUNS);
    let mut cpu = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let before = children_cpu();
        wall.push(time(cmd));
        cpu.push(children_cpu().saturating_sub(before));
    }
    wall.sort();
    cpu.sort();
    Measured {
        wall_min: wall[0],
        wall_median: wall[RUNS / 2],
        cpu_median: cpu[RUNS / 2],
    }
}

/// User + system CPU time of every waited-for child so far.
fn children_cpu() -> Duration {
    // SAFETY: getrusage fills a struct we own.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Wall time of running `cmd` to completion, output discarded.
fn time(cmd: &mut Command) -> Duration {
    let start = Instant::now();
    let status = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run");
    let elapsed = start.elapsed();
    assert!(status.success(), "{cmd:?} failed");
    elapsed
}

/// (pid, start time) of a process that has exited and been reaped.
fn dead_process() -> (u32, u64) {
    let mut child = Command::new("sleep").arg("1000").spawn().unwrap();
    let start = tether::sys::process(child.id()).unwrap().start_time;
    child.kill().unwrap();
    child.wait().unwrap();
    (child.id(), start)
}

/// A forker process: it and its children are `n` processes, all blocked
/// reading a pipe whose only writer is `stdin` here.
struct Forker {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
}

impl Forker {
    fn start(n: usize, tag: Option<&str>) -> Forker {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.env(FORKER_ROLE, n.to_string())
            .env_remove(tether::SPAWN_TAG_VAR)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        if let Some(tag) = tag {
            cmd.env(tether::SPAWN_TAG_VAR, tag);
        }
        let mut child = cmd.spawn().expect("start forker");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("forker ready");
        assert_eq!(line, "ready\n");
        let stdin = child.stdin.take();
        Forker { child, stdin }
    }
}

impl Drop for Forker {
    fn drop(&mut self) {
        drop(self.stdin.take()); // EOF: every member exits
        let _ = self.child.wait();
    }
}

/// The forker role: fork `n - 1` children (single-threaded, before
/// anything else runs); every member blocks reading stdin and exits at EOF.
fn forker(n: usize) -> ! {
    let mut children = Vec::with_capacity(n);
    for _ in 1..n {
        // SAFETY: this process is single-threaded here (the role is taken
        // before any thread exists); the child only calls read and _exit.
        match unsafe { libc::fork() } {
            0 => block_on_stdin(),
            -1 => panic!("fork: {}", std::io::Error::last_os_error()),
            pid => children.push(pid),
        }
    }
    let mut out = std::io::stdout();
    out.write_all(b"ready\n").unwrap();
    out.flush().unwrap();
    let mut buf = [0u8; 64];
    // SAFETY: read into a local buffer.
    while unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
    for pid in children {
        let mut status = 0;
        // SAFETY: waitpid on our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
    }
    std::process::exit(0);
}

fn block_on_stdin() -> ! {
    let mut buf = [0u8; 64];
    // SAFETY: read(2) and _exit(2) are async-signal-safe.
    unsafe {
        while libc::read(0, buf.as_mut_ptr().cast(), buf.len()) > 0 {}
        libc::_exit(0)
    }
}

fn install() -> tether::Install {
    tether::Install::at(HOME.get().unwrap())
}

#[divan::bench(sample_count = 20, sample_size = 1)]
fn scan() -> usize {
    tether_ledger::Scan::take().processes.len()
}

#[divan::bench(sample_count = 20, sample_size = 1)]
fn census() -> usize {
    let install = install();
    let ledger = tether_ledger::Ledger::open(&install);
    let census = tether_ledger::Census::take(
        install.id(),
        install.state_dir().join(tether_ledger::LEDGER_FILE),
        ledger.as_ref().map_err(|e| e.to_string()),
        false,
    );
    census.owners.len()
}

#[divan::bench(sample_count = 20, sample_size = 1)]
fn reap_plan() -> usize {
    let opts = tether_ledger::ReapOptions {
        dry_run: true,
        ..Default::default()
    };
    tether_ledger::plan(install().id(), Default::default(), &opts)
        .targets
        .len()
}
