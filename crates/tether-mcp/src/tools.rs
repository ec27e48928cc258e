//! The tools as a model sees them: names, descriptions (when to use each,
//! what comes back, what to do next), the argument tables that produce
//! their input schemas and checks ([`params`](crate::params)), their
//! output schemas, and their annotations. (The shell the texts name is the
//! platform's — `/bin/sh` or `cmd.exe` — picked per OS.)
//!
//! Texts name a tool as `§name` (e.g. "continue with `§wait`"): with
//! `--tool-prefix` the tools are renamed, and
//! [`Names::render`](crate::names::Names::render) puts the name the client
//! sees in every such place (see [`names`](crate::names)).

use serde_json::{Value, json};

use crate::params::{Kind, Param, schema};

/// One tool.
#[derive(Clone, Debug)]
pub struct ToolSpec {
    /// The name a client calls.
    pub name: &'static str,
    /// What the model reads to decide when and how to call it.
    pub description: &'static str,
    /// Its arguments: the one source of the input schema and the checks.
    pub params: &'static [Param],
    /// JSON Schema of its (successful) structured result.
    pub output_schema: Value,
    /// Hints for clients: does it change anything, can it destroy, is a
    /// repeat harmless.
    pub annotations: Annotations,
}

impl ToolSpec {
    /// JSON Schema of its arguments (an object schema).
    pub fn input_schema(&self) -> Value {
        schema(self.params)
    }
}

/// MCP tool annotations (hints; clients must not trust them blindly).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Annotations {
    /// A human-readable title.
    pub title: &'static str,
    /// Changes nothing.
    pub read_only: bool,
    /// May destroy (kill) something.
    pub destructive: bool,
    /// Calling it again with the same arguments has no further effect.
    pub idempotent: bool,
}

/// What every waiting tool's description says about the ceiling.
macro_rules! wait_ceiling {
    () => {
        "No call waits longer than 50 s (`yield_s`, `timeout_s` at most 50), safely under \
clients' request timeouts (the TypeScript SDK's 60 s default, pydantic-ai's 300 s): to wait \
longer, call `§wait` again, as the result's hint says."
    };
}

/// Instructions sent to the client at initialization (tool names as
/// `§name`, see [`Names::render`](crate::names::Names::render)).
pub const INSTRUCTIONS: &str = concat!(
    "A terminal that cannot hang and cannot leak. `§run` starts a \
command and returns as soon as it finishes, or after `yield_s` seconds with an id while it keeps \
running (with `until`, as soon as its output matches); continue with `§read`, `§wait`, `§write` \
and `§kill`. Every process a command starts (background jobs, daemons, `setsid` escapes) belongs \
to its session: `§kill` ends all of them, and all of them die when this server exits. Output is \
shown cleaned (no colour codes, progress lines collapsed) and, when long, cut to its head and \
tail with the exact `§read` call that shows the rest. Commands run without a terminal unless \
`§run` gets `pty: true`: without one, editors and password prompts fail fast instead of hanging \
(pass `-m` to git commit, `-y` to installers); with one, REPLs, prompts and full-screen programs \
work, `§write` takes named `keys`, and `§screen` shows what the terminal displays. ",
    wait_ceiling!()
);

/// Longest any call waits (`yield_s`, `wait`'s `timeout_s`): 50 s, safely
/// under the read timeouts of common clients — the TypeScript SDK gives up
/// on a request after 60 s by default, pydantic-ai after 300 s (with 300 s
/// here, pydantic-ai timed out first and the model got a retry prompt
/// instead of the result, issue 16). Longer waits are a loop of calls;
/// the hint of a result that is still running names the next one.
pub const MAX_WAIT_S: f64 = 50.0;
/// Largest `grace_s` of `kill`: 30 s. A kill call waits for the grace plus
/// a margin of 10 s for the verified end, so it too returns within the
/// 60 s clients wait by default.
pub const MAX_GRACE_S: f64 = 30.0;
/// Largest `timeout_s` of `run`: one day.
pub const MAX_TIMEOUT_S: f64 = 86_400.0;
/// Rows and columns of a PTY: the library's bounds, written once.
const ROWS_MAX: u64 = tether::terminal::PtySize::MAX_ROWS as u64;
const COLS_MAX: u64 = tether::terminal::PtySize::MAX_COLS as u64;

const fn rows_param(default: Option<u64>, doc: &'static str) -> Param {
    Param {
        name: "rows",
        kind: Kind::Integer {
            what: "",
            min: 1,
            max: ROWS_MAX,
            default,
        },
        required: false,
        doc,
    }
}

