//! Reading the macOS process table through `sysctl(3)`: `kern.proc.all`
//! and `kern.proc.pid.<pid>` (one `kinfo_proc` per process, zombies
//! included), `kern.procargs2.<pid>` (argv and environment), `kern.argmax`
//! and `kern.bootsessionuuid`; and `getsid(2)`, since `kinfo_proc` carries
//! no session id. The records are decoded in `records.rs`; [`LiveProbe`]
//! answers the tree rules' questions (`tree.rs`).

use std::ffi::CStr;
use std::io;
use std::sync::OnceLock;

use nix::errno::Errno;

use super::records::{Environment, KINFO_PROC_SIZE, Kinfo, decode_kinfo, parse_procargs, tag_in};
use super::tree::Probe;

/// `sysctl(mib)` into `buf`; returns how many bytes the kernel wrote.
fn sysctl(mib: &[libc::c_int], buf: &mut [u8]) -> Result<usize, Errno> {
    let mut len = buf.len();
    // SAFETY: `mib` holds `mib.len()` ints (the kernel does not write it
    // despite the `*mut`), `buf` is valid for `len` bytes, and no new
    // value is set.
    let rc = unsafe {
        libc::sysctl(
            mib.as_ptr().cast_mut(),
            mib.len() as libc::c_uint,
            buf.as_mut_ptr().cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    if rc < 0 { Err(Errno::last()) } else { Ok(len) }
}

/// How many bytes `sysctl(mib)` would return now.
fn sysctl_size(mib: &[libc::c_int]) -> Result<usize, Errno> {
    let mut len = 0;
    // SAFETY: as in `sysctl`, with no output buffer: the kernel only
    // writes the size it needs into `len`.
    let rc = unsafe {
        libc::sysctl(
            mib.as_ptr().cast_mut(),
            mib.len() as libc::c_uint,
            std::ptr::null_mut(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    if rc < 0 { Err(Errno::last()) } else { Ok(len) }
}

/// Every process in the table (zombies included), as one snapshot.
pub(crate) fn all_procs() -> io::Result<Vec<Kinfo>> {
    let mib = [libc::CTL_KERN, libc::KERN_PROC, libc::KERN_PROC_ALL];
    // The size asked first may be outgrown by processes forked before the
    // second call (ENOMEM then): leave room, and ask again if needed.
    for _ in 0..8 {
        let needed = sysctl_size(&mib)?;
        let mut buf = vec![0u8; needed + needed / 8 + 16 * KINFO_PROC_SIZE];
        match sysctl(&mib, &mut buf) {
            Ok(len) => {
                return Ok(buf[..len]
                    .chunks_exact(KINFO_PROC_SIZE)
                    .filter_map(decode_kinfo)
                    .collect());
            }
            Err(Errno::ENOMEM) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(Errno::ENOMEM.into())
}

/// The process `pid` (a zombie too), or `None` if there is none. The
/// kernel answers a pid nobody has with an empty record, not an error.
pub(crate) fn proc_of(pid: u32) -> io::Result<Option<Kinfo>> {
    let Ok(raw) = libc::c_int::try_from(pid) else {
        return Ok(None);
    };
    let mib = [libc::CTL_KERN, libc::KERN_PROC, libc::KERN_PROC_PID, raw];
    let mut buf = [0u8; KINFO_PROC_SIZE];
    let len = sysctl(&mib, &mut buf)?;
    Ok(decode_kinfo(&buf[..len]).filter(|k| k.pid == pid))
}

/// The session id of `pid` (`None` once it is gone or a zombie).
pub(crate) fn session_of(pid: u32) -> Option<u32> {
    let raw = libc::pid_t::try_from(pid).ok()?;
    // SAFETY: getsid takes a pid and touches no memory of ours.
    let sid = unsafe { libc::getsid(raw) };
    u32::try_from(sid).ok()
}

/// Why `kern.procargs2.<pid>` gave nothing.
#[derive(Debug)]
pub(crate) enum ArgsError {
    /// The kernel refused: the process is gone, a zombie, exiting, or
    /// another user's (all `EINVAL`), or its memory could not be read.
    Refused,
    /// The area filled the whole buffer: it may be cut short at the front,
    /// where the kernel truncates, so nothing in it can be trusted.
    Truncated,
}

/// `kern.argmax`: the most `kern.procargs2` returns (the kernel rejects a
/// larger buffer with `EINVAL`).
fn argmax() -> usize {
    static ARGMAX: OnceLock<usize> = OnceLock::new();
    *ARGMAX.get_or_init(|| {
        let mut buf = [0u8; 4];
        match sysctl(&[libc::CTL_KERN, libc::KERN_ARGMAX], &mut buf) {
            Ok(4) => usize::try_from(libc::c_int::from_ne_bytes(buf)).unwrap_or(1 << 20),
            // ARG_MAX on every macOS since 10.x.
            _ => 1 << 20,
        }
    })
}

/// Reads the argument area of `pid` into `buf` (grown to `kern.argmax`
/// and reused across calls) and returns it.
pub(crate) fn procargs(pid: u32, buf: &mut Vec<u8>) -> Result<&[u8], ArgsError> {
    let raw = libc::c_int::try_from(pid).map_err(|_| ArgsError::Refused)?;
    let max = argmax();
    if buf.len() != max {
        // Zeroed by the allocator (fresh pages), not by a 1 MiB memset.
        *buf = vec![0u8; max];
    }
    let len = sysctl(&[libc::CTL_KERN, libc::KERN_PROCARGS2, raw], buf)
        .map_err(|_| ArgsError::Refused)?;
    if len >= buf.len() {
        return Err(ArgsError::Truncated);
    }
    Ok(&buf[..len])
}

/// `kern.bootsessionuuid`: a UUID the kernel draws at each boot.
pub(crate) fn boot_session_uuid() -> Option<String> {
    let name = c"kern.bootsessionuuid";
    let mut buf = [0u8; 64];
    let mut len = buf.len();
    // SAFETY: `name` is NUL-terminated, `buf` is valid for `len` bytes, and
    // no new value is set.
    let rc = unsafe {
        libc::sysctlbyname(
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    if rc < 0 {
        return None;
    }
    let text = CStr::from_bytes_until_nul(&buf[..len.min(buf.len())]).ok()?;
    let uuid = text.to_str().ok()?.trim();
    (!uuid.is_empty()).then(|| uuid.to_owned())
}

/// The tree rules' questions (`tree.rs`), answered by the kernel now.
#[derive(Default)]
pub(crate) struct LiveProbe {
    /// Scratch for `kern.procargs2`, reused across reads.
    buf: Vec<u8>,
}

impl Probe for LiveProbe {
    fn session_of(&mut self, pid: u32) -> Option<u32> {
        session_of(pid)
    }

    fn tag_names(&mut self, p: &Kinfo, session: &str) -> Option<bool> {
        // Only our own processes' arguments can be read (root reads all).
        let me = nix::unistd::getuid().as_raw();
        if p.ruid != me && me != 0 {
            return None;
        }
        let tagged = match parse_procargs(procargs(p.pid, &mut self.buf).ok()?)?.env {
            Environment::Strings(env) => tag_in(&env).is_some_and(|t| t.session == session),
            Environment::Withheld => return None,
        };
        // The read was of whatever had the pid then: the answer is `p`'s
        // only if the pid still names it (same start time) now.
        let same = proc_of(p.pid).ok()??.start_us == p.start_us;
        same.then_some(tagged)
    }
}
