//! `tether`: run commands whose whole process tree is contained, identified,
//! and dead when its owner is done.
//!
//! A thin front-end: arguments become calls of the `process-tether`
//! library (`tether run`, `init`, `doctor`), `process-tether-ledger` (`ps`,
//! `reap`, `exec`, `spawn-tag`) and `process-tether-mcp` (`mcp`), and
//! results become text or `--json`. No process logic lives here. Its
//! reference is `tether --help` and `tether man`; the libraries' guides are
//! their crate docs.

#![warn(missing_docs)]

mod completions;
mod doctor;
mod durable;
mod duration;
mod exec;
mod help;
mod holding;
mod init;
mod man_page;
mod ps;
mod reap;
mod registered;
mod run;
mod spawn_tag;

use std::process::ExitCode;

use clap::{FromArgMatches, Parser, Subcommand};

/// Exit code for tether's own errors (as `timeout(1)`).
pub const EXIT_TETHER_ERROR: u8 = 125;

#[derive(Parser, Debug)]
#[command(
    name = "tether",
    version,
    about = "Run commands so that every process they start is identified and dies with its owner",
    long_about = "Run commands so that every process they start — setsid and double-fork escapes, \
                  daemons, processes ignoring SIGTERM — is contained, identified by a spawn tag, \
                  and verifiably dead when tether is done with it, however tether itself ends.",
    after_help = "\
Examples:
  tether run --timeout 30s -- make test
  tether run --durable --name dev -- npm run dev
  tether mcp                    (your agent's MCP server)
  tether ps
  tether doctor

`tether COMMAND -h`: one screen; `--help`: the long form; `tether man`: pages."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
// Options added only when a subcommand is built (`help::command`, which
// replaces each deferred build with its own).
#[command(defer = true)]
enum Command {
    /// Run a program contained; its whole tree dies with it (like timeout(1)).
    Run(run::RunArgs),
    /// List this user's durable sessions (`run --durable`).
    Sessions(durable::SessionsArgs),
    /// Print a durable session's output and follow it (Ctrl-C detaches).
    Attach(durable::AttachArgs),
    /// Kill a durable session's whole tree, verified.
    Kill(durable::KillArgs),
    /// Set a running durable session's TTL, counted from now.
    Extend(durable::ExtendArgs),
    /// Start this user's holder of durable sessions now.
    Holder(durable::HolderArgs),
    /// List owners, their sessions and processes; mark what is orphaned.
    Ps(ps::PsArgs),
    /// Kill the proven orphans of dead owners of this install.
    Reap(reap::ReapArgs),
    /// Serve a terminal tool to agents over MCP (stdio): run, read, write, wait, kill, list, screen.
    Mcp(tether_mcp::Options),
    /// Register this process (purpose, spawner) in the ledger, then exec the program.
    Exec(exec::ExecArgs),
    /// Print a spawn tag naming the calling process as owner, for launchers.
    SpawnTag(spawn_tag::SpawnTagArgs),
    /// PID 1 for containers: reap zombies, forward signals, kill leftovers.
    Init(init::InitArgs),
    /// What this machine gives tether, mechanism by mechanism.
    Doctor(doctor::DoctorArgs),
    /// Print a shell completion script.
    Completions(completions::CompletionsArgs),
    /// Print the man pages, or write them into a directory.
    Man(man_page::ManArgs),
}

fn main() -> ExitCode {
    // A `tether` started as a keeper runs the keeper and never returns.
    tether::keeper::run_if_requested();
    let cli = match help::command()
        .try_get_matches()
        .and_then(|matches| Cli::from_arg_matches(&matches))
    {
        Ok(cli) => cli,
        Err(err) => {
            let code = if err.use_stderr() {
                EXIT_TETHER_ERROR
            } else {
                0
            };
            let _ = err.print();
            return ExitCode::from(code);
        }
    };
    match cli.command {
        Command::Run(args) => run::main(args),
        Command::Sessions(args) => durable::sessions(args),
        Command::Attach(args) => durable::attach(args),
        Command::Kill(args) => durable::kill(args),
        Command::Extend(args) => durable::extend(args),
        Command::Holder(args) => durable::holder(args),
        Command::Ps(args) => ps::main(args),
        Command::Reap(args) => reap::main(args),
        Command::Mcp(options) => tether_mcp::serve(options),
        Command::Exec(args) => exec::main(args),
        Command::SpawnTag(args) => spawn_tag::main(args),
        Command::Init(args) => init::main(args),
        Command::Doctor(args) => doctor::main(args),
        Command::Completions(args) => completions::main(args),
        Command::Man(args) => man_page::main(args),
    }
}
