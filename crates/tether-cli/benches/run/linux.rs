//! See the bench target's own docs (`../run.rs`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{Build, builds, listing, percentile, us};

const ROUNDS: usize = 200;

/// One command line to time, from spawn to reaped.
struct Case {
    name: String,
    command: Command,
    samples: Vec<Duration>,
    /// Kept alive for as long as the case: its ledger directory.
    _home: Option<tempfile::TempDir>,
}

impl Case {
    fn timeout() -> Case {
        let mut command = Command::new("timeout");
        command.args(["10", "/bin/true"]);
        Case::new("`timeout 10 /bin/true`".into(), command, None)
    }

    /// `tether run -- /bin/true` with a ledger of its own (which grows by
    /// one owner and one session per run, as a user's does), `tether`
    /// copied into a directory of its own — alone (it is its own keeper)
    /// or with `keeper` beside it as `tether-keeper`.
    fn tether(build: &Build, keeper: Option<&Path>) -> Case {
        let home = tempfile::tempdir().expect("temporary TETHER_HOME");
        let tether = install(build, keeper, home.path());
        let mut command = Command::new(&tether);
        command
            .args(["run", "--", "/bin/true"])
            .env("TETHER_HOME", home.path())
            .env_remove("TETHER_KEEPER");
        Case::new(
            format!("`tether run -- /bin/true`, {}, {}", build.name, how(keeper)),
            command,
            Some(home),
        )
    }

    /// The same with a week of a busy user's runs in its ledger:
    /// [`BIG_LEDGER_OWNERS`] ended owners with a session each (12 MB), all
    /// within the retention — what a run's fixed cost must not grow with.
    fn tether_big_ledger(build: &Build, keeper: Option<&Path>) -> Case {
        let home = tempfile::tempdir().expect("temporary TETHER_HOME");
        let tether = install(build, keeper, home.path());
        // The store as this build creates it, then grown by SQL.
        let status = Command::new(&tether)
            .args(["run", "--", "/bin/true"])
            .env("TETHER_HOME", home.path())
            .env_remove("TETHER_KEEPER")
            .status()
            .expect("spawn");
        assert!(status.success());
        // A run records itself in a journal; the first open of the store
        // (here `tether ps`) folds it in (builds before the journal wrote
        // the store directly).
        let status = Command::new(&tether)
            .args(["ps", "--all", "--json"])
            .env("TETHER_HOME", home.path())
            .stdout(Stdio::null())
            .status()
            .expect("spawn");
        assert!(status.success());
        grow_ledger(&home.path().join("ledger.db"));
        let mut command = Command::new(&tether);
        command
            .args(["run", "--", "/bin/true"])
            .env("TETHER_HOME", home.path())
            .env_remove("TETHER_KEEPER");
        Case::new(
            format!(
                "`tether run -- /bin/true`, {BIG_LEDGER_OWNERS} owners in the ledger, {}, {}",
                build.name,
                how(keeper)
            ),
            command,
            Some(home),
        )
    }

    fn new(name: String, mut command: Command, home: Option<tempfile::TempDir>) -> Case {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        Case {
            name,
            command,
            samples: Vec::with_capacity(ROUNDS),
            _home: home,
        }
    }

    fn once(&mut self) -> Duration {
        let start = Instant::now();
        let status = self.command.status().expect("spawn");
        let elapsed = start.elapsed();
        assert!(status.success(), "{}: {status}", self.name);
        elapsed
    }
}

/// `build`'s `tether` copied into `home/bin`, alone (it is its own keeper)
/// or with `keeper` beside it as `tether-keeper`.
fn install(build: &Build, keeper: Option<&Path>, home: &Path) -> PathBuf {
    let bin = home.join("bin");
    std::fs::create_dir(&bin).expect("a bin directory");
    let tether = bin.join("tether");
    std::fs::copy(&build.path, &tether).expect("copy tether");
    if let Some(keeper) = keeper {
        std::fs::copy(keeper, bin.join("tether-keeper")).expect("copy the keeper");
    }
    tether
}

fn how(keeper: Option<&Path>) -> &'static str {
    match keeper {
        None => "its own keeper",
        Some(_) => "static `tether-keeper` beside it",
    }
}

/// Owners (with a session each) in the big ledger: ~4,300 runs a day for
/// the 7 days of retention.
const BIG_LEDGER_OWNERS: usize = 30_000;

/// Copies the store's one owner and session [`BIG_LEDGER_OWNERS`] times,
/// as ended runs of the last hour, in one transaction.
fn grow_ledger(path: &std::path::Path) {
    let mut conn = rusqlite::Connection::open(path).expect("the ledger");
    let tx = conn.transaction().expect("a transaction");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64;
    for n in 0..BIG_LEDGER_OWNERS as i64 {
        tx.execute(
            "INSERT INTO owners (install, boot_id, pid, start_time, pidfs_inode, uid, purpose,
                 argv, started_at_ms, registered_at_ms, ended_at_ms, source)
             SELECT install, boot_id, 4000000 + ?1, start_time, pidfs_inode, uid, purpose,
                 argv, ?2, ?2, ?2, source FROM owners ORDER BY id LIMIT 1",
            rusqlite::params![n, now - 3_600_000 + n],
        )
        .expect("an owner");
        tx.execute(
            "INSERT INTO sessions (id, owner_id, purpose, containment, command, cwd, main_pid,
                 main_start_time, keeper_pid, keeper_start_time, started_at_ms, ended_at_ms,
                 outcome, exit_code, source)
             SELECT 'bench-' || ?1, last_insert_rowid(), purpose, containment, command, cwd,
                 main_pid, main_start_time, keeper_pid, keeper_start_time, ?2, ?2, outcome,
                 exit_code, source FROM sessions ORDER BY started_at_ms LIMIT 1",
            rusqlite::params![n, now - 3_600_000 + n],
        )
        .expect("a session");
    }
    tx.commit().expect("commit");
}

