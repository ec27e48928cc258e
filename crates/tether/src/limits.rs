//! Resource limits of a session: what a caller asks for ([`Limits`]), how
//! each was enforced ([`LimitReport`]), and which one the session ran into
//! ([`LimitHit`]).
//!
//! ```standalone_crate
//! # #[cfg(unix)]
//! # fn main() -> tether::Result<()> {
//! # tether::keeper::run_if_requested();
//! use tether::{Command, Limits};
//!
//! let mut child = Command::new("sh")
//!     .args(["-c", "echo building"])
//!     .limits(Limits::new().memory(2 << 30).pids(256).cpu(1.5))
//!     .spawn()?;
//! // How each limit is enforced: cgroup2, cgroup1, job, rlimit, or none
//! // (with the reason) — `memory 2 GiB (cgroup2), pids 256 (cgroup2), …`.
//! println!("{}", child.limits().summary());
//! let status = child.wait()?;
//! if let Some(hit) = status.limit_hit() {
//!     println!("ran into its {} limit", hit.name());
//! }
//! # #[cfg(target_os = "linux")]
//! # tether_testkit::assert_nothing_left();
//! # Ok(())
//! # }
//! # #[cfg(not(unix))]
//! # fn main() {}
//! ```
//!
//! # How they are enforced
//!
//! By the strongest mechanism the machine offers, and always reported as
//! what was applied — never pretended:
//!
//! - **Linux**: a cgroup v2 leaf of the session's own, below the owner's
//!   cgroup (never elsewhere: a session stays inside every limit its owner
//!   is under), with `memory.max`, `pids.max`, `cpu.max` where a writable,
//!   delegated v2 subtree has those controllers; on hybrid hosts whose
//!   `memory`/`pids`/`cpu` controllers are bound to cgroup v1, leaves in
//!   those v1 hierarchies. The command is placed in its leaves before its
//!   first instruction, and the leaves are removed when the session ends.
//!   A session with a cgroup v2 leaf of its own is killed with
//!   `cgroup.kill` (one write, fork storms included).
//! - **Windows**: the session's job object (job memory, active process
//!   count, CPU rate).
//! - **macOS**: `none`, with the reason (see [`Enforcement`]).
//!
//! Whatever the limits, every process of a session is made the kernel's
//! first choice for the OOM killer on Linux (`oom_score_adj` 1000), so a
//! runaway command is killed before its owner.

use std::fmt;
use std::path::PathBuf;

use crate::error::{Error, Result};

/// Resource limits for one session (default: none). Memory and processes
/// count the whole session — every process of its tree together — where
/// the mechanism allows (cgroups, jobs). Checked at spawn
/// ([`validate`](Limits::validate)); applied by
/// [`Command::limits`](crate::Command::limits) and
/// [`RunSpec::limits`](crate::registry::RunSpec::limits).
///
/// ```
/// use tether::{Limits, parse_size, format_size};
///
/// let limits = Limits::new().memory(parse_size("512M")?).pids(64).cpu(0.5);
/// assert_eq!(limits.memory, Some(512 << 20));
/// assert!(limits.validate().is_ok());
/// assert_eq!(format_size(512 << 20), "512 MiB");
///
/// // Per-session values win; the rest come from the defaults.
/// let merged = Limits::new().pids(8).or(limits);
/// assert_eq!((merged.pids, merged.memory), (Some(8), Some(512 << 20)));
///
/// assert!(Limits::new().cpu(0.001).validate().is_err()); // below MIN_CPU
/// # Ok::<(), tether::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Limits {
    /// Most bytes of memory the session may use (RAM; no swap): past it
    /// the kernel's OOM killer kills one of its processes (Linux) or
    /// allocations fail (Windows).
    pub memory: Option<u64>,
    /// Most processes the session may have at once: past it `fork` fails
    /// with `EAGAIN` (Linux) or process creation fails (Windows).
    pub pids: Option<u64>,
    /// Most CPU time per wall-clock time, in cores (`1.5`: one and a half
    /// cores' worth); the session is throttled, never killed, for it.
    pub cpu: Option<f64>,
    /// Refuse to start the session unless every limit set here is
    /// enforced (default `false`: a limit that cannot be is reported as
    /// `none`, with the reason, and the command runs without it). With it,
    /// the spawn fails with [`Error::LimitNotApplied`] before the command
    /// starts.
    pub require: bool,
}

/// Largest process-count limit: Linux's `PID_MAX_LIMIT` (2^22); its
/// `pids.max` refuses anything above it (`EINVAL`).
pub const MAX_PIDS: u64 = 1 << 22;

