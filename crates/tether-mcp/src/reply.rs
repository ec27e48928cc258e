//! What a tool answers: a structured result (typed, so its fields come in
//! a fixed order — `status`, `exit_code`, `output` first — and match the
//! tool's output schema), and a short text for humans and for clients that
//! show the model only text: a status line, the output, the hints. Not a
//! JSON copy of the structured result.

use serde::Serialize;
use serde_json::{Value, json};
use tether_ledger::LimitsRecord;

/// A tool's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    /// The structured result.
    pub body: Value,
    /// The text content.
    pub text: String,
    /// The call failed (bad arguments, unknown id, failed start, …).
    pub is_error: bool,
}

impl Reply {
    /// A successful result.
    pub fn ok(body: &impl Serialize, text: String) -> Reply {
        Reply {
            body: serde_json::to_value(body).expect("results serialize"),
            text,
            is_error: false,
        }
    }

    /// An error the model can act on.
    pub fn error(message: impl Into<String>) -> Reply {
        let message = message.into();
        Reply {
            body: json!({ "error": message }),
            text: message,
            is_error: true,
        }
    }

    /// An error with more fields than its message.
    pub fn error_with(body: &impl Serialize, text: String) -> Reply {
        Reply {
            is_error: true,
            ..Reply::ok(body, text)
        }
    }
}

/// Start and end of a match, and its text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Span {
    /// The matched text, cleaned.
    pub text: String,
    /// Offset of its first byte.
    pub start: u64,
    /// Offset just past it.
    pub end: u64,
}

/// Output that is gone (see [`tether::output::Gap`]), as results report it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GapReport {
    /// Offset of the first byte gone.
    pub start: u64,
    /// Offset just past the last byte gone.
    pub end: u64,
    /// Bytes gone.
    pub bytes: u64,
    /// Newlines among them, when known.
    pub lines: Option<u64>,
    /// Why they are gone, in words (the spill cap, or the spill file's
    /// write error).
    pub cause: String,
}

impl From<&tether::output::Gap> for GapReport {
    fn from(gap: &tether::output::Gap) -> GapReport {
        GapReport {
            start: gap.start,
            end: gap.end,
            bytes: gap.len(),
            lines: gap.newlines,
            cause: gap.cause.to_string(),
        }
    }
}

impl GapReport {
    /// One sentence for the text content.
    pub fn sentence(&self) -> String {
        format!(
            "{} bytes of output (offsets {}..{}{}) are gone: {}",
            self.bytes,
            self.start,
            self.end,
            self.lines
                .map(|n| format!(", {n} lines"))
                .unwrap_or_default(),
            self.cause
        )
    }
}

/// A process of the session other than the main one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Alive {
    /// Its pid.
    pub pid: u32,
    /// Its command line (cut to 200 bytes).
    pub command: String,
}

/// The result of `run`, `write`, `wait` and `kill`: where the session
/// stands and the output not shown before.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SessionReport {
    /// `running`, `exited`, `killed`, `timed_out` or `lost`.
    pub status: &'static str,
    /// The exit code, once the main process exited normally.
    pub exit_code: Option<i32>,
    /// Output not shown before (cleaned, within the budget).
    pub output: String,
    /// The session id.
    pub id: String,
    /// The signal that ended the main process, by name.
    pub signal: Option<String>,
    /// A sentence explaining the ending.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Time from start to now or to the exit.
    pub duration_ms: u64,
    /// Where the output shown ends.
    pub next_offset: u64,
    /// Bytes between head and tail that were not shown.
    pub truncated_bytes: u64,
    /// Bytes gone (beyond the spill cap, or lost with a spill file that
    /// failed) before they could be shown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dropped_bytes: Option<u64>,
    /// Those bytes: where, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gap: Option<GapReport>,
    /// The output could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_error: Option<String>,
    /// Stderr not shown before, when captured apart.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    /// Where the stderr shown ends.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr_next_offset: Option<u64>,
    /// Stderr bytes not shown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr_truncated_bytes: Option<u64>,
    /// Whether `until` matched (calls that had one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched: Option<bool>,
    /// Where it matched.
    #[serde(rename = "match", skip_serializing_if = "Option::is_none")]
    pub matched_at: Option<Span>,
    /// The pattern matched before where this call looked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub earlier_match: Option<Span>,
    /// The call returned because the output went quiet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quiet: Option<bool>,
    /// `kill`: the main process had ended before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub already_exited: Option<bool>,
    /// `kill`: processes other than the main one that were killed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub descendants_killed: Option<u32>,
    /// Processes of the session still alive besides the main one.
    pub descendants_alive: Vec<Alive>,
    /// Stdin is open for `write`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stdin_open: bool,
    /// What went wrong with (or is still going on with) this call's input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdin_error: Option<String>,
    /// The prompt the command seems to wait at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_for_input: Option<String>,
    /// What to do next.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// A PTY session drawing full-screen: its terminal's text rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub screen: Option<String>,
    /// The session's limits and how each is enforced (sessions with
    /// limits).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<LimitsRecord>,
    /// The limit the session ran into: `memory` or `pids` (sessions with
    /// limits; null while none was).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_hit: Option<Option<&'static str>>,
    /// Processes found outside the session's cgroups (out of its limits),
    /// and where each was; absent when none was.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub limits_escaped: Vec<Escaped>,
}

