//! `tether reap`: kill the proven orphans of this install, and nothing else.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use tether::Install;
use tether_ledger::proof::is_interactive;
use tether_ledger::{ReapOptions, ReapReport, SkipReason, TargetOutcome, reap_install};

use crate::EXIT_TETHER_ERROR;

/// Exit status when some proven orphan is still alive at the end: it
/// survived `SIGKILL`, or kept appearing faster than it could be killed.
const EXIT_SURVIVORS: u8 = 1;

#[derive(Args, Debug)]
#[command(after_help = "\
Kills only processes proven to be orphans of this install: they carry this install's \
spawn tag, their owner is provably dead (gone, or its pid now names another process), \
and their purpose is reapable (interactive purposes — interactive, chat, shell, repl, tui, \
interactive.*, interactive-* — never are). Each process is \
re-identified by pidfd immediately before every signal; whole trees go down together \
(SIGTERM, then SIGKILL after --grace); then the table is scanned again, and whatever \
of a dead owner appeared meanwhile (forked during the kill, a fork-and-exit pid \
hopper) is killed the moment the scan meets it, round after round until a round \
meets none. Untagged processes, other users' processes, processes of live owners, \
processes whose environment cannot be read (non-dumpable) and anything whose status \
cannot be proven are never signalled (they are listed).

Exit status: 0 when every proven orphan is verified dead (or there were none); 1 if \
some is still alive at the end — it survived SIGKILL, or kept appearing for 5 s \
(they are listed) — or the last scan could not prove that none is; 125 on bad \
arguments. With --holding PATH: 0 when PATH is free afterwards, 3 when it is still \
held (live holders and their owners are listed; untagged holders are never killed).

Examples:
  tether reap --dry-run
  tether reap --grace 5s --purpose mcp
  tether reap --json
  tether reap --holding /opt/myapp --dry-run")]
pub struct ReapArgs {
    /// Print the plan; signal nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print one JSON object with every target and skipped process.
    #[arg(long)]
    json: bool,
    /// Time between SIGTERM and SIGKILL.
    #[arg(long, value_parser = crate::duration::parse, value_name = "DUR", default_value = "2s")]
    grace: Duration,
    /// Only sessions with this purpose (repeatable). Interactive purposes
    /// (interactive, chat, shell, repl, tui, interactive.*, interactive-*)
    /// are refused.
    #[arg(long = "purpose", value_name = "P")]
    purposes: Vec<String>,
    /// Only the proven orphans holding PATH (executable, working directory,
    /// open or mapped files under it); report whether PATH is free now:
    /// exit status 0 when it is, 3 when it is still held (the holders and
    /// their owners are listed).
    #[arg(long, value_name = "PATH")]
    holding: Option<std::path::PathBuf>,
}

pub fn main(args: ReapArgs) -> ExitCode {
    if let Some(p) = args.purposes.iter().find(|p| is_interactive(p)) {
        eprintln!("tether: purpose {p:?} is interactive: its processes are never reaped");
        return ExitCode::from(EXIT_TETHER_ERROR);
    }
    let install = Install::from_env();
    let opts = ReapOptions {
        grace: args.grace,
        purposes: args.purposes,
        dry_run: args.dry_run,
    };
    if let Some(path) = &args.holding {
        return crate::holding::reap(path, &opts, args.json);
    }
    let done = reap_install(&install, &opts);
    if let Some(e) = &done.ledger_error {
        eprintln!("tether: warning: ledger: {e} (orphans were proven from spawn tags alone)");
    }
    let report = done.report;
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&report).expect("report serializes")
        );
    } else {
        print!("{}", render(&report));
    }
    if report.survivors > 0 || !(report.dry_run || report.verified) {
        ExitCode::from(EXIT_SURVIVORS)
    } else {
        ExitCode::SUCCESS
    }
}

