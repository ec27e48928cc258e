//! Durable sessions through MCP (issue 37): `run` with `durable: true`
//! starts one in the user's holder (`process-tether-durable`); `list`
//! shows the holder's sessions beside this server's; `read`, `write`,
//! `wait`, `kill` and `screen` reach a holder's session when the id (or
//! name) is not one of this server's. So a new server — after the agent
//! restarted — re-adopts what an earlier one started.
//!
//! Results keep the tools' output schemas: a durable session is marked in
//! its `note` (and, in `list`, in its `command`), and its `expired` status
//! (killed at its TTL) is reported as `killed` with a note saying why.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tether_durable::{Client, DurableError, DurableInfo, StartRequest};

use crate::arguments::{self, CommandArg, RunArgs};
use crate::reply::Reply;
use crate::terminal::Terminal;
use tether::registry::Stream;

/// Most bytes one `read` of a durable session returns.
const PAGE: usize = 64 << 10;

/// Where the last output shown of each durable session ended, so `read`
/// without `offset` pages on, as for this server's own sessions.
static CURSORS: Mutex<Option<HashMap<String, u64>>> = Mutex::new(None);

fn cursor(id: &str) -> u64 {
    let cursors = CURSORS.lock().unwrap_or_else(|e| e.into_inner());
    cursors
        .as_ref()
        .and_then(|c| c.get(id).copied())
        .unwrap_or(0)
}

fn set_cursor(id: &str, offset: u64) {
    let mut cursors = CURSORS.lock().unwrap_or_else(|e| e.into_inner());
    cursors
        .get_or_insert_with(HashMap::new)
        .insert(id.to_owned(), offset);
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

/// A session result (the `run`/`wait`/`write`/`kill` shape) for `info`.
fn session_body(info: &DurableInfo, output: String, next_offset: u64) -> Value {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    json!({
        "status": status(&info.status),
        "exit_code": info.exit_code,
        "output": output,
        "id": info.id,
        "signal": Value::Null,
        "note": note(info),
        "duration_ms": now.saturating_sub(info.started_at_ms),
        "next_offset": next_offset,
    })
}

fn text_of(body: &Value) -> String {
    let mut text = format!(
        "[{}] {}: {}",
        body["status"].as_str().unwrap_or(""),
        body["id"].as_str().unwrap_or(""),
        body["note"].as_str().unwrap_or("")
    );
    if let Some(output) = body["output"].as_str().filter(|o| !o.is_empty()) {
        text.push('\n');
        text.push_str(output);
    }
    text
}

fn ok(body: Value) -> Reply {
    let text = text_of(&body);
    Reply {
        body,
        text,
        is_error: false,
    }
}

fn error(e: &DurableError) -> Reply {
    Reply::error(e.to_string())
}

/// `run` with `durable: true`.
pub async fn run(terminal: &Terminal, a: RunArgs) -> Reply {
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
    };
    let stdin = a.stdin;
    let started = with_client(true, move |client| {
        let info = client.start(request)?;
        if let Some(data) = stdin {
            client.write(&info.id, data.as_bytes())?;
        }
        Ok(info)
    })
    .await;
    match started {
        Ok(Some(info)) => ok(session_body(&info, String::new(), 0)),
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
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
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
            "unread_bytes": info.output_bytes.saturating_sub(cursor(&info.id)),
            "descendants_alive": 0,
            "stdin_open": info.status == "running",
        }));
    }
    reply
}

/// `read`, `write`, `wait`, `kill`, `screen` of an id this server does not
/// know: the holder's session of that id or name, if there is one.
/// `None`: not a durable session (the tool goes on as usual, and says
/// "no session" itself if nobody knows the id).
pub async fn route(terminal: &Terminal, tool: &str, args: &Map<String, Value>) -> Option<Reply> {
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
    let info = match with_client(false, move |c| c.info(&lookup)).await {
        Ok(Some(info)) => info,
        // No holder, or it does not know the id either.
        _ => return None,
    };
    let reply = match tool {
        "read" => match arguments::read(args) {
            Ok(a) if !matches!(a.mode, arguments::ReadMode::Page { .. }) => {
                unsupported(&info, "read", "tail_lines, head_lines and grep")
            }
            Ok(a) if a.stream != Stream::Output => unsupported(&info, "read", "stream"),
            Ok(a) => read(info, a.offset, a.max_bytes).await,
            Err(e) => Reply::error(e.to_string()),
        },
        "write" => match arguments::write(args) {
            Ok(a) if a.eof => unsupported(&info, "write", "eof (its stdin stays open)"),
            Ok(_) if args.contains_key("quiet_s") => unsupported(&info, "write", "quiet_s"),
            Ok(a) => write(info, a).await,
            Err(e) => Reply::error(e.to_string()),
        },
        "wait" => match arguments::wait(args) {
            Ok(a) if a.offset.is_some() || a.stream != Stream::Output => {
                unsupported(&info, "wait", "offset and stream")
            }
            Ok(a) => wait(info, a.timeout, a.until).await,
            Err(e) => Reply::error(e.to_string()),
        },
        "kill" => match arguments::kill(args) {
            Ok(a) => kill(info, a.grace).await,
            Err(e) => Reply::error(e.to_string()),
        },
        _ => match arguments::screen(args) {
            Ok(_) => screen(info).await,
            Err(e) => Reply::error(e.to_string()),
        },
    };
    Some(reply)
}

