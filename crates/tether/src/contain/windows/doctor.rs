//! `tether doctor` on Windows: the version, the session job and its
//! limits, nested jobs and ConPTY — each probed by doing it (a session job
//! holding `exit 0`, one more with
//! [`PROBE_LIMITS`](crate::doctor::PROBE_LIMITS), a pseudoconsole opened
//! and closed).

use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleW, GetProcAddress};

use super::conpty::PseudoConsole;
use super::job::in_any_job;
use super::self_attach::current_process;
use crate::doctor::{Finding, Status, Topic, limit_findings, limited_probe};
use crate::limits::Enforcement;
use crate::terminal::PtySize;
use crate::{Containment, ContainmentPolicy};

/// Every Windows finding, in report order. `spawn` runs `exit 0` in a
/// session under a policy and says which containment it got.
pub(crate) fn probe(
    spawn: &dyn Fn(ContainmentPolicy) -> crate::Result<Containment>,
) -> Vec<Finding> {
    let standard = spawn(ContainmentPolicy::Standard);
    let mut findings = vec![system(), job(&standard)];
    findings.extend(limits());
    findings.extend([nested_jobs(&standard), conpty()]);
    findings
}

/// The memory, process and CPU limits as a session's job took them
/// (`Job::with_limits`): `job` where the system enforces them, else `none`
/// with the reason the session reported — the job's refusal, or Wine's gap
/// (Wine 8 accepts job limits without enforcing them, so under Wine every
/// limit is `none`, with the reason).
fn limits() -> Vec<Finding> {
    let probe = limited_probe("exit 0", |_| ()).map(|(report, ())| report);
    limit_findings(&probe, &|topic, how| {
        let (flag, setting, holds) = match topic {
            Topic::MemoryLimit => (
                "--memory",
                "JOB_OBJECT_LIMIT_JOB_MEMORY",
                "caps the committed memory of all a session's processes together: an \
                 allocation past it fails in the process that makes it",
            ),
            Topic::PidsLimit => (
                "--pids",
                "JOB_OBJECT_LIMIT_ACTIVE_PROCESS",
                "caps a session's processes at once: creating one more fails",
            ),
            _ => (
                "--cpu",
                "JOB_OBJECT_CPU_RATE_CONTROL_HARD_CAP",
                "caps a session's share of all processors' cycles (cores / processors), \
                 throttling it, never killing it",
            ),
        };
        match how {
            Enforcement::None(reason) => (
                reason.clone(),
                format!(
                    "tether run {flag} is reported none with this reason and not enforced; the \
                     session's job still kills its whole tree (G2, G3)"
                ),
            ),
            how => (
                format!("{}: {setting} on the session's job", how.name()),
                format!("tether run {flag} {holds} (G9)"),
            ),
        }
    })
}

fn system() -> Finding {
    let windows = match version() {
        Some((major, minor, build)) => format!("Windows {major}.{minor} build {build}"),
        None => "Windows (RtlGetVersion unavailable)".to_owned(),
    };
    let (found, meaning) = match super::wine::version() {
        Some(wine) => (
            format!("{windows}, under Wine {wine}"),
            "Wine is where CI runs tether's Windows tests; its gaps (ConPTY output, resize) are \
             Wine's, not Windows'",
        ),
        None => (
            windows,
            "Windows: sessions are job objects; tested in CI under Wine, and by hand on Windows",
        ),
    };
    Finding::new(Topic::System, Status::Info, found, meaning)
}

