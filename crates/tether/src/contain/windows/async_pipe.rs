//! Session pipes for the async session driver, without a reactor.
//!
//! Tokio has no readiness reactor for arbitrary Windows handles, and its
//! named-pipe type reads ahead into a buffer of its own, which would break
//! the driver's rule that, when the main process exits, every byte it wrote
//! is *in the pipe* and readable at once. So:
//!
//! - [`AsyncReader`] (the owner's overlapped end of an [`output_pipe`]) has a
//!   small waiter thread that issues a **zero-byte read**: it completes when
//!   data (or EOF) is there and consumes nothing — how libuv waits on
//!   Windows pipes. The driver is then woken and reads with
//!   `PeekNamedPipe` + `ReadFile`, never blocking; the waiter re-arms only
//!   after the driver found the pipe empty. Measured under Wine 8: the
//!   zero-byte read waits for the writer and fails with
//!   `ERROR_BROKEN_PIPE` at EOF, as on Windows.
//! - [`AsyncWriter`] (a session's piped stdin, an ordinary synchronous
//!   pipe) has a writer thread. A write cancelled mid-flight (the driver's
//!   `select!`) still completes on that thread; its count is handed to the
//!   next call, which passes the same bytes again (the session's write loop
//!   does), so nothing is written twice or lost.
//!
//! [`output_pipe`]: super::stdio::output_pipe

use std::fs::File;
use std::io::{self, Write};
use std::os::windows::io::{AsRawHandle, OwnedHandle};
use std::sync::{Arc, Condvar, Mutex};

use tokio::sync::Notify;
use windows_sys::Win32::Foundation::{
    ERROR_BROKEN_PIPE, ERROR_IO_PENDING, ERROR_NO_DATA, ERROR_PIPE_NOT_CONNECTED, HANDLE,
    WAIT_OBJECT_0,
};
use windows_sys::Win32::Storage::FileSystem::ReadFile;
use windows_sys::Win32::System::IO::{CancelIoEx, GetOverlappedResult, OVERLAPPED};
use windows_sys::Win32::System::Pipes::{GetNamedPipeInfo, PeekNamedPipe};
use windows_sys::Win32::System::Threading::{
    CreateEventW, INFINITE, ResetEvent, SetEvent, WaitForMultipleObjects,
};

use super::handle::owned;
use super::stdio::{PIPE_CAPACITY, PipeEnd};
use super::win_error::{WinError, code_of};

/// A pipe error that means "the writer is gone": end of stream.
pub(super) fn is_eof(err: &io::Error) -> bool {
    matches!(
        code_of(err),
        Some(ERROR_BROKEN_PIPE | ERROR_PIPE_NOT_CONNECTED | ERROR_NO_DATA)
    )
}

/// A manual-reset event.
pub(super) fn event() -> io::Result<OwnedHandle> {
    // SAFETY: NULL attributes and name; the new handle is ours alone.
    unsafe {
        owned(
            CreateEventW(std::ptr::null(), 1, 0, std::ptr::null()),
            "CreateEventW",
        )
    }
}

/// One overlapped read of up to `len` bytes into `buf` (NULL with 0 for a
/// zero-byte read), waiting for it, or for `stop` (then cancelled).
/// `Ok(None)`: stopped.
pub(super) fn read_overlapped(
    pipe: HANDLE,
    buf: *mut u8,
    len: u32,
    done: &OwnedHandle,
    stop: Option<&OwnedHandle>,
) -> io::Result<Option<usize>> {
    let mut ov = OVERLAPPED {
        hEvent: done.as_raw_handle(),
        ..Default::default()
    };
    // SAFETY: the event is valid; `ov` lives until the operation is
    // finished (completed, or cancelled and waited for, below).
    unsafe { ResetEvent(done.as_raw_handle()) };
    let mut got = 0u32;
    // SAFETY: `buf` is valid for `len` bytes (or NULL with 0); `ov` stays
    // valid until the operation completes.
    let ok = unsafe { ReadFile(pipe, buf, len, &mut got, &mut ov) };
    if ok == 0 {
        let err = WinError::last("ReadFile");
        if code_of(&err) != Some(ERROR_IO_PENDING) {
            return Err(err);
        }
        if let Some(stop) = stop {
            let handles = [done.as_raw_handle(), stop.as_raw_handle()];
            // SAFETY: two valid event handles.
            let which = unsafe { WaitForMultipleObjects(2, handles.as_ptr(), 0, INFINITE) };
            if which != WAIT_OBJECT_0 {
                // SAFETY: cancels only this operation; then wait for it to
                // finish so `ov` is not freed while the kernel holds it.
                unsafe {
                    CancelIoEx(pipe, &ov);
                    GetOverlappedResult(pipe, &ov, &mut got, 1);
                }
                return Ok(None);
            }
        }
        // SAFETY: waits for this operation, whose `ov` is still alive.
        if unsafe { GetOverlappedResult(pipe, &ov, &mut got, 1) } == 0 {
            return Err(WinError::last("GetOverlappedResult"));
        }
    }
    Ok(Some(got as usize))
}

