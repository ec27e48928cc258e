//! The terminal the tools drive: a [`Registry`] of sessions, plus what the
//! front-end remembers per session (where the output shown so far ends,
//! the queue of stdin writes, how the command was run), and the turning
//! of each tool call into registry calls and a JSON result.
//!
//! Every call is bounded: waits by the caller's window (at most 300 s),
//! stdin writes by a per-session queue that keeps writing in the
//! background when a command is slow to read, kills by their grace plus a
//! margin. Calls run concurrently (the adapter gives each its own task).

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tether::registry::{
    ReadResult, Registry, RegistryConfig, RunSpec, SessionInfo, StdinMode, WaitOptions, WaitOutcome,
};
use tether::{Error, SessionId};
use tokio::sync::{mpsc, oneshot};

use crate::arguments::{self, CommandArg, KillArgs, ReadArgs, RunArgs, WaitArgs, WriteArgs};
use crate::excerpt::{Source, excerpt};
use crate::exit::{ending, seconds};
use crate::screen::{complete_len, render};

/// Purpose written into the spawn tag of every process the server starts.
pub const PURPOSE: &str = "mcp";

/// How far back `wait` looks for the start of the line the cursor is in.
const LINE_LOOKBACK: u64 = 4096;

/// Extra time a `kill` call waits beyond its grace for the verified end.
const KILL_MARGIN: Duration = Duration::from_secs(10);

/// How the terminal runs commands.
#[derive(Clone, Debug)]
pub struct TerminalConfig {
    /// Directory relative `cwd`s start from, and the default `cwd`.
    pub cwd: PathBuf,
    /// The environment every command starts from.
    pub env: Vec<(OsString, OsString)>,
    /// Rendered bytes of output per result.
    pub budget: usize,
    /// SIGTERM → SIGKILL grace for kills the server starts itself
    /// (timeouts, shutdown).
    pub grace: Duration,
    /// Limits and retention of the registry.
    pub registry: RegistryConfig,
    /// The shell of `command` strings.
    pub shell: crate::shell::Shell,
}

/// A tool's answer: a JSON object, and whether it reports an error.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    /// The result object.
    pub body: Value,
    /// The call failed (bad arguments, unknown id, failed start, …).
    pub is_error: bool,
}

impl Reply {
    fn ok(body: Map<String, Value>) -> Reply {
        Reply {
            body: Value::Object(body),
            is_error: false,
        }
    }

    /// An error the model can act on.
    pub fn error(message: impl Into<String>) -> Reply {
        Reply {
            body: json!({ "error": message.into() }),
            is_error: true,
        }
    }
}

/// What the terminal remembers of one session.
struct Tracked {
    /// End of the output shown so far: where `read` continues and what
    /// `wait`'s `until` looks after.
    cursor: u64,
    /// The hard limit it runs under (for the timeout sentence).
    timeout: Duration,
    /// Run through the configured shell (`--shell`).
    shell: bool,
    /// Stdin writes, in order, to the session's writer task.
    stdin: Option<mpsc::UnboundedSender<StdinWrite>>,
}

/// One queued stdin write.
struct StdinWrite {
    data: Vec<u8>,
    close: bool,
    done: oneshot::Sender<Result<(), String>>,
}

/// Sessions and the tools over them.
pub struct Terminal {
    registry: Arc<Registry>,
    config: TerminalConfig,
    tracked: Mutex<HashMap<String, Tracked>>,
}

impl Terminal {
    /// A terminal with no sessions. Must be created inside a tokio runtime.
    pub fn new(config: TerminalConfig) -> Terminal {
        Terminal {
            registry: Arc::new(Registry::new(config.registry.clone())),
            config,
            tracked: Mutex::new(HashMap::new()),
        }
    }

    /// The shell of `command` strings.
    pub fn shell(&self) -> &crate::shell::Shell {
        &self.config.shell
    }

    /// Runs tool `name`; `None` if there is no such tool.
    pub async fn call(&self, name: &str, args: &Map<String, Value>) -> Option<Reply> {
        let reply = match name {
            "run" => match arguments::run(args) {
                Ok(a) => self.run(a).await,
                Err(e) => invalid("run", e),
            },
            "read" => match arguments::read(args) {
                Ok(a) => self.read(a),
                Err(e) => invalid("read", e),
            },
            "write" => match arguments::write(args) {
                Ok(a) => self.write(a).await,
                Err(e) => invalid("write", e),
            },
            "wait" => match arguments::wait(args) {
                Ok(a) => self.wait(a).await,
                Err(e) => invalid("wait", e),
            },
            "kill" => match arguments::kill(args) {
                Ok(a) => self.kill(a).await,
                Err(e) => invalid("kill", e),
            },
            "list" => match arguments::list(args) {
                Ok(()) => self.list(),
                Err(e) => invalid("list", e),
            },
            _ => return None,
        };
        Some(reply)
    }

