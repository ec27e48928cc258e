//! What clients and the holder say to each other: one JSON object per line
//! each way, a request then its reply, as many as the client likes on one
//! connection. Bytes of output travel hex-encoded (`data_hex`), so any
//! output — not only UTF-8 — crosses intact.

use serde::{Deserialize, Serialize};

/// Longest request line the holder reads (1 MiB); a longer one is refused
/// with an error and the connection closed.
pub const MAX_REQUEST: usize = 1 << 20;

/// Most bytes one [`Request::Read`] returns (256 KiB).
pub const MAX_READ: usize = 256 << 10;

/// A request to the holder.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Who the holder is (pid, uid, version).
    Hello,
    /// Start a durable session.
    Start(Box<StartRequest>),
    /// Start a durable session with settings [`StartRequest`] has no
    /// room for (what a Rust `RunSpec` or `Command` carries). A holder
    /// that predates it refuses it as malformed — never runs the session
    /// without them.
    StartWith {
        /// What to start.
        start: Box<StartRequest>,
        /// The settings beyond it.
        with: RunSettings,
    },
    /// Every durable session the holder keeps (running and finished).
    List,
    /// One session.
    Info {
        /// Id, id prefix, or name.
        session: String,
    },
    /// Output from `offset`; with `wait_ms`, waits that long for output
    /// past `offset` (or the end of the stream) when there is none yet.
    Read {
        /// Id, id prefix, or name.
        session: String,
        /// Absolute offset to read from.
        offset: u64,
        /// Most bytes (bounded by [`MAX_READ`]).
        max_bytes: usize,
        /// Longest wait for new output, in ms (0: none).
        #[serde(default)]
        wait_ms: u64,
        /// `stderr`: a session's stderr apart (started with
        /// `separate_stderr`); otherwise its main output.
        #[serde(default)]
        stream: Option<String>,
    },
    /// Bytes for the session's stdin (or its terminal).
    Write {
        /// Id, id prefix, or name.
        session: String,
        /// The bytes, hex.
        data_hex: String,
        /// Queue them and answer at once, never waiting for the command
        /// to read (written in order in the background, as a plain MCP
        /// `run`'s `stdin`).
        #[serde(default)]
        queue: bool,
        /// With `queue`: close stdin after them.
        #[serde(default)]
        close: bool,
    },
    /// Named keys for a PTY session (`Enter`, `C-c`, …; as MCP `write`'s).
    Keys {
        /// Id, id prefix, or name.
        session: String,
        /// The keys.
        keys: Vec<String>,
    },
    /// Waits for the main process to exit or a line to match.
    Wait {
        /// Id, id prefix, or name.
        session: String,
        /// Longest wait, ms.
        timeout_ms: u64,
        /// Regex to wait for in the output.
        #[serde(default)]
        until: Option<String>,
        /// Offset the match is searched from.
        #[serde(default)]
        from: u64,
        /// `stderr`: match on stderr apart; otherwise the main output.
        #[serde(default)]
        stream: Option<String>,
        /// Also return once output past `from` went quiet this long, in ms.
        #[serde(default)]
        quiet_ms: Option<u64>,
        /// With `quiet_ms`: return at once when new output ends in a line
        /// this regex matches (a REPL's prompt).
        #[serde(default)]
        prompt: Option<String>,
        /// With `until`: keep waiting past the main process's exit while
        /// the stream is open (descendants may still print the line).
        #[serde(default)]
        through_exit: bool,
    },
    /// Closes the session's stdin after what was written (on a PTY: sends
    /// the terminal's end-of-file character).
    CloseStdin {
        /// Id, id prefix, or name.
        session: String,
    },
    /// Resizes a PTY session's terminal (its program gets `SIGWINCH`).
    Resize {
        /// Id, id prefix, or name.
        session: String,
        /// Rows.
        rows: u16,
        /// Columns.
        cols: u16,
    },
    /// The verified kill of the whole tree.
    Kill {
        /// Id, id prefix, or name.
        session: String,
        /// TERM → KILL grace in ms (default: the session's).
        #[serde(default)]
        grace_ms: Option<u64>,
        /// Root asks explicitly to kill another user's session (refused
        /// from anyone else; without it root's access is read-only).
        #[serde(default)]
        as_root: bool,
    },
    /// Sets the session's TTL to `ttl_s` from now (at most the maximum).
    Extend {
        /// Id, id prefix, or name.
        session: String,
        /// New TTL, counted from now.
        ttl_s: u64,
    },
    /// A PTY session's screen.
    Screen {
        /// Id, id prefix, or name.
        session: String,
    },
}

