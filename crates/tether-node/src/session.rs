//! Background sessions: the registry's calls as promises (those that may
//! block) or plain calls (those answered from memory or the spill file).
//! One registry per process, on napi-rs's tokio runtime; a session is
//! killed with its owner whatever the event loop is doing.

use std::sync::{Arc, LazyLock};
use std::time::{SystemTime, UNIX_EPOCH};

use napi::Either;
use napi::bindgen_prelude::Buffer;
use napi_derive::napi;
use tether::registry::{
    KillOutcome, OutputMode, ReadResult, Registry, RegistryConfig, RunSpec, SessionInfo, StdinMode,
    Stream, WaitOptions, WaitOutcome, WaitResult,
};
use tether::terminal::{PtySize, Screen};

use crate::error::{IntoJs, invalid, millis};
use crate::limits::LimitReport;

static REGISTRY: LazyLock<Arc<Registry>> =
    LazyLock::new(|| Arc::new(Registry::new(RegistryConfig::default())));

fn registry() -> Arc<Registry> {
    Arc::clone(&REGISTRY)
}

/// What `startSession` takes.
#[napi(object)]
pub struct SessionOptions {
    /// The program and its arguments (or `script`).
    pub argv: Option<Vec<String>>,
    /// A shell command line (or `argv`).
    pub script: Option<String>,
    pub cwd: Option<String>,
    /// Variables set over the inherited environment (`KEY=value`).
    pub env: Option<Vec<String>>,
    /// Start from an empty environment (then only `env`).
    pub env_clear: Option<bool>,
    /// A pipe to its stdin (`write`); otherwise the null device.
    pub stdin: Option<bool>,
    /// stderr kept apart (read with `stderr: true`); otherwise merged.
    pub separate_stderr: Option<bool>,
    /// A terminal of `[rows, cols]`.
    pub pty: Option<Vec<u32>>,
    pub timeout_ms: Option<f64>,
    pub idle_timeout_ms: Option<f64>,
    pub grace_ms: Option<f64>,
    pub max_memory: Option<f64>,
    pub spill_cap: Option<f64>,
    pub purpose: Option<String>,
    pub memory: Option<Either<String, f64>>,
    pub pids: Option<f64>,
    pub cpu: Option<f64>,
    pub require_limits: Option<bool>,
}

/// Starts a session; resolves to its id once the command runs.
#[napi]
pub async fn start_session(options: SessionOptions) -> napi::Result<String> {
    let limits = crate::limits::from_js(
        options.memory,
        options.pids,
        options.cpu,
        options.require_limits.unwrap_or(false),
    )?;
    let mut spec = match (options.argv, options.script) {
        (Some(argv), None) if !argv.is_empty() => RunSpec::argv(argv),
        (None, Some(script)) => RunSpec::shell(script),
        _ => return Err(invalid("give exactly one of argv (non-empty) and script")),
    };
    if let Some(cwd) = options.cwd {
        spec = spec.cwd(cwd);
    }
    if options.env_clear == Some(true) {
        spec = spec.env_clear();
    }
    for pair in options.env.unwrap_or_default() {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| invalid(&format!("env entry without '=': {pair:?}")))?;
        spec = spec.env(key, value);
    }
    if options.stdin == Some(true) {
        spec = spec.stdin(StdinMode::Piped);
    }
    if options.separate_stderr == Some(true) {
        spec = spec.output(OutputMode::Separate);
    }
    if let Some(size) = options.pty {
        let [rows, cols] = size[..] else {
            return Err(invalid("pty must be [rows, cols]"));
        };
        spec = spec.pty(PtySize::new(rows, cols).js()?);
    }
    if let Some(t) = options.timeout_ms {
        spec = spec.timeout(millis("timeout", t)?);
    }
    if let Some(t) = options.idle_timeout_ms {
        spec = spec.idle_timeout(millis("idleTimeout", t)?);
    }
    if let Some(g) = options.grace_ms {
        spec = spec.grace(millis("grace", g)?);
    }
    if let Some(bytes) = options.max_memory {
        spec = spec.max_memory(bytes as usize);
    }
    if let Some(bytes) = options.spill_cap {
        spec = spec.spill_cap(bytes as u64);
    }
    spec = spec
        .purpose(options.purpose.unwrap_or_else(|| "session".to_owned()))
        .limits(limits);
    let id = registry().run(spec).await.js()?;
    Ok(id.as_str().to_owned())
}

