//! `tether ps --holding PATH` and `tether reap --holding PATH`: who holds a
//! directory an updater wants to replace, and killing the proven orphans
//! among them.

use std::fmt::Write;
use std::path::Path;
use std::process::ExitCode;

use tether::Install;
use tether_ledger::holding::{self, Holder, HoldingReap, HoldingReport, Verdict};
use tether_ledger::{ReapOptions, TargetOutcome};

use crate::EXIT_TETHER_ERROR;

/// Exit status when the path is still held (0: it is free).
pub const EXIT_HELD: u8 = 3;

/// `tether ps --holding PATH`.
pub fn ps(path: &Path, json: bool) -> ExitCode {
    let install = Install::from_env();
    let opts = ReapOptions {
        dry_run: true,
        ..ReapOptions::default()
    };
    let (found, ledger_error) = holding::with_ledger(&install, |view| {
        holding::holders(path, install.id(), view, &opts)
    });
    let report = match found {
        Ok(report) => report,
        Err(e) => return bad_path(path, &e),
    };
    warn_ledger(ledger_error);
    if json {
        println!("{}", serde_json::to_string(&report).expect("serializes"));
    } else {
        let mut out = String::new();
        render_report(&mut out, &report);
        print!("{out}");
    }
    status(&report)
}

/// `tether reap --holding PATH [--dry-run]`.
pub fn reap(path: &Path, opts: &ReapOptions, json: bool) -> ExitCode {
    let install = Install::from_env();
    let (done, ledger_error) = holding::with_ledger(&install, |view| {
        holding::reap_holding(path, install.id(), view, opts)
    });
    let done = match done {
        Ok(done) => done,
        Err(e) => return bad_path(path, &e),
    };
    warn_ledger(ledger_error);
    if json {
        println!("{}", serde_json::to_string(&done).expect("serializes"));
    } else {
        print!("{}", render_reap(&done));
    }
    status(&done.after)
}

fn status(report: &HoldingReport) -> ExitCode {
    if report.unsupported.is_some() {
        ExitCode::from(EXIT_TETHER_ERROR)
    } else if report.is_free() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_HELD)
    }
}

fn bad_path(path: &Path, e: &std::io::Error) -> ExitCode {
    eprintln!("tether: {}: {e}", path.display());
    ExitCode::from(EXIT_TETHER_ERROR)
}

fn warn_ledger(error: Option<tether_ledger::LedgerError>) {
    if let Some(e) = error {
        eprintln!("tether: warning: ledger: {e} (owners proven from spawn tags alone)");
    }
}

fn render_reap(done: &HoldingReap) -> String {
    let mut out = String::new();
    let verb = if done.dry_run { "would kill" } else { "killed" };
    if done.targets.is_empty() {
        let _ = writeln!(out, "no proven orphans hold {}", done.after.path.display());
    } else {
        let _ = writeln!(
            out,
            "{verb} {} proven orphan(s) holding {}:",
            done.targets.len(),
            done.after.path.display()
        );
        for t in &done.targets {
            let outcome = match &t.outcome {
                TargetOutcome::Planned => "would kill".to_owned(),
                TargetOutcome::Terminated => "terminated".to_owned(),
                TargetOutcome::Killed => "killed".to_owned(),
                TargetOutcome::AlreadyGone => "already gone".to_owned(),
                TargetOutcome::Changed { reason } => format!("spared: {reason}"),
                TargetOutcome::Survived => "SURVIVED".to_owned(),
                TargetOutcome::Escaped => "ESCAPED (kept reappearing)".to_owned(),
            };
            let _ = writeln!(
                out,
                "  {:>7}  {:<12} [{}] owner {} dead ({})  {}",
                t.pid, outcome, t.purpose, t.owner.pid, t.proof, t.command
            );
        }
    }
    if !done.dry_run {
        out.push('\n');
    }
    render_report(&mut out, &done.after);
    out
}

fn render_report(out: &mut String, report: &HoldingReport) {
    let path = report.path.display();
    if let Some(why) = &report.unsupported {
        let _ = writeln!(out, "cannot tell who holds {path}: {why}");
        return;
    }
    if report.holders.is_empty() {
        let _ = writeln!(out, "{path} is free: no process holds it");
    } else {
        let _ = writeln!(
            out,
            "{path} is held by {} process(es):",
            report.holders.len()
        );
        for h in &report.holders {
            render_holder(out, h);
        }
    }
    if !report.uninspectable.is_empty() {
        let _ = writeln!(
            out,
            "{} of your processes could not be inspected (non-dumpable); they may hold it:",
            report.uninspectable.len()
        );
        for u in &report.uninspectable {
            let _ = writeln!(out, "  {:>7}  {}", u.pid, u.command);
        }
    }
    if report.other_users_not_inspected > 0 {
        let _ = writeln!(
            out,
            "{} processes of other users were not inspected (run as root to see them)",
            report.other_users_not_inspected
        );
    }
}

fn render_holder(out: &mut String, h: &Holder) {
    let what = match &h.verdict {
        Verdict::Orphan => "orphan".to_owned(),
        other => format!("left alone: {other}"),
    };
    let _ = writeln!(out, "  {:>7}  {}  {}", h.pid, what, h.command);
    let holds: Vec<String> = h
        .holds
        .iter()
        .map(|e| {
            let deleted = if e.deleted { " (deleted)" } else { "" };
            format!("{} {}{deleted}", e.how, e.path.display())
        })
        .collect();
    let more = h.held_count.saturating_sub(h.holds.len());
    let _ = write!(out, "           holds {}", holds.join(", "));
    if more > 0 {
        let _ = write!(out, " and {more} more");
    }
    out.push('\n');
    match (&h.tag, &h.owner) {
        (Some(tag), Some(owner)) => {
            let _ = write!(
                out,
                "           tagged [{}] session {}",
                tag.purpose, tag.session
            );
            if let Some(name) = &tag.durable_name {
                let _ = write!(out, " (durable {name:?})");
            }
            let _ = write!(out, "; owner {} {}", owner.pid, owner.status);
            if !owner.command.is_empty() {
                let _ = write!(out, ": {}", owner.command);
            }
            out.push('\n');
        }
        _ => {
            let _ = writeln!(
                out,
                "           untagged; parent {} {}",
                h.parent.pid, h.parent.command
            );
        }
    }
}
