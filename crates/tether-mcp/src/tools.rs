//! The tools as a model sees them: names, descriptions (when to use each,
//! what comes back, what to do next) and JSON schemas for the arguments.
//! The schemas are advertised only; [`arguments`](crate::arguments)
//! enforces the same rules with messages that say what to send instead.

use serde_json::{Value, json};

/// One tool: its name, description and input schema.
#[derive(Clone, Debug)]
pub struct ToolSpec {
    /// The name a client calls.
    pub name: &'static str,
    /// What the model reads to decide when and how to call it.
    pub description: String,
    /// JSON Schema of its arguments (an object schema).
    pub input_schema: Value,
}

/// Instructions sent to the client at initialization.
pub const INSTRUCTIONS: &str = "A terminal that cannot hang and cannot leak. `run` starts a \
command and returns as soon as it finishes, or after `yield_s` seconds with an id while it keeps \
running; continue with `read`, `wait`, `write` and `kill`. Every process a command starts \
(background jobs, daemons, `setsid` escapes) belongs to its session: `kill` ends all of them, \
and all of them die when this server exits. Output is shown cleaned (no colour codes, progress \
lines collapsed) and, when long, cut to its head and tail with the exact `read` call that shows \
the rest.";

const ID: &str =
    "Session id returned by `run` (a unique prefix of 4 or more characters also works).";

