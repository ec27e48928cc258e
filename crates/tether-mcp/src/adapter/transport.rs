//! The stdio transport: newline-delimited JSON-RPC on stdin/stdout.
//!
//! Ours rather than rmcp's `AsyncRwTransport` because that one answers
//! some bad input with silence — a line that is not JSON is ignored, one
//! over its length cap is dropped, `tools/call` params that do not parse
//! come back as "method not found" — and a client waiting for an answer
//! to any of those hangs. Here every request gets an answer that says
//! what to send instead. It also reports end of input and a broken output
//! pipe to [`Closing`], which rmcp does not surface (a failed write only
//! logs a warning there, and the server would run on with nobody
//! listening).
//!
//! Errors for requests whose id cannot be known carry `"id": null`, as
//! JSON-RPC 2.0 asks (rmcp would leave the member out, and a client then
//! cannot tell which call failed); where the id can be recovered from a
//! broken line, the error goes to it. An id that is a number rmcp cannot
//! hold (a 30-digit integer, `1.5`: JSON allows any number, rmcp takes
//! `i64`) travels inside as a placeholder string ([`NUMBER_ID`] + its
//! text) and is written back exactly as sent; it used to get `-32600` with
//! `"id": null`, so the client could not match the answer (issue 16). Requests in flight are bounded and
//! ids checked ([`InFlight`]); lone surrogates, huge numbers and deep
//! nesting are handled before serde sees a line ([`jsonrpc`](super::jsonrpc)).

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestParams, ClientNotification, ClientRequest, ErrorData, JsonRpcMessage, RequestId,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::OwnedSemaphorePermit;

use super::inflight::InFlight;
use super::jsonrpc::{FoundId, MAX_DEPTH, find_id, member_span, sanitize};
use crate::lifecycle::{Cause, Closing};

/// Methods whose params rmcp parses into a typed request; params that do
/// not fit make rmcp treat the request as an unknown custom method.
const TYPED_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "tools/call",
    "tools/list",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "logging/setLevel",
    "completion/complete",
];

/// Bytes of an oversized line kept to find its request id.
const HEAD_KEPT: usize = 4096;

/// Start of the placeholder string an id that is a number beyond `i64`
/// becomes inside (then its text as sent). U+10FFFF is a noncharacter: no
/// client names a request with it.
const NUMBER_ID: &str = "\u{10FFFF}";

/// The placeholder for a number id's text.
fn number_id(text: &str) -> RequestId {
    RequestId::String(format!("{NUMBER_ID}{text}").into())
}

/// The text of a number id behind its placeholder; `None` for any other
/// id (or a placeholder that is not a number's text, which is then written
/// as the string it is).
fn number_text(id: &RequestId) -> Option<&str> {
    let RequestId::String(s) = id else {
        return None;
    };
    let text = s.strip_prefix(NUMBER_ID)?;
    let number_shaped = text
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E'));
    (number_shaped && serde_json::from_str::<serde_json::Number>(text).is_ok()).then_some(text)
}

/// `message` as one line of JSON; when `id` is a number id's placeholder,
/// its `id` member is the number's text as the client sent it.
fn encode(message: &impl serde::Serialize, id: Option<&RequestId>) -> std::io::Result<Vec<u8>> {
    let mut bytes = match id.and_then(number_text) {
        None => serde_json::to_vec(message)?,
        Some(text) => {
            let Value::Object(members) = serde_json::to_value(message)? else {
                return Err(std::io::Error::other("a JSON-RPC message is an object"));
            };
            let mut out = b"{".to_vec();
            for (n, (key, value)) in members.iter().enumerate() {
                if n > 0 {
                    out.push(b',');
                }
                out.extend(serde_json::to_vec(key)?);
                out.push(b':');
                if key == "id" {
                    out.extend(text.as_bytes());
                } else {
                    out.extend(serde_json::to_vec(value)?);
                }
            }
            out.push(b'}');
            out
        }
    };
    bytes.push(b'\n');
    Ok(bytes)
}