const fn cols_param(default: Option<u64>, doc: &'static str) -> Param {
    Param {
        name: "cols",
        kind: Kind::Integer {
            what: "",
            min: 1,
            max: COLS_MAX,
            default,
        },
        required: false,
        doc,
    }
}

/// Largest `max_bytes` of `read`: 1 MiB (a page is also cut to the output budget).
pub const READ_MAX_BYTES: u64 = 1024 * 1024;

const ID: Param = Param {
    name: "id",
    kind: Kind::Id,
    required: true,
    doc: "Session id returned by `§run` (a unique prefix of 4 or more characters also works; \
          see `§list`).",
};

const fn yield_param(default: f64, doc: &'static str) -> Param {
    Param {
        name: "yield_s",
        kind: Kind::Seconds {
            min: 0.0,
            min_exclusive: false,
            max: MAX_WAIT_S,
            default: Some(default),
        },
        required: false,
        doc,
    }
}

const fn quiet_param(doc: &'static str) -> Param {
    Param {
        name: "quiet_s",
        kind: Kind::Seconds {
            min: 0.0,
            min_exclusive: false,
            max: 60.0,
            default: Some(0.2),
        },
        required: false,
        doc,
    }
}

const UNTIL_DOC: &str = "Regex (Rust syntax; ^ and $ match at line ends) that ends the call as soon \
as the output matches it, e.g. \"Listening on|ERROR\". Keeps waiting after the main process \
exits while processes it left can still print (`server &`).";

/// How the tool texts name the platform's shell (a literal, for
/// `concat!`; a `--shell` other than the default is substituted for it by
/// the adapter, see `shell::Shell::describe`).
#[cfg(unix)]
#[macro_export]
#[doc(hidden)]
macro_rules! platform_shell {
    () => {
        "/bin/sh -c"
    };
}
/// How the tool texts name the platform's shell.
#[cfg(windows)]
#[macro_export]
#[doc(hidden)]
macro_rules! platform_shell {
    () => {
        "cmd.exe /d /s /c (Windows cmd syntax)"
    };
}

/// What `write`'s `eof` sends a PTY session: the platform's end of input
/// for a terminal read (Unix: the `VEOF` character; a Windows console:
/// Ctrl-Z, then Enter).
#[cfg(unix)]
#[macro_export]
#[doc(hidden)]
macro_rules! platform_pty_eof {
    () => {
        "Ctrl-D"
    };
}
/// What `write`'s `eof` sends a PTY session.
#[cfg(windows)]
#[macro_export]
#[doc(hidden)]
macro_rules! platform_pty_eof {
    () => {
        "Ctrl-Z and Enter"
    };
}

