//! Where tether keeps its state, and the stable id derived from it.

use std::path::{Path, PathBuf};

/// One tether installation: a state directory and the id derived from it.
///
/// The state directory is `$TETHER_HOME` if set, else
/// `$XDG_STATE_HOME/tether`, else `$HOME/.local/state/tether`, else
/// `/tmp/tether-<uid>`. The id is a 64-bit FNV-1a hash of that path, written
/// as 16 hex digits: stable for as long as the path is, computed without
/// touching the disk, and different for two installs side by side (each
/// test suite, say), so their spawn tags never claim each other's processes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Install {
    state_dir: PathBuf,
    id: String,
}

impl Install {
    /// The install named by the environment (see the type docs).
    pub fn from_env() -> Install {
        Install::at(default_state_dir())
    }

    /// The install whose state lives in `state_dir`.
    pub fn at(state_dir: impl Into<PathBuf>) -> Install {
        let state_dir = state_dir.into();
        let id = format!("{:016x}", fnv1a(state_dir.as_os_str().as_encoded_bytes()));
        Install { state_dir, id }
    }

    /// The state directory (it may not exist yet).
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// The install id written into spawn tags.
    pub fn id(&self) -> &str {
        &self.id
    }
}

fn default_state_dir() -> PathBuf {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(home) = var("TETHER_HOME") {
        return home;
    }
    if let Some(state) = var("XDG_STATE_HOME") {
        return state.join("tether");
    }
    if let Some(home) = var("HOME") {
        return home.join(".local/state/tether");
    }
    PathBuf::from(format!(
        "/tmp/tether-{}",
        crate::contain::sys::current_uid()
    ))
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
}