    /// Kills every session's tree and verifies each empty.
    ///
    /// # Errors
    /// [`Error::KillIncomplete`] naming what survived.
    pub async fn shutdown(&self) -> Result<(), Error> {
        // Writer tasks end when their queue closes.
        for tracked in lock(&self.tracked).values_mut() {
            tracked.stdin = None;
        }
        self.registry.shutdown().await
    }

    async fn run(&self, a: RunArgs) -> Reply {
        let cwd = match &a.cwd {
            Some(dir) => self.config.cwd.join(dir),
            None => self.config.cwd.clone(),
        };
        let shell = matches!(a.command, CommandArg::Shell(_));
        let mut spec = match a.command {
            CommandArg::Shell(script) => match self.config.shell.argv(&script) {
                Some(argv) => RunSpec::argv(argv),
                None => RunSpec::shell(script),
            },
            CommandArg::Argv(argv) => RunSpec::argv(argv),
        }
        .cwd(&cwd)
        .env_clear()
        .timeout(a.timeout)
        .grace(self.config.grace)
        .purpose(PURPOSE);
        for (key, value) in &self.config.env {
            spec = spec.env(key, value);
        }
        for (key, value) in &a.env {
            spec = spec.env(key, value);
        }
        if a.stdin.is_some() || a.keep_stdin_open {
            spec = spec.stdin(StdinMode::Piped);
        }
        let id = match self.registry.run(spec).await {
            Ok(id) => id,
            Err(e) => return failed_start(&e, &cwd),
        };
        {
            let mut tracked = lock(&self.tracked);
            // Forget sessions the registry has evicted (their writer tasks
            // end with their queues).
            tracked.retain(|known, _| self.registry.resolve(known).is_ok());
            tracked.insert(
                id.to_string(),
                Tracked {
                    cursor: 0,
                    timeout: a.timeout,
                    shell,
                    stdin: None,
                },
            );
        }
        let mut stdin_note = None;
        let deadline = Instant::now() + a.yield_for;
        if let Some(data) = a.stdin {
            let done = self.queue_stdin(&id, data.into_bytes(), !a.keep_stdin_open);
            stdin_note = stdin_outcome(done, deadline).await;
        }
        self.report_at(&id, deadline, stdin_note).await
    }

    fn read(&self, a: ReadArgs) -> Reply {
        let id = match self.registry.resolve(&a.id) {
            Ok(id) => id,
            Err(e) => return session_error(&e, &a.id),
        };
        let offset = a.offset.unwrap_or_else(|| self.cursor(&id));
        let chunk = match self.registry.read(id.as_str(), offset, a.max_bytes) {
            Ok(chunk) => chunk,
            Err(e) => return session_error(&e, id.as_str()),
        };
        if offset > chunk.end_offset {
            return Reply::error(format!(
                "offset {offset} is past the end of the output of {id} ({} bytes so far); \
                 leave `offset` out to continue where you left off",
                chunk.end_offset
            ));
        }
        let shown = if chunk.eof {
            chunk.data.len()
        } else {
            complete_len(&chunk.data)
        };
        let next_offset = chunk.offset + shown as u64;
        self.set_cursor(&id, next_offset);
        let status = self
            .registry
            .info(id.as_str())
            .map(|i| i.state.name())
            .unwrap_or("unknown");
        let mut body = Map::new();
        body.insert("id".into(), id.to_string().into());
        body.insert("status".into(), status.into());
        body.insert("output".into(), render(&chunk.data[..shown]).into());
        body.insert("offset".into(), chunk.offset.into());
        body.insert("next_offset".into(), next_offset.into());
        body.insert("end_offset".into(), chunk.end_offset.into());
        body.insert(
            "eof".into(),
            (chunk.eof && shown == chunk.data.len()).into(),
        );
        body.insert("dropped".into(), chunk.dropped.into());
        if chunk.dropped > 0 {
            body.insert(
                "note".into(),
                format!(
                    "{} bytes before offset {} are gone (beyond the spill cap)",
                    chunk.dropped, chunk.offset
                )
                .into(),
            );
        }
        Reply::ok(body)
    }