/// An argument a durable session does not take (yet): refused with what
/// does work, never silently ignored.
fn unsupported(info: &DurableInfo, tool: &str, what: &str) -> Reply {
    let hint = match tool {
        "read" => "read it by offset (`offset`, `max_bytes`) and search what comes back",
        "write" => "use `until` (a pattern), or follow the write with `wait`",
        _ => "wait from the last read (no `offset`) on the merged output",
    };
    Reply::error(format!(
        "{}: `{tool}` of a durable session does not take {what}: {hint}",
        note(info)
    ))
}

async fn read(info: DurableInfo, offset: Option<u64>, max: Option<usize>) -> Reply {
    let from = offset.unwrap_or_else(|| cursor(&info.id));
    let id = info.id.clone();
    let max = max.unwrap_or(PAGE).min(PAGE);
    let got = with_client(false, move |c| {
        let (data, reply) = c.read(&id, from, max, Duration::ZERO)?;
        Ok((data, reply, c.info(&id)?))
    })
    .await;
    let (data, reply, info) = match got {
        Ok(Some(got)) => got,
        Ok(None) => return Reply::error("the durable-session holder is gone"),
        Err(e) => return error(&e),
    };
    set_cursor(&info.id, reply.next_offset);
    let output = String::from_utf8_lossy(&data).into_owned();
    let body = json!({
        "status": status(&info.status),
        "output": output,
        "id": info.id,
        "offset": reply.offset,
        "next_offset": reply.next_offset,
        "end_offset": info.output_bytes.max(reply.next_offset),
        "eof": reply.eof,
        "dropped": reply.dropped,
        "note": note(&info),
    });
    ok(body)
}

/// What arrived from `from` on, after a wait of up to `yield_for` for it
/// (to quiet), and the session then.
fn collect(
    c: &mut Client,
    id: &str,
    from: u64,
    yield_for: Duration,
) -> Result<(String, u64, DurableInfo), DurableError> {
    let (data, reply) = c.read(id, from, PAGE, yield_for)?;
    Ok((
        String::from_utf8_lossy(&data).into_owned(),
        reply.next_offset,
        c.info(id)?,
    ))
}

async fn write(info: DurableInfo, a: arguments::WriteArgs) -> Reply {
    let id = info.id.clone();
    let from = info.output_bytes;
    let mut data = a.data.into_bytes();
    if a.submit {
        data.push(b'\r');
    }
    let keys = a.keys;
    let until = a.until;
    let yield_for = a.yield_for.min(Duration::from_secs(30));
    let got = with_client(false, move |c| {
        if !data.is_empty() {
            c.write(&id, &data)?;
        }
        if !keys.is_empty() {
            c.call::<Value>(&tether_durable::protocol::Request::Keys {
                session: id.clone(),
                keys,
            })?;
        }
        match until {
            // Up to `yield_s` for the pattern (or the session's end), then
            // what arrived.
            Some(pattern) => {
                c.wait(&id, yield_for, Some(&pattern))?;
                collect(c, &id, from, Duration::ZERO)
            }
            None => collect(c, &id, from, yield_for),
        }
    })
    .await;
    match got {
        Ok(Some((output, next, info))) => {
            set_cursor(&info.id, next);
            ok(session_body(&info, output, next))
        }
        Ok(None) => Reply::error("the durable-session holder is gone"),
        Err(e) => error(&e),
    }
}

async fn wait(info: DurableInfo, timeout: Duration, until: Option<String>) -> Reply {
    let id = info.id.clone();
    let from = cursor(&id);
    let got = with_client(false, move |c| {
        let waited = c.wait(&id, timeout, until.as_deref())?;
        let (output, next, info) = collect(c, &id, from, Duration::ZERO)?;
        Ok((waited, output, next, info))
    })
    .await;
    match got {
        Ok(Some((waited, output, next, info))) => {
            set_cursor(&info.id, next);
            let mut body = session_body(&info, output, next);
            if waited.outcome == "matched" {
                body["matched"] = json!(true);
            }
            ok(body)
        }
        Ok(None) => Reply::error("the durable-session holder is gone"),
        Err(e) => error(&e),
    }
}

async fn kill(info: DurableInfo, grace: Duration) -> Reply {
    let id = info.id.clone();
    let got = with_client(false, move |c| {
        let killed = c.kill(&id, Some(grace))?;
        Ok((killed, c.info(&id)?))
    })
    .await;
    match got {
        Ok(Some((killed, info))) => {
            let mut body = session_body(&info, String::new(), info.output_bytes);
            body["already_exited"] = json!(killed.already_exited);
            body["descendants_killed"] = json!(killed.descendants_killed);
            ok(body)
        }
        Ok(None) => Reply::error("the durable-session holder is gone"),
        Err(e) => error(&e),
    }
}

async fn screen(info: DurableInfo) -> Reply {
    let id = info.id.clone();
    let got = with_client(false, move |c| c.screen(&id)).await;
    match got {
        Ok(Some(screen)) => {
            let text = screen.lines.join("\n");
            let body = json!({
                "id": info.id,
                "status": status(&info.status),
                "rows": screen.rows,
                "cols": screen.cols,
                "cursor_row": screen.cursor_row + 1,
                "cursor_col": screen.cursor_col + 1,
                "alternate_screen": screen.alternate_screen,
                "cursor_hidden": screen.cursor_hidden,
                "screen": text,
            });
            Reply {
                text: text.clone(),
                body,
                is_error: false,
            }
        }
        Ok(None) => Reply::error("the durable-session holder is gone"),
        Err(e) => error(&e),
    }
}
