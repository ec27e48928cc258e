//! PTY sessions against their baselines, measured in the same run (this
//! machine is shared and noisy, so only ratios mean anything).
//!
//! `cargo bench -p process-tether --bench pty` prints markdown tables:
//! 1. a registry session of `/bin/true` from `run` to settled, on a PTY and
//!    on pipes, interleaved: p50, p90, the PTY/pipe ratio;
//! 2. capture throughput: 64 MiB written to the terminal (raw mode) into a
//!    registry PTY session — ring, spill, screen — against a plain blocking
//!    read loop on the master of the same kind of terminal, for raw bulk
//!    output and for a TUI-shaped stream, with the default screen lag
//!    (`RegistryConfig::screen_lag`) and with 4 MiB, interleaved; and what
//!    the first look at the screen after it costs (the parse the capture
//!    left for later);
//! 3. the screen (the `vt100` emulator): parse cost per MiB of typical
//!    full-screen TUI output, and the cost of rendering one screen.

use std::io::Read;
use std::time::{Duration, Instant};

use tether::registry::{
    DEFAULT_SCREEN_LAG, Registry, RegistryConfig, RunSpec, WaitOptions, WaitOutcome,
};
use tether::terminal::{Emulator, PtySize};

const SESSIONS: usize = 200;
const CAPTURE: usize = 64 << 20;
const ROUNDS: usize = 5;
/// The most a PTY session's screen lagged before `screen_lag` existed.
const SMALL_LAG: u64 = 4 << 20;

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

async fn settle(registry: &Registry, spec: RunSpec) -> Duration {
    settle_id(registry, spec).await.0
}

/// Runs `spec` to settled: how long it took, and its id.
async fn settle_id(registry: &Registry, spec: RunSpec) -> (Duration, tether::SessionId) {
    let start = Instant::now();
    let id = registry.run(spec).await.unwrap();
    let waited = registry
        .wait(
            id.as_str(),
            WaitOptions::new(Duration::from_secs(600)).settled(),
        )
        .await
        .unwrap();
    assert_eq!(waited.outcome, WaitOutcome::Exited);
    (start.elapsed(), id)
}

/// The baseline: `script` on a PTY, its master read in a plain blocking
/// loop (no ring, spill or screen), until EOF and the exit.
fn raw_capture(script: &str) -> Duration {
    let start = Instant::now();
    let mut child = tether::Command::new("/bin/sh")
        .args(["-c", script])
        .pty(PtySize::default())
        .spawn()
        .unwrap();
    let mut master = child.pty.take().unwrap();
    let mut buf = vec![0u8; 64 << 10];
    let mut total = 0;
    loop {
        let n = master.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        total += n;
    }
    child.wait().unwrap();
    assert_eq!(total, CAPTURE);
    start.elapsed()
}

/// Bytes of every value, in a period no buffer size divides.
fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((i % 4093) * 31 + i / 4093) as u8)
        .collect()
}