    async fn write(&self, a: WriteArgs) -> Reply {
        let info = match self.registry.info(&a.id) {
            Ok(info) => info,
            Err(e) => return session_error(&e, &a.id),
        };
        let id = info.id.clone();
        if !info.stdin_open {
            return Reply::error(if info.is_running() {
                format!(
                    "{id} takes no input: its stdin is closed (it was started without \
                     keep_stdin_open, or eof was sent). Start interactive programs with \
                     run {{\"command\": ..., \"keep_stdin_open\": true}}"
                )
            } else {
                format!(
                    "{id} has {} (status {}); nothing reads its stdin any more",
                    if info.state == tether::registry::SessionState::Exited {
                        "exited"
                    } else {
                        "ended"
                    },
                    info.state.name()
                )
            });
        }
        let deadline = Instant::now() + a.yield_for;
        let done = self.queue_stdin(&id, a.data.into_bytes(), a.eof);
        let stdin_note = stdin_outcome(done, deadline).await;
        self.report_at(&id, deadline, stdin_note).await
    }

    async fn wait(&self, a: WaitArgs) -> Reply {
        let id = match self.registry.resolve(&a.id) {
            Ok(id) => id,
            Err(e) => return session_error(&e, &a.id),
        };
        let from = self.line_start(&id, self.cursor(&id));
        let mut options = WaitOptions::new(a.timeout).from(from);
        if let Some(pattern) = &a.until {
            options = options.until(pattern.as_str());
        }
        let waited = match self.registry.wait(id.as_str(), options).await {
            Ok(w) => w,
            Err(e) => return session_error(&e, id.as_str()),
        };
        let mut body = self.report(&id, &waited.info);
        let matched = match waited.outcome {
            WaitOutcome::Matched { start, end } => {
                let text = self
                    .registry
                    .read(id.as_str(), start, (end - start) as usize)
                    .map(|r| render(&r.data))
                    .unwrap_or_default();
                body.insert(
                    "match".into(),
                    json!({ "text": text, "start": start, "end": end }),
                );
                true
            }
            WaitOutcome::Exited => false,
            WaitOutcome::StillRunning => {
                body.insert(
                    "hint".into(),
                    format!(
                        "still running after {} s{}; wait again, read, or kill",
                        seconds(a.timeout),
                        if a.until.is_some() {
                            " and no new output matched `until`"
                        } else {
                            ""
                        }
                    )
                    .into(),
                );
                false
            }
        };
        body.insert("matched".into(), matched.into());
        Reply::ok(body)
    }

