//! `tether doctor`: what this machine gives tether, and what it means.
//! The probes are the library's (`tether::doctor`); the state directory's
//! check is the ledger's. This file only renders them.

use std::process::ExitCode;

use clap::Args;
use serde::Serialize;
use tether::Install;
use tether::doctor::{Finding, Report, Status, Topic};
use tether_ledger::{Ledger, LedgerError};

#[derive(Args, Debug)]
#[command(after_help = "\
Probes each mechanism tether uses by using it — a keeper is started and runs `exit 0` under \
the standard containment and, on Linux, in a PID namespace, and one session is started as \
`tether run --memory 64M --pids 16 --cpu 0.5` would start it (sessions of purpose `doctor`, \
gone before tether doctor exits) — and prints one line per mechanism: available or not, \
what was found, and on the next line what that means for the guarantees (G1–G9 in the \
README) or what they fall back to. Each limit line names the mechanism that session got \
(`cgroup2`, `cgroup1`, `job`, or `none` and why: what `tether run --json` reports in \
`limits`); on Linux, getting it may enable a cgroup v2 controller in tether's own cgroup, \
as `tether run` would. The state directory is opened and checked as every tether command \
does (created 0700 if missing).

Exit status: 0 when tether can run commands here (the probe session ran); 1 when it cannot \
(the keeper or job line says why); 125 on bad arguments.

Examples:
  tether doctor
  tether doctor --json | jq '.findings[] | select(.status == \"unavailable\")'
  tether doctor --json | jq -c '.findings[] | select(.mechanism)'")]
pub struct DoctorArgs {
    /// Print one JSON object: `can_run` and `findings[]` (`topic`, `status`, `found`, `meaning`,
    /// and `mechanism` on the limits, `cgroup_kill` and `oom`).
    #[arg(long)]
    json: bool,
}

/// The JSON form.
#[derive(Serialize)]
struct JsonReport<'a> {
    version: &'static str,
    os: &'static str,
    can_run: bool,
    findings: Vec<JsonFinding<'a>>,
}

#[derive(Serialize)]
struct JsonFinding<'a> {
    topic: &'static str,
    status: &'static str,
    found: &'a str,
    meaning: &'a str,
    /// The mechanism a session gets, on the findings about one (the
    /// limits, `cgroup_kill`, `oom`).
    #[serde(skip_serializing_if = "Option::is_none")]
    mechanism: Option<&'static str>,
}

pub fn main(args: DoctorArgs) -> ExitCode {
    let mut report = tether::doctor::probe();
    report.findings.push(state_directory());
    let can_run = report.can_run();
    if args.json {
        let json = JsonReport {
            version: env!("CARGO_PKG_VERSION"),
            os: std::env::consts::OS,
            can_run,
            findings: report
                .findings
                .iter()
                .map(|f| JsonFinding {
                    topic: f.topic.name(),
                    status: f.status.name(),
                    found: &f.found,
                    meaning: &f.meaning,
                    mechanism: f.mechanism,
                })
                .collect(),
        };
        println!(
            "{}",
            serde_json::to_string(&json).expect("the report serializes")
        );
    } else {
        print!("{}", render(&report));
    }
    if can_run {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Two lines per finding: `topic: status: what was found`, then what it
/// means.
fn render(report: &Report) -> String {
    let mut out = String::new();
    for finding in &report.findings {
        let status = match finding.status {
            Status::Available => "available",
            Status::Unavailable => "not available",
            Status::Info => "info",
            Status::Untested => "untested",
        };
        out.push_str(&format!(
            "{}: {status}: {}\n    {}\n",
            finding.topic.name(),
            finding.found,
            finding.meaning
        ));
    }
    out
}

/// The state directory, checked and opened as every tether command opens
/// it.
fn state_directory() -> Finding {
    let install = Install::from_env();
    let dir = install.state_dir().display().to_string();
    let degraded = "tether run and tether mcp still contain and kill their sessions but record \
                    nothing in the ledger (they warn once); tether ps and tether reap work from \
                    spawn tags alone";
    match Ledger::open(&install) {
        Ok(ledger) => Finding::new(
            Topic::StateDirectory,
            Status::Available,
            format!(
                "{dir} (install {}): yours alone, and its ledger {} opens",
                install.id(),
                ledger.path().display()
            ),
            "who spawned what is recorded here for tether ps and tether reap; the spawn tags of \
             this install's processes name it",
        ),
        Err(e @ LedgerError::Insecure { .. }) => Finding::new(
            Topic::StateDirectory,
            Status::Unavailable,
            format!("refused, as ssh refuses such a ~/.ssh: {e}"),
            degraded,
        ),
        Err(e) => Finding::new(
            Topic::StateDirectory,
            Status::Unavailable,
            format!("{dir}: {e}"),
            degraded,
        ),
    }
}
