//! The `REGISTERED` part of `tether ps`: processes tether did not start
//! that registered themselves (`tether exec`, `register_self`).

use std::fmt::Write;

use tether_ledger::RegisteredEntry;

/// Appends the listing of registered processes (nothing when there are none).
pub fn render(out: &mut String, registered: &[RegisteredEntry]) {
    if registered.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nREGISTERED (processes tether did not start)");
    let _ = writeln!(
        out,
        "  {:>7} {:>7}  {:<12} {:<24} COMMAND",
        "PID", "AGE", "PURPOSE", "SPAWNER"
    );
    for r in registered {
        let spawner = match &r.spawner {
            Some(s) => format!("{} {}", s.pid, s.status.word()),
            None => "-".into(),
        };
        let _ = writeln!(
            out,
            "  {:>7} {:>7}  {:<12} {:<24} {}",
            r.pid,
            crate::ps::age(r.age_ms),
            r.purpose,
            spawner,
            r.command
        );
        let _ = writeln!(out, "  {:>7} {}", "", r.reap);
    }
}
