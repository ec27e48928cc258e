//! `tether init` as the entry point of a real OCI container, run by `runc`
//! (or `crun`) from a minimal rootfs — this build's `tether` with the
//! libraries it links and `busybox-static` — while the test plays the
//! kubelet: `runc kill TERM`, a grace, `runc kill KILL`. Orphans are
//! reaped, signals forwarded, the exit code propagated, and nothing is left
//! in the container's cgroup. Limits asked for inside the container are
//! applied where the runtime delegates the container's cgroup (its cgroup
//! mount read-write) and reported `none`, with the reason, where it does
//! not (read-only).
//!
//! Root, runc or crun, and busybox-static (`.ci/run` installs them): each
//! test fails instead of skipping under `TETHER_REQUIRE_ROOT=1`.

#![cfg(target_os = "linux")]

mod support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::Value;
use support::{read_line_bounded, wait_pid_exit};
use tether_testkit::{TAG_VAR, TagGuard, require, require_root, tagged_pids, wait_all_dead};

/// An OCI runtime on `PATH`: runc first (crun 1.8 refuses hybrid cgroup
/// hosts whose cgroup2 has a controller — this project's machines).
fn runtime() -> Option<PathBuf> {
    ["runc", "crun"].into_iter().find_map(|name| {
        std::env::var_os("PATH")?
            .to_str()?
            .split(':')
            .map(|dir| Path::new(dir).join(name))
            .find(|p| p.is_file())
    })
}

/// Whether `path` is a statically linked ELF program (no `PT_INTERP`).
fn is_static_elf(path: &Path) -> bool {
    let Ok(bytes) = std::fs::read(path) else {
        return false;
    };
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" || bytes[4] != 2 {
        return false;
    }
    let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(bytes[32..40].try_into().unwrap()) as usize;
    let (phentsize, phnum) = (u16_at(54), u16_at(56));
    (0..phnum).all(|i| {
        let at = phoff + i * phentsize;
        bytes.get(at..at + 4) != Some(&3u32.to_le_bytes()[..])
    })
}

/// What the tests need, or a skip (a failure under `TETHER_REQUIRE_ROOT=1`).
fn prerequisites() -> Option<PathBuf> {
    if !require_root("running OCI containers") {
        return None;
    }
    let runtime = runtime();
    if !require(
        runtime.is_some(),
        "neither runc nor crun is installed (.ci/run installs runc)",
    ) {
        return None;
    }
    if !require(
        is_static_elf(Path::new("/bin/busybox")),
        "no statically linked /bin/busybox (.ci/run installs busybox-static)",
    ) {
        return None;
    }
    runtime
}

/// One container: a bundle (rootfs + config.json) and its id.
struct Container {
    runtime: PathBuf,
    id: String,
    bundle: tempfile::TempDir,
}

