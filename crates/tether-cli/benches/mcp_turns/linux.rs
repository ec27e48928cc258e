//! The `mcp_turns` bench (see `../mcp_turns.rs`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The commit of the previous release.
const BASELINE: &str = "f208ad3";

pub fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this too:
    // only measure when asked to.
    if !std::env::args().any(|a| a == "--bench") {
        eprintln!("mcp_turns: run with `cargo bench -p process-tether-cli --bench mcp_turns`");
        return;
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    // The script starts each server as one program: this one `exec`s
    // `tether mcp` (the server is then the `tether` process itself).
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let new = scratch.path().join("tether-mcp-server");
    let tether = env!("CARGO_BIN_EXE_tether").replace('\'', "'\\''");
    std::fs::write(&new, format!("#!/bin/sh\nexec '{tether}' mcp \"$@\"\n"))
        .expect("write the server script");
    std::fs::set_permissions(&new, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("make the server script executable");
    let baseline = match std::env::var_os("TETHER_MCP_BASELINE") {
        Some(path) => PathBuf::from(path),
        None => build_baseline(&manifest.join("../..")),
    };
    let rounds = std::env::var("MCP_BENCH_ROUNDS").unwrap_or_else(|_| "15".into());
    eprintln!(
        "new: {} mcp\nbaseline ({BASELINE}): {}",
        env!("CARGO_BIN_EXE_tether"),
        baseline.display()
    );
    let status = Command::new("python3")
        .arg(manifest.join("benches/mcp_turns/mcp_turns.py"))
        .arg(&new)
        .arg(&baseline)
        .args(["--rounds", &rounds])
        .status()
        .expect("run python3 benches/mcp_turns/mcp_turns.py");
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
