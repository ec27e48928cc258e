//! `tether mcp` is wired to the MCP server: it answers the handshake and a
//! tool call on stdio, and on stdin EOF exits 0 with every process it
//! started dead. (The server's behaviour is tested in depth, with the
//! official Python and TypeScript clients, by mcp_python_client.rs and
//! mcp_typescript_client.rs.)

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use support::tether;
use tether_testkit::{TAG_VAR, TagGuard, tagged_pids};

#[test]
fn tether_mcp_serves_a_run_and_exits_on_eof_with_nothing_left() {
    let guard = TagGuard::new("mcp-cli");
    let mut server = tether()
        .arg("mcp")
        .env(TAG_VAR, guard.tag())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start tether mcp");
    let mut stdin = server.stdin.take().unwrap();
    let mut stdout = BufReader::new(server.stdout.take().unwrap());
    let mut answer = || {
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read answer");
        serde_json::from_str::<serde_json::Value>(&line).expect("JSON answer")
    };
    let requests = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run","arguments":{"command":"sleep 1000 & echo hi"}}}"#,
    ];
    for request in requests {
        writeln!(stdin, "{request}").unwrap();
    }
    assert_eq!(answer()["result"]["serverInfo"]["name"], "tether");
    let result = answer();
    let body = &result["result"]["structuredContent"];
    assert_eq!(body["status"], "exited", "{result}");
    assert_eq!(body["output"], "hi\n");
    assert!(
        body["descendants_alive"][0]["command"]
            .as_str()
            // `[sleep]` when caught inside execve
            .is_some_and(|c| c.contains("sleep")),
        "{result}"
    );
    drop(stdin);
    let status = server.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    // Verified dead before the server exited: no waiting here.
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}