/// What to start, as [`Request::Start`] carries it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct StartRequest {
    /// The program and its arguments (empty when `shell` is given).
    #[serde(default)]
    pub argv: Vec<String>,
    /// A command string for the platform's shell.
    #[serde(default)]
    pub shell: Option<String>,
    /// Working directory (the client sends its own by default).
    #[serde(default)]
    pub cwd: Option<String>,
    /// The whole environment of the command (the client sends its own).
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// Unique per user while the session runs.
    #[serde(default)]
    pub name: Option<String>,
    /// Seconds to live (default [`crate::DEFAULT_TTL`], at most [`crate::MAX_TTL`]).
    #[serde(default)]
    pub ttl_s: Option<u64>,
    /// Kill a running session of the same name first.
    #[serde(default)]
    pub replace: bool,
    /// Purpose in the spawn tags (default `durable`).
    #[serde(default)]
    pub purpose: Option<String>,
    /// Rows and columns of a PTY to run on.
    #[serde(default)]
    pub pty: Option<(u16, u16)>,
    /// Memory limit, bytes.
    #[serde(default)]
    pub memory: Option<u64>,
    /// Process-count limit.
    #[serde(default)]
    pub pids: Option<u64>,
    /// CPU limit, cores.
    #[serde(default)]
    pub cpu: Option<f64>,
    /// Refuse to start unless every limit is enforced.
    #[serde(default)]
    pub require_limits: bool,
    /// TERM → KILL grace, ms.
    #[serde(default)]
    pub grace_ms: Option<u64>,
    /// The requesting process (pid, start time): the owner of record.
    #[serde(default)]
    pub owner: Option<OwnerOfRecord>,
    /// Capture stderr apart from the main output (not with `pty`).
    #[serde(default)]
    pub separate_stderr: bool,
}

/// What [`Request::StartWith`] adds to a [`StartRequest`]; each left out
/// (or `None`) is the holder's default.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    /// Kill the tree when the main process has run this long, ms
    /// (default: never; the TTL applies either way).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Kill the tree after this long without output while the main
    /// process runs, ms (default: never).
    #[serde(default)]
    pub idle_timeout_ms: Option<u64>,
    /// Stdin is the null device, not a pipe that `write` feeds.
    #[serde(default)]
    pub stdin_null: bool,
    /// Bytes of output held in memory (default 1 MiB).
    #[serde(default)]
    pub max_memory: Option<u64>,
    /// Bytes of output kept in the spill file (default 256 MiB).
    #[serde(default)]
    pub spill_cap: Option<u64>,
    /// Whether descendants the main process leaves run on (default: they
    /// do, until the session is killed or its TTL ends).
    #[serde(default)]
    pub keep_descendants: Option<bool>,
}

/// The process that asked for a durable session.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnerOfRecord {
    /// Its pid.
    pub pid: u32,
    /// Its start time (clock ticks since boot).
    pub start_time: u64,
    /// Its uid as the kernel reported it on the connection.
    #[serde(default)]
    pub uid: u32,
    /// What it is (`tether run`, `tether mcp`, `python`, …).
    #[serde(default)]
    pub purpose: String,
}

