//! Durable sessions through MCP (issue 37): `run` with `durable: true`
//! starts one in the user's holder (`process-tether-durable`); `list`
//! shows the holder's sessions beside this server's; `read`, `write`,
//! `wait`, `kill` and `screen` reach a holder's session when the id (or
//! name) is not one of this server's. So a new server — after the agent
//! restarted — re-adopts what an earlier one started.
//!
//! Every argument works as on this server's own sessions, through the same
//! code: the holder's output is a [`Source`] like the registry's, so
//! pages, `head_lines`, `tail_lines`, `grep`, `stream` and the truncation
//! markers of results are the ones [`read`](crate::read),
//! [`grep`](crate::grep) and [`excerpt`](crate::excerpt) make; waits
//! (`until`, `quiet_s`, `offset`, `stream`) are the registry's, run in
//! the holder. Results keep the tools' output schemas: a durable session
//! is marked in its `note` (and, in `list`, in its `command`), and its
//! `expired` status (killed at its TTL) is reported as `killed` with a
//! note saying why.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tether::registry::{ReadResult, Stream};
use tether_durable::protocol::{MAX_READ, Request};
use tether_durable::{Client, DurableError, DurableInfo, StartRequest, WaitReply};
use tokio_util::sync::CancellationToken;

use crate::arguments::{self, CommandArg, ReadArgs, ReadMode, RunArgs, WaitArgs, WriteArgs};
use crate::excerpt::{ReadCall, Source, read_range};
use crate::grep::{Query, Stop, grep};
use crate::reply::{ReadReport, Reply, ScreenReport, SessionReport, Span};
use crate::screen::render;
use crate::terminal::{
    CallContext, Cursors, EARLIER_LOOKBACK, Standing, Terminal, grep_shown, last_match,
    lines_or_page, merged_stderr, no_screen, output_into, past_end, read_reply, session_hint,
    until_regex, wait_hints,
};

/// What this server has shown of each durable session (as it remembers
/// for its own sessions): where the output shown ends, per stream, so
/// `read` without `offset` pages on and results show what is new; and
/// where the last `until` match ended, where the next `wait` looks.
#[derive(Clone, Copy, Debug, Default)]
struct View {
    shown: u64,
    stderr_shown: u64,
    matched: u64,
}

static VIEWS: Mutex<Option<HashMap<String, View>>> = Mutex::new(None);

fn view(id: &str) -> View {
    let views = VIEWS.lock().unwrap_or_else(|e| e.into_inner());
    views
        .as_ref()
        .and_then(|v| v.get(id).copied())
        .unwrap_or_default()
}

fn set_view(id: &str, view: View) {
    let mut views = VIEWS.lock().unwrap_or_else(|e| e.into_inner());
    views
        .get_or_insert_with(HashMap::new)
        .insert(id.to_owned(), view);
}

/// Runs `work` with a client of the user's holder on a blocking thread
/// (`start`: start the holder if none runs). `Ok(None)`: no holder runs.
async fn with_client<T: Send + 'static>(
    start: bool,
    work: impl FnOnce(&mut Client) -> Result<T, DurableError> + Send + 'static,
) -> Result<Option<T>, DurableError> {
    tokio::task::spawn_blocking(move || {
        let install = tether::Install::from_env();
        let client = if start {
            let exe = std::env::current_exe()?;
            Some(Client::connect_or_start(&install, &exe)?)
        } else {
            Client::connect(&install)?
        };
        match client {
            Some(mut client) => work(&mut client).map(Some),
            None => Ok(None),
        }
    })
    .await
    .map_err(|e| DurableError::Protocol(e.to_string()))?
}

/// Runs `work` on the holder's session; its reply, or the error.
async fn on_holder(
    work: impl FnOnce(&mut Client) -> Result<Reply, DurableError> + Send + 'static,
) -> Reply {
    match with_client(false, work).await {
        Ok(Some(reply)) => reply,
        Ok(None) => Reply::error("the durable-session holder is gone"),
        Err(e) => error(&e),
    }
}

