//! Reading the process table from `/proc`: stat, children, command lines,
//! environments (spawn tags), real uids, boot id and clocks.
//!
//! Each reader costs as few syscalls as it can: `tether ps` reads these
//! files for thousands of processes (~10 µs of kernel time per
//! `/proc/<pid>/environ` read is the floor of a scan).

use std::fs::{self, File};
use std::io::{self, Read};
use std::sync::OnceLock;

use crate::contain::sys::{ProcessInfo, ProcessState, TagRead};
use crate::spawn_tag::{SPAWN_TAG_VAR, SpawnTag};

/// Reads `/proc/<pid>/stat`.
pub(crate) fn read_stat(pid: u32) -> io::Result<ProcessInfo> {
    // One read into a stack buffer: the line is well under 1 KiB, and a
    // seq_file hands over a whole record in the first read. (`fs::read`
    // would add a statx and an lseek to size its buffer.)
    let mut buf = [0u8; 4096];
    let n = File::open(format!("/proc/{pid}/stat"))?.read(&mut buf)?;
    parse_stat(pid, &buf[..n])
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unparsable stat"))
}

pub(crate) fn parse_stat(pid: u32, text: &[u8]) -> Option<ProcessInfo> {
    // The command name is in parentheses and may contain anything,
    // including ") ": the fields start after the *last* ')'.
    let close = text.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(text.get(close + 2..)?).ok()?;
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    // fields[0] is field 3 (state); ppid 4, pgrp 5, session 6, threads 20,
    // start time 22.
    Some(ProcessInfo {
        pid,
        state: state_of(*fields.first()?.as_bytes().first()?),
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        session: fields.get(3)?.parse().ok()?,
        threads: fields.get(17)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

fn state_of(letter: u8) -> ProcessState {
    match letter {
        b'R' => ProcessState::Running,
        b'S' | b'I' => ProcessState::Sleeping,
        b'D' => ProcessState::DiskSleep,
        b'T' => ProcessState::Stopped,
        b't' => ProcessState::Traced,
        b'Z' => ProcessState::Zombie,
        b'X' | b'x' => ProcessState::Dead,
        _ => ProcessState::Other,
    }
}

/// What follows `name:` on its line of `/proc/<pid>/status`; `Ok(None)`
/// if the status has no such line.
fn status_field(pid: u32, name: &str) -> io::Result<Option<String>> {
    let status = fs::read_to_string(format!("/proc/{pid}/status"))?;
    Ok(status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::to_owned))
}

/// The real uid of `pid` (the `Uid:` line of `/proc/<pid>/status`). Not the
/// owner of a `/proc` file: a non-dumpable process's files belong to root.
pub(crate) fn real_uid(pid: u32) -> io::Result<u32> {
    status_field(pid, "Uid")?
        .and_then(|uids| uids.split_ascii_whitespace().next()?.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no Uid line"))
}

/// The kernel's boot id, read once.
pub(crate) fn boot_id() -> &'static str {
    static BOOT_ID: OnceLock<String> = OnceLock::new();
    BOOT_ID.get_or_init(|| {
        fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    })
}

/// The direct children of `pid`, which had `threads` threads when its
/// `stat` was read. A single-threaded process has one `children` file,
/// read at its known path (open, read, close: three syscalls, where
/// listing `task/` first costs eight — the keeper reads this for every
/// member of a tree it kills, ~100 of them in the owner-death bench).
/// A thread started since then forks children this read misses; the
/// caller's next walk finds them, as it finds any process forked during
/// one. Missing process → empty.
pub(crate) fn children_of_process(pid: u32, threads: u32) -> Vec<u32> {
    if threads != 1 {
        return children_of(pid);
    }
    let mut out = Vec::new();
    let Ok(mut file) = File::open(format!("/proc/{pid}/task/{pid}/children")) else {
        return out;
    };
    let mut buf = [0u8; 4096];
    // Pids are separated by spaces; one may straddle two reads.
    let mut carry: u32 = 0;
    let mut in_number = false;
    while let Ok(n) = file.read(&mut buf) {
        if n == 0 {
            break;
        }
        for &b in &buf[..n] {
            if b.is_ascii_digit() {
                carry = carry.saturating_mul(10).saturating_add(u32::from(b - b'0'));
                in_number = true;
            } else if in_number {
                out.push(carry);
                carry = 0;
                in_number = false;
            }
        }
    }
    if in_number {
        out.push(carry);
    }
    out
}

/// How many threads `pid` has: the link count of `/proc/<pid>/task` is
/// two plus that (one `statx`, 2.5 µs here where reading `stat` for it
/// costs 8–11). `None` once the process is gone.
pub(crate) fn thread_count(pid: u32) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let links = fs::metadata(format!("/proc/{pid}/task")).ok()?.nlink();
    u32::try_from(links.checked_sub(2)?).ok().filter(|&n| n > 0)
}

/// The direct children of `pid` (all its threads), from
/// `/proc/<pid>/task/*/children`. Missing process → empty.
pub(crate) fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        let path = task.path().join("children");
        if let Ok(text) = fs::read_to_string(path) {
            out.extend(
                text.split_ascii_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    out
}

/// Every pid in `/proc` right now.
pub(crate) fn all_pids() -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// Calls `f` with each pid in `/proc`, in ascending order, reading the
/// directory one entry at a time: each next pid is the lowest one above
/// the last that exists *at that moment*, so a process created while the
/// walk runs, with a pid above where the walk stands, is met. (A buffered
/// `readdir` lists a thousand entries ahead from one `getdents` call, and
/// misses every process created below the end of that batch — which, once
/// pids have wrapped around, is where new ones go.)
pub(crate) fn each_pid(mut f: impl FnMut(u32)) {
    use std::os::fd::AsRawFd;
    let Ok(dir) = File::open("/proc") else {
        return;
    };
    // Room for any one entry of /proc (names are short); only the first
    // entry of each call is used, then the position is set right after it.
    let mut buf = [0u8; 256];
    loop {
        // SAFETY: getdents64 writes at most `buf.len()` bytes into `buf`.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                dir.as_raw_fd(),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        if n <= 0 {
            return;
        }
        // struct linux_dirent64 { u64 d_ino; i64 d_off; u16 d_reclen;
        // u8 d_type; char d_name[]; }
        let d_off = i64::from_ne_bytes(buf[8..16].try_into().expect("8 bytes"));
        let name = &buf[19..];
        let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
        // SAFETY: lseek on our own descriptor, to a position getdents gave.
        if unsafe { libc::lseek(dir.as_raw_fd(), d_off, libc::SEEK_SET) } < 0 {
            return;
        }
        if let Some(pid) = std::str::from_utf8(name).ok().and_then(|s| s.parse().ok()) {
            f(pid);
        }
    }
}

/// The command line of `pid` as arguments (empty if unreadable, or while
/// the process is inside `execve`).
pub(crate) fn argv_of(pid: u32) -> Vec<String> {
    let mut buf = Vec::new();
    let len = File::open(format!("/proc/{pid}/cmdline")).and_then(|f| read_proc_file(&f, &mut buf));
    let Ok(len) = len else {
        return Vec::new();
    };
    buf[..len]
        .split(|&b| b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect()
}

/// The kernel's short name of `pid` (`/proc/<pid>/comm`).
pub(crate) fn comm_of(pid: u32) -> String {
    fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim_end().to_owned())
        .unwrap_or_default()
}

/// The spawn tag in `pid`'s environment.
pub(crate) fn read_tag(pid: u32) -> TagRead {
    let mut buf = Vec::new();
    read_tag_at(None, pid, &mut String::new(), &mut buf)
}

/// Reads `<pid>/environ` (relative to an open `/proc` when given: no walk
/// from `/` for each of thousands of files) into the scratch `buf`.
pub(crate) fn read_tag_at(
    proc_dir: Option<&File>,
    pid: u32,
    path: &mut String,
    buf: &mut Vec<u8>,
) -> TagRead {
    use std::fmt::Write;
    path.clear();
    let file = match proc_dir {
        Some(dir) => {
            let _ = write!(path, "{pid}/environ");
            open_in(dir, path)
        }
        None => {
            let _ = write!(path, "/proc/{pid}/environ");
            File::open(&*path)
        }
    };
    let read = file.and_then(|f| read_proc_file(&f, buf));
    match read {
        Ok(len) if len > 0 => match find_tag(&buf[..len]) {
            Some(tag) => TagRead::Tag(tag),
            None => TagRead::Untagged,
        },
        // Empty: maybe a process whose main thread exited, or one that
        // exited while the read waited (see `TagRead::Exited`).
        Ok(_) => live_thread_tag(pid, buf).unwrap_or_else(|| {
            if read_stat(pid).is_ok_and(|s| s.has_exited()) {
                TagRead::Exited
            } else {
                TagRead::Untagged
            }
        }),
        Err(e) => match classify(e) {
            TagRead::Gone => live_thread_tag(pid, buf).unwrap_or(TagRead::Gone),
            other => other,
        },
    }
}

/// The tag of a process whose main thread has exited while others run
/// (`pthread_exit` in `main`): opening its `/proc/<pid>/environ` fails with
/// `ESRCH` — the exited leader has no memory map — but every live thread's
/// `task/<tid>/environ` shows the process's environment. `None` for
/// anything else (a process that is gone, a kernel thread, `env -i`): one
/// `stat` read each.
fn live_thread_tag(pid: u32, buf: &mut Vec<u8>) -> Option<TagRead> {
    let stat = read_stat(pid).ok()?;
    if !stat.state.has_exited() || stat.threads <= 1 {
        return None;
    }
    for task in fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
        let Some(tid) = task
            .file_name()
            .to_str()
            .and_then(|t| t.parse::<u32>().ok())
        else {
            continue;
        };
        if tid == pid {
            continue;
        }
        let Ok(file) = File::open(task.path().join("environ")) else {
            continue;
        };
        match read_proc_file(&file, buf) {
            Ok(len) if len > 0 => {
                return Some(match find_tag(&buf[..len]) {
                    Some(tag) => TagRead::Tag(tag),
                    None => TagRead::Untagged,
                });
            }
            Ok(_) => {}
            Err(e) => return Some(classify(e)),
        }
    }
    None
}

