//! The wire format between an owner and its keeper.
//!
//! One Unix stream socket carries everything: it is the keeper's control
//! channel *and* its lifeline (EOF = the owner is gone). Frames are a `u32`
//! little-endian length followed by a payload whose first byte is the
//! message kind. The command's three stdio descriptors ride along with the
//! `Spawn` frame as `SCM_RIGHTS`. The format is private to one build of
//! tether: owner and keeper are always the same version (the keeper path is
//! resolved per process), so there is no negotiation — and decoding is
//! strict: unknown codes, booleans other than 0/1 and trailing bytes are
//! errors, never guesses.

use std::io;

use std::path::PathBuf;

use crate::contain::event::Termination;
use crate::containment::{Containment, ContainmentPolicy, Leftovers};
use crate::exit::ResourceUsage;
use crate::limits::{Enforcement, LimitHit, LimitReport};

/// Largest frame either side accepts (argv + environment of one command).
pub(crate) const MAX_FRAME: usize = 16 << 20;

/// Which processes a signal reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// The main process's process group (what a terminal's Ctrl-C reaches).
    Group,
    /// Every process of the session.
    Tree,
}

/// One gentle signal of a kill, for `scope`. A kill sends all of its
/// rungs' signals at once; `SIGKILL` rounds follow for whatever is alive
/// when the grace ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rung {
    pub signal: i32,
    pub scope: Scope,
}

/// Which step of starting the command failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SpawnStage {
    /// `execve` itself.
    Exec,
    /// Entering the working directory.
    Chdir,
    /// `fork` (of the command or the namespace init).
    Fork,
    /// Process group / session / signal setup, or preparing the exec.
    Setup,
    /// Entering the PID namespace.
    PidNamespace,
    /// Installing the command's stdio.
    Stdio,
    /// Entering the session's cgroups.
    Cgroup,
    /// Applying the memory limit (the kernel refused the value, or it was
    /// required and could not be enforced).
    MemoryLimit,
    /// Applying the process-count limit (as for `MemoryLimit`).
    PidsLimit,
    /// Applying the CPU limit (as for `MemoryLimit`).
    CpuLimit,
}

impl SpawnStage {
    /// The stage's name in error messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            SpawnStage::Exec => "exec",
            SpawnStage::Chdir => "chdir",
            SpawnStage::Fork => "fork",
            SpawnStage::Setup => "setup",
            SpawnStage::PidNamespace => "pid namespace",
            SpawnStage::Stdio => "stdio",
            SpawnStage::Cgroup => "cgroup",
            SpawnStage::MemoryLimit => "memory limit",
            SpawnStage::PidsLimit => "pids limit",
            SpawnStage::CpuLimit => "cpu limit",
        }
    }

    pub(crate) fn code(self) -> u8 {
        match self {
            SpawnStage::Exec => 0,
            SpawnStage::Chdir => 1,
            SpawnStage::Fork => 2,
            SpawnStage::Setup => 3,
            SpawnStage::PidNamespace => 4,
            SpawnStage::Stdio => 5,
            SpawnStage::Cgroup => 6,
            SpawnStage::MemoryLimit => 7,
            SpawnStage::PidsLimit => 8,
            SpawnStage::CpuLimit => 9,
        }
    }

    pub(crate) fn from_code(code: u8) -> io::Result<SpawnStage> {
        Ok(match code {
            0 => SpawnStage::Exec,
            1 => SpawnStage::Chdir,
            2 => SpawnStage::Fork,
            3 => SpawnStage::Setup,
            4 => SpawnStage::PidNamespace,
            5 => SpawnStage::Stdio,
            6 => SpawnStage::Cgroup,
            7 => SpawnStage::MemoryLimit,
            8 => SpawnStage::PidsLimit,
            9 => SpawnStage::CpuLimit,
            _ => return Err(bad("spawn stage")),
        })
    }
}

/// Where the owner found one limit can be enforced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// A cgroup v2 controller enabled for the children of the v2 base: the
    /// session's v2 leaf gets the limit.
    Cgroup2,
    /// A cgroup v1 hierarchy: the session's leaf goes below this directory
    /// (the owner's own cgroup in that hierarchy).
    Cgroup1(Vec<u8>),
    /// Nowhere, for this reason.
    Unavailable(Vec<u8>),
}

