//! The Rust examples of README.md and docs/library.md, run as written.
//!
//! Each test carries a copy of one example; `.ci/examples` checks that the
//! copy is still the documentation's block, line for line (the markers
//! `<!-- example: tested by crates/tether/tests/doc_examples.rs (NAME),
//! verbatim -->`), so the two cannot drift apart. After each example,
//! nothing it started through tether may be left running.
//!
//! Each example calls `tether::keeper::run_if_requested()`, which makes the
//! program its own keeper: in a program of one's own, `main` runs first
//! and serves as the keeper when re-run so. A test binary's `main` is
//! libtest's, which cannot, so the tests name the package's own
//! `tether-keeper` in `TETHER_KEEPER` (which wins over the program itself,
//! docs/library.md "Finding the keeper"); the rest runs as written.
//!
//! The examples start `python3 -m http.server 8000`: when another program
//! holds port 8000 the server exits with "Address already in use" at once,
//! and the example still runs as written (`kill` of a command that already
//! exited succeeds), so the tests do not depend on the port being free.

#![cfg(target_os = "linux")]

use tether_testkit::assert_nothing_left;

/// Points `TETHER_KEEPER` at the package's `tether-keeper` (see above).
fn use_built_keeper() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    // SAFETY: set once, before any example spawns; every test sets the same
    // value through this Once, and no thread of this binary reads the
    // environment concurrently with the write (the Once blocks them).
    ONCE.call_once(|| unsafe {
        std::env::set_var("TETHER_KEEPER", env!("CARGO_BIN_EXE_tether-keeper"))
    });
}

/// README.md, "The Rust library".
#[test]
fn readme_the_rust_library() {
    use std::time::Duration;
    use_built_keeper();

    fn main() -> Result<(), tether::Error> {
        // Optional on Linux (any program linking tether is its own keeper);
        // needed on macOS.
        tether::keeper::run_if_requested();

        let out = tether::Command::new("sh")
            .args(["-c", "setsid sleep 600 & echo started"])
            .timeout(Duration::from_secs(10))
            .output()?;
        assert_eq!(out.stdout, b"started\n"); // and the setsid'd sleep is dead

        let mut server = tether::Command::new("python3")
            .args(["-m", "http.server", "8000"])
            .purpose("dev-server")
            .spawn()?;
        server.kill()?; // returns once nothing of the tree is left
        Ok(())
    }

    main().expect("README.md's example");
    assert_nothing_left();
}

/// docs/library.md, "A first program".
#[test]
fn library_a_first_program() {
    use std::time::Duration;
    use_built_keeper();

    fn main() -> Result<(), tether::Error> {
        // Optional on Linux, where any program that links tether is its own
        // keeper anyway; needed on macOS (see "Finding the keeper").
        tether::keeper::run_if_requested();

        let out = tether::Command::new("sh")
            .args(["-c", "setsid sleep 600 & echo started"])
            .timeout(Duration::from_secs(10))
            .output()?;
        assert_eq!(out.stdout, b"started\n"); // and the setsid'd sleep is dead

        let mut server = tether::Command::new("python3")
            .args(["-m", "http.server", "8000"])
            .purpose("dev-server")
            .grace(Duration::from_millis(500))
            .spawn()?;
        println!("pid {} held by {}", server.id(), server.containment());
        server.kill()?; // returns once nothing of the tree is left
        Ok(())
    }

    main().expect("docs/library.md's first program");
    assert_nothing_left();
}

/// docs/library.md, "Many sessions: `tether::registry::Registry`".
#[test]
fn library_registry() {
    use std::time::Duration;
    use tether::registry::{Registry, RegistryConfig, RunSpec, WaitOptions};
    use_built_keeper();

    #[allow(unused_variables)] // `chunk`: the example shows the call
    #[rustfmt::skip] // as the page shows it (one line longer than rustfmt's 100)
    async fn demo() -> Result<(), tether::Error> {
        let registry = Registry::new(RegistryConfig::default());
        let id = registry.run(RunSpec::shell("python3 -m http.server 8000")).await?;
        // Readiness: wait for a line, not a sleep.
        let ready = WaitOptions::new(Duration::from_secs(10)).until("Serving HTTP");
        registry.wait(id.as_str(), ready).await?;
        let chunk = registry.read(id.as_str(), 0, 64 * 1024)?; // bytes + next_offset; offsets never shift
        registry.kill(id.as_str(), Duration::from_secs(2)).await?; // verified tree kill, output drained first
        Ok(())
    }

    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(demo())
        .expect("docs/library.md's registry example");
    assert_nothing_left();
}
