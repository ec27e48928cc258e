//! ConPTY: a pseudoconsole for sessions that need a terminal.
//!
//! `CreatePseudoConsole` starts a headless `conhost.exe` that reads our input
//! pipe and renders the screen as VT sequences into our output pipe. The
//! child is attached to it by `PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE` in the
//! *same* `CreateProcessW` that puts it into its job (`spawn::Console::Pseudo`),
//! so a PTY session is as contained as any other — the seed agent's PTY path
//! (winpty) bypassed its job and leaked.
//!
//! conhost itself is not in the session's job: it is the owner's child, and
//! it must outlive the job's last process to paint the final frame (a job
//! that held it would never empty before the close below, which waits for
//! the job). It holds the only write end of the output pipe and lives until
//! [`PseudoConsole::close`] — or until the owner dies, when the kernel
//! closes the owner's end of its signal pipe and it exits.
//!
//! Ending a session, in this order:
//! 1. the job is empty (the tree exited or was killed);
//! 2. [`PseudoConsole::close`] (`ClosePseudoConsole`): conhost paints a
//!    last frame and exits. Until Windows 11 24H2 this call *waits* for
//!    conhost, and conhost may be blocked writing into a full output pipe,
//!    so a reader must be draining the output pipe meanwhile, on another
//!    thread: the job monitor never closes on its own thread
//!    ([`close_in_background`](PseudoConsole::close_in_background));
//! 3. that reader reads to EOF, which comes when conhost — the only writer —
//!    has exited. No byte written before the close is lost, and the pipe
//!    is never closed at a timer.
//!
//! Closing the pseudoconsole while the job still runs is the graceful rung
//! of a PTY session's kill: conhost sends `CTRL_CLOSE_EVENT` to every
//! process attached to it, and those that do not exit are terminated with
//! the console ("client applications attached to the session will be
//! terminated as well", `ClosePseudoConsole`'s documentation) — the
//! console's hang-up, as `SIGHUP` is a Unix terminal's.
//!
//! Wine 8 gaps (cross-platform.md): `CreatePseudoConsole` works, but the
//! child's std handles are never connected to it, so `cmd.exe` output does
//! not reach the pipe and typed input does not reach `cmd.exe` (whose
//! stdin is then NULL: `cmd /k` exits at once); `ResizePseudoConsole`
//! returns `E_NOTIMPL`. Closing works there: EOF follows within ~2 ms.
//! Tests of the gaps skip under Wine.

use std::fs::File;
use std::io;
use std::os::windows::io::{AsRawHandle, OwnedHandle};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use windows_sys::Win32::System::Console::{
    COORD, ClosePseudoConsole, CreatePseudoConsole, HPCON, ResizePseudoConsole,
};

use super::pipe::pipe;
use super::stdio::output_pipe;
use super::win_error::WinError;
use crate::terminal::PtySize;

/// A pseudoconsole, shared by every copy of a session's [`Pty`](super::Pty)
/// and by the job monitor (which closes it when the job is empty).
/// Dropping the last holder closes it.
#[derive(Debug)]
pub struct PseudoConsole {
    /// The pseudoconsole while open; `None` once closed.
    console: Mutex<Option<HPCON>>,
    /// A close has been asked for (it may still be under way).
    closing: AtomicBool,
    /// The size last set: Windows has no call that reads it back.
    size: Mutex<PtySize>,
}

/// A new pseudoconsole and the owner's ends of its two pipes.
#[derive(Debug)]
pub struct Opened {
    pub console: PseudoConsole,
    /// What we write: the terminal's keyboard input (synchronous).
    pub input: File,
    /// What we read: the rendered screen as VT output. The overlapped
    /// server end of a named pipe, so that the session driver's waiter
    /// (`async_pipe`) can wait on it with a zero-byte read.
    pub output: OwnedHandle,
}

impl PseudoConsole {
    /// A pseudoconsole of `size`. conhost gets the read end of an
    /// anonymous input pipe and the (synchronous, as ConPTY requires)
    /// client end of a named output pipe; ours are returned.
    pub fn open(size: PtySize) -> io::Result<Opened> {
        let (pty_in, input) = pipe()?;
        let (output, pty_out) = output_pipe()?;
        let mut console: HPCON = 0;
        // Under Wine, a conhost that Wine itself failed to start is tried
        // again (see `wine::retry_failed_creation`: nothing was created).
        super::wine::retry_failed_creation(|| {
            // SAFETY: valid pipe handles and out pointer. conhost duplicates
            // the handles, so ours are closed when this function returns:
            // conhost holds the output pipe's only write end (EOF once it
            // exits).
            let hr = unsafe {
                CreatePseudoConsole(
                    coord(size),
                    pty_in.as_raw_handle(),
                    pty_out.as_raw_handle(),
                    0,
                    &mut console,
                )
            };
            if hr < 0 {
                return Err(WinError::with_code("CreatePseudoConsole", hr as u32));
            }
            Ok(())
        })?;
        Ok(Opened {
            console: PseudoConsole {
                console: Mutex::new(Some(console)),
                closing: AtomicBool::new(false),
                size: Mutex::new(size),
            },
            input,
            output,
        })
    }