/// The session's limits, each with where to enforce it. Cores are in
/// thousandths.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct LimitSpec {
    pub memory: Option<(u64, Route)>,
    pub pids: Option<(u64, Route)>,
    pub cpu_millis: Option<(u64, Route)>,
    /// The cgroup v2 directory below which the session gets a leaf of its
    /// own (for `cgroup.kill`, and the `Cgroup2` routes); `None`: no v2
    /// leaf.
    pub v2_base: Option<Vec<u8>>,
    /// Fail the start rather than run with a limit that is not enforced.
    pub require: bool,
}

impl LimitSpec {
    /// Whether the session needs cgroup work at all.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn is_empty(&self) -> bool {
        self.memory.is_none()
            && self.pids.is_none()
            && self.cpu_millis.is_none()
            && self.v2_base.is_none()
    }
}

/// Everything the keeper needs to start the command. Paths, argv and the
/// environment are raw bytes: Unix does not promise UTF-8.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SpawnSpec {
    pub program: Vec<u8>,
    pub argv: Vec<Vec<u8>>,
    pub envp: Vec<Vec<u8>>,
    pub cwd: Option<Vec<u8>>,
    pub containment: ContainmentPolicy,
    pub leftovers: Leftovers,
    /// The ladder for kills the keeper starts itself (timeout, lifeline
    /// EOF, leftovers) and for plain kill requests.
    pub ladder: Vec<Rung>,
    pub grace_ms: u64,
    pub timeout_ms: Option<u64>,
    /// Start the command in a new session (`setsid`) instead of only a new
    /// process group.
    pub new_session: bool,
    /// Report job-control stops and continues of the main process (a
    /// foreground command under a terminal).
    pub report_stops: bool,
    /// The command's stdin is a terminal (the slave of a PTY the owner
    /// opened) that becomes its controlling terminal: implies a new
    /// session, whose leader the command is.
    pub controlling_tty: bool,
    /// The command's stdin is the terminal whose foreground the owner holds:
    /// the command's process group takes it before exec.
    pub take_terminal: bool,
    /// Resource limits and where to enforce them.
    pub limits: LimitSpec,
    /// The command's side of the spawn beyond the usual.
    pub setup: SetupSpec,
}

/// What the command's side of a spawn does besides the usual (see
/// `contain::ChildSetup`). The descriptors passed on travel as
/// `SCM_RIGHTS` after the three stdio ones, in the order of `fds`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SetupSpec {
    /// The number each passed descriptor gets in the command.
    pub fds: Vec<i32>,
    pub umask: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub groups: Option<Vec<u32>>,
    /// Signals below 32 (bit `sig`) the command starts with ignored.
    pub ignore: u32,
    /// The command's environment is the keeper's own (a hooked keeper's:
    /// the owner's as the hook left it), with the command's tag in place of
    /// the keeper's: `envp` is used only for that tag.
    pub keeper_env: bool,
}

impl SetupSpec {
    /// Nothing beyond the usual.
    pub(crate) fn is_empty(&self) -> bool {
        *self == SetupSpec::default()
    }
}

/// Owner → keeper.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Request {
    /// Start the command; stdin, stdout, stderr travel as `SCM_RIGHTS`.
    /// (Boxed: far larger than the other requests.)
    Spawn(Box<SpawnSpec>),
    /// Deliver a signal.
    Signal { signal: i32, scope: Scope },
    /// Send the signals of `ladder` (the spawn's own when empty) at once,
    /// then SIGKILL whatever of the tree is alive `grace_ms` later, until
    /// it is empty. Answered by `TreeEmpty` or `KillFailed`.
    Kill { ladder: Vec<Rung>, grace_ms: u64 },
    /// The owner is still here and has seen the keeper stopped: nothing to
    /// do but to be read (the SIGCONT that came with it resumed us).
    Nudge,
}

