//! See the bench target's own docs (`../registry.rs`).

use std::io::Read;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tether::registry::{Registry, RegistryConfig, RunSpec, WaitOptions};

const GIB: u64 = 1 << 30;

pub fn main() {
    raise_fd_limit();
    let rt = runtime();
    println!("registry figures (2 cores here; medians of 5 where timed)");
    throughput(&rt);
    idle_memory(&rt);
    start_many(&rt, 1000);
    divan::main();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// 1,000 live sessions hold ~4 descriptors each.
fn raise_fd_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max.min(1 << 16);
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// The baseline: spawn `head`, read its stdout pipe to EOF with reads of
/// the pipe's size; `pipe_size` enlarges the pipe (as the registry does).
fn raw_read(pipe_size: Option<usize>) -> Duration {
    let start = Instant::now();
    let mut child = std::process::Command::new("head")
        .args(["-c", &GIB.to_string(), "/dev/zero"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn head");
    let mut out = child.stdout.take().unwrap();
    if let Some(size) = pipe_size {
        use std::os::fd::AsRawFd;
        // SAFETY: fcntl(F_SETPIPE_SZ) on a pipe we own; no memory passed.
        unsafe { libc::fcntl(out.as_raw_fd(), libc::F_SETPIPE_SZ, size as libc::c_int) };
    }
    let mut buf = vec![0u8; pipe_size.unwrap_or(64 * 1024)];
    let mut total = 0u64;
    loop {
        match out.read(&mut buf).expect("read") {
            0 => break,
            n => total += n as u64,
        }
    }
    child.wait().expect("wait");
    assert_eq!(total, GIB);
    start.elapsed()
}

/// The baseline plus the writes a spill file gets, outside tether: the
/// same read loop (256 KiB pipe, as the registry's), and the first
/// `spill` bytes written to a fresh nameless file in `dir` in 1 MiB
/// `pwrite`s at increasing offsets — what a session's spill does with a
/// 1 MiB ring. Shows what fresh page-cache pages cost on this machine.
fn raw_read_spilling(dir: &std::path::Path, spill: u64) -> Duration {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let start = Instant::now();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .open(dir)
        .expect("a nameless file in the spill directory");
    let mut child = std::process::Command::new("head")
        .args(["-c", &GIB.to_string(), "/dev/zero"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn head");
    let mut out = child.stdout.take().unwrap();
    {
        use std::os::fd::AsRawFd;
        // SAFETY: fcntl(F_SETPIPE_SZ) on a pipe we own; no memory passed.
        unsafe { libc::fcntl(out.as_raw_fd(), libc::F_SETPIPE_SZ, 256 << 10) };
    }
    let mut buf = vec![0u8; 256 << 10];
    let mut staged: Vec<u8> = Vec::with_capacity(1 << 20);
    let (mut total, mut written) = (0u64, 0u64);
    loop {
        let n = out.read(&mut buf).expect("read");
        if n == 0 {
            break;
        }
        total += n as u64;
        if written < spill {
            staged.extend_from_slice(&buf[..n]);
            if staged.len() >= 1 << 20 {
                file.write_all_at(&staged, written).expect("spill write");
                written += staged.len() as u64;
                staged.clear();
            }
        }
    }
    child.wait().expect("wait");
    assert_eq!(total, GIB);
    start.elapsed()
}

/// The same through a registry session (default buffers: 1 MiB ring,
/// 256 MiB spill file), until the session is settled.
fn captured(rt: &tokio::runtime::Runtime, registry: &Registry, spill_cap: u64) -> Duration {
    rt.block_on(async {
        let start = Instant::now();
        let spec =
            RunSpec::argv(["head", "-c", &GIB.to_string(), "/dev/zero"]).spill_cap(spill_cap);
        let id = registry.run(spec).await.expect("run");
        let done = registry
            .wait(
                id.as_str(),
                WaitOptions::new(Duration::from_secs(120)).settled(),
            )
            .await
            .expect("wait");
        assert_eq!(done.info.output_bytes, GIB);
        start.elapsed()
    })
}

fn throughput(rt: &tokio::runtime::Runtime) {
    let _guard = rt.enter();
    let registry = Registry::new(RegistryConfig::default());
    // Where the registry makes its spill files (its default).
    let spill_dir = std::env::var_os("XDG_RUNTIME_DIR")
        .map(std::path::PathBuf::from)
        .filter(|d| d.is_absolute() && d.is_dir())
        .unwrap_or_else(std::env::temp_dir);
    let (mut raw, mut raw_big, mut spill, mut ring, mut raw_spill) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..5 {
        raw.push(raw_read(None));
        raw_big.push(raw_read(Some(256 << 10)));
        raw_spill.push(raw_read_spilling(
            &spill_dir,
            tether::output::DEFAULT_SPILL_CAP,
        ));
        spill.push(captured(rt, &registry, tether::output::DEFAULT_SPILL_CAP));
        ring.push(captured(rt, &registry, 0));
    }
    let gibps = |d: Duration| 1.0 / d.as_secs_f64();
    let ratio = |base: Duration, d: Duration| base.as_secs_f64() / d.as_secs_f64();
    let (raw, raw_big, spill, ring, raw_spill) = (
        median(raw),
        median(raw_big),
        median(spill),
        median(ring),
        median(raw_spill),
    );
    println!(
        "capture 1 GiB: raw read loop {:.2} GiB/s (64 KiB pipe), {:.2} GiB/s (256 KiB pipe, as the registry's)",
        gibps(raw),
        gibps(raw_big)
    );
    println!(
        "  registry, ring only (spill cap 0): {:.2} GiB/s = {:.2} × raw 64 KiB, {:.2} × raw 256 KiB",
        gibps(ring),
        ratio(raw, ring),
        ratio(raw_big, ring)
    );
    println!(
        "  registry, default 256 MiB spill file: {:.2} GiB/s = {:.2} × raw 64 KiB, {:.2} × raw 256 KiB",
        gibps(spill),
        ratio(raw, spill),
        ratio(raw_big, spill)
    );
    println!(
        "  the same writes outside tether (raw 256 KiB loop + 256 MiB in 1 MiB pwrites to a fresh file in {}): {:.2} GiB/s = {:.2} × raw 256 KiB; the registry with its spill file = {:.2} × this",
        spill_dir.display(),
        gibps(raw_spill),
        ratio(raw_big, raw_spill),
        ratio(raw_spill, spill)
    );
}

fn status_kib(pid: u32, field: &str) -> u64 {
    let path = format!("/proc/{pid}/status");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn pss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Pss:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn idle_memory(rt: &tokio::runtime::Runtime) {
    const N: usize = 500;
    let _guard = rt.enter();
    let registry = Registry::new(RegistryConfig {
        max_live: N + 100,
        ..RegistryConfig::default()
    });
    let me = std::process::id();
    rt.block_on(async {
        // Warm-up: runtime threads, blocking pool, allocator arenas.
        let mut warm = Vec::new();
        for _ in 0..100 {
            warm.push(registry.run(RunSpec::argv(["sleep", "1000"])).await.unwrap());
        }
        for id in &warm {
            registry.kill(id.as_str(), Duration::ZERO).await.unwrap();
        }
        let before = status_kib(me, "VmRSS");
        let mut ids = Vec::new();
        for _ in 0..N {
            ids.push(registry.run(RunSpec::argv(["sleep", "1000"])).await.unwrap());
        }
        let after = status_kib(me, "VmRSS");
        let keepers: Vec<u32> = registry
            .list()
            .iter()
            .filter(|i| i.is_running())
            .filter_map(|i| tether::sys::process(i.pid()).ok().map(|s| s.ppid))
            .collect();
        let rss: u64 = keepers.iter().map(|&k| status_kib(k, "VmRSS")).sum();
        let pss: u64 = keepers.iter().map(|&k| pss_kib(k)).sum();
        let n = keepers.len().max(1) as u64;
        println!(
            "idle sessions: {:.1} KiB each in the registry's process ({N} sessions, RSS {before} → {after} KiB); \
             keeper process: {} KiB RSS, {} KiB PSS each",
            (after.saturating_sub(before)) as f64 / N as f64,
            rss / n,
            pss / n,
        );
        registry.shutdown().await.unwrap();
    });
}

fn start_many(rt: &tokio::runtime::Runtime, n: usize) {
    let _guard = rt.enter();
    let registry = std::sync::Arc::new(Registry::new(RegistryConfig {
        max_live: n + 10,
        ..RegistryConfig::default()
    }));
    rt.block_on(async {
        let start = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..n {
            let registry = std::sync::Arc::clone(&registry);
            tasks.spawn(async move { registry.run(RunSpec::argv(["sleep", "1000"])).await });
        }
        while let Some(started) = tasks.join_next().await {
            started.unwrap().unwrap();
        }
        let elapsed = start.elapsed();
        let kill_start = Instant::now();
        registry.shutdown().await.unwrap();
        println!(
            "start {n} concurrent sessions: {:.0} ms ({:.2} ms each); shutdown (verified kill of all): {:.0} ms",
            elapsed.as_secs_f64() * 1e3,
            elapsed.as_secs_f64() * 1e3 / n as f64,
            kill_start.elapsed().as_secs_f64() * 1e3,
        );
    });
}

/// Baseline: `true` through `std::process::Command::output`.
#[divan::bench(sample_count = 50)]
fn short_command_std() {
    let out = std::process::Command::new("true").output().unwrap();
    assert!(out.status.success());
}

/// `true` through a registry session, to its settled end.
#[divan::bench(sample_count = 50)]
fn short_command_registry(bencher: divan::Bencher) {
    let rt = runtime();
    let _guard = rt.enter();
    let registry = Registry::new(RegistryConfig::default());
    bencher.bench_local(|| {
        rt.block_on(async {
            let id = registry.run(RunSpec::argv(["true"])).await.unwrap();
            registry
                .wait(
                    id.as_str(),
                    WaitOptions::new(Duration::from_secs(10)).settled(),
                )
                .await
                .unwrap();
        })
    });
}