/// A session as `list`/`info` report it.
#[napi(object)]
pub struct Info {
    pub id: String,
    pub command: String,
    /// `running`, `exited`, `killed`, …
    pub state: String,
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub kill_reason: Option<String>,
    pub pid: u32,
    pub containment: String,
    /// Live descendants: `[pid, command]`.
    pub descendants: Vec<Descendant>,
    pub descendants_killed: u32,
    pub output_bytes: f64,
    pub stderr_bytes: Option<f64>,
    pub output_eof: bool,
    pub stdin_open: bool,
    pub settled: bool,
    /// Milliseconds since the epoch.
    pub started_at: f64,
    pub exited_at: Option<f64>,
    pub purpose: String,
    /// `[rows, cols]` of its terminal.
    pub pty: Option<Vec<u32>>,
    pub limits: LimitReport,
    pub limit_hit: Option<String>,
}

/// A live descendant of a session's main process.
#[napi(object)]
pub struct Descendant {
    pub pid: u32,
    pub command: String,
}

fn epoch_ms(at: SystemTime) -> f64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

impl From<SessionInfo> for Info {
    fn from(i: SessionInfo) -> Info {
        let code = i.exit.as_ref().and_then(|e| e.code());
        Info {
            limits: LimitReport::from(&i.limits),
            limit_hit: i.limit_hit.map(|hit| hit.name().to_owned()),
            id: i.id.as_str().to_owned(),
            command: i.command,
            state: i.state.name().to_owned(),
            code,
            signal: i
                .exit
                .as_ref()
                .filter(|_| code.is_none())
                .map(|e| e.shell_code() - 128),
            timed_out: i.exit.is_some_and(|e| e.timed_out()),
            kill_reason: i.kill_reason.map(|r| r.name().to_owned()),
            pid: i.identity.pid,
            containment: i.containment.name().to_owned(),
            descendants: i
                .descendants
                .into_iter()
                .map(|d| Descendant {
                    pid: d.pid,
                    command: d.command,
                })
                .collect(),
            descendants_killed: i.descendants_killed,
            output_bytes: i.output_bytes as f64,
            stderr_bytes: i.stderr_bytes.map(|b| b as f64),
            output_eof: i.output_eof,
            stdin_open: i.stdin_open,
            settled: i.settled,
            started_at: epoch_ms(i.started_at),
            exited_at: i.exited_at.map(epoch_ms),
            purpose: i.purpose,
            pty: i
                .pty
                .map(|s| vec![u32::from(s.rows()), u32::from(s.cols())]),
        }
    }
}

/// Output read from an offset.
#[napi(object)]
pub struct Chunk {
    pub data: Buffer,
    pub offset: f64,
    pub next_offset: f64,
    /// Bytes between the asked offset and `offset` that are gone.
    pub dropped: f64,
    pub end_offset: f64,
    pub eof: bool,
}

impl From<ReadResult> for Chunk {
    fn from(r: ReadResult) -> Chunk {
        Chunk {
            data: r.data.into(),
            offset: r.offset as f64,
            next_offset: r.next_offset as f64,
            dropped: r.dropped as f64,
            end_offset: r.end_offset as f64,
            eof: r.eof,
        }
    }
}

fn stream(stderr: Option<bool>) -> Stream {
    if stderr == Some(true) {
        Stream::Stderr
    } else {
        Stream::Output
    }
}

/// Reads up to `maxBytes` of a session's output from `offset`.
#[napi]
pub fn read_session(
    id: String,
    offset: f64,
    max_bytes: u32,
    stderr: Option<bool>,
) -> napi::Result<Chunk> {
    registry()
        .read_stream(&id, stream(stderr), offset as u64, max_bytes as usize)
        .map(Chunk::from)
        .js()
}

/// Writes to a session's stdin (or terminal); resolves once written.
#[napi]
pub async fn write_session(id: String, data: Buffer) -> napi::Result<()> {
    let data = data.to_vec();
    registry().write(&id, &data).await.js()
}

/// Closes a session's stdin.
#[napi]
pub fn close_session_stdin(id: String) -> napi::Result<()> {
    registry().close_stdin(&id).js()
}

