//! Tool arguments: checked against the rules the schemas advertise (the
//! SDK validates nothing), with an error that says what to send instead.
//!
//! Lenient where a model's slip is unambiguous: an id sent as a number, a
//! number or boolean sent as a string. Strict everywhere else: unknown
//! arguments, wrong types and out-of-range values are errors, never
//! silently clamped or ignored.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::error::ArgError;

/// Longest single argument `execve` takes on Linux (`MAX_ARG_STRLEN`,
/// 32 pages, including the terminating NUL).
pub const MAX_EXEC_ARG: usize = 128 * 1024 - 1;

/// Default [`RunArgs::timeout`]: 600 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// Largest `timeout_s` of `run`: one day.
pub const MAX_TIMEOUT_S: f64 = 86_400.0;
/// Default `yield_s` of `run`.
pub const DEFAULT_RUN_YIELD: Duration = Duration::from_secs(10);
/// Default `yield_s` of `write`.
pub const DEFAULT_WRITE_YIELD: Duration = Duration::from_secs(1);
/// Longest any call waits (`yield_s`, `wait`'s `timeout_s`): 300 s.
pub const MAX_WAIT_S: f64 = 300.0;
/// Default `grace_s` of `kill`.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(2);
/// Largest `grace_s` of `kill`.
pub const MAX_GRACE_S: f64 = 60.0;
/// Default `max_bytes` of `read`.
pub const DEFAULT_READ_BYTES: usize = 16 * 1024;

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
    /// Hard limit (default [`DEFAULT_TIMEOUT`]).
    pub timeout: Duration,
    /// How long the call waits for the command to finish.
    pub yield_for: Duration,
    /// Text for stdin.
    pub stdin: Option<String>,
    /// Keep stdin open for `write`.
    pub keep_stdin_open: bool,
}

/// Arguments of `read`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadArgs {
    /// Session id or prefix.
    pub id: String,
    /// Offset to read from (default: the cursor).
    pub offset: Option<u64>,
    /// Most bytes to read.
    pub max_bytes: usize,
}

/// Arguments of `write`.
#[derive(Clone, Debug, PartialEq)]
pub struct WriteArgs {
    /// Session id or prefix.
    pub id: String,
    /// Bytes to write (with the newline of `submit` appended).
    pub data: String,
    /// Close stdin afterwards.
    pub eof: bool,
    /// How long to collect output afterwards.
    pub yield_for: Duration,
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
}

/// Arguments of `kill`.
#[derive(Clone, Debug, PartialEq)]
pub struct KillArgs {
    /// Session id or prefix.
    pub id: String,
    /// SIGTERM → SIGKILL grace.
    pub grace: Duration,
}

/// A tool's arguments being checked.
struct Args<'a> {
    map: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    /// Refuses arguments not in `known` (comma-separated names).
    fn new(map: &'a Map<String, Value>, known: &'static str) -> Result<Args<'a>, ArgError> {
        if let Some(name) = map
            .keys()
            .find(|k| !known.split(", ").any(|n| n == k.as_str()))
        {
            return Err(ArgError::Unknown {
                name: name.clone(),
                known,
            });
        }
        Ok(Args { map })
    }

    fn get(&self, name: &str) -> Option<&'a Value> {
        self.map.get(name).filter(|v| !v.is_null())
    }

    fn string(&self, name: &'static str) -> Result<Option<&'a str>, ArgError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(wrong_type(name, "a string", other)),
        }
    }

    fn required_string(&self, name: &'static str, hint: &'static str) -> Result<&'a str, ArgError> {
        self.string(name)?.ok_or(ArgError::Missing { name, hint })
    }

    /// A session id; a number is taken as its digits (models send ints).
    fn id(&self) -> Result<String, ArgError> {
        let hint = "the session id that `run` returned (see `list`)";
        match self.get("id") {
            None => Err(ArgError::Missing { name: "id", hint }),
            Some(Value::String(s)) if s.trim().is_empty() => {
                Err(ArgError::Missing { name: "id", hint })
            }
            Some(Value::String(s)) => Ok(s.trim().to_owned()),
            Some(Value::Number(n)) => Ok(n.to_string()),
            Some(other) => Err(wrong_type("id", "a string", other)),
        }
    }

    fn boolean(&self, name: &'static str) -> Result<bool, ArgError> {
        match self.get(name) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(Value::String(s)) if s == "true" => Ok(true),
            Some(Value::String(s)) if s == "false" => Ok(false),
            Some(other) => Err(wrong_type(name, "true or false", other)),
        }
    }

    fn number(&self, name: &'static str) -> Result<Option<f64>, ArgError> {
        let value = match self.get(name) {
            None => return Ok(None),
            Some(v) => v,
        };
        let n = match value {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => s.trim().parse::<f64>().ok(),
            _ => None,
        };
        match n {
            Some(n) if n.is_finite() => Ok(Some(n)),
            _ => Err(wrong_type(name, "a number", value)),
        }
    }

    /// Seconds in `[min, max]` (`(0, max]` when `min_exclusive`).
    fn seconds(
        &self,
        name: &'static str,
        range: &'static str,
        min_exclusive: bool,
        max: f64,
    ) -> Result<Option<Duration>, ArgError> {
        let Some(s) = self.number(name)? else {
            return Ok(None);
        };
        let low_ok = if min_exclusive { s > 0.0 } else { s >= 0.0 };
        if !low_ok || s > max {
            return Err(ArgError::OutOfRange {
                name,
                range,
                got: s.to_string(),
            });
        }
        Ok(Some(Duration::from_secs_f64(s)))
    }

    fn integer(&self, name: &'static str, range: &'static str) -> Result<Option<u64>, ArgError> {
        let Some(n) = self.number(name)? else {
            return Ok(None);
        };
        if n < 0.0 || n.fract() != 0.0 || n > u64::MAX as f64 {
            return Err(ArgError::OutOfRange {
                name,
                range,
                got: n.to_string(),
            });
        }
        Ok(Some(n as u64))
    }
}

