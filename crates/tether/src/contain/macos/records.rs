//! The records macOS's `sysctl(3)` process interface hands out, decoded
//! from plain bytes: one `struct kinfo_proc` per process (`kern.proc.*`),
//! and the argument area of `kern.procargs2.<pid>`.
//!
//! Nothing here calls the kernel, so this file is compiled on every
//! platform for its tests (`contain/mod.rs`): they run on Linux against
//! hand-built buffers, while everything that reads real records is
//! macOS-only and verified there by type-checking alone.

use crate::contain::sys::ProcessState;
use crate::spawn_tag::{SPAWN_TAG_VAR, SpawnTag};

/// Size of one `struct kinfo_proc` for a 64-bit caller (XNU
/// `bsd/sys/sysctl.h`, `struct user64_kinfo_proc`; `sizeof` is 648 on
/// x86_64 and arm64 alike, as in golang.org/x/sys `SizeofKinfoProc`).
pub(crate) const KINFO_PROC_SIZE: usize = 648;

/// Byte offsets of the fields tether reads (LP64, natural alignment; the
/// test below re-derives every one from a `#[repr(C)]` copy of the whole
/// structure):
///
/// ```text
///   0  kp_proc.p_starttime.tv_sec    i64   (struct user64_timeval)
///   8  kp_proc.p_starttime.tv_usec   i32
///  32  kp_proc.p_flag                i32   (P_TRACED, P_WEXIT, …)
///  36  kp_proc.p_stat                u8    (SIDL … SZOMB)
///  40  kp_proc.p_pid                 i32
/// 243  kp_proc.p_comm                [u8; 17]
/// 392  kp_eproc.e_pcred.p_ruid       u32
/// 560  kp_eproc.e_ppid               i32
/// 564  kp_eproc.e_pgid               i32
/// ```
mod offset {
    pub(super) const START_SEC: usize = 0;
    pub(super) const START_USEC: usize = 8;
    pub(super) const FLAG: usize = 32;
    pub(super) const STAT: usize = 36;
    pub(super) const PID: usize = 40;
    pub(super) const COMM: usize = 243;
    pub(super) const COMM_LEN: usize = 17;
    pub(super) const RUID: usize = 392;
    pub(super) const PPID: usize = 560;
    pub(super) const PGID: usize = 564;
}

/// `p_stat` values (XNU `bsd/sys/proc.h`).
const SIDL: u8 = 1;
const SRUN: u8 = 2;
const SSLEEP: u8 = 3;
const SSTOP: u8 = 4;
const SZOMB: u8 = 5;
/// `p_flag` bits (XNU `bsd/sys/proc.h`).
const P_TRACED: i32 = 0x0000_0800;
const P_WEXIT: i32 = 0x0000_2000;

/// What tether reads from one `kinfo_proc`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Kinfo {
    pub pid: u32,
    pub ppid: u32,
    pub pgrp: u32,
    /// The real uid (`e_pcred.p_ruid`).
    pub ruid: u32,
    /// `p_stat`.
    pub stat: u8,
    /// `p_flag`.
    pub flag: i32,
    /// When the process was forked, in microseconds since the Unix epoch
    /// (`p_starttime`, which the kernel sets once at fork and never moves —
    /// unlike `kern.boottime`, which macOS shifts when the clock is set).
    pub start_us: u64,
    comm: [u8; offset::COMM_LEN],
}

impl Kinfo {
    /// The scheduling state. macOS reports `SRUN` for most live processes
    /// whatever their threads do (`ps` derives R/S from thread states), so
    /// running and sleeping are not told apart reliably.
    pub(crate) fn state(&self) -> ProcessState {
        match self.stat {
            SZOMB => ProcessState::Zombie,
            // Past the point of no return in exit(): signals are discarded
            // and it will be a zombie in a moment.
            _ if self.flag & P_WEXIT != 0 => ProcessState::Dead,
            SSTOP if self.flag & P_TRACED != 0 => ProcessState::Traced,
            SSTOP => ProcessState::Stopped,
            SRUN => ProcessState::Running,
            SSLEEP => ProcessState::Sleeping,
            SIDL => ProcessState::Other,
            _ => ProcessState::Other,
        }
    }

    /// A zombie, or a process already inside `exit`.
    pub(crate) fn has_exited(&self) -> bool {
        self.state().has_exited()
    }

