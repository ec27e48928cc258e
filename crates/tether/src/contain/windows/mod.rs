//! Windows: not implemented yet. Everything here has the signatures of the
//! Unix backend, so the workspace builds for Windows; spawning returns
//! [`Error::Unsupported`] naming the OS — never an uncontained process.
//! (The job-object backend replaces this module.)

use std::fs::File;
use std::io;
use std::os::windows::io::OwnedHandle;
use std::time::Duration;

use crate::contain::Descendant;
use crate::contain::{ChildIo, SpawnPlan, Spawned, TreeEvent};
use crate::containment::Containment;
use crate::error::{Error, Result};
use crate::identity::ProcessIdentity;

pub(crate) mod holding;
pub(crate) mod init;
pub(crate) mod spill;
pub(crate) mod sys;
pub(crate) mod watchdog;

const OS: &str = "Windows";

/// A value no code can make: the stub's trees, handles and pipes exist
/// only in signatures until the job-object backend lands.
#[derive(Clone, Debug)]
pub(crate) struct Never(());

fn never() -> ! {
    unreachable!("nothing contained exists on Windows yet")
}

fn unsupported(what: &'static str) -> Error {
    Error::Unsupported { what, os: OS }
}

fn io_unsupported() -> io::Error {
    io::Error::new(io::ErrorKind::Unsupported, "not supported on Windows yet")
}

/// An owned OS handle to a file or pipe.
pub(crate) type OwnedIo = OwnedHandle;
/// The owner's end of a pipe made for a session.
pub(crate) type PipeEnd = OwnedHandle;

/// Starting a contained command: not yet on Windows.
pub(crate) fn spawn(_plan: SpawnPlan, _stdio: [&ChildIo; 3]) -> Result<Spawned> {
    Err(unsupported("starting a contained command"))
}

/// A contained tree (none can exist yet on Windows).
#[derive(Debug)]
pub(crate) struct Tree(Never);

impl Tree {
    pub(crate) fn identity(&self) -> &ProcessIdentity {
        never()
    }
    pub(crate) fn containment(&self) -> Containment {
        never()
    }
    pub(crate) fn keeper_pid(&self) -> Option<u32> {
        never()
    }
    pub(crate) fn handle(&self) -> TreeHandle {
        never()
    }
    pub(crate) fn recv(&mut self, _timeout: Option<Duration>) -> Result<Option<TreeEvent>> {
        never()
    }
    pub(crate) fn start_kill(&self, _grace: Duration) {
        never()
    }
    pub(crate) fn descendants(&self) -> Vec<Descendant> {
        never()
    }
    pub(crate) fn watcher(&self) -> io::Result<TreeWatcher> {
        never()
    }
}

/// Starts kills of a tree from other threads.
#[derive(Clone, Debug)]
pub(crate) struct TreeHandle(Never);

impl TreeHandle {
    pub(crate) fn start_kill(&self, _grace: Duration) -> Result<()> {
        never()
    }
}

/// Readiness of a tree's events.
#[derive(Debug)]
pub(crate) struct TreeWatcher(Never);

impl TreeWatcher {
    pub(crate) async fn wait(&self, _drain: impl FnOnce() -> bool) -> io::Result<()> {
        never()
    }
}

/// The owner's read end of an output pipe.
#[derive(Debug)]
pub(crate) struct AsyncReader(Never);

impl AsyncReader {
    pub(crate) fn new(_end: PipeEnd) -> io::Result<AsyncReader> {
        Err(io_unsupported())
    }
    pub(crate) async fn wait(&self, _drain: impl FnOnce() -> bool) -> io::Result<()> {
        never()
    }
    pub(crate) fn read_now(&self, _buf: &mut [u8]) -> io::Result<Option<usize>> {
        never()
    }
    pub(crate) fn capacity(&self) -> usize {
        never()
    }
}

/// The owner's write end of a stdin pipe.
#[derive(Debug)]
pub(crate) struct AsyncWriter(Never);

impl AsyncWriter {
    pub(crate) fn from_file(_file: File) -> io::Result<AsyncWriter> {
        Err(io_unsupported())
    }
    pub(crate) async fn write_some(&self, _bytes: &[u8]) -> io::Result<usize> {
        never()
    }
}

/// Signal forwarding (console control events on Windows): not yet.
#[derive(Debug)]
pub(crate) struct Forwarder;

impl Forwarder {
    pub(crate) fn install() -> io::Result<Forwarder> {
        Ok(Forwarder)
    }
    pub(crate) fn forward_to(self, tree: TreeHandle, _grace: Duration) -> io::Result<()> {
        let _ = tree;
        never()
    }
}

pub(crate) fn output_pipe() -> io::Result<(PipeEnd, OwnedIo)> {
    Err(io_unsupported())
}

/// A stream's kept bytes and how many were dropped before them.
pub(crate) type Kept = (Vec<u8>, u64);

pub(crate) fn read_both(
    _out: Option<File>,
    _err: Option<File>,
    _max: usize,
) -> io::Result<(Kept, Kept)> {
    Err(io_unsupported())
}

pub(crate) fn owner_identity() -> (u32, u64) {
    (std::process::id(), 0)
}

/// No subreapers on Windows (a job holds the tree instead): nothing to do.
pub(crate) fn become_subreaper() -> io::Result<()> {
    Ok(())
}

/// No keepers on Windows: nothing to keep warm.
pub(crate) fn set_warm_keepers(_n: usize) {}

/// There is no keeper program on Windows.
pub mod keeper_entry {
    /// The argument that makes a program act as its keeper (unused here).
    pub const KEEPER_ARG: &str = "__tether-keeper";

    /// There is no keeper on Windows: exits with status 125.
    pub fn main() -> ! {
        eprintln!("tether: there is no keeper on Windows");
        std::process::exit(125)
    }

    /// Does nothing on Windows (no keeper).
    pub fn run_if_requested() {}
}

/// Program search, the Windows way (`PATHEXT`).
pub(crate) mod resolve {
    use std::ffi::OsStr;
    use std::path::{Path, PathBuf};

    /// Search path used when the command's environment has none.
    pub(crate) const DEFAULT_PATH: &str = r"C:\Windows\system32;C:\Windows";

    pub(crate) fn is_path(program: &OsStr) -> bool {
        let s = program.to_string_lossy();
        s.contains('/') || s.contains('\\') || s.contains(':')
    }

    pub(crate) fn is_path_var(key: &OsStr) -> bool {
        key.eq_ignore_ascii_case("PATH")
    }

    fn extensions() -> Vec<String> {
        std::env::var("PATHEXT")
            .unwrap_or_else(|_| ".COM;.EXE;.BAT;.CMD".into())
            .split(';')
            .filter(|e| !e.is_empty())
            .map(str::to_owned)
            .collect()
    }

    pub(crate) fn path_candidates(path: &Path) -> Vec<PathBuf> {
        let mut out = vec![path.to_owned()];
        if path.extension().is_none() {
            out.extend(extensions().iter().map(|e| {
                let mut p = path.as_os_str().to_owned();
                p.push(e);
                PathBuf::from(p)
            }));
        }
        out
    }

    pub(crate) fn candidates(dir: &Path, program: &OsStr) -> Vec<PathBuf> {
        path_candidates(&dir.join(program))
    }

    pub(crate) fn executable(path: &Path) -> std::result::Result<(), Option<String>> {
        let meta = std::fs::metadata(path).map_err(|_| None)?;
        if meta.is_dir() {
            return Err(Some("is a directory".into()));
        }
        Ok(())
    }
}
