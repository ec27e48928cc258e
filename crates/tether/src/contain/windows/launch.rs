//! Starting a [`SpawnPlan`] on Windows: the command line, the environment
//! block, a job of its own, `CreateProcessW` inside it, and a watch by the
//! job monitor.

use std::ffi::{OsStr, OsString};
use std::os::windows::io::AsHandle;
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::channel;

use tokio::sync::Notify;
use windows_sys::Win32::Foundation::{
    ERROR_ACCESS_DENIED, ERROR_BAD_EXE_FORMAT, ERROR_DIRECTORY, ERROR_EXE_MACHINE_TYPE_MISMATCH,
    ERROR_FILE_NOT_FOUND, ERROR_PATH_NOT_FOUND,
};

use super::environment::Environment;
use super::job::{Breakaway, Job};
use super::monitor::{Watch, monitor};
use super::pty::Pty;
use super::spawn::{Console, MembershipPolicy, Spawn};
use super::stdio::{Which, open};
use super::tree::Tree;
use super::win_error::{WinError, code_of};
use super::{quote, spawn as create, sys};
use crate::contain::{ChildIo, SpawnPlan, Spawned};
use crate::containment::{Containment, ContainmentPolicy};
use crate::error::{Error, Result};
use crate::identity::ProcessIdentity;
use crate::limits::LimitReport;

/// Starts `plan` with stdio `[stdin, stdout, stderr]` — or, when the plan
/// asks for a PTY, attached to a new pseudoconsole (the stdio is then not
/// used) — contained in a job of its own from its first instruction (unless
/// the caller asked for [`ContainmentPolicy::Uncontained`]).
pub(crate) fn spawn(plan: SpawnPlan, stdio: [&ChildIo; 3]) -> Result<Spawned> {
    let contained = match plan.containment {
        ContainmentPolicy::Standard | ContainmentPolicy::Auto => true,
        ContainmentPolicy::Uncontained => false,
        ContainmentPolicy::PidNamespace => {
            return Err(Error::ContainmentUnavailable {
                requested: "pidns",
                reason: "Windows has no PID namespaces; its containment is a job object \
                         (ContainmentPolicy::Standard)"
                    .into(),
            });
        }
    };
    let (application, command_line) = command_line(&plan)?;
    let mut env = Environment::empty();
    for (name, value) in &plan.env {
        env.set(name, value).map_err(|e| Error::InvalidInput {
            what: "environment",
            reason: e.to_string(),
        })?;
    }
    let block = env.block();

    let monitor = monitor()?;
    let key = monitor.new_key();
    let program = plan.program.to_string_lossy().into_owned();
    let job_error = |source| Error::Spawn {
        program: program.clone(),
        stage: "job object",
        source,
    };
    let (job, limits) = if contained {
        let (job, limits) =
            Job::with_limits(Breakaway::Refused, &plan.limits).map_err(job_error)?;
        // Before the process exists, so its NewProcess message is not lost.
        job.associate(monitor.port(), key).map_err(job_error)?;
        (Some(Arc::new(job)), limits)
    } else {
        let why = "the command runs in no job of tether's (ContainmentPolicy::Uncontained)";
        (None, LimitReport::none(&plan.limits, why))
    };
    if plan.limits.require
        && let Some((limit, why)) = limits.unenforced()
    {
        return Err(Error::LimitNotApplied {
            limit,
            reason: format!("enforcement is required and it would be none: {why}"),
        });
    }

    // A PTY session: the pseudoconsole before the process, attached in the
    // same CreateProcessW that puts it into its job. No console process
    // group of its own: a new group ignores Ctrl-C, and a PTY command must
    // get the Ctrl-C typed into its console (its conhost's CTRL_C_EVENT).
    // The owner's CTRL_BREAK_EVENT could not reach it anyway: it is on
    // another console; its graceful kill is the pseudoconsole's close.
    let pty = plan
        .pty
        .map(Pty::open)
        .transpose()
        .map_err(|source| Error::Spawn {
            program: program.clone(),
            stage: "pseudoconsole",
            source,
        })?;
    let new_group = pty.is_none();
    let (stdin_h, stdin) = open_unless(pty.is_some(), stdio[0], Which::Stdin)?;
    let (stdout_h, stdout) = open_unless(pty.is_some(), stdio[1], Which::Stdout)?;
    let (stderr_h, stderr) = open_unless(pty.is_some(), stdio[2], Which::Stderr)?;
    let console = match &pty {
        Some((_, console)) => Console::Pseudo(
            console
                .handle()
                .expect("a pseudoconsole nobody else holds is open"),
        ),
        None => Console::Std {
            stdin: stdin_h.as_ref().map(|h| h.as_handle()),
            stdout: stdout_h.as_ref().map(|h| h.as_handle()),
            stderr: stderr_h.as_ref().map(|h| h.as_handle()),
        },
    };
    let spawned = create::spawn(Spawn {
        application: &application,
        command_line,
        environment: &block,
        cwd: plan.cwd.as_deref().map(Path::as_os_str),
        console,
        job: job.as_deref(),
        new_process_group: new_group,
        membership: MembershipPolicy::Atomic,
        extra_flags: 0,
    })
    .map_err(|e| spawn_error(&plan, &application, e))?;
    // The child has its copies; ours must go, or a pipe would never see EOF.
    drop((stdin_h, stdout_h, stderr_h));
    let (pty, console) = pty.unzip();

    let start = super::process::creation_time(spawned.process.as_handle())?;
    let identity = ProcessIdentity {
        boot_id: sys::boot_id().to_owned(),
        pid: spawned.pid,
        start_time: sys::start_of(start),
        pidfs_inode: None,
    };
    let (events, receiver) = channel();
    let notify = Arc::new(Notify::new());
    let watch = Watch::new(
        key,
        spawned.process,
        spawned.pid,
        job.clone(),
        new_group,
        console,
        &plan,
        events,
        Arc::clone(&notify),
    );
    // On failure the watch (and with it the job) is dropped: kill-on-close
    // ends the command we could not watch.
    monitor.register(watch)?;
    let tree = Tree {
        key,
        monitor,
        identity,
        containment: if contained {
            Containment::Job
        } else {
            Containment::None
        },
        job,
        session: plan.tag.session.clone(),
        events: receiver,
        notify,
        settled: false,
        limits,
    };
    Ok(Spawned {
        tree,
        stdin,
        stdout,
        stderr,
        pty,
    })
}

