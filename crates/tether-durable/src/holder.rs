//! The holder: `tether holder`, one per user and state directory, which
//! keeps durable sessions in an ordinary [`Registry`] and serves
//! [`protocol`](crate::protocol) requests on the user's socket.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tether::Install;
use tether::local_socket::{Detached, HolderLock, LocalListener, Peer};
use tether::registry::{
    Registry, RegistryConfig, RunSpec, SessionInfo, SessionState, StdinMode, Stream, WaitOptions,
    WaitOutcome,
};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::Notify;

use crate::protocol::{
    DurableInfo, ErrorBody, GapInfo, HelloReply, KillReply, MAX_READ, MAX_REQUEST, OwnerOfRecord,
    ReadReply, Reply, Request, RunSettings, ScreenReply, StartRequest, WaitReply, to_hex,
};
use crate::{DEFAULT_TTL, HOLDER_IDLE, MAX_TTL, socket_path};

/// Most durable sessions one holder keeps running at once.
pub const MAX_LIVE: usize = 1024;

/// Runs the holder for `install` (what `tether holder` does): detaches,
/// reports its readiness on stdout (`ready`; `busy` when another holder
/// runs; otherwise the reason it cannot start, with exit status 1) and
/// serves until it has been idle for [`HOLDER_IDLE`]. Call it before any
/// thread exists. Returns the process's exit status.
pub fn main(install: Install) -> u8 {
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        println!("{what}: {e}");
        1
    };
    if let Err(e) = tether_ledger::secure_state_dir(install.state_dir()) {
        return fail("state directory", &e);
    }
    let ready = match tether::local_socket::detach() {
        Err(e) => return fail("detaching", &e),
        Ok(Detached::Parent { mut ready }) => {
            // The holder's report, or nothing if it died starting.
            let mut report = String::new();
            let _ = std::io::Read::read_to_string(&mut ready, &mut report);
            let report = report.trim();
            println!(
                "{}",
                if report.is_empty() {
                    "the holder died while starting"
                } else {
                    report
                }
            );
            let _ = std::io::stdout().flush();
            return u8::from(report != "ready" && report != "busy");
        }
        Ok(Detached::Holder { ready }) => ready,
    };
    let log = install.state_dir().join("holder.log");
    let mut ready = ready;
    let mut report = move |line: &str| {
        let _ = writeln!(ready, "{line}");
    };
    if let Err(e) = tether::local_socket::redirect_stdio(Some(&log)) {
        report(&format!("redirecting stdio: {e}"));
        return 1;
    }
    // Holds no directory its requester might want to unmount.
    let _ = std::env::set_current_dir("/");
    // Held until this function returns (the kernel drops it if we die).
    let _lock = match HolderLock::try_take(&install.state_dir().join("holder.lock")) {
        Ok(Some(lock)) => lock,
        Ok(None) => {
            report("busy");
            return 0;
        }
        Err(e) => {
            report(&format!("locking holder.lock: {e}"));
            return 1;
        }
    };
    // Orphans of a keeper lost by accident come back to us, and die.
    let _ = tether::become_subreaper();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            report(&format!("starting its runtime: {e}"));
            return 1;
        }
    };
    runtime.block_on(async move {
        let listener = match LocalListener::bind_private(&socket_path(&install)) {
            Ok(listener) => listener,
            Err(e) => {
                report(&format!(
                    "listening on {}: {e}",
                    socket_path(&install).display()
                ));
                return 1;
            }
        };
        let observer = tether_ledger::Recorder::register(&install, "holder").ok();
        let holder = Arc::new(Holder::new(observer, install.clone()));
        report("ready");
        drop(report);
        serve(holder, listener).await;
        0
    })
}

/// How long the holder lingers idle: [`HOLDER_IDLE`] or `$TETHER_HOLDER_IDLE`.
fn idle_limit() -> Duration {
    std::env::var("TETHER_HOLDER_IDLE")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map_or(HOLDER_IDLE, Duration::from_secs_f64)
}

