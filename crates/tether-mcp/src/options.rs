//! The options of `tether mcp` (and of the `tether-mcp` program).

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
read, write, wait, kill, list. Every process a command starts stays contained in its session \
and is killed — verified — when the server exits (stdin EOF, SIGTERM/SIGINT/SIGHUP), or by \
the keepers if the server is SIGKILLed. Logs go to stderr (TETHER_LOG=info|debug, default warn).

Commands inherit this environment minus credentials: model-provider keys (OPENAI_*, \
ANTHROPIC_*, HF_TOKEN, …) and anything named like one (*_TOKEN, *_SECRET*, *_PASSWORD*, \
*_API_KEY, *_ACCESS_KEY*, *_CREDENTIALS*, AWS_*, GITHUB_TOKEN, …; see tether_mcp::DEFAULT_DENY). \
--env-allow lets one through; --env-deny removes more (--env-deny '*' with --env-allow makes an \
allow-list). Unless set, commands get GIT_TERMINAL_PROMPT=0, an EDITOR/VISUAL/GIT_EDITOR that \
fails at once saying to pass -m, DEBIAN_FRONTEND=noninteractive, PIP_NO_INPUT=1, PAGER=cat, \
NO_COLOR=1, TERM=dumb: they have no terminal.")]
pub struct Options {
    /// Default working directory of commands, and the base of relative `cwd`s (default: the
    /// current directory).
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
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_REQUEST)]
    pub max_request_bytes: usize,
    /// The shell of `command` strings: `sh`/`cmd` (the platform's: /bin/sh -c, on Windows
    /// cmd.exe /d /s /c), `powershell`, `pwsh`, `bash`, or a program that takes -c.
    #[arg(long, value_name = "SHELL", default_value = "default", value_parser = crate::shell::parse)]
    pub shell: crate::shell::Shell,
    /// Before serving, kill the proven orphans of dead owners of this install (as `tether reap`).
    #[arg(long)]
    pub reap_on_start: bool,
    /// Memory limit of every session unless its `run` sets one (e.g. 2G): past it the kernel
    /// kills one of the session's processes, never the server.
    #[arg(long, value_name = "SIZE", value_parser = size)]
    pub memory: Option<u64>,
    /// Process-count limit of every session unless its `run` sets one.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub pids: Option<u64>,
    /// CPU limit (cores) of every session unless its `run` sets one.
    #[arg(long, value_name = "CORES", value_parser = cores)]
    pub cpu: Option<f64>,
}

impl Options {
    /// The per-session default limits these options set.
    pub fn limits(&self) -> tether::Limits {
        tether::Limits {
            memory: self.memory,
            pids: self.pids,
            cpu: self.cpu,
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
