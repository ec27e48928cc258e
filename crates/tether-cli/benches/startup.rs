//! `TETHER_STARTUP_BASELINE=/path/to/an/older/tether cargo bench -p process-tether-cli --bench startup`:
//! the release binary's size and start-up (`tether --version`,
//! `tether run -- /bin/true`) against an older `tether` in the same run,
//! as a markdown table (issue 17; docs/benchmarks.md's "Release binary" figures
//! compare with a release build of a2bd8e4). The measuring is done by
//! `benches/startup.py`, interleaving the two binaries run by run.

use std::path::Path;
use std::process::Command;

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this too:
    // only measure when asked to.
    if !std::env::args().any(|a| a == "--bench") {
        eprintln!("startup: run with `cargo bench -p process-tether-cli --bench startup`");
        return;
    }
    let Some(baseline) = std::env::var_os("TETHER_STARTUP_BASELINE") else {
        eprintln!(
            "startup: set TETHER_STARTUP_BASELINE to the tether to compare with (for example \
             `git worktree add /tmp/base a2bd8e4 && cargo build --release --manifest-path \
             /tmp/base/Cargo.toml -p process-tether-cli`)"
        );
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/startup.py");
    let status = Command::new("python3")
        .arg(script)
        .arg(baseline)
        .arg(env!("CARGO_BIN_EXE_tether"))
        .status()
        .expect("run python3 benches/startup.py");
    assert!(status.success(), "the bench script failed: {status}");
}
