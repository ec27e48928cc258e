//! The wire format between an owner and its keeper.
//!
//! One Unix stream socket carries everything: it is the keeper's control
//! channel *and* its lifeline (EOF = the owner is gone). Frames are a `u32`
//! little-endian length followed by a payload whose first byte is the
//! message kind. The command's three stdio descriptors ride along with the
//! `Spawn` frame as `SCM_RIGHTS`. The format is private to one build of
//! tether: owner and keeper are always the same version (the keeper path is
//! resolved per process), so there is no negotiation.

use std::io;

/// Largest frame either side accepts (argv + environment of one command).
pub const MAX_FRAME: usize = 16 << 20;

/// How the tree is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContainmentKind {
    /// The keeper is a child subreaper of the tree.
    Subreaper,
    /// The tree lives in a private PID namespace whose init dies with the keeper.
    PidNamespace,
}

/// What happens to descendants still alive when the main process exits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Leftovers {
    /// Kill them with the ladder; the session ends when the tree is empty.
    #[default]
    Kill,
    /// Leave them running, still contained, until killed or the owner goes.
    Keep,
}

/// Which processes a signal reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The main process's process group (what a terminal's Ctrl-C reaches).
    Group,
    /// Every process of the session.
    Tree,
}

/// Everything the keeper needs to start the command. Paths, argv and the
/// environment are raw bytes: Unix does not promise UTF-8.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpawnSpec {
    pub program: Vec<u8>,
    pub argv: Vec<Vec<u8>>,
    pub envp: Vec<Vec<u8>>,
    pub cwd: Option<Vec<u8>>,
    /// `None` = choose: a PID namespace if the kernel allows, else subreaper.
    pub containment: Option<ContainmentKind>,
    pub leftovers: Leftovers,
    pub grace_ms: u64,
    pub timeout_ms: Option<u64>,
    /// Start the command in a new session (`setsid`) instead of only a new
    /// process group.
    pub new_session: bool,
}

/// Owner → keeper.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Start the command; stdin, stdout, stderr travel as `SCM_RIGHTS`.
    Spawn(SpawnSpec),
    /// Deliver a signal.
    Signal { signal: i32, scope: Scope },
    /// Send `signal` to `scope` now, then SIGKILL the whole tree after
    /// `grace_ms` unless it is empty by then. Answered by `TreeEmpty` or
    /// `KillFailed`.
    Kill {
        signal: i32,
        scope: Scope,
        grace_ms: u64,
    },
}

/// How the main process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Termination {
    /// It exited with this code.
    Code(i32),
    /// A signal killed it.
    Signal(i32),
}

/// Keeper → owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The command is running (its exec succeeded).
    Started {
        pid: u32,
        start_time: u64,
        pidfs_inode: Option<u64>,
        containment: ContainmentKind,
    },
    /// The command could not be started; `stage` names the failing step.
    SpawnFailed { errno: i32, stage: u8 },
    /// The main process ended.
    MainExited {
        termination: Termination,
        timed_out: bool,
    },
    /// The session has no process left. `killed` counts processes the keeper
    /// signalled to death (not the main process's own exit).
    TreeEmpty { killed: u32 },
    /// A kill gave up: these survived SIGKILL for the verification window.
    KillFailed { survivors: Vec<(u32, Vec<u8>)> },
}

/// Names for `Event::SpawnFailed::stage`.
pub const STAGES: [&str; 6] = ["exec", "chdir", "fork", "setup", "pid namespace", "stdio"];

// ---------------------------------------------------------------------------
// Encoding.

#[derive(Default)]
struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn opt_u64(&mut self, v: Option<u64>) {
        match v {
            Some(v) => {
                self.u8(1);
                self.u64(v);
            }
            None => self.u8(0),
        }
    }
    fn bytes(&mut self, v: &[u8]) {
        self.u32(v.len() as u32);
        self.0.extend_from_slice(v);
    }
    fn list(&mut self, v: &[Vec<u8>]) {
        self.u32(v.len() as u32);
        for item in v {
            self.bytes(item);
        }
    }
    /// The finished frame, length prefix included.
    fn frame(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.0.len() + 4);
        out.extend_from_slice(&(self.0.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.0);
        out
    }
}

struct Reader<'a>(&'a [u8]);

