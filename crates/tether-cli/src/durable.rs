//! Durable sessions from the command line: `tether run --durable`,
//! `tether sessions`, `tether attach`, `tether kill`, `tether extend`, and
//! the hidden `tether holder` that keeps them (all of it in
//! `process-tether-durable`; this translates arguments and results).

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use tether_durable::{Client, DurableError, DurableInfo, StartRequest};

use crate::EXIT_TETHER_ERROR;

/// `tether holder`: keeps this user's durable sessions.
#[derive(Args, Debug)]
#[command(after_help = "\
Starts this user's holder of durable sessions, detached, and returns once it listens \
(prints `ready`, or `busy` when one already runs). `tether run --durable` starts it on \
demand; start it yourself from a shell that is not inside a tether session when the \
durable requests will come from inside one (a holder started there would be contained by \
that session and die with it). It exits by itself 10 minutes after its last session ended \
($TETHER_HOLDER_IDLE seconds overrides that). If it is killed, every durable session it \
holds dies with it.

Exit status: 0 when it runs; 1 when it could not start (the reason is printed).

Examples:
  tether holder")]
pub struct HolderArgs {}

#[derive(Args, Debug)]
#[command(after_help = "\
Lists this user's durable sessions (started with `tether run --durable`, MCP `run` with \
durable: true, or Python `tether.start(..., durable=True)`): id, name, status, main pid, \
start, TTL left, limits, command. Finished sessions stay listed (and readable) until their \
holder exits, 10 minutes after its last session ended. Nothing running: an empty list.

Exit status: 0; 125 if the holder cannot be reached.

Examples:
  tether sessions
  tether sessions --json")]
pub struct SessionsArgs {
    /// Print a JSON array, one object per session.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
#[command(after_help = "\
Prints a durable session's output from --from (default 0: everything it printed, also \
while nobody was attached) and follows it until the session's output ends. Ctrl-C detaches: \
the session runs on. Output is byte-exact; offsets are absolute, so `--from` continues where \
an earlier reader stopped.

Exit status: the session's exit code when followed to its end; 0 when detached or with \
--no-follow; 125 for an unknown id or name, or a holder that cannot be reached.

Examples:
  tether attach devserver
  tether attach 3f9c --from 4096 --no-follow")]
pub struct AttachArgs {
    /// Session id, id prefix (4+ characters) or name.
    #[arg(value_name = "ID|NAME")]
    session: String,
    /// Absolute output offset to start from.
    #[arg(long, value_name = "OFFSET", default_value_t = 0)]
    from: u64,
    /// Print what is there now and return.
    #[arg(long)]
    no_follow: bool,
}

#[derive(Args, Debug)]
#[command(after_help = "\
Kills a durable session's whole tree with the verified ladder (TERM, then KILL after \
--grace) and returns once nothing of it is left.

Exit status: 0; 125 for an unknown id or name, a holder that cannot be reached, or a kill \
that could not be verified.

Root may list and read another user's durable sessions (TETHER_HOME pointing at that \
user's state directory) but changes none of them unless it asks explicitly: --as-root.

Examples:
  tether kill devserver
  tether kill 3f9c --grace 10s
  TETHER_HOME=/home/alice/.local/state/tether sudo -E tether kill --as-root devserver")]
pub struct KillArgs {
    /// Session id, id prefix (4+ characters) or name.
    #[arg(value_name = "ID|NAME")]
    session: String,
    /// Time between SIGTERM and SIGKILL.
    #[arg(long, value_parser = crate::duration::parse, value_name = "DUR", default_value = "2s")]
    grace: Duration,
    /// Print a JSON object with the result.
    #[arg(long)]
    json: bool,
    /// As root: kill a session of another user's holder (refused otherwise).
    #[arg(long)]
    as_root: bool,
}

#[derive(Args, Debug)]
#[command(after_help = "\
Sets a running durable session's TTL to --ttl counted from now (at most 7 days); at the \
TTL the session is killed with the verified ladder.

Exit status: 0; 125 for an unknown id or name, a finished session, a TTL out of range, or \
a holder that cannot be reached.

Examples:
  tether extend devserver --ttl 48h")]
pub struct ExtendArgs {
    /// Session id, id prefix (4+ characters) or name.
    #[arg(value_name = "ID|NAME")]
    session: String,
    /// The new TTL, from now (e.g. 90m, 48h; at most 168h).
    #[arg(long, value_parser = crate::duration::parse, value_name = "DUR")]
    ttl: Duration,
    /// Print the session as a JSON object.
    #[arg(long)]
    json: bool,
}

/// `tether holder`.
pub fn holder(_args: HolderArgs) -> ExitCode {
    ExitCode::from(tether_durable::holder::main(tether::Install::from_env()))
}

fn fail(err: &DurableError) -> ExitCode {
    eprintln!("tether: {err}");
    match err {
        DurableError::Refused { kind, .. } if kind == "program_not_found" => ExitCode::from(127),
        DurableError::Refused { kind, .. } if kind == "not_executable" => ExitCode::from(126),
        _ => ExitCode::from(EXIT_TETHER_ERROR),
    }
}

/// A client of a running holder; `None` (and a clear error) when there
/// is none: nothing durable exists.
fn existing(session: &str) -> Result<Client, DurableError> {
    match Client::connect(&tether::Install::from_env())? {
        Some(client) => Ok(client),
        None => Err(DurableError::UnknownSession(format!(
            "no durable session {session:?}: no durable session runs (see `tether sessions`)"
        ))),
    }
}

