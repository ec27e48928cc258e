//! `cargo bench -p process-tether-cli --bench grep_stall`: how long a `list`
//! waits while greps with a slow-engine regex run (issue 16, item 3), against
//! the same server's `list` alone in the same run. `benches/grep_stall.py`
//! does the measuring over raw stdio JSON-RPC; `TETHER_MCP_BIN` measures
//! another server program instead (e.g. one from before the fix, to
//! compare). Linux only, like its siblings: it drives real servers with a
//! Python script.

#[cfg(target_os = "linux")]
fn main() {
    use std::path::Path;
    use std::process::Command;
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this too:
    // only measure when asked to.
    if !std::env::args().any(|a| a == "--bench") {
        eprintln!("grep_stall: run with `cargo bench -p process-tether-cli --bench grep_stall`");
        return;
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    // The script starts the server as one program: this one `exec`s
    // `tether mcp` (the server is then the `tether` process itself).
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let script = scratch.path().join("tether-mcp-server");
    let tether = env!("CARGO_BIN_EXE_tether").replace('\'', "'\\''");
    std::fs::write(&script, format!("#!/bin/sh\nexec '{tether}' mcp \"$@\"\n"))
        .expect("write the server script");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("make the server script executable");
    let server = std::env::var_os("TETHER_MCP_BIN").unwrap_or_else(|| script.into());
    let rounds = std::env::var("GREP_BENCH_ROUNDS").unwrap_or_else(|_| "3".into());
    let status = Command::new("python3")
        .arg(manifest.join("benches/grep_stall.py"))
        .arg(&server)
        .args(["--rounds", &rounds])
        .status()
        .expect("run python3 benches/grep_stall.py");
    assert!(status.success(), "the bench script failed: {status}");
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("this benchmark runs on Linux only");
}
