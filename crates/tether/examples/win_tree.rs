//! A small process tree for tether's Windows tests (run under Wine in CI):
//! `win_tree <mode> [args…]`. Portable enough to build everywhere; the
//! Windows tests are its only users.
//!
//! Modes:
//! - `args A B …`: prints each argument as a Rust debug string, one a line;
//! - `env NAME`: prints the variable's value;
//! - `exit CODE`: exits with CODE;
//! - `sleep SECS`;
//! - `tree SECS`: starts a grandchild (`sleep SECS`) at once, prints
//!   `<own pid> <grandchild pid>`, sleeps SECS;
//! - `tree-exit`: starts a grandchild (`sleep 60`), prints both pids, exits;
//! - `suspended`: starts a grandchild (`sleep 60`) created suspended — a
//!   process that has not started yet — prints both pids, sleeps 60 s;
//! - `breakaway`: tries to start a child outside its job, prints `error <code>`
//!   or `spawned <pid>`;
//! - `cat`: copies stdin to stdout;
//! - `spew BYTES`: writes BYTES bytes of a known pattern to stdout, exits;
//! - `owner SECS contained|uncontained|pty [marker]`: starts `tree SECS`
//!   through tether (in a job, uncontained by explicit policy, or in a job
//!   on a pseudoconsole; the marker only names the process for the test),
//!   prints `<own pid> <child pid> <grandchild pid>`, sleeps an hour;
//! - `ctrl-break`: exits 7 on CTRL_BREAK (prints `ready` first);
//! - `console-events`: exits 10 + the console control event's code
//!   (Ctrl-C 10, Ctrl-Break 11, console close 12; prints `ready` first);
//! - `spawn-many N SECS`: starts up to N children (`sleep SECS`), one after
//!   the other, stopping at the first that fails; prints `started K` or
//!   `started K error CODE` (the Windows error), then sleeps SECS;
//! - `alloc MIB`: commits and touches MIB MiB in 1 MiB blocks; prints
//!   `allocated` or `failed at K` (MiB reached when an allocation was
//!   refused) and exits 0 either way;
//! - `self-attach refused|on-request [launcher job handle]`: attaches itself
//!   to a kill-on-close job, starts a child (`sleep 60`) and, with
//!   `on-request`, one more with `CREATE_BREAKAWAY_FROM_JOB`; prints
//!   `<own pid> <child pid> <breakaway child pid or ->`, sleeps an hour.

// Leaving children behind is what this program is for.
#![allow(clippy::zombie_processes)]

use std::io::{BufRead, BufReader, Read, Write};
use std::process::Command;
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let me = std::env::current_exe().expect("own path");
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    let mut out = std::io::stdout();
    match arg(1).as_str() {
        "args" => {
            for a in &args[2..] {
                println!("{a:?}");
            }
        }
        "env" => println!("{}", std::env::var(arg(2)).unwrap_or_default()),
        "exit" => std::process::exit(arg(2).parse::<u32>().expect("code") as i32),
        "sleep" => std::thread::sleep(Duration::from_secs(arg(2).parse().expect("secs"))),
        "tree" => {
            let gc = Command::new(&me)
                .args(["sleep", &arg(2)])
                .spawn()
                .expect("grandchild");
            println!("{} {}", std::process::id(), gc.id());
            out.flush().unwrap();
            std::thread::sleep(Duration::from_secs(arg(2).parse().expect("secs")));
        }
        "tree-exit" => {
            let gc = Command::new(&me)
                .args(["sleep", "60"])
                .spawn()
                .expect("grandchild");
            println!("{} {}", std::process::id(), gc.id());
        }
        "suspended" => {
            let gc = suspended(&me);
            println!("{} {}", std::process::id(), gc.id());
            out.flush().unwrap();
            std::thread::sleep(Duration::from_secs(60));
        }
        "breakaway" => println!("{}", breakaway(&me)),
        "spawn-many" => {
            let n: usize = arg(2).parse().expect("count");
            let secs = arg(3);
            let mut children = Vec::new();
            let mut error = None;
            for _ in 0..n {
                match Command::new(&me).args(["sleep", &secs]).spawn() {
                    Ok(child) => children.push(child),
                    Err(e) => {
                        error = Some(e.raw_os_error().unwrap_or(-1));
                        break;
                    }
                }
            }
            match error {
                Some(code) => println!("started {} error {code}", children.len()),
                None => println!("started {}", children.len()),
            }
            out.flush().unwrap();
            std::thread::sleep(Duration::from_secs(secs.parse().expect("secs")));
        }
        "alloc" => {
            let mib: usize = arg(2).parse().expect("MiB");
            let mut blocks: Vec<Vec<u8>> = Vec::new();
            let mut failed = None;
            for i in 0..mib {
                let mut block = Vec::new();
                if block.try_reserve_exact(1 << 20).is_err() {
                    failed = Some(i);
                    break;
                }
                block.resize(1 << 20, 1u8);
                blocks.push(block);
            }
            match failed {
                Some(at) => println!("failed at {at}"),
                None => println!("allocated"),
            }
        }
        "cat" => {
            let mut buf = Vec::new();
            std::io::stdin().read_to_end(&mut buf).unwrap();
            out.write_all(&buf).unwrap();
        }
        "spew" => {
            let n: usize = arg(2).parse().expect("bytes");
            let chunk: Vec<u8> = (0..65536u32).map(|i| (i % 251) as u8).collect();
            let mut left = n;
            while left > 0 {
                let k = left.min(chunk.len());
                out.write_all(&chunk[..k]).unwrap();
                left -= k;
            }
        }
        "owner" => {
            let mut cmd = tether::Command::new(&me);
            cmd.args(["tree", &arg(2)]).stdout(tether::Stdio::Piped);
            if arg(3) == "uncontained" {
                cmd.containment(tether::ContainmentPolicy::Uncontained);
            }
            if arg(3) == "pty" {
                cmd.pty(tether::terminal::PtySize::default());
            }
            let mut child = cmd.spawn().expect("tether spawn");
            let line = match child.stdout.take() {
                Some(stdout) => {
                    let mut line = String::new();
                    BufReader::new(stdout).read_line(&mut line).unwrap();
                    line.trim().to_owned()
                }
                // On a pseudoconsole the child's line goes to the screen
                // (and nowhere under Wine 8): its job names the grandchild.
                None => format!("{} {}", child.id(), grandchild_of(&child)),
            };
            println!("{} {line}", std::process::id());
            out.flush().unwrap();
            std::thread::sleep(Duration::from_secs(3600));
            drop(child);
        }
        "ctrl-break" => ctrl_break(),
        "console-events" => console_events(),
        "self-attach" => self_attach(&me, &arg(2), &arg(3)),
        other => {
            eprintln!("win_tree: unknown mode {other:?}");
            std::process::exit(2);
        }
    }
}