impl Container {
    /// A bundle whose entry point is `args`, with the container's cgroup
    /// mounted read-write (`delegated`) or read-only.
    fn new(runtime: PathBuf, tag: &str, args: &[&str], delegated: bool) -> Container {
        static N: AtomicU32 = AtomicU32::new(0);
        let id = format!(
            "tether-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let bundle = tempfile::tempdir().unwrap();
        build_rootfs(&bundle.path().join("rootfs"));
        let spec = Command::new(&runtime)
            .arg("spec")
            .current_dir(bundle.path())
            .output()
            .unwrap();
        assert!(
            spec.status.success(),
            "{} spec: {spec:?}",
            runtime.display()
        );
        let path = bundle.path().join("config.json");
        let mut config: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        config["process"]["args"] = args.into();
        config["process"]["terminal"] = false.into();
        config["process"]["env"] = vec![
            "PATH=/bin".to_owned(),
            "TETHER_HOME=/tmp/tether".to_owned(),
            format!("{TAG_VAR}={tag}"),
        ]
        .into();
        config["root"]["readonly"] = false.into();
        for mount in config["mounts"].as_array_mut().unwrap() {
            if mount["destination"] == "/sys/fs/cgroup" {
                let mut options: Vec<Value> = mount["options"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|o| *o != "ro" && *o != "rw")
                    .cloned()
                    .collect();
                options.push(if delegated { "rw" } else { "ro" }.into());
                mount["options"] = options.into();
            }
        }
        std::fs::write(&path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
        Container {
            runtime,
            id,
            bundle,
        }
    }

    /// `runc run --keep`: the container's stdout piped; it stays known to
    /// the runtime after its init exits, so its cgroup can be looked at.
    fn run(&self) -> Child {
        Command::new(&self.runtime)
            .args(["run", "--keep", "--bundle"])
            .arg(self.bundle.path())
            .arg(&self.id)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// `runc kill <id> SIGNAL`: what a kubelet sends.
    fn kill(&self, signal: &str) {
        let _ = Command::new(&self.runtime)
            .args(["kill", &self.id, signal])
            .stderr(Stdio::null())
            .status();
    }

    /// The container's pids cgroup (or cgroup v2) directory on the host:
    /// the runtime's default path, the id, below the test's own cgroup.
    fn cgroup(&self) -> Option<PathBuf> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let ours = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let (hierarchy_mount, ours) = mountinfo
            .lines()
            .find_map(|l| {
                let (left, right) = l.split_once(" - ")?;
                let point = left.split(' ').nth(4)?;
                right
                    .split(' ')
                    .nth(2)?
                    .split(',')
                    .any(|o| o == "pids")
                    .then(|| point.to_owned())
            })
            .and_then(|point| {
                let path = ours
                    .lines()
                    .find(|l| l.contains(":pids:"))?
                    .rsplit(':')
                    .next()?;
                Some((point, path.to_owned()))
            })?;
        Some(
            Path::new(&hierarchy_mount)
                .join(ours.trim_start_matches('/'))
                .join(&self.id),
        )
    }

    /// The processes in the container's cgroup, from the host.
    fn procs(&self) -> Vec<u32> {
        let dir = self.cgroup().expect("the container's cgroup");
        std::fs::read_to_string(dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.parse().ok())
            .collect()
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        self.kill("KILL");
        let _ = Command::new(&self.runtime)
            .args(["delete", "--force", &self.id])
            .stderr(Stdio::null())
            .status();
    }
}

/// The rootfs: busybox (and its applets), this build's `tether`, the
/// shared libraries `tether` links (at the paths `ldd` names).
fn build_rootfs(root: &Path) {
    for dir in ["bin", "proc", "sys", "dev", "tmp"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    std::fs::copy("/bin/busybox", root.join("bin/busybox")).unwrap();
    for applet in [
        "sh", "sleep", "cat", "echo", "head", "tr", "wc", "setsid", "ps", "kill",
    ] {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(applet)).unwrap();
    }
    let tether = support::tether_path();
    std::fs::copy(&tether, root.join("bin/tether")).unwrap();
    let ldd = Command::new("ldd").arg(&tether).output().unwrap();
    for line in String::from_utf8_lossy(&ldd.stdout).lines() {
        // `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)` or
        // `/lib64/ld-linux-x86-64.so.2 (0x…)`
        let Some(lib) = line
            .split_whitespace()
            .find(|w| w.starts_with('/'))
            .map(Path::new)
        else {
            continue;
        };
        let to = root.join(lib.strip_prefix("/").unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(lib, &to).unwrap();
    }
}

/// The container's output and the runtime's exit code (bounded: 60 s).
fn finish(mut run: Child) -> (String, String, Option<i32>) {
    assert!(
        wait_pid_exit(run.id(), Duration::from_secs(60)),
        "the container did not end"
    );
    let status = run.wait().unwrap();
    let mut out = String::new();
    run.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    let mut err = String::new();
    run.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (out, err, status.code())
}

/// Reads the container's output up to its program's `ready` (bounded:
/// 30 s per line); returns the lines before it.
fn wait_ready(run: &mut Child) -> Vec<String> {
    let mut pending = Vec::new();
    let mut lines = Vec::new();
    loop {
        let line = read_line_bounded(
            run.stdout.as_mut().unwrap(),
            &mut pending,
            Duration::from_secs(30),
        )
        .expect("the container's program said ready");
        if line == "ready" {
            assert!(pending.is_empty(), "nothing after ready yet");
            return lines;
        }
        lines.push(line);
    }
}

/// The program: 20 orphans (double forks reparented to init) that exit
/// 0.2 s later, then — polling /proc every 0.1 s, at most 10 s — how many
/// of them are still children of PID 1, alive or zombie (an unreaped
/// zombie would stay). Then a child in a session of its own — `ready`
/// waits until it is (it says so through a FIFO once `setsid` is done) —
/// which the TERM forwarded to the program's group does not reach, so it
/// outlives the program; a TERM trap that exits 7; and `ready`.
const PROGRAM: &str = r#"
i=0; while [ $i -lt 20 ]; do (sleep 0.2 &); i=$((i+1)); done
n=0; left=20
while [ $n -lt 100 ]; do
  left=0
  for s in /proc/[0-9]*/stat; do
    read -r pid comm state ppid rest < $s 2>/dev/null || continue
    [ "$ppid" = 1 ] && [ "$comm" = "(sleep)" ] && left=$((left+1))
  done
  [ $left = 0 ] && break
  sleep 0.1; n=$((n+1))
done
echo "orphans left $left"
mkfifo /tmp/started
setsid sh -c 'echo > /tmp/started; exec sleep 1000' &
read started < /tmp/started
trap 'echo got TERM; exit 7' TERM
echo ready
wait
"#;

#[test]
fn tether_init_in_a_container_reaps_forwards_term_and_propagates_the_exit_code() {
    let Some(runtime) = prerequisites() else {
        return;
    };
    let guard = TagGuard::new("container-term");
    let container = Container::new(
        runtime,
        guard.tag(),
        &[
            "/bin/tether",
            "init",
            "--grace",
            "1s",
            "--",
            "sh",
            "-c",
            PROGRAM,
        ],
        false,
    );
    let mut run = container.run();
    let before = wait_ready(&mut run);
    assert_eq!(before, ["orphans left 0"], "zombies were reaped");
    // The kubelet: TERM to the container's init, which passes it on.
    container.kill("TERM");
    let (out, err, code) = finish(run);
    assert!(out.contains("got TERM"), "TERM reached the program: {out}");
    assert_eq!(code, Some(7), "the program's exit code: {out}{err}");
    assert!(
        err.contains("it left 1 process(es)"),
        "init killed what the program left: {err}"
    );
    assert_eq!(
        container.procs(),
        Vec::<u32>::new(),
        "the container's cgroup is empty"
    );
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}

#[test]
fn a_container_that_ignores_term_ends_at_the_kubelets_kill_with_nothing_left() {
    let Some(runtime) = prerequisites() else {
        return;
    };
    let guard = TagGuard::new("container-kill");
    let container = Container::new(
        runtime,
        guard.tag(),
        &[
            "/bin/tether",
            "init",
            "--",
            "sh",
            "-c",
            "trap '' TERM; sleep 1000 & setsid sleep 1000 & echo ready; wait",
        ],
        false,
    );
    let mut run = container.run();
    wait_ready(&mut run);
    container.kill("TERM");
    // The kubelet's grace: nothing ends, since the program ignores TERM
    // (bounded at 1 s: a forwarded TERM takes milliseconds to act).
    assert!(
        !wait_pid_exit(run.id(), Duration::from_secs(1)),
        "the container ended on a TERM its program ignores"
    );
    assert!(!tagged_pids(guard.tag()).is_empty());
    container.kill("KILL");
    let (_, _, code) = finish(run);
    assert_eq!(code, Some(137), "killed by SIGKILL");
    assert_eq!(
        container.procs(),
        Vec::<u32>::new(),
        "the container's cgroup is empty"
    );
    assert!(wait_all_dead(guard.tag(), Duration::from_secs(5)).is_empty());
}

/// `tether run --json` inside the container, with limits, under `tether
/// init`: a shell that grows a 200 MB string under a 64 MiB limit.
fn limited_run_in_a_container(delegated: bool) -> Value {
    let runtime = prerequisites().expect("checked by the caller");
    let guard = TagGuard::new("container-limits");
    let container = Container::new(
        runtime,
        guard.tag(),
        &[
            "/bin/tether",
            "init",
            "--",
            "/bin/tether",
            "run",
            "--json",
            "--memory",
            "64M",
            "--pids",
            "20",
            "--",
            "sh",
            "-c",
            "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo survived",
        ],
        delegated,
    );
    let (out, err, _) = finish(container.run());
    assert_eq!(container.procs(), Vec::<u32>::new());
    assert!(wait_all_dead(guard.tag(), Duration::from_secs(5)).is_empty());
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}{err}"))
}

#[test]
fn limits_apply_inside_a_container_whose_runtime_delegates_its_cgroup() {
    if prerequisites().is_none() {
        return;
    }
    let json = limited_run_in_a_container(true);
    for limit in ["memory", "pids"] {
        let how = json["limits"][limit]["enforced"].as_str().unwrap();
        assert!(how == "cgroup1" || how == "cgroup2", "{limit}: {json}");
    }
    assert_eq!(json["limit_hit"], "memory", "{json}");
    assert!(
        !json["stdout"].as_str().unwrap().contains("survived"),
        "{json}"
    );
}

#[test]
fn limits_are_none_with_the_reason_inside_a_container_that_does_not() {
    if prerequisites().is_none() {
        return;
    }
    let json = limited_run_in_a_container(false);
    for limit in ["memory", "pids"] {
        assert_eq!(json["limits"][limit]["enforced"], "none", "{limit}: {json}");
        let reason = json["limits"][limit]["reason"].as_str().unwrap();
        assert!(reason.contains("read-only"), "{limit}: {reason}");
    }
    assert!(json["limit_hit"].is_null(), "{json}");
    assert!(
        json["stdout"].as_str().unwrap().contains("survived"),
        "{json}"
    );
}
