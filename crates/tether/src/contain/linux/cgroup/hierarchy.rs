//! Where this process's cgroups are: the cgroup filesystems from
//! `/proc/self/mountinfo`, our place in each hierarchy from
//! `/proc/self/cgroup`, and the directory that joins the two. Nothing is
//! hard-coded: a pure-v2 machine mounts one cgroup2 at `/sys/fs/cgroup`,
//! a hybrid one (this project's) has v1 hierarchies there and cgroup2 at
//! `/sys/fs/cgroup/unified`, and a container sees its own cgroup as the
//! root of a bind mount (runc) or of a cgroup namespace.

use std::path::{Path, PathBuf};

/// One cgroup filesystem mount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Mount {
    /// Where it is mounted.
    pub point: PathBuf,
    /// The cgroup of the hierarchy shown at `point` (`/`, or a container's
    /// own cgroup for a bind mount).
    pub root: String,
    /// cgroup v2 (`cgroup2`) rather than a v1 hierarchy.
    pub v2: bool,
    /// v1: the controllers of the hierarchy (`memory`, `cpu`, `name=…`).
    pub controllers: Vec<String>,
    /// Mounted read-only.
    pub read_only: bool,
}

/// This process's membership in one hierarchy (a line of `/proc/self/cgroup`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Membership {
    /// `0` for cgroup v2.
    pub id: u32,
    /// The v1 controllers (empty for v2).
    pub controllers: Vec<String>,
    /// The cgroup, relative to the hierarchy's (or namespace's) root.
    pub path: String,
}

/// The cgroup filesystems in `mountinfo` (the text of `/proc/self/mountinfo`).
pub(crate) fn parse_mounts(mountinfo: &str) -> Vec<Mount> {
    let mut mounts = Vec::new();
    for line in mountinfo.lines() {
        // id parent major:minor root point options [optional…] - type source super
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let fields: Vec<&str> = left.split(' ').collect();
        let tail: Vec<&str> = right.split(' ').collect();
        if fields.len() < 6 || tail.len() < 3 {
            continue;
        }
        let v2 = match tail[0] {
            "cgroup2" => true,
            "cgroup" => false,
            _ => continue,
        };
        let controllers = if v2 {
            Vec::new()
        } else {
            tail[2]
                .split(',')
                .filter(|o| !matches!(*o, "rw" | "ro") && !o.contains("xattr"))
                .map(str::to_owned)
                .collect()
        };
        mounts.push(Mount {
            point: PathBuf::from(unescape(fields[4])),
            root: unescape(fields[3]),
            v2,
            controllers,
            read_only: fields[5].split(',').any(|o| o == "ro"),
        });
    }
    mounts
}

/// The lines of `/proc/self/cgroup`.
pub(crate) fn parse_memberships(text: &str) -> Vec<Membership> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let id = parts.next()?.parse().ok()?;
            let controllers = parts
                .next()?
                .split(',')
                .filter(|c| !c.is_empty())
                .map(str::to_owned)
                .collect();
            let path = parts.next()?.to_owned();
            Some(Membership {
                id,
                controllers,
                path,
            })
        })
        .collect()
}

/// `\040` and friends (how mountinfo writes spaces, tabs, newlines and
/// backslashes in paths) back to bytes.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let value =
                (bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0');
            out.push(value);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Our cgroups, found.
#[derive(Clone, Debug, Default)]
pub(crate) struct Hierarchies {
    mounts: Vec<Mount>,
    memberships: Vec<Membership>,
}

/// Where this process sits in one hierarchy, as a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Place {
    /// The directory of our cgroup.
    pub dir: PathBuf,
    /// Its mount is read-only.
    pub read_only: bool,
    /// Our cgroup is the root of the hierarchy as mounted here (the real
    /// root, or a container's cgroup-namespace root).
    pub at_mount_root: bool,
}

impl Hierarchies {
    /// Reads `/proc/self/mountinfo` and `/proc/self/cgroup`. Either missing
    /// (no `/proc`) gives no hierarchies.
    pub(crate) fn of_self() -> Hierarchies {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        Hierarchies::from_text(&read("/proc/self/mountinfo"), &read("/proc/self/cgroup"))
    }

    pub(crate) fn from_text(mountinfo: &str, cgroup: &str) -> Hierarchies {
        Hierarchies {
            mounts: parse_mounts(mountinfo),
            memberships: parse_memberships(cgroup),
        }
    }

    /// Whether any cgroup filesystem is mounted.
    pub(crate) fn any(&self) -> bool {
        !self.mounts.is_empty()
    }

    /// Every cgroup filesystem mount, in `mountinfo` order.
    pub(crate) fn mounts(&self) -> &[Mount] {
        &self.mounts
    }

    /// Whether a cgroup2 filesystem is mounted (whether or not our cgroup
    /// is reachable through it).
    pub(crate) fn v2_mounted(&self) -> bool {
        self.mounts.iter().any(|m| m.v2)
    }

    /// Our cgroup v2 directory.
    pub(crate) fn v2(&self) -> Option<Place> {
        let ours = self
            .memberships
            .iter()
            .find(|m| m.id == 0 && m.controllers.is_empty())?;
        self.place(ours, |m| m.v2)
    }

    /// Whether a v1 hierarchy with `controller` is mounted.
    pub(crate) fn v1_has(&self, controller: &str) -> bool {
        self.mounts
            .iter()
            .any(|m| !m.v2 && m.controllers.iter().any(|c| c == controller))
    }

