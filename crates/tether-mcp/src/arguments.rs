//! Tool arguments as typed values: each tool's table in
//! [`tools`](crate::tools) is checked by [`params::check`] (kinds, ranges,
//! unknown names), then the rules that span arguments (`command` or
//! `argv`, exec limits, `head_lines` or `tail_lines`) are checked here.

use std::time::Duration;

use serde_json::{Map, Value};
use tether::registry::Stream;
use tether::terminal::PtySize;

use crate::error::ArgError;
use crate::params::{self, Checked};
use crate::tools;

/// Longest single argument `execve` takes on Linux (`MAX_ARG_STRLEN`,
/// 32 pages, including the terminating NUL).
pub const MAX_EXEC_ARG: usize = 128 * 1024 - 1;

/// What `run` runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommandArg {
    /// A script for the configured shell (`--shell`).
    Shell(String),
    /// A program and its arguments.
    Argv(Vec<String>),
}

/// Arguments of `run`.
#[derive(Clone, Debug, PartialEq)]
pub struct RunArgs {
    /// The command.
    pub command: CommandArg,
    /// Working directory as given.
    pub cwd: Option<String>,
    /// Variables to set.
    pub env: Vec<(String, String)>,
    /// Hard limit.
    pub timeout: Duration,
    /// How long the call waits for the command to finish.
    pub yield_for: Duration,
    /// Return as soon as the output matches this.
    pub until: Option<String>,
    /// Text for stdin.
    pub stdin: Option<String>,
    /// Keep stdin open for `write`.
    pub keep_stdin_open: bool,
    /// With `keep_stdin_open`: return once output went quiet this long.
    pub quiet: Option<Duration>,
    /// Capture stderr apart.
    pub separate_stderr: bool,
    /// Run on a PTY of this size.
    pub pty: Option<PtySize>,
    /// Limits asked for in this call (the server's defaults fill the rest).
    pub limits: tether::Limits,
    /// Start it durable (issue 37): held by the user's holder, outliving
    /// this server, until `ttl_s`.
    pub durable: bool,
    /// With `durable`: its name, unique among the user's running ones.
    pub name: Option<String>,
    /// With `durable`: seconds to live.
    pub ttl_s: Option<u64>,
}

/// What `read` shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadMode {
    /// Bytes from an offset, rendered (or exact with `raw`).
    Page {
        /// Exact bytes, not rendered.
        raw: bool,
    },
    /// The first N lines from the offset.
    Head(usize),
    /// The last N lines of the stream.
    Tail(usize),
    /// Lines matching a regex, with context.
    Grep {
        /// The regex.
        pattern: String,
        /// Lines before and after each match.
        context: usize,
        /// Most matches listed.
        max_matches: usize,
        /// Line number of the line at the offset searched from.
        first_line: Option<u64>,
    },
}

/// Arguments of `read`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadArgs {
    /// Session id or prefix.
    pub id: String,
    /// Offset to read from (default depends on the mode).
    pub offset: Option<u64>,
    /// Most bytes to read (default: the budget).
    pub max_bytes: Option<usize>,
    /// What to show.
    pub mode: ReadMode,
    /// Which stream.
    pub stream: Stream,
}

/// Arguments of `write`.
#[derive(Clone, Debug, PartialEq)]
pub struct WriteArgs {
    /// Session id or prefix.
    pub id: String,
    /// Text to write.
    pub data: String,
    /// Named keys pressed after it (checked names; PTY sessions only).
    pub keys: Vec<String>,
    /// Press Enter afterwards.
    pub submit: bool,
    /// End the input afterwards (close a pipe; VEOF on a PTY).
    pub eof: bool,
    /// Most time to collect output afterwards.
    pub yield_for: Duration,
    /// Return as soon as new output matches this.
    pub until: Option<String>,
    /// Return once new output went quiet this long.
    pub quiet: Option<Duration>,
}