fn classify(e: io::Error) -> TagRead {
    match e.raw_os_error() {
        Some(libc::ENOENT | libc::ESRCH) => TagRead::Gone,
        _ => TagRead::Unreadable,
    }
}

/// The first `TETHER_SPAWN=` entry of a NUL-separated environment block,
/// parsed; a malformed tag is no tag.
pub(crate) fn find_tag(environ: &[u8]) -> Option<SpawnTag> {
    let name = SPAWN_TAG_VAR.as_bytes();
    environ
        .split(|&b| b == 0)
        .find_map(|entry| entry.strip_prefix(name)?.strip_prefix(b"="))
        .and_then(|value| std::str::from_utf8(value).ok()?.parse().ok())
}

/// Opens `/proc` itself, for [`read_tag_at`].
pub(crate) fn open_proc() -> io::Result<File> {
    File::open("/proc")
}

fn open_in(dir: &File, rel: &str) -> io::Result<File> {
    use nix::fcntl::{OFlag, openat};
    use nix::sys::stat::Mode;
    openat(dir, rel, OFlag::O_RDONLY | OFlag::O_CLOEXEC, Mode::empty())
        .map(File::from)
        .map_err(io::Error::from)
}

/// Reads an open `/proc/<pid>/{environ,cmdline}` file into the scratch
/// buffer `buf` (grown as needed, never shrunk) and returns how many bytes
/// it holds, with as few syscalls as possible: `File::read_to_end` would add
/// a statx, an lseek and a final empty read to each of the 10,000 files a
/// scan of a busy machine opens. These files fill a read as far as their
/// content goes, so a short read is the end.
fn read_proc_file(mut file: &File, buf: &mut Vec<u8>) -> io::Result<usize> {
    if buf.is_empty() {
        buf.resize(16 * 1024, 0);
    }
    let mut len = 0;
    loop {
        let n = file.read(&mut buf[len..])?;
        len += n;
        if len < buf.len() {
            return Ok(len);
        }
        buf.resize(buf.len() * 2, 0);
    }
}