/// What `top`/`htop` send: per frame, home, then every row addressed, a few
/// colour changes, text, clear to end of line; cursor hidden while drawing.
fn tui_frames(bytes: usize, size: PtySize) -> (Vec<u8>, usize) {
    let mut out = Vec::with_capacity(bytes + 8192);
    let mut frame = 0usize;
    while out.len() < bytes {
        out.extend_from_slice(b"\x1b[?25l\x1b[H");
        for row in 1..=size.rows() as usize {
            out.extend_from_slice(format!("\x1b[{row};1H").as_bytes());
            out.extend_from_slice(format!("\x1b[1;3{}m{:>6} ", row % 8, frame + row).as_bytes());
            out.extend_from_slice(b"\x1b[0muser     20   0 ");
            out.extend_from_slice(
                format!(
                    "\x1b[32m{:>5.1}%\x1b[0m ",
                    (frame * row % 1000) as f64 / 10.0
                )
                .as_bytes(),
            );
            let width = size.cols() as usize - 40;
            out.extend((0..width).map(|i| b'a' + ((i + frame + row) % 26) as u8));
            out.extend_from_slice(b"\x1b[K");
        }
        out.extend_from_slice(b"\x1b[?25h");
        frame += 1;
    }
    (out, frame)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // cargo test --benches asks for a list; nothing to list
    }
    tether::keeper::run_if_requested();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let registry = Registry::new(RegistryConfig::default());
        let pipe = || RunSpec::argv(["/bin/true"]);
        let pty = || RunSpec::argv(["/bin/true"]).pty(PtySize::default());
        settle(&registry, pipe()).await;
        settle(&registry, pty()).await;
        let (mut pipes, mut ptys) = (Vec::new(), Vec::new());
        for _ in 0..SESSIONS {
            pipes.push(settle(&registry, pipe()).await);
            ptys.push(settle(&registry, pty()).await);
        }
        println!(
            "## registry session of /bin/true, run to settled ({SESSIONS} each, interleaved)\n"
        );
        println!("| session | p50 ms | p90 ms | p50 ratio to pipes |");
        println!("|---|---|---|---|");
        let base = percentile(&mut pipes, 0.5);
        for (name, samples) in [("pipes", &mut pipes), ("PTY", &mut ptys)] {
            let p50 = percentile(samples, 0.5);
            println!(
                "| {name} | {:.2} | {:.2} | {:.2} |",
                ms(p50),
                ms(percentile(samples, 0.9)),
                ms(p50) / ms(base)
            );
        }

        let dir = tempfile::tempdir().unwrap();
        // The default lag, and the 4 MiB the screen lagged at most before
        // `screen_lag` (every look cheap, a flood read at the parse's pace):
        // both against the raw loop, round by round.
        let lags = [DEFAULT_SCREEN_LAG, SMALL_LAG];
        let registries = lags.map(|screen_lag| {
            Registry::new(RegistryConfig {
                spill_dir: Some(dir.path().to_owned()),
                screen_lag,
                ..RegistryConfig::default()
            })
        });
        let streams = [
            ("raw bulk output (bytes of every value)", pattern(CAPTURE)),
            (
                "TUI-shaped output (30×120 full redraws, colours)",
                tui_frames(CAPTURE, PtySize::default()).0[..CAPTURE].to_vec(),
            ),
        ];
        let mib = (CAPTURE >> 20) as f64;
        let mbps = |d: Duration| mib / d.as_secs_f64();
        println!(
            "\n## capture of {mib} MiB written to the terminal (median of {ROUNDS}, interleaved)\n"
        );
        println!(
            "| stream | blocking read loop on the master, MiB/s | registry PTY session (ring, spill, screen), MiB/s | ratio | then the screen, ms |"
        );
        println!("|---|---|---|---|---|");
        for (name, data) in streams {
            let file = dir.path().join("data");
            std::fs::write(&file, &data).unwrap();
            let script = format!("stty raw -echo && cat '{}'", file.display());
            let mut raw = Vec::new();
            let mut captured = [Vec::new(), Vec::new()];
            let mut looked = [Vec::new(), Vec::new()];
            for _ in 0..ROUNDS {
                raw.push(raw_capture(&script));
                for (i, registry) in registries.iter().enumerate() {
                    let spec = RunSpec::shell(script.clone())
                        .pty(PtySize::default())
                        .spill_cap(CAPTURE as u64);
                    let (took, id) = settle_id(registry, spec).await;
                    captured[i].push(took);
                    // What the capture did not parse, a look at the screen does.
                    let start = Instant::now();
                    registry.screen(id.as_str()).unwrap();
                    looked[i].push(start.elapsed());
                }
            }
            let base = percentile(&mut raw, 0.5);
            for (i, lag) in lags.iter().enumerate() {
                let session = percentile(&mut captured[i], 0.5);
                println!(
                    "| {name}, screen lag {} MiB | {:.0} | {:.0} | {:.2} | {:.1} |",
                    lag >> 20,
                    mbps(base),
                    mbps(session),
                    mbps(session) / mbps(base),
                    ms(percentile(&mut looked[i], 0.5))
                );
            }
        }
    });

    let size = PtySize::default();
    let (tui, frames) = tui_frames(16 << 20, size);
    let mut emulator = Emulator::new(size);
    emulator.feed(&tui[..1 << 20]); // warm-up
    let mut parse = Vec::new();
    for _ in 0..ROUNDS {
        let start = Instant::now();
        for chunk in tui.chunks(4096) {
            emulator.feed(chunk);
        }
        parse.push(start.elapsed());
    }
    let per_mib = percentile(&mut parse, 0.5) / (tui.len() >> 20) as u32;
    let frame_bytes = tui.len() / frames;
    let mut render = Vec::new();
    for _ in 0..1000 {
        let start = Instant::now();
        std::hint::black_box(emulator.screen());
        render.push(start.elapsed());
    }
    println!(
        "\n## the screen: {size} emulator, typical TUI output (~{} KiB per full redraw)\n",
        frame_bytes >> 10
    );
    println!("| what | cost |");
    println!("|---|---|");
    println!("| parse 1 MiB of TUI output | {:.2} ms |", ms(per_mib));
    println!(
        "| render one screen (text rows, cursor, modes) | {:.1} µs |",
        percentile(&mut render, 0.5).as_secs_f64() * 1e6
    );
}