    async fn kill(&self, a: KillArgs) -> Reply {
        let id = match self.registry.resolve(&a.id) {
            Ok(id) => id,
            Err(e) => return session_error(&e, &a.id),
        };
        let killed = tokio::time::timeout(
            a.grace + KILL_MARGIN,
            self.registry.kill(id.as_str(), a.grace),
        )
        .await;
        let outcome = match killed {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(Error::KillIncomplete { survivors })) => {
                let list: Vec<String> = survivors
                    .iter()
                    .map(|s| format!("{} {}", s.pid, s.command))
                    .collect();
                return Reply::error(format!(
                    "kill of {id} incomplete: {} process(es) survived: {}. The session is still \
                     tracked; call kill again",
                    survivors.len(),
                    list.join("; ")
                ));
            }
            Ok(Err(e)) => return session_error(&e, id.as_str()),
            Err(_) => {
                return Reply::error(format!(
                    "kill of {id} has not finished after {} s; it goes on in the background. \
                     Call kill again or list to see where it stands",
                    seconds(a.grace + KILL_MARGIN)
                ));
            }
        };
        let info = match self.registry.info(id.as_str()) {
            Ok(info) => info,
            Err(e) => return session_error(&e, id.as_str()),
        };
        let mut body = self.report(&id, &info);
        body.insert("already_exited".into(), outcome.already_exited.into());
        body.insert(
            "descendants_killed".into(),
            outcome.descendants_killed.into(),
        );
        Reply::ok(body)
    }

    fn list(&self) -> Reply {
        let tracked = lock(&self.tracked);
        let sessions: Vec<Value> = self
            .registry
            .list()
            .iter()
            .map(|info| {
                let (timeout, shell, cursor) = tracked
                    .get(info.id.as_str())
                    .map_or((None, true, 0), |t| (Some(t.timeout), t.shell, t.cursor));
                let end = ending(info, timeout, shell);
                json!({
                    "id": info.id.as_str(),
                    "command": truncate(&info.command, 200),
                    "status": end.status,
                    "exit_code": end.exit_code,
                    "signal": end.signal,
                    "duration_ms": info.uptime.as_millis() as u64,
                    "output_bytes": info.output_bytes,
                    "unread_bytes": info.output_bytes.saturating_sub(cursor),
                    "descendants_alive": info.descendants.len(),
                    "stdin_open": info.stdin_open,
                })
            })
            .collect();
        let mut body = Map::new();
        body.insert("sessions".into(), sessions.into());
        Reply::ok(body)
    }

    /// The result fields every session-bearing reply shares, with the
    /// output from the cursor on; moves the cursor past what it shows.
    /// Waits for the session until `deadline` (early when it exits) and
    /// reports it, with the stdin note of this call if any.
    async fn report_at(
        &self,
        id: &SessionId,
        deadline: Instant,
        stdin_note: Option<String>,
    ) -> Reply {
        let waited = match self
            .registry
            .wait(id.as_str(), WaitOptions::new(left(deadline)))
            .await
        {
            Ok(w) => w,
            Err(e) => return session_error(&e, id.as_str()),
        };
        let mut body = self.report(id, &waited.info);
        if let Some(note) = stdin_note {
            body.insert("stdin_error".into(), note.into());
        }
        Reply::ok(body)
    }

    fn report(&self, id: &SessionId, info: &SessionInfo) -> Map<String, Value> {
        let (timeout, shell, from) = {
            let tracked = lock(&self.tracked);
            tracked
                .get(id.as_str())
                .map_or((None, true, 0), |t| (Some(t.timeout), t.shell, t.cursor))
        };
        let end = ending(info, timeout, shell);
        let source = RegistrySource {
            registry: &self.registry,
            id: id.as_str(),
        };
        let mut body = Map::new();
        body.insert("id".into(), id.as_str().into());
        body.insert("status".into(), end.status.into());
        body.insert("exit_code".into(), end.exit_code.into());
        body.insert("signal".into(), end.signal.into());
        if let Some(note) = end.note {
            body.insert("note".into(), note.into());
        }
        body.insert(
            "duration_ms".into(),
            (info.uptime.as_millis() as u64).into(),
        );
        match excerpt(&source, id.as_str(), from, self.config.budget) {
            Ok(shown) => {
                self.set_cursor(id, shown.next_offset);
                body.insert("output".into(), shown.text.into());
                body.insert("next_offset".into(), shown.next_offset.into());
                body.insert("truncated_bytes".into(), shown.omitted.into());
                if shown.dropped > 0 {
                    body.insert("dropped_bytes".into(), shown.dropped.into());
                }
            }
            Err(e) => {
                body.insert("output".into(), "".into());
                body.insert("output_error".into(), e.to_string().into());
            }
        }
        let descendants: Vec<Value> = info
            .descendants
            .iter()
            .map(|d| json!({ "pid": d.pid, "command": truncate(&d.command, 200) }))
            .collect();
        let alive = !descendants.is_empty();
        body.insert("descendants_alive".into(), descendants.into());
        if info.stdin_open {
            body.insert("stdin_open".into(), true.into());
        }
        if info.is_running() {
            body.insert(
                "hint".into(),
                format!(
                    "still running: wait {{\"id\": \"{id}\", \"timeout_s\": 30}} for it to \
                     finish (add \"until\": a regex to stop at a line), read for new output, \
                     {}kill to stop it",
                    if info.stdin_open {
                        "write for input, "
                    } else {
                        ""
                    }
                )
                .into(),
            );
        } else if alive {
            body.insert(
                "hint".into(),
                format!(
                    "the command exited but left processes running (descendants_alive); they \
                     stay contained in {id}: read shows their output, kill {{\"id\": \"{id}\"}} \
                     ends them, and they die when this server exits"
                )
                .into(),
            );
        }
        body
    }

    /// Where the line holding `offset` starts (at most [`LINE_LOOKBACK`]
    /// back): `until` matches from there, so a line that one result cut
    /// in two (`>>` shown, `> ` not yet) still matches as a whole.
    fn line_start(&self, id: &SessionId, offset: u64) -> u64 {
        let back = offset.saturating_sub(LINE_LOOKBACK);
        match self
            .registry
            .read(id.as_str(), back, (offset - back) as usize)
        {
            Ok(r) => match r.data.iter().rposition(|&b| b == b'\n') {
                Some(nl) => r.offset + nl as u64 + 1,
                None => r.offset,
            },
            Err(_) => offset,
        }
    }

    fn cursor(&self, id: &SessionId) -> u64 {
        lock(&self.tracked).get(id.as_str()).map_or(0, |t| t.cursor)
    }

    fn set_cursor(&self, id: &SessionId, offset: u64) {
        if let Some(t) = lock(&self.tracked).get_mut(id.as_str()) {
            t.cursor = offset;
        }
    }

    /// Queues `data` for the session's stdin (closing it afterwards if
    /// `close`); the returned receiver answers when it was written.
    fn queue_stdin(
        &self,
        id: &SessionId,
        data: Vec<u8>,
        close: bool,
    ) -> oneshot::Receiver<Result<(), String>> {
        let (done, answer) = oneshot::channel();
        let write = StdinWrite { data, close, done };
        let mut tracked = lock(&self.tracked);
        let entry = tracked.entry(id.to_string()).or_insert(Tracked {
            cursor: 0,
            timeout: arguments::DEFAULT_TIMEOUT,
            shell: true,
            stdin: None,
        });
        let queue = entry.stdin.get_or_insert_with(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(write_stdin(Arc::clone(&self.registry), id.clone(), rx));
            tx
        });
        if let Err(mpsc::error::SendError(write)) = queue.send(write) {
            // The writer ended: stdin was closed.
            let _ = write.done.send(Err(format!("stdin of {id} is closed")));
        }
        answer
    }
}

