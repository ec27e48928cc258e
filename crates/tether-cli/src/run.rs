//! `tether run`: one command, contained, with `timeout(1)` exit codes.
//! (Exit codes are a byte on Unix and 32 bits on Windows, so `main` passes
//! them on per OS.)

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use serde::Serialize;
use tether::terminal::Passthrough;
use tether::{Command, ContainmentPolicy, Error, ExitStatus, SignalForwarder};
use tether_ledger::{LimitsRecord, RunRecording, SessionStart};

use crate::EXIT_TETHER_ERROR;

#[derive(Args, Debug)]
#[command(after_help = "\
Exit status (as timeout(1)): the program's own code; 128+N if signal N killed it; \
124 if --timeout expired; 125 if tether itself failed; 126 if the program is not \
executable; 127 if it was not found.

When the program exits, any descendants it left behind are killed (TERM, then KILL \
after --grace) before tether returns. SIGINT sent to tether is forwarded to the \
program's process group (as a terminal's Ctrl-C reaches only its foreground job); SIGTERM \
and SIGHUP to every process of the tree at once; either way the whole tree is killed after \
--grace unless it ended by itself. If tether itself is killed, even with SIGKILL, the tree dies with it.

With --pty the program runs on a pseudo-terminal of its own, sized like tether's terminal \
and resized with it; tether's terminal is put in raw mode (every key, Ctrl-C included, goes \
to the program's terminal) and restored however tether ends: exit, signal, timeout or error. \
Kills of a PTY program start with SIGHUP, as when a terminal closes.

On Windows the tree is a job object: the exit status is the program's full 32-bit \
code (1 for a process tether's kill ended); Ctrl-C, Ctrl-Break and console close \
send CTRL_BREAK to the program's process group and kill the whole tree after \
--grace; --shell runs cmd.exe /d /s /c.

Examples:
  tether run -- make -j8
  tether run --timeout 30s --shell 'npm test | tee log'
  tether run --json -- sh -c 'echo out; echo err >&2; exit 3'
  tether run --pty --timeout 10m -- ssh host")]
