//! A session's limits as the ledger keeps them and the front-ends show
//! them (`tether run --json`, `tether mcp` results, `tether ps`): per
//! limit asked for, its value and how it was enforced.

use serde::{Deserialize, Serialize};
use tether::{Enforcement, LimitReport};

/// `{"memory": {...}, "pids": {...}, "cpu": {...}, "cgroup": "..."}`; a
/// limit not asked for is absent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LimitsRecord {
    /// The memory limit, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<LimitRecord<u64>>,
    /// The process-count limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<LimitRecord<u64>>,
    /// The CPU limit, in cores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<LimitRecord<f64>>,
    /// The session's own cgroup v2 (Linux), when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    /// What gave the limits beyond the owner's own cgroup (`systemd scope
    /// tether-owner-….scope`), when something did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}

/// One limit: `{"value": 268435456, "enforced": "cgroup1"}`, or with
/// `"enforced": "none", "reason": "…"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LimitRecord<T> {
    /// Bytes (memory), processes (pids) or cores (cpu).
    pub value: T,
    /// `cgroup2`, `cgroup1`, `job`, `rlimit` or `none`.
    pub enforced: String,
    /// Why it is not enforced (with `none`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl<T> LimitRecord<T> {
    fn of(value: T, how: &Enforcement) -> LimitRecord<T> {
        LimitRecord {
            value,
            enforced: how.name().to_owned(),
            reason: how.reason().map(str::to_owned),
        }
    }
}

impl LimitsRecord {
    /// The record of a session's limit report; `None` when no limit was
    /// asked for.
    pub fn of(report: &LimitReport) -> Option<LimitsRecord> {
        if report.is_empty() {
            return None;
        }
        Some(LimitsRecord {
            memory: report
                .memory
                .as_ref()
                .map(|(bytes, how)| LimitRecord::of(*bytes, how)),
            pids: report
                .pids
                .as_ref()
                .map(|(n, how)| LimitRecord::of(*n, how)),
            cpu: report
                .cpu_millis
                .as_ref()
                .map(|(millis, how)| LimitRecord::of(*millis as f64 / 1000.0, how)),
            cgroup: report.cgroup.as_ref().map(|p| p.display().to_string()),
            via: report.via.clone(),
        })
    }

    /// As stored in the ledger.
    pub(crate) fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a limits record serializes")
    }

    /// From the ledger; `None` for anything unreadable (the ledger is
    /// attacker-shaped input: a bad value is dropped, never trusted).
    pub(crate) fn from_json(text: &str) -> Option<LimitsRecord> {
        serde_json::from_str(text).ok()
    }

    /// One line for people: `memory 256 MiB (cgroup1), pids 64 (none)`.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        let how = |r: &str| r.to_owned();
        if let Some(m) = &self.memory {
            parts.push(format!(
                "memory {} ({})",
                tether::format_size(m.value),
                how(&m.enforced)
            ));
        }
        if let Some(p) = &self.pids {
            parts.push(format!("pids {} ({})", p.value, how(&p.enforced)));
        }
        if let Some(c) = &self.cpu {
            parts.push(format!("cpu {} ({})", c.value, how(&c.enforced)));
        }
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_round_trips_through_the_ledgers_text() {
        let report = LimitReport {
            memory: Some((256 << 20, Enforcement::Cgroup1)),
            pids: Some((64, Enforcement::None("no delegation".into()))),
            cpu_millis: Some((1500, Enforcement::Cgroup2)),
            cgroup: Some("/sys/fs/cgroup/unified/tether-x".into()),
            cgroups: Vec::new(),
            via: None,
        };
        let record = LimitsRecord::of(&report).unwrap();
        assert_eq!(
            record.to_json(),
            r#"{"memory":{"value":268435456,"enforced":"cgroup1"},"pids":{"value":64,"enforced":"none","reason":"no delegation"},"cpu":{"value":1.5,"enforced":"cgroup2"},"cgroup":"/sys/fs/cgroup/unified/tether-x"}"#
        );
        assert_eq!(
            LimitsRecord::from_json(&record.to_json()),
            Some(record.clone())
        );
        assert_eq!(
            record.summary(),
            "memory 256 MiB (cgroup1), pids 64 (none), cpu 1.5 (cgroup2)"
        );
        assert_eq!(LimitsRecord::from_json("{\"memory\": 5}"), None);
        assert_eq!(LimitsRecord::of(&LimitReport::default()), None);
    }
}
