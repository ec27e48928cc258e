//! The client side: connect to this user's holder (starting it if asked),
//! then one request and its reply at a time.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::time::Duration;

use serde::de::DeserializeOwned;
use tether::Install;
use tether::local_socket::LocalStream;

use crate::error::{DurableError, Result};
use crate::holder_program::HolderProgram;
use crate::protocol::{
    DurableInfo, HelloReply, KillReply, OwnerOfRecord, ReadReply, Reply, Request, ScreenReply,
    StartRequest, WaitReply,
};
use crate::socket_path;

/// How long a holder that another request is starting may take to listen.
const HOLDER_BIND: Duration = Duration::from_secs(10);

/// How much longer than a request may take its reply may be awaited.
const REPLY_SLACK: Duration = Duration::from_secs(30);

/// A connection to this user's holder.
#[derive(Debug)]
pub struct Client {
    reader: BufReader<LocalStream>,
    writer: LocalStream,
    hello: HelloReply,
}

/// This process as an owner of record (pid, start time).
pub fn own_identity(purpose: &str) -> OwnerOfRecord {
    let me = tether::ProcessIdentity::current().ok();
    OwnerOfRecord {
        pid: std::process::id(),
        start_time: me.map_or(0, |m| m.start_time),
        uid: tether::local_socket::effective_uid(),
        purpose: purpose.to_owned(),
    }
}