/// `run`'s arguments.
pub const RUN: &[Param] = &[
    Param {
        name: "command",
        kind: Kind::Text,
        required: false,
        doc: concat!(
            "Shell command line, run with ",
            platform_shell!(),
            ". Give this or argv."
        ),
    },
    Param {
        name: "argv",
        kind: Kind::StringArray,
        required: false,
        doc: "Program and arguments, run without a shell. Give this or command.",
    },
    Param {
        name: "cwd",
        kind: Kind::Text,
        required: false,
        doc: "Working directory; relative paths are taken from the server's default directory.",
    },
    Param {
        name: "env",
        kind: Kind::StringMap,
        required: false,
        doc: "Environment variables to set on top of the server's environment (always passed, \
              even names the server removes by default).",
    },
    Param {
        name: "timeout_s",
        kind: Kind::Seconds {
            min: 0.0,
            min_exclusive: true,
            max: MAX_TIMEOUT_S,
            default: Some(600.0),
        },
        required: false,
        doc: "Hard limit in seconds: when the main process has run this long, its whole tree is \
              killed (status timed_out). For long-lived servers give a large value.",
    },
    yield_param(
        10.0,
        "Most seconds to wait for the command to finish (or match `until`) before returning \
         with status running; it keeps running either way (continue with `§wait`).",
    ),
    Param {
        name: "until",
        kind: Kind::Regex,
        required: false,
        doc: UNTIL_DOC,
    },
    Param {
        name: "stdin",
        kind: Kind::Text,
        required: false,
        doc: "Text written to the command's standard input, which is then closed (unless \
              keep_stdin_open).",
    },
    Param {
        name: "durable",
        kind: Kind::Bool { default: false },
        required: false,
        doc: "Start it durable: it outlives this server (an agent restart, a new chat), held by \
              the user's tether holder until `ttl_s`, and any later `tether mcp` lists it and \
              can `§read`, `§write`, `§wait`, `§kill` and `§screen` it (as can the CLI: tether \
              sessions, tether attach, tether kill), with the same arguments as any session. For \
              dev servers, watchers, long builds. The call returns at once \
              with its id (with `until`: at that line, up to `yield_s`). Its stdin stays open for \
              `§write` unless `stdin` is given without keep_stdin_open. Bounded by `ttl_s`, not \
              `timeout_s`; no `quiet_s`.",
    },
    Param {
        name: "name",
        kind: Kind::Text,
        required: false,
        doc: "With durable: a name for it (usable wherever an id is), unique among the user's \
              running durable sessions.",
    },
    Param {
        name: "ttl_s",
        kind: Kind::Integer {
            what: "seconds: ",
            min: 1,
            max: 604_800,
            default: None,
        },
        required: false,
        doc: "With durable: kill it after this many seconds (default 86400 = 24 h, at most \
              604800 = 7 days).",
    },
    Param {
        name: "keep_stdin_open",
        kind: Kind::Bool { default: false },
        required: false,
        doc: "Keep standard input open for `§write` (interactive programs: cat, python3 -i, a \
              REPL); the call then also returns once output has gone quiet (quiet_s). Without it \
              and without `stdin`, the command's stdin is /dev/null.",
    },
    quiet_param(
        "With keep_stdin_open and no `until`: return once output arrived and then stopped for \
         this many seconds (a prompt is waiting); 0 turns it off.",
    ),
    Param {
        name: "separate_stderr",
        kind: Kind::Bool { default: false },
        required: false,
        doc: "Capture stderr apart from stdout (results then have `stderr`; read it with \
              `§read {\"stream\": \"stderr\"}`). Default: one stream in arrival order.",
    },
    Param {
        name: "pty",
        kind: Kind::Bool { default: false },
        required: false,
        doc: "Run on a pseudo-terminal: for programs that need one — REPLs (python3, node, \
              psql), prompts (ssh, sudo, installers asking questions), full-screen programs \
              (top, htop, vim, less) and anything that checks isatty or buffers when piped. \
              Stdin stays open for `§write` (keys too); results of full-screen programs carry \
              the screen's text rows (screen); the `§screen` tool shows the terminal. TERM=xterm-256color. Not with \
              separate_stderr.",
    },
    rows_param(Some(30), "With pty: terminal rows."),
    cols_param(Some(120), "With pty: terminal columns."),
    Param {
        name: "memory",
        kind: Kind::Size { max: 1 << 50 },
        required: false,
        doc: "Memory limit for the command and everything it starts, e.g. \"512M\", \"2G\" (or \
              bytes). Past it the kernel kills one of its processes (the result then says \
              limit_hit: memory); the server is never the one killed. Default: the server's \
              --memory, else none.",
    },
    Param {
        name: "pids",
        kind: Kind::Integer {
            what: "",
            min: 1,
            max: 4_194_304,
            default: None,
        },
        required: false,
        doc: "Most processes the command's tree may have at once: past it fork fails (a fork \
              bomb is contained; limit_hit: pids). Default: the server's --pids, else none.",
    },
    Param {
        name: "cpu",
        kind: Kind::Number {
            unit: "cores",
            min: tether::MIN_CPU,
            max: 1024.0,
        },
        required: false,
        doc: "CPU limit in cores (0.5: half a core); the tree is throttled to it. Default: the \
              server's --cpu, else none.",
    },
    Param {
        name: "require_limits",
        kind: Kind::Bool { default: false },
        required: false,
        doc: "Refuse to run unless every limit (memory, pids, cpu: this call's or the server's \
              defaults) is enforced here: the call fails with the reason and the command does \
              not start. Default: the server's --require-limits; otherwise a limit that cannot \
              be enforced is reported in the result's limits as enforced: none, with the reason.",
    },
];

const STREAM: Param = Param {
    name: "stream",
    kind: Kind::Choice {
        values: &["output", "stderr"],
        default: "output",
    },
    required: false,
    doc: "Which stream: output (the merged stream, or stdout when the session was started with \
          separate_stderr) or stderr (only then).",
};

