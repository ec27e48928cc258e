//! Pseudo-terminals on Unix (POSIX calls only, so Linux and macOS share
//! them): the pair a PTY session runs on, and the owner's end of it.
//!
//! # Where the PTY is opened, and why there
//!
//! The owner opens the pair: it keeps the master (it reads the command's
//! output from it and writes input to it) and hands the slave to the
//! keeper as the command's stdin, stdout and stderr, the same way pipe
//! ends travel. The keeper's forked child does `setsid` and `TIOCSCTTY`
//! (see `keeper/exec.rs`). Opening it in the keeper instead would need a
//! new message to carry the master back over the socket, and would leave a
//! master in a process the command can signal; opening it here costs no
//! fork (posix_openpt, grantpt, unlockpt and open(2) only), and every
//! descriptor is close-on-exec from its first instant, so no other spawn
//! of this process — another session's keeper, say — can inherit a slave
//! and hold some other session's terminal open.
//!
//! # End of file
//!
//! The master reads end of file when no process holds the slave any more:
//! Linux reports it as `EIO`, macOS as a zero read. Both mean EOF here.
//! On Linux a non-blocking read of the master first waits for the
//! kernel's flip buffer to be pushed to the line discipline, so every byte
//! a process wrote to the slave before exiting is readable when it is
//! reaped.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::Mutex;

use crate::terminal::PtySize;

/// The owner's end of a PTY: the master.
#[derive(Debug)]
pub(crate) struct Pty {
    master: OwnedFd,
}

impl Pty {
    /// Opens a PTY pair of `size`: the master, and the slave for the
    /// command (both close-on-exec; the slave with `O_NOCTTY`, so it is
    /// nobody's controlling terminal until the command's `TIOCSCTTY`).
    pub(crate) fn open(size: PtySize) -> io::Result<(Pty, OwnedFd)> {
        let flags = libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC;
        // open(2) of the clone device rather than posix_openpt(3), which
        // POSIX does not promise to take O_CLOEXEC; /dev/ptmx is it on
        // Linux and macOS alike.
        // SAFETY: open(2) of a constant NUL-terminated path.
        let fd = unsafe { libc::open(c"/dev/ptmx".as_ptr(), flags) };
        if fd < 0 {
            // A minimal /dev (a bare devtmpfs, a chroot) may have no ptmx,
            // or no devpts mounted behind it: say which file, not just
            // "No such file or directory".
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("opening /dev/ptmx for a PTY (is devpts mounted on /dev/pts?): {e}"),
            ));
        }
        // SAFETY: `fd` was just opened for us.
        let master = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: grantpt/unlockpt on our master descriptor.
        if unsafe { libc::grantpt(master.as_raw_fd()) } < 0
            || unsafe { libc::unlockpt(master.as_raw_fd()) } < 0
        {
            return Err(io::Error::last_os_error());
        }
        let name = slave_name(&master)?;
        // SAFETY: open(2) of a NUL-terminated path we own.
        let fd = unsafe { libc::open(name.as_ptr(), flags) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("opening the PTY's {}: {e}", name.to_string_lossy()),
            ));
        }
        // SAFETY: `fd` was just opened for us.
        let slave = unsafe { OwnedFd::from_raw_fd(fd) };
        let pty = Pty { master };
        pty.resize(size)?;
        Ok((pty, slave))
    }

    /// Sets the window size; the kernel sends `SIGWINCH` to the terminal's
    /// foreground process group when it changes.
    pub(crate) fn resize(&self, size: PtySize) -> io::Result<()> {
        let ws = libc::winsize {
            ws_row: size.rows(),
            ws_col: size.cols(),
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ reads one winsize from a valid pointer.
        if unsafe { libc::ioctl(self.master.as_raw_fd(), libc::TIOCSWINSZ as _, &ws) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The window size now.
    pub(crate) fn size(&self) -> io::Result<PtySize> {
        window_size(self.master.as_fd()).ok_or_else(io::Error::last_os_error)
    }

    /// The terminal's end-of-file character (`VEOF`, normally Ctrl-D): at
    /// the start of a line in canonical mode, the program's `read` returns
    /// 0 — what closing a pipe does.
    pub(crate) fn eof_char(&self) -> u8 {
        // SAFETY: tcgetattr fills a zeroed termios; on failure we use ^D.
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(self.master.as_raw_fd(), &mut t) == 0 && t.c_cc[libc::VEOF] != 0 {
                t.c_cc[libc::VEOF]
            } else {
                0x04
            }
        }
    }

    /// What to write so that a canonical-mode read at the start of a line
    /// sees end of file: the `VEOF` character alone.
    pub(crate) fn eof_input(&self) -> Vec<u8> {
        vec![self.eof_char()]
    }

    pub(crate) fn try_clone(&self) -> io::Result<Pty> {
        Ok(Pty {
            master: self.master.try_clone()?,
        })
    }

    /// Blocking read; end of file (all slave holders gone) is `Ok(0)`.
    pub(crate) fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match nix::unistd::read(self.master.as_fd(), buf) {
                Ok(n) => return Ok(n),
                Err(nix::errno::Errno::EINTR) => {}
                Err(nix::errno::Errno::EIO) => return Ok(0),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Blocking write. Once nobody holds the slave, `BrokenPipe`.
    pub(crate) fn write(&self, buf: &[u8]) -> io::Result<usize> {
        loop {
            match nix::unistd::write(&self.master, buf) {
                Ok(n) => return Ok(n),
                Err(nix::errno::Errno::EINTR) => {}
                Err(nix::errno::Errno::EIO) => return Err(io::ErrorKind::BrokenPipe.into()),
                Err(e) => return Err(e.into()),
            }
        }
    }

    pub(crate) fn from_fd(master: OwnedFd) -> Pty {
        Pty { master }
    }

    /// The master, for the reactor.
    pub(crate) fn into_fd(self) -> OwnedFd {
        self.master
    }

    pub(crate) fn as_fd(&self) -> BorrowedFd<'_> {
        self.master.as_fd()
    }
}

/// The slave's path. `ptsname(3)` returns a static buffer (`ptsname_r` is
/// not on every Unix), so calls are serialised here.
fn slave_name(master: &OwnedFd) -> io::Result<std::ffi::CString> {
    static PTSNAME: Mutex<()> = Mutex::new(());
    let _serial = PTSNAME.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: ptsname returns NULL or a NUL-terminated string in a static
    // buffer that only this (serialised) call uses until it is copied.
    unsafe {
        let name = libc::ptsname(master.as_raw_fd());
        if name.is_null() {
            return Err(io::Error::last_os_error());
        }
        Ok(std::ffi::CStr::from_ptr(name).to_owned())
    }
}

/// The window size of the terminal `fd` is on, or `None` if it is not one.
pub(crate) fn window_size(fd: BorrowedFd<'_>) -> Option<PtySize> {
    // SAFETY: TIOCGWINSZ fills one zeroed winsize.
    unsafe {
        let mut ws: libc::winsize = std::mem::zeroed();
        if libc::ioctl(fd.as_raw_fd(), libc::TIOCGWINSZ as _, &mut ws) < 0 {
            return None;
        }
        Some(PtySize::clamped(ws.ws_row, ws.ws_col))
    }
}