/// Smallest CPU limit: 0.01 cores (cgroups take no quota below 1 ms per
/// 100 ms period).
pub const MIN_CPU: f64 = 0.01;

impl Limits {
    /// No limits.
    pub fn new() -> Limits {
        Limits::default()
    }

    /// Sets the memory limit in bytes.
    pub fn memory(mut self, bytes: u64) -> Limits {
        self.memory = Some(bytes);
        self
    }

    /// Sets the process-count limit.
    pub fn pids(mut self, count: u64) -> Limits {
        self.pids = Some(count);
        self
    }

    /// Sets the CPU limit in cores (fractional).
    pub fn cpu(mut self, cores: f64) -> Limits {
        self.cpu = Some(cores);
        self
    }

    /// Demands enforcement: see [`require`](Limits::require).
    pub fn require(mut self, require: bool) -> Limits {
        self.require = require;
        self
    }

    /// Whether no limit is set.
    pub fn is_empty(&self) -> bool {
        self.memory.is_none() && self.pids.is_none() && self.cpu.is_none()
    }

    /// Each limit set here, else the one of `defaults` (how `tether mcp
    /// --memory …` supplies per-session defaults).
    pub fn or(self, defaults: Limits) -> Limits {
        Limits {
            memory: self.memory.or(defaults.memory),
            pids: self.pids.or(defaults.pids),
            cpu: self.cpu.or(defaults.cpu),
            require: self.require || defaults.require,
        }
    }

    /// Checks the values.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a memory limit of 0 bytes, a process
    /// limit of 0 or above 4,194,304 (the kernel's most processes), or a
    /// CPU limit that is not a finite number of at least [`MIN_CPU`] cores.
    pub fn validate(&self) -> Result<()> {
        let bad = |reason: String| Error::InvalidInput {
            what: "limits",
            reason,
        };
        if self.memory == Some(0) {
            return Err(bad("a memory limit must be at least 1 byte".into()));
        }
        if self.pids == Some(0) {
            return Err(bad("a process limit must be at least 1".into()));
        }
        if let Some(pids) = self.pids
            && pids > MAX_PIDS
        {
            return Err(bad(format!(
                "a process limit must be at most {MAX_PIDS} (the kernel's most processes), got {pids}"
            )));
        }
        if let Some(cpu) = self.cpu
            && !(cpu.is_finite() && (MIN_CPU..=1e6).contains(&cpu))
        {
            return Err(bad(format!(
                "a CPU limit must be from {MIN_CPU} to 1000000 cores, got {cpu}"
            )));
        }
        Ok(())
    }
}

/// How one limit was enforced.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Enforcement {
    /// A cgroup v2 controller of the session's own cgroup (Linux).
    Cgroup2,
    /// A cgroup v1 controller: a leaf of the session's own in that
    /// hierarchy (Linux hybrid hosts, where the controller is bound to v1).
    Cgroup1,
    /// A limit of the session's job object (Windows).
    Job,
    /// A per-process resource limit (`setrlimit`): each process, not the
    /// session's total.
    Rlimit,
    /// Not enforced, for this reason (no delegated cgroup, no such
    /// controller, a platform without the mechanism, …).
    None(String),
}

impl Enforcement {
    /// Short name used in reports: `cgroup2`, `cgroup1`, `job`, `rlimit`,
    /// `none`.
    pub fn name(&self) -> &'static str {
        match self {
            Enforcement::Cgroup2 => "cgroup2",
            Enforcement::Cgroup1 => "cgroup1",
            Enforcement::Job => "job",
            Enforcement::Rlimit => "rlimit",
            Enforcement::None(_) => "none",
        }
    }

    /// Why the limit is not enforced (`None` when it is).
    pub fn reason(&self) -> Option<&str> {
        match self {
            Enforcement::None(reason) => Some(reason),
            _ => None,
        }
    }

    /// Whether the limit is enforced at all.
    pub fn is_enforced(&self) -> bool {
        !matches!(self, Enforcement::None(_))
    }
}

impl fmt::Display for Enforcement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Enforcement::None(reason) => write!(f, "none ({reason})"),
            other => f.write_str(other.name()),
        }
    }
}

