//! ConPTY: a pseudoconsole for sessions that need a terminal.
//!
//! `CreatePseudoConsole` starts a headless `conhost.exe` that reads our input
//! pipe and renders the screen as VT sequences into our output pipe. The
//! child is attached to it by `PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE` in the
//! *same* `CreateProcessW` that puts it into its job (`spawn::Console::Pseudo`),
//! so a PTY session is as contained as any other — the seed agent's PTY path
//! (winpty) bypassed its job and leaked.
//!
//! Ending a session, in this order:
//! 1. the job is empty (the tree exited or was killed);
//! 2. [`PseudoConsole::close`] (`ClosePseudoConsole`): conhost flushes and
//!    exits. Until Windows 11 24H2 this call *waits* for conhost, and
//!    conhost may be blocked writing into a full output pipe, so a reader
//!    must be draining the output pipe at this time, on another thread;
//! 3. that reader reads to EOF, which comes when conhost — the only writer —
//!    has exited. No byte written before the close is lost.
//!
//! Wine 8 gaps (cross-platform.md): `CreatePseudoConsole` works, but the
//! child's std handles are never connected to it, so `cmd.exe` output does
//! not reach the pipe; `ResizePseudoConsole` returns `E_NOTIMPL`. Tests of
//! both skip under Wine.

use std::fs::File;
use std::io;
use std::os::windows::io::AsRawHandle;

use windows_sys::Win32::System::Console::{
    COORD, ClosePseudoConsole, CreatePseudoConsole, HPCON, ResizePseudoConsole,
};

use super::pipe::pipe;
use super::win_error::WinError;

/// A pseudoconsole and our ends of its two pipes.
#[derive(Debug)]
pub struct PseudoConsole {
    console: Option<HPCON>,
    /// What we write: the terminal's keyboard input.
    pub input: Option<File>,
    /// What we read: the rendered screen, as VT output.
    pub output: Option<File>,
}

impl PseudoConsole {
    /// A pseudoconsole of `cols` × `rows`.
    pub fn new(cols: u16, rows: u16) -> io::Result<PseudoConsole> {
        let size = coord(cols, rows)?;
        let (pty_in, input) = pipe()?;
        let (output, pty_out) = pipe()?;
        let mut console: HPCON = 0;
        // SAFETY: valid pipe handles and out pointer. conhost duplicates the
        // handles, so ours are closed when this function returns.
        let hr = unsafe {
            CreatePseudoConsole(
                size,
                pty_in.as_raw_handle(),
                pty_out.as_raw_handle(),
                0,
                &mut console,
            )
        };
        if hr < 0 {
            return Err(WinError::with_code("CreatePseudoConsole", hr as u32));
        }
        Ok(PseudoConsole {
            console: Some(console),
            input: Some(input),
            output: Some(output),
        })
    }

    /// The handle for `spawn::Console::Pseudo`. Valid until [`close`](Self::close).
    pub fn handle(&self) -> HPCON {
        self.console.expect("pseudoconsole used after close")
    }

    /// Resizes the screen.
    pub fn resize(&self, cols: u16, rows: u16) -> io::Result<()> {
        let size = coord(cols, rows)?;
        // SAFETY: `self.console` is open (not yet closed).
        let hr = unsafe { ResizePseudoConsole(self.handle(), size) };
        if hr < 0 {
            return Err(WinError::with_code("ResizePseudoConsole", hr as u32));
        }
        Ok(())
    }

    /// Closes the pseudoconsole (step 2 of the module docs): a reader must
    /// be draining [`output`](Self::output) meanwhile. Idempotent.
    pub fn close(&mut self) {
        if let Some(console) = self.console.take() {
            // SAFETY: the console is open and closed exactly once (taken).
            unsafe { ClosePseudoConsole(console) };
        }
    }
}

impl Drop for PseudoConsole {
    fn drop(&mut self) {
        // Dropped without the drain of the module docs: close our read end
        // first, so that a conhost blocked writing into a full output pipe
        // fails that write instead of hanging ClosePseudoConsole (nobody
        // would read the bytes anyway).
        self.output.take();
        self.close();
    }
}

/// A screen size as COORD; 0 or more than `i16::MAX` is refused.
fn coord(cols: u16, rows: u16) -> io::Result<COORD> {
    let (Ok(x), Ok(y)) = (i16::try_from(cols), i16::try_from(rows)) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "terminal size too large",
        ));
    };
    if x == 0 || y == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "terminal size must be at least 1x1",
        ));
    }
    Ok(COORD { X: x, Y: y })
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::os::windows::io::AsHandle;
    use std::time::Duration;

    use super::super::environment::Environment;
    use super::super::job::{Breakaway, Job};
    use super::super::spawn::{Console, MembershipPolicy, Spawn, spawn};
    use super::super::{process, quote, wine};
    use super::*;

    #[test]
    fn a_child_in_the_job_writes_to_the_pseudoconsole() {
        if let Some(v) = wine::version() {
            eprintln!(
                "skipped under Wine {v}: a pseudoconsole child's std handles are never connected \
                 to it, so no output reaches the pipe (cross-platform.md)"
            );
            return;
        }
        let mut pty = PseudoConsole::new(80, 25).unwrap();
        let cmd = std::path::Path::new(&std::env::var_os("SystemRoot").unwrap())
            .join(r"System32\cmd.exe");
        let line = quote::cmd_script(cmd.as_os_str(), "echo hello-conpty".as_ref()).unwrap();
        let env = Environment::inherit().block();
        let job = Job::new(Breakaway::Refused).unwrap();
        let child = spawn(Spawn {
            application: cmd.as_os_str(),
            command_line: line,
            environment: &env,
            cwd: None,
            console: Console::Pseudo(pty.handle()),
            job: Some(&job),
            new_process_group: false,
            membership: MembershipPolicy::Atomic,
            extra_flags: 0,
        })
        .unwrap();
        let mut output = pty.output.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = output.read_to_end(&mut bytes);
            bytes
        });
        assert!(process::wait(child.process.as_handle(), Some(Duration::from_secs(20))).unwrap());
        // The close order of the module docs: exit, close, drain to EOF.
        pty.close();
        let bytes = reader.join().unwrap();
        assert!(
            String::from_utf8_lossy(&bytes).contains("hello-conpty"),
            "{:?}",
            String::from_utf8_lossy(&bytes)
        );
    }

    #[test]
    fn resize_changes_the_screen() {
        if let Some(v) = wine::version() {
            eprintln!("skipped under Wine {v}: ResizePseudoConsole returns E_NOTIMPL there");
            return;
        }
        let pty = PseudoConsole::new(80, 25).unwrap();
        pty.resize(120, 40).unwrap();
        assert!(pty.resize(0, 40).is_err());
    }
}