/// The signals `pid` ignores (`SIG_IGN`): the `SigIgn:` mask of its
/// status, bit `n - 1` for signal `n`. A handler (`SigCgt`) or a block
/// (`SigBlk`) is not an ignore.
pub(crate) fn ignored_signals(pid: u32) -> Option<u64> {
    let mask = status_field(pid, "SigIgn").ok()??;
    u64::from_str_radix(mask.trim(), 16).ok()
}

/// The innermost pid of `pid` (last field of `NSpid:` in its status).
pub(crate) fn ns_pid_of(pid: u32) -> Option<u32> {
    ns_pids_of(pid)?.last().copied()
}

/// Every pid of `pid`, outermost namespace first (the `NSpid:` line of its
/// status): one entry in tether's namespace, more in nested ones.
pub(crate) fn ns_pids_of(pid: u32) -> Option<Vec<u32>> {
    status_field(pid, "NSpid")
        .ok()??
        .split_ascii_whitespace()
        .map(|p| p.parse().ok())
        .collect()
}

/// The pid namespace of `pid` (`pid:[inode]`).
pub(crate) fn pid_namespace(pid: &str) -> Option<std::path::PathBuf> {
    fs::read_link(format!("/proc/{pid}/ns/pid")).ok()
}

/// The time namespace of `pid` (`time:[inode]`): start times read from
/// processes in another one are offset by its clock.
pub(crate) fn time_namespace(pid: &str) -> Option<std::path::PathBuf> {
    fs::read_link(format!("/proc/{pid}/ns/time")).ok()
}

