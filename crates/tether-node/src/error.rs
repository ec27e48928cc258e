//! The library's errors as Node's: a spawn that cannot find its program is
//! `ENOENT` with `errno`, `syscall` and `path`, as `child_process` gives.
//! A napi error carries only a message, so the fields travel in it,
//! separated by `\u{1}` (`code`, `errno`, `path`, message), and the
//! package's `lib/errors.js` builds the `Error` object from them.

const ENOENT: i32 = 2;
const EACCES: i32 = 13;
const ENOTDIR: i32 = 20;
const EPIPE: i32 = 32;

fn errno_in(reason: &str) -> Option<i32> {
    let start = reason.rfind("(os error ")? + "(os error ".len();
    reason[start..].strip_suffix(')')?.parse().ok()
}

/// Node's name for an errno (the few a spawn gives; `lib/errors.js` maps
/// the rest through `os.constants.errno`).
fn code_of(errno: i32) -> &'static str {
    match errno {
        ENOENT => "ENOENT",
        EACCES => "EACCES",
        ENOTDIR => "ENOTDIR",
        EPIPE => "EPIPE",
        _ => "",
    }
}

fn encoded(code: &str, errno: i32, path: &str, message: &str) -> napi::Error {
    napi::Error::from_reason(format!("\u{1}{code}\u{1}{errno}\u{1}{path}\u{1}{message}"))
}

/// EMFILE, ENFILE (the same numbers on Linux and macOS) or EAGAIN.
fn out_of_resources(error: &std::io::Error) -> bool {
    matches!(error.raw_os_error(), Some(23 | 24)) || error.kind() == std::io::ErrorKind::WouldBlock
}

/// `error` as a napi error whose message `lib/errors.js` turns into Node's.
pub(crate) fn to_js(error: tether::Error) -> napi::Error {
    use tether::Error as E;
    let message = error.to_string();
    match error {
        E::ProgramNotFound { program, .. } => encoded("ENOENT", ENOENT, &program, &message),
        E::NotExecutable { path, reason } => {
            let errno = match errno_in(&reason) {
                Some(errno) => errno,
                None if reason.contains("#!") => ENOENT,
                None => EACCES,
            };
            encoded(code_of(errno), errno, &path.to_string_lossy(), &message)
        }
        E::BadCwd { cwd, reason } => {
            let errno = match std::fs::metadata(&cwd) {
                Ok(meta) if !meta.is_dir() => ENOTDIR,
                Ok(_) => errno_in(&reason).unwrap_or(ENOENT),
                Err(e) => e.raw_os_error().unwrap_or(ENOENT),
            };
            encoded(code_of(errno), errno, &cwd.to_string_lossy(), &message)
        }
        E::StdinClosed { .. } => encoded("EPIPE", EPIPE, "", &message),
        E::InvalidInput { .. }
        | E::Tag(_)
        | E::NoStdin { .. }
        | E::NoSeparateStderr { .. }
        | E::NotATerminal { .. } => encoded("ERR_INVALID_ARG_VALUE", 0, "", &message),
        E::KillIncomplete { .. } => encoded("ETETHER_KILL_INCOMPLETE", 0, "", &message),
        E::UnknownSession { .. } | E::AmbiguousSession { .. } | E::SessionIdTooShort { .. } => {
            encoded("ETETHER_NO_SESSION", 0, "", &message)
        }
        E::TooManySessions { .. } => encoded("ETETHER_TOO_MANY_SESSIONS", 0, "", &message),
        E::StdinQueueFull { .. } => encoded("ETETHER_STDIN_QUEUE_FULL", 0, "", &message),
        E::ContainmentUnavailable { .. } | E::LimitNotApplied { .. } => {
            encoded("ETETHER_UNAVAILABLE", 0, "", &message)
        }
        // Out of descriptors or processes while starting the keeper: the
        // errno, so that the package emits Node's EMFILE/ENFILE/EAGAIN as
        // 'error' (what a server handles) instead of throwing ETETHER_KEEPER
        // from spawn() (60 spawns under `ulimit -n 64`: 54 throws before).
        E::Keeper(ref source) if out_of_resources(source) => {
            let errno = source.raw_os_error().unwrap_or(0);
            encoded("", errno, "", &message)
        }
        E::KeeperNotFound { .. } | E::Keeper(_) | E::KeeperLost { .. } | E::Protocol(_) => {
            encoded("ETETHER_KEEPER", 0, "", &message)
        }
        E::Unsupported { .. } => encoded("ENOTSUP", 0, "", &message),
        E::Spawn { source, .. } | E::Io(source) => {
            let errno = source.raw_os_error().unwrap_or(0);
            encoded(code_of(errno), errno, "", &message)
        }
        _ => encoded("ETETHER", 0, "", &message),
    }
}

/// A bad argument from JavaScript (`ERR_INVALID_ARG_VALUE`).
pub(crate) fn invalid(message: &str) -> napi::Error {
    encoded("ERR_INVALID_ARG_VALUE", 0, "", message)
}

pub(crate) trait IntoJs<T> {
    fn js(self) -> napi::Result<T>;
}

impl<T> IntoJs<T> for tether::Result<T> {
    fn js(self) -> napi::Result<T> {
        self.map_err(to_js)
    }
}

/// Milliseconds from JavaScript as a `Duration`.
pub(crate) fn millis(what: &str, ms: f64) -> napi::Result<std::time::Duration> {
    std::time::Duration::try_from_secs_f64(ms / 1000.0).map_err(|_| {
        invalid(&format!(
            "{what} must be a number of milliseconds >= 0, not {ms}"
        ))
    })
}
