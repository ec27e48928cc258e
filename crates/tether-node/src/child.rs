//! One contained command for `spawn`/`execFile`/`exec`/`run`: a
//! [`tether::Child`] whose piped stdio is handed to JavaScript as
//! descriptors and whose end is waited for on a thread of ours.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::Function;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Either, Env, Status};
use napi_derive::napi;

use crate::error::{IntoJs, invalid, millis};
use crate::limits::LimitReport;

/// How one of the command's standard streams is set up (`stdio` in
/// JavaScript: `-1` a new pipe, `-2` inherit, `-3` the null device, `n >= 0`
/// this process's descriptor `n`).
fn stdio(code: i32) -> napi::Result<tether::Stdio> {
    Ok(match code {
        -1 => tether::Stdio::Piped,
        -2 => tether::Stdio::Inherit,
        -3 => tether::Stdio::Null,
        fd if fd >= 0 => tether::Stdio::from_descriptor(fd)
            .map_err(|e| crate::error::to_js(tether::Error::Io(e)))?,
        other => return Err(invalid(&format!("bad stdio code {other}"))),
    })
}

/// What `spawn` takes (built by `lib/child.js` from Node's options).
#[napi(object)]
pub struct SpawnOptions {
    /// The program (a name looked up in `PATH`, or a path).
    pub file: String,
    /// Its arguments (without `argv[0]`).
    pub args: Vec<String>,
    /// `argv[0]` as the command sees it (Unix; default `file`).
    pub argv0: Option<String>,
    pub cwd: Option<String>,
    /// The whole environment as `KEY=value` strings (Node's envPairs).
    pub env: Option<Vec<String>>,
    /// stdin, stdout, stderr (see [`stdio`]).
    pub stdio: Vec<i32>,
    /// Kill the tree after this many milliseconds (`timedOut` reported).
    pub timeout_ms: Option<f64>,
    /// The kill ladder's grace in milliseconds (default 2000).
    pub grace_ms: Option<f64>,
    /// The spawn tag's purpose (default `run`).
    pub purpose: Option<String>,
    /// The command in a session of its own (`detached`; still contained).
    pub detached: Option<bool>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub memory: Option<Either<String, f64>>,
    pub pids: Option<f64>,
    pub cpu: Option<f64>,
    pub require_limits: Option<bool>,
}

/// How the command ended, or why it could not be waited for.
#[napi(object)]
pub struct ExitEvent {
    /// The exit code, if it exited.
    pub code: Option<i32>,
    /// The signal number that ended it, if a signal did.
    pub signal: Option<i32>,
    /// Killed because its `timeout` passed.
    pub timed_out: bool,
    /// Descendants killed on the way to an empty tree.
    pub descendants_killed: u32,
    /// `memory` or `pids` when the command ran into that limit.
    pub limit_hit: Option<String>,
    /// The wait failed (the keeper was lost): the message.
    pub error: Option<String>,
}

impl From<tether::ExitStatus> for ExitEvent {
    fn from(status: tether::ExitStatus) -> ExitEvent {
        let code = status.code();
        ExitEvent {
            code,
            signal: code.is_none().then(|| status.shell_code() - 128),
            timed_out: status.timed_out(),
            descendants_killed: status.descendants_killed(),
            limit_hit: status.limit_hit().map(|hit| hit.name().to_owned()),
            error: None,
        }
    }
}

type OnExit = ThreadsafeFunction<ExitEvent, (), ExitEvent, Status, false>;

/// What the command's object and its waiting thread share.
struct Shared {
    /// Until the exit: the way to the keeper, for `kill`. Taken when the
    /// command has exited, since it holds a socket to the keeper: left to
    /// the JavaScript object's finalizer, each finished command kept a
    /// descriptor until a garbage collection (1,000 `run('true')` in a
    /// loop: +150 descriptors; `ulimit -n 256`: `EMFILE` after ~200).
    handle: Mutex<Option<tether::ChildHandle>>,
    /// The threadsafe function the exit is delivered through, until then
    /// (the waiting thread takes it to call it; `ref`/`unref` act on it
    /// under the lock).
    on_exit: Mutex<Option<OnExit>>,
}

/// Commands running per JavaScript environment (the main thread's, each
/// worker's), so that an environment torn down — a worker that ends —
/// takes its commands with it. Keyed by a number per command.
struct Running {
    next: AtomicU64,
    by_env: Mutex<HashMap<usize, HashMap<u64, tether::ChildHandle>>>,
    hooked: Mutex<HashSet<usize>>,
}