async fn serve(holder: Arc<Holder>, listener: LocalListener) {
    let idle = idle_limit();
    loop {
        // One wake-up per idle period at most: nothing polls while
        // sessions run or clients talk.
        let tick = idle
            .min(Duration::from_secs(30))
            .max(Duration::from_millis(50));
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let holder = Arc::clone(&holder);
                    *holder.last_activity() = Instant::now();
                    holder.connections.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    tokio::spawn(async move {
                        connection(&holder, stream, peer).await;
                        holder.connections.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                        *holder.last_activity() = Instant::now();
                    });
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            _ = tokio::time::sleep(tick) => {
                if holder.registry.live_count() > 0
                    || holder.connections.load(std::sync::atomic::Ordering::SeqCst) > 0
                {
                    *holder.last_activity() = Instant::now();
                } else if holder.last_activity().elapsed() >= idle {
                    break;
                }
            }
        }
    }
    let _ = holder.registry.shutdown().await;
    if let Some(observer) = &holder.observer {
        observer.finish();
    }
}

/// A durable session's own record, beside the registry's.
struct Durable {
    name: Option<String>,
    ttl: Duration,
    deadline: Instant,
    deadline_wall: SystemTime,
    owner: Option<OwnerOfRecord>,
    /// Killed at its TTL.
    expired: bool,
    /// Its TERM → KILL grace (the TTL kill's, and `--replace`'s).
    grace: Duration,
    /// Woken when the deadline changes.
    changed: Arc<Notify>,
}

struct Holder {
    registry: Registry,
    observer: Option<Arc<tether_ledger::Recorder>>,
    durable: Mutex<BTreeMap<String, Durable>>,
    /// Serializes starts, so a name is checked and taken at once.
    starting: tokio::sync::Mutex<()>,
    activity: Mutex<Instant>,
    connections: std::sync::atomic::AtomicUsize,
    uid: u32,
    install: Install,
    /// The ledger, for durable rows (opened on first use; `None` inside
    /// once it cannot be: the sessions run on, tagged).
    ledger: Arc<Mutex<Option<tether_ledger::Ledger>>>,
    me: tether::ProcessIdentity,
}

/// A request's failure, as the reply says it.
struct Failure {
    kind: &'static str,
    message: String,
}

impl Failure {
    fn new(kind: &'static str, message: impl Into<String>) -> Failure {
        Failure {
            kind,
            message: message.into(),
        }
    }
}

impl From<tether::Error> for Failure {
    fn from(e: tether::Error) -> Failure {
        let kind = match &e {
            tether::Error::UnknownSession { .. }
            | tether::Error::AmbiguousSession { .. }
            | tether::Error::SessionIdTooShort { .. } => "unknown_session",
            _ => "failed",
        };
        Failure::new(kind, e.to_string())
    }
}

type Answer = std::result::Result<serde_json::Value, Failure>;

fn value(v: impl Serialize) -> Answer {
    serde_json::to_value(v).map_err(|e| Failure::new("failed", e.to_string()))
}

impl Holder {
    fn new(observer: Option<tether_ledger::Recorder>, install: Install) -> Holder {
        let observer = observer.map(Arc::new);
        let config = RegistryConfig {
            max_live: MAX_LIVE,
            max_finished: MAX_LIVE,
            observer: observer
                .clone()
                .map(|o| o as Arc<dyn tether::registry::SessionObserver>),
            ..RegistryConfig::default()
        };
        Holder {
            registry: Registry::new(config),
            observer,
            durable: Mutex::new(BTreeMap::new()),
            starting: tokio::sync::Mutex::new(()),
            activity: Mutex::new(Instant::now()),
            connections: std::sync::atomic::AtomicUsize::new(0),
            uid: tether::local_socket::effective_uid(),
            install,
            ledger: Arc::new(Mutex::new(None)),
            me: tether::ProcessIdentity::current().unwrap_or_else(|_| tether::ProcessIdentity {
                boot_id: String::new(),
                pid: std::process::id(),
                start_time: 0,
                pidfs_inode: None,
            }),
        }
    }