/// Keeper → owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// The command is running (its exec succeeded).
    Started {
        pid: u32,
        start_time: u64,
        pidfs_inode: Option<u64>,
        containment: Containment,
        /// The limits as applied.
        limits: LimitReport,
    },
    /// The command could not be started at `stage`.
    SpawnFailed { errno: i32, stage: SpawnStage },
    /// The main process ended.
    MainExited {
        termination: Termination,
        timed_out: bool,
        limit_hit: Option<LimitHit>,
        /// Processes OOM-killed for memory the session's own limit did not
        /// run out of (an ancestor's limit, the machine).
        oom_outside: u32,
        /// What the processes reaped by then used (`None`: the keeper's
        /// platform does not measure it).
        usage: Option<ResourceUsage>,
    },
    /// The main process was stopped by `signal` (job control: `SIGTSTP`
    /// from Ctrl-Z, `SIGTTIN` reading a terminal it does not own, …).
    MainStopped { signal: i32 },
    /// The main process was continued after a stop.
    MainContinued,
    /// The session has no process left. `killed` counts processes the keeper
    /// signalled to death (not the main process's own exit).
    TreeEmpty {
        killed: u32,
        limit_hit: Option<LimitHit>,
        /// As in `MainExited`, over the session's whole life.
        oom_outside: u32,
        /// Processes found outside the session's cgroups, where each was
        /// (`hierarchy:path`), and how many times the keeper moved it back.
        escaped: Vec<(u32, Vec<u8>, u32)>,
        /// What the whole tree used, as in `MainExited`.
        usage: Option<ResourceUsage>,
    },
    /// A kill gave up: these survived SIGKILL for the verification window.
    KillFailed { survivors: Vec<(u32, Vec<u8>)> },
    /// The keeper could not set itself up, and exits: why (one line,
    /// UTF-8). Its only words, sent before it reads anything.
    Unusable { reason: Vec<u8> },
}

// ---------------------------------------------------------------------------
// Encoding.

/// A frame being written: a length prefix (filled in by [`Writer::frame`])
/// and the payload after it.
struct Writer(Vec<u8>);

impl Default for Writer {
    fn default() -> Writer {
        Writer::with_capacity(64)
    }
}