static RUNNING: std::sync::LazyLock<Running> = std::sync::LazyLock::new(|| Running {
    next: AtomicU64::new(1),
    by_env: Mutex::default(),
    hooked: Mutex::default(),
});

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Running {
    /// Records a command of `env`, hooking the environment's teardown the
    /// first time.
    fn add(&self, env: &Env, handle: tether::ChildHandle) -> napi::Result<(usize, u64)> {
        let key = env.raw() as usize;
        if lock(&self.hooked).insert(key) {
            // The environment's end (a worker's exit or termination, the
            // main thread's exit): its commands' trees are killed — with
            // their grace, without waiting; a process that is exiting
            // anyway closes their lifelines next.
            env.add_env_cleanup_hook(key, |key| {
                lock(&RUNNING.hooked).remove(&key);
                let left = lock(&RUNNING.by_env).remove(&key).unwrap_or_default();
                for handle in left.into_values() {
                    let _ = handle.start_kill();
                }
            })?;
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.by_env)
            .entry(key)
            .or_default()
            .insert(id, handle);
        Ok((key, id))
    }

    fn remove(&self, key: usize, id: u64) {
        if let Some(commands) = lock(&self.by_env).get_mut(&key) {
            commands.remove(&id);
        }
    }
}

/// A contained command (the native half of `ChildProcess`).
#[napi]
pub struct NativeChild {
    /// The main process's pid.
    #[napi(readonly)]
    pub pid: u32,
    /// Our end of its stdin pipe, if piped (the package wraps it).
    #[napi(readonly)]
    pub stdin_fd: Option<i32>,
    #[napi(readonly)]
    pub stdout_fd: Option<i32>,
    #[napi(readonly)]
    pub stderr_fd: Option<i32>,
    /// How the tree is held (`subreaper`, `pidns`, …).
    #[napi(readonly)]
    pub containment: String,
    /// The session id in its spawn tag.
    #[napi(readonly)]
    pub session_id: String,
    shared: Arc<Shared>,
    limits: tether::LimitReport,
}

/// Our end of a pipe as a descriptor the package wraps in a socket.
#[cfg(unix)]
fn into_fd(file: std::fs::File) -> i32 {
    use std::os::fd::IntoRawFd;
    file.into_raw_fd()
}

/// Windows has no descriptors for libuv to adopt here (the package does
/// not build there yet: see docs/node.md).
#[cfg(not(unix))]
fn into_fd(file: std::fs::File) -> i32 {
    drop(file);
    -1
}

#[cfg(unix)]
fn unix_setup(command: &mut tether::Command, options: &SpawnOptions) {
    use tether::unix::CommandExt;
    if let Some(argv0) = &options.argv0 {
        command.arg0(argv0);
    }
    if options.detached == Some(true) {
        command.new_session(true);
    }
    if let Some(uid) = options.uid {
        command.uid(uid);
    }
    if let Some(gid) = options.gid {
        command.gid(gid);
    }
}

#[cfg(not(unix))]
fn unix_setup(_command: &mut tether::Command, _options: &SpawnOptions) {}