    /// Writes session `id`'s durable row (name, owner of record, TTL) to
    /// the ledger, off the reactor; best effort, as every ledger write of
    /// a session is (its processes carry spawn tags either way).
    fn record(&self, id: &str) {
        let row = {
            let table = self.table();
            let Some(d) = table.get(id) else { return };
            tether_ledger::DurableRow {
                session: id.to_owned(),
                name: d.name.clone(),
                holder_pid: self.me.pid,
                holder_start_time: self.me.start_time,
                owner_pid: d.owner.as_ref().map(|o| o.pid),
                owner_start_time: d.owner.as_ref().map(|o| o.start_time),
                owner_uid: d.owner.as_ref().map(|o| o.uid),
                owner_purpose: d.owner.as_ref().map(|o| o.purpose.clone()),
                ttl_s: d.ttl.as_secs(),
                expires_at_ms: unix_ms(d.deadline_wall),
            }
        };
        let ledger = Arc::clone(&self.ledger);
        let install = self.install.clone();
        tokio::task::spawn_blocking(move || {
            let mut ledger = ledger.lock().unwrap_or_else(|e| e.into_inner());
            if ledger.is_none() {
                *ledger = tether_ledger::Ledger::open(&install).ok();
            }
            if let Some(store) = ledger.as_mut()
                && let Err(e) = store.record_durable(&row)
            {
                eprintln!(
                    "tether holder: recording durable session {}: {e}",
                    row.session
                );
            }
        });
    }

    fn last_activity(&self) -> MutexGuard<'_, Instant> {
        self.activity.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn table(&self) -> MutexGuard<'_, BTreeMap<String, Durable>> {
        self.durable.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The session id `name_or_id` names: a name of a session we hold,
    /// else an id or id prefix the registry knows.
    fn resolve(&self, name_or_id: &str) -> std::result::Result<String, Failure> {
        {
            let table = self.table();
            // The newest session of that name (a finished one keeps its
            // name until a new one takes it).
            if let Some((id, _)) = table
                .iter()
                .filter(|(_, d)| d.name.as_deref() == Some(name_or_id))
                .max_by_key(|(_, d)| d.deadline_wall)
            {
                return Ok(id.clone());
            }
        }
        match self.registry.resolve(name_or_id) {
            Ok(id) if self.table().contains_key(id.as_str()) => Ok(id.as_str().to_owned()),
            Ok(_) | Err(_) => Err(Failure::new(
                "unknown_session",
                format!("no durable session {name_or_id:?} (see `tether sessions`)"),
            )),
        }
    }

    fn view(&self, info: &SessionInfo) -> DurableInfo {
        let table = self.table();
        let durable = table.get(info.id.as_str());
        let running = info.state == SessionState::Running;
        let expired = durable.is_some_and(|d| d.expired);
        let status = if expired {
            "expired"
        } else {
            info.state.name()
        };
        let now = Instant::now();
        DurableInfo {
            id: info.id.to_string(),
            name: durable.and_then(|d| d.name.clone()),
            durable: true,
            status: status.to_owned(),
            command: info.command.clone(),
            pid: info.identity.pid,
            exit_code: info.exit.and_then(|e| e.code()),
            started_at_ms: unix_ms(info.started_at),
            ttl_s: durable.map_or(0, |d| d.ttl.as_secs()),
            ttl_left_s: match durable {
                Some(d) if running => d.deadline.saturating_duration_since(now).as_secs(),
                _ => 0,
            },
            expires_at_ms: durable.map_or(0, |d| unix_ms(d.deadline_wall)),
            output_bytes: info.output_bytes,
            limits: if info.limits.is_empty() {
                String::new()
            } else {
                info.limits.summary()
            },
            containment: info.containment.to_string(),
            owner: durable.and_then(|d| d.owner.clone()),
            holder_pid: std::process::id(),
            stderr_bytes: info.stderr_bytes,
            stdin_open: info.stdin_open,
            pty: info.pty.is_some(),
        }
    }

    fn info(&self, id: &str) -> std::result::Result<DurableInfo, Failure> {
        let info = self.registry.info(id)?;
        Ok(self.view(&info))
    }