/// [`on_holder`] for a call that waits up to `bound`: it reports progress
/// every second when the client asked (as a wait on this server's own
/// sessions does), and returns at once when the client cancels (the
/// holder's wait, bounded, ends by itself; nothing is left behind).
async fn waiting_on_holder(
    context: &CallContext,
    id: &str,
    bound: Duration,
    work: impl FnOnce(&mut Client) -> Result<Reply, DurableError> + Send + 'static,
) -> Reply {
    let started = Instant::now();
    let call = on_holder(work);
    tokio::pin!(call);
    let every = crate::terminal::PROGRESS_EVERY;
    let mut ticks = tokio::time::interval_at((started + every).into(), every);
    loop {
        tokio::select! {
            reply = &mut call => return reply,
            _ = context.cancel.cancelled() => return Reply::error("cancelled by the client"),
            _ = ticks.tick(), if context.progress.is_some() => {
                if let Some(sink) = &context.progress {
                    let elapsed = started.elapsed();
                    sink(crate::terminal::Progress {
                        elapsed: elapsed.as_secs_f64(),
                        total: bound.as_secs_f64(),
                        message: format!(
                            "{id} (durable) waited {:.0} s of at most {:.0} s",
                            elapsed.as_secs_f64(),
                            bound.as_secs_f64()
                        ),
                    });
                }
            }
        }
    }
}

/// One stream of a durable session, read through the holder: what the
/// tools' rendering reads, as it reads the registry's.
struct HolderSource<'a, 'c> {
    client: &'a RefCell<&'c mut Client>,
    id: &'a str,
    stream: Option<&'static str>,
}

impl Source for HolderSource<'_, '_> {
    fn read(&self, offset: u64, max: usize) -> Result<ReadResult, tether::Error> {
        let (data, reply) = self
            .client
            .borrow_mut()
            .read_stream(self.id, self.stream, offset, max.min(MAX_READ))
            .map_err(|e| tether::Error::Io(std::io::Error::other(e.to_string())))?;
        Ok(ReadResult {
            data,
            offset: reply.offset,
            next_offset: reply.next_offset,
            dropped: reply.dropped,
            end_offset: reply.end_offset,
            eof: reply.eof,
            gap: reply.gap.as_ref().map(tether::output::Gap::from),
        })
    }
}

fn stream_name(stream: Stream) -> Option<&'static str> {
    (stream == Stream::Stderr).then_some("stderr")
}

fn status(info_status: &str) -> &'static str {
    match info_status {
        "running" => "running",
        "exited" => "exited",
        "timed_out" => "timed_out",
        "lost" => "lost",
        // `expired` (killed at its TTL) and `killed`.
        _ => "killed",
    }
}

