//! What a keeper passes on from its owner: the process attributes a
//! command inherits from the keeper that starts it rather than from its
//! spawn request — credentials, resource limits, niceness and, on Linux,
//! the umask, capabilities, `no_new_privs`, seccomp, CPU affinity, root
//! directory, namespaces and cgroup.
//!
//! A fresh keeper has the owner's as of its start, so its command gets
//! what a `fork` of the owner would. A warm keeper has them as of when it
//! was started, maybe many commands ago: an owner that since dropped root
//! (`os.setuid`), tightened a limit (`resource.setrlimit`), changed its
//! umask, entered a seccomp filter or a new network namespace would have
//! its next command run with what it had given up. So the pool takes a
//! [`Inheritance`] when it starts a keeper and hands that keeper out only
//! while the owner's is still the same (`pool.rs`).
//!
//! Not covered: what none of these shows — a Landlock domain, an LSM
//! label set through `/proc/self/attr` — and, on macOS, the umask (only
//! `umask(2)` reads it, by setting it, which would race this process's
//! other threads). An owner that changes those after its first command
//! should turn the pool off (`set_warm_keepers(0)`).

/// A snapshot of what this process passes on to a keeper it starts (see
/// the module docs); equal snapshots mean a keeper started at one serves
/// a command as a keeper started at the other would.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Inheritance {
    /// Real and effective user and group ids, then the supplementary
    /// groups.
    ids: Vec<u32>,
    /// `(soft, hard)` of each resource limit Linux and macOS share.
    limits: Vec<(u64, u64)>,
    /// The niceness.
    nice: i32,
    /// What only this OS shows (`contain::os::inheritance`).
    os: Vec<u8>,
}

/// Resource limits of both Linux and macOS (Linux adds its own in
/// `contain::os::inheritance`).
const LIMITS: [libc::c_int; 10] = [
    libc::RLIMIT_AS as libc::c_int,
    libc::RLIMIT_CORE as libc::c_int,
    libc::RLIMIT_CPU as libc::c_int,
    libc::RLIMIT_DATA as libc::c_int,
    libc::RLIMIT_FSIZE as libc::c_int,
    libc::RLIMIT_MEMLOCK as libc::c_int,
    libc::RLIMIT_NOFILE as libc::c_int,
    libc::RLIMIT_NPROC as libc::c_int,
    libc::RLIMIT_RSS as libc::c_int,
    libc::RLIMIT_STACK as libc::c_int,
];

impl Inheritance {
    /// This process's, now. Costs ~31 µs on Linux (release build, here:
    /// 12 µs of it the kernel formatting `/proc/thread-self/status`, the
    /// only place the umask shows; 8 µs `/proc/self/cgroup`; 8 µs the
    /// namespaces), against the ~1.1 ms keeper exec it lets the pool save.
    pub(crate) fn now() -> Inheritance {
        // SAFETY: these four cannot fail and touch no memory.
        let mut ids = unsafe {
            vec![
                libc::getuid(),
                libc::geteuid(),
                libc::getgid(),
                libc::getegid(),
            ]
        };
        ids.extend(groups());
        let limits = LIMITS.iter().map(|&resource| limit(resource)).collect();
        Inheritance {
            ids,
            limits,
            nice: nice(),
            os: crate::contain::os::inheritance::extra(),
        }
    }
}

/// The supplementary groups (empty if they cannot be read).
fn groups() -> Vec<u32> {
    let mut groups: Vec<libc::gid_t> = vec![0; 64];
    loop {
        // SAFETY: getgroups writes at most `len` entries into the buffer.
        let n = unsafe { libc::getgroups(groups.len() as libc::c_int, groups.as_mut_ptr()) };
        if n >= 0 {
            groups.truncate(n as usize);
            return groups;
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL)
            || groups.len() > 1 << 16
        {
            return Vec::new();
        }
        groups.resize(groups.len() * 4, 0);
    }
}

/// `(soft, hard)` of one resource limit (`(0, 0)` if it cannot be read).
pub(crate) fn limit(resource: libc::c_int) -> (u64, u64) {
    let mut rlim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct we own. (The resource's type
    // differs between libcs: glibc's is an enum.)
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    let rc = unsafe { libc::getrlimit(resource as _, &mut rlim) };
    if rc != 0 {
        return (0, 0);
    }
    (rlim.rlim_cur, rlim.rlim_max)
}

/// The niceness of the calling thread (Linux) or process (macOS): what a
/// process it starts gets.
fn nice() -> i32 {
    // getpriority returns -1 for an error and for niceness -1 alike: errno
    // tells them apart.
    nix::errno::Errno::clear();
    // SAFETY: no memory is passed.
    #[allow(clippy::unnecessary_cast)]
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS as _, 0) };
    if nice == -1 && nix::errno::Errno::last_raw() != 0 {
        return i32::MIN;
    }
    nice
}