    async fn start(
        self: &Arc<Self>,
        request: StartRequest,
        with: RunSettings,
        peer: Peer,
    ) -> Answer {
        let ttl = match request.ttl_s {
            None => DEFAULT_TTL,
            Some(0) => return Err(Failure::new("bad_request", "ttl must be at least 1 second")),
            Some(s) if Duration::from_secs(s) > MAX_TTL => {
                return Err(Failure::new(
                    "bad_request",
                    format!(
                        "ttl {s}s is beyond the maximum of {}s (7 days)",
                        MAX_TTL.as_secs()
                    ),
                ));
            }
            Some(s) => Duration::from_secs(s),
        };
        if let Some(name) = &request.name
            && (name.is_empty() || name.len() > 128 || name.chars().any(char::is_control))
        {
            return Err(Failure::new(
                "bad_request",
                "a name is 1 to 128 characters, none of them control characters",
            ));
        }
        let mut spec = match (&request.shell, request.argv.is_empty()) {
            (Some(script), true) => RunSpec::shell(script.clone()),
            (None, false) => RunSpec::argv(request.argv.clone()),
            _ => {
                return Err(Failure::new(
                    "bad_request",
                    "give either argv or shell, not both or neither",
                ));
            }
        };
        spec = spec
            .stdin(if with.stdin_null {
                StdinMode::Null
            } else {
                StdinMode::Piped
            })
            .purpose(request.purpose.clone().unwrap_or_else(|| "durable".into()))
            .env_clear();
        for (key, val) in &request.env {
            spec = spec.env(key, val);
        }
        if let Some(cwd) = &request.cwd {
            spec = spec.cwd(cwd);
        }
        if let Some(grace) = request.grace_ms {
            spec = spec.grace(Duration::from_millis(grace));
        }
        if let Some((rows, cols)) = request.pty {
            let size = tether::terminal::PtySize::new(u32::from(rows), u32::from(cols))
                .map_err(|e| Failure::new("bad_request", e.to_string()))?;
            spec = spec.pty(size);
        }
        if request.separate_stderr {
            spec = spec.output(tether::registry::OutputMode::Separate);
        }
        if request.memory.is_some() || request.pids.is_some() || request.cpu.is_some() {
            spec = spec.limits(tether::Limits {
                memory: request.memory,
                pids: request.pids,
                cpu: request.cpu,
                require: request.require_limits,
            });
        }
        if let Some(ms) = with.timeout_ms {
            spec = spec.timeout(Duration::from_millis(ms));
        }
        if let Some(ms) = with.idle_timeout_ms {
            spec = spec.idle_timeout(Duration::from_millis(ms));
        }
        if let Some(bytes) = with.max_memory {
            spec = spec.max_memory(usize::try_from(bytes).unwrap_or(usize::MAX));
        }
        if let Some(bytes) = with.spill_cap {
            spec = spec.spill_cap(bytes);
        }
        if let Some(keep) = with.keep_descendants {
            spec = spec.keep_descendants(keep);
        }
        let _starting = self.starting.lock().await;
        if let Some(name) = &request.name {
            let holder = self
                .table()
                .iter()
                .find(|(_, d)| d.name.as_deref() == Some(name))
                .map(|(id, _)| id.clone());
            if let Some(old) = holder
                && self
                    .registry
                    .info(&old)
                    .is_ok_and(|i| i.state == SessionState::Running)
            {
                if !request.replace {
                    return Err(Failure::new(
                        "name_taken",
                        format!(
                            "a durable session named {name:?} is running ({old}); \
                             kill it, choose another name, or pass --replace"
                        ),
                    ));
                }
                let grace = self
                    .table()
                    .get(&old)
                    .map_or(tether::DEFAULT_GRACE, |d| d.grace);
                self.registry.kill(&old, grace).await?;
            }
            // The name moves to the new session.
            for d in self.table().values_mut() {
                if d.name.as_deref() == Some(name) {
                    d.name = None;
                }
            }
        }
        let id = self.registry.run(spec).await.map_err(|e| Failure {
            kind: match e {
                tether::Error::ProgramNotFound { .. } => "program_not_found",
                tether::Error::NotExecutable { .. } => "not_executable",
                _ => "start_failed",
            },
            message: e.to_string(),
        })?;
        let changed = Arc::new(Notify::new());
        let owner = request.owner.map(|mut o| {
            // The uid is the kernel's word, not the client's.
            o.uid = peer.uid;
            o
        });
        self.table().insert(
            id.as_str().to_owned(),
            Durable {
                name: request.name.clone(),
                ttl,
                deadline: Instant::now() + ttl,
                deadline_wall: SystemTime::now() + ttl,
                owner,
                expired: false,
                grace: request
                    .grace_ms
                    .map_or(tether::DEFAULT_GRACE, Duration::from_millis),
                changed: Arc::clone(&changed),
            },
        );
        self.record(id.as_str());
        let holder = Arc::clone(self);
        let ttl_id = id.as_str().to_owned();
        tokio::spawn(async move { holder.enforce_ttl(ttl_id, changed).await });
        value(self.info(id.as_str())?)
    }