/// One durable session as the holder lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DurableInfo {
    /// Session id.
    pub id: String,
    /// Its name, if given.
    pub name: Option<String>,
    /// Always true (so a listing's rows say what they are).
    pub durable: bool,
    /// `running`, `exited`, `killed`, `timed_out`, `lost`, or `expired`
    /// (killed at its TTL).
    pub status: String,
    /// The command, as one line.
    pub command: String,
    /// Main process pid.
    pub pid: u32,
    /// Exit code, once exited.
    pub exit_code: Option<i32>,
    /// Start, Unix ms.
    pub started_at_ms: u64,
    /// TTL given (seconds).
    pub ttl_s: u64,
    /// Seconds until the TTL kill (0 once finished or expired).
    pub ttl_left_s: u64,
    /// Deadline, Unix ms.
    pub expires_at_ms: u64,
    /// Bytes of output so far (the offset a reader catches up to).
    pub output_bytes: u64,
    /// Limits applied: `memory=… (cgroup2)`…, empty when none.
    pub limits: String,
    /// What holds the tree (`subreaper`, `pidns`, …).
    pub containment: String,
    /// Who asked for it.
    pub owner: Option<OwnerOfRecord>,
    /// The holder's pid.
    pub holder_pid: u32,
    /// Bytes of stderr so far, when it is captured apart.
    #[serde(default)]
    pub stderr_bytes: Option<u64>,
    /// Its stdin takes input (running, and not closed).
    #[serde(default)]
    pub stdin_open: bool,
    /// It runs on a terminal.
    #[serde(default)]
    pub pty: bool,
}

/// Output as [`Request::Read`] returns it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadReply {
    /// The bytes, hex.
    pub data_hex: String,
    /// Offset of the first byte (later than asked when bytes were dropped).
    pub offset: u64,
    /// Where to read on.
    pub next_offset: u64,
    /// Bytes lost between the asked offset and `offset`.
    pub dropped: u64,
    /// The stream is finished and this read reached its end.
    pub eof: bool,
    /// Bytes in the stream so far.
    #[serde(default)]
    pub end_offset: u64,
    /// The bytes of the stream that are gone, if any.
    #[serde(default)]
    pub gap: Option<GapInfo>,
}

/// Bytes of a stream that are gone (beyond the spill cap, or never
/// spilled), as [`tether::output::Gap`] says it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GapInfo {
    /// Offset of the first byte gone.
    pub start: u64,
    /// Offset just past the last byte gone.
    pub end: u64,
    /// Newlines among them, when known.
    pub newlines: Option<u64>,
    /// `no_spill`, `spill_cap`, `spill_failed` or `spill_removed`.
    pub cause: String,
    /// With `spill_cap`: the cap, bytes.
    #[serde(default)]
    pub cap: Option<u64>,
    /// With `spill_failed`: what failed.
    #[serde(default)]
    pub error: Option<String>,
}

impl From<&tether::output::Gap> for GapInfo {
    fn from(gap: &tether::output::Gap) -> GapInfo {
        use tether::output::GapCause;
        let (cause, cap, error) = match &gap.cause {
            GapCause::NoSpill => ("no_spill", None, None),
            GapCause::SpillCap { cap } => ("spill_cap", Some(*cap), None),
            GapCause::SpillFailed { error } => ("spill_failed", None, Some(error.clone())),
            GapCause::SpillRemoved => ("spill_removed", None, None),
        };
        GapInfo {
            start: gap.start,
            end: gap.end,
            newlines: gap.newlines,
            cause: cause.into(),
            cap,
            error,
        }
    }
}

impl From<&GapInfo> for tether::output::Gap {
    fn from(gap: &GapInfo) -> tether::output::Gap {
        use tether::output::GapCause;
        tether::output::Gap {
            start: gap.start,
            end: gap.end,
            newlines: gap.newlines,
            cause: match gap.cause.as_str() {
                "spill_cap" => GapCause::SpillCap {
                    cap: gap.cap.unwrap_or(0),
                },
                "spill_failed" => GapCause::SpillFailed {
                    error: gap.error.clone().unwrap_or_default(),
                },
                "spill_removed" => GapCause::SpillRemoved,
                _ => GapCause::NoSpill,
            },
        }
    }
}

/// What a wait found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitReply {
    /// `exited`, `matched`, `timeout`, `quiet`.
    pub outcome: String,
    /// The session afterwards.
    pub status: String,
    /// Exit code, once exited.
    pub exit_code: Option<i32>,
    /// With `matched`: where the match starts and ends (offsets).
    #[serde(default)]
    pub matched: Option<(u64, u64)>,
}

