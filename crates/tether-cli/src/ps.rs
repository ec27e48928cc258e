//! `tether ps`: who spawned what — owners, their sessions and processes.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::process::ExitCode;

use clap::Args;
use tether::Install;
use tether_ledger::{
    Census, Ledger, OwnerEntry, OwnerStatus, ProcessEntry, Role, SessionEntry, SessionState,
    UnreadableProcess,
};

#[derive(Args, Debug)]
#[command(after_help = "\
Lists the owners of this install (the tether state directory: $TETHER_HOME, else \
$XDG_STATE_HOME/tether, else ~/.local/state/tether, else $XDG_RUNTIME_DIR/tether, else \
/tmp/tether-<uid>) with their sessions and live \
processes, from the ledger and from the spawn tags of running processes. An owner is \
alive or dead by identity (pid, start time), never by pid alone or by the ledger; the \
processes of a provably dead owner are orphaned, and `tether reap` kills them. \
Sessions the ledger does not know are marked untracked.

Examples:
  tether ps
  tether ps --tree
  tether ps --holding /opt/myapp
  tether ps --json | jq '.owners[] | select(.status.status == \"dead\")'")]
pub struct PsArgs {
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Draw each session's process tree.
    #[arg(long)]
    tree: bool,
    /// Also list owners and sessions that ended, and the tagged processes of
    /// this user's other installs.
    #[arg(long)]
    all: bool,
    /// List instead the processes holding PATH — executable, working
    /// directory, open or mapped files under it — with their owners. Exit
    /// status 0 when PATH is free, 3 when it is held.
    #[arg(long, value_name = "PATH")]
    holding: Option<std::path::PathBuf>,
}

pub fn main(args: PsArgs) -> ExitCode {
    if let Some(path) = &args.holding {
        return crate::holding::ps(path, args.json);
    }
    let install = Install::from_env();
    let ledger = Ledger::open(&install);
    let census = Census::take(
        install.id(),
        install.state_dir().join(tether_ledger::LEDGER_FILE),
        ledger.as_ref().map_err(|e| e.to_string()),
        args.all,
    );
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&census).expect("census serializes")
        );
    } else {
        print!("{}", render(&census, args.tree));
    }
    ExitCode::SUCCESS
}

/// The text listing.
pub fn render(census: &Census, tree: bool) -> String {
    let mut out = String::new();
    let ledger = &census.ledger;
    let _ = writeln!(
        out,
        "install {}  ledger {}",
        census.install,
        ledger.path.display()
    );
    if let Some(error) = &ledger.error {
        let _ = writeln!(
            out,
            "! ledger unavailable ({error}): listing from spawn tags alone"
        );
    }
    for q in &ledger.quarantines {
        let _ = writeln!(
            out,
            "! the ledger was corrupt ({}) and was moved to {}; {} owners and {} sessions \
             were rebuilt from the spawn tags of live processes",
            q.reason,
            q.moved_to.display(),
            q.rebuilt_owners,
            q.rebuilt_sessions
        );
    }
    for owner in &census.owners {
        out.push('\n');
        render_owner(&mut out, owner, tree);
    }
    let unattributable: Vec<_> = census
        .unattributable
        .iter()
        .filter(|u| worth_mentioning(u))
        .collect();
    render_unattributable(&mut out, &unattributable);
    crate::registered::render(&mut out, &census.registered);
    let processes = census.processes().count();
    let sessions: usize = census.owners.iter().map(|o| o.sessions.len()).sum();
    let alive = census
        .owners
        .iter()
        .filter(|o| o.status == OwnerStatus::Alive)
        .count();
    let orphaned = census.orphaned_processes();
    let _ = write!(
        out,
        "\n{} owners ({alive} alive), {sessions} sessions, {processes} processes",
        census.owners.len()
    );
    if orphaned > 0 {
        let _ = write!(
            out,
            ", {orphaned} orphaned: `tether reap --dry-run` shows what `tether reap` would kill"
        );
    }
    if !unattributable.is_empty() {
        let _ = write!(out, ", {} unattributable", unattributable.len());
    }
    out.push('\n');
    out
}