impl Writer {
    /// A writer with room for a payload of `payload` bytes.
    fn with_capacity(payload: usize) -> Writer {
        let mut out = Vec::with_capacity(payload + 4);
        out.extend_from_slice(&[0; 4]);
        Writer(out)
    }
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn bool(&mut self, v: bool) {
        self.u8(v as u8);
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
    fn opt_bytes(&mut self, v: Option<&[u8]>) {
        match v {
            Some(v) => {
                self.u8(1);
                self.bytes(v);
            }
            None => self.u8(0),
        }
    }
    fn list(&mut self, v: &[Vec<u8>]) {
        self.u32(v.len() as u32);
        for item in v {
            self.bytes(item);
        }
    }
    fn ladder(&mut self, ladder: &[Rung]) {
        self.u32(ladder.len() as u32);
        for rung in ladder {
            self.i32(rung.signal);
            self.u8(scope_code(rung.scope));
        }
    }
    fn route(&mut self, route: &Route) {
        match route {
            Route::Cgroup2 => self.u8(0),
            Route::Cgroup1(dir) => {
                self.u8(1);
                self.bytes(dir);
            }
            Route::Unavailable(reason) => {
                self.u8(2);
                self.bytes(reason);
            }
        }
    }
    fn limit(&mut self, limit: &Option<(u64, Route)>) {
        match limit {
            Some((value, route)) => {
                self.u8(1);
                self.u64(*value);
                self.route(route);
            }
            None => self.u8(0),
        }
    }
    fn opt_u32(&mut self, v: Option<u32>) {
        match v {
            Some(v) => {
                self.u8(1);
                self.u32(v);
            }
            None => self.u8(0),
        }
    }
    fn u32s(&mut self, v: &[u32]) {
        self.u32(v.len() as u32);
        for &item in v {
            self.u32(item);
        }
    }
    fn setup(&mut self, setup: &SetupSpec) {
        self.u32(setup.fds.len() as u32);
        for &fd in &setup.fds {
            self.i32(fd);
        }
        self.opt_u32(setup.umask);
        self.opt_u32(setup.uid);
        self.opt_u32(setup.gid);
        match &setup.groups {
            Some(groups) => {
                self.u8(1);
                self.u32s(groups);
            }
            None => self.u8(0),
        }
        self.u32(setup.ignore);
        self.bool(setup.keeper_env);
    }
    fn limits(&mut self, spec: &LimitSpec) {
        self.limit(&spec.memory);
        self.limit(&spec.pids);
        self.limit(&spec.cpu_millis);
        self.opt_bytes(spec.v2_base.as_deref());
        self.u8(u8::from(spec.require));
    }
    fn enforced(&mut self, limit: &Option<(u64, Enforcement)>) {
        let Some((value, how)) = limit else {
            return self.u8(0);
        };
        let (code, reason) = match how {
            Enforcement::Cgroup2 => (1, ""),
            Enforcement::Cgroup1 => (2, ""),
            Enforcement::Job => (3, ""),
            Enforcement::Rlimit => (4, ""),
            Enforcement::None(reason) => (5, reason.as_str()),
        };
        self.u8(code);
        self.u64(*value);
        if code == 5 {
            self.bytes(reason.as_bytes());
        }
    }
    fn report(&mut self, report: &LimitReport) {
        use std::os::unix::ffi::OsStrExt;
        self.enforced(&report.memory);
        self.enforced(&report.pids);
        self.enforced(&report.cpu_millis);
        self.opt_bytes(report.cgroup.as_ref().map(|p| p.as_os_str().as_bytes()));
        let cgroups: Vec<Vec<u8>> = report
            .cgroups
            .iter()
            .map(|p| p.as_os_str().as_bytes().to_vec())
            .collect();
        self.list(&cgroups);
    }
    fn hit(&mut self, hit: Option<LimitHit>) {
        match hit {
            None => self.u8(0),
            Some(LimitHit::Memory { victims }) => {
                self.u8(1);
                self.u64(victims as u64);
            }
            Some(LimitHit::Pids { refused }) => {
                self.u8(2);
                self.u64(refused);
            }
        }
    }
    fn usage(&mut self, usage: Option<ResourceUsage>) {
        match usage {
            None => self.u8(0),
            Some(u) => {
                self.u8(1);
                self.u64(u.user_time.as_micros().min(u64::MAX as u128) as u64);
                self.u64(u.system_time.as_micros().min(u64::MAX as u128) as u64);
                self.u64(u.max_rss);
            }
        }
    }
    /// The finished frame, length prefix included.
    fn frame(mut self) -> Vec<u8> {
        let len = (self.0.len() - 4) as u32;
        self.0[..4].copy_from_slice(&len.to_le_bytes());
        self.0
    }
}

struct Reader<'a>(&'a [u8]);

fn truncated() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, "truncated keeper message")
}