fn truncated() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, "truncated keeper message")
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> io::Result<&[u8]> {
        if self.0.len() < n {
            return Err(truncated());
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }
    fn u8(&mut self) -> io::Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> io::Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> io::Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn i32(&mut self) -> io::Result<i32> {
        Ok(i32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn opt_u64(&mut self) -> io::Result<Option<u64>> {
        Ok(if self.u8()? == 1 {
            Some(self.u64()?)
        } else {
            None
        })
    }
    fn bytes(&mut self) -> io::Result<Vec<u8>> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.to_vec())
    }
    fn list(&mut self) -> io::Result<Vec<Vec<u8>>> {
        let n = self.u32()? as usize;
        if n > MAX_FRAME / 4 {
            return Err(truncated());
        }
        (0..n).map(|_| self.bytes()).collect()
    }
}

fn bad(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("bad keeper message: {what}"),
    )
}

fn containment_code(kind: Option<ContainmentKind>) -> u8 {
    match kind {
        None => 0,
        Some(ContainmentKind::Subreaper) => 1,
        Some(ContainmentKind::PidNamespace) => 2,
    }
}

fn containment_from(code: u8) -> io::Result<Option<ContainmentKind>> {
    match code {
        0 => Ok(None),
        1 => Ok(Some(ContainmentKind::Subreaper)),
        2 => Ok(Some(ContainmentKind::PidNamespace)),
        _ => Err(bad("containment")),
    }
}

fn scope_from(code: u8) -> io::Result<Scope> {
    match code {
        0 => Ok(Scope::Group),
        1 => Ok(Scope::Tree),
        _ => Err(bad("scope")),
    }
}

fn scope_code(scope: Scope) -> u8 {
    match scope {
        Scope::Group => 0,
        Scope::Tree => 1,
    }
}

impl Request {
    /// The request as one frame.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        match self {
            Request::Spawn(spec) => {
                w.u8(1);
                w.bytes(&spec.program);
                w.list(&spec.argv);
                w.list(&spec.envp);
                match &spec.cwd {
                    Some(cwd) => {
                        w.u8(1);
                        w.bytes(cwd);
                    }
                    None => w.u8(0),
                }
                w.u8(containment_code(spec.containment));
                w.u8(matches!(spec.leftovers, Leftovers::Kill) as u8);
                w.u64(spec.grace_ms);
                w.opt_u64(spec.timeout_ms);
                w.u8(spec.new_session as u8);
            }
            Request::Signal { signal, scope } => {
                w.u8(2);
                w.i32(*signal);
                w.u8(scope_code(*scope));
            }
            Request::Kill {
                signal,
                scope,
                grace_ms,
            } => {
                w.u8(3);
                w.i32(*signal);
                w.u8(scope_code(*scope));
                w.u64(*grace_ms);
            }
        }
        w.frame()
    }

    /// Decodes one payload (without its length prefix).
    pub fn decode(payload: &[u8]) -> io::Result<Request> {
        let mut r = Reader(payload);
        let request = match r.u8()? {
            1 => {
                let program = r.bytes()?;
                let argv = r.list()?;
                let envp = r.list()?;
                let cwd = if r.u8()? == 1 { Some(r.bytes()?) } else { None };
                let containment = containment_from(r.u8()?)?;
                let leftovers = if r.u8()? == 1 {
                    Leftovers::Kill
                } else {
                    Leftovers::Keep
                };
                Request::Spawn(SpawnSpec {
                    program,
                    argv,
                    envp,
                    cwd,
                    containment,
                    leftovers,
                    grace_ms: r.u64()?,
                    timeout_ms: r.opt_u64()?,
                    new_session: r.u8()? == 1,
                })
            }
            2 => Request::Signal {
                signal: r.i32()?,
                scope: scope_from(r.u8()?)?,
            },
            3 => Request::Kill {
                signal: r.i32()?,
                scope: scope_from(r.u8()?)?,
                grace_ms: r.u64()?,
            },
            _ => return Err(bad("request kind")),
        };
        Ok(request)
    }
}