/// What was applied to a session: per limit asked for, how it is enforced
/// (`None` for a limit not asked for).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LimitReport {
    /// The memory limit, in bytes, and its enforcement.
    pub memory: Option<(u64, Enforcement)>,
    /// The process-count limit and its enforcement.
    pub pids: Option<(u64, Enforcement)>,
    /// The CPU limit in thousandths of a core (`1500`: 1.5 cores) and its
    /// enforcement.
    pub cpu_millis: Option<(u64, Enforcement)>,
    /// The session's own cgroup v2 (Linux), when it has one: its
    /// `cgroup.kill` ends the tree. Removed when the session ends.
    pub cgroup: Option<PathBuf>,
    /// Every cgroup directory made for the session — its v2 leaf and its
    /// leaves in v1 hierarchies — all removed when it ends (or, after its
    /// keeper was killed too, by `tether reap`).
    pub cgroups: Vec<PathBuf>,
    /// What gave the limits beyond the owner's own cgroup: `systemd scope
    /// tether-owner-….scope` when the owner asked systemd for a delegated
    /// cgroup because its own could not host the session's (Linux, pure
    /// cgroup v2 in a login session); `None` otherwise.
    pub via: Option<String>,
}

impl LimitReport {
    /// A report saying every limit of `limits` is not enforced, for
    /// `reason`.
    #[cfg_attr(not(windows), allow(dead_code))]
    pub(crate) fn none(limits: &Limits, reason: &str) -> LimitReport {
        let none = || Enforcement::None(reason.to_owned());
        LimitReport {
            memory: limits.memory.map(|m| (m, none())),
            pids: limits.pids.map(|p| (p, none())),
            cpu_millis: limits.cpu.map(|c| (cpu_millis(c), none())),
            cgroup: None,
            cgroups: Vec::new(),
            via: None,
        }
    }

    /// Whether no limit was asked for.
    pub fn is_empty(&self) -> bool {
        self.memory.is_none() && self.pids.is_none() && self.cpu_millis.is_none()
    }

    /// The first limit asked for and not enforced — `memory`, `pids` or
    /// `cpu` — and why; `None` when every one is.
    pub fn unenforced(&self) -> Option<(&'static str, &str)> {
        [
            ("memory", self.memory.as_ref().map(|(_, how)| how)),
            ("pids", self.pids.as_ref().map(|(_, how)| how)),
            ("cpu", self.cpu_millis.as_ref().map(|(_, how)| how)),
        ]
        .into_iter()
        .find_map(|(name, how)| Some((name, how?.reason()?)))
    }

    /// The limits asked for and not enforced, for people: `memory 64 MiB
    /// (why); pids 8 (why)`; `None` when every one is, or none was asked
    /// for.
    pub fn unenforced_summary(&self) -> Option<String> {
        let mut parts = Vec::new();
        if let Some((bytes, how)) = &self.memory
            && let Some(why) = how.reason()
        {
            parts.push(format!("memory {} ({why})", format_size(*bytes)));
        }
        if let Some((n, how)) = &self.pids
            && let Some(why) = how.reason()
        {
            parts.push(format!("pids {n} ({why})"));
        }
        if let Some((millis, how)) = &self.cpu_millis
            && let Some(why) = how.reason()
        {
            parts.push(format!("cpu {} ({why})", format_cores(*millis)));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// One line for people: `memory 256 MiB (cgroup1), pids 64 (none:
    /// …)`; empty when no limit was asked for.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if let Some((bytes, how)) = &self.memory {
            parts.push(format!("memory {} ({how})", format_size(*bytes)));
        }
        if let Some((n, how)) = &self.pids {
            parts.push(format!("pids {n} ({how})"));
        }
        if let Some((millis, how)) = &self.cpu_millis {
            parts.push(format!("cpu {} ({how})", format_cores(*millis)));
        }
        parts.join(", ")
    }
}

/// A process of the session found outside the session's cgroups: it moved
/// itself (or was moved) out of its limits — one write of its pid to
/// another cgroup's `cgroup.procs` does it, for root or a user with a
/// delegated cgroup. While the session runs, the keeper checks every
/// 250 ms and moves such a process back into the cgroups it left
/// (`moved_back` counts the moves); at a kill, and for what the command
/// left behind, its walk finds the rest. It still dies with the session.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct LimitEscape {
    /// Its pid.
    pub pid: u32,
    /// Where it was, per hierarchy it left: `hierarchy:path` as
    /// `/proc/<pid>/cgroup` says, space-separated, the limits' hierarchies
    /// first (`memory:/user.slice pids:/ cgroup2:/`).
    pub cgroup: String,
    /// How many times the keeper moved it back into the session's
    /// cgroups (0: found outside only at the end, or the move failed).
    pub moved_back: u32,
}

/// A limit the session ran into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LimitHit {
    /// The session reached its memory limit and the kernel killed
    /// `victims` of its processes for it (Linux: the OOM killer inside the
    /// session's cgroup; the owner is untouched). On Windows allocations
    /// failed instead (`victims` 0).
    Memory {
        /// Processes of the session killed for it.
        victims: u32,
    },
    /// The session reached its process-count limit: `refused` process
    /// creations failed (`fork` → `EAGAIN`).
    Pids {
        /// Process creations refused.
        refused: u64,
    },
}

