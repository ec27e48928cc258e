//! A child's standard streams on Windows, and the owner's pipes.
//!
//! Two kinds of pipe:
//! - for [`Command`](crate::Command)'s `Stdio::Piped`, anonymous pipes
//!   (`CreatePipe`): synchronous, so the owner's end is an ordinary `File`
//!   that blocking `Read`/`Write` work on;
//! - for registry sessions ([`output_pipe`]), a named pipe whose owner end
//!   is overlapped, so that the session driver can wait for data on one
//!   thread while reading it on another (I/O on a *synchronous* handle is
//!   serialized by the kernel: a pending wait would block every read). The
//!   child's end is synchronous, as programs expect. The name is random
//!   and the pipe has one instance, refuses remote clients and is created
//!   with `FILE_FLAG_FIRST_PIPE_INSTANCE`, so nobody else can take our
//!   place in it (std's own pipes are made the same way).

use std::fs::File;
use std::io::{self, Read};
use std::os::windows::io::OwnedHandle;

use windows_sys::Win32::Foundation::{GENERIC_WRITE, INVALID_HANDLE_VALUE};
use windows_sys::Win32::Storage::FileSystem::{
    CreateFileW, FILE_FLAG_FIRST_PIPE_INSTANCE, FILE_FLAG_OVERLAPPED, OPEN_EXISTING,
    PIPE_ACCESS_INBOUND,
};
use windows_sys::Win32::System::Console::{
    GetStdHandle, STD_ERROR_HANDLE, STD_INPUT_HANDLE, STD_OUTPUT_HANDLE,
};
use windows_sys::Win32::System::Pipes::{
    CreateNamedPipeW, PIPE_READMODE_BYTE, PIPE_REJECT_REMOTE_CLIENTS, PIPE_TYPE_BYTE, PIPE_WAIT,
};

use super::handle::{duplicate, owned};
use super::pipe::pipe;
use super::wide::to_wide;
use crate::contain::ChildIo;

/// An owned OS handle to a file or pipe.
pub(crate) type OwnedIo = OwnedHandle;
/// The owner's end of a pipe made by [`output_pipe`].
pub(crate) type PipeEnd = OwnedHandle;

/// Buffer size asked for session output pipes: as on Linux, 256 KiB, so a
/// fast writer wakes the reader 4× less often than with 64 KiB.
pub(super) const PIPE_CAPACITY: u32 = 256 << 10;

/// Which standard stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Which {
    Stdin,
    Stdout,
    Stderr,
}

/// The child's handle for `io` (`None`: the child gets no handle), and the
/// owner's end of a new pipe for `ChildIo::Piped`.
pub(super) fn open(io: &ChildIo, which: Which) -> io::Result<(Option<OwnedHandle>, Option<File>)> {
    Ok(match io {
        ChildIo::Inherit => {
            let id = match which {
                Which::Stdin => STD_INPUT_HANDLE,
                Which::Stdout => STD_OUTPUT_HANDLE,
                Which::Stderr => STD_ERROR_HANDLE,
            };
            // SAFETY: plain call; the handle stays owned by this process's
            // std slot (we only duplicate it).
            let raw = unsafe { GetStdHandle(id) };
            if raw.is_null() || raw == INVALID_HANDLE_VALUE {
                (None, None)
            } else {
                // SAFETY: a live std handle, borrowed for the duplication.
                let borrowed = unsafe { std::os::windows::io::BorrowedHandle::borrow_raw(raw) };
                (Some(duplicate(borrowed, false)?), None)
            }
        }
        ChildIo::Null => {
            let nul = File::options().read(true).write(true).open("NUL")?;
            (Some(nul.into()), None)
        }
        ChildIo::Piped => {
            let (read, write) = pipe()?;
            match which {
                Which::Stdin => (Some(read.into()), Some(write)),
                Which::Stdout | Which::Stderr => (Some(write.into()), Some(read)),
            }
        }
        ChildIo::Os(handle) => (Some(handle.try_clone()?), None),
    })
}

/// A new output pipe for a session: `(owner's overlapped read end, the
/// child's write end)`.
pub(crate) fn output_pipe() -> io::Result<(PipeEnd, OwnedIo)> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = format!(
        r"\\.\pipe\tether-{}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
        crate::session_id::SessionId::generate()
    );
    let wide = to_wide(name.as_ref())?;
    // SAFETY: NUL-terminated name; NULL attributes (not inheritable); the
    // new handle (checked by `owned`) is ours alone.
    let server = unsafe {
        owned(
            CreateNamedPipeW(
                wide.as_ptr(),
                PIPE_ACCESS_INBOUND | FILE_FLAG_OVERLAPPED | FILE_FLAG_FIRST_PIPE_INSTANCE,
                PIPE_TYPE_BYTE | PIPE_READMODE_BYTE | PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS,
                1,
                0,
                PIPE_CAPACITY,
                0,
                std::ptr::null(),
            ),
            "CreateNamedPipeW",
        )
    }?;
    // SAFETY: NUL-terminated name; synchronous write end, not inheritable
    // (spawn duplicates it for the child).
    let client = unsafe {
        owned(
            CreateFileW(
                wide.as_ptr(),
                GENERIC_WRITE,
                0,
                std::ptr::null(),
                OPEN_EXISTING,
                0,
                std::ptr::null_mut(),
            ),
            "CreateFileW(pipe client)",
        )
    }?;
    Ok((server, client))
}

/// A stream's kept bytes and how many were dropped before them.
pub(crate) type Kept = (Vec<u8>, u64);

/// Nothing to poll beside the pipes on Windows: no keeper can die while
/// its tree lives on (the job holds the tree, and the job dies with us).
pub(crate) enum EventSource {}

/// Reads both streams to EOF at once (a thread for stderr), keeping the
/// last `max` bytes of each. (`events` is never given on Windows.) What
/// was read is returned however the reading ended: with a failed read's
/// error beside it.
pub(crate) fn read_both(
    out: Option<File>,
    err: Option<File>,
    max: usize,
    _events: Option<EventSource>,
    _on_events: impl FnMut() -> bool,
) -> ((Kept, Kept), io::Result<()>) {
    let err_thread = err.map(|file| std::thread::spawn(move || read_kept(file, max)));
    let (out, out_ended) = match out {
        Some(file) => read_kept(file, max),
        None => ((Vec::new(), 0), Ok(())),
    };
    let (err, err_ended) = match err_thread {
        Some(thread) => thread.join().unwrap_or_else(|_| {
            (
                (Vec::new(), 0),
                Err(io::Error::other("stderr reader panicked")),
            )
        }),
        None => ((Vec::new(), 0), Ok(())),
    };
    ((out, err), out_ended.and(err_ended))
}

fn read_kept(mut file: File, max: usize) -> (Kept, io::Result<()>) {
    let mut kept = Vec::new();
    let mut dropped = 0u64;
    let mut buf = vec![0u8; 64 << 10];
    let ended = loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => break Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => break Err(e),
        };
        kept.extend_from_slice(&buf[..n]);
        if kept.len() > max {
            let excess = kept.len() - max;
            kept.drain(..excess);
            dropped += excess as u64;
        }
    };
    ((kept, dropped), ended)
}
