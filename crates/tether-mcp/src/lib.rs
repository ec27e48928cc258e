//! `tether mcp`: a terminal tool for any agent, over MCP (stdio).
//!
//! An agent registers `tether mcp` as a stdio MCP server and gets seven
//! tools — `run`, `read`, `write`, `wait`, `kill`, `list`, `screen` — backed by a
//! [`tether::registry::Registry`]. A command returns as soon as it finishes, or
//! after a yield window with a session id and the output so far; `cmd &`
//! returns at once and reports what it left running; nothing an agent
//! does can hang the server; every process any command started dies with
//! its session or with the server.
//!
//! This crate is that server as a library, for a program that wants to be
//! its own `tether mcp` (the `tether` CLI is one). Agents use the binary:
//! `claude mcp add tether -- tether mcp`, or `{"command": "tether", "args":
//! ["mcp"]}` in a client's server list.
//!
//! # Quick start
//!
//! Not run as a test (`no_run`): it serves MCP on the stdin and stdout of
//! whoever runs it until they close.
//!
//! ```no_run
//! fn main() -> std::process::ExitCode {
//!     tether::keeper::run_if_requested(); // this program can be its own keeper
//!     use clap::Parser;
//!     #[derive(Parser)]
//!     struct Cli {
//!         #[command(flatten)]
//!         options: tether_mcp::Options,
//!     }
//!     tether_mcp::serve(Cli::parse().options)
//! }
//! ```
//!
//! # Options and their defaults
//!
//! [`Options`] is `tether mcp`'s command line (a `clap` [`Args`](clap::Args)
//! to flatten into yours); each field is a flag, and `--help` shows the
//! same defaults:
//!
//! | flag | default | what |
//! |---|---|---|
//! | `--cwd DIR` | the current directory | commands' working directory, base of relative `cwd`s; not a directory: exit 125 |
//! | `--env-allow PAT`, `--env-deny PAT` | none | globs on top of [`DEFAULT_DENY`] (see [`EnvPolicy`]) |
//! | `--output-budget BYTES` | 16384 | rendered output per result (1 KiB–16 MiB); longer keeps head and tail |
//! | `--max-sessions N` | 64 ([`tether::registry::DEFAULT_MAX_LIVE`]) | live sessions; a `run` beyond is refused |
//! | `--max-request-bytes N` | 64 MiB ([`DEFAULT_MAX_REQUEST`]) | longest request line; longer gets an error |
//! | `--shell SHELL` | the platform's (`/bin/sh -c`, `cmd.exe /d /s /c`) | `powershell`, `pwsh`, `bash`, or a program taking `-c` |
//! | `--reap-on-start` | off | `tether reap` this install before serving |
//! | `--tool-prefix PREFIX` | empty | before every tool name (`tether_run`, …); at most 64 of `A-Za-z0-9_.-` |
//! | `--grep-time-s S` | 10 | longest `grep` per call (at most 50) |
//! | `--memory SIZE`, `--pids N`, `--cpu CORES` | none | per-session [`tether::Limits`] unless a `run` sets its own |
//!
//! ```
//! use clap::Parser;
//!
//! #[derive(Parser)]
//! struct Cli {
//!     #[command(flatten)]
//!     options: tether_mcp::Options,
//! }
//!
//! let cli = Cli::try_parse_from(["agent-terminal", "--memory", "2G", "--tool-prefix", "tether_"])?;
//! assert_eq!(cli.options.max_sessions, 64);
//! assert_eq!(cli.options.output_budget, 16 * 1024);
//! assert_eq!(cli.options.limits().memory, Some(2 << 30));
//! assert!(Cli::try_parse_from(["agent-terminal", "--tool-prefix", "no spaces"]).is_err());
//! # Ok::<(), clap::Error>(())
//! ```
//!
//! # How it works
//!
//! - `adapter/` is the only code that knows the MCP SDK (rmcp, pinned
//!   exactly). It owns the stdio transport (which answers every malformed
//!   line instead of ignoring it, with the request's id or `"id": null`),
//!   bounds the requests in flight (backpressure on stdin) and gives memory
//!   back after a burst, runs each call in its own task, catches panics,
//!   sends progress notifications, and makes calls in flight return the
//!   moment the server starts closing.
//! - `tools.rs` holds the names, descriptions, output schemas (which every
//!   result, errors included, validates against) and annotations the model
//!   sees, and each tool's argument table; `names.rs` puts
//!   `--tool-prefix` before every tool's name, in the list and in every
//!   text that names one;
//!   `params.rs` turns a table into the JSON schema *and* the checks and
//!   error messages (the SDK validates nothing), so every limit is written
//!   once; `arguments.rs` adds the rules that span arguments.
//! - `terminal.rs` turns calls into registry calls and results. It keeps,
//!   per session, only what the model was shown (where the output shown so
//!   far ends, where the last `until` match ended); the command line, the
//!   timeout and the stdin queue are the registry's. A call that carries a
//!   progress token reports every second while it waits; a cancelled `run`
//!   kills its session. No call waits longer than 50 s (clients give up at
//!   60 s); a `grep` runs on a blocking thread for at most `--grep-time-s`
//!   and returns a partial result with the call that goes on.
//! - `reply.rs` holds the typed results (`status`, `exit_code`, `output`
//!   first) and their short text summaries.
//! - `screen.rs` and `excerpt.rs` turn output bytes into what the model is
//!   shown: no ANSI escapes, progress lines collapsed, invalid UTF-8
//!   replaced, head and tail within a budget with the exact `read` call
//!   for what was cut, and output that is gone (a gap: the spill cap, or a
//!   spill file that could not be written) with its cause; `read.rs` and
//!   `grep.rs` are `read`'s pages, head and tail lines, raw bytes and
//!   search. `exit.rs` explains endings (signal
//!   names, a SIGKILL nobody sent → maybe the OOM killer, timeouts);
//!   `prompt.rs` notices a command that wants an editor or waits at a
//!   prompt.
//! - `environment.rs` removes credentials from commands' environment (by
//!   provider name and by the shape of the name) and sets the
//!   non-interactive defaults.
//! - `lifecycle.rs`: the server stops on stdin EOF, on a broken stdout,
//!   and on SIGTERM/SIGINT/SIGHUP; then every session's tree is killed and
//!   verified empty before the process exits. If the server is
//!   SIGKILLed, the keepers see their lifelines close and kill the trees.

