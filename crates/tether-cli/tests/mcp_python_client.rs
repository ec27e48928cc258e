//! Drives `tether mcp` with a real MCP client nobody here wrote: the
//! official Python SDK (PyPI `mcp`), through the pytest suite that lives
//! with the server, in `crates/tether-mcp/tests/python/`. (It runs from
//! this crate because cargo shows a test only its own package's binaries:
//! the server users run is `tether mcp`, and that is what it drives.)
//!
//! Needs a virtualenv with `mcp` and `pytest`: `$TETHER_TEST_VENV`, else
//! `<workspace>/.venv` (`.ci/run` makes it). Without one this test fails
//! and says how to make it; `TETHER_SKIP_PYTHON=1` skips it instead.

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

/// How to make the virtualenv, for the failure message.
const SETUP: &str = "python3 -m venv .venv && .venv/bin/pip install 'mcp==2.3.0' pytest";

#[test]
fn official_python_sdk_drives_the_server() {
    if std::env::var_os("TETHER_SKIP_PYTHON").is_some_and(|v| v == "1") {
        eprintln!("TETHER_SKIP_PYTHON=1: skipping the Python MCP client tests");
        return;
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let suite = workspace.join("crates/tether-mcp");
    let venv = std::env::var_os("TETHER_TEST_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join(".venv"));
    let python = venv.join("bin/python");
    let usable = python.is_file()
        && Command::new(&python)
            .args(["-c", "import mcp, pytest, jsonschema"])
            .status()
            .is_ok_and(|s| s.success());
    assert!(
        usable,
        "no Python virtualenv with the MCP SDK at {}: run `.ci/run`, or from the workspace \
         root: {SETUP} (or point TETHER_TEST_VENV at one; TETHER_SKIP_PYTHON=1 skips this test)",
        venv.display()
    );
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let server = support::mcp_server_program(scratch.path());
    let output = Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE"])
        .arg(suite.join("tests/python"))
        .env("TETHER_MCP_CMD", &server)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .current_dir(&suite)
        .output()
        .expect("run pytest");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "pytest failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    eprintln!("{}", stdout.lines().last().unwrap_or_default());
}
