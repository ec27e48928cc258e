//! Drives `tether mcp` with the other official MCP client: the TypeScript
//! SDK (npm `@modelcontextprotocol/sdk`, pinned in
//! `crates/tether-mcp/tests/node/package.json`), through the `node --test`
//! suite that lives with the server there. (It runs from this crate
//! because cargo shows a test only its own package's binaries: the server
//! users run is `tether mcp`, and that is what it drives.)
//!
//! Needs node and the SDK installed in `tests/node/node_modules` (`.ci/run`
//! runs `npm ci` there). Without them this test fails and says how to
//! install them; `TETHER_SKIP_NODE=1` skips it instead.

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

mod support;

use std::path::Path;
use std::process::Command;

/// How to install the SDK, for the failure message.
const SETUP: &str = "npm ci --prefix crates/tether-mcp/tests/node";

#[test]
fn official_typescript_sdk_drives_the_server() {
    if std::env::var_os("TETHER_SKIP_NODE").is_some_and(|v| v == "1") {
        eprintln!("TETHER_SKIP_NODE=1: skipping the TypeScript MCP client tests");
        return;
    }
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tether-mcp/tests/node");
    let sdk = suite.join("node_modules/@modelcontextprotocol/sdk/package.json");
    let node = Command::new("node").arg("--version").output();
    assert!(
        node.as_ref().is_ok_and(|o| o.status.success()) && sdk.is_file(),
        "node or the TypeScript MCP SDK is missing ({}): run `.ci/run`, or from the workspace \
         root: {SETUP} (TETHER_SKIP_NODE=1 skips this test)",
        if sdk.is_file() {
            "no usable `node` on PATH".to_owned()
        } else {
            format!("{} does not exist", sdk.display())
        }
    );
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let server = support::mcp_server_program(scratch.path());
    let output = Command::new("node")
        .args(["--test", "--test-reporter=spec", "--test-concurrency=1"])
        .arg("tools.test.mjs")
        .env("TETHER_MCP_CMD", &server)
        .current_dir(&suite)
        .output()
        .expect("run node --test");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "node --test failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    eprintln!(
        "{}",
        stdout
            .lines()
            .filter(|l| l.contains("pass") || l.contains("fail"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