    /// The kernel's short name (`p_comm`, at most 16 bytes).
    pub(crate) fn comm(&self) -> String {
        let end = self
            .comm
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(self.comm.len());
        String::from_utf8_lossy(&self.comm[..end]).into_owned()
    }
}

/// A live process (`SRUN`) for tests: pid, parent, group, start time (µs).
#[cfg(test)]
pub(crate) fn test_kinfo(pid: u32, ppid: u32, pgrp: u32, start_us: u64) -> Kinfo {
    Kinfo {
        pid,
        ppid,
        pgrp,
        ruid: 501,
        stat: SRUN,
        flag: 0,
        start_us,
        comm: [0; offset::COMM_LEN],
    }
}

fn i32_at(record: &[u8], at: usize) -> i32 {
    i32::from_ne_bytes(record[at..at + 4].try_into().expect("4 bytes"))
}

/// Decodes one `kinfo_proc`. `None` if the record is short or names an
/// impossible pid.
pub(crate) fn decode_kinfo(record: &[u8]) -> Option<Kinfo> {
    if record.len() < KINFO_PROC_SIZE {
        return None;
    }
    let sec = i64::from_ne_bytes(
        record[offset::START_SEC..offset::START_SEC + 8]
            .try_into()
            .ok()?,
    );
    let usec = i32_at(record, offset::START_USEC);
    let start_us = u64::try_from(sec)
        .ok()?
        .checked_mul(1_000_000)?
        .checked_add(u64::try_from(usec).ok()?)?;
    let mut comm = [0u8; offset::COMM_LEN];
    comm.copy_from_slice(&record[offset::COMM..offset::COMM + offset::COMM_LEN]);
    Some(Kinfo {
        pid: u32::try_from(i32_at(record, offset::PID)).ok()?,
        // A process with no parent (kernel_task) or group says 0.
        ppid: u32::try_from(i32_at(record, offset::PPID)).unwrap_or(0),
        pgrp: u32::try_from(i32_at(record, offset::PGID)).unwrap_or(0),
        ruid: u32::from_ne_bytes(record[offset::RUID..offset::RUID + 4].try_into().ok()?),
        stat: record[offset::STAT],
        flag: i32_at(record, offset::FLAG),
        start_us,
        comm,
    })
}

/// A process's argument area as `kern.procargs2.<pid>` returns it (XNU
/// `exec_copyout_strings` lays it out, `sysctl_procargsx` copies it):
///
/// ```text
/// argc                         i32, native endian
/// exec path \0 [\0 …]          NULs pad to pointer alignment
/// argv[0] \0 … argv[argc-1] \0
/// env[0] \0 … env[n-1] \0 [\0 …]
/// apple strings \0 …           the kernel's: "pfz=…", "ptr_munge=…", …
/// ```
///
/// Two ambiguities are inherent to the format: an empty `argv[0]` cannot be
/// told from padding (it is skipped, and the environment then starts one
/// string late); and where the environment happens to end on a pointer
/// boundary no NUL separates it from the apple strings, which then read as
/// entries (their keys are the kernel's, never `TETHER_SPAWN`). Strings are
/// what the process's initial stack holds now: `unsetenv` does not change
/// them, an `exec` does.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ProcArgs<'a> {
    pub exec_path: &'a [u8],
    pub argv: Vec<&'a [u8]>,
    pub env: Environment<'a>,
}

/// The environment part of a [`ProcArgs`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Environment<'a> {
    /// The environment strings, in order.
    Strings(Vec<&'a [u8]>),
    /// The kernel withheld it: nothing follows argv. macOS does this for a
    /// process it marks restricted (`CS_RESTRICT`) while SIP is on; a full
    /// area always has apple strings after the environment.
    Withheld,
}

/// Parses a `kern.procargs2` buffer; `None` if it is malformed (too short,
/// a negative argc, fewer argument strings than argc).
pub(crate) fn parse_procargs(buf: &[u8]) -> Option<ProcArgs<'_>> {
    let argc = usize::try_from(i32::from_ne_bytes(buf.get(..4)?.try_into().ok()?)).ok()?;
    let mut rest = &buf[4..];
    let exec_end = rest.iter().position(|&b| b == 0)?;
    let exec_path = &rest[..exec_end];
    rest = &rest[exec_end..];
    let first_arg = rest.iter().position(|&b| b != 0).unwrap_or(rest.len());
    rest = &rest[first_arg..];
    let mut argv = Vec::with_capacity(argc.min(4096));
    for _ in 0..argc {
        let end = rest.iter().position(|&b| b == 0)?;
        argv.push(&rest[..end]);
        rest = &rest[end + 1..];
    }
    if rest.iter().all(|&b| b == 0) {
        return Some(ProcArgs {
            exec_path,
            argv,
            env: Environment::Withheld,
        });
    }
    let env = rest
        .split(|&b| b == 0)
        .take_while(|entry| !entry.is_empty())
        .collect();
    Some(ProcArgs {
        exec_path,
        argv,
        env: Environment::Strings(env),
    })
}

