//! Regression tests, one per bug, named by what went wrong. Each names the
//! issue item it came from and failed on the code before its fix.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use tether::Install;
use tether::registry::{Registry, RegistryConfig, RunSpec, WaitOptions, WaitOutcome};
use tether_testkit::{TAG_VAR, TagGuard, wait_all_dead};

/// Set in the re-executed test binary that plays a registry owner.
const HELPER_VAR: &str = "TETHER_REGRESSION_HELPER";

/// Bytes the spilling command writes: 8 MiB through a 1 MiB ring, so about
/// 7 MiB go to the spill file.
const SPILL_OUTPUT: u64 = 8 << 20;

/// Bytes of regular files under `dir`, and how many entries there are
/// (recursively; symlinks are counted, not followed).
fn bytes_under(dir: &Path) -> (u64, usize) {
    let mut total = (0, 0);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return total;
    };
    for entry in entries.flatten() {
        let Ok(meta) = entry.path().symlink_metadata() else {
            continue;
        };
        total.1 += 1;
        if meta.is_dir() {
            let (bytes, n) = bytes_under(&entry.path());
            total = (total.0 + bytes, total.1 + n);
        } else if meta.is_file() {
            total.0 += meta.len();
        }
    }
    total
}

/// Bytes in the files `pid` holds open under `dir`, whether or not they
/// still have a name (a deleted or `O_TMPFILE` file shows as
/// `dir/… (deleted)` or `dir/#inode (deleted)`).
fn open_bytes_under(pid: u32, dir: &Path) -> u64 {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    fds.flatten()
        .filter(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target.starts_with(dir)))
        // metadata follows the magic link to the open file itself.
        .filter_map(|fd| std::fs::metadata(fd.path()).ok())
        .map(|meta| meta.len())
        .sum()
}

/// The owner the spill test SIGKILLs: a registry with the default spill
/// location (the temp dir the parent points `TMPDIR` at) runs one command
/// that writes [`SPILL_OUTPUT`] bytes and stays alive; then this process
/// says `spilled` and waits to be killed.
fn spilling_owner() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let registry = Registry::new(RegistryConfig::default());
        let script = format!("head -c {SPILL_OUTPUT} /dev/zero; echo done; exec sleep 1000");
        let id = registry
            .run(RunSpec::shell(script).env(TAG_VAR, std::env::var(TAG_VAR).unwrap()))
            .await
            .unwrap();
        let waited = registry
            .wait(
                id.as_str(),
                WaitOptions::new(Duration::from_secs(30)).until("done"),
            )
            .await
            .unwrap();
        assert!(matches!(waited.outcome, WaitOutcome::Matched { .. }));
        let info = registry.list().into_iter().next().unwrap();
        assert!(info.spill_error.is_none(), "{:?}", info.spill_error);
        println!("spilled {}", info.output_bytes);
        // Wait for the SIGKILL (the parent's read of the line above is the
        // event it acts on); parking never returns on its own.
        loop {
            std::thread::park();
        }
    });
}

// issue 8 item 7: spill files outlived a SIGKILLed server (805 MB left in /tmp/tether-<pid>-*/).
#[test]
fn spill_files_do_not_outlive_a_sigkilled_owner() {
    if std::env::var_os(HELPER_VAR).is_some() {
        return spilling_owner();
    }
    let guard = TagGuard::new("regression-spill");
    let base = tempfile::tempdir().unwrap();
    let mut owner = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "spill_files_do_not_outlive_a_sigkilled_owner",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HELPER_VAR, "1")
        .env(TAG_VAR, guard.tag())
        .env("TMPDIR", base.path())
        .env_remove("XDG_RUNTIME_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(owner.stdout.take().unwrap());
    // The owner prints its line within seconds or panics (its own waits are
    // bounded); a panic closes stdout, which ends this loop.
    let spilled = stdout
        .lines()
        .map_while(Result::ok)
        // The harness prints `test NAME ... ` before it, on the same line.
        .find_map(|line| line.split_once("spilled ")?.1.parse::<u64>().ok())
        .expect("the owner never reported its spill");
    assert!(spilled > SPILL_OUTPUT, "{spilled}");
    let base_dir = base.path().canonicalize().unwrap();
    let on_disk = open_bytes_under(owner.id(), &base_dir);
    let (named, _) = bytes_under(&base_dir);
    // The ring keeps 1 MiB; the rest must have gone to disk.
    assert!(
        on_disk >= SPILL_OUTPUT - (1 << 20),
        "the owner holds {on_disk} spill bytes open under {}",
        base_dir.display()
    );

    owner.kill().unwrap();
    owner.wait().unwrap();
    let (left, entries) = bytes_under(&base_dir);
    eprintln!(
        "spill: {on_disk} bytes open and {named} bytes named while the owner lived; \
         {left} bytes in {entries} entries left after its SIGKILL"
    );
    assert_eq!(
        (left, entries),
        (0, 0),
        "a SIGKILLed owner left its spill on disk under {}",
        base_dir.display()
    );
    // The keeper takes the session down with its owner.
    assert_eq!(
        wait_all_dead(guard.tag(), Duration::from_secs(10)),
        Vec::<u32>::new()
    );
}

// issue 8 item 10: `$H/` and `$H` shared one ledger but were two installs.
#[test]
fn one_install_however_the_state_dir_is_spelled() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join("sub")).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&home, &link).unwrap();
    let with = |p: &Path, tail: &str| PathBuf::from(format!("{}{tail}", p.display()));

    let id = Install::at(&home).id().to_owned();
    let existing = [
        with(&home, "/"),
        with(&home, "/."),
        with(&home, "/./"),
        with(&home, "//"),
        with(&home, "/sub/.."),
        link.clone(),
        with(&link, "/"),
    ];
    for spelling in &existing {
        assert_eq!(
            Install::at(spelling).id(),
            id,
            "{} is another install than {}",
            spelling.display(),
            home.display()
        );
    }

    // A state directory that does not exist yet: every spelling names one
    // install, and still the same one once it has been created.
    let fresh = home.join("new/state");
    let before = Install::at(&fresh).id().to_owned();
    let spellings = [
        with(&home, "/new/state/"),
        with(&home, "/./new//state"),
        with(&home, "/new/gone/../state"),
        with(&link, "/new/state"),
    ];
    for spelling in &spellings {
        assert_eq!(Install::at(spelling).id(), before, "{}", spelling.display());
    }
    std::fs::create_dir_all(&fresh).unwrap();
    for spelling in spellings.iter().chain([&fresh]) {
        assert_eq!(Install::at(spelling).id(), before, "{}", spelling.display());
    }
    assert_ne!(before, id);
}