pub struct RunArgs {
    /// Kill the whole tree when the program runs longer than this (e.g. 30, 1.5s, 500ms, 2m).
    #[arg(long, value_parser = crate::duration::parse, value_name = "DUR")]
    timeout: Option<Duration>,
    /// Time between SIGTERM and SIGKILL when killing the tree.
    #[arg(long, value_parser = crate::duration::parse, value_name = "DUR", default_value = "2s")]
    grace: Duration,
    /// Working directory for the program.
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// Set an environment variable (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = parse_env)]
    env: Vec<(OsString, OsString)>,
    /// Run one command string with the platform's shell (/bin/sh -c; on Windows cmd.exe /d /s /c).
    #[arg(long)]
    shell: bool,
    /// How to hold the tree (`tether doctor` says what this machine offers).
    ///
    /// A subreaper keeper, a PID namespace (airtight even if the keeper is SIGKILLed; needs
    /// root or user namespaces), or auto (pidns when possible).
    #[arg(long, value_enum, value_name = "HOW", default_value = "standard")]
    containment: ContainmentArg,
    /// Capture stdout and stderr and print one JSON object with the result.
    #[arg(long)]
    json: bool,
    /// With --json: keep at most this many bytes of each stream (the last ones).
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20)]
    max_output: usize,
    /// Run the program on a pseudo-terminal of its own (REPLs, TUIs, ssh).
    ///
    /// The pseudo-terminal is attached to this terminal, for programs that need a terminal of
    /// their own.
    #[arg(long, conflicts_with = "json")]
    pty: bool,
    /// Purpose written into the spawn tag of every process.
    #[arg(long, default_value = "run")]
    purpose: String,
    /// Memory limit for the whole tree (e.g. 512M, 2G).
    ///
    /// Past it the kernel's OOM killer kills one of its processes (never tether); the result
    /// says the limit was hit. How it is enforced (cgroup v2, v1, a job) is in `--json`'s
    /// `limits`; `tether doctor` says what this machine offers.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    memory: Option<u64>,
    /// Most processes the tree may have at once: past it fork fails.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pids: Option<u64>,
    /// CPU limit in cores, fractional (e.g. 0.5, 2).
    ///
    /// The tree is throttled to it, never killed for it.
    #[arg(long, value_name = "CORES", value_parser = parse_cores)]
    cpu: Option<f64>,
    /// Exit 125 unless every limit given is enforced.
    ///
    /// The reason is printed and the program never starts. Without it a limit this machine cannot enforce is reported as `none` (with --json, in
    /// `limits`; otherwise in a one-line warning on stderr) and the program runs without it.
    #[arg(long)]
    require_limits: bool,
    /// Keep it running past this command, until --ttl.
    ///
    /// Held by your holder until its TTL or a `tether kill`. Returns at once, printing the session's id (with --json, an object with `id`, `name`,
    /// `durable`, `ttl_s`). Re-adopt it with `tether sessions`, `attach`, `kill`, `extend`.
    #[arg(long, conflicts_with_all = ["timeout", "max_output", "containment"])]
    durable: bool,
    /// With --durable: a name for it, unique among this user's running durable sessions.
    #[arg(
        long,
        value_name = "NAME",
        requires = "durable",
        hide_short_help = true
    )]
    name: Option<String>,
    /// With --durable: kill it at this age (default 24h, at most 168h = 7 days).
    #[arg(
        long,
        value_parser = crate::duration::parse,
        value_name = "DUR",
        requires = "durable",
        hide_short_help = true
    )]
    ttl: Option<Duration>,
    /// With --durable --name: kill a running session of that name first.
    #[arg(long, requires = "name", hide_short_help = true)]
    replace: bool,
    /// The program and its arguments (with --shell: the command string).
    #[arg(required = true, trailing_var_arg = true, value_name = "PROGRAM")]
    command: Vec<OsString>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ContainmentArg {
    /// The platform's standard holder (Linux: a subreaper keeper).
    Standard,
    /// The strongest the kernel allows here (Linux: pidns when possible).
    Auto,
    /// Linux: a subreaper keeper (the same as `standard` there).
    Subreaper,
    /// Linux: a PID namespace, or an error.
    Pidns,
    /// Windows: no job at all — the tree does NOT die with tether (reported as `none`).
    None,
}

fn parse_size(text: &str) -> Result<u64, String> {
    tether::parse_size(text).map_err(|e| e.to_string())
}

fn parse_cores(text: &str) -> Result<f64, String> {
    let cores: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("expected a number of cores such as 0.5 or 2, got {text:?}"))?;
    tether::Limits::new()
        .cpu(cores)
        .validate()
        .map_err(|e| e.to_string())?;
    Ok(cores)
}

fn parse_env(text: &str) -> Result<(OsString, OsString), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.into(), value.into())),
        _ => Err(format!("expected KEY=VALUE, got {text:?}")),
    }
}

#[derive(Serialize)]
struct JsonResult {
    exit_code: Option<i32>,
    signal: Option<i32>,
    timed_out: bool,
    duration_ms: u64,
    stdout: String,
    stderr: String,
    stdout_truncated: bool,
    stderr_truncated: bool,
    stdout_dropped_bytes: u64,
    stderr_dropped_bytes: u64,
    descendants_killed: u32,
    containment: String,
    pid: u32,
    session: String,
    /// Per limit asked for: the value and how it was enforced (`{}`: no
    /// limits).
    limits: LimitsRecord,
    /// `"memory"`, `"pids"`, or null.
    limit_hit: Option<&'static str>,
    /// Processes the OOM killer killed for the memory limit (0 if none).
    oom_kills: u32,
    /// Processes the OOM killer killed for memory that ran out outside the
    /// session's own limit (its owner's cgroup limit, the machine's).
    oom_killed_outside: u32,
    /// Processes found outside the session's cgroups (out of its limits):
    /// `[{"pid": 123, "cgroup": "memory:/user.slice", "moved_back": true,
    /// "times_moved_back": 1}]`.
    limits_escaped: Vec<EscapeRecord>,
    /// Why tether could not tell how the command ended (its keeper died:
    /// the orphans were killed, `orphans_killed` of them, the main process
    /// among them if it still ran); null when it could. Exit status 125.
    error: Option<String>,
    /// Processes of a lost keeper's tree that tether killed (null unless
    /// the keeper was lost).
    orphans_killed: Option<usize>,
}