/// What the waiter thread and the driver share.
struct ReaderShared {
    pipe: OwnedHandle,
    /// Woken when the pipe may have data (or EOF).
    ready: Notify,
    /// `true`: the waiter may issue its next zero-byte read.
    armed: Mutex<bool>,
    rearm: Condvar,
    /// Set on drop: the waiter cancels its read and exits.
    stop: OwnedHandle,
    /// The driver's reads wait on this one (the waiter has its own).
    read_done: OwnedHandle,
    read_lock: Mutex<()>,
}

/// The owner's read end of an output pipe, with readiness for async code.
pub(crate) struct AsyncReader {
    shared: Arc<ReaderShared>,
}

impl std::fmt::Debug for AsyncReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AsyncReader")
    }
}

impl AsyncReader {
    /// Takes the owner's end of an [`output_pipe`](super::stdio::output_pipe).
    pub(crate) fn new(end: PipeEnd) -> io::Result<AsyncReader> {
        let shared = Arc::new(ReaderShared {
            pipe: end,
            ready: Notify::new(),
            armed: Mutex::new(true),
            rearm: Condvar::new(),
            stop: event()?,
            read_done: event()?,
            read_lock: Mutex::new(()),
        });
        let waiter = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("tether-pipe-waiter".into())
            .stack_size(64 << 10)
            .spawn(move || wait_loop(&waiter))?;
        Ok(AsyncReader { shared })
    }

    /// Waits until the pipe may be readable, then runs `drain`, which reads
    /// with [`read_now`](Self::read_now) and says whether it found the pipe
    /// empty (so the next wait sleeps until new data).
    pub(crate) async fn wait(&self, drain: impl FnOnce() -> bool) -> io::Result<()> {
        self.shared.ready.notified().await;
        if drain() {
            *self.shared.armed.lock().unwrap_or_else(|e| e.into_inner()) = true;
            self.shared.rearm.notify_one();
        } else {
            self.shared.ready.notify_one();
        }
        Ok(())
    }

    /// One read, now, without blocking: `Ok(None)` if the pipe is empty,
    /// `Ok(Some(0))` at EOF.
    pub(crate) fn read_now(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        let _one = self
            .shared
            .read_lock
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let pipe = self.shared.pipe.as_raw_handle();
        let mut avail = 0u32;
        // SAFETY: valid pipe handle; only the count is asked for.
        let ok = unsafe {
            PeekNamedPipe(
                pipe,
                std::ptr::null_mut(),
                0,
                std::ptr::null_mut(),
                &mut avail,
                std::ptr::null_mut(),
            )
        };
        if ok == 0 {
            let err = WinError::last("PeekNamedPipe");
            return if is_eof(&err) { Ok(Some(0)) } else { Err(err) };
        }
        if avail == 0 || buf.is_empty() {
            return Ok(None);
        }
        let len = (avail as usize).min(buf.len()) as u32;
        // Peeked bytes are there: the read completes without waiting for a
        // writer (only this reader takes them).
        match read_overlapped(pipe, buf.as_mut_ptr(), len, &self.shared.read_done, None) {
            Ok(n) => Ok(Some(n.unwrap_or(0))),
            Err(e) if is_eof(&e) => Ok(Some(0)),
            Err(e) => Err(e),
        }
    }

