//! Windows costs, under Wine in CI (Wine figures are not Windows figures:
//! only the ratios, measured in the same run, mean anything).
//!
//! ```text
//! cargo build --release --target x86_64-pc-windows-gnu -p process-tether --example win_tree
//! cargo bench --target x86_64-pc-windows-gnu -p process-tether --bench windows
//! ```
//!
//! Prints markdown tables:
//! 1. spawn + wait of a trivial exe (`win_tree exit 0`): `std::process::Command`
//!    against `tether::Command` (a job per spawn, `CreateProcessW` inside it,
//!    the job monitor reporting the exit); p50, p90, the p50 ratio to std;
//! 2. owner death → tree gone: `TerminateProcess` of an owner holding a
//!    child and a grandchild in its job, until both are dead (waited on
//!    their handles).

#[cfg(not(windows))]
fn main() {
    eprintln!("the windows bench runs on Windows (or under Wine): see its docs");
}

#[cfg(windows)]
fn main() {
    imp::main()
}

#[cfg(windows)]
mod imp {
    use std::io::{BufRead, BufReader};
    use std::path::PathBuf;
    use std::time::{Duration, Instant};

    use tether::ProcessIdentity;
    use tether::sys::{self, Pinned};

    const SPAWNS: usize = 100;
    const DEATHS: usize = 15;

    fn win_tree() -> PathBuf {
        let exe = std::env::current_exe().unwrap();
        let path = exe
            .parent()
            .and_then(|d| d.parent())
            .unwrap()
            .join(r"examples\win_tree.exe");
        assert!(
            path.is_file(),
            "{} is missing: cargo build --release --example win_tree",
            path.display()
        );
        path
    }

    fn percentile(samples: &mut [Duration], p: f64) -> Duration {
        samples.sort();
        samples[((samples.len() as f64 - 1.0) * p).round() as usize]
    }

    fn ms(d: Duration) -> f64 {
        d.as_secs_f64() * 1e3
    }

    fn pin(pid: u32) -> Pinned {
        let info = sys::process(pid).unwrap();
        Pinned::pin(&ProcessIdentity {
            boot_id: sys::boot_id().to_owned(),
            pid,
            start_time: info.start_time,
            pidfs_inode: None,
        })
        .unwrap()
        .unwrap()
    }

    pub fn main() {
        if let Some(v) = tether::windows::wine_version() {
            println!("(under Wine {v}: not Windows figures)\n");
        }
        let exe = win_tree();
        let std_run = || {
            let status = std::process::Command::new(&exe)
                .args(["exit", "0"])
                .status()
                .unwrap();
            assert!(status.success());
        };
        let tether_run = || {
            let status = tether::Command::new(&exe)
                .args(["exit", "0"])
                .status()
                .unwrap();
            assert!(status.success());
        };
        let cases: [(&str, &dyn Fn()); 2] = [
            ("std::process::Command", &std_run),
            ("tether::Command (job)", &tether_run),
        ];
        let mut samples = vec![Vec::with_capacity(SPAWNS); cases.len()];
        for (_, f) in &cases {
            f();
        }
        for _ in 0..SPAWNS {
            for (i, (_, f)) in cases.iter().enumerate() {
                let t = Instant::now();
                f();
                samples[i].push(t.elapsed());
            }
        }
        println!("spawn + wait of a trivial exe ({SPAWNS} each, interleaved)\n");
        println!("| how | p50 ms | p90 ms | p50 / std |");
        println!("|---|---|---|---|");
        let base = percentile(&mut samples[0].clone(), 0.5);
        for (i, (name, _)) in cases.iter().enumerate() {
            let p50 = percentile(&mut samples[i], 0.5);
            let p90 = percentile(&mut samples[i], 0.9);
            println!(
                "| {name} | {:.2} | {:.2} | {:.2}× |",
                ms(p50),
                ms(p90),
                p50.as_secs_f64() / base.as_secs_f64()
            );
        }

        let mut deaths = Vec::with_capacity(DEATHS);
        for _ in 0..DEATHS {
            let mut owner = std::process::Command::new(&exe)
                .args(["owner", "60", "contained"])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let mut line = String::new();
            BufReader::new(owner.stdout.take().unwrap())
                .read_line(&mut line)
                .unwrap();
            let pids: Vec<u32> = line
                .split_whitespace()
                .map(|p| p.parse().unwrap())
                .collect();
            let (o, c, g) = (pin(pids[0]), pin(pids[1]), pin(pids[2]));
            let t = Instant::now();
            o.kill().unwrap();
            sys::wait_exited(&[&c, &g], Duration::from_secs(10));
            let took = t.elapsed();
            assert!(c.has_exited() && g.has_exited(), "tree survived its owner");
            deaths.push(took);
            let _ = owner.wait();
        }
        let p50 = percentile(&mut deaths, 0.5);
        let p90 = percentile(&mut deaths, 0.9);
        println!("\nowner death → child and grandchild dead ({DEATHS} runs)\n");
        println!("| p50 ms | p90 ms |");
        println!("|---|---|");
        println!("| {:.2} | {:.2} |", ms(p50), ms(p90));
    }
}