    /// The handle for `spawn::Console::Pseudo`; `None` once closed.
    pub fn handle(&self) -> Option<HPCON> {
        *self.console.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Resizes the screen. Fails with `E_NOTIMPL` under Wine 8; then the
    /// size stays what it was.
    pub fn resize(&self, size: PtySize) -> io::Result<()> {
        let console = self.console.lock().unwrap_or_else(|e| e.into_inner());
        let Some(handle) = *console else {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the pseudoconsole is closed",
            ));
        };
        // SAFETY: the console is open: it is closed only after being taken
        // out of this mutex, which we hold.
        let hr = unsafe { ResizePseudoConsole(handle, coord(size)) };
        if hr < 0 {
            return Err(WinError::with_code("ResizePseudoConsole", hr as u32));
        }
        *self.size.lock().unwrap_or_else(|e| e.into_inner()) = size;
        Ok(())
    }

    /// The size last set.
    pub fn size(&self) -> PtySize {
        *self.size.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Closes the pseudoconsole (step 2 of the module docs), blocking
    /// until conhost has exited on Windows before 11 24H2: a reader must
    /// be draining the output pipe meanwhile. Idempotent.
    pub fn close(&self) {
        self.closing.store(true, Ordering::Release);
        let taken = self
            .console
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(console) = taken {
            // SAFETY: the console was open and is closed exactly once (taken
            // out under the lock, so no resize is using it).
            unsafe { ClosePseudoConsole(console) };
        }
    }

    /// Closes the pseudoconsole on a thread of its own, so that the caller
    /// (the job monitor, which serves every session) never waits for a
    /// conhost blocked on a pipe nobody reads. `false` if a close had
    /// already been asked for.
    pub fn close_in_background(self: &Arc<Self>) -> bool {
        if self.closing.swap(true, Ordering::AcqRel) {
            return false;
        }
        let console = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("tether-conpty-close".into())
            .stack_size(64 << 10)
            .spawn(move || console.close());
        if spawned.is_err() {
            // No thread to be had: close here. The wait is bounded by the
            // output's reader, which the session driver (or the caller
            // holding the Pty) runs on its own thread.
            self.close();
        }
        true
    }
}

impl Drop for PseudoConsole {
    fn drop(&mut self) {
        // The last holder is gone. Every `Pty` drops its read end before
        // its share of this, and the monitor lets go only after the job
        // emptied and `close_in_background` ran, so no conhost blocked on a
        // full pipe can hold this close up for long.
        self.close();
    }
}

/// A screen size as COORD (a `PtySize` is at most 500 × 1000: it fits).
fn coord(size: PtySize) -> COORD {
    COORD {
        X: size.cols() as i16,
        Y: size.rows() as i16,
    }
}

#[cfg(test)]
mod tests {
    use std::os::windows::io::AsHandle;
    use std::time::Duration;

    use super::super::environment::Environment;
    use super::super::job::{Breakaway, Job};
    use super::super::spawn::{Console, MembershipPolicy, Spawn, spawn};
    use super::super::{process, quote, wine};
    use super::*;

    fn cmd_exe() -> std::path::PathBuf {
        std::path::Path::new(&std::env::var_os("SystemRoot").unwrap()).join(r"System32\cmd.exe")
    }

    /// Reads `output` to EOF on a thread (the reader step 2 needs).
    fn drain(output: OwnedHandle) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                match super::super::pty::read_blocking(&output, &mut buf).unwrap() {
                    0 => return bytes,
                    n => bytes.extend_from_slice(&buf[..n]),
                }
            }
        })
    }

    #[test]
    fn the_output_reaches_eof_after_the_job_empties_and_the_console_closes() {
        // Runs under Wine too: only the text needs real Windows.
        let opened = PseudoConsole::open(PtySize::DEFAULT).unwrap();
        let cmd = cmd_exe();
        let line = quote::cmd_script(cmd.as_os_str(), "echo hello-conpty".as_ref()).unwrap();
        let env = Environment::inherit().block();
        let job = Job::new(Breakaway::Refused).unwrap();
        let child = spawn(Spawn {
            application: cmd.as_os_str(),
            command_line: line,
            environment: &env,
            cwd: None,
            console: Console::Pseudo(opened.console.handle().unwrap()),
            job: Some(&job),
            new_process_group: false,
            membership: MembershipPolicy::Atomic,
            extra_flags: 0,
        })
        .unwrap();
        assert!(job.contains(child.process.as_handle()).unwrap());
        let reader = drain(opened.output);
        assert!(process::wait(child.process.as_handle(), Some(Duration::from_secs(20))).unwrap());
        assert_eq!(job.accounting().unwrap().active_processes, 0);
        // The close order of the module docs: exit, close, drain to EOF.
        opened.console.close();
        assert!(opened.console.handle().is_none());
        let bytes = reader.join().unwrap();
        if let Some(v) = wine::version() {
            eprintln!(
                "text not checked under Wine {v}: a pseudoconsole child's std handles are \
                 never connected to it, so no output reaches the pipe (cross-platform.md)"
            );
            return;
        }
        assert!(
            String::from_utf8_lossy(&bytes).contains("hello-conpty"),
            "{:?}",
            String::from_utf8_lossy(&bytes)
        );
    }

    #[test]
    fn resize_changes_the_size() {
        let opened = PseudoConsole::open(PtySize::DEFAULT).unwrap();
        let bigger = PtySize::new(40, 120).unwrap();
        let resized = opened.console.resize(bigger);
        if let Some(v) = wine::version()
            && resized.is_err()
        {
            eprintln!("skipped under Wine {v}: ResizePseudoConsole returns E_NOTIMPL there");
            // A failed resize leaves the size as it was.
            assert_eq!(opened.console.size(), PtySize::DEFAULT);
            return;
        }
        resized.unwrap();
        assert_eq!(opened.console.size(), bigger);
        opened.console.close();
        assert!(opened.console.resize(PtySize::DEFAULT).is_err());
    }
}