/// A process found outside its session's cgroups.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Escaped {
    /// Its pid.
    pub pid: u32,
    /// Where it was, per hierarchy (`memory:/user.slice cgroup2:/`).
    pub cgroup: String,
    /// Whether the keeper moved it back into the session's cgroups.
    pub moved_back: bool,
    /// How many times (it can leave again).
    pub times_moved_back: u32,
}

/// The result of `screen`: what a PTY session's terminal displays.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ScreenReport {
    /// The session id.
    pub id: String,
    /// Where the session stands.
    pub status: &'static str,
    /// Terminal rows.
    pub rows: u16,
    /// Terminal columns.
    pub cols: u16,
    /// Cursor row, 1-based.
    pub cursor_row: u16,
    /// Cursor column, 1-based.
    pub cursor_col: u16,
    /// A full-screen program is drawing.
    pub alternate_screen: bool,
    /// The cursor is hidden.
    pub cursor_hidden: bool,
    /// The text rows, trailing blank rows left out.
    pub screen: String,
}

impl ScreenReport {
    /// A status line, then the screen.
    pub fn text(&self) -> String {
        let mut text = format!(
            "[{}] {}; terminal {}x{}, cursor at row {} col {}{}\n",
            self.id,
            self.status,
            self.rows,
            self.cols,
            self.cursor_row,
            self.cursor_col,
            if self.alternate_screen {
                "; full-screen program (alternate screen)"
            } else {
                ""
            }
        );
        text.push_str(&self.screen);
        if !self.screen.is_empty() {
            text.push('\n');
        }
        text
    }
}

impl SessionReport {
    /// The text content: a status line, the output, the notes and hints.
    pub fn text(&self) -> String {
        let mut text = format!("[{}] {}", self.id, self.status_line());
        if let Some(span) = &self.matched_at {
            text.push_str(&format!(
                "; matched {:?} at offset {}",
                span.text.trim_end(),
                span.start
            ));
        }
        text.push('\n');
        if !self.output.is_empty() {
            text.push_str(&self.output);
            if !self.output.ends_with('\n') {
                text.push('\n');
            }
        }
        if let Some(screen) = &self.screen {
            text.push_str("--- screen ---\n");
            text.push_str(screen);
            text.push('\n');
        }
        if let Some(stderr) = self.stderr.as_deref().filter(|s| !s.is_empty()) {
            text.push_str("--- stderr ---\n");
            text.push_str(stderr);
            if !stderr.ends_with('\n') {
                text.push('\n');
            }
        }
        let gap = self.gap.as_ref().map(GapReport::sentence);
        for line in [
            self.note.as_deref(),
            gap.as_deref(),
            self.stdin_error.as_deref(),
            self.output_error.as_deref(),
            self.hint.as_deref(),
        ]
        .into_iter()
        .flatten()
        {
            text.push_str(line);
            text.push('\n');
        }
        text
    }

    fn status_line(&self) -> String {
        let took = millis(self.duration_ms);
        let mut line = match (self.status, self.exit_code, &self.signal) {
            ("running", ..) => format!("running for {took}"),
            ("exited", Some(code), _) => format!("exited with code {code} after {took}"),
            (status, _, Some(signal)) => format!("{status} ({signal}) after {took}"),
            (status, ..) => format!("{status} after {took}"),
        };
        if !self.descendants_alive.is_empty() && self.status != "running" {
            line.push_str(&format!(
                "; {} process(es) it started still run",
                self.descendants_alive.len()
            ));
        }
        if let Some(killed) = self.descendants_killed.filter(|&n| n > 0) {
            line.push_str(&format!("; {killed} other process(es) killed"));
        }
        line
    }
}

