//! Resource limits from JavaScript (`memory`, `pids`, `cpu`) and the
//! library's report of how each was enforced.

use napi::Either;
use napi_derive::napi;

use crate::error::{IntoJs, invalid};

/// `memory` (bytes, or a size such as `'512M'`), `pids` and `cpu` (cores)
/// as the library's [`tether::Limits`].
pub(crate) fn from_js(
    memory: Option<Either<String, f64>>,
    pids: Option<f64>,
    cpu: Option<f64>,
    require: bool,
) -> napi::Result<tether::Limits> {
    let memory = match memory {
        None => None,
        Some(Either::A(text)) => {
            Some(tether::parse_size(&text).map_err(|e| invalid(&format!("memory: {e}")))?)
        }
        Some(Either::B(bytes)) => Some(whole("memory", bytes)?),
    };
    let limits = tether::Limits {
        memory,
        pids: pids.map(|p| whole("pids", p)).transpose()?,
        cpu,
        require,
    };
    limits.validate().js()?;
    Ok(limits)
}

fn whole(what: &str, n: f64) -> napi::Result<u64> {
    if n >= 1.0 && n.fract() == 0.0 && n < 2f64.powi(53) {
        Ok(n as u64)
    } else {
        Err(invalid(&format!(
            "{what} must be a whole number >= 1, not {n}"
        )))
    }
}

/// One limit as applied: its value and how it is enforced (`cgroup-v2`,
/// `rlimit`, …, or `none` with the reason).
#[napi(object)]
pub struct Limit {
    pub value: f64,
    pub enforced: String,
    pub reason: Option<String>,
}

/// The limits of a command as applied (absent: not asked for).
#[napi(object)]
pub struct LimitReport {
    pub memory: Option<Limit>,
    pub pids: Option<Limit>,
    pub cpu: Option<Limit>,
    pub cgroup: Option<String>,
}

impl From<&tether::LimitReport> for LimitReport {
    fn from(report: &tether::LimitReport) -> LimitReport {
        let limit = |value: f64, how: &tether::Enforcement| Limit {
            value,
            enforced: how.name().to_owned(),
            reason: how.reason().map(str::to_owned),
        };
        LimitReport {
            memory: report.memory.as_ref().map(|(b, h)| limit(*b as f64, h)),
            pids: report.pids.as_ref().map(|(n, h)| limit(*n as f64, h)),
            cpu: report
                .cpu_millis
                .as_ref()
                .map(|(m, h)| limit(*m as f64 / 1000.0, h)),
            cgroup: report.cgroup.as_ref().map(|p| p.display().to_string()),
        }
    }
}
