//! What a keeper inherits from its owner that only Linux shows (see
//! `contain/unix/inheritance.rs`). Read from the calling thread's view
//! (`/proc/thread-self`): the keeper is started by `posix_spawn` on that
//! thread, and credentials, niceness, affinity, seccomp, `no_new_privs`
//! and some namespaces are per-thread here.

use std::os::unix::ffi::OsStrExt;

/// The lines of `status` that a child inherits (`Umask` is there since
/// Linux 4.7; on older kernels a umask change goes unseen).
const STATUS: [&str; 14] = [
    "Umask:",
    "Uid:",
    "Gid:",
    "Groups:",
    "NoNewPrivs:",
    "Seccomp:",
    "Seccomp_filters:",
    "CapInh:",
    "CapPrm:",
    "CapEff:",
    "CapBnd:",
    "CapAmb:",
    "Cpus_allowed_list:",
    "Mems_allowed_list:",
];

/// The namespaces a child starts in (`pid_for_children` and
/// `time_for_children`: an `unshare` of those moves only the children).
const NAMESPACES: [&str; 8] = [
    "cgroup",
    "ipc",
    "mnt",
    "net",
    "pid_for_children",
    "time_for_children",
    "user",
    "uts",
];

/// Resource limits only Linux has.
const LIMITS: [libc::c_int; 6] = [
    libc::RLIMIT_LOCKS as libc::c_int,
    libc::RLIMIT_MSGQUEUE as libc::c_int,
    libc::RLIMIT_NICE as libc::c_int,
    libc::RLIMIT_RTPRIO as libc::c_int,
    libc::RLIMIT_RTTIME as libc::c_int,
    libc::RLIMIT_SIGPENDING as libc::c_int,
];

/// The calling thread's `/proc` directory (`/proc/self` before Linux 3.17).
fn proc_dir() -> &'static str {
    static DIR: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        if std::path::Path::new("/proc/thread-self/status").exists() {
            "/proc/thread-self"
        } else {
            "/proc/self"
        }
    })
}

/// Everything above, as bytes to compare: the `status` lines, the limits,
/// the root directory, the namespaces and the cgroup.
pub(crate) fn extra() -> Vec<u8> {
    let dir = proc_dir();
    let mut out = Vec::with_capacity(1024);
    if let Ok(status) = read_proc(&format!("{dir}/status")) {
        for line in status.split(|&b| b == b'\n') {
            if STATUS
                .iter()
                .any(|field| line.starts_with(field.as_bytes()))
            {
                out.extend_from_slice(line);
                out.push(b'\n');
            }
        }
    }
    for resource in LIMITS {
        let (soft, hard) = crate::contain::unix::inheritance::limit(resource);
        out.extend_from_slice(&soft.to_le_bytes());
        out.extend_from_slice(&hard.to_le_bytes());
    }
    if let Ok(root) = std::fs::read_link(format!("{dir}/root")) {
        out.extend_from_slice(root.as_os_str().as_bytes());
    }
    out.push(0);
    // Each name looked up in the open directory: a path walk through
    // `/proc/thread-self` for each would cost several times more.
    if let Ok(ns) = std::fs::File::open(format!("{dir}/ns")) {
        for name in NAMESPACES {
            if let Ok(target) = nix::fcntl::readlinkat(&ns, name) {
                out.extend_from_slice(target.as_bytes());
            }
            out.push(0);
        }
    }
    if let Ok(cgroup) = read_proc("/proc/self/cgroup") {
        out.extend_from_slice(&cgroup);
    }
    out
}

/// A small `/proc` file, whole, in one read where the kernel allows —
/// not `fs::read`, whose size hint (`statx`: 0 for `/proc`) and reads
/// growing from 32 bytes take ten syscalls for the 1.4 KiB of `status`.
fn read_proc(path: &str) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut out = vec![0u8; 4096];
    let mut len = 0;
    loop {
        if len == out.len() {
            out.resize(len * 2, 0);
        }
        match file.read(&mut out[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    out.truncate(len);
    Ok(out)
}
