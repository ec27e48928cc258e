//! How limits appear in the CLI's JSON (`tether run --json`): per limit
//! asked for, its value and how it was enforced.

use serde::Serialize;
use tether::{Enforcement, LimitReport};

/// `{"memory": {...}, "pids": {...}, "cpu": {...}, "cgroup": "..."}`; a
/// limit not asked for is absent.
#[derive(Serialize, Default)]
pub struct LimitsJson {
    #[serde(skip_serializing_if = "Option::is_none")]
    memory: Option<LimitJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pids: Option<LimitJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cpu: Option<LimitJson>,
    /// The session's own cgroup v2, when it had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    cgroup: Option<String>,
}

/// One limit: `{"value": 268435456, "enforced": "cgroup1"}`, or with
/// `"enforced": "none", "reason": "…"`.
#[derive(Serialize)]
pub struct LimitJson {
    /// Bytes (memory), processes (pids) or cores (cpu).
    value: serde_json::Value,
    /// `cgroup2`, `cgroup1`, `job`, `rlimit` or `none`.
    enforced: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

impl LimitJson {
    fn of(value: serde_json::Value, how: &Enforcement) -> LimitJson {
        LimitJson {
            value,
            enforced: how.name(),
            reason: how.reason().map(str::to_owned),
        }
    }
}

impl LimitsJson {
    /// The JSON of a child's or session's limit report.
    pub fn of(report: &LimitReport) -> LimitsJson {
        LimitsJson {
            memory: report
                .memory
                .as_ref()
                .map(|(bytes, how)| LimitJson::of((*bytes).into(), how)),
            pids: report
                .pids
                .as_ref()
                .map(|(n, how)| LimitJson::of((*n).into(), how)),
            cpu: report
                .cpu_millis
                .as_ref()
                .map(|(millis, how)| LimitJson::of((*millis as f64 / 1000.0).into(), how)),
            cgroup: report.cgroup.as_ref().map(|p| p.display().to_string()),
        }
    }
}