/// Start of the id a request has inside rmcp (then a counter): U+10FFFE,
/// another noncharacter.
const INSIDE_ID: &str = "\u{10FFFE}";

/// Each request's id inside rmcp: its own, never used twice, whatever id
/// the client gave it. rmcp matches an answer to its request by id; when a
/// client cancelled a request and then reused its id (which this server
/// allows: the id is free again), a new request with that id could be
/// answered with the cancelled one's answer, and its own answer dropped
/// (a fresh-clone CI run caught it, 1 of 10).
#[derive(Default)]
struct Aliases {
    ids: std::sync::Mutex<AliasMap>,
}

#[derive(Default)]
struct AliasMap {
    next: u64,
    /// Client's id → inside id, for requests in flight.
    inside: std::collections::HashMap<RequestId, RequestId>,
    /// Inside id → client's id.
    outside: std::collections::HashMap<RequestId, RequestId>,
}

impl Aliases {
    fn lock(&self) -> std::sync::MutexGuard<'_, AliasMap> {
        self.ids.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn is_alias(id: &RequestId) -> bool {
        matches!(id, RequestId::String(s) if s.starts_with(INSIDE_ID))
    }

    /// The inside id of a new request with the client's id `outside`.
    fn alias(&self, outside: RequestId) -> RequestId {
        let mut map = self.lock();
        map.next += 1;
        let inside = RequestId::String(format!("{INSIDE_ID}{}", map.next).into());
        map.inside.insert(outside.clone(), inside.clone());
        map.outside.insert(inside.clone(), outside);
        inside
    }

    /// The client's id of the request answered under `inside` (`None`:
    /// not in flight — cancelled).
    fn answered(&self, inside: &RequestId) -> Option<RequestId> {
        let mut map = self.lock();
        let outside = map.outside.remove(inside)?;
        map.inside.remove(&outside);
        Some(outside)
    }

    /// The inside id of the request the client cancelled under `outside`,
    /// forgotten here.
    fn cancelled(&self, outside: &RequestId) -> Option<RequestId> {
        let mut map = self.lock();
        let inside = map.inside.remove(outside)?;
        map.outside.remove(&inside);
        Some(inside)
    }
}

/// Newline-delimited JSON-RPC over a reader and a writer.
pub struct LineTransport<R, W> {
    reader: BufReader<R>,
    /// The line being read (its head only, once over `max_line`). Kept
    /// across calls: rmcp drops a pending `receive` whenever another event
    /// wins its `select!`, so nothing read may live only in a future.
    line: Vec<u8>,
    /// Bytes of the current line read so far, kept ones or not.
    line_len: usize,
    max_line: usize,
    writer: Arc<tokio::sync::Mutex<W>>,
    closing: Closing,
    inflight: Arc<InFlight>,
    aliases: Arc<Aliases>,
    /// What the line just read asks for, waiting for room in flight. Kept
    /// here, not in a future: `receive` may be dropped while it waits.
    pending: Option<Pending>,
}

/// A line's outcome that needs room in flight.
enum Pending {
    /// A request for rmcp.
    Request(Box<RxJsonRpcMessage<RoleServer>>, RequestId),
    /// An error to answer with.
    Answer(ErrorData, Option<RequestId>),
}

/// What one line of input was.
enum Line {
    /// A complete line is in the buffer.
    Complete,
    /// A line longer than the cap; the buffer holds its head.
    TooLong(usize),
    /// End of input (or a read error).
    End,
}