    /// Kills the session at its deadline (extensions move it), unless it
    /// ended first.
    async fn enforce_ttl(self: Arc<Self>, id: String, changed: Arc<Notify>) {
        loop {
            let Some(deadline) = self.table().get(&id).map(|d| d.deadline) else {
                return;
            };
            let ended = self.registry.wait(
                &id,
                WaitOptions::new(deadline.saturating_duration_since(Instant::now())).settled(),
            );
            tokio::select! {
                waited = ended => match waited {
                    Ok(w) if w.outcome == WaitOutcome::Exited => return,
                    Ok(_) => {}
                    Err(_) => return,
                },
                _ = changed.notified() => continue,
            }
            // A deadline moved while we waited is looked at again.
            if self
                .table()
                .get(&id)
                .is_none_or(|d| d.deadline > Instant::now())
            {
                continue;
            }
            let grace = match self.table().get_mut(&id) {
                Some(d) => {
                    d.expired = true;
                    d.grace
                }
                None => tether::DEFAULT_GRACE,
            };
            let _ = self.registry.kill(&id, grace).await;
            return;
        }
    }

    async fn handle(self: &Arc<Self>, request: Request, peer: Peer) -> Answer {
        // Root may look at another user's sessions; changing them is that
        // user's (a mutating request from root is refused here) — except
        // a kill root asks for explicitly (`tether kill --as-root`).
        let mutating = !matches!(
            request,
            Request::Hello
                | Request::List
                | Request::Info { .. }
                | Request::Read { .. }
                | Request::Wait { .. }
                | Request::Screen { .. }
                | Request::Kill { as_root: true, .. }
        );
        if peer.uid != self.uid && (peer.uid != 0 || mutating) {
            return Err(Failure::new(
                "denied",
                format!(
                    "this holder belongs to uid {}; uid {} may not {}",
                    self.uid,
                    peer.uid,
                    if peer.uid == 0 {
                        "change its sessions (a kill may be asked for explicitly: \
                         `tether kill --as-root`)"
                    } else {
                        "use it"
                    }
                ),
            ));
        }
        match request {
            Request::Hello => value(HelloReply {
                pid: std::process::id(),
                uid: self.uid,
                version: env!("CARGO_PKG_VERSION").into(),
                live: self.registry.live_count(),
                protocol: crate::protocol::PROTOCOL,
            }),
            Request::Start(start) => self.start(*start, RunSettings::default(), peer).await,
            Request::StartWith { start, with } => self.start(*start, with, peer).await,
            Request::List => {
                let ids: Vec<String> = self.table().keys().cloned().collect();
                let mut rows: Vec<DurableInfo> = ids
                    .iter()
                    .filter_map(|id| self.registry.info(id).ok())
                    .map(|info| self.view(&info))
                    .collect();
                rows.sort_by_key(|r| r.started_at_ms);
                value(rows)
            }
            Request::Info { session } => value(self.info(&self.resolve(&session)?)?),
            Request::Read {
                session,
                offset,
                max_bytes,
                wait_ms,
                stream,
            } => {
                let id = self.resolve(&session)?;
                let stream = stream_of(stream.as_deref())?;
                let max = max_bytes.clamp(1, MAX_READ);
                let mut chunk = self.registry.read_stream(&id, stream, offset, max)?;
                if chunk.data.is_empty() && !chunk.eof && wait_ms > 0 {
                    let options = WaitOptions::new(Duration::from_millis(wait_ms))
                        .from(chunk.next_offset)
                        .stream(stream)
                        .quiet(Duration::from_millis(2))
                        .through_exit();
                    self.registry.wait(&id, options).await?;
                    chunk = self.registry.read_stream(&id, stream, offset, max)?;
                }
                value(ReadReply {
                    data_hex: to_hex(&chunk.data),
                    offset: chunk.offset,
                    next_offset: chunk.next_offset,
                    dropped: chunk.dropped,
                    eof: chunk.eof,
                    end_offset: chunk.end_offset,
                    gap: chunk.gap.as_ref().map(GapInfo::from),
                })
            }
            Request::Write {
                session,
                data_hex,
                queue,
                close,
            } => {
                let id = self.resolve(&session)?;
                let data = crate::protocol::from_hex(&data_hex)
                    .ok_or_else(|| Failure::new("bad_request", "data_hex is not hex"))?;
                let len = data.len();
                if queue {
                    // Not awaited: the bytes reach the pipe as the command
                    // reads them; this connection is not held meanwhile.
                    let _queued = self.registry.queue_write(&id, data, close)?;
                    return value(serde_json::json!({"queued": len}));
                }
                self.registry.write(&id, &data).await?;
                value(serde_json::json!({"written": len}))
            }
            Request::Keys { session, keys } => {
                let id = self.resolve(&session)?;
                let sent = tether::registry::may_wait_long(|| self.registry.keys(&id, &keys))?;
                // `keys` only encodes them (as the cursor-key mode says):
                // they reach the program written like any input.
                self.registry.write(&id, &sent).await?;
                value(serde_json::json!({"written": sent.len()}))
            }
            Request::Resize {
                session,
                rows,
                cols,
            } => {
                let id = self.resolve(&session)?;
                let size = tether::terminal::PtySize::new(u32::from(rows), u32::from(cols))
                    .map_err(|e| Failure::new("bad_request", e.to_string()))?;
                tether::registry::may_wait_long(|| self.registry.resize(&id, size))?;
                value(serde_json::json!({"rows": rows, "cols": cols}))
            }
            Request::CloseStdin { session } => {
                let id = self.resolve(&session)?;
                self.registry.close_stdin(&id)?;
                value(serde_json::json!({"closed": true}))
            }
            Request::Wait {
                session,
                timeout_ms,
                until,
                from,
                stream,
                quiet_ms,
                prompt,
                through_exit,
            } => {
                let id = self.resolve(&session)?;
                let mut options = WaitOptions::new(Duration::from_millis(timeout_ms))
                    .from(from)
                    .stream(stream_of(stream.as_deref())?);
                if let Some(pattern) = until {
                    options = options.until(pattern);
                }
                if let Some(quiet) = quiet_ms {
                    options = options.quiet(Duration::from_millis(quiet));
                }
                if let Some(pattern) = prompt {
                    options = options.prompt(pattern);
                }
                if through_exit {
                    options = options.through_exit();
                }
                let waited = self.registry.wait(&id, options).await?;
                value(WaitReply {
                    outcome: match waited.outcome {
                        WaitOutcome::Exited => "exited",
                        WaitOutcome::Matched { .. } => "matched",
                        WaitOutcome::Quiet { .. } => "quiet",
                        WaitOutcome::StillRunning => "timeout",
                    }
                    .into(),
                    status: self.view(&waited.info).status,
                    exit_code: waited.info.exit.and_then(|e| e.code()),
                    matched: match waited.outcome {
                        WaitOutcome::Matched { start, end } => Some((start, end)),
                        _ => None,
                    },
                })
            }
            Request::Kill {
                session,
                grace_ms,
                as_root,
            } => {
                if as_root && peer.uid != 0 {
                    return Err(Failure::new(
                        "denied",
                        format!("uid {} is not root: a kill as root is refused", peer.uid),
                    ));
                }
                let id = self.resolve(&session)?;
                let grace = grace_ms.map_or_else(
                    || {
                        self.table()
                            .get(&id)
                            .map_or(tether::DEFAULT_GRACE, |d| d.grace)
                    },
                    Duration::from_millis,
                );
                let killed = self.registry.kill(&id, grace).await?;
                value(KillReply {
                    status: killed.state.name().into(),
                    already_exited: killed.already_exited,
                    descendants_killed: killed.descendants_killed,
                })
            }
            Request::Extend { session, ttl_s } => {
                let id = self.resolve(&session)?;
                let ttl = Duration::from_secs(ttl_s);
                if ttl.is_zero() || ttl > MAX_TTL {
                    return Err(Failure::new(
                        "bad_request",
                        format!("ttl must be 1 s to {} s (7 days)", MAX_TTL.as_secs()),
                    ));
                }
                if self.registry.info(&id)?.state != SessionState::Running {
                    return Err(Failure::new(
                        "bad_request",
                        format!("session {id} has ended: nothing to extend"),
                    ));
                }
                if let Some(d) = self.table().get_mut(&id) {
                    d.ttl = ttl;
                    d.deadline = Instant::now() + ttl;
                    d.deadline_wall = SystemTime::now() + ttl;
                    d.changed.notify_one();
                }
                self.record(&id);
                value(self.info(&id)?)
            }
            Request::Screen { session } => {
                let id = self.resolve(&session)?;
                let screen = tether::registry::may_wait_long(|| self.registry.screen(&id))?;
                value(ScreenReply {
                    lines: screen.lines,
                    cursor_row: screen.cursor_row,
                    cursor_col: screen.cursor_col,
                    rows: screen.size.rows(),
                    cols: screen.size.cols(),
                    alternate_screen: screen.alternate_screen,
                    cursor_hidden: screen.cursor_hidden,
                })
            }
        }
    }
}

