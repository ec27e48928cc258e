//! Starting a session's command: the pipes, the contained child, the
//! buffers. Blocking (a keeper spawn and a round trip to it), so the
//! registry runs it off the reactor threads.

use std::fs::File;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use super::Meta;
use crate::child::Child;
use crate::command::Command;
use crate::contain::{PipeEnd, Pty, output_pipe};
use crate::error::{Error, Result};
use crate::output::{OutputBuffer, OutputConfig};
use crate::run_spec::{OutputMode, RunSpec, StdinMode};
use crate::session_id::SessionId;
use crate::stdio::{OsStdio, Stdio};
use crate::terminal::AGENT_ENV;

/// The owner's ends of the command's streams.
pub(crate) enum Ends {
    /// Output pipes (merged or stdout, and stderr when separate), and the
    /// stdin pipe when piped.
    Pipes {
        output: PipeEnd,
        stderr: Option<PipeEnd>,
        stdin: Option<File>,
    },
    /// The master of the command's PTY: output, input and control.
    Terminal(Pty),
}

/// Everything `run` gets back from the blocking spawn.
pub(crate) struct Started {
    pub child: Child,
    pub meta: Meta,
    pub ends: Ends,
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
    if spec.pty.is_some() && spec.output == OutputMode::Separate {
        return Err(Error::InvalidInput {
            what: "output mode",
            reason: "a PTY session has one stream (the terminal); use OutputMode::Merged".into(),
        });
    }
    let mut cmd = Command::new(program);
    cmd.args(&argv[1..])
        .purpose(&spec.purpose)
        .grace(spec.grace)
        .keep_descendants(spec.keep_descendants)
        .session_id(id.clone());
    if let Some(install) = &spec.install {
        cmd.install(install.clone());
    }
    if spec.env_clear {
        cmd.env_clear();
    }
    if spec.pty.is_some() {
        for (key, value) in AGENT_ENV {
            if !spec.env.iter().any(|(k, _)| k == key) {
                cmd.env(key, value);
            }
        }
    }
    cmd.envs(spec.env.iter().map(|(k, v)| (k, v)));
    if let Some(cwd) = &spec.cwd {
        cmd.current_dir(cwd);
    }
    if let Some(timeout) = spec.timeout {
        cmd.timeout(timeout);
    }
    cmd.limits(spec.limits);
    if let Some(size) = spec.pty {
        return started(spec, cmd.pty(size).spawn()?, None, spill_dir);
    }
    cmd.stdin(match spec.stdin {
        StdinMode::Null => Stdio::Null,
        StdinMode::Piped => Stdio::Piped,
    });
    let (output, output_w) = output_pipe()?;
    let output_w = OsStdio(output_w);
    let stderr = match spec.output {
        OutputMode::Merged => {
            cmd.stderr(Stdio::Os(OsStdio(output_w.0.try_clone()?)));
            None
        }
        OutputMode::Separate => {
            let (r, w) = output_pipe()?;
            cmd.stderr(Stdio::Os(OsStdio(w)));
            Some(r)
        }
    };
    cmd.stdout(Stdio::Os(output_w));
    let child = cmd.spawn()?;
    // The command builder holds our copies of the write ends: they must go
    // now, or the pipes would never reach EOF.
    drop(cmd);
    started(spec, child, Some((output, stderr)), spill_dir)
}

/// The buffers and facts of a spawned session. `pipes`: the output read
/// ends of a pipe session (`None`: a PTY session).
fn started(
    spec: RunSpec,
    mut child: Child,
    pipes: Option<(PipeEnd, Option<PipeEnd>)>,
    spill_dir: PathBuf,
) -> Result<Started> {
    let ends = match pipes {
        Some((output, stderr)) => Ends::Pipes {
            output,
            stderr,
            stdin: child.stdin.take().map(crate::stdio::ChildStdin::into_file),
        },
        None => Ends::Terminal(child.pty.take().expect("a PTY child has a master").0),
    };
    let separate = matches!(
        &ends,
        Ends::Pipes {
            stderr: Some(_),
            ..
        }
    );
    let config = OutputConfig {
        max_memory: spec.max_memory,
        spill_cap: spec.spill_cap,
        spill_dir: Some(spill_dir),
    };
    let buffers = (
        OutputBuffer::new(config.clone()),
        separate.then(|| OutputBuffer::new(config)),
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
        limits: child.limits().clone(),
        stdin_piped: spec.stdin == StdinMode::Piped || spec.pty.is_some(),
        grace: spec.grace,
        pty: spec.pty,
    };
    Ok(Started {
        child,
        meta,
        ends,
        buffers,
        idle: spec.idle_timeout,
        grace: spec.grace,
    })
}