fn bad(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("bad keeper message: {what}"),
    )
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
    fn bool(&mut self) -> io::Result<bool> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(bad("boolean")),
        }
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
        Ok(if self.bool()? {
            Some(self.u64()?)
        } else {
            None
        })
    }
    fn bytes(&mut self) -> io::Result<Vec<u8>> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.to_vec())
    }
    fn opt_bytes(&mut self) -> io::Result<Option<Vec<u8>>> {
        Ok(if self.bool()? {
            Some(self.bytes()?)
        } else {
            None
        })
    }
    fn count(&mut self, each: usize) -> io::Result<usize> {
        let n = self.u32()? as usize;
        // Every item takes at least `each` bytes: a count the rest of the
        // frame cannot hold is corrupt, not a reason to allocate.
        if n.saturating_mul(each) > self.0.len() {
            return Err(truncated());
        }
        Ok(n)
    }
    fn list(&mut self) -> io::Result<Vec<Vec<u8>>> {
        let n = self.count(4)?;
        (0..n).map(|_| self.bytes()).collect()
    }
    fn ladder(&mut self) -> io::Result<Vec<Rung>> {
        let n = self.count(5)?;
        (0..n)
            .map(|_| {
                Ok(Rung {
                    signal: self.i32()?,
                    scope: scope_from(self.u8()?)?,
                })
            })
            .collect()
    }
    fn route(&mut self) -> io::Result<Route> {
        Ok(match self.u8()? {
            0 => Route::Cgroup2,
            1 => Route::Cgroup1(self.bytes()?),
            2 => Route::Unavailable(self.bytes()?),
            _ => return Err(bad("limit route")),
        })
    }
    fn limit(&mut self) -> io::Result<Option<(u64, Route)>> {
        Ok(if self.bool()? {
            Some((self.u64()?, self.route()?))
        } else {
            None
        })
    }
    fn opt_u32(&mut self) -> io::Result<Option<u32>> {
        Ok(if self.bool()? {
            Some(self.u32()?)
        } else {
            None
        })
    }
    fn u32s(&mut self) -> io::Result<Vec<u32>> {
        let n = self.count(4)?;
        (0..n).map(|_| self.u32()).collect()
    }
    fn setup(&mut self) -> io::Result<SetupSpec> {
        let n = self.count(4)?;
        let fds = (0..n).map(|_| self.i32()).collect::<io::Result<_>>()?;
        Ok(SetupSpec {
            fds,
            umask: self.opt_u32()?,
            uid: self.opt_u32()?,
            gid: self.opt_u32()?,
            groups: if self.bool()? {
                Some(self.u32s()?)
            } else {
                None
            },
            ignore: self.u32()?,
            keeper_env: self.bool()?,
        })
    }
    fn limits(&mut self) -> io::Result<LimitSpec> {
        Ok(LimitSpec {
            memory: self.limit()?,
            pids: self.limit()?,
            cpu_millis: self.limit()?,
            v2_base: self.opt_bytes()?,
            require: self.u8()? != 0,
        })
    }
    fn enforced(&mut self) -> io::Result<Option<(u64, Enforcement)>> {
        let code = self.u8()?;
        if code == 0 {
            return Ok(None);
        }
        let value = self.u64()?;
        let how = match code {
            1 => Enforcement::Cgroup2,
            2 => Enforcement::Cgroup1,
            3 => Enforcement::Job,
            4 => Enforcement::Rlimit,
            5 => Enforcement::None(String::from_utf8_lossy(&self.bytes()?).into_owned()),
            _ => return Err(bad("enforcement")),
        };
        Ok(Some((value, how)))
    }
    fn report(&mut self) -> io::Result<LimitReport> {
        use std::os::unix::ffi::OsStringExt;
        let path = |b: Vec<u8>| PathBuf::from(std::ffi::OsString::from_vec(b));
        Ok(LimitReport {
            memory: self.enforced()?,
            pids: self.enforced()?,
            cpu_millis: self.enforced()?,
            cgroup: self.opt_bytes()?.map(path),
            cgroups: self.list()?.into_iter().map(path).collect(),
            // Filled in by the owner (the keeper knows nothing of it).
            via: None,
        })
    }
    fn hit(&mut self) -> io::Result<Option<LimitHit>> {
        Ok(match self.u8()? {
            0 => None,
            1 => Some(LimitHit::Memory {
                victims: self.u64()?.min(u32::MAX as u64) as u32,
            }),
            2 => Some(LimitHit::Pids {
                refused: self.u64()?,
            }),
            _ => return Err(bad("limit hit")),
        })
    }
    fn usage(&mut self) -> io::Result<Option<ResourceUsage>> {
        Ok(match self.u8()? {
            0 => None,
            1 => Some(ResourceUsage {
                user_time: std::time::Duration::from_micros(self.u64()?),
                system_time: std::time::Duration::from_micros(self.u64()?),
                max_rss: self.u64()?,
            }),
            _ => return Err(bad("resource usage")),
        })
    }
    /// Every byte must have been used.
    fn end(&self) -> io::Result<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(bad("trailing bytes"))
        }
    }
}

fn policy_code(policy: ContainmentPolicy) -> u8 {
    match policy {
        ContainmentPolicy::Standard => 0,
        ContainmentPolicy::Auto => 1,
        ContainmentPolicy::PidNamespace => 2,
        ContainmentPolicy::Uncontained => unreachable!("refused by contain::unix::spawn"),
    }
}