/// `read`'s arguments.
pub const READ: &[Param] = &[
    ID,
    Param {
        name: "offset",
        kind: Kind::Integer {
            what: "a byte offset: ",
            min: 0,
            max: u64::MAX,
            default: None,
        },
        required: false,
        doc: "Absolute byte offset to read from (default: where the last output shown for this \
              id ended; with head_lines or grep: 0).",
    },
    Param {
        name: "max_bytes",
        kind: Kind::Integer {
            what: "",
            min: 1,
            max: READ_MAX_BYTES,
            default: None,
        },
        required: false,
        doc: "Most bytes to read (default and upper bound: the server's output budget per \
              result, set with --output-budget; continue from next_offset).",
    },
    Param {
        name: "tail_lines",
        kind: Kind::Integer {
            what: "",
            min: 1,
            max: 100_000,
            default: None,
        },
        required: false,
        doc: "Show the last N lines of the output (within the budget).",
    },
    Param {
        name: "head_lines",
        kind: Kind::Integer {
            what: "",
            min: 1,
            max: 100_000,
            default: None,
        },
        required: false,
        doc: "Show the first N lines from `offset` (default 0), within the budget.",
    },
    Param {
        name: "grep",
        kind: Kind::Regex,
        required: false,
        doc: "Regex: show only the lines that match (searching all the output from `offset`, \
              default 0), each with `context` lines around it and its offset and line number. \
              One call searches for at most a few seconds: a partial result (partial: true) \
              says where it stopped, and its hint is the call that goes on from there.",
    },
    Param {
        name: "context",
        kind: Kind::Integer {
            what: "",
            min: 0,
            max: 20,
            default: Some(2),
        },
        required: false,
        doc: "With grep: lines shown before and after each match.",
    },
    Param {
        name: "max_matches",
        kind: Kind::Integer {
            what: "",
            min: 1,
            max: 10_000,
            default: Some(50),
        },
        required: false,
        doc: "With grep: most matches listed (all are counted).",
    },
    Param {
        name: "first_line",
        kind: Kind::Integer {
            what: "a line number: ",
            min: 1,
            max: u64::MAX,
            default: None,
        },
        required: false,
        doc: "With grep and offset: the line number of the line at `offset`, so matches keep \
              their numbers (a partial result's hint passes it on).",
    },
    Param {
        name: "raw",
        kind: Kind::Bool { default: false },
        required: false,
        doc: "Return the exact bytes (no cleaning): as text when they are UTF-8, else base64.",
    },
    STREAM,
];

/// `write`'s arguments.
pub const WRITE: &[Param] = &[
    ID,
    Param {
        name: "data",
        kind: Kind::Text,
        required: false,
        doc: "Text to write to stdin.",
    },
    Param {
        name: "keys",
        kind: Kind::StringArray,
        required: false,
        doc: "PTY sessions: keys pressed after `data`, in order, by name: Enter, Tab, \
              Shift-Tab, Esc, Backspace, Space, Up, Down, Left, Right, Home, End, PageUp, \
              PageDown, Insert, Delete, F1-F12, Ctrl-A..Ctrl-Z (Ctrl-C interrupts, Ctrl-D is \
              end of input, Ctrl-Z suspends), Alt-<char>, or one character as itself. E.g. \
              [\"Down\", \"Down\", \"Enter\"] or [\"Esc\", \":\", \"q\", \"Enter\"] — never \
              write escape sequences yourself.",
    },
    Param {
        name: "submit",
        kind: Kind::Bool { default: false },
        required: false,
        doc: "Press Enter after data and keys (a newline; on a PTY, the Enter key).",
    },
    Param {
        name: "eof",
        kind: Kind::Bool { default: false },
        required: false,
        doc: concat!(
            "End the input afterwards: a pipe is closed; a PTY gets its end-of-file \
              character (",
            platform_pty_eof!(),
            "), which ends a read at the start of a line."
        ),
    },
    yield_param(
        5.0,
        "Most seconds to collect output after writing; the call returns sooner when the output \
         goes quiet (quiet_s), matches `until`, or the command exits.",
    ),
    Param {
        name: "until",
        kind: Kind::Regex,
        required: false,
        doc: "Regex that ends the call as soon as output produced after this write matches it \
              (the quiet rule is then off unless quiet_s is given).",
    },
    quiet_param(
        "Return once output arrived after the write and then stopped for this many seconds (a \
         REPL's answer and prompt are in); 0 turns it off.",
    ),
];

/// `wait`'s arguments.
pub const WAIT: &[Param] = &[
    ID,
    Param {
        name: "timeout_s",
        kind: Kind::Seconds {
            min: 0.0,
            min_exclusive: false,
            max: MAX_WAIT_S,
            default: None,
        },
        required: true,
        doc: "Most seconds this call waits (at most 50, under clients' request timeouts); if \
              the session is still running then, call `§wait` again.",
    },
    Param {
        name: "until",
        kind: Kind::Regex,
        required: false,
        doc: UNTIL_DOC,
    },
    Param {
        name: "offset",
        kind: Kind::Integer {
            what: "a byte offset: ",
            min: 0,
            max: u64::MAX,
            default: None,
        },
        required: false,
        doc: "With until: match output from this byte offset (default: the end of the last \
              match in this session, 0 before any — so a line already shown still matches).",
    },
    STREAM,
];

