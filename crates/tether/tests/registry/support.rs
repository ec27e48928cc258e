//! Helpers shared by the registry tests: tagged specs, settled waits,
//! memory readings. Process-table checks come from `tether-testkit`.
#![allow(dead_code)] // not every helper is used by every module

use std::time::Duration;

use tether::registry::{Registry, RegistryConfig, RunSpec, SessionInfo, WaitOptions, WaitOutcome};
use tether_testkit::TAG_VAR;

/// A bound for waits that should end by an event long before it; reaching
/// it means the event never came (a failure), not a slow machine.
pub const BOUND: Duration = Duration::from_secs(30);

/// `sh -c script`, tagged with the test's tag and a short grace.
pub fn shell(tag: &str, script: &str) -> RunSpec {
    RunSpec::shell(script)
        .env(TAG_VAR, tag)
        .grace(Duration::from_millis(200))
}

/// A registry with the default limits and a spill directory of its own.
pub fn registry() -> Registry {
    Registry::new(RegistryConfig::default())
}

/// Waits until the session is settled (tree empty, output at EOF).
pub async fn settled(registry: &Registry, id: &str) -> SessionInfo {
    let waited = registry
        .wait(id, WaitOptions::new(BOUND).settled())
        .await
        .expect("wait");
    assert_eq!(
        waited.outcome,
        WaitOutcome::Exited,
        "session {id} never settled"
    );
    assert!(waited.info.settled);
    waited.info
}

/// Reads the whole output stream from offset 0.
pub fn read_all(registry: &Registry, id: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        let chunk = registry.read(id, at, 1 << 20).expect("read");
        assert_eq!(chunk.dropped, 0, "bytes dropped at {at}");
        if chunk.data.is_empty() {
            return out;
        }
        out.extend_from_slice(&chunk.data);
        at = chunk.next_offset;
    }
}

/// A field of `/proc/self/status` in KiB (`VmRSS`, `VmHWM`, …).
pub fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Resets this process's peak RSS (`VmHWM`) to its current RSS.
pub fn reset_peak_rss() {
    std::fs::write("/proc/self/clear_refs", "5").expect("clear_refs");
}