/// The child's handle for `io` and the owner's end of a new pipe, as
/// `stdio::open` makes them — or nothing for a PTY session, whose streams
/// are its console.
fn open_unless(
    pty: bool,
    io: &ChildIo,
    which: Which,
) -> std::io::Result<(
    Option<std::os::windows::io::OwnedHandle>,
    Option<std::fs::File>,
)> {
    if pty {
        Ok((None, None))
    } else {
        open(io, which)
    }
}

/// The executable to start and its command line:
/// - a `.bat`/`.cmd` file runs through `cmd.exe` with cmd's own quoting
///   (`quote::batch_file`): `CreateProcessW` would start cmd itself and
///   parse the arguments by the wrong rules (CVE-2024-24576);
/// - `cmd.exe /d /s /c <script>` (the shell form of a registry session)
///   passes the script verbatim (`quote::cmd_script`);
/// - anything else by the MSVCRT rules (`quote::command_line`).
fn command_line(plan: &SpawnPlan) -> Result<(OsString, Vec<u16>)> {
    let invalid = |e: std::io::Error| Error::InvalidInput {
        what: "argument",
        reason: e.to_string(),
    };
    let argv0 = plan
        .argv
        .first()
        .map_or(plan.program.as_os_str(), |a| a.as_os_str());
    let args: Vec<&OsStr> = plan.argv.iter().skip(1).map(|a| a.as_os_str()).collect();
    let extension = plan
        .program
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    if matches!(extension.as_deref(), Some("bat" | "cmd")) {
        let cmd = cmd_exe();
        let line = quote::batch_file(&cmd, plan.program.as_os_str(), &args).map_err(invalid)?;
        return Ok((cmd, line));
    }
    let is_cmd = plan
        .program
        .file_name()
        .is_some_and(|n| n.eq_ignore_ascii_case("cmd.exe"));
    let script_form = ["/d", "/s", "/c"];
    if is_cmd
        && args.len() == 4
        && args[..3]
            .iter()
            .zip(script_form)
            .all(|(a, f)| a.eq_ignore_ascii_case(f))
    {
        let line = quote::cmd_script(argv0, args[3]).map_err(invalid)?;
        return Ok((plan.program.clone().into_os_string(), line));
    }
    let line = quote::command_line(argv0, &args).map_err(invalid)?;
    Ok((plan.program.clone().into_os_string(), line))
}