    /// How many bytes the pipe holds at most.
    pub(crate) fn capacity(&self) -> usize {
        let mut inbound = 0u32;
        // SAFETY: valid pipe handle; only the input buffer size is asked.
        let ok = unsafe {
            GetNamedPipeInfo(
                self.shared.pipe.as_raw_handle(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &mut inbound,
                std::ptr::null_mut(),
            )
        };
        if ok == 0 || inbound == 0 {
            PIPE_CAPACITY as usize
        } else {
            inbound as usize
        }
    }
}

impl Drop for AsyncReader {
    fn drop(&mut self) {
        // SAFETY: a valid event handle.
        unsafe { SetEvent(self.shared.stop.as_raw_handle()) };
        *self.shared.armed.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.shared.rearm.notify_one();
    }
}

/// The waiter: a zero-byte read per readiness, re-armed by the driver.
fn wait_loop(shared: &ReaderShared) {
    let Ok(done) = event() else {
        // No event, no waiting: leave the driver awake (it reads by itself).
        shared.ready.notify_one();
        return;
    };
    loop {
        {
            let mut armed = shared.armed.lock().unwrap_or_else(|e| e.into_inner());
            while !*armed {
                armed = shared.rearm.wait(armed).unwrap_or_else(|e| e.into_inner());
            }
            *armed = false;
        }
        let read = read_overlapped(
            shared.pipe.as_raw_handle(),
            std::ptr::null_mut(),
            0,
            &done,
            Some(&shared.stop),
        );
        match read {
            Ok(None) => return,
            Ok(Some(_)) => shared.ready.notify_one(),
            Err(_) => {
                // EOF (or a broken handle): the driver's next read says which.
                shared.ready.notify_one();
                return;
            }
        }
    }
}

/// What the writer thread and the async side share.
struct WriterShared {
    state: Mutex<Write_>,
    wake: Condvar,
    done: Notify,
}

/// Where the writer thread stands.
enum Write_ {
    /// Nothing in flight.
    Idle,
    /// These bytes are to be written.
    Pending(Vec<u8>),
    /// A write finished; its result awaits the next call.
    Done(io::Result<usize>),
    /// The writer was dropped: close the pipe.
    Closed,
}

/// Largest chunk handed to the writer thread per call.
const WRITE_CHUNK: usize = 64 << 10;

/// The owner's write end of a stdin pipe, for async code.
pub(crate) struct AsyncWriter {
    shared: Arc<WriterShared>,
}

impl std::fmt::Debug for AsyncWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AsyncWriter")
    }
}

impl AsyncWriter {
    /// Takes a piped stdin handed out by a spawn.
    pub(crate) fn from_file(file: File) -> io::Result<AsyncWriter> {
        let shared = Arc::new(WriterShared {
            state: Mutex::new(Write_::Idle),
            wake: Condvar::new(),
            done: Notify::new(),
        });
        let writer = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("tether-stdin-writer".into())
            .stack_size(64 << 10)
            .spawn(move || write_loop(&writer, file))?;
        Ok(AsyncWriter { shared })
    }

    /// Writes some of `bytes`, waiting while the pipe is full. A reader that
    /// is gone is `BrokenPipe`. Cancel-safe in the sense of the module docs.
    pub(crate) async fn write_some(&self, bytes: &[u8]) -> io::Result<usize> {
        loop {
            {
                let mut state = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
                match std::mem::replace(&mut *state, Write_::Idle) {
                    Write_::Done(result) => return result.map(|n| n.min(bytes.len())),
                    Write_::Idle => {
                        if bytes.is_empty() {
                            return Ok(0);
                        }
                        let chunk = bytes[..bytes.len().min(WRITE_CHUNK)].to_vec();
                        *state = Write_::Pending(chunk);
                        self.shared.wake.notify_one();
                    }
                    other => *state = other,
                }
            }
            self.shared.done.notified().await;
        }
    }
}

impl Drop for AsyncWriter {
    fn drop(&mut self) {
        // A write the thread already took finishes first; one it has not
        // taken is dropped unwritten (nobody waits for it). Then the thread
        // closes the pipe: the command sees EOF.
        *self.shared.state.lock().unwrap_or_else(|e| e.into_inner()) = Write_::Closed;
        self.shared.wake.notify_one();
    }
}

fn write_loop(shared: &WriterShared, mut file: File) {
    loop {
        let bytes = {
            let mut state = shared.state.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                match std::mem::replace(&mut *state, Write_::Idle) {
                    Write_::Pending(bytes) => break bytes,
                    Write_::Closed => return,
                    other => *state = other,
                }
                state = shared.wake.wait(state).unwrap_or_else(|e| e.into_inner());
            }
        };
        let result = file.write(&bytes).map_err(|e| {
            if is_eof(&e) {
                io::Error::new(io::ErrorKind::BrokenPipe, e)
            } else {
                e
            }
        });
        let mut state = shared.state.lock().unwrap_or_else(|e| e.into_inner());
        if matches!(*state, Write_::Closed) {
            return;
        }
        *state = Write_::Done(result);
        drop(state);
        shared.done.notify_one();
    }
}