/// Arguments of `wait`.
#[derive(Clone, Debug, PartialEq)]
pub struct WaitArgs {
    /// Session id or prefix.
    pub id: String,
    /// Most time to wait.
    pub timeout: Duration,
    /// Regex that ends the wait.
    pub until: Option<String>,
    /// Where `until` starts looking (default: after the last match).
    pub offset: Option<u64>,
    /// Which stream `until` looks at.
    pub stream: Stream,
}

/// Arguments of `screen`.
#[derive(Clone, Debug, PartialEq)]
pub struct ScreenArgs {
    /// Session id or prefix.
    pub id: String,
    /// Resize to this first.
    pub resize: Option<PtySize>,
}

/// Arguments of `kill`.
#[derive(Clone, Debug, PartialEq)]
pub struct KillArgs {
    /// Session id or prefix.
    pub id: String,
    /// SIGTERM → SIGKILL grace.
    pub grace: Duration,
}

/// A string that becomes one `execve` argument or environment entry.
fn exec_string(name: &'static str, s: &str) -> Result<(), ArgError> {
    if s.len() > MAX_EXEC_ARG {
        return Err(ArgError::Invalid {
            name,
            reason: format!(
                "is {} bytes, but one exec argument can be at most {MAX_EXEC_ARG} bytes on \
                 Linux; pass large data through `stdin` or a file instead",
                s.len()
            ),
        });
    }
    if s.contains('\0') {
        return Err(ArgError::Invalid {
            name,
            reason: "contains a NUL character, which cannot be passed to a program".into(),
        });
    }
    Ok(())
}

/// A quiet window: 0 turns it off.
fn quiet(args: &Checked<'_>) -> Option<Duration> {
    args.seconds("quiet_s").filter(|d| !d.is_zero())
}

fn stream(args: &Checked<'_>) -> Stream {
    match args.choice("stream") {
        "stderr" => Stream::Stderr,
        _ => Stream::Output,
    }
}

fn duration(d: Option<Duration>) -> Duration {
    d.expect("the table gives this argument a default or requires it")
}