/// `12 ms`, `1.5 s`.
fn millis(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

/// The result of `read`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ReadReport {
    /// Where the session stands.
    pub status: &'static str,
    /// What was read, cleaned (or exact with `raw`: UTF-8 text, or base64).
    pub output: String,
    /// The session id.
    pub id: String,
    /// Which stream (`stderr`; left out for the main one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<&'static str>,
    /// Offset of the first byte shown.
    pub offset: u64,
    /// Where the next read continues.
    pub next_offset: u64,
    /// Bytes the stream holds so far.
    pub end_offset: u64,
    /// Nothing more will come and all of it was read.
    pub eof: bool,
    /// Bytes before `offset` that are gone (grep: every byte it could not
    /// search because it is gone).
    pub dropped: u64,
    /// Those bytes: where, how many lines, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gap: Option<GapReport>,
    /// `raw`: how `output` holds the bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encoding: Option<&'static str>,
    /// `head_lines`/`tail_lines`: lines shown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines: Option<u64>,
    /// `grep`: matching lines in all of the output searched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub match_count: Option<u64>,
    /// `grep`: the matches listed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matches: Option<Vec<GrepMatch>>,
    /// `grep`: the search stopped before the end (at `next_offset`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
    /// Something to know about what was shown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// What to do next (a partial grep: the call that goes on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl ReadReport {
    /// The text content.
    pub fn text(&self) -> String {
        let mut text = format!(
            "[{}] {} bytes {}..{} of {}{}{}\n",
            self.id,
            match self.encoding {
                Some("base64") => "base64 of",
                _ => "output",
            },
            self.offset,
            self.next_offset,
            self.end_offset,
            if self.eof { " (end)" } else { "" },
            self.match_count
                .map(|n| format!("; {n} matching line(s)"))
                .unwrap_or_default(),
        );
        text.push_str(&self.output);
        if !self.output.is_empty() && !self.output.ends_with('\n') {
            text.push('\n');
        }
        for line in [self.note.as_deref(), self.hint.as_deref()]
            .into_iter()
            .flatten()
        {
            text.push_str(line);
            text.push('\n');
        }
        text
    }
}

/// One line `grep` found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GrepMatch {
    /// Its line number (1 = the first line of the output; counted across
    /// bytes that are gone from the newlines counted as they went; null
    /// when that count is unknown, or the search started past offset 0
    /// without `first_line`).
    pub line: Option<u64>,
    /// Offset of the line's first byte.
    pub offset: u64,
    /// The line, cleaned (cut to 300 bytes).
    pub text: String,
}

/// One session in `list`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Listed {
    /// Its id.
    pub id: String,
    /// Where it stands.
    pub status: &'static str,
    /// Exit code, once exited.
    pub exit_code: Option<i32>,
    /// The command (cut to 200 bytes).
    pub command: String,
    /// Signal that ended it.
    pub signal: Option<String>,
    /// Time from start to now or to the exit.
    pub duration_ms: u64,
    /// Bytes of output.
    pub output_bytes: u64,
    /// Bytes not shown yet.
    pub unread_bytes: u64,
    /// Processes besides the main one still alive.
    pub descendants_alive: usize,
    /// Stdin open for `write`.
    pub stdin_open: bool,
    /// Its limits and how each is enforced (sessions with limits).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<LimitsRecord>,
    /// The limit it ran into (sessions with limits).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_hit: Option<Option<&'static str>>,
}

/// The result of `list`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ListReport {
    /// Every session, oldest first.
    pub sessions: Vec<Listed>,
}

impl ListReport {
    /// The text content: one line per session.
    pub fn text(&self) -> String {
        if self.sessions.is_empty() {
            return "no sessions\n".to_owned();
        }
        let mut text = String::new();
        for s in &self.sessions {
            let state = match (s.status, s.exit_code, &s.signal) {
                ("exited", Some(code), _) => format!("exited {code}"),
                (status, _, Some(signal)) => format!("{status} {signal}"),
                (status, ..) => status.to_owned(),
            };
            text.push_str(&format!(
                "{}  {:<12} {:>9}  {}{}{}\n",
                s.id,
                state,
                millis(s.duration_ms),
                s.command,
                if s.descendants_alive > 0 {
                    format!("  (+{} running)", s.descendants_alive)
                } else {
                    String::new()
                },
                match s.limit_hit {
                    Some(Some(limit)) => format!("  (hit its {limit} limit)"),
                    _ => String::new(),
                }
            ));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_put_status_exit_code_and_output_first_and_text_is_not_json() {
        let report = SessionReport {
            status: "exited",
            exit_code: Some(0),
            output: "hi\n".into(),
            id: "abcd1234".into(),
            duration_ms: 3,
            next_offset: 3,
            ..SessionReport::default()
        };
        let reply = Reply::ok(&report, report.text());
        let keys: Vec<&String> = reply.body.as_object().unwrap().keys().collect();
        assert_eq!(&keys[..4], ["status", "exit_code", "output", "id"]);
        assert_eq!(reply.text, "[abcd1234] exited with code 0 after 3 ms\nhi\n");
        assert!(serde_json::from_str::<Value>(&reply.text).is_err());
    }
}