/// `kill`'s arguments.
pub const KILL: &[Param] = &[
    ID,
    Param {
        name: "grace_s",
        kind: Kind::Seconds {
            min: 0.0,
            min_exclusive: false,
            max: MAX_GRACE_S,
            default: Some(2.0),
        },
        required: false,
        doc: "Seconds between SIGTERM and SIGKILL (at most 30, so the call returns within \
              clients' request timeouts).",
    },
];

/// `list` takes nothing.
pub const LIST: &[Param] = &[];

/// `screen`'s arguments.
pub const SCREEN: &[Param] = &[
    ID,
    rows_param(
        None,
        "Resize the terminal to this many rows first (give cols too); the program gets \
         SIGWINCH and redraws.",
    ),
    cols_param(None, "Resize to this many columns first (give rows too)."),
];

/// Every tool this server offers (texts name tools as `§name`).
pub fn all() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "run",
            description: concat!(
                "Run a shell command (`command`, via ",
                platform_shell!(),
                ") or a program with arguments \
(`argv`). Returns as soon as the command's main process exits: {status: exited | killed | \
timed_out, exit_code, output, id, signal, note, duration_ms, next_offset, truncated_bytes, \
descendants_alive}. If it is still running after `yield_s` seconds, returns {status: \
\"running\", output so far, id}: it keeps running, and you continue with `§wait`, `§read`, \
`§write` (stdin) or `§kill`. Servers and watchers: give `until` with their ready line (e.g. \
{\"command\": \"npm run dev\", \"until\": \"ready|error\", \"yield_s\": 50}): the call returns \
the moment it appears, even from a process started with `&`. Every process the command starts \
stays contained: `§kill` ends them all. Output merges stdout and stderr in order \
(separate_stderr splits them). Status failed_start (an error result) means the program or cwd \
was not found. `stdin` feeds input (written, then closed); `keep_stdin_open` lets you talk to an \
interactive program with `§write`. Commands get no terminal and no editor (git commit needs -m) \
unless `pty` is true: then the command runs on a real terminal — choose it for REPLs, programs \
that prompt (ssh, sudo, installers), full-screen programs (top, vim, less) and anything that \
refuses or buffers without a terminal; drive it with `§write` (text and named `keys`) and look \
at it with `§screen`. If a cancelled call had started a command, that command is killed. ",
                wait_ceiling!(),
                " With a progressToken the call also reports progress every second."
            ),
            params: RUN,
            output_schema: session_result_schema(true, &[]),
            annotations: Annotations {
                title: "Run a command",
                read_only: false,
                destructive: true,
                idempotent: false,
            },
        },
        ToolSpec {
            name: "read",
            description: "Read a session's output: {status, output, id, offset, next_offset, \
end_offset, eof, dropped}. Without `offset` it continues where the last output shown for this \
id ended, so repeated calls page through new output; a page is at most the server's output \
budget. Use the call an omission marker names to see bytes cut from a result. \
`tail_lines`/`head_lines` show the last/first lines; `grep` searches all the output and lists \
each matching line with context, offset and line number (matches: [...], match_count) — for a \
few seconds per call at most: a partial result (partial: true) ends where it stopped, and its \
hint is the exact call that goes on; `raw` returns the exact bytes (base64 when not UTF-8); \
`stream: \"stderr\"` reads stderr of a session started with separate_stderr. Output that is \
gone (beyond the spill cap, or a spill file that could not be written) is reported as `gap` \
{start, end, bytes, lines, cause}, never skipped silently. Returns at once; to wait for output \
use `§wait`.",
            params: READ,
            output_schema: read_result_schema(),
            annotations: Annotations {
                title: "Read output",
                read_only: true,
                destructive: false,
                idempotent: true,
            },
        },
        ToolSpec {
            name: "write",
            description: concat!(
                "Write to a running session's standard input (it must have been started with \
keep_stdin_open or pty), then return the output it produces: as soon as that output goes quiet \
for quiet_s (a REPL's answer and its next prompt are in), matches `until`, or the command \
exits, and at most after `yield_s`. Returns {status, exit_code, output, id, ...}. \
`data` is text; on a PTY session `keys` presses named keys after it (Enter, Ctrl-C, Up, Esc, \
F5, ...). Set `submit` to press Enter and `eof` to end the input afterwards (a pipe is closed; \
a PTY gets ",
                platform_pty_eof!(),
                "). Input the command has not read yet is written in the background, in order. ",
                wait_ceiling!()
            ),
            params: WRITE,
            output_schema: session_result_schema(false, &[]),
            annotations: Annotations {
                title: "Write to stdin",
                read_only: false,
                destructive: false,
                idempotent: false,
            },
        },
        ToolSpec {
            name: "wait",
            description: concat!(
                "Wait for a session: returns when its main process exits, when its output \
matches `until` (a regex), or after `timeout_s` with status running (not an error: call \
`§wait` again, `§read`, or `§kill`). Returns {status, exit_code, output (new since the last \
output shown), id, matched, match: {text, start, end}, ...}. `until` looks at output from \
`offset` (default: after the last match in this session, so a ready line that an earlier result \
already showed still matches), and keeps waiting after the main process exits while processes \
it left can still print. When the pattern only appeared before where it looked, the result says \
where (earlier_match). ",
                wait_ceiling!(),
                " A long wait is a loop: `§wait` with timeout_s 50 until the status is not \
running (with a progressToken each call also reports progress every second)."
            ),
            params: WAIT,
            output_schema: session_result_schema(false, &[]),
            annotations: Annotations {
                title: "Wait for a session",
                read_only: true,
                destructive: false,
                idempotent: true,
            },
        },
        ToolSpec {
            name: "kill",
            description: "Kill a session's whole process tree (SIGTERM, then SIGKILL after \
`grace_s`), including background processes it left running, and verify that nothing survives. \
Returns the final result with the output not yet shown: {status, exit_code, output, id, signal, \
already_exited, descendants_killed, ...}. Also ends the leftovers of a command that already \
exited.",
            params: KILL,
            output_schema: session_result_schema(false, &["already_exited", "descendants_killed"]),
            annotations: Annotations {
                title: "Kill a session",
                read_only: false,
                destructive: true,
                idempotent: true,
            },
        },
        ToolSpec {
            name: "list",
            description: "List every session of this server, oldest first: {sessions: [{id, \
status, exit_code, command, signal, duration_ms, output_bytes, unread_bytes, descendants_alive, \
stdin_open}]}. Finished sessions stay listed for 30 minutes.",
            params: LIST,
            output_schema: list_result_schema(),
            annotations: Annotations {
                title: "List sessions",
                read_only: true,
                destructive: false,
                idempotent: true,
            },
        },
        ToolSpec {
            name: "screen",
            description: "Show what a PTY session's terminal displays now (`§run` with pty: \
true): {id, status, rows, cols, cursor_row, cursor_col (1-based), alternate_screen, \
cursor_hidden, screen (the text rows, trailing blank rows left out)}. Use it for full-screen and \
redrawing programs (top, htop, vim, less, menus, progress displays), whose output stream is a \
mess of cursor moves; alternate_screen true means a full-screen program is drawing. With rows \
and cols it resizes the terminal first and waits briefly for the redraw. Send keys with \
`§write`.",
            params: SCREEN,
            output_schema: screen_result_schema(),
            annotations: Annotations {
                title: "Show a terminal's screen",
                read_only: false,
                destructive: false,
                idempotent: true,
            },
        },
    ]
}