fn note(info: &DurableInfo) -> String {
    let name = info
        .name
        .as_deref()
        .map(|n| format!(" {n:?}"))
        .unwrap_or_default();
    if info.status == "expired" {
        format!(
            "durable session{name}: killed at its TTL ({} s)",
            info.ttl_s
        )
    } else if info.status == "running" {
        format!(
            "durable session{name}: outlives this server; killed at its TTL in {} s (`tether \
             extend` moves it)",
            info.ttl_left_s
        )
    } else {
        format!("durable session{name}")
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn error(e: &DurableError) -> Reply {
    Reply::error(e.to_string())
}

/// How results name tools and how much output they show.
#[derive(Clone)]
struct Shape {
    read_tool: String,
    budget: usize,
    names: crate::names::Names,
}

impl Shape {
    fn of(terminal: &Terminal) -> Shape {
        Shape {
            read_tool: terminal.names().of("read"),
            budget: terminal.config().budget,
            names: terminal.names().clone(),
        }
    }
}

/// What a wait found, for the result.
#[derive(Default)]
struct Outcome {
    /// The stream it waited on.
    stream: Option<&'static str>,
    /// Where `until` matched.
    matched: Option<(u64, u64)>,
    /// `until` was given.
    had_until: bool,
    /// The output went quiet.
    quiet: bool,
}

impl Outcome {
    fn of(waited: &WaitReply, stream: Option<&'static str>, had_until: bool) -> Outcome {
        Outcome {
            stream,
            matched: waited.matched.filter(|_| waited.outcome == "matched"),
            had_until,
            quiet: waited.outcome == "quiet",
        }
    }
}

/// The result of `run`, `write`, `wait` and `kill` for session `id`, in
/// their schema, with the output from this server's cursors on (the
/// cursors move past it, and the match cursor past a match).
fn session_report(
    c: &mut Client,
    id: &str,
    shape: &Shape,
    outcome: &Outcome,
) -> Result<SessionReport, DurableError> {
    let info = c.info(id)?;
    let id = info.id.as_str();
    let mut report = SessionReport {
        status: status(&info.status),
        exit_code: info.exit_code,
        id: info.id.clone(),
        note: Some(note(&info)),
        duration_ms: now_ms().saturating_sub(info.started_at_ms),
        stdin_open: info.stdin_open,
        ..SessionReport::default()
    };
    let mut seen = view(id);
    let client = RefCell::new(&mut *c);
    let source = |stream| HolderSource {
        client: &client,
        id,
        stream,
    };
    let stderr = info.stderr_bytes.is_some().then(|| source(Some("stderr")));
    let after = output_into(
        &mut report,
        &source(None),
        stderr.as_ref(),
        &shape.read_tool,
        Cursors {
            shown: seen.shown,
            stderr_shown: seen.stderr_shown,
        },
        shape.budget,
    );
    seen.shown = after.shown;
    seen.stderr_shown = after.stderr_shown;
    match outcome.matched {
        Some((start, end)) => {
            seen.matched = end;
            let text = source(outcome.stream)
                .read(start, (end - start) as usize)
                .map(|r| render(&r.data))
                .unwrap_or_default();
            report.matched = Some(true);
            report.matched_at = Some(Span { text, start, end });
        }
        None if outcome.had_until => report.matched = Some(false),
        None => {}
    }
    set_view(id, seen);
    if outcome.quiet {
        report.quiet = Some(true);
    }
    let running = info.status == "running";
    // The end of the output, for a prompt it waits at.
    let tail = if running {
        source(None)
            .read(info.output_bytes.saturating_sub(512), 512)
            .map(|r| render(&r.data))
            .unwrap_or_default()
    } else {
        String::new()
    };
    let stand = Standing {
        running,
        stdin_open: info.stdin_open,
        // The holder does not list them; its kill ends them all the same.
        descendants: false,
    };
    report.hint = session_hint(id, stand, &tail, &report, &shape.names);
    // A full-screen program's stream is cursor moves and redraws: the
    // screen is what can be read.
    if info.pty
        && let Ok(screen) = c.screen(id)
        && screen.alternate_screen
    {
        report.screen = Some(screen_text(&screen.lines));
    }
    Ok(report)
}

fn reply_of(report: &SessionReport) -> Reply {
    Reply::ok(report, report.text())
}

/// `run` with `durable: true`.
pub async fn run(terminal: &Terminal, a: RunArgs) -> Reply {
    let shape = Shape::of(terminal);
    let config = terminal.config();
    let cwd = match &a.cwd {
        Some(dir) => config.cwd.join(dir),
        None => config.cwd.clone(),
    };
    let (argv, shell) = match a.command {
        CommandArg::Shell(script) => match terminal.shell().argv(&script) {
            Some(argv) => (
                argv.iter()
                    .map(|s| s.to_string_lossy().into_owned())
                    .collect(),
                None,
            ),
            None => (Vec::new(), Some(script)),
        },
        CommandArg::Argv(argv) => (argv, None),
    };
    let text = |s: &std::ffi::OsStr| s.to_string_lossy().into_owned();
    let mut env: Vec<(String, String)> =
        config.env.iter().map(|(k, v)| (text(k), text(v))).collect();
    env.extend(a.env.iter().cloned());
    let limits = a.limits.or(config.limits);
    let request = StartRequest {
        argv,
        shell,
        cwd: Some(cwd.to_string_lossy().into_owned()),
        env,
        name: a.name,
        ttl_s: a.ttl_s,
        replace: false,
        purpose: None,
        pty: a.pty.map(|p| (p.rows(), p.cols())),
        memory: limits.memory,
        pids: limits.pids,
        cpu: limits.cpu,
        require_limits: limits.require,
        grace_ms: Some(config.grace.as_millis() as u64),
        owner: Some(tether_durable::own_identity("tether mcp")),
        separate_stderr: a.separate_stderr,
    };
    let stdin = a.stdin;
    // As for any session, `stdin` is written and then closed unless
    // keep_stdin_open (a terminal's input is never closed); without
    // `stdin`, a durable session's input stays open for later writes.
    let close = stdin.is_some() && !a.keep_stdin_open && a.pty.is_none();
    let (until, yield_for) = (a.until, a.yield_for);
    let started = with_client(true, move |client| {
        let info = client.start(request)?;
        // Once it started, the run succeeds: `stdin` is queued (never
        // waited on: a command that does not read must not hold this call),
        // and a refusal is said beside the session, which runs on.
        let stdin_refused = match stdin {
            Some(data) => client
                .queue_write(&info.id, data.as_bytes(), close)
                .err()
                .map(|e| format!("stdin not written: {e}")),
            None => None,
        };
        // Returns at once, unless asked to wait for a line: then up to
        // `yield_s`, as a plain `run` with `until` does.
        let outcome = match until {
            Some(pattern) => {
                let waited = client.wait_with(Request::Wait {
                    session: info.id.clone(),
                    timeout_ms: yield_for.as_millis() as u64,
                    until: Some(pattern),
                    from: 0,
                    stream: None,
                    quiet_ms: None,
                    prompt: None,
                    through_exit: true,
                })?;
                Outcome::of(&waited, None, true)
            }
            None => Outcome::default(),
        };
        let mut report = session_report(client, &info.id, &shape, &outcome)?;
        if let Some(refused) = stdin_refused {
            report.note = Some(match report.note.take() {
                Some(note) => format!("{note}; {refused}"),
                None => refused,
            });
        }
        Ok(report)
    })
    .await;
    match started {
        Ok(Some(report)) => reply_of(&report),
        Ok(None) => Reply::error("the durable-session holder did not answer"),
        Err(e) => error(&e),
    }
}

/// `list`: this server's sessions, then the holder's.
pub async fn with_durable(mut reply: Reply) -> Reply {
    let listed = with_client(false, |client| client.list()).await;
    let rows = match listed {
        Ok(Some(rows)) => rows,
        Ok(None) => return reply,
        Err(e) => {
            reply
                .text
                .push_str(&format!("\n(durable sessions unavailable: {e})"));
            return reply;
        }
    };
    let now = now_ms();
    let Some(sessions) = reply.body["sessions"].as_array_mut() else {
        return reply;
    };
    for info in &rows {
        let command = format!("[{}] {}", note(info), info.command);
        reply.text.push_str(&format!(
            "\n{} {} {}",
            info.id,
            status(&info.status),
            command
        ));
        sessions.push(json!({
            "id": info.id,
            "status": status(&info.status),
            "exit_code": info.exit_code,
            "command": command,
            "signal": Value::Null,
            "duration_ms": now.saturating_sub(info.started_at_ms),
            "output_bytes": info.output_bytes,
            "unread_bytes": info.output_bytes.saturating_sub(view(&info.id).shown),
            "descendants_alive": 0,
            "stdin_open": info.stdin_open,
        }));
    }
    reply
}

/// `read`, `write`, `wait`, `kill`, `screen` of an id this server does not
/// know: the holder's session of that id or name, if there is one.
/// `None`: not a durable session (the tool goes on as usual, and says
/// "no session" itself if nobody knows the id).
pub async fn route(
    terminal: &Terminal,
    tool: &str,
    args: &Map<String, Value>,
    context: &CallContext,
) -> Option<Reply> {
    if !matches!(tool, "read" | "write" | "wait" | "kill" | "screen") {
        return None;
    }
    let id = match args.get("id") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => return None,
    };
    if terminal.knows(&id) {
        return None;
    }
    let lookup = id.clone();
    // A holder of an older build ignores what it does not know (a stream,
    // wait options, the end of input) and leaves out fields this server
    // reads (where output ends, whether stdin is open): only a kill is
    // asked of it; the rest is refused, naming it.
    let needs_current = tool != "kill";
    let found = with_client(false, move |c| {
        let info = c.info(&lookup)?;
        let old = needs_current
            .then(|| c.speaks("this server's durable-session tools").err())
            .flatten();
        Ok((info, old))
    })
    .await;
    let info = match found {
        Ok(Some((_, Some(old)))) => return Some(error(&old)),
        Ok(Some((info, None))) => info,
        // No holder, or it does not know the id either.
        _ => return None,
    };
    let shape = Shape::of(terminal);
    let reply = match tool {
        "read" => match arguments::read(args) {
            Ok(a) => {
                let grep_time = terminal.config().grep_time;
                let cancel = context.cancel.clone();
                on_holder(move |c| read(c, &info.id, &a, &shape, grep_time, &cancel)).await
            }
            Err(e) => terminal.invalid("read", e),
        },
        "write" => match arguments::write(args) {
            Ok(a) => {
                let bound = a.yield_for;
                let id = info.id.clone();
                let cancel = context.cancel.clone();
                waiting_on_holder(context, &id, bound, move |c| {
                    write(c, &info.id, a, &shape, &cancel)
                })
                .await
            }
            Err(e) => terminal.invalid("write", e),
        },
        "wait" => match arguments::wait(args) {
            Ok(a) => {
                let bound = a.timeout;
                let id = info.id.clone();
                let cancel = context.cancel.clone();
                waiting_on_holder(context, &id, bound, move |c| {
                    wait(c, &info.id, a, &shape, &cancel)
                })
                .await
            }
            Err(e) => terminal.invalid("wait", e),
        },
        "kill" => match arguments::kill(args) {
            Ok(a) => on_holder(move |c| kill(c, &info.id, a.grace, &shape)).await,
            Err(e) => terminal.invalid("kill", e),
        },
        _ => match arguments::screen(args) {
            Ok(_) if !info.pty => no_screen(&info.id, terminal.names()),
            Ok(a) => screen(info, a.resize).await,
            Err(e) => terminal.invalid("screen", e),
        },
    };
    Some(reply)
}

/// `read`, as [`Terminal`]'s: the same modes and result, on the holder's
/// bytes (a grep runs here, on this blocking thread, for at most
/// `--grep-time-s`, and stops when the client cancels).
fn read(
    c: &mut Client,
    id: &str,
    a: &ReadArgs,
    shape: &Shape,
    grep_time: Duration,
    cancel: &CancellationToken,
) -> Result<Reply, DurableError> {
    let info = c.info(id)?;
    let read_tool = shape.read_tool.as_str();
    let stream = stream_name(a.stream);
    let end = match stream {
        Some(_) => match info.stderr_bytes {
            Some(end) => end,
            None => return Ok(merged_stderr(id, read_tool)),
        },
        None => info.output_bytes,
    };
    if let Some(offset) = a.offset
        && offset > end
    {
        return Ok(past_end(offset, id, end));
    }
    let mut seen = view(id);
    let client = RefCell::new(&mut *c);
    let source = HolderSource {
        client: &client,
        id,
        stream,
    };
    let call = ReadCall {
        tool: read_tool,
        id,
        stream,
    };
    let mut report = ReadReport {
        status: status(&info.status),
        id: id.to_owned(),
        stream,
        note: None,
        ..ReadReport::default()
    };
    let budget = shape.budget;
    let shown = match &a.mode {
        ReadMode::Grep {
            pattern,
            context: lines_around,
            max_matches,
            first_line,
        } => {
            let regex = match until_regex(pattern) {
                Ok(regex) => regex,
                Err(e) => return Ok(Reply::error(format!("{read_tool}: `grep` {e}"))),
            };
            let query = Query {
                regex: &regex,
                from: a.offset.unwrap_or(0),
                first_line: *first_line,
                context: *lines_around,
                max_matches: *max_matches,
                budget,
            };
            let deadline = Instant::now() + grep_time;
            let stop = || {
                if cancel.is_cancelled() {
                    Some(Stop::Cancelled)
                } else if Instant::now() >= deadline {
                    Some(Stop::TimeUp)
                } else {
                    None
                }
            };
            grep(&source, &query, &stop).and_then(|found| {
                // Whether the stream has ended where the search did.
                let ended = source.read(found.end, 0)?.eof;
                Ok(grep_shown(
                    &mut report,
                    found,
                    &query,
                    &call,
                    pattern,
                    grep_time,
                    ended.then_some(end),
                ))
            })
        }
        _ => {
            let seen_from = match stream {
                Some(_) => seen.stderr_shown,
                None => seen.shown,
            };
            let shown = lines_or_page(&source, &call, a, seen_from, budget);
            if let (ReadMode::Page { .. }, Ok(shown)) = (&a.mode, &shown) {
                match stream {
                    Some(_) => seen.stderr_shown = shown.next_offset,
                    None => seen.shown = shown.next_offset,
                }
                set_view(id, seen);
            }
            shown
        }
    };
    let mut reply = match shown {
        Ok(shown) => read_reply(report, shown),
        Err(e) => Reply::error(e.to_string()),
    };
    // Which session this is, as every durable result says.
    if !reply.is_error {
        let durable = note(&info);
        reply.body["note"] = match reply.body["note"].as_str() {
            Some(n) => json!(format!("{durable}; {n}")),
            None => json!(durable),
        };
        reply.text.push_str(&durable);
        reply.text.push('\n');
    }
    Ok(reply)
}

/// `write`, as [`Terminal`]'s: the bytes (then the keys, then Enter), the
/// end of input with `eof`, and a wait of up to `yield_s` for `until` or
/// for the output to go quiet (`quiet_s`) — both judged on what arrived
/// after the write began.
fn write(
    c: &mut Client,
    id: &str,
    a: WriteArgs,
    shape: &Shape,
    cancel: &CancellationToken,
) -> Result<Reply, DurableError> {
    let info = c.info(id)?;
    if !info.stdin_open {
        return Ok(Reply::error(if info.status == "running" {
            format!("{id} takes no input: its stdin is closed (eof was sent)")
        } else {
            format!(
                "{id} has ended (status {}); nothing reads its stdin any more",
                status(&info.status)
            )
        }));
    }
    if !a.keys.is_empty() && !info.pty {
        // Refused before anything is written, as for any session.
        return Ok(Reply::error(format!(
            "{id} runs on pipes, not a terminal: `keys` are for sessions started with pty"
        )));
    }
    let from = info.output_bytes;
    if a.keys.is_empty() {
        // Queued, as on this server's own sessions: a command slow to read
        // (or not reading) never holds the call; the wait below sees what
        // it answers.
        let mut bytes = a.data.as_bytes().to_vec();
        if a.submit {
            bytes.extend_from_slice(if info.pty { b"\r" } else { b"\n" });
        }
        // With `eof`: stdin closed after them (a terminal's EOF character
        // after them on a PTY).
        if !bytes.is_empty() || a.eof {
            c.queue_write(id, &bytes, a.eof)?;
        }
    } else {
        write_with_keys(c, id, &a, info.pty)?;
    }
    let waited = c.wait_with(Request::Wait {
        session: id.to_owned(),
        timeout_ms: a.yield_for.as_millis() as u64,
        until: a.until.clone(),
        from,
        stream: None,
        quiet_ms: a.quiet.map(|q| q.as_millis() as u64),
        prompt: a.quiet.map(|_| crate::prompt::REPL_PROMPT.to_owned()),
        through_exit: false,
    })?;
    if cancel.is_cancelled() {
        // Nobody sees this result: the cursors stay where they were.
        return Ok(Reply::error("cancelled by the client"));
    }
    let outcome = Outcome::of(&waited, None, a.until.is_some());
    Ok(reply_of(&session_report(c, id, shape, &outcome)?))
}

/// A `write` with `keys` (a terminal's): data, keys and Enter written in
/// that order, each once the one before is in.
fn write_with_keys(c: &mut Client, id: &str, a: &WriteArgs, pty: bool) -> Result<(), DurableError> {
    if !a.data.is_empty() {
        c.write(id, a.data.as_bytes())?;
    }
    c.call::<Value>(&Request::Keys {
        session: id.to_owned(),
        keys: a.keys.clone(),
    })?;
    if a.submit {
        // The Enter key on a terminal (a program in raw mode waits for
        // CR, not LF); a newline on a pipe.
        c.write(id, if pty { b"\r" } else { b"\n" })?;
    }
    if a.eof {
        c.close_stdin(id)?;
    }
    Ok(())
}

/// `wait`, as [`Terminal`]'s: up to `timeout_s` for the exit, or for
/// `until` on `stream` from `offset` (default: after the last match).
fn wait(
    c: &mut Client,
    id: &str,
    a: WaitArgs,
    shape: &Shape,
    cancel: &CancellationToken,
) -> Result<Reply, DurableError> {
    let stream = stream_name(a.stream);
    let from = a.offset.unwrap_or_else(|| view(id).matched);
    let waited = c.wait_with(Request::Wait {
        session: id.to_owned(),
        timeout_ms: a.timeout.as_millis() as u64,
        until: a.until.clone(),
        from,
        stream: stream.map(str::to_owned),
        quiet_ms: None,
        prompt: None,
        through_exit: a.until.is_some(),
    })?;
    if cancel.is_cancelled() {
        return Ok(Reply::error("cancelled by the client"));
    }
    let outcome = Outcome::of(&waited, stream, a.until.is_some());
    let mut report = session_report(c, id, shape, &outcome)?;
    // Where `until` matched before `from`, when it matched nothing from
    // there (the last EARLIER_LOOKBACK bytes before it).
    let earlier = match a.until.as_deref().filter(|_| outcome.matched.is_none()) {
        Some(pattern) => {
            let start = from.saturating_sub(EARLIER_LOOKBACK);
            let client = RefCell::new(&mut *c);
            let source = HolderSource {
                client: &client,
                id,
                stream,
            };
            match (until_regex(pattern), read_range(&source, start, from)) {
                (Ok(regex), Ok((data, _))) => last_match(&regex, &data, start),
                _ => None,
            }
        }
        None => None,
    };
    let still_running = waited.outcome == "timeout";
    wait_hints(&mut report, &a, from, still_running, earlier, &shape.names);
    Ok(reply_of(&report))
}

fn kill(c: &mut Client, id: &str, grace: Duration, shape: &Shape) -> Result<Reply, DurableError> {
    let killed = c.kill(id, Some(grace))?;
    let mut report = session_report(c, id, shape, &Outcome::default())?;
    report.already_exited = Some(killed.already_exited);
    report.descendants_killed = Some(killed.descendants_killed);
    Ok(reply_of(&report))
}

/// A screen's rows as results show them: trailing blank rows left out.
fn screen_text(lines: &[String]) -> String {
    let used = lines
        .iter()
        .rposition(|l| !l.is_empty())
        .map_or(0, |i| i + 1);
    lines[..used].join("\n")
}

/// `screen`, as [`Terminal`]'s: with a size, resize first and give the
/// program up to 2 s to redraw (output after the resize, then 200 ms of
/// quiet).
async fn screen(info: DurableInfo, resize: Option<tether::terminal::PtySize>) -> Reply {
    let id = info.id.clone();
    let got = with_client(false, move |c| {
        if let Some(size) = resize {
            let from = c.info(&id)?.output_bytes;
            c.resize(&id, size.rows(), size.cols())?;
            c.wait_with(Request::Wait {
                session: id.clone(),
                timeout_ms: 2000,
                until: None,
                from,
                stream: None,
                quiet_ms: Some(200),
                prompt: None,
                through_exit: false,
            })?;
        }
        Ok((c.screen(&id)?, c.info(&id)?))
    })
    .await;
    match got {
        Ok(Some((screen, info))) => {
            let report = ScreenReport {
                id: info.id.clone(),
                status: status(&info.status),
                rows: screen.rows,
                cols: screen.cols,
                cursor_row: screen.cursor_row + 1,
                cursor_col: screen.cursor_col + 1,
                alternate_screen: screen.alternate_screen,
                cursor_hidden: screen.cursor_hidden,
                screen: screen_text(&screen.lines),
            };
            Reply::ok(&report, report.text())
        }
        Ok(None) => Reply::error("the durable-session holder is gone"),
        Err(e) => error(&e),
    }
}