/// The bytes named keys (`Enter`, `C-c`, `Up`, …) send to the session's
/// terminal, as it is set up now.
#[napi]
pub fn session_keys(id: String, names: Vec<String>) -> napi::Result<Buffer> {
    registry().keys(&id, &names).map(Buffer::from).js()
}

/// What `waitSession` takes.
#[napi(object)]
pub struct WaitArgs {
    pub timeout_ms: f64,
    /// A regular expression the output must match.
    pub until: Option<String>,
    pub offset: Option<f64>,
    pub stderr: Option<bool>,
    /// Wait for the tree to be empty and the output at its end too.
    pub settled: Option<bool>,
    /// Keep waiting for `until` after the command exits.
    pub through_exit: Option<bool>,
}

/// How a wait ended.
#[napi(object)]
pub struct Waited {
    /// `exited`, `matched`, `quiet` or `running` (the timeout passed).
    pub outcome: String,
    /// Where `until` matched: `[start, end]` offsets.
    pub span: Option<Vec<f64>>,
    pub info: Info,
}

impl From<WaitResult> for Waited {
    fn from(w: WaitResult) -> Waited {
        let (outcome, span) = match w.outcome {
            WaitOutcome::Exited => ("exited", None),
            WaitOutcome::Matched { start, end } => {
                ("matched", Some(vec![start as f64, end as f64]))
            }
            WaitOutcome::Quiet { .. } => ("quiet", None),
            WaitOutcome::StillRunning => ("running", None),
        };
        Waited {
            outcome: outcome.to_owned(),
            span,
            info: Info::from(w.info),
        }
    }
}

/// Waits for a session's exit, a pattern in its output, or the timeout.
#[napi]
pub async fn wait_session(id: String, args: WaitArgs) -> napi::Result<Waited> {
    let mut options = WaitOptions::new(millis("timeoutMs", args.timeout_ms)?)
        .from(args.offset.unwrap_or(0.0) as u64)
        .stream(stream(args.stderr));
    if let Some(until) = args.until {
        options = options.until(until);
    }
    if args.settled == Some(true) {
        options = options.settled();
    }
    if args.through_exit == Some(true) {
        options = options.through_exit();
    }
    registry().wait(&id, options).await.map(Waited::from).js()
}

/// How a kill ended.
#[napi(object)]
pub struct Killed {
    pub state: String,
    pub already_exited: bool,
    pub descendants_killed: u32,
}

impl From<KillOutcome> for Killed {
    fn from(k: KillOutcome) -> Killed {
        Killed {
            state: k.state.name().to_owned(),
            already_exited: k.already_exited,
            descendants_killed: k.descendants_killed,
        }
    }
}

/// Kills a session's whole tree (verified empty) with the grace.
#[napi]
pub async fn kill_session(id: String, grace_ms: f64) -> napi::Result<Killed> {
    let grace = millis("grace", grace_ms)?;
    registry().kill(&id, grace).await.map(Killed::from).js()
}

/// One session.
#[napi]
pub fn session_info(id: String) -> napi::Result<Info> {
    registry().info(&id).map(Info::from).js()
}

/// Every session of this process.
#[napi]
pub fn list_sessions() -> Vec<Info> {
    registry().list().into_iter().map(Info::from).collect()
}

/// A PTY session's screen as a terminal shows it.
#[napi(object)]
pub struct ScreenView {
    pub rows: u32,
    pub cols: u32,
    pub lines: Vec<String>,
    pub cursor_row: u32,
    pub cursor_col: u32,
    pub cursor_hidden: bool,
    pub alternate_screen: bool,
}

impl From<Screen> for ScreenView {
    fn from(s: Screen) -> ScreenView {
        ScreenView {
            rows: u32::from(s.size.rows()),
            cols: u32::from(s.size.cols()),
            lines: s.lines,
            cursor_row: u32::from(s.cursor_row),
            cursor_col: u32::from(s.cursor_col),
            cursor_hidden: s.cursor_hidden,
            alternate_screen: s.alternate_screen,
        }
    }
}

/// The screen of a PTY session.
#[napi]
pub fn session_screen(id: String) -> napi::Result<ScreenView> {
    registry().screen(&id).map(ScreenView::from).js()
}

/// Resizes a PTY session's terminal.
#[napi]
pub fn resize_session(id: String, rows: u32, cols: u32) -> napi::Result<()> {
    registry().resize(&id, PtySize::new(rows, cols).js()?).js()
}