/// Every tool this server offers.
pub fn all(shell: &crate::shell::Shell) -> Vec<ToolSpec> {
    let shell = shell.describe();
    vec![
        ToolSpec {
            name: "run",
            description: "Run a shell command (`command`, via {shell}) or a program with \
arguments (`argv`). Returns as soon as the command's main process exits: {id, status: exited | \
killed | timed_out, exit_code, signal, note, duration_ms, output, next_offset, truncated_bytes, \
descendants_alive}. If it is still running after `yield_s` seconds (default 10), returns {id, \
status: \"running\", output so far, next_offset}: it keeps running, and you continue with \
`wait` (until it exits or prints a pattern), `read` (new output), `write` (stdin) or `kill`. \
Servers and watchers: run them with a small `yield_s` (or end the command with `&`: the call \
returns at once and lists the background processes under descendants_alive), then `wait` with \
`until` for their ready line. Every process the command starts stays contained: `kill` ends \
them all. Output merges stdout and stderr in order. If it starts with status failed_start, \
the program or cwd was not found. Use `stdin` to feed input (written, then closed); set \
`keep_stdin_open` to talk to an interactive program with `write`."
                .replace("{shell}", &shell),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "command": {
                        "type": "string",
                        "description": format!("Shell command line, run with {shell}. Give this or argv.")
                    },
                    "argv": {
                        "type": "array", "items": {"type": "string"}, "minItems": 1,
                        "description": "Program and arguments, run without a shell. Give this or command."
                    },
                    "cwd": {
                        "type": "string",
                        "description": "Working directory; relative paths are taken from the server's default directory."
                    },
                    "env": {
                        "type": "object", "additionalProperties": {"type": "string"},
                        "description": "Environment variables to set on top of the server's environment."
                    },
                    "timeout_s": {
                        "type": "number", "exclusiveMinimum": 0, "maximum": 86400, "default": 600,
                        "description": "Hard limit in seconds: when the main process has run this long, its whole tree is killed (status timed_out). For long-lived servers give a large value."
                    },
                    "yield_s": {
                        "type": "number", "minimum": 0, "maximum": 300, "default": 10,
                        "description": "Seconds to wait for the command to finish before returning with status running."
                    },
                    "stdin": {
                        "type": "string",
                        "description": "Text written to the command's standard input, which is then closed (unless keep_stdin_open)."
                    },
                    "keep_stdin_open": {
                        "type": "boolean", "default": false,
                        "description": "Keep standard input open for `write` (interactive programs: cat, python3 -i, a REPL). Without it and without `stdin`, the command's stdin is /dev/null."
                    }
                },
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: "read",
            description: "Read a session's output: {id, status, output, offset, next_offset, \
end_offset, eof, dropped}. Without `offset` it continues where the last output shown for this \
id ended, so repeated calls page through new output. Use the `offset` and `max_bytes` named in \
an omission marker to see bytes that were cut from a result. Returns at once; to wait for \
output use `wait`."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": ID},
                    "offset": {
                        "type": "integer", "minimum": 0,
                        "description": "Absolute byte offset to read from (default: where the last output shown for this id ended)."
                    },
                    "max_bytes": {
                        "type": "integer", "minimum": 1, "maximum": 1048576, "default": 16384,
                        "description": "Most bytes to read."
                    }
                },
                "required": ["id"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: "write",
            description: "Write to a running session's standard input (it must have been started \
with keep_stdin_open), then return the output produced within `yield_s` seconds (default 1; \
sooner if the command exits): {id, status, output, next_offset, ...}. Set `submit` to append a \
newline (press Enter) and `eof` to close stdin afterwards (like Ctrl-D)."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": ID},
                    "data": {"type": "string", "description": "Text to write (may be empty with eof)."},
                    "submit": {"type": "boolean", "default": false, "description": "Append a newline."},
                    "eof": {"type": "boolean", "default": false, "description": "Close stdin after writing."},
                    "yield_s": {
                        "type": "number", "minimum": 0, "maximum": 300, "default": 1,
                        "description": "Seconds to collect output after writing."
                    }
                },
                "required": ["id", "data"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: "wait",
            description: "Wait for a session: returns when its main process exits, when new \
output matches `until` (a regex), or after `timeout_s` with status running (not an error: \
wait again, read, or kill). Returns {id, status, matched, output (new since the last output \
shown), next_offset, exit_code, signal, ...}. `until` only looks at output you have not been \
shown yet (from the start of the last line shown, so a line cut between two results still \
matches)."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": ID},
                    "timeout_s": {
                        "type": "number", "minimum": 0, "maximum": 300,
                        "description": "Most seconds to wait."
                    },
                    "until": {
                        "type": "string",
                        "description": "Regex (Rust syntax; ^ and $ match at line ends) that ends the wait when new output matches it, e.g. \"Listening on|ERROR\"."
                    }
                },
                "required": ["id", "timeout_s"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: "kill",
            description: "Kill a session's whole process tree (SIGTERM, then SIGKILL after \
`grace_s`), including background processes it left running, and verify that nothing survives. \
Returns the final result with the output not yet shown: {id, status, exit_code, signal, \
descendants_killed, output, ...}. Also ends the leftovers of a command that already exited."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": ID},
                    "grace_s": {
                        "type": "number", "minimum": 0, "maximum": 60, "default": 2,
                        "description": "Seconds between SIGTERM and SIGKILL."
                    }
                },
                "required": ["id"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: "list",
            description: "List every session of this server, oldest first: {sessions: [{id, \
command, status, exit_code, signal, duration_ms, output_bytes, unread_bytes, \
descendants_alive, stdin_open}]}. Finished sessions stay listed for 30 minutes."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {},
                "additionalProperties": false
            }),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_an_object_schema_and_unique_name() {
        let tools = all(&crate::shell::Shell::default());
        let mut names: Vec<&str> = tools.iter().map(|t| t.name).collect();
        names.sort();
        assert_eq!(names, ["kill", "list", "read", "run", "wait", "write"]);
        for tool in &tools {
            assert_eq!(tool.input_schema["type"], "object", "{}", tool.name);
            assert_eq!(tool.input_schema["additionalProperties"], false);
            for required in tool.input_schema["required"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let name = required.as_str().unwrap();
                assert!(
                    tool.input_schema["properties"].get(name).is_some(),
                    "{}: required {name} is not a property",
                    tool.name
                );
            }
        }
    }
}
