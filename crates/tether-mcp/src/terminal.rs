//! The terminal the tools drive: a [`Registry`] of sessions, plus what the
//! front-end remembers per session for the model (where the output shown
//! so far ends, where the last `until` match ended), and the turning of
//! each tool call into registry calls and a [`Reply`].
//!
//! Everything else about a session — its command line, its timeout, its
//! stdin queue — is the registry's. Every call is bounded: waits by the
//! caller's window (at most 50 s, under clients' request timeouts), stdin
//! writes by the registry's queue (a command slow to read never blocks a
//! call), kills by their grace plus a margin, a `grep` by `--grep-time-s`.
//! Calls run concurrently (the adapter gives each its own task); scans of
//! the output with a regex run on blocking threads, off the request loop,
//! so a slow one delays nothing else; a call that carries a progress sink
//! reports every second while it waits, and a cancelled `run` kills the
//! session it started (a cancelled `grep` stops searching).

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tether_ledger::LimitsRecord;

use futures::FutureExt as _;
use regex::bytes::{Regex, RegexBuilder};
use tether::registry::{
    OutputMode, QueuedWrite, ReadResult, Registry, RegistryConfig, RunSpec, SessionInfo, StdinMode,
    Stream, WaitOptions, WaitOutcome, WaitResult, may_wait_long,
};
use tether::{Error, SessionId};
use tokio_util::sync::CancellationToken;

use crate::arguments::{
    self, CommandArg, KillArgs, ReadArgs, ReadMode, RunArgs, ScreenArgs, WaitArgs, WriteArgs,
};
use crate::excerpt::{ReadCall, Source, excerpt};
use crate::exit::{ending, seconds};
use crate::grep::{Found, Query, Stop, grep};
use crate::names::Names;
use crate::prompt::{editor_refused, waiting_prompt};
use crate::read::{Shown, head, page, tail};
use crate::reply::{
    Alive, GapReport, ListReport, Listed, ReadReport, Reply, ScreenReport, SessionReport, Span,
};
use crate::screen::render;
use crate::tools::MAX_WAIT_S;

/// Purpose written into the spawn tag of every process the server starts.
pub const PURPOSE: &str = "mcp";

/// Extra time a `kill` call waits beyond its grace for the verified end.
const KILL_MARGIN: Duration = Duration::from_secs(10);

/// How often a waiting call reports progress (when the client asked).
/// Clients that reset their timeout on progress (the TypeScript SDK's
/// `resetTimeoutOnProgress`) then never time out a call that is alive.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// The editor variables the server points at a failing stand-in.
const EDITOR_VARS: [&str; 4] = ["GIT_EDITOR", "EDITOR", "VISUAL", "GIT_SEQUENCE_EDITOR"];

/// Longest a `screen` call with a resize waits for the program's redraw.
const RESIZE_REDRAW: Duration = Duration::from_secs(2);

/// How far back a `wait` looks for an earlier match of its pattern.
pub(crate) const EARLIER_LOOKBACK: u64 = 4 << 20;

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
    /// (timeouts, shutdown, cancelled runs).
    pub grace: Duration,
    /// Limits and retention of the registry.
    pub registry: RegistryConfig,
    /// The shell of `command` strings (`--shell`).
    pub shell: crate::shell::Shell,
    /// The tools' names (`--tool-prefix`), for hints that name a tool.
    pub names: Names,
    /// Longest one `grep` searches (`--grep-time-s`).
    pub grep_time: Duration,
    /// Limits every session gets unless its `run` sets its own
    /// (`--memory`, `--pids`, `--cpu`).
    pub limits: tether::Limits,
}

/// One progress report of a waiting call.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    /// Seconds waited so far (increases with every report).
    pub elapsed: f64,
    /// The most this call waits, in seconds.
    pub total: f64,
    /// What happened so far, for a person.
    pub message: String,
}

/// Where progress reports go (the adapter sends them to the client).
pub type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;

/// What a call brings besides its arguments.
#[derive(Clone, Default)]
pub struct CallContext {
    /// Cancelled when the client cancels the call.
    pub cancel: CancellationToken,
    /// Set when the client asked for progress (gave a progressToken).
    pub progress: Option<ProgressSink>,
}

/// What the terminal remembers of one session, for the model.
#[derive(Clone, Copy, Debug, Default)]
struct View {
    /// End of the output shown so far: where `read` continues and what
    /// results show from.
    shown: u64,
    /// The same for stderr, when captured apart.
    stderr_shown: u64,
    /// End of the last `until` match: where the next `wait … until` looks.
    matched: u64,
}

/// Sessions and the tools over them.
pub struct Terminal {
    registry: Arc<Registry>,
    config: TerminalConfig,
    views: Mutex<HashMap<String, View>>,
}

/// What the wait part of a call ended with.
enum Waited {
    Done(Box<WaitResult>),
    Cancelled,
}

impl Terminal {
    /// A terminal with no sessions. Must be created inside a tokio runtime.
    pub fn new(config: TerminalConfig) -> Terminal {
        Terminal {
            registry: Arc::new(Registry::new(config.registry.clone())),
            config,
            views: Mutex::new(HashMap::new()),
        }
    }

    /// The shell of `command` strings.
    /// The server's configuration.
    pub(crate) fn config(&self) -> &TerminalConfig {
        &self.config
    }

    /// Whether `id` names a session of this server's own registry.
    pub(crate) fn knows(&self, id: &str) -> bool {
        self.registry.resolve(id).is_ok()
    }

    pub fn shell(&self) -> &crate::shell::Shell {
        &self.config.shell
    }

    /// The tools' names.
    pub fn names(&self) -> &Names {
        &self.config.names
    }

