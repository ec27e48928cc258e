//! Sending and receiving frames (and descriptors) on the owner–keeper socket.

use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};

use super::protocol::FrameBuffer;

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
        // MSG_NOSIGNAL: a dead peer is an EPIPE error, never a SIGPIPE.
        match sendmsg::<()>(sock.as_raw_fd(), &iov, cmsgs, MsgFlags::MSG_NOSIGNAL, None) {
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
    let mut buf = vec![0u8; 64 * 1024];
    let mut space = nix::cmsg_space!([RawFd; 8]);
    loop {
        let mut iov = [IoSliceMut::new(&mut buf)];
        let result = recvmsg::<()>(
            sock.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        );
        let msg = match result {
            Ok(msg) => msg,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        };
        let mut fds = Vec::new();
        for cmsg in msg.cmsgs()? {
            if let ControlMessageOwned::ScmRights(raw) = cmsg {
                // SAFETY: SCM_RIGHTS just installed these descriptors in our
                // table; we are their only owner.
                fds.extend(
                    raw.into_iter()
                        .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                );
            }
        }
        let n = msg.bytes;
        frames.extend(&buf[..n]);
        return Ok((n, fds));
    }
}