/// The first descendant of `child` to appear in its job. No event tells
/// the owner of a new job member (the job monitor sees it, privately), so
/// look every 10 ms, for 10 s at most: `tree` starts it at once.
fn grandchild_of(child: &tether::Child) -> u32 {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(d) = child.descendants().first() {
            return d.pid;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "win_tree: no grandchild appeared"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(windows)]
fn suspended(me: &std::path::Path) -> std::process::Child {
    use std::os::windows::process::CommandExt;
    const CREATE_SUSPENDED: u32 = 0x0000_0004;
    Command::new(me)
        .args(["sleep", "60"])
        .creation_flags(CREATE_SUSPENDED)
        .spawn()
        .expect("suspended grandchild")
}

#[cfg(not(windows))]
fn suspended(me: &std::path::Path) -> std::process::Child {
    Command::new(me)
        .args(["sleep", "60"])
        .spawn()
        .expect("grandchild")
}

#[cfg(windows)]
fn breakaway(me: &std::path::Path) -> String {
    use std::os::windows::process::CommandExt;
    const CREATE_BREAKAWAY_FROM_JOB: u32 = 0x0100_0000;
    match Command::new(me)
        .args(["sleep", "60"])
        .creation_flags(CREATE_BREAKAWAY_FROM_JOB)
        .spawn()
    {
        Ok(mut child) => {
            let _ = child.kill();
            format!("spawned {}", child.id())
        }
        Err(e) => format!("error {}", e.raw_os_error().unwrap_or(-1)),
    }
}

#[cfg(not(windows))]
fn breakaway(_me: &std::path::Path) -> String {
    "error unsupported".into()
}

#[cfg(windows)]
fn self_attach(me: &std::path::Path, breakaway: &str, launcher: &str) {
    use std::os::windows::io::{FromRawHandle, OwnedHandle};
    use std::os::windows::process::CommandExt;
    use tether::windows::{Breakaway, attach_current_process};
    let launcher = launcher.parse::<usize>().ok().map(|value| {
        // SAFETY: the test handed this process an inheritable job handle
        // with this value; nothing else owns it here.
        unsafe { OwnedHandle::from_raw_handle(value as *mut std::ffi::c_void) }
    });
    let policy = if breakaway == "on-request" {
        Breakaway::OnRequest
    } else {
        Breakaway::Refused
    };
    attach_current_process(launcher, policy).expect("attach");
    let child = Command::new(me)
        .args(["sleep", "60"])
        .spawn()
        .expect("child");
    let escaped = if policy == Breakaway::OnRequest {
        const CREATE_BREAKAWAY_FROM_JOB: u32 = 0x0100_0000;
        let c = Command::new(me)
            .args(["sleep", "60"])
            .creation_flags(CREATE_BREAKAWAY_FROM_JOB)
            .spawn()
            .expect("breakaway child");
        c.id().to_string()
    } else {
        "-".into()
    };
    println!("{} {} {escaped}", std::process::id(), child.id());
    std::io::stdout().flush().unwrap();
    std::thread::sleep(Duration::from_secs(3600));
}

#[cfg(not(windows))]
fn self_attach(_me: &std::path::Path, _breakaway: &str, _launcher: &str) {
    std::process::exit(2)
}

/// Installs `handler` (which exits) for console control events, prints
/// `ready`, then waits for one.
#[cfg(windows)]
fn exit_on_console_event(handler: unsafe extern "system" fn(u32) -> i32) {
    unsafe extern "system" {
        fn SetConsoleCtrlHandler(
            handler: Option<unsafe extern "system" fn(u32) -> i32>,
            add: i32,
        ) -> i32;
    }
    // SAFETY: `handler` is a valid routine for the life of the process.
    unsafe { SetConsoleCtrlHandler(Some(handler), 1) };
    println!("ready");
    std::io::stdout().flush().unwrap();
    std::thread::sleep(Duration::from_secs(60));
}

#[cfg(windows)]
fn ctrl_break() {
    unsafe extern "system" fn handler(_event: u32) -> i32 {
        std::process::exit(7)
    }
    exit_on_console_event(handler);
}

#[cfg(not(windows))]
fn ctrl_break() {
    std::process::exit(2)
}

#[cfg(windows)]
fn console_events() {
    unsafe extern "system" fn handler(event: u32) -> i32 {
        std::process::exit(10 + event as i32)
    }
    exit_on_console_event(handler);
}

#[cfg(not(windows))]
fn console_events() {
    std::process::exit(2)
}