/// `%ComSpec%` if it names a file, else `%SystemRoot%\System32\cmd.exe`.
fn cmd_exe() -> OsString {
    if let Some(spec) = std::env::var_os("ComSpec")
        && Path::new(&spec).is_file()
    {
        return spec;
    }
    let root = std::env::var_os("SystemRoot").unwrap_or_else(|| r"C:\Windows".into());
    Path::new(&root).join(r"System32\cmd.exe").into_os_string()
}

/// A failed start, in the terms a caller can act on.
fn spawn_error(plan: &SpawnPlan, application: &OsStr, err: std::io::Error) -> Error {
    let call = err
        .get_ref()
        .and_then(|e| e.downcast_ref::<WinError>())
        .map(|w| w.call)
        .unwrap_or("");
    let program = plan.program.to_string_lossy().into_owned();
    if call != "CreateProcessW" {
        // The job list, the assignment or the membership check: the process
        // was never left running outside its job.
        return Error::Spawn {
            program,
            stage: "job object",
            source: err,
        };
    }
    let path = Path::new(application).to_path_buf();
    match code_of(&err) {
        Some(ERROR_BAD_EXE_FORMAT | ERROR_EXE_MACHINE_TYPE_MISMATCH) => Error::NotExecutable {
            path,
            reason: "not a Windows program for this machine".into(),
        },
        Some(ERROR_ACCESS_DENIED) => Error::NotExecutable {
            path,
            reason: "access denied".into(),
        },
        Some(ERROR_DIRECTORY) => Error::BadCwd {
            cwd: plan.cwd.clone().unwrap_or_default(),
            reason: "not a directory".into(),
        },
        Some(ERROR_FILE_NOT_FOUND | ERROR_PATH_NOT_FOUND) => Error::ProgramNotFound {
            program,
            path_searched: String::new(),
        },
        _ => Error::Spawn {
            program,
            stage: "CreateProcessW",
            source: err,
        },
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use windows_sys::Win32::System::Threading::{GetCurrentProcess, GetProcessHandleCount};

    fn handles() -> u32 {
        let mut count = 0;
        // SAFETY: the pseudo handle of this process and a valid out pointer.
        assert_ne!(
            unsafe { GetProcessHandleCount(GetCurrentProcess(), &mut count) },
            0
        );
        count
    }

    fn cycle() {
        let out = crate::Command::new(super::super::win_tree())
            .args(["tree-exit"])
            .output()
            .unwrap();
        assert_eq!(out.status.descendants_killed(), 1);
    }

    #[test]
    fn spawn_and_finish_cycles_leak_no_handles() {
        // Warm up: the job monitor's thread and port, std's lazy handles.
        cycle();
        cycle();
        let monitor = super::super::monitor::monitor().unwrap();
        let baseline = (handles(), monitor.watched());
        for _ in 0..20 {
            cycle();
        }
        // The monitor forgets a dropped tree (closing its job, process and
        // wait handles) on its own thread just after the tree settles;
        // there is no event for that, so look again for a bounded while.
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut now = (handles(), monitor.watched());
        while (now.0 > baseline.0 || now.1 > baseline.1) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            now = (handles(), monitor.watched());
        }
        assert!(
            now.1 <= baseline.1,
            "the monitor still holds {} trees, {} before",
            now.1,
            baseline.1
        );
        match super::super::wine::version() {
            // Wine 8's GetProcessHandleCount answers 0 whatever is open.
            Some(v) if baseline.0 == 0 => {
                eprintln!(
                    "handle count not checked under Wine {v}: GetProcessHandleCount reports 0"
                )
            }
            _ => assert!(
                now.0 <= baseline.0,
                "{} handles after 20 cycles, {} before",
                now.0,
                baseline.0
            ),
        }
    }
}