/// `RtlGetVersion`'s major, minor and build: unlike `GetVersionExW` it
/// does not lie to programs without a compatibility manifest.
fn version() -> Option<(u32, u32, u32)> {
    /// `OSVERSIONINFOW`, declared here to need no further windows-sys
    /// feature.
    #[repr(C)]
    struct OsVersionInfo {
        size: u32,
        major: u32,
        minor: u32,
        build: u32,
        platform: u32,
        service_pack: [u16; 128],
    }
    let ntdll: Vec<u16> = "ntdll.dll\0".encode_utf16().collect();
    // SAFETY: ntdll is loaded in every process; the name is NUL-terminated.
    let module = unsafe { GetModuleHandleW(ntdll.as_ptr()) };
    if module.is_null() {
        return None;
    }
    // SAFETY: valid module and NUL-terminated ASCII name.
    let proc = unsafe { GetProcAddress(module, c"RtlGetVersion".as_ptr().cast()) }?;
    let mut info = OsVersionInfo {
        size: std::mem::size_of::<OsVersionInfo>() as u32,
        major: 0,
        minor: 0,
        build: 0,
        platform: 0,
        service_pack: [0; 128],
    };
    // SAFETY: ntdll declares `NTSTATUS NTAPI RtlGetVersion(PRTL_OSVERSIONINFOW)`
    // (NTAPI is the system ABI on x86_64); `info` is a valid, sized
    // OSVERSIONINFOW it fills.
    let status = unsafe {
        let get: extern "system" fn(*mut OsVersionInfo) -> i32 = std::mem::transmute(proc);
        get(&mut info)
    };
    (status == 0).then_some((info.major, info.minor, info.build))
}

fn job(standard: &crate::Result<Containment>) -> Finding {
    match standard {
        Ok(containment) => Finding::new(
            Topic::Job,
            Status::Available,
            format!("a session ran in a kill-on-close job ({containment})"),
            "each session is a job object only the owner holds: when the owner ends, however, the \
             kernel kills every process of it (G2)",
        ),
        Err(e) => Finding::new(
            Topic::Job,
            Status::Unavailable,
            format!("a session could not start: {e}"),
            "tether cannot start commands here until this is fixed",
        ),
    }
}

fn nested_jobs(standard: &crate::Result<Containment>) -> Finding {
    match (in_any_job(current_process()), standard) {
        (Ok(true), Ok(_)) => Finding::new(
            Topic::NestedJobs,
            Status::Available,
            "this process runs inside a job, and a session's job was created within it",
            "sessions' jobs nest inside the job this process was started in (a CI runner's, a \
             terminal's): both hold",
        ),
        (Ok(true), Err(e)) => Finding::new(
            Topic::NestedJobs,
            Status::Unavailable,
            format!("this process runs inside a job, and a session failed to start: {e}"),
            "nested jobs need Windows 8 / Server 2012 or later; without them no session can be \
             contained inside this job",
        ),
        (Ok(false), _) => Finding::new(
            Topic::NestedJobs,
            Status::Info,
            "this process runs in no job: its sessions' jobs need no nesting",
            "started inside a job (a CI runner, some terminals), sessions need nested jobs \
             (Windows 8 / Server 2012 or later)",
        ),
        (Err(e), _) => Finding::new(
            Topic::NestedJobs,
            Status::Info,
            format!("whether this process is in a job is unknown: {e}"),
            "nested jobs are needed only when tether itself runs inside a job",
        ),
    }
}

fn conpty() -> Finding {
    match PseudoConsole::open(PtySize::default()) {
        Ok(opened) => {
            // Our pipe ends first: conhost's last frame then fails to
            // write instead of blocking the close (which waits for conhost
            // before Windows 11 24H2).
            drop(opened.input);
            drop(opened.output);
            opened.console.close();
            Finding::new(
                Topic::ConPty,
                Status::Available,
                "a pseudoconsole opened and closed (ConPTY, Windows 10 1809 or later)",
                "PTY sessions (tether run --pty, pty: true) run on a ConPTY inside their job",
            )
        }
        Err(e) => Finding::new(
            Topic::ConPty,
            Status::Unavailable,
            format!("CreatePseudoConsole: {e}"),
            "no PTY sessions: --pty and pty: true fail; pipe sessions are unaffected",
        ),
    }
}