/// Checks `run`'s arguments.
pub fn run(map: &Map<String, Value>) -> Result<RunArgs, ArgError> {
    let args = params::check(tools::RUN, map)?;
    let command = match (args.text("command"), args.strings("argv")) {
        (Some(_), Some(_)) => {
            return Err(ArgError::Invalid {
                name: "command",
                reason: "give `command` (a shell line) or `argv` (a program and its arguments), \
                         not both"
                    .into(),
            });
        }
        (None, None) => {
            return Err(ArgError::Missing {
                name: "command",
                hint: "a shell command line such as \"ls -la\" (or `argv`: [\"ls\", \"-la\"])",
            });
        }
        (Some(script), None) => {
            if script.trim().is_empty() {
                return Err(ArgError::Invalid {
                    name: "command",
                    reason: "is empty; give the command line to run".into(),
                });
            }
            exec_string("command", script)?;
            CommandArg::Shell(script.to_owned())
        }
        (None, Some(argv)) => {
            for item in &argv {
                exec_string("argv", item)?;
            }
            if argv.first().is_none_or(|p| p.is_empty()) {
                return Err(ArgError::Invalid {
                    name: "argv",
                    reason: "needs at least the program, e.g. [\"ls\", \"-la\"]".into(),
                });
            }
            CommandArg::Argv(argv.into_iter().map(str::to_owned).collect())
        }
    };
    let cwd = args.text("cwd").map(str::to_owned);
    if cwd.as_ref().is_some_and(|c| c.contains('\0')) {
        return Err(ArgError::Invalid {
            name: "cwd",
            reason: "contains a NUL character".into(),
        });
    }
    let mut env = Vec::new();
    for (key, value) in args.string_map("env") {
        if key.is_empty() || key.contains('=') || key.contains('\0') {
            return Err(ArgError::Invalid {
                name: "env",
                reason: format!("{key:?} is not a variable name (non-empty, without '=' or NUL)"),
            });
        }
        exec_string("env", value)?;
        env.push((key.to_owned(), value.to_owned()));
    }
    let pty = if args.boolean("pty") {
        if args.boolean("separate_stderr") {
            return Err(ArgError::Invalid {
                name: "separate_stderr",
                reason: "a terminal has one stream: leave it out with pty".into(),
            });
        }
        Some(size(&args)?.unwrap_or_default())
    } else {
        if let Some(name) = ["rows", "cols"].into_iter().find(|n| args.has(n)) {
            return Err(ArgError::Invalid {
                name,
                reason: "sizes a terminal: give pty: true with it".into(),
            });
        }
        None
    };
    // A terminal is always open for input.
    let keep_stdin_open = args.boolean("keep_stdin_open") || pty.is_some();
    let until = args.text("until").map(str::to_owned);
    let durable = args.boolean("durable");
    if !durable && let Some(name) = ["name", "ttl_s"].into_iter().find(|n| args.has(n)) {
        return Err(ArgError::Invalid {
            name,
            reason: "belongs to a durable session: give durable: true with it".into(),
        });
    }
    // A durable session's time is its TTL, and its `run` waits only for
    // `until`: what would otherwise be ignored is refused.
    if durable && args.has("timeout_s") {
        return Err(ArgError::Invalid {
            name: "timeout_s",
            reason: "bounds a plain session; a durable one is bounded by ttl_s".into(),
        });
    }
    if durable && args.has("quiet_s") {
        return Err(ArgError::Invalid {
            name: "quiet_s",
            reason: "a durable run returns at once (or at `until`); give quiet_s to the `write` \
                     that talks to it"
                .into(),
        });
    }
    Ok(RunArgs {
        durable,
        name: args.text("name").map(str::to_owned),
        ttl_s: args.integer("ttl_s"),
        command,
        cwd,
        env,
        timeout: duration(args.seconds("timeout_s")),
        yield_for: duration(args.seconds("yield_s")),
        stdin: args.text("stdin").map(str::to_owned),
        // The quiet rule is for talking to a program; `until` names
        // exactly what to wait for instead (unless quiet_s is explicit).
        quiet: if keep_stdin_open && (until.is_none() || args.has("quiet_s")) {
            quiet(&args)
        } else {
            None
        },
        until,
        keep_stdin_open,
        separate_stderr: args.boolean("separate_stderr"),
        pty,
        limits: tether::Limits {
            memory: args.size("memory"),
            pids: args.integer("pids"),
            cpu: args.number("cpu"),
            require: args.boolean("require_limits"),
        },
    })
}

/// `rows` and `cols` as a terminal size (the table's defaults fill one
/// left out); `None` when neither was given and the table has none.
fn size(args: &Checked<'_>) -> Result<Option<PtySize>, ArgError> {
    match (args.integer("rows"), args.integer("cols")) {
        (None, None) => Ok(None),
        (Some(rows), Some(cols)) => PtySize::new(rows as u32, cols as u32)
            .map(Some)
            .map_err(|e| ArgError::Invalid {
                name: "rows",
                reason: e.to_string(),
            }),
        (rows, _) => Err(ArgError::Invalid {
            name: if rows.is_some() { "cols" } else { "rows" },
            reason: "give rows and cols together".into(),
        }),
    }
}