const STATUS: &[&str] = &["running", "exited", "killed", "timed_out", "lost"];

fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// A tool's output schema, covering every result it returns: a
/// successful one has the fields in `required`; an error result
/// (`isError`) has `error` — what went wrong and what to send instead —
/// and, for a `run` that could not start, `status: "failed_start"`, `cwd`
/// and `hint`. Clients validate error results too: the TypeScript SDK
/// (1.32) threw "Structured content does not match the tool's output
/// schema" for every error result before (issue 16), so the model saw the
/// SDK's complaint instead of tether's message.
fn result_schema(mut properties: Value, required: &[&str]) -> Value {
    properties["error"] = json!({
        "type": "string",
        "description": "Error results (isError) only: what went wrong and what to send instead.",
    });
    json!({
        "type": "object",
        "properties": properties,
        "additionalProperties": false,
        "anyOf": [{"required": required}, {"required": ["error"]}],
    })
}

/// Output that is gone (see `tether::output::Gap`), in results that
/// cover it.
fn gap_schema() -> Value {
    object(
        json!({
            "start": {"type": "integer", "minimum": 0, "description": "Offset of the first byte gone."},
            "end": {"type": "integer", "minimum": 0, "description": "Offset just past the last byte gone."},
            "bytes": {"type": "integer", "minimum": 0},
            "lines": {"type": ["integer", "null"], "minimum": 0, "description": "Newlines among them (null: unknown)."},
            "cause": {"type": "string", "description": "Why they are gone: the spill cap, or the error writing the spill file."},
        }),
        &["start", "end", "bytes", "lines", "cause"],
    )
}

