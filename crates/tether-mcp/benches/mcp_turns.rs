//! `cargo bench -p process-tether-mcp --bench mcp_turns`: the latency of the agent
//! workflows of issue 12 and the memory of issue 8's pipelined burst, for
//! this build and for the server's previous release, in one run.
//!
//! The previous release is `tether-mcp` built from git commit
//! [`BASELINE`]: `$TETHER_MCP_BASELINE` if set (a path to that binary),
//! else built here once — a detached `git worktree` of the commit under
//! `target/baseline-<commit>/src`, compiled into `target/baseline-<commit>/target`
//! (a few minutes the first time, cached after). The measuring is done by
//! `benches/mcp_turns.py` over raw stdio JSON-RPC (no SDK), interleaving the
//! two servers round by round so machine noise hits both alike.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The commit of the previous release.
const BASELINE: &str = "f208ad3";

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this too:
    // only measure when asked to.
    if !std::env::args().any(|a| a == "--bench") {
        eprintln!("mcp_turns: run with `cargo bench -p process-tether-mcp --bench mcp_turns`");
        return;
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let new = env!("CARGO_BIN_EXE_tether-mcp");
    let baseline = match std::env::var_os("TETHER_MCP_BASELINE") {
        Some(path) => PathBuf::from(path),
        None => build_baseline(&manifest.join("../..")),
    };
    let rounds = std::env::var("MCP_BENCH_ROUNDS").unwrap_or_else(|_| "15".into());
    eprintln!("new: {new}\nbaseline ({BASELINE}): {}", baseline.display());
    let status = Command::new("python3")
        .arg(manifest.join("benches/mcp_turns.py"))
        .arg(new)
        .arg(&baseline)
        .args(["--rounds", &rounds])
        .status()
        .expect("run python3 benches/mcp_turns.py");
    assert!(status.success(), "the bench script failed: {status}");
}

/// Builds `tether-mcp` at [`BASELINE`] (once) and returns its path.
fn build_baseline(workspace: &Path) -> PathBuf {
    let dir = workspace.join(format!("target/baseline-{BASELINE}"));
    let binary = dir.join("target/release/tether-mcp");
    if binary.is_file() {
        return binary;
    }
    let src = dir.join("src");
    if !src.join("Cargo.toml").is_file() {
        let added = Command::new("git")
            .arg("-C")
            .arg(workspace)
            .args(["worktree", "add", "--detach"])
            .arg(&src)
            .arg(BASELINE)
            .status()
            .expect("run git worktree add");
        assert!(added.success(), "git worktree add of {BASELINE} failed");
    }
    let built = Command::new(env!("CARGO"))
        .args(["build", "--release", "-p", "tether-mcp", "--target-dir"])
        .arg(dir.join("target"))
        .current_dir(&src)
        .status()
        .expect("run cargo build of the baseline");
    assert!(built.success(), "building the baseline {BASELINE} failed");
    binary
}