impl LimitHit {
    /// `memory` or `pids`.
    pub fn name(&self) -> &'static str {
        match self {
            LimitHit::Memory { .. } => "memory",
            LimitHit::Pids { .. } => "pids",
        }
    }

    /// The memory hit if both were hit (it killed processes), else
    /// whichever there is.
    pub(crate) fn worst(a: Option<LimitHit>, b: Option<LimitHit>) -> Option<LimitHit> {
        match (a, b) {
            (Some(m @ LimitHit::Memory { .. }), _) | (_, Some(m @ LimitHit::Memory { .. })) => {
                Some(m)
            }
            (a, b) => a.or(b),
        }
    }
}

impl fmt::Display for LimitHit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LimitHit::Memory { victims } => {
                write!(f, "memory limit reached ({victims} process(es) killed)")
            }
            LimitHit::Pids { refused } => {
                write!(f, "process limit reached ({refused} fork(s) refused)")
            }
        }
    }
}

/// Cores as thousandths of a core, rounded.
pub(crate) fn cpu_millis(cores: f64) -> u64 {
    (cores * 1000.0).round() as u64
}

/// `1.5` for 1500 thousandths of a core.
fn format_cores(millis: u64) -> String {
    let cores = millis as f64 / 1000.0;
    format!("{cores}")
}

/// Parses a size such as `512M`, `2G`, `1.5GiB`, `4096` (bytes), `64k`.
/// Suffixes are binary (`K` = 1024) with or without `B`/`iB`, any case.
///
/// # Errors
/// [`Error::InvalidInput`] naming the text for anything else, for 0, or
/// for a size beyond 2^63 bytes.
pub fn parse_size(text: &str) -> Result<u64> {
    let bad = |why: &str| Error::InvalidInput {
        what: "size",
        reason: format!("{why}: {text:?} (expected bytes or a size such as 512M, 2G, 1.5GiB)"),
    };
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(bad("unknown unit")),
    };
    // Integer arithmetic throughout: through a float, 9223372036854775807
    // became …808 (f64 has 53 bits of mantissa).
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return Err(bad("not a number"));
    }
    let digits = |s: &str| -> Option<u128> {
        s.bytes().try_fold(0u128, |n, d| {
            n.checked_mul(10)?.checked_add(u128::from(d - b'0'))
        })
    };
    let whole = digits(whole).ok_or_else(|| bad("out of range"))?;
    // Beyond 18 digits a fraction of a TiB is below one byte.
    let fraction = &fraction[..fraction.len().min(18)];
    let scale = 10u128.pow(fraction.len() as u32);
    let part = digits(fraction).ok_or_else(|| bad("not a number"))?;
    let bytes = whole
        .checked_mul(1 << shift)
        .and_then(|b| b.checked_add(((part << shift) + scale / 2) / scale))
        .filter(|b| (1..=(1u128 << 63)).contains(b))
        .ok_or_else(|| bad("out of range"))?;
    Ok(bytes as u64)
}

/// `256 MiB`, `1.5 GiB`, `4096 B`.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 || value.fract() == 0.0 {
        format!("{value} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_the_way_people_write_them() {
        assert_eq!(parse_size("512M").unwrap(), 512 << 20);
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
        assert_eq!(parse_size("2g").unwrap(), 2 << 30);
        assert_eq!(parse_size("1.5GiB").unwrap(), 3 << 29);
        assert_eq!(parse_size("64kb").unwrap(), 64 << 10);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        for bad in ["", "M", "0", "12X", "-1G", "1e3", "99999999999T"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
        assert_eq!(format_size(256 << 20), "256 MiB");
        assert_eq!(format_size(3 << 29), "1.5 GiB");
        assert_eq!(format_size(100), "100 B");
    }

    #[test]
    fn limits_are_checked_and_defaults_fill_the_gaps() {
        assert!(Limits::new().validate().is_ok());
        assert!(Limits::new().memory(0).validate().is_err());
        assert!(Limits::new().pids(0).validate().is_err());
        assert!(Limits::new().cpu(0.001).validate().is_err());
        assert!(Limits::new().cpu(f64::NAN).validate().is_err());
        let merged = Limits::new()
            .pids(10)
            .or(Limits::new().pids(64).memory(1 << 30));
        assert_eq!(merged, Limits::new().pids(10).memory(1 << 30));
        let hit = LimitHit::worst(
            Some(LimitHit::Pids { refused: 3 }),
            Some(LimitHit::Memory { victims: 1 }),
        );
        assert_eq!(hit.unwrap().name(), "memory");
    }
}