/// A session's stdin writer: writes queued data in order, each write
/// whole, however long the command takes to read it.
async fn write_stdin(
    registry: Arc<Registry>,
    id: SessionId,
    mut queue: mpsc::UnboundedReceiver<StdinWrite>,
) {
    while let Some(write) = queue.recv().await {
        let mut result = registry.write(id.as_str(), &write.data).await;
        if result.is_ok() && write.close {
            result = registry.close_stdin(id.as_str());
        }
        // Once stdin is closed (by us or by the command) nothing more can
        // be written: end, and let later writes fail at once.
        let finished = write.close || result.is_err();
        let _ = write
            .done
            .send(result.map_err(|e| stdin_error_text(&e, &id)));
        if finished {
            return;
        }
    }
}

fn stdin_error_text(e: &Error, id: &SessionId) -> String {
    match e {
        Error::StdinClosed { why, .. } => format!("stdin of {id} is closed: {why}"),
        Error::NoStdin { .. } => {
            format!("{id} has no stdin; start it with keep_stdin_open: true to write to it")
        }
        other => other.to_string(),
    }
}

/// Waits until `deadline` for a queued write; `Some(text)` when it failed
/// or is still going on.
async fn stdin_outcome(
    done: oneshot::Receiver<Result<(), String>>,
    deadline: Instant,
) -> Option<String> {
    match tokio::time::timeout_at(deadline.into(), done).await {
        Ok(Ok(Ok(()))) => None,
        Ok(Ok(Err(e))) => Some(e),
        Ok(Err(_)) => Some("the write was abandoned (the server is shutting down)".into()),
        Err(_) => Some(
            "not all of the input is written yet: the command has not read it; the rest is \
             written in the background as it reads"
                .into(),
        ),
    }
}

/// Output of one session, read through the registry.
struct RegistrySource<'a> {
    registry: &'a Registry,
    id: &'a str,
}

impl Source for RegistrySource<'_> {
    fn read(&self, offset: u64, max: usize) -> Result<ReadResult, Error> {
        self.registry.read(self.id, offset, max)
    }
}

fn left(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

fn invalid(tool: &str, e: crate::error::ArgError) -> Reply {
    Reply::error(format!("{tool}: {e}"))
}

/// The reply to a `run` whose command could not start.
fn failed_start(e: &Error, cwd: &Path) -> Reply {
    let hint = match e {
        Error::ProgramNotFound { .. } => {
            "check the program name, or use `command` to run it through the shell"
        }
        Error::NotExecutable { .. } => "the file is not executable; run it with its interpreter",
        Error::BadCwd { .. } => "give an existing directory as `cwd`",
        Error::TooManySessions { .. } => {
            "kill sessions you no longer need (see list), or wait for one to finish"
        }
        _ => "",
    };
    let mut body = Map::new();
    body.insert("status".into(), "failed_start".into());
    body.insert("error".into(), e.to_string().into());
    body.insert("cwd".into(), cwd.display().to_string().into());
    if !hint.is_empty() {
        body.insert("hint".into(), hint.into());
    }
    Reply {
        body: Value::Object(body),
        is_error: true,
    }
}

/// The reply to an id that names no session, or another registry error.
fn session_error(e: &Error, id: &str) -> Reply {
    match e {
        Error::UnknownSession { .. } => Reply::error(format!(
            "no session {id:?}: use an id that run returned (list shows them all; finished \
             sessions are kept for 30 minutes)"
        )),
        other => Reply::error(other.to_string()),
    }
}

fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