impl<R, W> LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// A transport reading requests from `reader` (lines of at most
    /// `max_line` bytes) and writing responses to `writer`.
    pub fn new(reader: R, writer: W, max_line: usize, closing: Closing) -> Self {
        LineTransport {
            reader: BufReader::with_capacity(64 * 1024, reader),
            line: Vec::new(),
            line_len: 0,
            max_line,
            writer: Arc::new(tokio::sync::Mutex::new(writer)),
            closing,
            inflight: Arc::new(InFlight::default()),
            aliases: Arc::new(Aliases::default()),
            pending: None,
        }
    }

    /// Reads until the current line is complete. Cancel-safe: bytes move
    /// from the reader's buffer to `self.line` with no await in between,
    /// and a completed line stays in `self.line` until
    /// [`next_line`](Self::next_line) clears it.
    async fn read_line(&mut self) -> Line {
        loop {
            let total = self.line_len;
            let available = match self.reader.fill_buf().await {
                Ok([]) => {
                    return if total == 0 {
                        Line::End
                    } else if total > self.max_line {
                        Line::TooLong(total)
                    } else {
                        Line::Complete
                    };
                }
                Ok(bytes) => bytes,
                Err(e) => {
                    tracing::warn!("reading stdin failed: {e}");
                    return Line::End;
                }
            };
            let newline = available.iter().position(|&b| b == b'\n');
            let take = newline.map_or(available.len(), |at| at + 1);
            if total + take <= self.max_line {
                self.line.extend_from_slice(&available[..take]);
            } else if self.line.len() < HEAD_KEPT {
                let room = HEAD_KEPT - self.line.len();
                self.line.extend_from_slice(&available[..take.min(room)]);
            }
            self.line_len += take;
            self.reader.consume(take);
            if newline.is_some() {
                return if self.line_len > self.max_line {
                    Line::TooLong(self.line_len)
                } else {
                    Line::Complete
                };
            }
        }
    }

    /// Forgets the line just handled.
    fn next_line(&mut self) {
        self.line.clear();
        self.line_len = 0;
    }

    /// Writes an error response (a request of ours never fails silently)
    /// from a task of its own: `receive` may be dropped at any await, and
    /// the answer must not be dropped with it. The task holds `permit`
    /// until the answer is written, so a flood of bad lines is bounded as
    /// requests are.
    fn reply_error(&self, error: ErrorData, id: Option<RequestId>, permit: OwnedSemaphorePermit) {
        let writer = Arc::clone(&self.writer);
        let closing = self.closing.clone();
        tokio::spawn(async move {
            let message = serde_json::json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": error,
            });
            if let Ok(line) = encode(&message, id.as_ref()) {
                let _ = write_line(&writer, &closing, line).await;
            }
            drop(permit);
        });
    }
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = Arc::clone(&self.writer);
        let closing = self.closing.clone();
        let inflight = Arc::clone(&self.inflight);
        let mut item = item;
        let inside = match &item {
            JsonRpcMessage::Response(response) => Some(response.id.clone()),
            JsonRpcMessage::Error(error) => error.id.clone(),
            _ => None,
        };
        // The client's id back in place of the one rmcp knew the request by.
        let mut unanswerable = false;
        let answered = match inside {
            Some(inside) if Aliases::is_alias(&inside) => match self.aliases.answered(&inside) {
                Some(outside) => {
                    match &mut item {
                        JsonRpcMessage::Response(response) => response.id = outside.clone(),
                        JsonRpcMessage::Error(error) => error.id = Some(outside.clone()),
                        _ => {}
                    }
                    Some(outside)
                }
                // The answer to a request the client cancelled (rmcp drops
                // those itself; this is in case it did not): not written.
                None => {
                    unanswerable = true;
                    None
                }
            },
            other => other,
        };
        let line = (!unanswerable).then(|| encode(&item, answered.as_ref()));
        async move {
            let written = match line {
                Some(Ok(line)) => write_line(&writer, &closing, line).await,
                Some(Err(e)) => Err(e),
                None => Ok(()),
            };
            if let Some(id) = answered {
                inflight.finish(&id);
            }
            written
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if self.pending.is_some() {
                // Backpressure: no room, no more reading.
                let permit = self.inflight.room().await;
                match self.pending.take().expect("checked above") {
                    Pending::Answer(error, id) => self.reply_error(error, id, permit),
                    Pending::Request(message, id) if self.inflight.has(&id) => {
                        let error = ErrorData::invalid_request(
                            format!(
                                "duplicate request id {id}: a request with this id is still in \
                                 flight; give every request its own id"
                            ),
                            None,
                        );
                        drop(message);
                        self.reply_error(error, Some(id), permit);
                    }
                    Pending::Request(mut message, id) => {
                        self.inflight.start(id.clone(), permit);
                        if let JsonRpcMessage::Request(request) = &mut *message {
                            request.id = self.aliases.alias(id);
                        }
                        return Some(*message);
                    }
                }
                continue;
            }
            match self.read_line().await {
                Line::End => {
                    self.closing.close(Cause::InputClosed);
                    return None;
                }
                Line::TooLong(len) => {
                    let id = match find_id(&self.line) {
                        FoundId::Valid(id) => Some(id),
                        FoundId::Number(text) => Some(number_id(&text)),
                        _ => None,
                    };
                    tracing::warn!(len, max = self.max_line, "request line too long");
                    let message = format!(
                        "request too large: the line is over {} bytes, the limit is {} \
                         (raise it with --max-request-bytes); send large input in parts, \
                         e.g. several `write` calls",
                        len.saturating_sub(1),
                        self.max_line
                    );
                    self.next_line();
                    self.pending = Some(Pending::Answer(
                        ErrorData::invalid_request(message, None),
                        id,
                    ));
                }
                Line::Complete => {
                    let parsed = classify(&self.line);
                    self.next_line();
                    match parsed {
                        Parsed::Message(message) => match &*message {
                            JsonRpcMessage::Request(request) => {
                                let id = request.id.clone();
                                self.pending = Some(Pending::Request(message, id));
                            }
                            JsonRpcMessage::Notification(_) => {
                                let mut message = message;
                                if let JsonRpcMessage::Notification(notification) = &mut *message
                                    && let ClientNotification::CancelledNotification(cancelled) =
                                        &mut notification.notification
                                    && let Some(id) = cancelled.params.request_id.take()
                                {
                                    // rmcp sends no answer to a cancelled
                                    // request; the id is the client's again.
                                    self.inflight.finish(&id);
                                    cancelled.params.request_id =
                                        Some(self.aliases.cancelled(&id).unwrap_or(id));
                                }
                                return Some(*message);
                            }
                            _ => return Some(*message),
                        },
                        Parsed::Skip => {}
                        Parsed::Reply(error, id) => self.pending = Some(Pending::Answer(error, id)),
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.writer.lock().await.flush().await
    }
}

async fn write_line<W: AsyncWrite + Unpin>(
    writer: &tokio::sync::Mutex<W>,
    closing: &Closing,
    bytes: Vec<u8>,
) -> std::io::Result<()> {
    let mut writer = writer.lock().await;
    let written = async {
        writer.write_all(&bytes).await?;
        writer.flush().await
    }
    .await;
    if let Err(e) = &written {
        // EPIPE: the client closed its end. Nobody can hear us any more.
        tracing::info!("writing stdout failed: {e}");
        closing.close(Cause::OutputClosed);
    }
    written
}

/// What a complete line holds.
enum Parsed {
    /// A message for the service.
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// Nothing to do (blank line, a notification we do not know).
    Skip,
    /// Answer with this error.
    Reply(ErrorData, Option<RequestId>),
}

fn classify(line: &[u8]) -> Parsed {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Parsed::Skip;
    }
    // The id as sent (sanitizing rewrites numbers beyond f64).
    let found = find_id(line);
    let sanitized = sanitize(line);
    let mut line = sanitized.line;
    let id = match &found {
        FoundId::Valid(id) => Some(id.clone()),
        FoundId::Number(text) => {
            let placeholder = number_id(text);
            line = Cow::Owned(with_member(&line, &["id"], &placeholder));
            Some(placeholder)
        }
        _ => None,
    };
    let line = &*line;
    if sanitized.depth > MAX_DEPTH {
        return Parsed::Reply(
            ErrorData::invalid_request(
                format!(
                    "invalid request: JSON nested {} levels deep; at most {MAX_DEPTH} levels are \
                     accepted",
                    sanitized.depth
                ),
                None,
            ),
            id,
        );
    }
    if found == FoundId::Invalid {
        return Parsed::Reply(
            ErrorData::invalid_request(
                "invalid request: `id` must be a string or an integer (JSON-RPC 2.0), e.g. \
                 \"id\": 1"
                    .to_owned(),
                None,
            ),
            None,
        );
    }
    // A cancellation of a request whose id is a number beyond i64 names
    // it by the placeholder that request carries inside (else rmcp takes
    // it for a notification of its own and the request is never stopped).
    let cancelled;
    let line = match member_span(line, &["params", "requestId"]) {
        Some(span)
            if id.is_none()
                && member_span(line, &["method"])
                    .is_some_and(|m| &line[m] == b"\"notifications/cancelled\"") =>
        {
            match find_id(&[b"{\"id\":", &line[span], b"}"].concat()) {
                FoundId::Number(text) => {
                    cancelled = with_member(line, &["params", "requestId"], &number_id(&text));
                    &cancelled[..]
                }
                _ => line,
            }
        }
        _ => line,
    };
    let parse_error = match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
        Ok(message) => return check_typed_params(message),
        Err(e) => e,
    };
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(e) => {
            return Parsed::Reply(
                ErrorData::parse_error(
                    format!(
                        "parse error: not valid JSON ({e}); send one JSON-RPC 2.0 message per \
                         line, e.g. {{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}}"
                    ),
                    None,
                ),
                id,
            );
        }
    };
    let Value::Object(object) = &value else {
        let what = if value.is_array() {
            "batches are not supported; send one message per line"
        } else {
            "a message must be a JSON object"
        };
        return Parsed::Reply(
            ErrorData::invalid_request(format!("invalid request: {what}"), None),
            None,
        );
    };
    if id.is_none() && object.contains_key("method") {
        // A notification cannot be answered; one we do not know is ignored
        // (rmcp does the same, for compatibility with other clients).
        tracing::debug!("ignoring notification that does not parse: {parse_error}");
        return Parsed::Skip;
    }
    if id.is_none() && (object.contains_key("result") || object.contains_key("error")) {
        tracing::debug!("ignoring response that does not parse: {parse_error}");
        return Parsed::Skip;
    }
    Parsed::Reply(
        ErrorData::invalid_request(
            format!(
                "invalid request ({parse_error}); a request is {{\"jsonrpc\":\"2.0\",\"id\":1,\
                 \"method\":\"tools/call\",\"params\":{{\"name\":\"run\",\"arguments\":{{...}}}}}}"
            ),
            None,
        ),
        id,
    )
}