async fn connection(
    holder: &Arc<Holder>,
    stream: tether::local_socket::AsyncLocalStream,
    peer: Peer,
) {
    let (read, mut write) = tokio::io::split(stream);
    let mut lines = BufReader::new(read);
    let mut line = Vec::new();
    loop {
        line.clear();
        let mut limited = (&mut lines).take(MAX_REQUEST as u64 + 1);
        let n = match limited.read_until(b'\n', &mut line).await {
            Ok(n) => n,
            Err(_) => return,
        };
        if n == 0 {
            return;
        }
        let oversized = line.len() > MAX_REQUEST;
        let answer = if oversized {
            Err(Failure::new(
                "bad_request",
                format!("request longer than {MAX_REQUEST} bytes"),
            ))
        } else {
            match serde_json::from_slice::<Request>(&line) {
                Ok(request) => holder.handle(request, peer).await,
                Err(e) => Err(Failure::new(
                    "bad_request",
                    format!("malformed request: {e}"),
                )),
            }
        };
        let reply = match answer {
            Ok(result) => Reply {
                ok: true,
                result: Some(result),
                error: None,
            },
            Err(failure) => Reply {
                ok: false,
                result: None,
                error: Some(ErrorBody {
                    kind: failure.kind.into(),
                    message: failure.message,
                }),
            },
        };
        let mut bytes = serde_json::to_vec(&reply).unwrap_or_default();
        bytes.push(b'\n');
        if write.write_all(&bytes).await.is_err() || oversized {
            return;
        }
    }
}

/// The stream a request names: `stderr`, or the main output.
fn stream_of(name: Option<&str>) -> std::result::Result<Stream, Failure> {
    match name {
        None | Some("output") => Ok(Stream::Output),
        Some("stderr") => Ok(Stream::Stderr),
        Some(other) => Err(Failure::new(
            "bad_request",
            format!("no stream {other:?} (`output` or `stderr`)"),
        )),
    }
}

fn unix_ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