    /// The name a client calls `tool` by.
    fn tool(&self, tool: &str) -> String {
        self.config.names.of(tool)
    }

    /// How texts name the `read` call for session `id`'s `stream`.
    fn read_call<'a>(&self, read: &'a str, id: &'a str, stream: Stream) -> ReadCall<'a> {
        ReadCall {
            tool: read,
            id,
            stream: (stream == Stream::Stderr).then_some("stderr"),
        }
    }

    /// Runs tool `name` (its own name, without the prefix); `None` if
    /// there is no such tool.
    pub async fn call(
        &self,
        name: &str,
        args: &serde_json::Map<String, serde_json::Value>,
        context: CallContext,
    ) -> Option<Reply> {
        if let Some(reply) = crate::durable::route(self, name, args, &context).await {
            return Some(reply);
        }
        let reply = match name {
            "run" => match arguments::run(args) {
                Ok(a) if a.durable => crate::durable::run(self, a).await,
                Ok(a) => self.run(a, &context).await,
                Err(e) => self.invalid("run", e),
            },
            "read" => match arguments::read(args) {
                Ok(a) => self.read(a, &context).await,
                Err(e) => self.invalid("read", e),
            },
            "write" => match arguments::write(args) {
                Ok(a) => self.write(a, &context).await,
                Err(e) => self.invalid("write", e),
            },
            "wait" => match arguments::wait(args) {
                Ok(a) => self.wait(a, &context).await,
                Err(e) => self.invalid("wait", e),
            },
            "kill" => match arguments::kill(args) {
                Ok(a) => self.kill(a).await,
                Err(e) => self.invalid("kill", e),
            },
            "list" => match arguments::list(args) {
                Ok(()) => crate::durable::with_durable(self.list()).await,
                Err(e) => self.invalid("list", e),
            },
            "screen" => match arguments::screen(args) {
                Ok(a) => self.screen(a, &context).await,
                Err(e) => self.invalid("screen", e),
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
        self.registry.shutdown().await
    }

    async fn run(&self, a: RunArgs, context: &CallContext) -> Reply {
        let cwd = match &a.cwd {
            Some(dir) => self.config.cwd.join(dir),
            None => self.config.cwd.clone(),
        };
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
        .limits(a.limits.or(self.config.limits))
        .purpose(PURPOSE);
        let stand_in = crate::prompt::no_editor_command();
        for (key, value) in &self.config.env {
            // A terminal gets the terminal type that goes with it
            // (xterm-256color) unless the call names one, and a real
            // editor (it can be driven with keys and read with `screen`):
            // `dumb` and the failing stand-in editor are for pipes.
            let for_pipes = key == "TERM"
                || (EDITOR_VARS.iter().any(|v| key == v) && value.to_str() == Some(&stand_in));
            if a.pty.is_some() && for_pipes {
                continue;
            }
            spec = spec.env(key, value);
        }
        for (key, value) in &a.env {
            spec = spec.env(key, value);
        }
        if a.stdin.is_some() || a.keep_stdin_open {
            spec = spec.stdin(StdinMode::Piped);
        }
        if a.separate_stderr {
            spec = spec.output(OutputMode::Separate);
        }
        if let Some(size) = a.pty {
            spec = spec.pty(size);
        }
        let id = match self.registry.run(spec).await {
            Ok(id) => id,
            Err(e) => return self.failed_start(&e, &cwd),
        };
        {
            let mut views = lock(&self.views);
            // Forget sessions the registry has evicted.
            views.retain(|known, _| self.registry.resolve(known).is_ok());
            views.insert(id.to_string(), View::default());
        }
        let mut stdin = None;
        let mut stdin_error = None;
        if let Some(data) = a.stdin {
            // A terminal's input is never closed: its text is typed, and the
            // program keeps reading it.
            let close = !a.keep_stdin_open && a.pty.is_none();
            match self
                .registry
                .queue_write(id.as_str(), data.into_bytes(), close)
            {
                Ok(queued) => stdin = Some(queued),
                Err(e) => stdin_error = Some(self.stdin_error_text(&e, &id)),
            }
        }
        let mut options = WaitOptions::new(a.yield_for);
        if let Some(pattern) = &a.until {
            options = options.until(pattern.as_str()).through_exit();
        }
        if let Some(quiet) = a.quiet {
            options = options.quiet(quiet).prompt(crate::prompt::REPL_PROMPT);
        }
        let waited = match self.waiting(&id, options, a.yield_for, context).await {
            Ok(Waited::Done(w)) => *w,
            Ok(Waited::Cancelled) => return self.cancelled_run(&id).await,
            Err(e) => return self.session_error(&e, id.as_str()),
        };
        let stdin_error = stdin_error.or_else(|| stdin.and_then(stdin_outcome));
        self.reply(&id, waited, a.until.is_some(), stdin_error)
    }

    /// A `run` whose call the client cancelled: the client will not learn
    /// the id, so nobody could stop the command; kill it (verified).
    async fn cancelled_run(&self, id: &SessionId) -> Reply {
        let killed = tokio::time::timeout(
            self.config.grace + KILL_MARGIN,
            self.registry.kill(id.as_str(), self.config.grace),
        )
        .await;
        match killed {
            Ok(Ok(_)) => Reply::error(format!(
                "cancelled by the client; session {id} was killed with every process it started"
            )),
            Ok(Err(e)) => {
                tracing::error!("killing cancelled session {id}: {e}");
                Reply::error(format!("cancelled by the client; killing {id} failed: {e}"))
            }
            Err(_) => Reply::error(format!(
                "cancelled by the client; the kill of {id} goes on in the background"
            )),
        }
    }

    async fn read(&self, a: ReadArgs, context: &CallContext) -> Reply {
        let id = match self.registry.resolve(&a.id) {
            Ok(id) => id,
            Err(e) => return self.session_error(&e, &a.id),
        };
        let info = match self.registry.info(id.as_str()) {
            Ok(info) => info,
            Err(e) => return self.session_error(&e, id.as_str()),
        };
        if a.stream == Stream::Stderr && info.stderr_bytes.is_none() {
            return merged_stderr(id.as_str(), &self.tool("read"));
        }
        let source = self.source(&id, a.stream);
        let budget = self.config.budget;
        let view = self.view(&id);
        let cursor = match a.stream {
            Stream::Output => view.shown,
            Stream::Stderr => view.stderr_shown,
        };
        let end = match a.stream {
            Stream::Output => info.output_bytes,
            Stream::Stderr => info.stderr_bytes.unwrap_or(0),
        };
        if let Some(offset) = a.offset
            && offset > end
        {
            return past_end(offset, id.as_str(), end);
        }
        let read_tool = self.tool("read");
        let call = self.read_call(&read_tool, id.as_str(), a.stream);
        let mut report = ReadReport {
            status: info.state.name(),
            id: id.to_string(),
            stream: (a.stream == Stream::Stderr).then_some("stderr"),
            ..ReadReport::default()
        };
        let shown: Result<Shown, Error> = match &a.mode {
            ReadMode::Page { .. } | ReadMode::Head(_) | ReadMode::Tail(_) => {
                let shown = lines_or_page(&source, &call, &a, cursor, budget);
                if let (ReadMode::Page { .. }, Ok(shown)) = (&a.mode, &shown) {
                    self.move_cursor(&id, a.stream, shown.next_offset);
                }
                shown
            }
            ReadMode::Grep {
                pattern,
                context: lines_around,
                max_matches,
                first_line,
            } => {
                let regex = match until_regex(pattern) {
                    Ok(regex) => regex,
                    Err(e) => return Reply::error(format!("{read_tool}: `grep` {e}")),
                };
                let query = Query {
                    regex: &regex,
                    from: a.offset.unwrap_or(0),
                    first_line: *first_line,
                    context: *lines_around,
                    max_matches: *max_matches,
                    budget,
                };
                let found = match self.search(&id, a.stream, &query, context).await {
                    Ok(Some(found)) => found,
                    Ok(None) => return Reply::error("cancelled by the client"),
                    Err(e) => return self.session_error(&e, id.as_str()),
                };
                Ok(grep_shown(
                    &mut report,
                    found,
                    &query,
                    &call,
                    pattern,
                    self.config.grep_time,
                    info.output_eof.then_some(end),
                ))
            }
        };
        match shown {
            Ok(shown) => read_reply(report, shown),
            Err(e) => self.session_error(&e, id.as_str()),
        }
    }

    /// Runs a grep on a blocking thread — off the request loop, so a slow
    /// regex holds up no other call (issue 16: a `list` waited 29–42 s
    /// behind one) — for at most `--grep-time-s`, stopping at once when
    /// the client cancels. `None`: cancelled.
    async fn search(
        &self,
        id: &SessionId,
        stream: Stream,
        query: &Query<'_>,
        context: &CallContext,
    ) -> Result<Option<Found>, Error> {
        let registry = Arc::clone(&self.registry);
        let id = id.to_string();
        let regex = query.regex.clone();
        let (from, first_line, lines_around, max_matches, budget) = (
            query.from,
            query.first_line,
            query.context,
            query.max_matches,
            query.budget,
        );
        let cancel = context.cancel.clone();
        let deadline = Instant::now() + self.config.grep_time;
        let scan = tokio::task::spawn_blocking(move || {
            let source = RegistrySource {
                registry: &registry,
                id: &id,
                stream,
            };
            let query = Query {
                regex: &regex,
                from,
                first_line,
                context: lines_around,
                max_matches,
                budget,
            };
            let stop = || {
                if cancel.is_cancelled() {
                    Some(Stop::Cancelled)
                } else if Instant::now() >= deadline {
                    Some(Stop::TimeUp)
                } else {
                    None
                }
            };
            let found = grep(&source, &query, &stop);
            if let Ok(Found {
                stopped: Some(stopped),
                ..
            }) = &found
            {
                tracing::info!(
                    "grep of {id} stopped at offset {} ({:?})",
                    stopped.at,
                    stopped.why
                );
            }
            found
        });
        tokio::select! {
            scanned = scan => match scanned {
                Ok(found) => found.map(Some),
                // A panic in the search: the adapter reports it as a bug.
                Err(e) => std::panic::resume_unwind(e.into_panic()),
            },
            // The search sees the same token and stops at its next look.
            _ = context.cancel.cancelled() => Ok(None),
        }
    }

    async fn write(&self, a: WriteArgs, context: &CallContext) -> Reply {
        let info = match self.registry.info(&a.id) {
            Ok(info) => info,
            Err(e) => return self.session_error(&e, &a.id),
        };
        let id = info.id.clone();
        if !info.stdin_open {
            return Reply::error(if info.is_running() {
                format!(
                    "{id} takes no input: its stdin is closed (it was started without \
                     keep_stdin_open, or eof was sent). Start interactive programs with \
                     {} {{\"command\": ..., \"keep_stdin_open\": true}}",
                    self.tool("run")
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
        let from = info.output_bytes;
        let terminal = info.pty.is_some();
        let mut bytes = a.data.into_bytes();
        if !a.keys.is_empty() {
            match may_wait_long(|| self.registry.keys(id.as_str(), &a.keys)) {
                Ok(keys) => bytes.extend(keys),
                Err(e) => return self.session_error(&e, id.as_str()),
            }
        }
        if a.submit {
            // The Enter key on a terminal (a program in raw mode waits for
            // CR, not LF); a newline on a pipe.
            bytes.push(if terminal { b'\r' } else { b'\n' });
        }
        let queued = match self
            .registry
            .queue_write(id.as_str(), bytes, a.eof && !terminal)
        {
            Ok(queued) => queued,
            Err(e) => return Reply::error(self.stdin_error_text(&e, &id)),
        };
        // A terminal's end of input is its EOF character, queued after.
        if a.eof
            && terminal
            && let Err(e) = self.registry.close_stdin(id.as_str())
        {
            return Reply::error(self.stdin_error_text(&e, &id));
        }
        // `until` and the quiet rule look at what this write makes the
        // command print, even if it arrives before the wait begins.
        let mut options = WaitOptions::new(a.yield_for).from(from);
        if let Some(pattern) = &a.until {
            options = options.until(pattern.as_str());
        }
        if let Some(quiet) = a.quiet {
            options = options.quiet(quiet).prompt(crate::prompt::REPL_PROMPT);
        }
        let waited = match self.waiting(&id, options, a.yield_for, context).await {
            Ok(Waited::Done(w)) => *w,
            Ok(Waited::Cancelled) => return Reply::error("cancelled by the client"),
            Err(e) => return self.session_error(&e, id.as_str()),
        };
        self.reply(&id, waited, a.until.is_some(), stdin_outcome(queued))
    }

    async fn wait(&self, a: WaitArgs, context: &CallContext) -> Reply {
        let id = match self.registry.resolve(&a.id) {
            Ok(id) => id,
            Err(e) => return self.session_error(&e, &a.id),
        };
        let from = a.offset.unwrap_or_else(|| self.view(&id).matched);
        let mut options = WaitOptions::new(a.timeout).stream(a.stream);
        if let Some(pattern) = &a.until {
            options = options.until(pattern.as_str()).from(from).through_exit();
        }
        let waited = match self.waiting(&id, options, a.timeout, context).await {
            Ok(Waited::Done(w)) => *w,
            Ok(Waited::Cancelled) => return Reply::error("cancelled by the client"),
            Err(e) => return self.session_error(&e, id.as_str()),
        };
        let still_running = waited.outcome == WaitOutcome::StillRunning;
        let no_match = !matches!(waited.outcome, WaitOutcome::Matched { .. });
        let mut reply_report = self.report(&id, &waited, a.until.is_some());
        let earlier = match a.until.as_deref().filter(|_| no_match) {
            Some(pattern) => self.earlier_match(&id, a.stream, pattern, from).await,
            None => None,
        };
        wait_hints(
            &mut reply_report,
            &a,
            from,
            still_running,
            earlier,
            self.names(),
        );
        let text = reply_report.text();
        Reply::ok(&reply_report, text)
    }

    async fn kill(&self, a: KillArgs) -> Reply {
        let id = match self.registry.resolve(&a.id) {
            Ok(id) => id,
            Err(e) => return self.session_error(&e, &a.id),
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
                     tracked; call {} again",
                    survivors.len(),
                    list.join("; "),
                    self.tool("kill")
                ));
            }
            Ok(Err(e)) => return self.session_error(&e, id.as_str()),
            Err(_) => {
                return Reply::error(format!(
                    "kill of {id} has not finished after {} s; it goes on in the background. \
                     Call {} again or {} to see where it stands",
                    seconds(a.grace + KILL_MARGIN),
                    self.tool("kill"),
                    self.tool("list")
                ));
            }
        };
        let info = match self.registry.info(id.as_str()) {
            Ok(info) => info,
            Err(e) => return self.session_error(&e, id.as_str()),
        };
        let waited = WaitResult {
            outcome: WaitOutcome::Exited,
            info,
        };
        let mut report = self.report(&id, &waited, false);
        report.already_exited = Some(outcome.already_exited);
        report.descendants_killed = Some(outcome.descendants_killed);
        let text = report.text();
        Reply::ok(&report, text)
    }

    fn list(&self) -> Reply {
        let views = lock(&self.views);
        let sessions = self
            .registry
            .list()
            .iter()
            .map(|info| {
                let shown = views.get(info.id.as_str()).map_or(0, |v| v.shown);
                let end = ending(info);
                Listed {
                    id: info.id.to_string(),
                    status: end.status,
                    exit_code: end.exit_code,
                    command: truncate(&info.command, 200),
                    signal: end.signal,
                    duration_ms: info.uptime.as_millis() as u64,
                    output_bytes: info.output_bytes,
                    unread_bytes: info.output_bytes.saturating_sub(shown),
                    descendants_alive: info.descendants.len(),
                    stdin_open: info.stdin_open,
                    limits: LimitsRecord::of(&info.limits),
                    limit_hit: limit_hit(info),
                }
            })
            .collect();
        let report = ListReport { sessions };
        let text = report.text();
        Reply::ok(&report, text)
    }

    /// Runs a registry wait; reports progress every [`PROGRESS_EVERY`]
    /// when the client asked; gives up when the client cancels.
    async fn waiting(
        &self,
        id: &SessionId,
        options: WaitOptions,
        bound: Duration,
        context: &CallContext,
    ) -> Result<Waited, Error> {
        let started = Instant::now();
        let wait = self.registry.wait(id.as_str(), options);
        tokio::pin!(wait);
        let mut ticks = tokio::time::interval_at((started + PROGRESS_EVERY).into(), PROGRESS_EVERY);
        loop {
            tokio::select! {
                waited = &mut wait => return waited.map(|w| Waited::Done(Box::new(w))),
                _ = context.cancel.cancelled() => return Ok(Waited::Cancelled),
                _ = ticks.tick(), if context.progress.is_some() => {
                    if let (Some(sink), Ok(info)) = (&context.progress, self.registry.info(id.as_str())) {
                        sink(progress_of(&info, started.elapsed(), bound));
                    }
                }
            }
        }
    }

    /// The reply to a call that waited.
    fn reply(
        &self,
        id: &SessionId,
        waited: WaitResult,
        had_until: bool,
        stdin_error: Option<String>,
    ) -> Reply {
        let mut report = self.report(id, &waited, had_until);
        if let Some(e) = stdin_error {
            report.stdin_error = Some(e);
        }
        let text = report.text();
        Reply::ok(&report, text)
    }

    /// The result fields every session-bearing reply shares, with the
    /// output from the view's cursor on; moves the cursor past what it
    /// shows, and the match cursor past a match.
    fn report(&self, id: &SessionId, waited: &WaitResult, had_until: bool) -> SessionReport {
        let info = &waited.info;
        let end = ending(info);
        let view = self.view(id);
        let budget = self.config.budget;
        let mut report = SessionReport {
            status: end.status,
            exit_code: end.exit_code,
            id: id.to_string(),
            signal: end.signal,
            note: end.note,
            duration_ms: info.uptime.as_millis() as u64,
            ..SessionReport::default()
        };
        let read_tool = self.tool("read");
        let stderr = info
            .stderr_bytes
            .is_some()
            .then(|| self.source(id, Stream::Stderr));
        let cursors = Cursors {
            shown: view.shown,
            stderr_shown: view.stderr_shown,
        };
        let after = output_into(
            &mut report,
            &self.source(id, Stream::Output),
            stderr.as_ref(),
            &read_tool,
            cursors,
            budget,
        );
        self.move_cursor(id, Stream::Output, after.shown);
        if stderr.is_some() {
            self.move_cursor(id, Stream::Stderr, after.stderr_shown);
        }
        match waited.outcome {
            WaitOutcome::Matched { start, end } => {
                lock(&self.views).entry(id.to_string()).or_default().matched = end;
                let text = self
                    .registry
                    .read(id.as_str(), start, (end - start) as usize)
                    .map(|r| render(&r.data))
                    .unwrap_or_default();
                report.matched = Some(true);
                report.matched_at = Some(Span { text, start, end });
            }
            _ if had_until => report.matched = Some(false),
            _ => {}
        }
        if matches!(waited.outcome, WaitOutcome::Quiet { .. }) {
            report.quiet = Some(true);
        }
        report.descendants_alive = info
            .descendants
            .iter()
            .map(|d| Alive {
                pid: d.pid,
                command: truncate(&d.command, 200),
            })
            .collect();
        report.stdin_open = info.stdin_open;
        report.limits = LimitsRecord::of(&info.limits);
        report.limit_hit = limit_hit(info);
        report.limits_escaped = info
            .limits_escaped
            .iter()
            .map(|e| crate::reply::Escaped {
                pid: e.pid,
                cgroup: e.cgroup.clone(),
                moved_back: e.moved_back > 0,
                times_moved_back: e.moved_back,
            })
            .collect();
        // A full-screen program's stream is cursor moves and redraws: the
        // screen is what can be read.
        if info.pty.is_some()
            && let Ok(screen) = may_wait_long(|| self.registry.screen(id.as_str()))
            && screen.alternate_screen
        {
            report.screen = Some(screen.text());
        }
        report.hint = self.hint(id, info, &report);
        report
    }

    async fn screen(&self, a: ScreenArgs, context: &CallContext) -> Reply {
        let info = match self.registry.info(&a.id) {
            Ok(info) => info,
            Err(e) => return self.session_error(&e, &a.id),
        };
        let id = info.id.clone();
        if info.pty.is_none() {
            return no_screen(id.as_str(), self.names());
        }
        if let Some(size) = a.resize {
            if let Err(e) = may_wait_long(|| self.registry.resize(id.as_str(), size)) {
                return self.session_error(&e, id.as_str());
            }
            // The redraw the resize asks for: output after it, then quiet.
            let options = WaitOptions::new(RESIZE_REDRAW)
                .from(info.output_bytes)
                .quiet(Duration::from_millis(200));
            if let Ok(Waited::Cancelled) = self.waiting(&id, options, RESIZE_REDRAW, context).await
            {
                return Reply::error("cancelled by the client");
            }
        }
        let (screen, info) = match (
            may_wait_long(|| self.registry.screen(id.as_str())),
            self.registry.info(id.as_str()),
        ) {
            (Ok(screen), Ok(info)) => (screen, info),
            (Err(e), _) | (_, Err(e)) => return self.session_error(&e, id.as_str()),
        };
        let report = ScreenReport {
            id: id.to_string(),
            status: ending(&info).status,
            rows: screen.size.rows(),
            cols: screen.size.cols(),
            cursor_row: screen.cursor_row + 1,
            cursor_col: screen.cursor_col + 1,
            alternate_screen: screen.alternate_screen,
            cursor_hidden: screen.cursor_hidden,
            screen: screen.text(),
        };
        let text = report.text();
        Reply::ok(&report, text)
    }

    /// What to do next, from where the session stands.
    fn hint(&self, id: &SessionId, info: &SessionInfo, report: &SessionReport) -> Option<String> {
        let stand = Standing {
            running: info.is_running(),
            stdin_open: info.stdin_open,
            descendants: !info.descendants.is_empty(),
        };
        let tail = if stand.running {
            self.tail_text(id)
        } else {
            String::new()
        };
        session_hint(id.as_str(), stand, &tail, report, self.names())
    }

    /// The end of the output (last 512 bytes), rendered: for prompts.
    fn tail_text(&self, id: &SessionId) -> String {
        let end = self
            .registry
            .info(id.as_str())
            .map_or(0, |i| i.output_bytes);
        self.registry
            .read(id.as_str(), end.saturating_sub(512), 512)
            .map(|r| render(&r.data))
            .unwrap_or_default()
    }

    /// The last match of `pattern` in the [`EARLIER_LOOKBACK`] bytes before
    /// `before`, searched on a blocking thread (a slow regex over 4 MiB
    /// must not hold up the request loop).
    async fn earlier_match(
        &self,
        id: &SessionId,
        stream: Stream,
        pattern: &str,
        before: u64,
    ) -> Option<Span> {
        let regex = until_regex(pattern).ok()?;
        let from = before.saturating_sub(EARLIER_LOOKBACK);
        let registry = Arc::clone(&self.registry);
        let id = id.to_string();
        tokio::task::spawn_blocking(move || {
            let chunk = registry
                .read_stream(&id, stream, from, (before - from) as usize)
                .ok()?;
            last_match(&regex, &chunk.data, chunk.offset)
        })
        .await
        .ok()
        .flatten()
    }

    fn source<'a>(&'a self, id: &'a SessionId, stream: Stream) -> RegistrySource<'a> {
        RegistrySource {
            registry: &self.registry,
            id: id.as_str(),
            stream,
        }
    }

    fn view(&self, id: &SessionId) -> View {
        lock(&self.views)
            .get(id.as_str())
            .copied()
            .unwrap_or_default()
    }

    fn move_cursor(&self, id: &SessionId, stream: Stream, offset: u64) {
        let mut views = lock(&self.views);
        let view = views.entry(id.to_string()).or_default();
        match stream {
            Stream::Output => view.shown = offset,
            Stream::Stderr => view.stderr_shown = offset,
        }
    }
}

/// The hints of a `wait` result: the earlier match of `until` before
/// `from` when nothing matched from there (`earlier`), else, while the
/// session runs on, how to wait longer (after a prompt hint, if any).
pub(crate) fn wait_hints(
    report: &mut SessionReport,
    a: &WaitArgs,
    from: u64,
    still_running: bool,
    earlier: Option<Span>,
    names: &Names,
) {
    let id = report.id.clone();
    if let Some(span) = earlier {
        report.hint = Some(format!(
            "`until` matched nothing from offset {from}, but the same pattern matched earlier \
             output at offset {} (already matched or shown before); pass \"offset\": {} to \
             match from there{}",
            span.start,
            span.start,
            if still_running {
                format!(", or call {} again for a new line", names.of("wait"))
            } else {
                String::new()
            }
        ));
        report.earlier_match = Some(span);
    } else if still_running {
        let mut again = format!("\"id\": \"{id}\", \"timeout_s\": {MAX_WAIT_S}");
        if let Some(pattern) = &a.until {
            again.push_str(&format!(
                ", \"until\": {}",
                serde_json::Value::from(pattern.as_str())
            ));
        }
        if a.stream == Stream::Stderr {
            again.push_str(", \"stream\": \"stderr\"");
        }
        let base = format!(
            "still running after {} s{}; to wait longer call {} {{{again}}} again, in a loop \
             while the status is running (one call waits at most {MAX_WAIT_S} s, under clients' \
             request timeouts); or {} the output so far, or {} it",
            seconds(a.timeout),
            if a.until.is_some() {
                " and no output matched `until`"
            } else {
                ""
            },
            names.of("wait"),
            names.of("read"),
            names.of("kill")
        );
        report.hint = Some(match report.hint.take() {
            Some(prompt) if prompt.starts_with("it seems") => format!("{base}. {prompt}"),
            _ => base,
        });
    }
}

/// The last match of `regex` in `data` (which starts at `offset`).
pub(crate) fn last_match(regex: &Regex, data: &[u8], offset: u64) -> Option<Span> {
    let m = regex.find_iter(data).last()?;
    Some(Span {
        text: render(m.as_bytes()),
        start: offset + m.start() as u64,
        end: offset + m.end() as u64,
    })
}

/// Where a session stands, as its hint needs it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Standing {
    /// The main process runs.
    pub running: bool,
    /// Its stdin takes input.
    pub stdin_open: bool,
    /// Processes it started still run.
    pub descendants: bool,
}

/// What to do next, from where session `id` stands (`tail`: the end of
/// its output, rendered, while it runs: for prompts).
pub(crate) fn session_hint(
    id: &str,
    stand: Standing,
    tail: &str,
    report: &SessionReport,
    names: &Names,
) -> Option<String> {
    let shown = format!(
        "{}{}",
        report.output,
        report.stderr.as_deref().unwrap_or_default()
    );
    if editor_refused(&shown) {
        return Some(
            "the command wanted an editor, and commands here have none (EDITOR, VISUAL and \
             GIT_EDITOR fail on purpose): pass the text on the command line, e.g. git commit \
             -m \"message\", git merge --no-edit, git rebase with GIT_SEQUENCE_EDITOR=true"
                .to_owned(),
        );
    }
    if stand.running {
        if let Some(prompt) = waiting_prompt(tail) {
            let how = if stand.stdin_open {
                format!(
                    "answer with {} {{\"id\": \"{id}\", \"data\": \"...\", \"submit\": true}}",
                    names.of("write")
                )
            } else {
                format!(
                    "its stdin is /dev/null, so nobody can answer: {} it and {} it \
                     non-interactively (-y, --yes, --non-interactive, a token in env), or \
                     with keep_stdin_open to answer with {}",
                    names.of("kill"),
                    names.of("run"),
                    names.of("write")
                )
            };
            return Some(format!(
                "it seems to wait for input (its output ends with the prompt {prompt:?}; \
                 commands here have no terminal): {how}"
            ));
        }
        return Some(format!(
            "still running: {} {{\"id\": \"{id}\", \"timeout_s\": {MAX_WAIT_S}}} waits for \
             it to finish (add \"until\": a regex to stop at a line; one call waits at most \
             {MAX_WAIT_S} s: call it again while the status is running), {} for new output, \
             {}{} to stop it",
            names.of("wait"),
            names.of("read"),
            if stand.stdin_open {
                format!("{} for input, ", names.of("write"))
            } else {
                String::new()
            },
            names.of("kill")
        ));
    }
    if stand.descendants {
        return Some(format!(
            "the command exited but left processes running (descendants_alive); they stay \
             contained in {id}: {} with until for their output, {} shows it, {} \
             {{\"id\": \"{id}\"}} ends them, and they die when this server exits",
            names.of("wait"),
            names.of("read"),
            names.of("kill")
        ));
    }
    None
}

/// The error for `screen` of a session without a terminal.
pub(crate) fn no_screen(id: &str, names: &Names) -> Reply {
    Reply::error(format!(
        "{id} runs without a terminal, so it has no screen; its output is all there is ({}). \
         Start programs that draw on a terminal with {} {{\"pty\": true, ...}}",
        names.of("read"),
        names.of("run")
    ))
}

/// The error for `stream: "stderr"` of a session that merges it.
pub(crate) fn merged_stderr(id: &str, read_tool: &str) -> Reply {
    Reply::error(format!(
        "{id} merges stderr into its output ({read_tool} it without `stream`); start a command \
         with separate_stderr: true to read stderr apart"
    ))
}

/// The error for a `read` offset past the stream's end.
pub(crate) fn past_end(offset: u64, id: &str, end: u64) -> Reply {
    Reply::error(format!(
        "offset {offset} is past the end of the output of {id} ({end} bytes so far); leave \
         `offset` out to continue where you left off"
    ))
}

/// What `read` shows in its page, `head_lines` and `tail_lines` modes
/// (`grep` is [`grep_shown`]); `cursor`: where a page without `offset`
/// starts.
pub(crate) fn lines_or_page(
    source: &impl Source,
    call: &ReadCall<'_>,
    a: &ReadArgs,
    cursor: u64,
    budget: usize,
) -> Result<Shown, Error> {
    match &a.mode {
        ReadMode::Page { raw } => page(
            source,
            a.offset.unwrap_or(cursor),
            a.max_bytes.unwrap_or(budget),
            budget,
            *raw,
        ),
        ReadMode::Head(n) => head(source, call, a.offset.unwrap_or(0), *n, budget),
        ReadMode::Tail(n) => tail(source, *n, budget),
        ReadMode::Grep { .. } => unreachable!("grep is searched apart"),
    }
}

/// What `read` shows of a grep's findings (their counts go into
/// `report`); `ended_at`: the stream's end once it has ended.
pub(crate) fn grep_shown(
    report: &mut ReadReport,
    found: Found,
    query: &Query<'_>,
    call: &ReadCall<'_>,
    pattern: &str,
    grep_time: Duration,
    ended_at: Option<u64>,
) -> Shown {
    crate::grep::report(report, &found, query, call, pattern, grep_time);
    Shown {
        eof: ended_at == Some(found.end),
        output: found.text,
        offset: found.offset,
        next_offset: found.end,
        end_offset: found.stream_end,
        dropped: found.dropped,
        gap: None,
        encoding: None,
        lines: None,
        note: report.note.take(),
    }
}

/// The `read` result: `report` (status, id, stream, grep counts) with
/// what was shown.
pub(crate) fn read_reply(mut report: ReadReport, shown: Shown) -> Reply {
    report.output = shown.output;
    report.offset = shown.offset;
    report.next_offset = shown.next_offset;
    report.end_offset = shown.end_offset;
    report.eof = shown.eof;
    report.encoding = shown.encoding;
    report.lines = shown.lines;
    if report.match_count.is_none() {
        report.dropped = shown.dropped;
    }
    report.note = match (shown.note, shown.gap.as_ref()) {
        (note, None) => note,
        (note, Some(gap)) => {
            let gap = GapReport::from(gap);
            let sentence = gap.sentence();
            report.gap = Some(gap);
            Some(format!(
                "{sentence}{}",
                note.map(|n| format!("; {n}")).unwrap_or_default()
            ))
        }
    };
    let text = report.text();
    Reply::ok(&report, text)
}

/// Where the output shown so far ends, per stream, for a session.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cursors {
    /// The main output.
    pub shown: u64,
    /// Stderr apart.
    pub stderr_shown: u64,
}

/// Puts the output from `cursors` on (stderr apart when `stderr` is
/// given, with up to half the budget) into `report`, with the markers
/// over what does not fit; returns where the output shown ends.
pub(crate) fn output_into<S: Source>(
    report: &mut SessionReport,
    output: &S,
    stderr: Option<&S>,
    read_tool: &str,
    cursors: Cursors,
    budget: usize,
) -> Cursors {
    let id = report.id.clone();
    let mut after = cursors;
    // Stderr apart: it gets up to half the budget, the main stream the rest.
    let mut main_budget = budget;
    if let Some(stderr) = stderr {
        let call = ReadCall {
            tool: read_tool,
            id: &id,
            stream: Some("stderr"),
        };
        match excerpt(stderr, &call, cursors.stderr_shown, budget / 2) {
            Ok(shown) => {
                main_budget = budget - shown.text.len().min(budget / 2);
                after.stderr_shown = shown.next_offset;
                report.stderr = Some(shown.text);
                report.stderr_next_offset = Some(shown.next_offset);
                report.stderr_truncated_bytes = Some(shown.omitted);
            }
            Err(e) => report.output_error = Some(e.to_string()),
        }
    }
    let call = ReadCall {
        tool: read_tool,
        id: &id,
        stream: None,
    };
    match excerpt(output, &call, cursors.shown, main_budget.max(1024)) {
        Ok(shown) => {
            after.shown = shown.next_offset;
            report.output = shown.text;
            report.next_offset = shown.next_offset;
            report.truncated_bytes = shown.omitted;
            if shown.dropped > 0 {
                report.dropped_bytes = Some(shown.dropped);
            }
            report.gap = shown.gap.as_ref().map(GapReport::from);
        }
        Err(e) => report.output_error = Some(e.to_string()),
    }
    after
}

/// The regex `until` and `grep` use, as the registry builds it.
/// `limit_hit` as results show it: present (null or a name) for a session
/// with limits, absent otherwise.
fn limit_hit(info: &SessionInfo) -> Option<Option<&'static str>> {
    (!info.limits.is_empty() || info.limit_hit.is_some()).then(|| info.limit_hit.map(|h| h.name()))
}