/// Schema of the results of run, write, wait and kill (`failed_start`:
/// `run`, which can fail to start; `required_extra`: fields that tool
/// always has).
fn session_result_schema(failed_start: bool, required_extra: &[&str]) -> Value {
    let offsets = json!({"type": "object", "properties": {
        "text": {"type": "string"},
        "start": {"type": "integer", "minimum": 0},
        "end": {"type": "integer", "minimum": 0},
    }, "required": ["text", "start", "end"], "additionalProperties": false});
    let mut required = vec![
        "status",
        "exit_code",
        "output",
        "id",
        "signal",
        "duration_ms",
    ];
    required.extend_from_slice(required_extra);
    let mut status = STATUS.to_vec();
    if failed_start {
        status.push("failed_start");
    }
    let mut properties = json!({
            "status": {"type": "string", "enum": status},
            "exit_code": {"type": ["integer", "null"]},
            "output": {"type": "string", "description": "Output not shown before, cleaned, within the budget."},
            "id": {"type": "string"},
            "signal": {"type": ["string", "null"]},
            "note": {"type": "string"},
            "duration_ms": {"type": "integer", "minimum": 0},
            "next_offset": {"type": "integer", "minimum": 0},
            "truncated_bytes": {"type": "integer", "minimum": 0},
            "dropped_bytes": {"type": "integer", "minimum": 0},
            "gap": gap_schema(),
            "output_error": {"type": "string"},
            "stderr": {"type": "string"},
            "stderr_next_offset": {"type": "integer", "minimum": 0},
            "stderr_truncated_bytes": {"type": "integer", "minimum": 0},
            "matched": {"type": "boolean"},
            "match": offsets,
            "earlier_match": offsets,
            "quiet": {"type": "boolean", "description": "Returned because output went quiet."},
            "already_exited": {"type": "boolean"},
            "descendants_killed": {"type": "integer", "minimum": 0},
            "descendants_alive": {"type": "array", "items": {
                "type": "object",
                "properties": {"pid": {"type": "integer"}, "command": {"type": "string"}},
                "required": ["pid", "command"],
                "additionalProperties": false,
            }},
            "stdin_open": {"type": "boolean"},
            "stdin_error": {"type": "string"},
            "waiting_for_input": {"type": "string"},
            "hint": {"type": "string"},
            "screen": {"type": "string", "description": "PTY sessions drawing full-screen (alternate screen): the terminal's text rows."},
            "limits": limits_schema(),
            "limit_hit": limit_hit_schema(),
            "limits_escaped": {"type": "array", "description": "Processes found outside the session's cgroups (out of its limits); moved back while the session ran (moved_back), killed with it.", "items": {
                "type": "object",
                "properties": {"pid": {"type": "integer"}, "cgroup": {"type": "string"}, "moved_back": {"type": "boolean"}, "times_moved_back": {"type": "integer"}},
                "required": ["pid", "cgroup"],
                "additionalProperties": false,
            }},
    });
    if failed_start {
        properties["cwd"] =
            json!({"type": "string", "description": "failed_start: the working directory tried."});
    }
    result_schema(properties, &required)
}

/// A session's limits: per limit asked for, its value and how it is
/// enforced (`none` with the reason).
fn limits_schema() -> Value {
    let limit = object(
        json!({
            "value": {"type": "number"},
            "enforced": {"type": "string", "enum": ["cgroup2", "cgroup1", "job", "rlimit", "none"]},
            "reason": {"type": "string"},
        }),
        &["value", "enforced"],
    );
    let mut schema = object(
        json!({
            "memory": limit,
            "pids": limit,
            "cpu": limit,
            "cgroup": {"type": "string"},
            "via": {"type": "string", "description": "What gave the limits beyond the server's own cgroup: `systemd scope …` when it asked systemd for a delegated cgroup."},
        }),
        &[],
    );
    schema["description"] = json!(
        "Per limit: value (bytes, processes, cores) and how it is enforced; `none` with the reason."
    );
    schema
}

fn limit_hit_schema() -> Value {
    json!({"type": ["string", "null"], "enum": ["memory", "pids", null],
           "description": "The limit the session ran into (memory: the kernel killed processes of it; pids: forks failed)."})
}