/// `tether run --durable`: starts `request` in this user's holder
/// (starting the holder first if none runs) and prints its id.
pub fn start(request: StartRequest, json: bool) -> ExitCode {
    let result = std::env::current_exe()
        .map_err(DurableError::from)
        .and_then(|exe| Client::connect_or_start(&tether::Install::from_env(), &exe))
        .and_then(|mut client| client.start(request));
    let info = match result {
        Ok(info) => info,
        Err(e) => return fail(&e),
    };
    if json {
        let object = serde_json::json!({
            "id": info.id,
            "name": info.name,
            "durable": true,
            "ttl_s": info.ttl_s,
            "pid": info.pid,
            "holder_pid": info.holder_pid,
        });
        println!("{object}");
    } else {
        println!("{}", info.id);
        eprintln!(
            "tether: durable session {}{} started (TTL {}); `tether attach {}` to follow it, \
             `tether kill {}` to end it",
            info.id,
            info.name
                .as_deref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default(),
            human(info.ttl_s),
            info.name.as_deref().unwrap_or(&info.id),
            info.name.as_deref().unwrap_or(&info.id),
        );
    }
    ExitCode::SUCCESS
}

/// `tether sessions`.
pub fn sessions(args: SessionsArgs) -> ExitCode {
    let rows = match Client::connect(&tether::Install::from_env()) {
        Ok(Some(mut client)) => match client.list() {
            Ok(rows) => rows,
            Err(e) => return fail(&e),
        },
        Ok(None) => Vec::new(),
        Err(e) => return fail(&e),
    };
    if args.json {
        println!("{}", serde_json::to_string(&rows).expect("serializable"));
        return ExitCode::SUCCESS;
    }
    if rows.is_empty() {
        println!("no durable sessions");
        return ExitCode::SUCCESS;
    }
    println!(
        "{:<26} {:<16} {:<9} {:>8} {:>9} {:>9}  {:<12} COMMAND",
        "ID", "NAME", "STATUS", "PID", "STARTED", "TTL LEFT", "LIMITS"
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    for row in rows {
        println!(
            "{:<26} {:<16} {:<9} {:>8} {:>9} {:>9}  {:<12} {}",
            row.id,
            row.name.as_deref().unwrap_or("-"),
            row.status,
            row.pid,
            format!(
                "{} ago",
                human(now.saturating_sub(row.started_at_ms) / 1000)
            ),
            if row.status == "running" {
                human(row.ttl_left_s)
            } else {
                "-".into()
            },
            if row.limits.is_empty() {
                "-"
            } else {
                &row.limits
            },
            row.command
        );
    }
    ExitCode::SUCCESS
}

/// `tether attach`.
pub fn attach(args: AttachArgs) -> ExitCode {
    let mut client = match existing(&args.session) {
        Ok(client) => client,
        Err(e) => return fail(&e),
    };
    // Resolved once: a name re-used by a newer session later is not
    // followed into it.
    let id = match client.info(&args.session) {
        Ok(info) => info.id,
        Err(e) => return fail(&e),
    };
    let mut offset = args.from;
    let mut out = std::io::stdout().lock();
    loop {
        let wait = if args.no_follow {
            Duration::ZERO
        } else {
            Duration::from_secs(5)
        };
        let (data, reply) = match client.read(&id, offset, tether_durable::protocol::MAX_READ, wait)
        {
            Ok(read) => read,
            Err(e) => return fail(&e),
        };
        if reply.dropped > 0 {
            let _ = out.flush();
            eprintln!(
                "tether: {} bytes before offset {} are gone (beyond the spill cap)",
                reply.dropped, reply.offset
            );
        }
        if out.write_all(&data).and_then(|()| out.flush()).is_err() {
            // The reader went away (a closed pipe): detach.
            return ExitCode::SUCCESS;
        }
        offset = reply.next_offset;
        if reply.eof {
            let code = client
                .wait(&id, Duration::from_secs(5), None)
                .ok()
                .and_then(|w| w.exit_code)
                .unwrap_or(0);
            return ExitCode::from(code.clamp(0, 255) as u8);
        }
        if args.no_follow && data.is_empty() {
            return ExitCode::SUCCESS;
        }
    }
}

/// `tether kill`.
pub fn kill(args: KillArgs) -> ExitCode {
    let result = existing(&args.session).and_then(|mut c| {
        if args.as_root {
            c.kill_as_root(&args.session, Some(args.grace))
        } else {
            c.kill(&args.session, Some(args.grace))
        }
    });
    match result {
        Ok(killed) => {
            if args.json {
                println!("{}", serde_json::to_string(&killed).expect("serializable"));
            } else {
                println!(
                    "{}: {}{}",
                    args.session,
                    killed.status,
                    if killed.already_exited {
                        " (it had already exited)"
                    } else {
                        ""
                    }
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

/// `tether extend`.
pub fn extend(args: ExtendArgs) -> ExitCode {
    let result = existing(&args.session).and_then(|mut c| c.extend(&args.session, args.ttl));
    match result {
        Ok(info) => {
            print_one(&info, args.json);
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

fn print_one(info: &DurableInfo, json: bool) {
    if json {
        println!("{}", serde_json::to_string(info).expect("serializable"));
    } else {
        println!("{}: TTL left {}", info.id, human(info.ttl_left_s));
    }
}

/// `90s`, `12m`, `3h05m`, `2d04h`.
fn human(secs: u64) -> String {
    match secs {
        0..=119 => format!("{secs}s"),
        120..=3599 => format!("{}m", secs / 60),
        3600..=86_399 => format!("{}h{:02}m", secs / 3600, secs % 3600 / 60),
        _ => format!("{}d{:02}h", secs / 86_400, secs % 86_400 / 3600),
    }
}
