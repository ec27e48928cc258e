//! Sending and receiving frames (and descriptors) on the owner–keeper socket.

use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use nix::sys::socket::{ControlMessage, ControlMessageOwned, recvmsg, sendmsg};

use super::protocol::FrameBuffer;
use crate::contain::os;

/// Most descriptors a spawn passes on besides its three streams (one
/// `SCM_RIGHTS` message carries at most 253, Linux's `SCM_MAX_FD`).
pub(crate) const MAX_PASSED_FDS: usize = 250;

/// Writes a whole frame, attaching `fds` (if any) to its first byte.
pub(crate) fn send_frame(sock: BorrowedFd<'_>, frame: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let mut sent = 0;
    while sent < frame.len() {
        let iov = [IoSlice::new(&frame[sent..])];
        let cmsg = [ControlMessage::ScmRights(fds)];
        let cmsgs: &[ControlMessage] = if sent == 0 && !fds.is_empty() {
            &cmsg
        } else {
            &[]
        };
        // A dead peer is an EPIPE error, never a SIGPIPE (MSG_NOSIGNAL on
        // Linux, SO_NOSIGPIPE on the socket on macOS).
        match sendmsg::<()>(sock.as_raw_fd(), &iov, cmsgs, os::SEND_FLAGS, None) {
            Ok(n) => sent += n,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// One read from the socket: appends to `frames`, returns the byte count
/// (0 = EOF) and any descriptors that arrived (close-on-exec).
pub(crate) fn recv_into(
    sock: BorrowedFd<'_>,
    frames: &mut FrameBuffer,
) -> io::Result<(usize, Vec<OwnedFd>)> {
    thread_local! {
        // One receive buffer per thread, not a fresh (zeroed) 64 KiB per
        // message: a spawn and its end are four messages.
        static BUF: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; 64 * 1024]);
    }
    BUF.with_borrow_mut(|buf| recv_with(sock, frames, buf))
}

fn recv_with(
    sock: BorrowedFd<'_>,
    frames: &mut FrameBuffer,
    buf: &mut [u8],
) -> io::Result<(usize, Vec<OwnedFd>)> {
    // Room for a spawn's three streams and the descriptors it passes on.
    let mut space = nix::cmsg_space!([RawFd; 3 + MAX_PASSED_FDS]);
    loop {
        let mut iov = [IoSliceMut::new(buf)];
        let result = recvmsg::<()>(sock.as_raw_fd(), &mut iov, Some(&mut space), os::RECV_FLAGS);
        let msg = match result {
            Ok(msg) => msg,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        };
        let mut fds = Vec::new();
        for cmsg in msg.cmsgs()? {
            if let ControlMessageOwned::ScmRights(raw) = cmsg {
                for fd in raw {
                    // SAFETY: SCM_RIGHTS just installed this descriptor in
                    // our table; we are its only owner.
                    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
                    os::received(&fd);
                    fds.push(fd);
                }
            }
        }
        let n = msg.bytes;
        frames.extend(&buf[..n]);
        return Ok((n, fds));
    }
}