pub(crate) fn until_regex(pattern: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(pattern)
        .multi_line(true)
        .size_limit(1 << 22)
        .build()
}

/// A progress report from a session's snapshot.
fn progress_of(info: &SessionInfo, elapsed: Duration, bound: Duration) -> Progress {
    let bytes = info.output_bytes + info.stderr_bytes.unwrap_or(0);
    let lines = info.output_lines + info.stderr_lines.unwrap_or(0);
    let state = if info.is_running() {
        "running".to_owned()
    } else {
        format!(
            "{}; {} process(es) it left still run",
            info.state.name(),
            info.descendants.len()
        )
    };
    Progress {
        elapsed: elapsed.as_secs_f64(),
        total: bound.as_secs_f64(),
        message: format!(
            "{} {state} for {:.0} s: {bytes} bytes, {lines} lines of output so far",
            info.id,
            info.uptime.as_secs_f64()
        ),
    }
}

/// How a queued write stands when the call returns; `Some(text)` when it
/// failed or is still going on.
fn stdin_outcome(queued: QueuedWrite) -> Option<String> {
    match queued.now_or_never() {
        Some(Ok(())) => None,
        Some(Err(e)) => Some(e.to_string()),
        None => Some(
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
    stream: Stream,
}

impl Source for RegistrySource<'_> {
    fn read(&self, offset: u64, max: usize) -> Result<ReadResult, Error> {
        self.registry.read_stream(self.id, self.stream, offset, max)
    }
}

impl Terminal {
    /// The reply to arguments that do not check out, naming the tool as
    /// the client calls it.
    pub(crate) fn invalid(&self, tool: &str, e: crate::error::ArgError) -> Reply {
        let ceiling = matches!(
            &e,
            crate::error::ArgError::OutOfRange { name, .. } if *name == "yield_s" || (*name == "timeout_s" && tool == "wait")
        );
        let mut message = format!("{}: {}", self.tool(tool), e.message(self.names()));
        if ceiling {
            // Issue 16: one call waits at most MAX_WAIT_S; longer is a loop.
            message.push_str(&format!(
                " (one call waits at most {} s, under clients' request timeouts: to wait longer, \
                 call {} {{\"id\": …, \"timeout_s\": {}}} again while the status is running)",
                MAX_WAIT_S,
                self.tool("wait"),
                MAX_WAIT_S
            ));
        }
        Reply::error(message)
    }

    /// The reply to a `run` whose command could not start.
    fn failed_start(&self, e: &Error, cwd: &Path) -> Reply {
        #[derive(serde::Serialize)]
        struct FailedStart {
            status: &'static str,
            error: String,
            cwd: String,
            #[serde(skip_serializing_if = "Option::is_none")]
            hint: Option<String>,
        }
        let hint = match e {
            Error::ProgramNotFound { .. } => {
                Some("check the program name, or use `command` to run it through the shell".into())
            }
            Error::NotExecutable { .. } => {
                Some("the file is not executable; run it with its interpreter".into())
            }
            Error::BadCwd { .. } => Some("give an existing directory as `cwd`".into()),
            Error::TooManySessions { .. } => Some(format!(
                "kill sessions you no longer need (see {}), or wait for one to finish",
                self.tool("list")
            )),
            _ => None,
        };
        let text = format!(
            "failed to start: {e}{}",
            hint.as_ref().map(|h| format!("\n{h}")).unwrap_or_default()
        );
        let body = FailedStart {
            status: "failed_start",
            error: e.to_string(),
            cwd: cwd.display().to_string(),
            hint,
        };
        Reply::error_with(&body, text)
    }

    fn stdin_error_text(&self, e: &Error, id: &SessionId) -> String {
        match e {
            Error::StdinClosed { why, .. } => format!("stdin of {id} is closed: {why}"),
            Error::NoStdin { .. } => format!(
                "{id} has no stdin; start it with keep_stdin_open: true to {} to it",
                self.tool("write")
            ),
            other => other.to_string(),
        }
    }

    /// The reply to an id that names no session, or another registry error.
    fn session_error(&self, e: &Error, id: &str) -> Reply {
        match e {
            Error::UnknownSession { .. } => Reply::error(format!(
                "no session {id:?}: use an id that {} returned ({} shows them all; finished \
                 sessions are kept for 30 minutes)",
                self.tool("run"),
                self.tool("list")
            )),
            other => Reply::error(other.to_string()),
        }
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