fn wrong_type(name: &'static str, expected: &'static str, got: &Value) -> ArgError {
    let mut shown = got.to_string();
    if shown.len() > 60 {
        let mut cut = 57;
        while !shown.is_char_boundary(cut) {
            cut -= 1;
        }
        shown.truncate(cut);
        shown.push_str("...");
    }
    ArgError::WrongType {
        name,
        expected,
        got: shown,
    }
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

/// Checks `run`'s arguments.
pub fn run(map: &Map<String, Value>) -> Result<RunArgs, ArgError> {
    let args = Args::new(
        map,
        "command, argv, cwd, env, timeout_s, yield_s, stdin, keep_stdin_open",
    )?;
    let command = match (args.string("command")?, args.get("argv")) {
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
        (None, Some(Value::Array(items))) => {
            let mut argv = Vec::with_capacity(items.len());
            for item in items {
                match item {
                    Value::String(s) => {
                        exec_string("argv", s)?;
                        argv.push(s.clone());
                    }
                    other => return Err(wrong_type("argv", "an array of strings", other)),
                }
            }
            if argv.first().is_none_or(|p| p.is_empty()) {
                return Err(ArgError::Invalid {
                    name: "argv",
                    reason: "needs at least the program, e.g. [\"ls\", \"-la\"]".into(),
                });
            }
            CommandArg::Argv(argv)
        }
        (None, Some(other)) => return Err(wrong_type("argv", "an array of strings", other)),
    };
    let cwd = args.string("cwd")?.map(str::to_owned);
    if let Some(cwd) = &cwd
        && cwd.contains('\0')
    {
        return Err(ArgError::Invalid {
            name: "cwd",
            reason: "contains a NUL character".into(),
        });
    }
    let mut env = Vec::new();
    match args.get("env") {
        None => {}
        Some(Value::Object(vars)) => {
            for (key, value) in vars {
                let Value::String(value) = value else {
                    return Err(wrong_type("env", "an object of string values", value));
                };
                if key.is_empty() || key.contains('=') || key.contains('\0') {
                    return Err(ArgError::Invalid {
                        name: "env",
                        reason: format!(
                            "{key:?} is not a variable name (non-empty, without '=' or NUL)"
                        ),
                    });
                }
                exec_string("env", value)?;
                env.push((key.clone(), value.clone()));
            }
        }
        Some(other) => {
            return Err(wrong_type(
                "env",
                "an object such as {\"KEY\": \"value\"}",
                other,
            ));
        }
    }
    let timeout = args
        .seconds(
            "timeout_s",
            "a number of seconds above 0 and at most 86400",
            true,
            MAX_TIMEOUT_S,
        )?
        .unwrap_or(DEFAULT_TIMEOUT);
    let yield_for = args
        .seconds(
            "yield_s",
            "a number of seconds from 0 to 300",
            false,
            MAX_WAIT_S,
        )?
        .unwrap_or(DEFAULT_RUN_YIELD);
    Ok(RunArgs {
        command,
        cwd,
        env,
        timeout,
        yield_for,
        stdin: args.string("stdin")?.map(str::to_owned),
        keep_stdin_open: args.boolean("keep_stdin_open")?,
    })
}

/// Checks `read`'s arguments.
pub fn read(map: &Map<String, Value>) -> Result<ReadArgs, ArgError> {
    let args = Args::new(map, "id, offset, max_bytes")?;
    let id = args.id()?;
    let offset = args.integer("offset", "a byte offset: an integer from 0")?;
    let max_bytes = args
        .integer("max_bytes", "an integer from 1 to 1048576")?
        .unwrap_or(DEFAULT_READ_BYTES as u64);
    if !(1..=crate::excerpt::READ_MAX_BYTES as u64).contains(&max_bytes) {
        return Err(ArgError::OutOfRange {
            name: "max_bytes",
            range: "an integer from 1 to 1048576",
            got: max_bytes.to_string(),
        });
    }
    Ok(ReadArgs {
        id,
        offset,
        max_bytes: max_bytes as usize,
    })
}

/// Checks `write`'s arguments.
pub fn write(map: &Map<String, Value>) -> Result<WriteArgs, ArgError> {
    let args = Args::new(map, "id, data, submit, eof, yield_s")?;
    let id = args.id()?;
    let mut data = args
        .required_string(
            "data",
            "the text to write to stdin (\"\" with eof: true just closes it)",
        )?
        .to_owned();
    if args.boolean("submit")? {
        data.push('\n');
    }
    let yield_for = args
        .seconds(
            "yield_s",
            "a number of seconds from 0 to 300",
            false,
            MAX_WAIT_S,
        )?
        .unwrap_or(DEFAULT_WRITE_YIELD);
    Ok(WriteArgs {
        id,
        data,
        eof: args.boolean("eof")?,
        yield_for,
    })
}

/// Checks `wait`'s arguments.
pub fn wait(map: &Map<String, Value>) -> Result<WaitArgs, ArgError> {
    let args = Args::new(map, "id, timeout_s, until")?;
    let id = args.id()?;
    let range = "a number of seconds from 0 to 300";
    let timeout =
        args.seconds("timeout_s", range, false, MAX_WAIT_S)?
            .ok_or(ArgError::Missing {
                name: "timeout_s",
                hint: "how many seconds to wait at most, from 0 to 300",
            })?;
    let until = args.string("until")?.map(str::to_owned);
    if let Some(pattern) = &until {
        if pattern.is_empty() {
            return Err(ArgError::Invalid {
                name: "until",
                reason: "is empty; give a regex, or leave `until` out to wait for the exit".into(),
            });
        }
        if let Err(e) = regex::bytes::Regex::new(pattern) {
            return Err(ArgError::Invalid {
                name: "until",
                reason: format!(
                    "is not a valid regex ({}); escape special characters with \\, e.g. \
                     \"Listening on port 8080\\\\.\"",
                    e.to_string()
                        .lines()
                        .last()
                        .unwrap_or("syntax error")
                        .trim()
                ),
            });
        }
    }
    Ok(WaitArgs { id, timeout, until })
}

/// Checks `kill`'s arguments.
pub fn kill(map: &Map<String, Value>) -> Result<KillArgs, ArgError> {
    let args = Args::new(map, "id, grace_s")?;
    let id = args.id()?;
    let grace = args
        .seconds(
            "grace_s",
            "a number of seconds from 0 to 60",
            false,
            MAX_GRACE_S,
        )?
        .unwrap_or(DEFAULT_GRACE);
    Ok(KillArgs { id, grace })
}

/// Checks `list`'s arguments (none).
pub fn list(map: &Map<String, Value>) -> Result<(), ArgError> {
    Args::new(map, "")?;
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
            (DEFAULT_TIMEOUT, DEFAULT_RUN_YIELD)
        );
        let a = run(&map(json!({"argv": ["ls", "-l"], "yield_s": "2.5"}))).unwrap();
        assert_eq!(a.command, CommandArg::Argv(vec!["ls".into(), "-l".into()]));
        assert_eq!(a.yield_for, Duration::from_millis(2500));

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
        ] {
            let err = run(&map(args)).unwrap_err().to_string();
            assert!(err.starts_with(&format!("`{what}` must be")), "{err}");
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
    fn read_write_wait_kill_bounds() {
        assert!(read(&map(json!({"id": "abcd", "offset": -1}))).is_err());
        assert!(read(&map(json!({"id": "abcd", "offset": 1.5}))).is_err());
        assert!(read(&map(json!({"id": "abcd", "max_bytes": 0}))).is_err());
        assert!(read(&map(json!({"id": "abcd", "max_bytes": 2_000_000}))).is_err());
        let w = write(&map(json!({"id": "abcd", "data": "1+1", "submit": true}))).unwrap();
        assert_eq!((w.data.as_str(), w.eof), ("1+1\n", false));
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
            DEFAULT_GRACE
        );
        assert!(list(&map(json!({"x": 1}))).is_err());
        assert!(list(&map(json!({}))).is_ok());
    }
}
