//! `tether exec --purpose P -- PROGRAM ARGS…`: registers this process in
//! the ledger (identity, purpose, spawner), stamps a spawn tag naming the
//! spawner, then replaces itself with the program (`execvp`: the pid, and
//! so the registration, stay the same).
//!
//! This file holds the CLI's one `cfg(unix)`: Windows has no `exec`, so
//! there `tether exec` refuses with a clear error (a program can call
//! `tether_ledger::register_self` itself, or be started through `tether
//! run`, which contains it in a job).

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Args;
use tether::{Install, ProcessIdentity, SessionId};
use tether_ledger::{Ledger, RegistrationRecord, Spawner};

use crate::EXIT_TETHER_ERROR;

#[derive(Args, Debug)]
#[command(after_help = "\
Registers the program that follows in the ledger as a long-lived process of this \
install, with its purpose and its spawner — the process it belongs to: the owner named \
by TETHER_SPAWN if that is set, else the process that ran `tether exec` (its parent), \
or --spawner PID. The program runs with a fresh spawn tag naming that spawner, so it \
and everything it starts are one session: `tether ps` lists it, and `tether reap` \
kills it once the spawner is provably dead — unless its purpose is interactive \
(interactive, chat, shell, repl, tui, interactive.*), which is never reaped.

Then tether replaces itself with the program (execvp): same pid, nothing in between. \
Exit status: the program's; 127 if it was not found, 126 if it is not executable, 125 \
on bad arguments or a spawner that is not alive (--spawner or the owner TETHER_SPAWN names: \
a program registered under a dead spawner would be reaped at once).

Examples:
  tether exec --purpose serve -- python3 -m http.server 8000
  tether exec --purpose backend --spawner $PPID -- ./server")]
pub struct ExecArgs {
    /// What the program is for (1-64 of A-Z a-z 0-9 . _ -).
    #[arg(long)]
    purpose: String,
    /// The pid of the process the program belongs to (default: the owner
    /// TETHER_SPAWN names, else the parent of `tether exec`).
    #[arg(long, value_name = "PID")]
    spawner: Option<u32>,
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true, value_name = "PROGRAM")]
    command: Vec<OsString>,
}

pub fn main(args: ExecArgs) -> ExitCode {
    let install = Install::from_env();
    let spawner = match args.spawner {
        None => Spawner::Auto,
        Some(pid) => match ProcessIdentity::of_pid(pid) {
            Ok(identity) => Spawner::Process(identity),
            Err(e) => return fail(&format!("cannot identify spawner {pid}: {e}")),
        },
    };
    let mut record = match RegistrationRecord::current(&install, &args.purpose, &spawner) {
        Ok(record) => record,
        Err(e) => return fail(&e.to_string()),
    };
    let session = SessionId::generate();
    let Some(tag) = record.tag(&session) else {
        return fail("no spawner to name in the spawn tag");
    };
    record.session = Some(session.as_str().to_owned());
    record.set_command(
        args.command
            .iter()
            .map(|a| a.to_string_lossy().into_owned()),
    );
    // Best effort, like `tether run`: without the ledger the program still
    // carries its tag, which is what `ps` and `reap` rely on most.
    let mut ledger = match Ledger::open_to_record(&install).and_then(|mut l| {
        l.register_process(&record)?;
        Ok(l)
    }) {
        Ok(ledger) => Some(ledger),
        Err(e) => {
            eprintln!("tether: warning: this process is not in the ledger: {e}");
            None
        }
    };
    let error = replace_with(&args.command, &tag.to_string());
    // Still here: the exec failed. Take the registration back.
    if let Some(ledger) = &mut ledger {
        let _ = ledger.unregister_process(&record.identity);
    }
    let program = args.command[0].to_string_lossy();
    eprintln!("tether: cannot run {program:?}: {error}");
    ExitCode::from(match error.kind() {
        std::io::ErrorKind::NotFound => 127,
        std::io::ErrorKind::PermissionDenied => 126,
        _ => EXIT_TETHER_ERROR,
    })
}

fn fail(message: &str) -> ExitCode {
    eprintln!("tether: {message}");
    ExitCode::from(EXIT_TETHER_ERROR)
}

/// Becomes the program, with the tag in its environment; returns only if
/// that failed.
#[cfg(unix)]
fn replace_with(command: &[OsString], tag: &str) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    std::process::Command::new(&command[0])
        .args(&command[1..])
        .env(tether::SPAWN_TAG_VAR, tag)
        .exec()
}

#[cfg(not(unix))]
fn replace_with(_command: &[OsString], _tag: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "tether exec needs exec(2), which Windows does not have: start the program with \
         `tether run`, or have it call tether_ledger::register_self",
    )
}
