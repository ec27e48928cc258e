//! `cargo bench -p process-tether-cli --bench mcp_turns`: the latency of the
//! agent workflows of issue 12 and the memory of issue 8's pipelined burst,
//! for this build's `tether mcp` and for the server's previous release, in
//! one run.
//!
//! The previous release is `tether-mcp` built from git commit
//! `f208ad3`: `$TETHER_MCP_BASELINE` if set (a path to that binary),
//! else built here once — a detached `git worktree` of the commit under
//! `target/baseline-<commit>/src`, compiled into `target/baseline-<commit>/target`
//! (a few minutes the first time, cached after). The measuring is done by
//! `benches/mcp_turns/mcp_turns.py` over raw stdio JSON-RPC (no SDK), interleaving the
//! two servers round by round so machine noise hits both alike.
//!
//! The benchmark itself is in `mcp_turns/linux.rs`: it drives real servers
//! over stdio with a Python script, so elsewhere this target only says so.

#[cfg(target_os = "linux")]
#[path = "mcp_turns/linux.rs"]
mod linux;

fn main() {
    #[cfg(target_os = "linux")]
    linux::main();
    #[cfg(not(target_os = "linux"))]
    eprintln!("this benchmark runs on Linux only");
}
