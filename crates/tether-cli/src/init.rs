//! `tether init [--] PROGRAM ARGS…`: PID 1 for containers (a subreaper
//! elsewhere) — reaps every zombie, forwards signals to the program's
//! process group, kills what the program left, exits with its status.

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use tether::Error;
use tether::init::{InitOptions, InitReport};

use crate::EXIT_TETHER_ERROR;

#[derive(Args, Debug)]
#[command(after_help = "\
As PID 1 (a container's entry point) tether init adopts every orphan of the container \
and reaps it, so no zombie piles up — double-forked daemons' included. Elsewhere it \
makes itself a child subreaper (Linux), so the program's orphans come to it instead.

SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGWINCH sent to tether init \
are forwarded to the program's process group. When the program exits, whatever it \
left behind gets SIGTERM, then SIGKILL after --grace; survivors are reported on stderr.

Exit status: the program's own code, or 128+N if signal N killed it; 127 if it was \
not found, 126 if it is not executable, 125 if tether itself failed.

Examples:
  ENTRYPOINT [\"tether\", \"init\", \"--\"]   (Dockerfile)
  tether init --grace 10s -- ./server --port 8080")]
pub struct InitArgs {
    /// Time between SIGTERM and SIGKILL for what the program leaves behind.
    #[arg(long, value_parser = crate::duration::parse, value_name = "DUR", default_value = "2s")]
    grace: Duration,
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true, value_name = "PROGRAM")]
    command: Vec<OsString>,
}

pub fn main(args: InitArgs) -> ExitCode {
    let options = InitOptions { grace: args.grace };
    match tether::init::run(&args.command[0], &args.command[1..], options) {
        Ok(report) => {
            tell(&report);
            ExitCode::from(report.exit_code.clamp(0, 255) as u8)
        }
        Err(err) => {
            eprintln!("tether init: {err}");
            ExitCode::from(match err {
                Error::ProgramNotFound { .. } => 127,
                Error::NotExecutable { .. } => 126,
                _ => EXIT_TETHER_ERROR,
            })
        }
    }
}

/// Reports on stderr what was left behind, if anything was.
fn tell(report: &InitReport) {
    let left = report.terminated + report.killed + report.survivors.len();
    if left == 0 {
        return;
    }
    let how = match (report.code, report.signal) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(sig)) => format!("was killed by signal {sig}"),
        (None, None) => "ended".to_owned(),
    };
    eprintln!(
        "tether init: the program {how}; it left {left} process(es): {} ended on SIGTERM, \
         {} needed SIGKILL, {} survived",
        report.terminated,
        report.killed,
        report.survivors.len()
    );
    for s in &report.survivors {
        eprintln!("tether init: survivor {} {}", s.pid, s.command);
    }
}