#![warn(missing_docs)]

mod adapter;
mod arguments;
mod durable;
mod environment;
mod error;
mod excerpt;
mod exit;
mod grep;
mod lifecycle;
mod names;
mod options;
mod params;
mod prompt;
mod read;
mod reply;
mod screen;
mod shell;
mod terminal;
mod tools;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

pub use environment::{DEFAULT_DENY, EnvPolicy, defaults as env_defaults};
pub use error::{ArgError, ServeError};
pub use options::{DEFAULT_MAX_REQUEST, Options};

use lifecycle::{Cause, Closing};
use terminal::{Terminal, TerminalConfig};

/// SIGTERM → SIGKILL grace when the server kills trees itself (timeouts,
/// shutdown). Short: an MCP client gives a server about 2 s to exit after
/// closing its stdin before it signals it.
const SERVER_GRACE: Duration = Duration::from_millis(500);

/// Exit code when the server could not start (as the CLI's other errors).
const EXIT_START_FAILED: u8 = 125;

/// Runs the MCP server on stdin/stdout until the client goes away or a
/// signal stops it; then kills every session's tree, verifies each empty,
/// and returns: 0 after stdin EOF or a broken stdout, 128+N after signal
/// N, 1 if some process survived the kill (named on stderr), 125 if the
/// server could not start ([`ServeError`] on stderr: a `--cwd` that is not
/// a directory, a runtime or signal handler that cannot be set up).
///
/// Never panics on bad input and never exits on one: a malformed line, an
/// oversized request or a bad argument ([`ArgError`]) gets an error reply
/// and the server keeps serving. A ledger that cannot be opened is warned
/// about on stderr; sessions then carry only their spawn tags.
///
/// Makes this process a child subreaper (orphans of a keeper that was
/// killed come back to it and are killed), drops the signals commands
/// send their parent ([`tether::absorb_parent_signals`]), installs signal
/// handlers and
/// a stderr logger (`TETHER_LOG`, default `warn`): call it from a
/// program that is the server, after [`tether::keeper::run_if_requested`].
pub fn serve(options: Options) -> ExitCode {
    withhold_credentials(&options);
    init_logging();
    match serve_until_closed(options) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("tether mcp: {e}");
            ExitCode::from(EXIT_START_FAILED)
        }
    }
}