/// Checks `read`'s arguments.
pub fn read(map: &Map<String, Value>) -> Result<ReadArgs, ArgError> {
    let args = params::check(tools::READ, map)?;
    let id = args.id()?;
    let chosen: Vec<&str> = ["tail_lines", "head_lines", "grep"]
        .into_iter()
        .filter(|n| args.has(n))
        .collect();
    if chosen.len() > 1 {
        return Err(ArgError::Invalid {
            name: chosen[1],
            reason: format!(
                "give one of tail_lines, head_lines and grep, not {}",
                chosen.join(" and ")
            ),
        });
    }
    if args.has("first_line") && !(args.has("grep") && args.has("offset")) {
        return Err(ArgError::Invalid {
            name: "first_line",
            reason: "numbers the lines grep finds from `offset`: give it with grep and offset"
                .into(),
        });
    }
    let raw = args.boolean("raw");
    if raw && !chosen.is_empty() {
        return Err(ArgError::Invalid {
            name: "raw",
            reason: format!(
                "returns bytes as they are; it does not combine with {}",
                chosen[0]
            ),
        });
    }
    let count = |name| args.integer(name).map(|n| n as usize);
    let mode = if let Some(n) = count("tail_lines") {
        ReadMode::Tail(n)
    } else if let Some(n) = count("head_lines") {
        ReadMode::Head(n)
    } else if let Some(pattern) = args.text("grep") {
        ReadMode::Grep {
            pattern: pattern.to_owned(),
            context: count("context").unwrap_or(0),
            max_matches: count("max_matches").unwrap_or(1),
            first_line: args.integer("first_line"),
        }
    } else {
        ReadMode::Page { raw }
    };
    Ok(ReadArgs {
        id,
        offset: args.integer("offset"),
        max_bytes: count("max_bytes"),
        mode,
        stream: stream(&args),
    })
}

/// Checks `write`'s arguments.
pub fn write(map: &Map<String, Value>) -> Result<WriteArgs, ArgError> {
    let args = params::check(tools::WRITE, map)?;
    let id = args.id()?;
    let data = args.text("data").unwrap_or_default().to_owned();
    let keys: Vec<String> = args
        .strings("keys")
        .unwrap_or_default()
        .into_iter()
        .map(str::to_owned)
        .collect();
    // Names are checked now: an unknown key sends nothing at all.
    if let Err(e) = tether::terminal::encode_keys(&keys, false) {
        return Err(ArgError::Invalid {
            name: "keys",
            reason: e.to_string(),
        });
    }
    let (submit, eof) = (args.boolean("submit"), args.boolean("eof"));
    if !args.has("data") && keys.is_empty() && !submit && !eof {
        return Err(ArgError::Missing {
            name: "data",
            hint: "the text to write (or keys, submit: true, eof: true)",
        });
    }
    let until = args.text("until").map(str::to_owned);
    Ok(WriteArgs {
        id,
        data,
        keys,
        submit,
        eof,
        yield_for: duration(args.seconds("yield_s")),
        quiet: if until.is_none() || args.has("quiet_s") {
            quiet(&args)
        } else {
            None
        },
        until,
    })
}

/// Checks `wait`'s arguments.
pub fn wait(map: &Map<String, Value>) -> Result<WaitArgs, ArgError> {
    let args = params::check(tools::WAIT, map)?;
    Ok(WaitArgs {
        id: args.id()?,
        timeout: duration(args.seconds("timeout_s")),
        until: args.text("until").map(str::to_owned),
        offset: args.integer("offset"),
        stream: stream(&args),
    })
}

/// Checks `screen`'s arguments.
pub fn screen(map: &Map<String, Value>) -> Result<ScreenArgs, ArgError> {
    let args = params::check(tools::SCREEN, map)?;
    Ok(ScreenArgs {
        id: args.id()?,
        resize: size(&args)?,
    })
}

/// Checks `kill`'s arguments.
pub fn kill(map: &Map<String, Value>) -> Result<KillArgs, ArgError> {
    let args = params::check(tools::KILL, map)?;
    Ok(KillArgs {
        id: args.id()?,
        grace: duration(args.seconds("grace_s")),
    })
}

