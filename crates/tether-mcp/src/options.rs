//! The options of `tether mcp`.

use std::path::PathBuf;

use clap::Args;

use crate::excerpt::DEFAULT_BUDGET;

/// Default `--max-request-bytes`: 64 MiB, so a 10 MB argument (JSON-escaped,
/// up to ~6× for control characters) still fits on one line.
pub const DEFAULT_MAX_REQUEST: usize = 64 * 1024 * 1024;

/// `tether mcp [--cwd DIR] [--env-allow PAT]… [--env-deny PAT]…`
#[derive(Args, Debug, Clone)]
#[command(after_help = "\
Serves MCP over stdio: register `tether mcp` as a stdio server with your agent. Tools: run, \
read, write, wait, kill, list, screen (prefixed with --tool-prefix). Every process a command starts stays contained in its session \
and is killed — verified — when the server exits (stdin EOF, SIGTERM/SIGINT/SIGHUP), or by \
the keepers if the server is SIGKILLed. Logs go to stderr (TETHER_LOG=info|debug, default warn).

Commands inherit this environment minus credentials: model-provider keys (OPENAI_*, \
ANTHROPIC_*, HF_TOKEN, …) and anything named like one (*_TOKEN, *_SECRET*, *_PASSWORD*, \
*_API_KEY, *_ACCESS_KEY*, *_CREDENTIALS*, AWS_*, GITHUB_TOKEN, …; see tether_mcp::DEFAULT_DENY). \
--env-allow lets one through; --env-deny removes more (--env-deny '*' with --env-allow makes an \
allow-list). Unless set, commands get GIT_TERMINAL_PROMPT=0, an EDITOR/VISUAL/GIT_EDITOR that \
fails at once saying to pass -m, DEBIAN_FRONTEND=noninteractive, PIP_NO_INPUT=1, PAGER=cat, \
NO_COLOR=1, TERM=dumb: they have no terminal.

Examples:
  tether mcp
  tether mcp --cwd ~/project --reap-on-start
  tether mcp --env-deny '*' --env-allow PATH --env-allow HOME
  claude mcp add tether -- tether mcp          (Claude Code)")]
pub struct Options {
    /// Default working directory of commands, and the base of relative `cwd`s.
    ///
    /// Default: the current directory.
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Pass variables matching this glob even if denied (repeatable; `*` matches anything).
    #[arg(long = "env-allow", value_name = "PAT")]
    pub env_allow: Vec<String>,
    /// Remove variables matching this glob from commands' environment (repeatable).
    #[arg(long = "env-deny", value_name = "PAT")]
    pub env_deny: Vec<String>,
    /// Bytes of rendered output per tool result; longer output keeps its head and tail.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_BUDGET, value_parser = budget)]
    pub output_budget: usize,
    /// Most live sessions at once; a `run` beyond that is refused.
    #[arg(long, value_name = "N", default_value_t = tether::registry::DEFAULT_MAX_LIVE)]
    pub max_sessions: usize,
    /// Longest request line accepted; longer requests get an error.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_REQUEST)]
    pub max_request_bytes: usize,
    /// The shell of `command` strings: sh/cmd (the default), powershell, pwsh, bash, or a program.
    ///
    /// `sh`/`cmd` (the default) is the platform's: /bin/sh -c, on Windows cmd.exe /d /s /c;
    /// `powershell`, `pwsh`, `bash`, or any program that takes -c.
    // The default's name is not shown: `sh` and `cmd` both name the
    // platform's shell, which is cmd.exe on Windows ("[default: default]"
    // said nothing, issue 39).
    #[arg(long, value_name = "SHELL", default_value = "sh", hide_default_value = true, value_parser = crate::shell::parse)]
    pub shell: crate::shell::Shell,
    /// Before serving, kill the proven orphans of dead owners of this install (as `tether reap`).
    #[arg(long)]
    pub reap_on_start: bool,
    /// Put PREFIX before every tool's name (tether_run, …) and every text naming one (default: none).
    ///
    /// `--tool-prefix tether_` serves tether_run, tether_read, …, in the tool list and in
    /// every description and hint that names a tool; for agents with other MCP servers whose
    /// tools are also called run or list.
    #[arg(long, value_name = "PREFIX", default_value = "", hide_default_value = true, value_parser = parse_prefix)]
    pub tool_prefix: String,
    /// Most seconds one `read` with `grep` searches before returning what it found.
    ///
    /// A search that runs out of time returns what it found so far, where it stopped, and the
    /// call that goes on from there (at most 50, so a call stays under clients' 60 s).
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_GREP_TIME_S, value_parser = grep_time)]
    pub grep_time_s: f64,
    /// Memory limit of every session unless its `run` sets one (e.g. 2G).
    ///
    /// Past it the kernel kills one of the session's processes, never the server.
    #[arg(long, value_name = "SIZE", value_parser = size)]
    pub memory: Option<u64>,
    /// Process-count limit of every session unless its `run` sets one.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub pids: Option<u64>,
    /// Default CPU limit (cores) of each `run`.
    ///
    /// The CPU limit of every session unless its `run` sets one.
    #[arg(long, value_name = "CORES", value_parser = cores)]
    pub cpu: Option<f64>,
    /// Refuse runs whose limits are not all enforced.
    ///
    /// The limits of a `run` are its own or these defaults; the tool call fails with the reason
    /// and the command does not start.
    #[arg(long)]
    pub require_limits: bool,
}