/// One process found outside the session's cgroups.
#[derive(Serialize)]
struct EscapeRecord {
    pid: u32,
    cgroup: String,
    /// Whether the keeper moved it back into the session's cgroups.
    moved_back: bool,
    /// How many times (it can leave again).
    times_moved_back: u32,
}

pub fn main(args: RunArgs) -> ExitCode {
    if args.durable {
        return crate::durable::start(durable_request(&args), args.json);
    }
    match run(args) {
        // Windows exit codes are 32-bit (0xC0000005 for an access
        // violation): passed on whole, never cut to a byte.
        #[cfg(windows)]
        Ok(code) => {
            use std::io::Write;
            let _ = std::io::stdout().flush();
            std::process::exit(code)
        }
        #[cfg(not(windows))]
        Ok(code) => ExitCode::from(code as u8),
        Err(err) => {
            // A keeper started ahead that no spawn took (the program was
            // not found, a bad --cwd, …) goes now, reaped, not after us.
            tether::set_warm_keepers(0);
            eprintln!("tether: {err}");
            ExitCode::from(exit_code_for_error(&err))
        }
    }
}

fn exit_code_for_error(err: &Error) -> u8 {
    match err {
        Error::ProgramNotFound { .. } => 127,
        Error::NotExecutable { .. } => 126,
        _ => EXIT_TETHER_ERROR,
    }
}