/// Starts a command contained; `on_exit` is called once with how it ended.
/// Blocks only for the spawn itself (the keeper's start and the command's
/// exec, as `uv_spawn` blocks for fork and exec); the wait is a thread's.
#[napi]
pub fn spawn(
    env: Env,
    options: SpawnOptions,
    on_exit: Function<ExitEvent, ()>,
) -> napi::Result<NativeChild> {
    if options.stdio.len() != 3 {
        return Err(invalid("stdio must have 3 entries"));
    }
    let limits = crate::limits::from_js(
        options.memory.clone(),
        options.pids,
        options.cpu,
        options.require_limits.unwrap_or(false),
    )?;
    let mut command = tether::Command::new(&options.file);
    command.args(&options.args);
    if let Some(cwd) = &options.cwd {
        command.current_dir(cwd);
    }
    if let Some(pairs) = &options.env {
        command.env_clear();
        for pair in pairs {
            // Node's rule: the first `=` ends the name (a name may not
            // have one, except a leading one on Windows).
            let (key, value) = match pair.get(1..).and_then(|rest| rest.find('=')) {
                Some(at) => pair.split_at(at + 1),
                None => continue,
            };
            command.env(key, &value[1..]);
        }
    }
    command
        .stdin(stdio(options.stdio[0])?)
        .stdout(stdio(options.stdio[1])?)
        .stderr(stdio(options.stdio[2])?)
        .purpose(options.purpose.as_deref().unwrap_or("run"))
        .limits(limits);
    if let Some(grace) = options.grace_ms {
        command.grace(millis("grace", grace)?);
    }
    if let Some(timeout) = options.timeout_ms {
        command.timeout(millis("timeout", timeout)?);
    }
    unix_setup(&mut command, &options);
    let mut child = command.spawn().js()?;
    let on_exit: OnExit = on_exit
        .build_threadsafe_function::<ExitEvent>()
        .callee_handled::<false>()
        .build_callback(|ctx| Ok(ctx.value))?;
    let shared = Arc::new(Shared {
        handle: Mutex::new(Some(child.handle())),
        on_exit: Mutex::new(Some(on_exit)),
    });
    let (env_key, id) = RUNNING.add(&env, child.handle())?;
    let native = NativeChild {
        pid: child.id(),
        stdin_fd: child.stdin.take().map(|s| into_fd(s.into_file())),
        stdout_fd: child.stdout.take().map(|s| into_fd(s.into_file())),
        stderr_fd: child.stderr.take().map(|s| into_fd(s.into_file())),
        containment: child.containment().name().to_owned(),
        session_id: child.session_id().as_str().to_owned(),
        shared: Arc::clone(&shared),
        limits: child.limits().clone(),
    };
    std::thread::Builder::new()
        .name("tether-wait".into())
        // The thread only waits on the keeper's socket.
        .stack_size(256 * 1024)
        .spawn(move || {
            let event = match child.wait() {
                Ok(status) => ExitEvent::from(status),
                Err(e) => ExitEvent {
                    code: None,
                    signal: None,
                    timed_out: false,
                    descendants_killed: 0,
                    limit_hit: None,
                    error: Some(e.to_string()),
                },
            };
            // The keeper link, released now (not when JavaScript collects the
            // object).
            *lock(&shared.handle) = None;
            RUNNING.remove(env_key, id);
            // Taken out, so that once the call is delivered nothing of
            // ours keeps the event loop alive.
            if let Some(on_exit) = lock(&shared.on_exit).take() {
                on_exit.call(event, ThreadsafeFunctionCallMode::NonBlocking);
            }
            drop(child);
        })
        .map_err(|e| crate::error::to_js(tether::Error::Io(e)))?;
    Ok(native)
}

/// Node's signal numbers that get special handling.
#[cfg(unix)]
const SIGKILL: i32 = 9;
const SIGTERM: i32 = 15;

#[napi]
impl NativeChild {
    /// Sends `signal` to the whole tree: `SIGTERM` (15) climbs the kill
    /// ladder (every process, then `SIGKILL` after the grace to what is
    /// left); `SIGKILL` (9) reaches every process at once; any other
    /// signal is delivered to every process, nothing more; 0 only says
    /// whether the command still runs. `false` once it has exited.
    #[napi]
    pub fn kill(&self, signal: i32) -> napi::Result<bool> {
        let handle = lock(&self.shared.handle);
        let Some(handle) = handle.as_ref() else {
            return Ok(false);
        };
        let sent = match signal {
            0 => Ok(()),
            SIGTERM => handle.start_kill(),
            _ => send(handle, signal),
        };
        match sent {
            Ok(()) => Ok(true),
            // The keeper is done: the command already finished.
            Err(tether::Error::Keeper(_)) => Ok(false),
            Err(e) => Err(crate::error::to_js(e)),
        }
    }

    /// Lets the event loop end while this command runs (Node's
    /// `subprocess.unref()`); the command is still killed with its owner.
    #[napi]
    pub fn unref(&self, env: Env) -> napi::Result<()> {
        if let Some(on_exit) = lock(&self.shared.on_exit).as_mut() {
            // Deprecated by napi-rs for counting references through
            // clones; here it is Node's own ref/unref of the one function.
            #[allow(deprecated)]
            on_exit.unref(&env)?;
        }
        Ok(())
    }

    /// Undoes [`unref`](NativeChild::unref).
    #[napi(js_name = "ref")]
    pub fn refer(&self, env: Env) -> napi::Result<()> {
        if let Some(on_exit) = lock(&self.shared.on_exit).as_mut() {
            #[allow(deprecated)]
            on_exit.refer(&env)?;
        }
        Ok(())
    }

    /// The limits as applied.
    #[napi(getter)]
    pub fn limits(&self) -> LimitReport {
        LimitReport::from(&self.limits)
    }
}

#[cfg(unix)]
fn send(handle: &tether::ChildHandle, signal: i32) -> tether::Result<()> {
    use tether::unix::ChildExt;
    if signal == SIGKILL {
        // SIGKILL as the only rung: every process at once.
        handle.interrupt(SIGKILL)
    } else {
        handle.signal(signal)
    }
}

#[cfg(not(unix))]
fn send(handle: &tether::ChildHandle, _signal: i32) -> tether::Result<()> {
    handle.start_kill_with_grace(std::time::Duration::ZERO)
}