/// Whether the text listings (`ps`, `reap`) mention an unreadable process.
/// All but the init of this pid namespace (pid 1) when it descends from no
/// session: pid 1 is the first process of the namespace, so it started
/// before every owner in it and no session here can have started it — yet
/// as root it was reported as "1 other process of yours" whenever its
/// environment was closed even to root (a VM's or container runtime's init
/// holding capabilities this process lacks; issue 39). It is never
/// signalled either way, and `--json` still lists it.
pub fn worth_mentioning(u: &UnreadableProcess) -> bool {
    u.pid != 1 || u.descends_from.is_some()
}

/// Non-dumpable processes: those that provably descend from a session in
/// full, the others (ssh-agent, gpg-agent, … — most have nothing to do
/// with tether) as a count; `--json` lists them all.
fn render_unattributable(out: &mut String, list: &[&UnreadableProcess]) {
    let (near, other): (Vec<&&UnreadableProcess>, Vec<_>) =
        list.iter().partition(|u| u.descends_from.is_some());
    if !near.is_empty() {
        let _ = writeln!(
            out,
            "\nUNATTRIBUTABLE  environment unreadable (non-dumpable): descends from a session, \
             owner unprovable; never reaped"
        );
        let _ = writeln!(
            out,
            "    {:>7} {:>7} {:>7}  {:<10} COMMAND",
            "PID", "PPID", "AGE", "STATE"
        );
        for u in near {
            let _ = write!(
                out,
                "    {:>7} {:>7} {:>7}  {:<10} {}",
                u.pid,
                u.ppid,
                age(u.age_ms),
                u.state,
                u.command
            );
            if let Some(d) = &u.descends_from {
                let _ = write!(out, "  (descends from session {} via {})", d.session, d.via);
            }
            out.push('\n');
        }
    }
    if !other.is_empty() {
        let _ = writeln!(
            out,
            "\n{} other {} of this user {} an environment tether cannot read (non-dumpable, as \
             ssh-agent makes itself) and {} from no session: never signalled; `tether ps --json` \
             lists them",
            other.len(),
            plural(other.len(), "process", "processes"),
            plural(other.len(), "has", "have"),
            plural(other.len(), "descends", "descend"),
        );
    }
}

/// `one` for 1, else `many`.
pub fn plural(n: usize, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 { one } else { many }
}

fn render_owner(out: &mut String, owner: &OwnerEntry, tree: bool) {
    let _ = write!(out, "OWNER {}  {}", owner.pid, owner.status);
    if let Some(purpose) = &owner.purpose {
        let _ = write!(out, "  {purpose}");
    }
    if !owner.tracked {
        out.push_str("  untracked");
    }
    let _ = write!(out, "  age {}", age(owner.age_ms));
    if !owner.command.is_empty() {
        let _ = write!(out, "  {}", owner.command);
    }
    out.push('\n');
    for session in &owner.sessions {
        render_session(out, session, tree);
    }
}

/// A durable session's line: held on purpose, not orphaned (issue 37).
fn render_durable(out: &mut String, d: &tether_ledger::DurableRow, state: &SessionState) {
    let _ = write!(out, "    durable");
    if let Some(name) = &d.name {
        let _ = write!(out, " {name:?}");
    }
    let _ = write!(out, ", held by {}", d.holder_pid);
    if let (Some(pid), Some(what)) = (d.owner_pid, &d.owner_purpose) {
        let _ = write!(out, ", asked for by {pid} ({what})");
    }
    if matches!(state, SessionState::Running) {
        let left_ms = d.expires_at_ms.saturating_sub(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |t| t.as_millis() as u64),
        );
        if left_ms == 0 {
            let _ = write!(out, ", TTL passed: `tether reap` kills it");
        } else {
            let _ = write!(out, ", TTL left {}", age(left_ms));
        }
    }
    out.push('\n');
}