fn run(args: RunArgs) -> Result<i32, Error> {
    // Orphans of a SIGKILLed keeper come back to us, and we kill them.
    tether::become_subreaper()?;
    // What the command sends "its parent" (`kill -USR1 $PPID`) its keeper
    // passes on to us: dropped, where it would end this run.
    tether::absorb_parent_signals()?;
    // Before any thread exists: only the forwarder may see these signals
    // (and with --pty, only the pass-through's thread SIGWINCH).
    let forwarder = SignalForwarder::install()?;
    let passthrough = if args.pty {
        Some(Passthrough::install()?)
    } else {
        None
    };
    // The keeper's exec runs while we set up; the spawn below takes it
    // (the same session in both tags). Best effort: without it the spawn
    // starts one itself (and says why, if that fails too).
    let session = tether::SessionId::generate();
    if args.memory.is_some() || args.pids.is_some() || args.cpu.is_some() {
        // Before any keeper of ours exists: where cgroup v2 is delegated
        // to us, readying the controllers may move this process into a
        // leaf of its own, which it does only while alone in its cgroup.
        tether::prepare_limits();
    }
    let _ = tether::start_keeper_ahead(&session);
    let recording = RunRecording::begin(&tether::Install::from_env(), "run").map_err(Error::Io)?;

    let mut command = if args.shell {
        let script = args
            .command
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ");
        Command::shell(&script)
    } else {
        let mut c = Command::new(&args.command[0]);
        c.args(&args.command[1..]);
        c
    };
    command
        .session_id(session)
        .grace(args.grace)
        .purpose(&args.purpose)
        .envs(args.env.iter().map(|(k, v)| (k, v)));
    command.containment(match args.containment {
        ContainmentArg::Auto => ContainmentPolicy::Auto,
        ContainmentArg::Standard | ContainmentArg::Subreaper => ContainmentPolicy::Standard,
        ContainmentArg::Pidns => ContainmentPolicy::PidNamespace,
        ContainmentArg::None => ContainmentPolicy::Uncontained,
    });
    if let Some(cwd) = &args.cwd {
        command.current_dir(cwd);
    }
    if let Some(timeout) = args.timeout {
        command.timeout(timeout);
    }
    command.limits(tether::Limits {
        memory: args.memory,
        pids: args.pids,
        cpu: args.cpu,
        require: args.require_limits,
    });
    if args.json {
        command
            .stdin(tether::Stdio::Null)
            .stdout(tether::Stdio::Piped)
            .stderr(tether::Stdio::Piped);
    } else if args.pty {
        command.pty(Passthrough::size().unwrap_or_default());
    } else {
        // On a terminal the command is the foreground job, as under a
        // shell: it can read the terminal, Ctrl-Z stops it (and us).
        command.foreground(true);
    }
    let started = Instant::now();
    // Without --json or --pty this thread waits for the command at once
    // (after ~0.1 ms of recording and forwarding set-up) and until it
    // ended: that wait watches the keeper, and no guard thread is started.
    let plain = !args.json && !args.pty;
    let spawned = if plain {
        command.spawn_attended()
    } else {
        command.spawn()
    };
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            // Nothing started: nothing to record.
            recording.abandon();
            return Err(e);
        }
    };
    let recording = recording.started(session_start(&child, &args));
    forwarder.forward_to(&child)?;
    if !args.json
        && let Some(line) = unenforced(child.limits())
    {
        // Not silent: a limit asked for and not enforced is said, once,
        // before the program's own output.
        eprintln!("tether: {line}");
    }

    if let Some(passthrough) = &passthrough {
        let pty = child.pty.take().expect("a PTY child has a master");
        // Until nobody holds the terminal: the program and whatever it
        // left are gone (exited, timed out, killed by a forwarded signal)
        // or have closed it. The terminal's mode is restored before this
        // returns, either way.
        // The keeper's events are followed meanwhile: its death is noticed
        // even while orphans hold the terminal.
        passthrough.attach_child(&pty, &mut child)?;
        // The master stays open until the program has exited: closing it
        // hangs the terminal up, and a program that closed its terminal
        // just before exiting (GNU tools do) would die of that SIGHUP.
        let status = child.wait()?;
        drop(pty);
        recording.end(child.session_id(), &status);
        return Ok(exit_code(&status));
    }
    if !args.json {
        let status = child.wait()?;
        if let Some(line) = escaped(child.limits_escaped()) {
            eprintln!("tether: {line}");
        }
        recording.end(child.session_id(), &status);
        return Ok(exit_code(&status));
    }
    let containment = child.containment().to_string();
    let limits = LimitsRecord::of(child.limits()).unwrap_or_default();
    let pid = child.id();
    let session = child.session_id().to_string();
    let session_id = child.session_id().clone();
    // The keeper's events are followed while the output is read: its
    // death is noticed at once even while orphans hold the pipes, and the
    // result says so, with the output read until then.
    let (output, waited) = child.wait_with_captured_output(args.max_output);
    let (status, error, orphans_killed) = match waited {
        Ok(status) => {
            recording.end(&session_id, &status);
            (Some(status), None, None)
        }
        // The command started: there is a result to print, and the error
        // is its cause (plain mode prints the error alone). The journal
        // says the run ended without saying how, as after a SIGKILL.
        Err(e @ (Error::KeeperLost { .. } | Error::Keeper(_) | Error::Io(_))) => {
            let orphans_killed = match &e {
                Error::KeeperLost { orphans_killed } => Some(*orphans_killed),
                _ => None,
            };
            eprintln!("tether: {e}");
            (None, Some(e.to_string()), orphans_killed)
        }
        Err(e) => return Err(e),
    };
    let limit_hit = status.and_then(|s| s.limit_hit());
    let result = JsonResult {
        exit_code: status.and_then(|s| s.code()),
        signal: status
            .filter(|s| s.code().is_none())
            .map(|s| s.shell_code() - 128),
        timed_out: status.is_some_and(|s| s.timed_out()),
        duration_ms: started.elapsed().as_millis() as u64,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        stdout_truncated: output.stdout_dropped > 0,
        stderr_truncated: output.stderr_dropped > 0,
        stdout_dropped_bytes: output.stdout_dropped,
        stderr_dropped_bytes: output.stderr_dropped,
        descendants_killed: status.map_or(0, |s| s.descendants_killed()),
        containment,
        pid,
        session,
        limits,
        limit_hit: limit_hit.map(|hit| hit.name()),
        oom_kills: match limit_hit {
            Some(tether::LimitHit::Memory { victims }) => victims,
            _ => 0,
        },
        oom_killed_outside: status.map_or(0, |s| s.oom_killed_outside()),
        limits_escaped: output
            .limits_escaped
            .iter()
            .map(|e| EscapeRecord {
                pid: e.pid,
                cgroup: e.cgroup.clone(),
                moved_back: e.moved_back > 0,
                times_moved_back: e.moved_back,
            })
            .collect(),
        error,
        orphans_killed,
    };
    println!("{}", serde_json::to_string(&result).expect("serializable"));
    Ok(status.map_or(i32::from(EXIT_TETHER_ERROR), |s| exit_code(&s)))
}