fn screen_result_schema() -> Value {
    result_schema(
        json!({
            "id": {"type": "string"},
            "status": {"type": "string", "enum": STATUS},
            "rows": {"type": "integer", "minimum": 1},
            "cols": {"type": "integer", "minimum": 1},
            "cursor_row": {"type": "integer", "minimum": 1},
            "cursor_col": {"type": "integer", "minimum": 1},
            "alternate_screen": {"type": "boolean"},
            "cursor_hidden": {"type": "boolean"},
            "screen": {"type": "string"},
        }),
        &[
            "id",
            "status",
            "rows",
            "cols",
            "cursor_row",
            "cursor_col",
            "alternate_screen",
            "cursor_hidden",
            "screen",
        ],
    )
}

fn read_result_schema() -> Value {
    result_schema(
        json!({
            "status": {"type": "string", "enum": STATUS},
            "output": {"type": "string"},
            "id": {"type": "string"},
            "stream": {"type": "string", "enum": ["output", "stderr"]},
            "offset": {"type": "integer", "minimum": 0},
            "next_offset": {"type": "integer", "minimum": 0},
            "end_offset": {"type": "integer", "minimum": 0},
            "eof": {"type": "boolean"},
            "dropped": {"type": "integer", "minimum": 0},
            "encoding": {"type": "string", "enum": ["utf-8", "base64"]},
            "lines": {"type": "integer", "minimum": 0},
            "match_count": {"type": "integer", "minimum": 0},
            "matches": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "line": {"type": ["integer", "null"], "minimum": 1},
                    "offset": {"type": "integer", "minimum": 0},
                    "text": {"type": "string"},
                },
                "required": ["line", "offset", "text"],
                "additionalProperties": false,
            }},
            "gap": gap_schema(),
            "partial": {"type": "boolean", "description": "grep: the search stopped before the end (at next_offset); the hint is the call that goes on."},
            "note": {"type": "string"},
            "hint": {"type": "string"},
        }),
        &[
            "status",
            "output",
            "id",
            "offset",
            "next_offset",
            "end_offset",
            "eof",
        ],
    )
}

fn list_result_schema() -> Value {
    result_schema(
        json!({"sessions": {"type": "array", "items": object(json!({
            "id": {"type": "string"},
            "status": {"type": "string", "enum": STATUS},
            "exit_code": {"type": ["integer", "null"]},
            "command": {"type": "string"},
            "signal": {"type": ["string", "null"]},
            "duration_ms": {"type": "integer", "minimum": 0},
            "output_bytes": {"type": "integer", "minimum": 0},
            "unread_bytes": {"type": "integer", "minimum": 0},
            "descendants_alive": {"type": "integer", "minimum": 0},
            "stdin_open": {"type": "boolean"},
            "limits": limits_schema(),
            "limit_hit": limit_hit_schema(),
        }), &["id", "status", "exit_code", "command", "signal", "duration_ms", "output_bytes",
              "unread_bytes", "descendants_alive", "stdin_open"])}}),
        &["sessions"],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_object_schemas_and_a_unique_name() {
        let tools = all();
        let mut names: Vec<&str> = tools.iter().map(|t| t.name).collect();
        names.sort();
        assert_eq!(
            names,
            ["kill", "list", "read", "run", "screen", "wait", "write"]
        );
        for tool in &tools {
            let input = tool.input_schema();
            assert_eq!(input["type"], "object", "{}", tool.name);
            assert_eq!(input["additionalProperties"], false);
            assert_eq!(tool.output_schema["type"], "object", "{}", tool.name);
            let shapes = tool.output_schema["anyOf"].as_array().unwrap();
            assert_eq!(shapes.len(), 2, "{}: a result and an error", tool.name);
            assert_eq!(shapes[1]["required"], json!(["error"]));
            for required in shapes
                .iter()
                .flat_map(|shape| shape["required"].as_array().unwrap())
            {
                let name = required.as_str().unwrap();
                assert!(
                    tool.output_schema["properties"].get(name).is_some(),
                    "{}: required output {name} is not a property",
                    tool.name
                );
            }
        }
    }

    #[test]
    fn limits_are_written_once() {
        // The schema's numbers come from the same table the checks use.
        let run = all().into_iter().find(|t| t.name == "run").unwrap();
        let schema = run.input_schema();
        assert_eq!(schema["properties"]["timeout_s"]["maximum"], MAX_TIMEOUT_S);
        assert_eq!(schema["properties"]["yield_s"]["maximum"], MAX_WAIT_S);
        let read = all().into_iter().find(|t| t.name == "read").unwrap();
        assert_eq!(
            read.input_schema()["properties"]["max_bytes"]["maximum"],
            READ_MAX_BYTES
        );
    }
}