pub fn main() {
    if listing() {
        return;
    }
    // Each build with its own static keeper, where there is one: this
    // build's, and the baseline's if `TETHER_BASELINE_KEEPER` names it (a
    // keeper serves its own build only).
    let keepers = [
        static_keeper(),
        std::env::var_os("TETHER_BASELINE_KEEPER")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from),
    ];
    let with_keepers = || {
        builds()
            .into_iter()
            .zip(&keepers)
            .filter_map(|(build, keeper)| Some((build, keeper.as_deref()?)))
    };
    let mut cases = vec![Case::timeout()];
    cases.extend(builds().iter().map(|build| Case::tether(build, None)));
    cases.extend(with_keepers().map(|(build, keeper)| Case::tether(&build, Some(keeper))));
    // This build linked statically, as the Python wheel ships it (the
    // same source: this build's keeper serves it).
    if let Some(build) = static_tether() {
        cases.push(Case::tether(&build, None));
        if let Some(keeper) = &keepers[0] {
            cases.push(Case::tether(&build, Some(keeper)));
            cases.push(Case::tether_big_ledger(&build, Some(keeper)));
        }
    }
    cases.extend(
        builds()
            .iter()
            .map(|build| Case::tether_big_ledger(build, None)),
    );
    cases.extend(
        with_keepers().map(|(build, keeper)| Case::tether_big_ledger(&build, Some(keeper))),
    );
    for case in &mut cases {
        for _ in 0..5 {
            case.once(); // warm-up: page cache, ledger created
        }
    }
    for _ in 0..ROUNDS {
        for case in &mut cases {
            let took = case.once();
            case.samples.push(took);
        }
    }
    println!("## one contained command from the command line ({ROUNDS} rounds, interleaved)\n");
    println!("| case | p50 µs | p90 µs | p50 ratio to `timeout` |");
    println!("|---|---|---|---|");
    let base = percentile(&cases[0].samples, 0.5);
    for case in &cases {
        let p50 = percentile(&case.samples, 0.5);
        println!(
            "| {} | {:.0} | {:.0} | {:.2} |",
            case.name,
            us(p50),
            us(percentile(&case.samples, 0.9)),
            us(p50) / us(base)
        );
    }
}

/// This build's `tether` linked statically against glibc, its relocations
/// packed, as the Python wheel ships it (crates/tether-py/build/
/// tether_build.py): `$TETHER_STATIC_BIN`, else built here with `cargo
/// rustc --release -p process-tether-cli --bin tether -- -C
/// target-feature=+crt-static -C link-arg=-Wl,-z,pack-relative-relocs`
/// (glibc 2.36+) into a target directory of its own (`static-tether/`
/// under this one: the first time, a release build of every crate).
/// `None`, said on stderr, if neither.
fn static_tether() -> Option<Build> {
    let target = target_dir().join("static-tether");
    let path = prebuilt_or(
        "TETHER_STATIC_BIN",
        &[
            "rustc",
            "--quiet",
            "--release",
            "-p",
            "process-tether-cli",
            "--bin",
            "tether",
            "--",
            "-C",
            "target-feature=+crt-static",
            "-C",
            "link-arg=-Wl,-z,pack-relative-relocs",
        ],
        Some(&target),
        target.join("release/tether"),
        "no static tether (the static C library, libc.a, is needed; or set TETHER_STATIC_BIN)",
    )?;
    Some(Build {
        name: "this build, static".to_owned(),
        path,
    })
}

/// This workspace's target directory.
fn target_dir() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from)
}

/// The program `$var` names, else `path` once `cargo` with `args` (in
/// `target_dir`, if given) built it; `None`, with `missing` said on
/// stderr, if neither.
fn prebuilt_or(
    var: &str,
    args: &[&str],
    target_dir: Option<&Path>,
    path: PathBuf,
    missing: &str,
) -> Option<PathBuf> {
    if let Some(given) = std::env::var_os(var).filter(|p| !p.is_empty()) {
        return Some(given.into());
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cargo.args(args).current_dir(&root);
    if let Some(dir) = target_dir {
        cargo.env("CARGO_TARGET_DIR", dir);
    }
    if cargo.status().is_ok_and(|s| s.success()) && path.is_file() {
        Some(path)
    } else {
        eprintln!("{missing}: measured without");
        None
    }
}

/// This build's keeper as a static (musl) program, as the Python wheel
/// ships it beside `tether`: `$TETHER_STATIC_KEEPER`, else built here with
/// `cargo build --release --target x86_64-unknown-linux-musl -p
/// process-tether --bin tether-keeper` (`rustup target add
/// x86_64-unknown-linux-musl` first). `None`, said on stderr, if neither.
fn static_keeper() -> Option<PathBuf> {
    let target = target_dir();
    prebuilt_or(
        "TETHER_STATIC_KEEPER",
        &[
            "build",
            "--quiet",
            "--release",
            "--target",
            "x86_64-unknown-linux-musl",
            "-p",
            "process-tether",
            "--bin",
            "tether-keeper",
        ],
        None,
        target.join("x86_64-unknown-linux-musl/release/tether-keeper"),
        "no static keeper (rustup target add x86_64-unknown-linux-musl, or set \
         TETHER_STATIC_KEEPER)",
    )
}