/// Our pid namespace, if `/proc` is mounted for it: the pid `/proc/self`
/// names must be the pid we have.
pub(crate) fn own_pid_namespace() -> Option<std::path::PathBuf> {
    let shown: u32 = fs::read_link("/proc/self").ok()?.to_str()?.parse().ok()?;
    if shown != std::process::id() {
        return None;
    }
    pid_namespace("self")
}

/// Whether the `/proc` mount hides other users' processes (`hidepid=` other
/// than 0/off).
pub(crate) fn proc_has_hidepid() -> bool {
    let Ok(info) = fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    info.lines().any(|line| {
        let mut fields = line.split(' ');
        let mount_point = fields.nth(4);
        let Some((_, after)) = line.split_once(" - ") else {
            return false;
        };
        let mut post = after.split(' ');
        let (fstype, super_opts) = (post.next(), post.nth(1));
        mount_point == Some("/proc")
            && fstype == Some("proc")
            && super_opts.is_some_and(|opts| {
                opts.split(',').any(|o| {
                    o.strip_prefix("hidepid=")
                        .is_some_and(|v| v != "0" && v != "off")
                })
            })
    })
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`, 100 almost always): the
/// unit of `/proc` start times.
pub(crate) fn ticks_per_sec() -> u64 {
    // SAFETY: sysconf only reads a constant.
    let tck = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if tck > 0 { tck as u64 } else { 100 }
}

/// Milliseconds since boot, from `CLOCK_BOOTTIME` (the clock start times
/// are counted on, suspend included).
pub(crate) fn uptime_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_parses_names_with_parens_and_spaces() {
        let line = b"42 (a) b (c) S 7 42 40 0 -1 4194304 1 0 0 0 0 0 0 0 20 0 3 0 123456 0 0";
        let stat = parse_stat(42, line).unwrap();
        assert_eq!(
            (
                stat.state,
                stat.ppid,
                stat.pgrp,
                stat.session,
                stat.threads,
                stat.start_time
            ),
            (ProcessState::Sleeping, 7, 42, 40, 3, 123456)
        );
    }

    #[test]
    fn finds_the_first_well_formed_tag_entry() {
        let tag = "v1:0123456789abcdef:run:42:7:abc";
        let env = format!("A=1\0XTETHER_SPAWN=nope\0TETHER_SPAWN={tag}\0TETHER_SPAWN=v1:x\0");
        assert_eq!(find_tag(env.as_bytes()).unwrap().to_string(), tag);
        assert!(find_tag(b"TETHER_SPAWN=garbage\0").is_none());
        assert!(find_tag(b"TETHER_SPAWNX=v1:0123456789abcdef:run:42:7:abc\0").is_none());
        assert!(find_tag(b"").is_none());
    }

    #[test]
    fn status_fields_of_this_process() {
        let me = std::process::id();
        // Rust's runtime ignores SIGPIPE in every program it starts.
        let ignored = ignored_signals(me).unwrap();
        assert_ne!(ignored & (1 << (libc::SIGPIPE - 1)), 0, "{ignored:#x}");
        assert_eq!(ignored & (1 << (libc::SIGTERM - 1)), 0, "{ignored:#x}");
        // The innermost pid is the one this process knows itself by.
        assert_eq!(ns_pids_of(me).unwrap().last(), Some(&me));
        assert_eq!(ns_pid_of(me), Some(me));
        assert_eq!(status_field(me, "Nope").unwrap(), None);
        assert!(status_field(u32::MAX, "Uid").is_err());
    }

    #[test]
    fn our_own_uid_is_real() {
        assert_eq!(
            real_uid(std::process::id()).unwrap(),
            nix::unistd::getuid().as_raw()
        );
    }
}
