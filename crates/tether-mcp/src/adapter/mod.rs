//! The one place that knows the MCP SDK (rmcp, pinned `=3.11.0`; its API
//! broke twice in 2026). Everything else in this crate speaks plain Rust:
//! [`ToolSpec`]s in, [`Reply`]s out. Upgrading rmcp means changing this
//! module only.
//!
//! What rmcp gives us: the protocol state machine (`initialize` and the
//! 2026-07-28 `server/discover` handshake), one task per request (so a
//! long `wait` never blocks a `list`), a cancellation token per request
//! that fires on `notifications/cancelled`, and a peer to send
//! `notifications/progress` through. What we add here: answers to every
//! malformed line, ids checked, in-flight requests bounded
//! (`transport.rs`, `jsonrpc.rs`, `inflight.rs`), argument objects handed
//! over unvalidated (rmcp checks nothing against the schema;
//! `params.rs` does), a `catch_unwind` per call (a panicking handler would
//! otherwise leave its request unanswered forever), progress reports in
//! order, and a prompt end: calls in flight return the moment the server
//! starts closing.

mod inflight;
mod jsonrpc;
mod memory;
mod transport;

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

use crate::lifecycle::{Cause, Closing};
use crate::reply::Reply;
use crate::terminal::{CallContext, Progress, ProgressSink, Terminal};
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
        tools: tools::all()
            .into_iter()
            .map(|spec| to_rmcp_tool(spec, terminal.shell(), terminal.names()))
            .collect(),
        instructions: terminal.names().render(INSTRUCTIONS),
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

/// The tool as rmcp declares it: named with the `--tool-prefix`, as every
/// tool its texts name; a `--shell` other than the platform's is named
/// wherever the texts name the shell, so the model writes for it.
fn to_rmcp_tool(spec: ToolSpec, shell: &crate::shell::Shell, names: &crate::names::Names) -> Tool {
    let (Value::Object(mut input), Value::Object(output)) =
        (spec.input_schema(), spec.output_schema)
    else {
        unreachable!("tool schemas are objects (tools.rs tests this)");
    };
    let platform = crate::platform_shell!();
    let configured = shell.describe();
    let mut description = std::borrow::Cow::Borrowed(spec.description);
    if configured != platform {
        description = description.replace(platform, &configured).into();
        if let Some(Value::String(doc)) = input
            .get_mut("properties")
            .and_then(|p| p.get_mut("command"))
            .and_then(|c| c.get_mut("description"))
        {
            *doc = doc.replace(platform, &configured);
        }
    }
    let description = names.render(&description);
    let input = render_docs(input, names);
    let a = spec.annotations;
    let mut tool = Tool::new(names.of(spec.name), description, Arc::new(input));
    tool.output_schema = Some(Arc::new(output));
    tool.annotations = Some(
        ToolAnnotations::with_title(a.title)
            .read_only(a.read_only)
            .destructive(a.destructive)
            .idempotent(a.idempotent)
            .open_world(true),
    );
    tool
}

/// An input schema with the tool names in its argument docs rendered.
fn render_docs(mut input: JsonObject, names: &crate::names::Names) -> JsonObject {
    if let Some(Value::Object(properties)) = input.get_mut("properties") {
        for property in properties.values_mut() {
            if let Some(Value::String(doc)) = property.get_mut("description") {
                *doc = names.render(doc);
            }
        }
    }
    input
}

/// rmcp's view of the server.
struct Handler {
    terminal: Arc<Terminal>,
    closing: Closing,
    tools: Vec<Tool>,
    /// [`INSTRUCTIONS`] with the tools' names.
    instructions: String,
}

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("tether", env!("CARGO_PKG_VERSION")))
            .with_instructions(self.instructions.clone())
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
        let call_context = CallContext {
            // A cancelled call returns at once, except a `run`, which
            // first kills the session it started (the client will never
            // learn its id). rmcp sends no answer to a cancelled request.
            cancel: context.ct.clone(),
            progress: progress_sink(&context),
        };
        let tool = self.terminal.names().tool(&name).unwrap_or("");
        let call = AssertUnwindSafe(self.terminal.call(tool, &args, call_context)).catch_unwind();
        let reply = tokio::select! {
            reply = call => reply,
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

/// A reply as a tool result: the object as structured content, and a
/// short text (status, output, hints) for people and text-only clients.
fn to_result(reply: Reply) -> CallToolResult {
    let mut result = if reply.is_error {
        CallToolResult::structured_error(reply.body)
    } else {
        CallToolResult::structured(reply.body)
    };
    result.content = vec![ContentBlock::text(reply.text)];
    result
}

/// When the request carries a progressToken: a sink that sends each
/// report as `notifications/progress`, in order, from one task per call
/// (it ends when the call drops the sink).
fn progress_sink(context: &RequestContext<RoleServer>) -> Option<ProgressSink> {
    let token = context.meta.get_progress_token()?;
    let peer = context.peer.clone();
    let (sender, mut reports) = tokio::sync::mpsc::unbounded_channel::<Progress>();
    tokio::spawn(async move {
        while let Some(report) = reports.recv().await {
            let param = ProgressNotificationParam::new(token.clone(), report.elapsed)
                .with_total(report.total)
                .with_message(report.message);
            if peer.notify_progress(param).await.is_err() {
                return;
            }
        }
    });
    Some(Arc::new(move |report| {
        let _ = sender.send(report);
    }))
}
