//! `cargo bench -p process-tether-mcp --bench grep_stall`: how long a `list`
//! waits while greps with a slow-engine regex run (issue 16, item 3), against
//! the same server's `list` alone in the same run. `benches/grep_stall.py`
//! does the measuring over raw stdio JSON-RPC; `TETHER_MCP_BIN` measures
//! another build instead (e.g. one from before the fix, to compare).

use std::path::Path;
use std::process::Command;

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this too:
    // only measure when asked to.
    if !std::env::args().any(|a| a == "--bench") {
        eprintln!("grep_stall: run with `cargo bench -p process-tether-mcp --bench grep_stall`");
        return;
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let server = std::env::var_os("TETHER_MCP_BIN")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_tether-mcp").into());
    let rounds = std::env::var("GREP_BENCH_ROUNDS").unwrap_or_else(|_| "3".into());
    let status = Command::new("python3")
        .arg(manifest.join("benches/grep_stall.py"))
        .arg(&server)
        .args(["--rounds", &rounds])
        .status()
        .expect("run python3 benches/grep_stall.py");
    assert!(status.success(), "the bench script failed: {status}");
}