fn serve_until_closed(options: Options) -> Result<ExitCode, ServeError> {
    let limits = options.limits();
    let cwd = default_cwd(options.cwd)?;
    if let Err(e) = tether::become_subreaper() {
        tracing::warn!("cannot become a child subreaper ({e}); keepers still contain each tree");
    }
    // A command's `kill -USR1 $PPID` is passed on to the server by its
    // keeper; it must not end the server and every session it holds.
    if let Err(e) = tether::absorb_parent_signals() {
        tracing::warn!("cannot absorb the signals commands send their parent: {e}");
    }
    let install = tether::Install::from_env();
    if options.reap_on_start {
        reap_orphans(&install);
    }
    // Best effort: without a ledger the sessions still carry spawn tags.
    let observer = match tether_ledger::Recorder::register(&install, terminal::PURPOSE) {
        Ok(observer) => Some(Arc::new(observer)),
        Err(e) => {
            eprintln!("tether mcp: not recording sessions in the ledger: {e}");
            None
        }
    };
    // Before any keeper exists: where cgroup v2 needs this process out of
    // its own cgroup to give sessions controllers, it can only move while
    // it is alone there.
    tether::prepare_limits();
    let env = EnvPolicy::new(options.env_allow, options.env_deny).apply(std::env::vars_os());
    let config = TerminalConfig {
        cwd,
        env,
        budget: options.output_budget,
        grace: SERVER_GRACE,
        registry: tether::registry::RegistryConfig {
            max_live: options.max_sessions,
            observer: observer
                .clone()
                .map(|o| o as Arc<dyn tether::registry::SessionObserver>),
            ..tether::registry::RegistryConfig::default()
        },
        limits,
        shell: options.shell,
        names: names::Names::new(options.tool_prefix),
        grep_time: Duration::from_secs_f64(options.grep_time_s),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("tether-mcp")
        .build()?;
    let max_line = options.max_request_bytes;
    let outcome = runtime.block_on(async move {
        let closing = Closing::default();
        lifecycle::watch_signals(closing.clone())?;
        let terminal = Arc::new(Terminal::new(config));
        adapter::serve_stdio(Arc::clone(&terminal), closing.clone(), max_line).await;
        let cause = closing.closed().await;
        tracing::info!("stopping: {cause}; killing every session");
        let killed = terminal.shutdown().await;
        if let Err(e) = &killed {
            tracing::error!("{e}");
            eprintln!("tether mcp: {e}");
        }
        Ok::<_, ServeError>((cause, killed.is_ok()))
    });
    // A blocking read of stdin (when it is a terminal or a file) cannot be
    // cancelled; don't wait for it.
    runtime.shutdown_background();
    if let Some(observer) = &observer {
        observer.finish();
    }
    let (cause, clean) = outcome?;
    Ok(ExitCode::from(match (clean, cause) {
        (false, _) => 1,
        (true, Cause::Signal(sig)) => 128 + sig as u8,
        (true, _) => 0,
    }))
}

/// Withholds what the policy removes from commands' environments from the
/// server's own too — first, while this is the only thread: otherwise a
/// command reads them back from the server (`/proc/<pid>/environ`, the
/// owner pid being field 4 of its `TETHER_SPAWN`; issue 16). A failure is
/// reported, not fatal: the commands still never get them.
fn withhold_credentials(options: &Options) {
    let policy = EnvPolicy::new(options.env_allow.clone(), options.env_deny.clone());
    if let Err(e) = tether::withhold_environment(|name| !policy.passes(name)) {
        eprintln!(
            "tether mcp: warning: credentials kept from commands stay readable in this \
             server's own environment: {e}"
        );
    }
}

/// `--reap-on-start`: what `tether reap` does, reported on stderr.
fn reap_orphans(install: &tether::Install) {
    let reaped = tether_ledger::reap_install(install, &tether_ledger::ReapOptions::default());
    if let Some(e) = &reaped.ledger_error {
        eprintln!("tether mcp: reap on start used spawn tags only: {e}");
    }
    let report = &reaped.report;
    if !report.targets.is_empty() {
        eprintln!(
            "tether mcp: reaped {} orphaned process(es) of dead owners ({} survived)",
            report.targets.len(),
            report.survivors
        );
    }
}

/// `--cwd`, or the current directory: absolute, and a directory.
fn default_cwd(cwd: Option<PathBuf>) -> Result<PathBuf, ServeError> {
    let given = match cwd {
        Some(dir) => dir,
        None => std::env::current_dir()?,
    };
    let bad = |reason: String| ServeError::BadCwd {
        path: given.display().to_string(),
        reason,
    };
    let dir = std::fs::canonicalize(&given).map_err(|e| bad(e.to_string()))?;
    if !dir.is_dir() {
        return Err(bad("not a directory".into()));
    }
    Ok(dir)
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TETHER_LOG")
        // rmcp warns about every error response it sends; those are ours to
        // give, not faults.
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,rmcp=error"));
    // stdout is the protocol: logs go to stderr only.
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(filter)
        .try_init();
}