impl Client {
    /// Connects to the holder of `install`, if one runs (`Ok(None)`: none
    /// does — nothing durable exists for this user there).
    ///
    /// # Errors
    /// [`DurableError::Unreachable`] when the socket exists but cannot be
    /// reached (another user's state directory: permission denied).
    pub fn connect(install: &Install) -> Result<Option<Client>> {
        let path = socket_path(install);
        match LocalStream::connect(&path) {
            Ok(stream) => Client::greet(stream).map(Some),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
                ) =>
            {
                Ok(None)
            }
            Err(source) => Err(DurableError::Unreachable { path, source }),
        }
    }

    /// Connects to the holder of `install`, starting one first (`program`
    /// run as `program holder`, detached) when none runs.
    ///
    /// # Errors
    /// [`DurableError::HolderStart`] with the holder's own reason when it
    /// could not start (nothing was started);
    /// [`DurableError::StateDir`] for a state directory that cannot be
    /// trusted.
    pub fn connect_or_start(install: &Install, program: &Path) -> Result<Client> {
        Client::connect_or_start_program(install, &HolderProgram::tether(program))
    }

    /// [`connect_or_start`](Self::connect_or_start) with any holder
    /// program ([`HolderProgram::find`] finds one).
    ///
    /// # Errors
    /// As [`connect_or_start`](Self::connect_or_start).
    pub fn connect_or_start_program(install: &Install, holder: &HolderProgram) -> Result<Client> {
        tether_ledger::secure_state_dir(install.state_dir())?;
        if let Some(client) = Client::connect(install)? {
            return Ok(client);
        }
        start_holder(install, holder)?;
        // `ready`: it listens. `busy`: another holder took the lock first
        // (two first requests at once) and may still be binding its
        // socket — a few ms (~50 ms at most seen here, debug build, cold);
        // looked for again, for a bounded time.
        let give_up = std::time::Instant::now() + HOLDER_BIND;
        loop {
            if let Some(client) = Client::connect(install)? {
                return Ok(client);
            }
            if std::time::Instant::now() >= give_up {
                return Err(DurableError::HolderStart(format!(
                    "a holder runs (holder.lock is taken) but {} does not answer",
                    socket_path(install).display()
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn greet(stream: LocalStream) -> Result<Client> {
        let writer = stream.try_clone()?;
        let mut client = Client {
            reader: BufReader::new(stream),
            writer,
            hello: HelloReply {
                pid: 0,
                uid: 0,
                version: String::new(),
                live: 0,
                protocol: 0,
            },
        };
        client.hello = client.call(&Request::Hello)?;
        // A holder we started while a subreaper is our child: never to be
        // taken for a lost keeper's orphan, and reaped when it exits.
        tether::local_socket::holder_started(client.hello.pid);
        Ok(client)
    }

    /// The holder's pid.
    pub fn holder_pid(&self) -> u32 {
        self.hello.pid
    }

    /// Sends `request`, returns its result.
    ///
    /// # Errors
    /// [`DurableError::UnknownSession`], [`DurableError::NameTaken`],
    /// [`DurableError::Refused`] as the holder says;
    /// [`DurableError::Protocol`] when the connection breaks.
    pub fn call<T: DeserializeOwned>(&mut self, request: &Request) -> Result<T> {
        // A stopped or wedged holder must not hang its clients: each
        // reply is awaited as long as the request may take, plus 30 s.
        let takes = match request {
            Request::Read { wait_ms, .. } => Duration::from_millis(*wait_ms),
            Request::Wait { timeout_ms, .. } => Duration::from_millis(*timeout_ms),
            Request::Kill { grace_ms, .. } => {
                Duration::from_millis(grace_ms.unwrap_or(2000)).saturating_mul(2)
            }
            _ => Duration::ZERO,
        };
        let _ = self
            .reader
            .get_ref()
            .set_read_timeout(Some(takes.saturating_add(REPLY_SLACK)));
        let mut line =
            serde_json::to_vec(request).map_err(|e| DurableError::Protocol(e.to_string()))?;
        line.push(b'\n');
        self.writer
            .write_all(&line)
            .map_err(|e| DurableError::Protocol(format!("sending: {e}")))?;
        let mut answer = String::new();
        let n = self
            .reader
            .read_line(&mut answer)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                    DurableError::Protocol(format!(
                        "no reply from the holder (pid {}) within {} s: is it stopped?",
                        self.hello.pid,
                        takes.saturating_add(REPLY_SLACK).as_secs()
                    ))
                }
                _ => DurableError::Protocol(format!("receiving: {e}")),
            })?;
        if n == 0 {
            return Err(DurableError::Protocol(
                "the holder closed the connection".into(),
            ));
        }
        let reply: Reply = serde_json::from_str(&answer)
            .map_err(|e| DurableError::Protocol(format!("unreadable reply: {e}")))?;
        if !reply.ok {
            let error = reply.error.unwrap_or_else(|| crate::protocol::ErrorBody {
                kind: "failed".into(),
                message: "failed".into(),
            });
            return Err(match error.kind.as_str() {
                "unknown_session" => DurableError::UnknownSession(error.message),
                "name_taken" => DurableError::NameTaken(error.message),
                _ => DurableError::Refused {
                    kind: error.kind,
                    message: error.message,
                },
            });
        }
        serde_json::from_value(reply.result.unwrap_or(serde_json::Value::Null))
            .map_err(|e| DurableError::Protocol(format!("unexpected result: {e}")))
    }

    /// Starts a durable session.
    pub fn start(&mut self, request: StartRequest) -> Result<DurableInfo> {
        if request.separate_stderr {
            self.speaks("stderr apart")?;
        }
        self.call(&Request::Start(Box::new(request)))
    }

    /// Every durable session the holder keeps.
    pub fn list(&mut self) -> Result<Vec<DurableInfo>> {
        self.call(&Request::List)
    }

    /// One session, by id, id prefix or name.
    pub fn info(&mut self, session: &str) -> Result<DurableInfo> {
        self.call(&Request::Info {
            session: session.into(),
        })
    }

    /// Output from `offset`, waiting up to `wait` for some when none is there yet.
    pub fn read(
        &mut self,
        session: &str,
        offset: u64,
        max_bytes: usize,
        wait: Duration,
    ) -> Result<(Vec<u8>, ReadReply)> {
        let reply: ReadReply = self.call(&Request::Read {
            session: session.into(),
            offset,
            max_bytes,
            wait_ms: wait.as_millis() as u64,
            stream: None,
        })?;
        let data = crate::protocol::from_hex(&reply.data_hex)
            .ok_or_else(|| DurableError::Protocol("output is not hex".into()))?;
        Ok((data, reply))
    }

    /// Writes bytes to the session's stdin or terminal.
    pub fn write(&mut self, session: &str, data: &[u8]) -> Result<()> {
        self.call::<serde_json::Value>(&Request::Write {
            session: session.into(),
            data_hex: crate::protocol::to_hex(data),
            queue: false,
            close: false,
        })
        .map(|_| ())
    }

    /// Queues bytes for the session's stdin and returns at once, never
    /// waiting for the command to read them; with `close`, stdin is closed
    /// after them.
    ///
    /// # Errors
    /// As [`write`](Self::write), and [`DurableError::Refused`] when the
    /// holder's queue for the session is full (nothing is queued then).
    pub fn queue_write(&mut self, session: &str, data: &[u8], close: bool) -> Result<()> {
        self.speaks("queued writes")?;
        self.call::<serde_json::Value>(&Request::Write {
            session: session.into(),
            data_hex: crate::protocol::to_hex(data),
            queue: true,
            close,
        })
        .map(|_| ())
    }

    /// Waits for the main process's exit (or `until` to match).
    pub fn wait(
        &mut self,
        session: &str,
        timeout: Duration,
        until: Option<&str>,
    ) -> Result<WaitReply> {
        self.call(&Request::Wait {
            session: session.into(),
            timeout_ms: timeout.as_millis() as u64,
            until: until.map(str::to_owned),
            from: 0,
            stream: None,
            quiet_ms: None,
            prompt: None,
            through_exit: false,
        })
    }

    /// The verified kill.
    pub fn kill(&mut self, session: &str, grace: Option<Duration>) -> Result<KillReply> {
        self.call(&Request::Kill {
            session: session.into(),
            grace_ms: grace.map(|g| g.as_millis() as u64),
            as_root: false,
        })
    }

    /// Root's explicit kill of a session of the user whose holder this is
    /// (root's access is otherwise read-only). Refused by the holder for
    /// anyone but root.
    pub fn kill_as_root(&mut self, session: &str, grace: Option<Duration>) -> Result<KillReply> {
        self.speaks("a kill as root")?;
        self.call(&Request::Kill {
            session: session.into(),
            grace_ms: grace.map(|g| g.as_millis() as u64),
            as_root: true,
        })
    }

    /// Sets the TTL to `ttl` from now.
    pub fn extend(&mut self, session: &str, ttl: Duration) -> Result<DurableInfo> {
        self.call(&Request::Extend {
            session: session.into(),
            ttl_s: whole_seconds(ttl),
        })
    }

    /// A PTY session's screen.
    pub fn screen(&mut self, session: &str) -> Result<ScreenReply> {
        self.call(&Request::Screen {
            session: session.into(),
        })
    }
}

/// What the MCP server's tools need beyond the basics: a stream apart,
/// waits with every option, and the end of input.
impl Client {
    /// Up to `max_bytes` (at least 1) of `stream` (`Some("stderr")`:
    /// stderr apart) from `offset`, without waiting, with where the stream
    /// stands (`end_offset`, `gap`).
    pub fn read_stream(
        &mut self,
        session: &str,
        stream: Option<&str>,
        offset: u64,
        max_bytes: usize,
    ) -> Result<(Vec<u8>, ReadReply)> {
        if stream.is_some() {
            self.speaks("a stream apart")?;
        }
        let reply: ReadReply = self.call(&Request::Read {
            session: session.into(),
            offset,
            max_bytes,
            wait_ms: 0,
            stream: stream.map(str::to_owned),
        })?;
        let data = crate::protocol::from_hex(&reply.data_hex)
            .ok_or_else(|| DurableError::Protocol("output is not hex".into()))?;
        Ok((data, reply))
    }

    /// A [`Request::Wait`] as given (every option).
    pub fn wait_with(&mut self, request: Request) -> Result<WaitReply> {
        if let Request::Wait {
            stream,
            quiet_ms,
            prompt,
            through_exit,
            ..
        } = &request
            && (stream.is_some() || quiet_ms.is_some() || prompt.is_some() || *through_exit)
        {
            self.speaks("these wait options")?;
        }
        self.call(&request)
    }

    /// Resizes a PTY session's terminal.
    pub fn resize(&mut self, session: &str, rows: u16, cols: u16) -> Result<()> {
        self.speaks("resizing")?;
        self.call::<serde_json::Value>(&Request::Resize {
            session: session.into(),
            rows,
            cols,
        })
        .map(|_| ())
    }

    /// Closes the session's stdin (on a PTY: sends its end-of-file character).
    pub fn close_stdin(&mut self, session: &str) -> Result<()> {
        self.speaks("closing stdin")?;
        self.call::<serde_json::Value>(&Request::CloseStdin {
            session: session.into(),
        })
        .map(|_| ())
    }
}

/// A TTL in the protocol's whole seconds, rounded up: a part of a second
/// is never cut to less than asked (0.5 s is 1 s, not a refused 0).
pub(crate) fn whole_seconds(ttl: Duration) -> u64 {
    ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0)
}

impl Client {
    /// Refuses `what`, which [`PROTOCOL`](crate::protocol::PROTOCOL)'s
    /// revision added, when the running holder is older: it would ignore
    /// the fields it does not know and answer something else.
    ///
    /// # Errors
    /// [`DurableError::Refused`] (`old_holder`), naming the holder.
    pub fn speaks(&self, what: &str) -> Result<()> {
        self.speaks_since(what, crate::protocol::PROTOCOL)
    }

    /// Refuses `what`, which protocol revision `since` added, when the
    /// running holder speaks an older one.
    ///
    /// # Errors
    /// As [`speaks`](Self::speaks).
    pub fn speaks_since(&self, what: &str, since: u32) -> Result<()> {
        if self.hello.protocol >= since {
            return Ok(());
        }
        Err(DurableError::Refused {
            kind: "old_holder".into(),
            message: format!(
                "the running durable-session holder (pid {}, tether {}) is older than this \
                 client and does not know {what}; it exits {} minutes after its last session \
                 ends (`tether sessions` lists them, `tether kill` ends one)",
                self.hello.pid,
                self.hello.version,
                crate::HOLDER_IDLE.as_secs() / 60
            ),
        })
    }
}

/// Starts the holder program detached and waits for its readiness report:
/// `ready` (listening), `busy` (another holder took the lock first: it is
/// the one to talk to), or its error.
fn start_holder(install: &Install, holder: &HolderProgram) -> Result<()> {
    let program = holder.program();
    if let Some(tag) = std::env::var_os(tether::SPAWN_TAG_VAR).filter(|t| !t.is_empty()) {
        // A holder started from here would be inside that session's
        // containment (its keeper is our subreaper) and die with it,
        // taking every durable session along: said now, before anything
        // starts, rather than discovered when the session ends.
        return Err(DurableError::HolderStart(format!(
            "this process runs inside a tether session ({}={}), so a holder started from \
             here would be contained by it and die with it; start the holder from outside \
             any session first (`tether holder`), or ask the agent's `tether mcp` \
             (`run` with durable: true)",
            tether::SPAWN_TAG_VAR,
            tag.to_string_lossy()
        )));
    }
    let mut command = std::process::Command::new(program);
    // The holder keeps none of its first requester's environment beyond
    // what it needs itself (each session gets its own requester's
    // environment, sent with the request): no secrets linger in it, and
    // no spawn tag — which would make it look like that requester's
    // orphan once the requester is gone.
    command.env_clear();
    for key in [
        "PATH",
        "HOME",
        "TMPDIR",
        "XDG_RUNTIME_DIR",
        "TETHER_KEEPER",
        "TETHER_HOLDER_IDLE",
        "LANG",
    ] {
        if let Some(value) = std::env::var_os(key) {
            command.env(key, value);
        }
    }
    command
        .args(holder.args())
        .env("TETHER_HOME", install.state_dir())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command
        .spawn()
        .map_err(|e| DurableError::HolderStart(format!("{}: {e}", program.display())))?;
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        let _ = stdout.read_to_string(&mut out);
    }
    if let Some(mut stderr) = child.stderr.take() {
        let _ = stderr.read_to_string(&mut err);
    }
    let status = child.wait()?;
    match out.trim() {
        "ready" | "busy" if status.success() => Ok(()),
        _ => {
            let reason = [out.trim(), err.trim()]
                .iter()
                .filter(|s| !s.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join(": ");
            Err(DurableError::HolderStart(if reason.is_empty() {
                format!(
                    "{} {} exited with {status}",
                    program.display(),
                    holder.args().join(" ")
                )
            } else {
                reason
            }))
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::io::{BufRead, Write};

    #[test]
    fn a_ttl_is_never_cut_below_what_was_asked() {
        assert_eq!(whole_seconds(Duration::from_millis(500)), 1);
        assert_eq!(whole_seconds(Duration::from_millis(1900)), 2);
        assert_eq!(whole_seconds(Duration::from_secs(3)), 3);
    }

    /// A holder from before protocol revisions (its hello has no
    /// `protocol`) is asked for nothing it would misread: a stderr read is
    /// refused here, naming the holder, and never reaches it.
    #[test]
    fn an_older_holder_is_not_asked_what_it_would_misread() {
        let dir = std::env::temp_dir().join(format!("tether-old-holder-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("holder.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let pid = std::process::id();
        let old_holder = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut writer = stream.try_clone().unwrap();
            let mut lines = Vec::new();
            for line in std::io::BufReader::new(stream).lines() {
                let line = line.unwrap();
                let reply = if line.contains("hello") {
                    format!(
                        r#"{{"ok":true,"result":{{"pid":{pid},"uid":0,"version":"0.0.9","live":1}}}}"#
                    )
                } else {
                    r#"{"ok":true,"result":{}}"#.to_owned()
                };
                lines.push(line);
                writeln!(writer, "{reply}").unwrap();
            }
            lines
        });
        let mut client = Client::greet(LocalStream::connect(&path).unwrap()).unwrap();
        let refused = client.read_stream("dev", Some("stderr"), 0, 10);
        assert!(
            matches!(&refused, Err(DurableError::Refused { kind, message })
                if kind == "old_holder" && message.contains("0.0.9")),
            "{refused:?}"
        );
        assert!(client.close_stdin("dev").is_err());
        drop(client);
        let seen = old_holder.join().unwrap();
        assert_eq!(
            seen.len(),
            1,
            "only the hello reached the old holder: {seen:?}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
