//! `tether spawn-tag --purpose P`: prints a valid spawn tag naming the
//! calling process as owner, for launchers in other languages to stamp on
//! the processes they start.

use std::process::ExitCode;

use clap::Args;
use serde::Serialize;
use tether::{Install, ProcessIdentity, SessionId, SpawnTag};

use crate::EXIT_TETHER_ERROR;

#[derive(Args, Debug)]
#[command(after_help = "\
Prints TETHER_SPAWN's value for the children of the calling process: \
v1:<install>:<purpose>:<owner_pid>:<owner_start>:<session>, with this install, the \
purpose, a fresh session id, and as owner the process that ran `tether spawn-tag` (its \
parent) — or --owner PID. A launcher sets TETHER_SPAWN to it in the environment of \
each child it starts; then `tether ps` lists them under the launcher, a watchdog in \
the child (tether::watchdog) ends it when the launcher dies, and `tether reap` kills \
what is left once the launcher is provably dead.

Which process is the caller: the parent of `tether spawn-tag`. From Python's \
subprocess or Node's child_process that is the launcher itself. From a shell it is \
whatever process ran the command — in `$(tether spawn-tag …)` some shells run it in a \
subshell that exits at once; pass --owner $$ there.

Examples:
  export TETHER_SPAWN=\"$(tether spawn-tag --purpose serve --owner $$)\"
  subprocess.run([\"tether\", \"spawn-tag\", \"--purpose\", \"worker\"], capture_output=True)")]
pub struct SpawnTagArgs {
    /// What the launcher's children are for (1-64 of A-Z a-z 0-9 . _ -).
    #[arg(long)]
    purpose: String,
    /// The owner's pid (default: the parent of `tether spawn-tag`).
    #[arg(long, value_name = "PID")]
    owner: Option<u32>,
    /// Print one JSON object: the tag and the owner it names.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Printed {
    tag: String,
    install: String,
    purpose: String,
    session: String,
    owner_pid: u32,
    owner_start: u64,
    owner_command: String,
}

pub fn main(args: SpawnTagArgs) -> ExitCode {
    let owner = match args.owner {
        Some(pid) => ProcessIdentity::of_pid(pid),
        None => ProcessIdentity::parent(),
    };
    let owner = match owner {
        Ok(owner) => owner,
        Err(e) => {
            eprintln!("tether: cannot identify the owner: {e}");
            return ExitCode::from(EXIT_TETHER_ERROR);
        }
    };
    let install = Install::from_env();
    let session = SessionId::generate();
    let tag = match SpawnTag::new(
        install.id(),
        &args.purpose,
        owner.pid,
        owner.start_time,
        session.as_str(),
    ) {
        Ok(tag) => tag,
        Err(e) => {
            eprintln!("tether: {e}");
            return ExitCode::from(EXIT_TETHER_ERROR);
        }
    };
    if args.json {
        let printed = Printed {
            tag: tag.to_string(),
            install: tag.install.clone(),
            purpose: tag.purpose.clone(),
            session: tag.session.clone(),
            owner_pid: owner.pid,
            owner_start: owner.start_time,
            owner_command: tether::sys::describe(owner.pid),
        };
        println!("{}", serde_json::to_string(&printed).expect("serializes"));
    } else {
        println!("{tag}");
    }
    ExitCode::SUCCESS
}