/// The first `TETHER_SPAWN=` entry of an environment, parsed; a malformed
/// tag is no tag (the same rule as `/proc/<pid>/environ` on Linux).
pub(crate) fn tag_in(env: &[&[u8]]) -> Option<SpawnTag> {
    let name = SPAWN_TAG_VAR.as_bytes();
    env.iter()
        .find_map(|entry| entry.strip_prefix(name)?.strip_prefix(b"="))
        .and_then(|value| std::str::from_utf8(value).ok()?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TAG: &str = "v1:0123456789abcdef:run:42:7:abc";

    /// A `kern.procargs2` buffer: argc, the exec path padded with `pad`
    /// NULs, then every string NUL-terminated.
    fn area(argc: i32, exec: &str, pad: usize, strings: &[&str]) -> Vec<u8> {
        let mut buf = argc.to_ne_bytes().to_vec();
        buf.extend_from_slice(exec.as_bytes());
        buf.extend(std::iter::repeat_n(0u8, 1 + pad));
        for s in strings {
            buf.extend_from_slice(s.as_bytes());
            buf.push(0);
        }
        buf
    }

    fn strings<'a>(env: &'a Environment<'a>) -> Vec<&'a str> {
        match env {
            Environment::Strings(env) => env
                .iter()
                .map(|e| std::str::from_utf8(e).unwrap())
                .collect(),
            Environment::Withheld => panic!("environment withheld"),
        }
    }

    #[test]
    fn procargs_split_into_path_argv_and_environment() {
        let tag = format!("TETHER_SPAWN={TAG}");
        // "/bin/sh\0" is 8 bytes: 4 NULs of padding make 12 after argc.
        let mut buf = area(
            3,
            "/bin/sh",
            4,
            &["sh", "-c", "echo $A", "A=1", &tag, "HOME=/Users/x"],
        );
        // The environment's alignment padding, then the apple strings.
        buf.extend_from_slice(b"\0\0\0pfz=0x7ff80000\0ptr_munge=\0");
        let args = parse_procargs(&buf).unwrap();
        assert_eq!(args.exec_path, b"/bin/sh");
        assert_eq!(args.argv, [&b"sh"[..], b"-c", b"echo $A"]);
        assert_eq!(strings(&args.env), ["A=1", tag.as_str(), "HOME=/Users/x"]);
        let Environment::Strings(env) = &args.env else {
            unreachable!()
        };
        assert_eq!(tag_in(env).unwrap().to_string(), TAG);
    }

    #[test]
    fn empty_arguments_keep_their_place() {
        let buf = area(3, "/bin/echo", 0, &["echo", "", "x", "E=1", "", "pfz=0x1"]);
        let args = parse_procargs(&buf).unwrap();
        assert_eq!(args.argv, [&b"echo"[..], b"", b"x"]);
        assert_eq!(strings(&args.env), ["E=1"]);
    }

    #[test]
    fn an_environment_ending_on_a_pointer_boundary_runs_into_the_apple_strings() {
        // Documented: no NUL separates them, so apple strings read as
        // entries — never as a tag.
        let buf = area(1, "/bin/x", 1, &["x", "A=1", "pfz=0x1", "ptr_munge="]);
        let args = parse_procargs(&buf).unwrap();
        assert_eq!(strings(&args.env), ["A=1", "pfz=0x1", "ptr_munge="]);
        let Environment::Strings(env) = &args.env else {
            unreachable!()
        };
        assert!(tag_in(env).is_none());
    }

    #[test]
    fn nothing_after_argv_means_the_environment_was_withheld() {
        let buf = area(2, "/usr/bin/login", 2, &["login", "-f"]);
        assert_eq!(parse_procargs(&buf).unwrap().env, Environment::Withheld);
        let mut padded = buf.clone();
        padded.extend_from_slice(&[0, 0, 0]);
        assert_eq!(parse_procargs(&padded).unwrap().env, Environment::Withheld);
    }

    #[test]
    fn malformed_areas_are_rejected() {
        assert!(parse_procargs(b"").is_none());
        assert!(parse_procargs(&[1, 0, 0]).is_none());
        // Negative argc.
        assert!(parse_procargs(&area(-1, "/bin/x", 0, &["x"])).is_none());
        // Fewer strings than argc (the last one unterminated).
        let mut short = area(3, "/bin/x", 0, &["x", "y"]);
        short.extend_from_slice(b"unterminated");
        assert!(parse_procargs(&short).is_none());
        // No NUL after the exec path.
        let mut no_nul = 1i32.to_ne_bytes().to_vec();
        no_nul.extend_from_slice(b"/bin/x");
        assert!(parse_procargs(&no_nul).is_none());
    }

    #[test]
    fn only_a_well_formed_environment_entry_is_a_tag() {
        let env: Vec<&[u8]> = vec![b"XTETHER_SPAWN=v1:x", b"TETHER_SPAWNX=1"];
        assert!(tag_in(&env).is_none());
        let garbage: Vec<&[u8]> = vec![b"TETHER_SPAWN=garbage"];
        assert!(tag_in(&garbage).is_none());
        // An argument that looks like a tag is not the environment.
        let tag = format!("TETHER_SPAWN={TAG}");
        let buf = area(
            2,
            "/usr/bin/env",
            0,
            &["env", &tag, "PATH=/bin", "", "pfz=0"],
        );
        let args = parse_procargs(&buf).unwrap();
        let Environment::Strings(env) = &args.env else {
            unreachable!()
        };
        assert!(tag_in(env).is_none());
    }

    /// `struct user64_kinfo_proc` field by field (XNU `bsd/sys/sysctl.h`,
    /// `bsd/sys/proc_internal.h`), pointers as `u64`: the compiler lays it
    /// out by the same LP64 rules as the C compiler does on macOS, so the
    /// hand-computed offsets above are checked against it.
    #[allow(dead_code)]
    #[repr(C)]
    struct Timeval {
        tv_sec: i64,
        tv_usec: i32,
    }
    #[allow(dead_code)]
    #[repr(C)]
    struct ExternProc {
        p_starttime: Timeval,
        p_vmspace: u64,
        p_sigacts: u64,
        p_flag: i32,
        p_stat: i8,
        p_pid: i32,
        p_oppid: i32,
        p_dupfd: i32,
        user_stack: u64,
        exit_thread: u64,
        p_debugger: i32,
        sigwait: i32,
        p_estcpu: u32,
        p_cpticks: i32,
        p_pctcpu: u32,
        p_wchan: u64,
        p_wmesg: u64,
        p_swtime: u32,
        p_slptime: u32,
        p_realtimer: [Timeval; 2],
        p_rtime: Timeval,
        p_uticks: u64,
        p_sticks: u64,
        p_iticks: u64,
        p_traceflag: i32,
        p_tracep: u64,
        p_siglist: i32,
        p_textvp: u64,
        p_holdcnt: i32,
        p_sigmask: u32,
        p_sigignore: u32,
        p_sigcatch: u32,
        p_priority: u8,
        p_usrpri: u8,
        p_nice: i8,
        p_comm: [u8; 17],
        p_pgrp: u64,
        p_addr: u64,
        p_xstat: u16,
        p_acflag: u16,
        p_ru: u64,
    }
    #[allow(dead_code)]
    #[repr(C)]
    struct Pcred {
        pc_lock: [u8; 72],
        pc_ucred: u64,
        p_ruid: u32,
        p_svuid: u32,
        p_rgid: u32,
        p_svgid: u32,
        p_refcnt: i32,
    }
    #[allow(dead_code)]
    #[repr(C)]
    struct Ucred {
        cr_ref: i32,
        cr_uid: u32,
        cr_ngroups: i16,
        cr_groups: [u32; 16],
    }
    #[allow(dead_code)]
    #[repr(C)]
    struct Vmspace {
        vm_refcnt: i32,
        vm_shm: u64,
        vm_sizes: [i32; 5],
        vm_addrs: [u64; 3],
    }
    #[allow(dead_code)]
    #[repr(C)]
    struct Eproc {
        e_paddr: u64,
        e_sess: u64,
        e_pcred: Pcred,
        e_ucred: Ucred,
        e_vm: Vmspace,
        e_ppid: i32,
        e_pgid: i32,
        e_jobc: i16,
        e_tdev: i32,
        e_tpgid: i32,
        e_tsess: u64,
        e_wmesg: [u8; 8],
        e_xsize: i32,
        e_xrssize: i16,
        e_xccount: i16,
        e_xswrss: i16,
        e_flag: i32,
        e_login: [u8; 12],
        e_spare: [i32; 4],
    }
    #[allow(dead_code)]
    #[repr(C)]
    struct KinfoProc {
        kp_proc: ExternProc,
        kp_eproc: Eproc,
    }

    #[test]
    fn kinfo_offsets_match_the_c_layout() {
        use std::mem::offset_of;
        assert_eq!(std::mem::size_of::<KinfoProc>(), KINFO_PROC_SIZE);
        assert_eq!(
            offset_of!(KinfoProc, kp_proc.p_starttime.tv_sec),
            offset::START_SEC
        );
        assert_eq!(
            offset_of!(KinfoProc, kp_proc.p_starttime.tv_usec),
            offset::START_USEC
        );
        assert_eq!(offset_of!(KinfoProc, kp_proc.p_flag), offset::FLAG);
        assert_eq!(offset_of!(KinfoProc, kp_proc.p_stat), offset::STAT);
        assert_eq!(offset_of!(KinfoProc, kp_proc.p_pid), offset::PID);
        assert_eq!(offset_of!(KinfoProc, kp_proc.p_comm), offset::COMM);
        assert_eq!(offset_of!(KinfoProc, kp_eproc.e_pcred.p_ruid), offset::RUID);
        assert_eq!(offset_of!(KinfoProc, kp_eproc.e_ppid), offset::PPID);
        assert_eq!(offset_of!(KinfoProc, kp_eproc.e_pgid), offset::PGID);
    }

    fn record(pid: i32, ppid: i32, pgid: i32, ruid: u32, stat: u8, flag: i32) -> Vec<u8> {
        let mut r = vec![0u8; KINFO_PROC_SIZE];
        r[offset::START_SEC..][..8].copy_from_slice(&1_700_000_000i64.to_ne_bytes());
        r[offset::START_USEC..][..4].copy_from_slice(&123_456i32.to_ne_bytes());
        r[offset::FLAG..][..4].copy_from_slice(&flag.to_ne_bytes());
        r[offset::STAT] = stat;
        r[offset::PID..][..4].copy_from_slice(&pid.to_ne_bytes());
        r[offset::COMM..][..5].copy_from_slice(b"sleep");
        r[offset::RUID..][..4].copy_from_slice(&ruid.to_ne_bytes());
        r[offset::PPID..][..4].copy_from_slice(&ppid.to_ne_bytes());
        r[offset::PGID..][..4].copy_from_slice(&pgid.to_ne_bytes());
        r
    }

    #[test]
    fn kinfo_records_decode() {
        let k = decode_kinfo(&record(4242, 1, 4200, 501, SSLEEP, 0)).unwrap();
        assert_eq!((k.pid, k.ppid, k.pgrp, k.ruid), (4242, 1, 4200, 501));
        assert_eq!(k.start_us, 1_700_000_000_123_456);
        assert_eq!(k.comm(), "sleep");
        assert_eq!(k.state(), ProcessState::Sleeping);
        assert!(!k.has_exited());
        let states = [
            (SRUN, 0, ProcessState::Running),
            (SSTOP, 0, ProcessState::Stopped),
            (SSTOP, P_TRACED, ProcessState::Traced),
            (SZOMB, 0, ProcessState::Zombie),
            (SRUN, P_WEXIT, ProcessState::Dead),
            (SIDL, 0, ProcessState::Other),
        ];
        for (stat, flag, state) in states {
            let k = decode_kinfo(&record(7, 1, 7, 0, stat, flag)).unwrap();
            assert_eq!(k.state(), state, "p_stat {stat} p_flag {flag:#x}");
        }
        assert!(
            decode_kinfo(&record(7, 1, 7, 0, SZOMB, 0))
                .unwrap()
                .has_exited()
        );
        assert!(decode_kinfo(&record(-1, 1, 7, 0, SRUN, 0)).is_none());
        assert!(decode_kinfo(&[0u8; KINFO_PROC_SIZE - 1]).is_none());
    }
}