/// Default `--grep-time-s`: 10 s per call — a few calls cover 250 MB of
/// output that needs the regex crate's slow engine (29–42 s in one call
/// before, issue 16), and each stays far under clients' 60 s timeout.
pub const DEFAULT_GREP_TIME_S: f64 = 10.0;

/// `--tool-prefix`: characters MCP allows in tool names (A–Z, a–z, 0–9,
/// `_`, `-`, `.`), at most 64 of them (names are at most 128).
pub fn parse_prefix(text: &str) -> Result<String, String> {
    if text.len() > 64 {
        return Err(format!("at most 64 characters, got {}", text.len()));
    }
    match text
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
    {
        Some(c) => Err(format!(
            "{c:?} cannot be part of a tool name; use letters, digits, '_', '-' and '.'"
        )),
        None => Ok(text.to_owned()),
    }
}

/// `--grep-time-s`: above 0, at most 50 (calls stay under clients' 60 s).
fn grep_time(text: &str) -> Result<f64, String> {
    let s: f64 = text
        .parse()
        .map_err(|_| format!("expected a number of seconds, got {text:?}"))?;
    if !(s > 0.0 && s <= crate::tools::MAX_WAIT_S) {
        return Err(format!(
            "must be above 0 and at most {} seconds, got {text}",
            crate::tools::MAX_WAIT_S
        ));
    }
    Ok(s)
}

impl Options {
    /// The per-session default limits these options set.
    pub fn limits(&self) -> tether::Limits {
        tether::Limits {
            memory: self.memory,
            pids: self.pids,
            cpu: self.cpu,
            require: self.require_limits,
        }
    }
}

/// `--memory`: bytes or a size such as 512M.
fn size(text: &str) -> Result<u64, String> {
    tether::parse_size(text).map_err(|e| e.to_string())
}

/// `--cpu`: cores, fractional.
fn cores(text: &str) -> Result<f64, String> {
    let cores: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("expected a number of cores such as 0.5 or 2, got {text:?}"))?;
    tether::Limits::new()
        .cpu(cores)
        .validate()
        .map_err(|e| e.to_string())?;
    Ok(cores)
}

/// `--output-budget`: 1 KiB to 16 MiB.
fn budget(text: &str) -> Result<usize, String> {
    let n: usize = text
        .parse()
        .map_err(|_| format!("expected a number of bytes, got {text:?}"))?;
    if !(1024..=16 * 1024 * 1024).contains(&n) {
        return Err(format!("must be from 1024 to 16777216 bytes, got {n}"));
    }
    Ok(n)
}
