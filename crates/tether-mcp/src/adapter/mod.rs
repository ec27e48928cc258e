//! The one place that knows the MCP SDK (rmcp, pinned `=3.11.0`; its API
//! broke twice in 2026). Everything else in this crate speaks plain Rust:
//! [`ToolSpec`]s in, [`Reply`]s out. Upgrading rmcp means changing this
//! module only.
//!
//! What rmcp gives us: the protocol state machine (`initialize` and the
//! 2026-07-28 `server/discover` handshake), one task per request (so a
//! long `wait` never blocks a `list`), cancellation of a request when the
//! client sends `notifications/cancelled`. What we add here: answers to
//! every malformed line (`transport.rs`), argument objects handed over
//! unvalidated (rmcp checks nothing against the schema; `arguments.rs`
//! does), a `catch_unwind` per call (a panicking handler would otherwise
//! leave its request unanswered forever), and a prompt end: calls in
//! flight return the moment the server starts closing.

mod transport;

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

use crate::lifecycle::{Cause, Closing};
use crate::terminal::{Reply, Terminal};
use crate::tools::{self, INSTRUCTIONS, ToolSpec};

/// How long rmcp may take to finish its loop once we close: calls in
/// flight return at once on close, so this is only a bound.
const STOP_BOUND: Duration = Duration::from_secs(3);

/// Serves MCP on this process's stdin/stdout until the input ends, the
/// output breaks, or `closing` is closed for another reason (a signal).
/// Closes `closing` itself when input or output ends.
pub async fn serve_stdio(terminal: Arc<Terminal>, closing: Closing, max_line: usize) {
    let (reader, writer) = rmcp::transport::stdio_pipes();
    let transport = transport::LineTransport::new(reader, writer, max_line, closing.clone());
    let handler = Handler {
        terminal: Arc::clone(&terminal),
        closing: closing.clone(),
        tools: tools::all(terminal.shell())
            .into_iter()
            .map(to_rmcp_tool)
            .collect(),
    };
    let running = tokio::select! {
        started = handler.serve(transport) => match started {
            Ok(running) => running,
            Err(e) => {
                // Input ended (or broke) before the handshake.
                tracing::info!("no MCP session: {e}");
                closing.close(Cause::InputClosed);
                return;
            }
        },
        _ = closing.closed() => return,
    };
    let cancel = running.cancellation_token();
    let finished = running.waiting();
    tokio::pin!(finished);
    tokio::select! {
        reason = &mut finished => {
            tracing::info!(?reason, "MCP session ended");
            closing.close(Cause::InputClosed);
        }
        _ = closing.closed() => {
            cancel.cancel();
            if tokio::time::timeout(STOP_BOUND, finished).await.is_err() {
                tracing::warn!("the MCP session did not stop within {STOP_BOUND:?}");
            }
        }
    }
}

fn to_rmcp_tool(spec: ToolSpec) -> Tool {
    let Value::Object(schema) = spec.input_schema else {
        unreachable!("tool schemas are objects (tools.rs tests this)");
    };
    Tool::new(spec.name, spec.description, Arc::new(schema))
}

/// rmcp's view of the server.
struct Handler {
    terminal: Arc<Terminal>,
    closing: Closing,
    tools: Vec<Tool>,
}

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("tether", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name;
        let args: JsonObject = request.arguments.unwrap_or_default();
        tracing::debug!(%name, "tools/call");
        let call = AssertUnwindSafe(self.terminal.call(&name, &args)).catch_unwind();
        let reply = tokio::select! {
            reply = call => reply,
            // The client gave up on this call: it wants no answer (rmcp
            // sends none); dropping the call stops its wait. A session it
            // started keeps running, listed and killable.
            _ = context.ct.cancelled() => Ok(Some(Reply::error("cancelled by the client"))),
            cause = self.closing.closed() => Ok(Some(Reply::error(format!(
                "the server is shutting down ({cause}); every session is being killed"
            )))),
        };
        match reply {
            Ok(Some(reply)) => Ok(CallToolResponse::from(to_result(reply))),
            Ok(None) => Err(ErrorData::invalid_params(
                format!(
                    "unknown tool {name:?}; the tools are: {}",
                    self.tools
                        .iter()
                        .map(|t| t.name.as_ref())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Some(json!({ "tool": name })),
            )),
            Err(_panic) => {
                tracing::error!(%name, "tool call panicked");
                Err(ErrorData::internal_error(
                    format!(
                        "tool {name} failed unexpectedly (a bug in tether); the server keeps running"
                    ),
                    None,
                ))
            }
        }
    }
}

/// A reply as a tool result: the object as structured content, and the
/// same JSON as text for clients that show only text.
fn to_result(reply: Reply) -> CallToolResult {
    if reply.is_error {
        CallToolResult::structured_error(reply.body)
    } else {
        CallToolResult::structured(reply.body)
    }
}