fn policy_from(code: u8) -> io::Result<ContainmentPolicy> {
    Ok(match code {
        0 => ContainmentPolicy::Standard,
        1 => ContainmentPolicy::Auto,
        2 => ContainmentPolicy::PidNamespace,
        _ => return Err(bad("containment policy")),
    })
}

fn containment_code(kind: Containment) -> u8 {
    match kind {
        Containment::Subreaper => 1,
        Containment::PidNamespace => 2,
        Containment::ProcessGroupAndTag => 3,
        Containment::Job => 4,
        Containment::None => 5,
    }
}

fn containment_from(code: u8) -> io::Result<Containment> {
    Ok(match code {
        1 => Containment::Subreaper,
        2 => Containment::PidNamespace,
        3 => Containment::ProcessGroupAndTag,
        4 => Containment::Job,
        5 => Containment::None,
        _ => return Err(bad("containment")),
    })
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

fn leftovers_code(leftovers: Leftovers) -> u8 {
    match leftovers {
        Leftovers::Kill => 0,
        Leftovers::Keep => 1,
    }
}

fn leftovers_from(code: u8) -> io::Result<Leftovers> {
    match code {
        0 => Ok(Leftovers::Kill),
        1 => Ok(Leftovers::Keep),
        _ => Err(bad("leftovers")),
    }
}

impl Request {
    /// The request as one frame.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut w = match self {
            // Sized for the strings (each with its 4-byte length) and the
            // fixed fields after them: the frame is written without a
            // reallocation (a spawn's environment makes it kilobytes).
            Request::Spawn(spec) => {
                let strings: usize = [&spec.argv, &spec.envp]
                    .into_iter()
                    .flatten()
                    .map(|s| s.len() + 4)
                    .sum();
                Writer::with_capacity(
                    256 + spec.program.len() + strings + spec.cwd.as_ref().map_or(0, Vec::len),
                )
            }
            _ => Writer::default(),
        };
        match self {
            Request::Spawn(spec) => {
                w.u8(1);
                w.bytes(&spec.program);
                w.list(&spec.argv);
                w.list(&spec.envp);
                w.opt_bytes(spec.cwd.as_deref());
                w.u8(policy_code(spec.containment));
                w.u8(leftovers_code(spec.leftovers));
                w.ladder(&spec.ladder);
                w.u64(spec.grace_ms);
                w.opt_u64(spec.timeout_ms);
                w.bool(spec.new_session);
                w.bool(spec.report_stops);
                w.bool(spec.controlling_tty);
                w.bool(spec.take_terminal);
                w.limits(&spec.limits);
                w.setup(&spec.setup);
            }
            Request::Signal { signal, scope } => {
                w.u8(2);
                w.i32(*signal);
                w.u8(scope_code(*scope));
            }
            Request::Kill { ladder, grace_ms } => {
                w.u8(3);
                w.ladder(ladder);
                w.u64(*grace_ms);
            }
            Request::Nudge => w.u8(4),
        }
        w.frame()
    }

    /// Decodes one payload (without its length prefix).
    pub(crate) fn decode(payload: &[u8]) -> io::Result<Request> {
        let mut r = Reader(payload);
        let request = match r.u8()? {
            1 => Request::Spawn(Box::new(SpawnSpec {
                program: r.bytes()?,
                argv: r.list()?,
                envp: r.list()?,
                cwd: r.opt_bytes()?,
                containment: policy_from(r.u8()?)?,
                leftovers: leftovers_from(r.u8()?)?,
                ladder: r.ladder()?,
                grace_ms: r.u64()?,
                timeout_ms: r.opt_u64()?,
                new_session: r.bool()?,
                report_stops: r.bool()?,
                controlling_tty: r.bool()?,
                take_terminal: r.bool()?,
                limits: r.limits()?,
                setup: r.setup()?,
            })),
            2 => Request::Signal {
                signal: r.i32()?,
                scope: scope_from(r.u8()?)?,
            },
            3 => Request::Kill {
                ladder: r.ladder()?,
                grace_ms: r.u64()?,
            },
            4 => Request::Nudge,
            _ => return Err(bad("request kind")),
        };
        r.end()?;
        Ok(request)
    }
}