fn render_session(out: &mut String, session: &SessionEntry, tree: bool) {
    let _ = write!(
        out,
        "  SESSION {}  {}  {}",
        session.id,
        state(&session.state),
        session.purpose
    );
    if let Some(c) = &session.containment {
        let _ = write!(out, "  {c}");
    }
    if !session.tracked {
        out.push_str("  untracked");
    }
    if let Some(cmd) = &session.command {
        let _ = write!(out, "  $ {cmd}");
    }
    out.push('\n');
    if let Some(d) = &session.durable {
        render_durable(out, d, &session.state);
    }
    if let Some(limits) = &session.limits {
        let _ = write!(out, "    limits: {}", limits.summary());
        if let Some(hit) = &session.limit_hit {
            let _ = write!(out, "; hit its {hit} limit");
        }
        out.push('\n');
    }
    if session.processes.is_empty() {
        return;
    }
    if tree {
        render_tree(out, &session.processes);
    } else {
        // Each column as wide as its widest entry: a role such as
        // `keeper,orphan` (13) overran a fixed 10 and pushed its command
        // out of line (issue 39).
        let roles: Vec<String> = session.processes.iter().map(role).collect();
        let states: Vec<String> = session
            .processes
            .iter()
            .map(|p| p.state.to_string())
            .collect();
        let width = |column: &[String], title: &str| {
            column
                .iter()
                .map(|c| c.chars().count())
                .chain([title.len()])
                .max()
                .unwrap_or(0)
        };
        let (state_width, role_width) = (width(&states, "STATE"), width(&roles, "ROLE"));
        let _ = writeln!(
            out,
            "    {:>7} {:>7} {:>7}  {:<state_width$} {:<role_width$} COMMAND",
            "PID", "PPID", "AGE", "STATE", "ROLE"
        );
        for ((p, state), role) in session.processes.iter().zip(&states).zip(&roles) {
            let _ = writeln!(
                out,
                "    {:>7} {:>7} {:>7}  {:<state_width$} {:<role_width$} {}",
                p.pid,
                p.ppid,
                age(p.age_ms),
                state,
                role,
                p.command
            );
        }
    }
}

/// The session's processes as a tree by parent pid; a process whose parent
/// is not in the session is a root (its parent is shown: 1, or a
/// subreaper, means it was orphaned and reparented).
fn render_tree(out: &mut String, processes: &[ProcessEntry]) {
    let pids: std::collections::HashSet<u32> = processes.iter().map(|p| p.pid).collect();
    let mut children: BTreeMap<u32, Vec<&ProcessEntry>> = BTreeMap::new();
    let mut roots = Vec::new();
    for p in processes {
        if pids.contains(&p.ppid) && p.ppid != p.pid {
            children.entry(p.ppid).or_default().push(p);
        } else {
            roots.push(p);
        }
    }
    fn line(out: &mut String, p: &ProcessEntry, prefix: &str, branch: &str) {
        let _ = writeln!(
            out,
            "    {prefix}{branch}{} {} {} {}  {}",
            p.pid,
            role(p),
            p.state,
            age(p.age_ms),
            p.command
        );
    }
    fn walk(
        out: &mut String,
        p: &ProcessEntry,
        children: &BTreeMap<u32, Vec<&ProcessEntry>>,
        prefix: &str,
    ) {
        let kids = children.get(&p.pid).map_or(&[][..], |v| v.as_slice());
        for (i, kid) in kids.iter().enumerate() {
            let last = i + 1 == kids.len();
            line(out, kid, prefix, if last { "└─ " } else { "├─ " });
            let deeper = format!("{prefix}{}", if last { "   " } else { "│  " });
            walk(out, kid, children, &deeper);
        }
    }
    for root in roots {
        let _ = writeln!(out, "    (parent {})", root.ppid);
        line(out, root, "", "└─ ");
        walk(out, root, &children, "   ");
    }
}

fn role(p: &ProcessEntry) -> String {
    let role = match p.role {
        Role::Keeper => "keeper",
        Role::Main => "main",
        Role::Descendant => "-",
    };
    if p.orphaned {
        format!("{role},orphan")
    } else {
        role.to_owned()
    }
}

fn state(s: &SessionState) -> String {
    match s {
        SessionState::Running => "running".into(),
        SessionState::Ended { outcome: Some(o) } => format!("ended ({o})"),
        SessionState::Ended { outcome: None } => "ended".into(),
        SessionState::Orphaned => "ORPHANED".into(),
        SessionState::Lost => "lost (owner died, end never recorded)".into(),
        SessionState::Unknown => "owner unknown".into(),
    }
}

/// `850ms`, `42s`, `3m12s`, `2h05m`, `3d04h`.
pub fn age(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0 => format!("{ms}ms"),
        1..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_naturally() {
        assert_eq!(age(850), "850ms");
        assert_eq!(age(42_000), "42s");
        assert_eq!(age(192_000), "3m12s");
        assert_eq!(age(7_500_000), "2h05m");
        assert_eq!(age(273_600_000), "3d04h");
    }
}