    /// Our cgroup directory in the v1 hierarchy that has `controller`.
    pub(crate) fn v1(&self, controller: &str) -> Option<Place> {
        let ours = self
            .memberships
            .iter()
            .find(|m| m.id != 0 && m.controllers.iter().any(|c| c == controller))?;
        self.place(ours, |m| {
            !m.v2 && m.controllers.iter().any(|c| c == controller)
        })
    }

    /// The directory of membership `ours` under a mount of its hierarchy
    /// whose root contains it (a writable mount preferred).
    fn place(&self, ours: &Membership, of_hierarchy: impl Fn(&Mount) -> bool) -> Option<Place> {
        // A cgroup outside our cgroup namespace reads as `/../…`: not
        // reachable through any mount we can see.
        if ours.path.split('/').any(|c| c == "..") {
            return None;
        }
        let mut candidates: Vec<(&Mount, &str)> = self
            .mounts
            .iter()
            .filter(|m| of_hierarchy(m))
            .filter_map(|m| Some((m, below(&ours.path, &m.root)?)))
            .collect();
        candidates.sort_by_key(|(m, _)| m.read_only);
        let (mount, rest) = candidates.first()?;
        let dir = if rest.is_empty() {
            mount.point.clone()
        } else {
            mount.point.join(rest)
        };
        Some(Place {
            dir,
            read_only: mount.read_only,
            at_mount_root: rest.is_empty(),
        })
    }
}

/// `path` relative to `root` (without a leading `/`) if `root` is `path`
/// or one of its ancestors, component-wise.
fn below<'a>(path: &'a str, root: &str) -> Option<&'a str> {
    let root = root.trim_end_matches('/');
    let rest = path.strip_prefix(root)?;
    if !rest.is_empty() && !rest.starts_with('/') {
        return None; // `/ab` is not below `/a`
    }
    Some(rest.trim_start_matches('/'))
}

/// Whether `dir` can be written by this process (`access(W_OK)`, which
/// also says `EROFS` for a read-only mount): `Err` carries why not.
pub(crate) fn writable(dir: &Path) -> std::io::Result<()> {
    nix::unistd::access(dir, nix::unistd::AccessFlags::W_OK).map_err(std::io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    // This project's machines: v1 hierarchies plus cgroup2 at
    // /sys/fs/cgroup/unified, memory in a child of the root.
    const HYBRID_MOUNTS: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
    const HYBRID_CGROUP: &str = "\
9:name=systemd:/
8:pids:/
4:memory:/process_api/7a11
1:cpu:/
0::/
";

    #[test]
    fn a_hybrid_host_has_v2_for_kill_and_v1_for_limits() {
        let h = Hierarchies::from_text(HYBRID_MOUNTS, HYBRID_CGROUP);
        let v2 = h.v2().unwrap();
        assert_eq!(v2.dir, Path::new("/sys/fs/cgroup/unified"));
        assert!(v2.at_mount_root);
        assert_eq!(
            h.v1("memory").unwrap().dir,
            Path::new("/sys/fs/cgroup/memory/process_api/7a11")
        );
        assert!(!h.v1("memory").unwrap().at_mount_root);
        assert_eq!(h.v1("pids").unwrap().dir, Path::new("/sys/fs/cgroup/pids"));
        assert!(h.v1("hugetlb").is_none());
        assert!(h.v1_has("cpu") && !h.v1_has("io"));
    }

    #[test]
    fn a_runc_container_sees_its_cgroup_as_the_root_of_a_bind_mount() {
        let mounts = "\
76 75 0:29 /ctr /sys/fs/cgroup/cpu ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,cpu
79 75 0:32 /process_api/7a11/ctr /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory
83 75 0:36 /ctr /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids
";
        let cgroup = "8:pids:/ctr\n4:memory:/process_api/7a11/ctr\n1:cpu:/ctr\n0::/ctr\n";
        let h = Hierarchies::from_text(mounts, cgroup);
        let memory = h.v1("memory").unwrap();
        assert_eq!(memory.dir, Path::new("/sys/fs/cgroup/memory"));
        assert!(memory.at_mount_root && !memory.read_only);
        assert!(h.v1("cpu").unwrap().read_only);
        assert!(h.v2().is_none(), "runc mounts no cgroup2 in hybrid mode");
    }

    #[test]
    fn a_pure_v2_host_and_names_that_need_escapes() {
        let mounts = "\
30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate
99 23 0:26 / /mnt/my\\040cg ro,relatime - cgroup2 cgroup2 rw
";
        let cgroup = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/x.scope\n";
        let h = Hierarchies::from_text(mounts, cgroup);
        let v2 = h.v2().unwrap();
        assert_eq!(
            v2.dir,
            Path::new(
                "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/x.scope"
            )
        );
        assert!(!v2.read_only && !v2.at_mount_root);
        assert_eq!(parse_mounts(mounts)[1].point, Path::new("/mnt/my cg"));
        // Outside our cgroup namespace: unreachable, never guessed.
        assert!(
            Hierarchies::from_text(mounts, "0::/../sibling\n")
                .v2()
                .is_none()
        );
        // `/ab` is not below `/a`.
        let bind = "1 1 0:26 /a /x rw - cgroup2 cgroup2 rw\n";
        assert!(Hierarchies::from_text(bind, "0::/ab\n").v2().is_none());
        assert_eq!(
            Hierarchies::from_text(bind, "0::/a/b\n").v2().unwrap().dir,
            Path::new("/x/b")
        );
        assert!(!Hierarchies::from_text("", "").any());
    }
}