/// What a kill did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KillReply {
    /// The session's state afterwards.
    pub status: String,
    /// The main process had ended before the kill.
    pub already_exited: bool,
    /// Descendants the kill ended.
    pub descendants_killed: u32,
}

/// A PTY session's screen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScreenReply {
    /// Visible rows.
    pub lines: Vec<String>,
    /// Cursor row, 0-based.
    pub cursor_row: u16,
    /// Cursor column, 0-based.
    pub cursor_col: u16,
    /// The terminal's rows.
    pub rows: u16,
    /// The terminal's columns.
    pub cols: u16,
    /// A full-screen program draws on the alternate screen.
    pub alternate_screen: bool,
    /// The cursor is hidden.
    pub cursor_hidden: bool,
}

/// Who the holder is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelloReply {
    /// Its pid.
    pub pid: u32,
    /// Its effective uid.
    pub uid: u32,
    /// Its version.
    pub version: String,
    /// Sessions it holds that still run.
    pub live: usize,
    /// The revision of this protocol it speaks ([`PROTOCOL`]; 0: one from
    /// before revisions were numbered).
    #[serde(default)]
    pub protocol: u32,
}

/// This protocol's revision. A holder from an older build ignores fields
/// it does not know (a `stream` would read the main output instead of
/// stderr), so a client asks for what a revision added only of a holder
/// that speaks it ([`Client`](crate::Client) refuses otherwise, naming the
/// holder). 1: stderr apart, wait options, `CloseStdin`, `Resize`,
/// `StartWith`, root's explicit `Kill` (`as_root`), queued writes.
pub const PROTOCOL: u32 = 1;

/// Every reply: `{"ok": true, "result": …}` or `{"ok": false, "error": …}`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Reply {
    /// Whether the request succeeded.
    pub ok: bool,
    /// The result, shaped by the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
}

/// A failed request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// `unknown_session`, `name_taken`, `bad_request`, `denied`,
    /// `start_failed`, `failed`.
    pub kind: String,
    /// For a person.
    pub message: String,
}

/// Bytes as lower-case hex.
pub fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 15) as usize] as char);
    }
    out
}

/// Hex back to bytes; `None` for anything else.
pub fn from_hex(text: &str) -> Option<Vec<u8>> {
    fn digit(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    }
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return None;
    }
    bytes
        .chunks(2)
        .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_every_byte() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(from_hex(&to_hex(&all)).unwrap(), all);
        assert_eq!(from_hex("abc"), None);
        assert_eq!(from_hex("zz"), None);
    }

    #[test]
    fn gaps_cross_the_wire_with_their_cause() {
        use tether::output::{Gap, GapCause};
        for cause in [
            GapCause::NoSpill,
            GapCause::SpillCap { cap: 1 << 30 },
            GapCause::SpillFailed {
                error: "disk full".into(),
            },
            GapCause::SpillRemoved,
        ] {
            let gap = Gap {
                start: 10,
                end: 4096,
                newlines: Some(7),
                cause,
            };
            let wire: GapInfo =
                serde_json::from_str(&serde_json::to_string(&GapInfo::from(&gap)).unwrap())
                    .unwrap();
            assert_eq!(Gap::from(&wire), gap);
        }
    }

    #[test]
    fn requests_of_older_clients_still_parse() {
        // A read and a wait without the fields added since (stream,
        // quiet, prompt, through_exit) mean what they meant.
        let read: Request =
            serde_json::from_str(r#"{"op":"read","session":"a","offset":0,"max_bytes":9}"#)
                .unwrap();
        assert!(matches!(read, Request::Read { stream: None, .. }));
        let wait: Request =
            serde_json::from_str(r#"{"op":"wait","session":"a","timeout_ms":5}"#).unwrap();
        assert!(matches!(
            wait,
            Request::Wait {
                stream: None,
                quiet_ms: None,
                prompt: None,
                through_exit: false,
                ..
            }
        ));
    }
}