/// `line` with the value of the member at `path` replaced by `id`.
fn with_member(line: &[u8], path: &[&str], id: &RequestId) -> Vec<u8> {
    let Some(span) = member_span(line, path) else {
        return line.to_vec();
    };
    let value = serde_json::to_vec(id).expect("an id serializes");
    [&line[..span.start], &value, &line[span.end..]].concat()
}

/// A typed method whose params did not parse arrives as a custom request,
/// which rmcp answers with "method not found". Answer "invalid params"
/// with the reason instead.
fn check_typed_params(message: RxJsonRpcMessage<RoleServer>) -> Parsed {
    if let JsonRpcMessage::Request(request) = &message
        && let ClientRequest::CustomRequest(custom) = &request.request
        && TYPED_METHODS.contains(&custom.method.as_str())
    {
        let why = if custom.method == "tools/call" {
            match custom.params_as::<CallToolRequestParams>() {
                Err(e) => e.to_string(),
                Ok(None) => "params are missing".to_owned(),
                Ok(Some(_)) => "params do not fit".to_owned(),
            }
        } else {
            "params do not fit this method".to_owned()
        };
        let hint = if custom.method == "tools/call" {
            "; send {\"name\": \"<tool>\", \"arguments\": {...}} (arguments is an object)"
        } else {
            ""
        };
        return Parsed::Reply(
            ErrorData::invalid_params(
                format!("invalid params for {}: {why}{hint}", custom.method),
                None,
            ),
            Some(request.id.clone()),
        );
    }
    Parsed::Message(Box::new(message))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn reply_of(line: &str) -> (ErrorData, Option<RequestId>) {
        match classify(line.as_bytes()) {
            Parsed::Reply(error, id) => (error, id),
            Parsed::Message(m) => panic!("parsed: {m:?}"),
            Parsed::Skip => panic!("skipped"),
        }
    }

    #[test]
    fn garbage_gets_a_parse_error() {
        let (error, id) = reply_of("this is not json\n");
        assert_eq!(error.code.0, -32700);
        assert!(error.message.contains("one JSON-RPC 2.0 message per line"));
        assert!(id.is_none());
    }

    #[test]
    fn batches_and_scalars_are_invalid_requests() {
        assert_eq!(reply_of("[1, 2]").0.code.0, -32600);
        assert_eq!(reply_of("42").0.code.0, -32600);
        let (error, id) = reply_of(r#"{"jsonrpc":"2.0","id":7}"#);
        assert_eq!(error.code.0, -32600);
        assert_eq!(id, Some(RequestId::Number(7)));
    }

    #[test]
    fn tools_call_with_bad_params_is_invalid_params_not_method_not_found() {
        let (error, id) = reply_of(
            r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"arguments":{}}}"#,
        );
        assert_eq!(error.code.0, -32602);
        assert!(error.message.contains("name"), "{}", error.message);
        assert_eq!(id, Some(RequestId::String("a".into())));
        let (error, _) = reply_of(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run","arguments":"ls"}}"#,
        );
        assert_eq!(error.code.0, -32602);
    }

    #[test]
    fn good_messages_and_blank_lines_pass() {
        let line = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run","arguments":{"command":"ls"}}}"#;
        assert!(matches!(classify(line.as_bytes()), Parsed::Message(_)));
        assert!(matches!(classify(b"  \r\n"), Parsed::Skip));
        let unknown = r#"{"jsonrpc":"2.0","method":"notifications/whatever"}"#;
        assert!(!matches!(classify(unknown.as_bytes()), Parsed::Reply(..)));
    }

    /// Regression (issue 16): a request whose id is a 30-digit integer got
    /// `-32600` with `"id": null`; every JSON number is an id, echoed as sent.
    #[test]
    fn number_ids_beyond_i64_come_back_exactly_as_sent() {
        for text in [
            "123456789012345678901234567890",
            "1.5",
            "-0",
            "1E3",
            "18446744073709551615",
        ] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{text},"method":"tools/list"}}"#);
            let Parsed::Message(message) = classify(line.as_bytes()) else {
                panic!("{text}: not parsed");
            };
            let JsonRpcMessage::Request(request) = *message else {
                panic!("{text}: not a request");
            };
            let error = serde_json::json!({"jsonrpc": "2.0", "id": request.id, "result": {}});
            let out = String::from_utf8(encode(&error, Some(&request.id)).unwrap()).unwrap();
            assert_eq!(
                out,
                format!("{{\"jsonrpc\":\"2.0\",\"id\":{text},\"result\":{{}}}}\n")
            );
            // Its cancellation names the same request.
            let cancel = format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{text}}}}}"#
            );
            let Parsed::Message(message) = classify(cancel.as_bytes()) else {
                panic!("{text}: cancellation not parsed");
            };
            let JsonRpcMessage::Notification(n) = *message else {
                panic!("not a notification")
            };
            let ClientNotification::CancelledNotification(c) = n.notification else {
                panic!("not a cancellation")
            };
            assert_eq!(c.params.request_id, Some(request.id.clone()));
        }
        // A broken line still answers to its number.
        let (_, id) = reply_of(r#"{"jsonrpc":"2.0","id":99999999999999999999,"method":"#);
        let out = encode(&serde_json::json!({"id": id}), id.as_ref()).unwrap();
        assert_eq!(out, b"{\"id\":99999999999999999999}\n");
        // A client's string id that only looks like a placeholder is a string.
        let fake = RequestId::String(format!("{NUMBER_ID}1,\"x\":2").into());
        assert_eq!(number_text(&fake), None);
    }

    /// Regression (a fresh-clone CI run, 1 of 10): a client cancelled a
    /// request and reused its id at once; rmcp, which matches answers by
    /// id, could answer the new request with the cancelled one's answer
    /// and drop the new one's. Inside, every request has an id of its own.
    #[tokio::test]
    async fn a_reused_id_after_a_cancellation_gets_its_own_answer() {
        use tokio::io::AsyncWriteExt as _;
        let (mut client, server_in) = tokio::io::duplex(1 << 16);
        let (server_out, mut answers) = tokio::io::duplex(1 << 16);
        let mut transport = LineTransport::new(server_in, server_out, 1 << 20, Closing::default());
        let request = br#"{"jsonrpc":"2.0","id":7,"method":"ping"}
"#;
        let inside = |message: RxJsonRpcMessage<RoleServer>| match message {
            JsonRpcMessage::Request(r) => r.id,
            JsonRpcMessage::Notification(n) => match n.notification {
                ClientNotification::CancelledNotification(c) => c.params.request_id.unwrap(),
                _ => panic!("not a cancellation"),
            },
            _ => panic!("unexpected"),
        };
        client.write_all(request).await.unwrap();
        let first = inside(transport.receive().await.unwrap());
        client
            .write_all(
                b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":7}}\n",
            )
            .await
            .unwrap();
        assert_eq!(inside(transport.receive().await.unwrap()), first);
        client.write_all(request).await.unwrap();
        let second = inside(transport.receive().await.unwrap());
        assert_ne!(first, second);
        let answer =
            |id: RequestId| JsonRpcMessage::response(rmcp::model::ServerResult::empty(()), id);
        // The cancelled request's answer is not written; the new one's is,
        // under the client's id.
        transport.send(answer(first)).await.unwrap();
        transport.send(answer(second)).await.unwrap();
        let mut reply = vec![0u8; 4096];
        let n = tokio::io::AsyncReadExt::read(&mut answers, &mut reply)
            .await
            .unwrap();
        let lines: Vec<Value> = String::from_utf8_lossy(&reply[..n])
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            lines,
            [serde_json::json!({"jsonrpc": "2.0", "id": 7, "result": {}})]
        );
    }

    /// Regression: rmcp drops a pending `receive` whenever another event
    /// wins its `select!`; a line half read at that moment was lost, and
    /// an error reply being written was never sent (a client hung 30 s).
    #[tokio::test]
    async fn a_dropped_receive_loses_nothing() {
        use tokio::io::AsyncWriteExt as _;
        let (mut client, server_in) = tokio::io::duplex(1 << 16);
        let (server_out, mut answers) = tokio::io::duplex(1 << 16);
        let mut transport = LineTransport::new(server_in, server_out, 1 << 20, Closing::default());
        let line = br#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#;
        client.write_all(&line[..20]).await.unwrap();
        // Half a line: receive has nothing to return; dropped after 20 ms.
        let early = tokio::time::timeout(Duration::from_millis(20), transport.receive()).await;
        assert!(early.is_err(), "returned a message from half a line");
        client.write_all(&line[20..]).await.unwrap();
        client.write_all(b"\nnot json\n").await.unwrap();
        let message = transport.receive().await.expect("the whole line survives");
        let JsonRpcMessage::Request(request) = message else {
            panic!("not a request")
        };
        assert_eq!(
            transport.aliases.answered(&request.id),
            Some(RequestId::Number(3))
        );
        // The garbage line's error is written by its own task, even though
        // this receive is dropped while waiting for more input.
        let late = tokio::time::timeout(Duration::from_millis(20), transport.receive()).await;
        assert!(late.is_err());
        let mut reply = vec![0u8; 4096];
        let n = tokio::io::AsyncReadExt::read(&mut answers, &mut reply)
            .await
            .unwrap();
        assert!(String::from_utf8_lossy(&reply[..n]).contains("-32700"));
    }
}
