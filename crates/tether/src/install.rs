//! Where tether keeps its state, and the stable id derived from it.

use std::path::{Component, Path, PathBuf};

/// One tether installation: a state directory and the id derived from it.
///
/// The state directory is the first of:
///
/// 1. `$TETHER_HOME`;
/// 2. `$XDG_STATE_HOME/tether` (ignored unless absolute, as the XDG spec
///    says);
/// 3. `$HOME/.local/state/tether` (likewise);
/// 4. `$XDG_RUNTIME_DIR/tether` (per user and 0700 by the spec, but
///    emptied at logout);
/// 5. on Windows, `%LOCALAPPDATA%\tether` (per user; Windows has no
///    XDG or `$HOME` convention) before any shared fallback;
/// 6. `/tmp/tether-<uid>`: shared and predictable, so another user can
///    create it first. The ledger refuses a state directory that is a
///    symbolic link, not owned by the effective user, or writable by group
///    or others, so the worst such a user can do is make tether refuse it.
///
/// The path is **canonical**, so every spelling of one directory is one
/// install: absolute (relative to the current directory), with symbolic
/// links, `.` and `..` resolved for the part that exists, and the part not
/// created yet (which can hold no link) normalized lexically. `$H`,
/// `$H/`, `$H/./` and a symbolic link to `$H` are one install, the same
/// before and after the directory is created. The two shared fallbacks
/// (4 and 5) resolve only their parent: a symbolic link planted at the
/// predictable name itself is kept as it is, for the ledger to refuse.
///
/// The id is a 64-bit FNV-1a hash of the canonical path, written as 16 hex
/// digits: stable for as long as that path is, and different for two
/// installs side by side (each test suite, say), so their spawn tags never
/// claim each other's processes.
///
/// ```
/// use tether::Install;
///
/// let dir = tempfile::tempdir()?;
/// let install = Install::at(dir.path().join("state"));
/// assert_eq!(install.id().len(), 16);
/// // Every spelling of one directory is one install, created or not.
/// assert_eq!(install, Install::at(dir.path().join("./state/../state")));
/// assert_ne!(install.id(), Install::at(dir.path().join("other")).id());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Install {
    state_dir: PathBuf,
    id: String,
}

impl Install {
    /// The install named by the environment (see the type docs). Never
    /// fails and creates nothing; whether the directory can be trusted is
    /// the ledger's check, when it opens it.
    ///
    /// An absolute path is resolved once per process (the last one asked
    /// for is remembered): every spawn asks, and resolving it again —
    /// a `readlink` per component of each prefix tried — took ~8 µs of a
    /// ~0.5 ms spawn here. So a process's tags carry one install id even if
    /// a link on the way is changed while it runs.
    pub fn from_env() -> Install {
        let chosen = default_state_dir();
        let absolute = match &chosen {
            StateDir::Chosen(dir) => dir.is_absolute(),
            StateDir::Shared { parent, .. } => parent.is_absolute(),
        };
        if !absolute {
            return chosen.resolve();
        }
        // Never waited for: a lock another thread holds — or held when a
        // child was forked from this process, where it stays locked — is
        // passed by, resolving the path as if nothing was remembered.
        static LAST: std::sync::Mutex<Option<(StateDir, Install)>> = std::sync::Mutex::new(None);
        if let Ok(last) = LAST.try_lock()
            && let Some((asked, install)) = &*last
            && *asked == chosen
        {
            return install.clone();
        }
        let install = chosen.clone().resolve();
        if let Ok(mut last) = LAST.try_lock() {
            *last = Some((chosen, install.clone()));
        }
        install
    }

    /// The install whose state lives in `state_dir`, however it is spelled
    /// (see the type docs). Reads the file system to resolve the part of
    /// the path that exists; never creates anything.
    pub fn at(state_dir: impl AsRef<Path>) -> Install {
        Install::exactly(canonical(state_dir.as_ref()))
    }

    fn exactly(state_dir: PathBuf) -> Install {
        let id = format!("{:016x}", fnv1a(state_dir.as_os_str().as_encoded_bytes()));
        Install { state_dir, id }
    }

    /// The state directory, canonical (it may not exist yet).
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// The install id written into spawn tags.
    pub fn id(&self) -> &str {
        &self.id
    }
}

/// Where the environment puts the state directory.
#[derive(Clone, PartialEq, Eq)]
enum StateDir {
    /// A directory the user named (directly or through their home).
    Chosen(PathBuf),
    /// `parent/name`, where `parent` is shared with other users.
    Shared { parent: PathBuf, name: String },
}

impl StateDir {
    fn resolve(self) -> Install {
        match self {
            StateDir::Chosen(dir) => Install::at(dir),
            StateDir::Shared { parent, name } => Install::exactly(canonical(&parent).join(name)),
        }
    }
}

fn default_state_dir() -> StateDir {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let absolute = |name: &str| var(name).map(PathBuf::from).filter(|p| p.is_absolute());
    if let Some(home) = var("TETHER_HOME") {
        return StateDir::Chosen(home.into());
    }
    if let Some(state) = absolute("XDG_STATE_HOME") {
        return StateDir::Chosen(state.join("tether"));
    }
    if let Some(home) = absolute("HOME") {
        return StateDir::Chosen(home.join(".local/state/tether"));
    }
    if let Some(dir) = crate::contain::platform_state_dir() {
        return StateDir::Chosen(dir);
    }
    if let Some(runtime) = absolute("XDG_RUNTIME_DIR") {
        return StateDir::Shared {
            parent: runtime,
            name: "tether".into(),
        };
    }
    StateDir::Shared {
        parent: "/tmp".into(),
        name: format!("tether-{}", crate::contain::sys::current_uid()),
    }
}

/// `path` made absolute; its longest existing prefix resolved by the file
/// system (symbolic links, `.`, `..`); the rest — which does not exist, so
/// holds no link — normalized lexically (`.` dropped, `..` pops). So the
/// answer for a directory not created yet is the one it will have once it
/// is, as long as the part that exists does not change.
fn canonical(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        match std::env::current_dir() {
            Ok(cwd) => cwd.join(path),
            Err(_) => path.to_path_buf(),
        }
    };
    // `components` already drops repeated and trailing separators and
    // inner `.`.
    let parts: Vec<Component<'_>> = absolute.components().collect();
    for split in (0..=parts.len()).rev() {
        let prefix: PathBuf = parts[..split].iter().collect();
        let resolved = if split == 0 {
            Ok(PathBuf::new())
        } else {
            std::fs::canonicalize(&prefix)
        };
        let Ok(mut out) = resolved else {
            continue;
        };
        for part in &parts[split..] {
            match part {
                Component::ParentDir => {
                    out.pop();
                }
                Component::CurDir => {}
                other => out.push(other.as_os_str()),
            }
        }
        return out;
    }
    unreachable!("the empty prefix always resolves")
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_is_stable_and_path_specific() {
        let a = Install::at("/var/lib/a");
        assert_eq!(a.id(), Install::at("/var/lib/a").id());
        assert_ne!(a.id(), Install::at("/var/lib/b").id());
        assert_eq!(a.id().len(), 16);
    }

    #[test]
    fn a_relative_path_is_made_absolute() {
        let install = Install::at("some/relative/dir");
        assert!(install.state_dir().is_absolute());
        assert!(install.state_dir().ends_with("some/relative/dir"));
    }
}