/// The text report.
pub fn render(report: &ReapReport) -> String {
    let mut out = String::new();
    let owners: std::collections::BTreeSet<_> = report.targets.iter().map(|t| t.owner).collect();
    if report.targets.is_empty() {
        let _ = writeln!(out, "no orphans of install {} to reap", report.install);
    } else if report.dry_run {
        let _ = writeln!(
            out,
            "dry run: would reap {} processes of {} dead owners (install {}), TERM then KILL after {}",
            report.targets.len(),
            owners.len(),
            report.install,
            crate::ps::age(report.grace_ms)
        );
    } else {
        let count =
            |o: fn(&TargetOutcome) -> bool| report.targets.iter().filter(|t| o(&t.outcome)).count();
        let _ = writeln!(
            out,
            "reaped {} processes of {} dead owners (install {}) in {} rounds: {} exited on SIGTERM, {} needed SIGKILL, {} were already gone, {} changed and were spared, {} survived",
            count(|o| matches!(o, TargetOutcome::Terminated | TargetOutcome::Killed)),
            owners.len(),
            report.install,
            report.rounds,
            count(|o| *o == TargetOutcome::Terminated),
            count(|o| *o == TargetOutcome::Killed),
            count(|o| *o == TargetOutcome::AlreadyGone),
            count(|o| matches!(o, TargetOutcome::Changed { .. })),
            count(|o| matches!(o, TargetOutcome::Survived | TargetOutcome::Escaped)),
        );
    }
    // Targets by owner, then session.
    let mut by_owner: BTreeMap<_, BTreeMap<&str, Vec<_>>> = BTreeMap::new();
    for t in &report.targets {
        by_owner
            .entry(t.owner)
            .or_default()
            .entry(t.session.as_str())
            .or_default()
            .push(t);
    }
    for (owner, sessions) in by_owner {
        let proof = sessions.values().flatten().next().map(|t| t.proof);
        let _ = writeln!(
            out,
            "  owner {} (start {}): dead, {}",
            owner.pid,
            owner.start_time,
            proof.map(|p| p.to_string()).unwrap_or_default()
        );
        for (session, targets) in sessions {
            let _ = writeln!(out, "    session {session}");
            for t in targets {
                let _ = writeln!(
                    out,
                    "      {:>7}  {:<12} [{}] {}",
                    t.pid,
                    outcome(&t.outcome),
                    t.purpose,
                    t.command
                );
            }
        }
    }
    let alive = report
        .skipped
        .iter()
        .filter(|s| s.reason == SkipReason::OwnerAlive)
        .count();
    let others: Vec<_> = report
        .skipped
        .iter()
        .filter(|s| s.reason != SkipReason::OwnerAlive)
        .collect();
    if alive > 0 {
        let _ = writeln!(out, "left alone: {alive} processes of live owners");
    }
    if !others.is_empty() {
        let _ = writeln!(out, "left alone:");
        for s in others {
            let _ = writeln!(out, "      {:>7}  {}  {}", s.pid, s.reason, s.command);
        }
    }
    let (near, other): (Vec<_>, Vec<_>) = report
        .unattributable
        .iter()
        .filter(|u| crate::ps::worth_mentioning(u))
        .partition(|u| u.descends_from.is_some());
    if !near.is_empty() {
        let _ = writeln!(out, "never signalled:");
        for u in near {
            let _ = writeln!(out, "      {:>7}  {u}  {}", u.pid, u.command);
        }
    }
    if !other.is_empty() {
        let _ = writeln!(
            out,
            "never signalled: {} other {} whose environment cannot be read \
             (`--json` lists them)",
            other.len(),
            crate::ps::plural(other.len(), "process", "processes")
        );
    }
    if !report.cgroups_removed.is_empty() {
        let _ = writeln!(
            out,
            "removed {} leftover session cgroup(s)",
            report.cgroups_removed.len()
        );
    }
    for kept in &report.cgroups_kept {
        let _ = writeln!(
            out,
            "kept session {}'s cgroup {}: {}",
            kept.session, kept.path, kept.reason
        );
    }
    if report.survivors > 0 {
        let _ = writeln!(
            out,
            "{} proven orphans are still alive (SURVIVED / ESCAPED above)",
            report.survivors
        );
    }
    if !report.dry_run && !report.verified {
        let _ = writeln!(
            out,
            "NOT VERIFIED: processes kept appearing for {} s; something may be left alive",
            tether_ledger::CHASE_BUDGET.as_secs()
        );
        for a in &report.still_appearing {
            let _ = writeln!(
                out,
                "    session {}: met {} times (a fork-and-exit pid hopper is gone before it \
                 can be read, so it can be neither proven nor killed; `tether ps` and \
                 `tether reap` again show it)",
                a.session, a.sightings
            );
        }
    }
    out
}

fn outcome(o: &TargetOutcome) -> String {
    match o {
        TargetOutcome::Planned => "would kill".into(),
        TargetOutcome::Terminated => "terminated".into(),
        TargetOutcome::Killed => "killed".into(),
        TargetOutcome::AlreadyGone => "already gone".into(),
        TargetOutcome::Changed { reason } => format!("spared: {reason}"),
        TargetOutcome::Survived => "SURVIVED".into(),
        TargetOutcome::Escaped => "ESCAPED".into(),
    }
}