/// `limits not enforced (…): memory 64 MiB (reason); pids 8 (reason)` for
/// the limits of `report` that ended up `none`; `None` when there is none.
fn unenforced(report: &tether::LimitReport) -> Option<String> {
    report.unenforced_summary().map(|limits| {
        format!("limits not enforced (--require-limits refuses to run without them): {limits}")
    })
}

/// `2 process(es) left the session's limits (moved out of its cgroups):
/// 123 to memory:/user.slice, …`; `None` when none did.
fn escaped(escapes: &[tether::LimitEscape]) -> Option<String> {
    const SHOWN: usize = 5;
    if escapes.is_empty() {
        return None;
    }
    let mut list: Vec<String> = escapes
        .iter()
        .take(SHOWN)
        .map(|e| match e.moved_back {
            0 => format!("{} to {}", e.pid, e.cgroup),
            1 => format!("{} to {} (moved back)", e.pid, e.cgroup),
            n => format!("{} to {} (moved back {n} times)", e.pid, e.cgroup),
        })
        .collect();
    if escapes.len() > SHOWN {
        list.push(format!("and {} more", escapes.len() - SHOWN));
    }
    Some(format!(
        "{} process(es) left the session's limits (moved out of its cgroups; killed with it): {}",
        escapes.len(),
        list.join(", ")
    ))
}

/// What `--durable` asks the holder for: this command, in this process's
/// working directory and environment (plus `--env`).
fn durable_request(args: &RunArgs) -> tether_durable::StartRequest {
    let text = |s: &std::ffi::OsStr| s.to_string_lossy().into_owned();
    let (argv, shell) = if args.shell {
        let script = args
            .command
            .iter()
            .map(|a| text(a))
            .collect::<Vec<_>>()
            .join(" ");
        (Vec::new(), Some(script))
    } else {
        (args.command.iter().map(|a| text(a)).collect(), None)
    };
    let mut env: Vec<(String, String)> = std::env::vars_os()
        .filter(|(k, _)| k != tether::SPAWN_TAG_VAR)
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    env.extend(args.env.iter().map(|(k, v)| (text(k), text(v))));
    let cwd = args
        .cwd
        .clone()
        .or_else(|| std::env::current_dir().ok())
        .map(|d| d.to_string_lossy().into_owned());
    tether_durable::StartRequest {
        argv,
        shell,
        cwd,
        env,
        name: args.name.clone(),
        ttl_s: args.ttl.map(|t| t.as_secs().max(1)),
        replace: args.replace,
        purpose: (args.purpose != "run").then(|| args.purpose.clone()),
        pty: args.pty.then(|| {
            Passthrough::size()
                .map(|s| (s.rows(), s.cols()))
                .unwrap_or((24, 80))
        }),
        memory: args.memory,
        pids: args.pids,
        cpu: args.cpu,
        require_limits: args.require_limits,
        grace_ms: Some(args.grace.as_millis() as u64),
        owner: Some(tether_durable::own_identity("tether run")),
        separate_stderr: false,
    }
}

/// This run's session, as the ledger records it.
fn session_start(child: &tether::Child, args: &RunArgs) -> SessionStart {
    let command: Vec<String> = args
        .command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut session = SessionStart::of_child(child, &args.purpose, &command);
    session.cwd = args.cwd.clone();
    session
}

/// `timeout(1)` conventions.
fn exit_code(status: &ExitStatus) -> i32 {
    if status.timed_out() {
        return 124;
    }
    status.shell_code()
}