impl Event {
    /// The event as one frame.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        match self {
            Event::Started {
                pid,
                start_time,
                pidfs_inode,
                containment,
                limits,
            } => {
                w.u8(1);
                w.u32(*pid);
                w.u64(*start_time);
                w.opt_u64(*pidfs_inode);
                w.u8(containment_code(*containment));
                w.report(limits);
            }
            Event::SpawnFailed { errno, stage } => {
                w.u8(2);
                w.i32(*errno);
                w.u8(stage.code());
            }
            Event::MainExited {
                termination,
                timed_out,
                limit_hit,
                oom_outside,
                usage,
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
                w.bool(*timed_out);
                w.hit(*limit_hit);
                w.u32(*oom_outside);
                w.usage(*usage);
            }
            Event::TreeEmpty {
                killed,
                limit_hit,
                oom_outside,
                escaped,
                usage,
            } => {
                w.u8(4);
                w.u32(*killed);
                w.hit(*limit_hit);
                w.u32(*oom_outside);
                w.u32(escaped.len() as u32);
                for (pid, cgroup, moved_back) in escaped {
                    w.u32(*pid);
                    w.bytes(cgroup);
                    w.u32(*moved_back);
                }
                w.usage(*usage);
            }
            Event::MainStopped { signal } => {
                w.u8(6);
                w.i32(*signal);
            }
            Event::MainContinued => w.u8(7),
            Event::KillFailed { survivors } => {
                w.u8(5);
                w.u32(survivors.len() as u32);
                for (pid, cmd) in survivors {
                    w.u32(*pid);
                    w.bytes(cmd);
                }
            }
            Event::Unusable { reason } => {
                w.u8(8);
                w.bytes(reason);
            }
        }
        w.frame()
    }

    /// Decodes one payload (without its length prefix).
    pub(crate) fn decode(payload: &[u8]) -> io::Result<Event> {
        let mut r = Reader(payload);
        let event = match r.u8()? {
            1 => Event::Started {
                pid: r.u32()?,
                start_time: r.u64()?,
                pidfs_inode: r.opt_u64()?,
                containment: containment_from(r.u8()?)?,
                limits: r.report()?,
            },
            2 => Event::SpawnFailed {
                errno: r.i32()?,
                stage: SpawnStage::from_code(r.u8()?)?,
            },
            3 => {
                let termination = match r.u8()? {
                    0 => Termination::Code(r.i32()?),
                    1 => Termination::Signal(r.i32()?),
                    _ => return Err(bad("termination")),
                };
                Event::MainExited {
                    termination,
                    timed_out: r.bool()?,
                    limit_hit: r.hit()?,
                    oom_outside: r.u32()?,
                    usage: r.usage()?,
                }
            }
            4 => {
                let (killed, limit_hit, oom_outside) = (r.u32()?, r.hit()?, r.u32()?);
                let n = r.count(12)?;
                let mut escaped = Vec::with_capacity(n);
                for _ in 0..n {
                    escaped.push((r.u32()?, r.bytes()?, r.u32()?));
                }
                Event::TreeEmpty {
                    killed,
                    limit_hit,
                    oom_outside,
                    escaped,
                    usage: r.usage()?,
                }
            }
            6 => Event::MainStopped { signal: r.i32()? },
            7 => Event::MainContinued,
            5 => {
                let n = r.count(8)?;
                let mut survivors = Vec::with_capacity(n);
                for _ in 0..n {
                    survivors.push((r.u32()?, r.bytes()?));
                }
                Event::KillFailed { survivors }
            }
            8 => Event::Unusable { reason: r.bytes()? },
            _ => return Err(bad("event kind")),
        };
        r.end()?;
        Ok(event)
    }
}

/// Accumulates bytes from a stream and yields whole payloads.
#[derive(Default, Debug)]
pub(crate) struct FrameBuffer {
    buf: Vec<u8>,
}