impl Event {
    /// The event as one frame.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        match self {
            Event::Started {
                pid,
                start_time,
                pidfs_inode,
                containment,
            } => {
                w.u8(1);
                w.u32(*pid);
                w.u64(*start_time);
                w.opt_u64(*pidfs_inode);
                w.u8(containment_code(Some(*containment)));
            }
            Event::SpawnFailed { errno, stage } => {
                w.u8(2);
                w.i32(*errno);
                w.u8(*stage);
            }
            Event::MainExited {
                termination,
                timed_out,
            } => {
                w.u8(3);
                match termination {
                    Termination::Code(c) => {
                        w.u8(0);
                        w.i32(*c);
                    }
                    Termination::Signal(s) => {
                        w.u8(1);
                        w.i32(*s);
                    }
                }
                w.u8(*timed_out as u8);
            }
            Event::TreeEmpty { killed } => {
                w.u8(4);
                w.u32(*killed);
            }
            Event::KillFailed { survivors } => {
                w.u8(5);
                w.u32(survivors.len() as u32);
                for (pid, cmd) in survivors {
                    w.u32(*pid);
                    w.bytes(cmd);
                }
            }
        }
        w.frame()
    }

    /// Decodes one payload (without its length prefix).
    pub fn decode(payload: &[u8]) -> io::Result<Event> {
        let mut r = Reader(payload);
        let event = match r.u8()? {
            1 => Event::Started {
                pid: r.u32()?,
                start_time: r.u64()?,
                pidfs_inode: r.opt_u64()?,
                containment: containment_from(r.u8()?)?.ok_or_else(|| bad("containment"))?,
            },
            2 => Event::SpawnFailed {
                errno: r.i32()?,
                stage: r.u8()?,
            },
            3 => {
                let termination = match r.u8()? {
                    0 => Termination::Code(r.i32()?),
                    1 => Termination::Signal(r.i32()?),
                    _ => return Err(bad("termination")),
                };
                Event::MainExited {
                    termination,
                    timed_out: r.u8()? == 1,
                }
            }
            4 => Event::TreeEmpty { killed: r.u32()? },
            5 => {
                let n = r.u32()? as usize;
                let mut survivors = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    survivors.push((r.u32()?, r.bytes()?));
                }
                Event::KillFailed { survivors }
            }
            _ => return Err(bad("event kind")),
        };
        Ok(event)
    }
}

/// Accumulates bytes from a stream and yields whole payloads.
#[derive(Default, Debug)]
pub struct FrameBuffer {
    buf: Vec<u8>,
}

impl FrameBuffer {
    /// Appends bytes read from the socket.
    pub fn extend(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole payload, if one has arrived.
    pub fn next_payload(&mut self) -> io::Result<Option<Vec<u8>>> {
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_le_bytes(self.buf[..4].try_into().unwrap()) as usize;
        if len > MAX_FRAME {
            return Err(bad("frame too large"));
        }
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        let payload = self.buf[4..4 + len].to_vec();
        self.buf.drain(..4 + len);
        Ok(Some(payload))
    }

    /// Whether a partial frame is pending.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip_request(req: Request) {
        let frame = req.encode();
        let mut fb = FrameBuffer::default();
        // Byte at a time: framing must not depend on read sizes.
        for b in &frame {
            fb.extend(std::slice::from_ref(b));
        }
        let payload = fb.next_payload().unwrap().unwrap();
        assert_eq!(Request::decode(&payload).unwrap(), req);
        assert!(fb.is_empty());
    }

    #[test]
    fn requests_round_trip() {
        round_trip_request(Request::Spawn(SpawnSpec {
            program: b"/bin/echo".to_vec(),
            argv: vec![b"echo".to_vec(), vec![0xff, 0xfe], Vec::new()],
            envp: vec![b"A=B".to_vec()],
            cwd: Some(b"/tmp".to_vec()),
            containment: Some(ContainmentKind::PidNamespace),
            leftovers: Leftovers::Keep,
            grace_ms: 2000,
            timeout_ms: Some(5),
            new_session: true,
        }));
        round_trip_request(Request::Signal {
            signal: 2,
            scope: Scope::Group,
        });
        round_trip_request(Request::Kill {
            signal: 15,
            scope: Scope::Tree,
            grace_ms: 0,
        });
    }

    #[test]
    fn events_round_trip() {
        let events = [
            Event::Started {
                pid: 7,
                start_time: 9,
                pidfs_inode: Some(3),
                containment: ContainmentKind::Subreaper,
            },
            Event::SpawnFailed { errno: 2, stage: 0 },
            Event::MainExited {
                termination: Termination::Signal(9),
                timed_out: true,
            },
            Event::TreeEmpty { killed: 103 },
            Event::KillFailed {
                survivors: vec![(5, b"sleep 1".to_vec())],
            },
        ];
        for event in events {
            let frame = event.encode();
            assert_eq!(Event::decode(&frame[4..]).unwrap(), event);
        }
    }

    #[test]
    fn garbage_is_rejected_not_misread() {
        assert!(Request::decode(&[]).is_err());
        assert!(Request::decode(&[9]).is_err());
        assert!(Request::decode(&[1, 0xff, 0xff, 0xff, 0x7f]).is_err());
        assert!(Event::decode(&[3, 7]).is_err());
        let mut fb = FrameBuffer::default();
        fb.extend(&u32::MAX.to_le_bytes());
        assert!(fb.next_payload().is_err());
    }
}
