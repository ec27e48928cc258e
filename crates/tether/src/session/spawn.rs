//! Starting a session's command: the pipes, the contained child, the
//! buffers. Blocking (a keeper spawn and a round trip to it), so the
//! registry runs it off the reactor threads.

use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use super::Meta;
use crate::child::Child;
use crate::command::{Command, Stdio};
use crate::error::{Error, Result};
use crate::output::{OutputBuffer, OutputConfig};
use crate::run_spec::{OutputMode, RunSpec, StdinMode};
use crate::session_id::SessionId;

/// Everything `run` gets back from the blocking spawn.
pub(crate) struct Started {
    pub child: Child,
    pub meta: Meta,
    pub output: OwnedFd,
    pub stderr: Option<OwnedFd>,
    pub stdin: Option<OwnedFd>,
    pub keeper: OwnedFd,
    pub buffers: (OutputBuffer, Option<OutputBuffer>),
    pub idle: Option<Duration>,
    pub grace: Duration,
}

/// Spawns the command (blocking): pipes made here, write ends given to
/// the command, read ends kept non-blocking for the reactor.
pub(crate) fn start(spec: RunSpec, id: SessionId, spill_dir: PathBuf) -> Result<Started> {
    let argv = spec.command.argv();
    let Some(program) = argv.first() else {
        return Err(Error::InvalidInput {
            what: "command",
            reason: "empty argv".into(),
        });
    };
    let mut cmd = Command::new(program);
    cmd.args(&argv[1..])
        .purpose(&spec.purpose)
        .grace(spec.grace)
        .keep_descendants(true)
        .session_id(id.clone());
    if spec.env_clear {
        cmd.env_clear();
    }
    cmd.envs(spec.env.iter().map(|(k, v)| (k, v)));
    if let Some(cwd) = &spec.cwd {
        cmd.current_dir(cwd);
    }
    if let Some(timeout) = spec.timeout {
        cmd.timeout(timeout);
    }
    cmd.stdin(match spec.stdin {
        StdinMode::Null => Stdio::Null,
        StdinMode::Piped => Stdio::Piped,
    });
    let (output, output_w) = output_pipe()?;
    let stderr = match spec.output {
        OutputMode::Merged => {
            cmd.stderr(Stdio::Fd(output_w.try_clone()?));
            None
        }
        OutputMode::Separate => {
            let (r, w) = output_pipe()?;
            cmd.stderr(Stdio::Fd(w));
            Some(r)
        }
    };
    cmd.stdout(Stdio::Fd(output_w));
    let mut child = cmd.spawn()?;
    // The command builder holds our copies of the write ends: they must go
    // now, or the pipes would never reach EOF.
    drop(cmd);
    let stdin = child.stdin.take().map(OwnedFd::from);
    for fd in [Some(&output), stderr.as_ref(), stdin.as_ref()]
        .into_iter()
        .flatten()
    {
        set_nonblocking(fd)?;
    }
    let keeper = child.event_fd().try_clone_to_owned()?;
    let config = OutputConfig {
        max_memory: spec.max_memory,
        spill_cap: spec.spill_cap,
        spill_dir: Some(spill_dir),
    };
    let buffers = (
        OutputBuffer::new(config.clone()),
        stderr.as_ref().map(|_| OutputBuffer::new(config)),
    );
    let meta = Meta {
        command: spec.command.display(),
        command_line: spec.command.clone(),
        timeout: spec.timeout,
        cwd: spec.cwd.clone(),
        purpose: spec.purpose.clone(),
        started_at: SystemTime::now(),
        started: Instant::now(),
        identity: child.identity().clone(),
        containment: child.containment(),
        keeper_pid: child.keeper_pid(),
        stdin_piped: spec.stdin == StdinMode::Piped,
        grace: spec.grace,
    };
    Ok(Started {
        child,
        meta,
        output,
        stderr,
        stdin,
        keeper,
        buffers,
        idle: spec.idle_timeout,
        grace: spec.grace,
    })
}

/// Capacity asked for output pipes: 256 KiB instead of the default 64 KiB
/// means 4× fewer wake-ups of reader and writer per byte (capture of
/// 1 GiB: 0.77 → see the bench). Not more: pipe pages count against the
/// user's `pipe-user-pages-soft` (64 MiB), past which the kernel shrinks
/// every new pipe of that user — 64 live sessions × 256 KiB stay at a
/// quarter of it. If the kernel refuses, the default stays.
pub(crate) const PIPE_CAPACITY: libc::c_int = 256 << 10;

fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    Ok(nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(std::io::Error::from)?)
}

fn output_pipe() -> Result<(OwnedFd, OwnedFd)> {
    let (read, write) = pipe()?;
    let _ = nix::fcntl::fcntl(&read, nix::fcntl::FcntlArg::F_SETPIPE_SZ(PIPE_CAPACITY));
    Ok((read, write))
}

fn set_nonblocking(fd: &OwnedFd) -> Result<()> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let flags = OFlag::from_bits_truncate(
        fcntl(fd.as_fd(), FcntlArg::F_GETFL).map_err(std::io::Error::from)?,
    );
    fcntl(fd.as_fd(), FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))
        .map_err(std::io::Error::from)?;
    Ok(())
}
