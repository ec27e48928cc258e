//! The command's standard streams on Unix: descriptors for the keeper to
//! install, pipes, and reading two pipes at once.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};

use nix::poll::{PollFd, PollFlags, PollTimeout};

use crate::contain::ChildIo;

/// An owned OS handle to a file, pipe or socket.
pub(crate) type OwnedIo = OwnedFd;

/// The owner's end of a pipe made for a session, before it is registered
/// with the async runtime.
pub(crate) type PipeEnd = OwnedFd;

/// The descriptor the command gets for stream `n` (0, 1, 2), and the
/// owner's end of a pipe when the stream is piped.
pub(crate) fn open(io: &ChildIo, n: i32) -> io::Result<(OwnedFd, Option<File>)> {
    let is_input = n == 0;
    let null = || -> io::Result<OwnedFd> {
        let file = std::fs::OpenOptions::new()
            .read(is_input)
            .write(!is_input)
            .open("/dev/null")?;
        Ok(file.into())
    };
    Ok(match io {
        ChildIo::Null => (null()?, None),
        ChildIo::Inherit => {
            let own = match n {
                0 => io::stdin().as_fd().try_clone_to_owned(),
                1 => io::stdout().as_fd().try_clone_to_owned(),
                _ => io::stderr().as_fd().try_clone_to_owned(),
            };
            match own {
                Ok(fd) => (fd, None),
                // Our own stream is closed: give the child /dev/null rather
                // than a random descriptor that later takes that number.
                Err(_) => (null()?, None),
            }
        }
        ChildIo::Piped => {
            let (read, write) = pipe()?;
            if is_input {
                (read, Some(File::from(write)))
            } else {
                (write, Some(File::from(read)))
            }
        }
        ChildIo::Os(fd) => (fd.try_clone()?, None),
    })
}

/// A pipe, both ends close-on-exec from the start.
pub(crate) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    crate::contain::os::pipe()
}

/// A pipe for a session's output: the owner's read end (non-blocking, for
/// the reactor) and the write end for the command.
pub(crate) fn output_pipe() -> io::Result<(PipeEnd, OwnedIo)> {
    let (read, write) = pipe()?;
    crate::contain::os::enlarge_pipe(&read);
    set_nonblocking(&read)?;
    Ok((read, write))
}

pub(crate) fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let flags = OFlag::from_bits_truncate(fcntl(fd.as_fd(), FcntlArg::F_GETFL)?);
    fcntl(fd.as_fd(), FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    Ok(())
}

/// The last `max` bytes of a stream, and how many came before them.
#[derive(Default)]
struct Tail {
    buf: VecDeque<u8>,
    dropped: u64,
}

impl Tail {
    fn push(&mut self, bytes: &[u8], max: usize) {
        self.buf.extend(bytes);
        if self.buf.len() > max {
            let excess = self.buf.len() - max;
            self.buf.drain(..excess);
            self.dropped += excess as u64;
        }
    }
}

/// A stream's kept bytes and how many were dropped before them.
pub(crate) type Kept = (Vec<u8>, u64);

/// What [`read_both`] polls beside the pipes for the tree's events: a copy
/// of the keeper socket.
pub(crate) type EventSource = super::fork::Lifeline;

/// Reads two pipes to EOF at once, so neither can fill up and block the
/// child while the other is being read. Keeps the last `max` bytes of each.
///
/// While `events` is given, it is polled with the pipes and `on_events`
/// runs each time it is readable: it takes the tree's events in and says
/// whether to keep watching. That is how a keeper's death is noticed while
/// orphans hold the pipes open: the pipes would never reach EOF, and
/// nothing would supervise the tree, until the orphans ended by
/// themselves. `on_events` kills them (see `orphans.rs`) and the pipes
/// then end with their last writer.
///
/// What was read is returned however the reading ended: with a failed
/// read's error beside it (the bytes before it are the command's output
/// all the same).
pub(crate) fn read_both(
    out: Option<File>,
    err: Option<File>,
    max: usize,
    events: Option<EventSource>,
    on_events: impl FnMut() -> bool,
) -> ((Kept, Kept), io::Result<()>) {
    let mut streams: [(Option<File>, Tail); 2] = [(out, Tail::default()), (err, Tail::default())];
    let ended = read_into(&mut streams, max, events, on_events);
    let [(_, out), (_, err)] = streams;
    (
        ((out.buf.into(), out.dropped), (err.buf.into(), err.dropped)),
        ended,
    )
}

fn read_into(
    streams: &mut [(Option<File>, Tail); 2],
    max: usize,
    mut events: Option<EventSource>,
    mut on_events: impl FnMut() -> bool,
) -> io::Result<()> {
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let open: Vec<RawFd> = streams
            .iter()
            .filter_map(|(f, _)| f.as_ref())
            .map(|f| f.as_raw_fd())
            .collect();
        if open.is_empty() {
            break;
        }
        let (ready, event_ready) = {
            let files: Vec<&File> = streams.iter().filter_map(|(f, _)| f.as_ref()).collect();
            let mut pfds: Vec<PollFd> = files
                .iter()
                .map(|f| PollFd::new(f.as_fd(), PollFlags::POLLIN))
                .collect();
            if let Some(source) = &events {
                pfds.push(PollFd::new(source.as_fd(), PollFlags::POLLIN));
            }
            match nix::poll::poll(&mut pfds, PollTimeout::NONE) {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
            let is_ready = |p: &PollFd| p.revents().is_some_and(|r| !r.is_empty());
            let event_ready = events.is_some() && pfds.last().is_some_and(is_ready);
            let ready: Vec<RawFd> = pfds
                .iter()
                .zip(&open)
                .filter(|(p, _)| is_ready(p))
                .map(|(_, fd)| *fd)
                .collect();
            (ready, event_ready)
        };
        if event_ready && !on_events() {
            events = None;
        }
        for fd in ready {
            let (file, tail) = streams
                .iter_mut()
                .find(|(f, _)| f.as_ref().is_some_and(|f| f.as_raw_fd() == fd))
                .expect("polled descriptors come from `streams`");
            match file.as_mut().map(|f| f.read(&mut chunk)) {
                Some(Ok(0)) | None => *file = None,
                Some(Ok(n)) => tail.push(&chunk[..n], max),
                Some(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Some(Err(e)) => return Err(e),
            }
        }
    }
    Ok(())
}