impl FrameBuffer {
    /// Appends bytes read from the socket.
    pub(crate) fn extend(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole payload, if one has arrived.
    pub(crate) fn next_payload(&mut self) -> io::Result<Option<Vec<u8>>> {
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
    pub(crate) fn is_empty(&self) -> bool {
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
        round_trip_request(Request::Spawn(Box::new(SpawnSpec {
            program: b"/bin/echo".to_vec(),
            argv: vec![b"echo".to_vec(), vec![0xff, 0xfe], Vec::new()],
            envp: vec![b"A=B".to_vec()],
            cwd: Some(b"/tmp".to_vec()),
            containment: ContainmentPolicy::PidNamespace,
            leftovers: Leftovers::Keep,
            ladder: vec![
                Rung {
                    signal: 1,
                    scope: Scope::Tree,
                },
                Rung {
                    signal: 15,
                    scope: Scope::Tree,
                },
            ],
            grace_ms: 2000,
            timeout_ms: Some(5),
            new_session: true,
            report_stops: true,
            controlling_tty: true,
            take_terminal: true,
            limits: LimitSpec {
                memory: Some((256 << 20, Route::Cgroup2)),
                pids: Some((64, Route::Cgroup1(b"/sys/fs/cgroup/pids".to_vec()))),
                cpu_millis: Some((1500, Route::Unavailable(b"no cpu controller".to_vec()))),
                v2_base: Some(b"/sys/fs/cgroup/unified".to_vec()),
                require: true,
            },
            setup: SetupSpec {
                fds: vec![3, 7],
                umask: Some(0o077),
                uid: Some(1000),
                gid: None,
                groups: Some(vec![10, 20]),
                ignore: 1 << 13,
                keeper_env: true,
            },
        })));
        round_trip_request(Request::Signal {
            signal: 2,
            scope: Scope::Group,
        });
        round_trip_request(Request::Kill {
            ladder: vec![Rung {
                signal: 15,
                scope: Scope::Group,
            }],
            grace_ms: 0,
        });
        round_trip_request(Request::Nudge);
    }

    #[test]
    fn events_round_trip() {
        let events = [
            Event::Started {
                pid: 7,
                start_time: 9,
                pidfs_inode: Some(3),
                containment: Containment::Subreaper,
                limits: LimitReport {
                    memory: Some((1 << 30, Enforcement::Cgroup1)),
                    pids: Some((64, Enforcement::None("no delegation".into()))),
                    cpu_millis: Some((250, Enforcement::Cgroup2)),
                    cgroup: Some(PathBuf::from("/sys/fs/cgroup/unified/tether-abc")),
                    cgroups: vec![PathBuf::from("/sys/fs/cgroup/unified/tether-abc")],
                    via: None,
                },
            },
            Event::SpawnFailed {
                errno: 2,
                stage: SpawnStage::Chdir,
            },
            Event::MainExited {
                termination: Termination::Signal(9),
                timed_out: true,
                limit_hit: Some(LimitHit::Memory { victims: 2 }),
                oom_outside: 1,
                usage: None,
            },
            Event::TreeEmpty {
                killed: 103,
                limit_hit: Some(LimitHit::Pids { refused: 7 }),
                oom_outside: 3,
                escaped: vec![(42, b"memory:/user.slice".to_vec(), 2)],
                usage: Some(ResourceUsage {
                    user_time: std::time::Duration::from_micros(1_234_567),
                    system_time: std::time::Duration::from_micros(89),
                    max_rss: 512 << 20,
                }),
            },
            Event::MainStopped { signal: 20 },
            Event::MainContinued,
            Event::KillFailed {
                survivors: vec![(5, b"sleep 1".to_vec())],
            },
            Event::Unusable {
                reason: b"the keeper could not start: x".to_vec(),
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
        // A boolean that is neither 0 nor 1.
        assert!(Event::decode(&[3, 0, 0, 0, 0, 0, 2, 0]).is_err());
        // Trailing bytes after a whole message.
        assert!(Event::decode(&[4, 1, 0, 0, 0, 0, 0]).is_err());
        // A limit hit of no known kind.
        assert!(Event::decode(&[4, 1, 0, 0, 0, 3]).is_err());
        assert!(Request::decode(&[4, 0]).is_err());
        // A survivor count the frame cannot hold.
        assert!(Event::decode(&[5, 0xff, 0xff, 0xff, 0xff]).is_err());
        let mut fb = FrameBuffer::default();
        fb.extend(&u32::MAX.to_le_bytes());
        assert!(fb.next_payload().is_err());
    }
}