/// Checks `list`'s arguments (none).
pub fn list(map: &Map<String, Value>) -> Result<(), ArgError> {
    params::check(tools::LIST, map)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn run_takes_a_command_or_an_argv() {
        let a = run(&map(json!({"command": "echo hi"}))).unwrap();
        assert_eq!(a.command, CommandArg::Shell("echo hi".into()));
        assert_eq!(
            (a.timeout, a.yield_for),
            (Duration::from_secs(600), Duration::from_secs(10))
        );
        assert_eq!(a.quiet, None, "quiet is for keep_stdin_open");
        let a = run(&map(json!({"argv": ["ls", "-l"], "yield_s": "2.5"}))).unwrap();
        assert_eq!(a.command, CommandArg::Argv(vec!["ls".into(), "-l".into()]));
        assert_eq!(a.yield_for, Duration::from_millis(2500));
        let a = run(&map(
            json!({"command": "python3 -i", "keep_stdin_open": true}),
        ))
        .unwrap();
        assert_eq!(a.quiet, Some(Duration::from_millis(200)));

        let err = run(&map(json!({}))).unwrap_err();
        assert!(err.to_string().contains("`command` is required"), "{err}");
        let err = run(&map(json!({"command": "a", "argv": ["b"]}))).unwrap_err();
        assert!(err.to_string().contains("not both"), "{err}");
        let err = run(&map(json!({"command": 5}))).unwrap_err();
        assert_eq!(err.to_string(), "`command` must be a string, got 5");
        let err = run(&map(json!({"argv": []}))).unwrap_err();
        assert!(err.to_string().contains("at least the program"), "{err}");
        let err = run(&map(json!({"argv": ["ls", 1]}))).unwrap_err();
        assert!(err.to_string().contains("array of strings"), "{err}");
        let err = run(&map(json!({"cmd": "ls"}))).unwrap_err();
        assert!(
            err.to_string().starts_with("unknown argument `cmd`"),
            "{err}"
        );
    }

    #[test]
    fn run_limits_are_checked_not_clamped() {
        for (args, what) in [
            (json!({"command": "x", "timeout_s": 0}), "timeout_s"),
            (json!({"command": "x", "timeout_s": 86401}), "timeout_s"),
            (json!({"command": "x", "yield_s": 301}), "yield_s"),
            (json!({"command": "x", "yield_s": -1}), "yield_s"),
            (json!({"command": "x", "yield_s": "soon"}), "yield_s"),
            (json!({"command": "x", "until": "(x"}), "until"),
        ] {
            let err = run(&map(args)).unwrap_err().to_string();
            assert!(err.starts_with(&format!("`{what}`")), "{err}");
        }
        let big = "x".repeat(MAX_EXEC_ARG + 1);
        let err = run(&map(json!({"command": big}))).unwrap_err().to_string();
        assert!(err.contains("stdin"), "{err}");
        let err = run(&map(json!({"command": "x", "env": {"A=B": "c"}})))
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a variable name"), "{err}");
        let err = run(&map(json!({"command": "x", "env": ["A"]})))
            .unwrap_err()
            .to_string();
        assert!(err.contains("an object"), "{err}");
    }

    #[test]
    fn ids_may_come_as_numbers_but_not_as_other_things() {
        assert_eq!(read(&map(json!({"id": 1234}))).unwrap().id, "1234");
        assert_eq!(read(&map(json!({"id": " abcd "}))).unwrap().id, "abcd");
        assert!(read(&map(json!({"id": ""}))).is_err());
        assert!(read(&map(json!({"id": ["a"]}))).is_err());
        assert!(
            read(&map(json!({})))
                .unwrap_err()
                .to_string()
                .contains("`id` is required")
        );
    }

    #[test]
    fn read_modes_exclude_each_other() {
        let r = read(&map(json!({"id": "abcd", "grep": "x"}))).unwrap();
        assert_eq!(
            r.mode,
            ReadMode::Grep {
                pattern: "x".into(),
                context: 2,
                max_matches: 50,
                first_line: None,
            }
        );
        assert!(read(&map(json!({"id": "abcd", "grep": "x", "first_line": 5}))).is_err());
        let r = read(&map(
            json!({"id": "abcd", "grep": "x", "offset": 9, "first_line": 5}),
        ));
        assert!(matches!(
            r.unwrap().mode,
            ReadMode::Grep {
                first_line: Some(5),
                ..
            }
        ));
        assert_eq!(
            read(&map(json!({"id": "abcd", "tail_lines": 5})))
                .unwrap()
                .mode,
            ReadMode::Tail(5)
        );
        assert!(read(&map(json!({"id": "abcd", "tail_lines": 5, "grep": "x"}))).is_err());
        assert!(read(&map(json!({"id": "abcd", "raw": true, "head_lines": 1}))).is_err());
        assert!(read(&map(json!({"id": "abcd", "stream": "stdin"}))).is_err());
        assert_eq!(
            read(&map(json!({"id": "abcd", "stream": "stderr"})))
                .unwrap()
                .stream,
            Stream::Stderr
        );
    }

    #[test]
    fn read_write_wait_kill_bounds() {
        assert!(read(&map(json!({"id": "abcd", "offset": -1}))).is_err());
        assert!(read(&map(json!({"id": "abcd", "offset": 1.5}))).is_err());
        assert!(read(&map(json!({"id": "abcd", "max_bytes": 0}))).is_err());
        assert!(read(&map(json!({"id": "abcd", "max_bytes": 2_000_000}))).is_err());
        let w = write(&map(json!({"id": "abcd", "data": "1+1", "submit": true}))).unwrap();
        assert_eq!((w.data.as_str(), w.submit, w.eof), ("1+1", true, false));
        let w = write(&map(json!({"id": "abcd", "keys": ["Ctrl-C"]}))).unwrap();
        assert_eq!(
            (w.data.as_str(), w.keys.as_slice()),
            ("", &["Ctrl-C".to_owned()][..])
        );
        let err = write(&map(json!({"id": "abcd", "keys": ["Enter", "Hyper-Q"]})))
            .unwrap_err()
            .to_string();
        assert!(err.contains("Hyper-Q"), "{err}");
        assert!(write(&map(json!({"id": "abcd", "eof": true}))).is_ok());
        let s = screen(&map(json!({"id": "abcd", "rows": 10, "cols": 20}))).unwrap();
        assert_eq!(s.resize, Some(PtySize::new(10, 20).unwrap()));
        assert!(screen(&map(json!({"id": "abcd", "rows": 10}))).is_err());
        assert!(screen(&map(json!({"id": "abcd", "rows": 501, "cols": 20}))).is_err());
        let r = run(&map(json!({"command": "vim", "pty": true}))).unwrap();
        assert_eq!(r.pty, Some(PtySize::default()));
        assert!(r.keep_stdin_open);
        assert!(run(&map(json!({"command": "vim", "cols": 80}))).is_err());
        assert_eq!(w.quiet, Some(Duration::from_millis(200)));
        let w = write(&map(json!({"id": "abcd", "data": "x", "until": ">>> "}))).unwrap();
        assert_eq!(w.quiet, None, "until names what to wait for");
        assert!(write(&map(json!({"id": "abcd"}))).is_err());
        let err = wait(&map(json!({"id": "abcd"}))).unwrap_err().to_string();
        assert!(err.contains("`timeout_s` is required"), "{err}");
        let err = wait(&map(
            json!({"id": "abcd", "timeout_s": 1, "until": "(unclosed"}),
        ))
        .unwrap_err()
        .to_string();
        assert!(err.contains("not a valid regex"), "{err}");
        assert!(wait(&map(json!({"id": "abcd", "timeout_s": 301}))).is_err());
        assert!(kill(&map(json!({"id": "abcd", "grace_s": 61}))).is_err());
        assert_eq!(
            kill(&map(json!({"id": "abcd"}))).unwrap().grace,
            Duration::from_secs(2)
        );
        assert!(list(&map(json!({"x": 1}))).is_err());
        assert!(list(&map(json!({}))).is_ok());
    }
}
