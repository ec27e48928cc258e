//! `tether::sys::held_paths` on Windows, best effort: the executable
//! (`QueryFullProcessImageNameW`), the working directory (the live
//! `CurrentDirectory` in the process parameters of its PEB, read as `sys`
//! reads the environment) and every mapped image — the executable and
//! its DLLs (a Toolhelp32 module snapshot).
//!
//! Not answered: open files and mapped data files. Windows has no
//! per-process list of open files short of walking the system handle table
//! (`NtQuerySystemInformation(SystemExtendedHandleInformation)`, which
//! names files only by querying each handle — a call that hangs on some
//! pipes); the Restart Manager (`RmGetList`) answers the inverse question,
//! "who holds these files", and is where a future `--holding` for Windows
//! should go. docs/windows.md says so. Nothing here is `deleted`: Windows
//! refuses to delete a running image or a directory in use (it can be
//! renamed, and is then reported under its new name).

use std::ffi::OsString;
use std::io;
use std::os::windows::io::{AsHandle, AsRawHandle};
use std::path::{Path, PathBuf};

use windows_sys::Win32::Foundation::{ERROR_BAD_LENGTH, ERROR_NO_MORE_FILES};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, MODULEENTRY32W, Module32FirstW, Module32NextW, TH32CS_SNAPMODULE,
    TH32CS_SNAPMODULE32,
};
use windows_sys::Win32::System::Threading::PROCESS_QUERY_LIMITED_INFORMATION;

use super::handle::owned;
use super::peb::{self, PEB_READ};
use super::process;
use super::wide::from_wide;
use super::win_error::{WinError, code_of};
use crate::contain::sys::{FileId, Held, HeldAs};

/// How often a module snapshot is retried while the target is still
/// loading (`ERROR_BAD_LENGTH`: its loader list changed under the read).
const SNAPSHOT_RETRIES: usize = 8;

pub(crate) fn held_paths(pid: u32) -> io::Result<Vec<Held>> {
    let mut held = Vec::new();
    let limited = process::open(pid, PROCESS_QUERY_LIMITED_INFORMATION)?;
    let exe = process::image_path(limited.as_handle())?;
    push(&mut held, HeldAs::Executable, exe);
    // The working directory and modules need read access to its memory,
    // which a user has on their own processes; where it is refused the
    // executable is still an answer, and the refusal is the error only when
    // nothing at all could be read.
    match process::open(pid, PEB_READ) {
        Ok(full) => {
            if let Ok(cwd) = peb::current_directory(full.as_handle()) {
                push(&mut held, HeldAs::WorkingDirectory, cwd);
            }
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Err(err),
        Err(_) => {}
    }
    if let Ok(modules) = modules(pid) {
        for module in modules {
            push(&mut held, HeldAs::MappedFile, module);
        }
    }
    Ok(held)
}

/// Objects are compared by path text only on Windows (no bind mounts;
/// `tether::sys::HeldUnder`): no identity.
pub(crate) fn file_id(_path: &Path) -> io::Result<Option<FileId>> {
    Ok(None)
}

/// Nothing to resolve: see [`file_id`].
#[derive(Debug, Default)]
pub(crate) struct Resolver;

/// Never called without an identity ([`file_id`] gives none): nothing is
/// under by identity.
pub(crate) fn under_by_identity(
    _pid: u32,
    held: &[Held],
    _target: FileId,
    _resolver: &mut Resolver,
) -> Vec<bool> {
    vec![false; held.len()]
}

/// Adds `path` unless it is empty or already listed the same way.
fn push(held: &mut Vec<Held>, how: HeldAs, path: OsString) {
    if path.is_empty() {
        return;
    }
    let path = normalize(PathBuf::from(path));
    let entry = Held {
        how,
        path,
        deleted: false,
        id: None,
    };
    if !held.contains(&entry) {
        held.push(entry);
    }
}

/// `C:\work\` → `C:\work` (but `C:\` stays a root), so a caller's
/// `starts_with` compares components, not spellings.
fn normalize(path: PathBuf) -> PathBuf {
    path.components().collect()
}

/// The files of every module mapped in `pid`.
fn modules(pid: u32) -> io::Result<Vec<OsString>> {
    let mut last = None;
    for _ in 0..SNAPSHOT_RETRIES {
        // SAFETY: plain call; the new handle (checked by `owned`) is ours.
        let snap = unsafe {
            owned(
                CreateToolhelp32Snapshot(TH32CS_SNAPMODULE | TH32CS_SNAPMODULE32, pid),
                "CreateToolhelp32Snapshot(modules)",
            )
        };
        let snap = match snap {
            Ok(snap) => snap,
            Err(err) if code_of(&err) == Some(ERROR_BAD_LENGTH) => {
                last = Some(err);
                std::thread::yield_now();
                continue;
            }
            Err(err) => return Err(err),
        };
        let mut entry = MODULEENTRY32W {
            dwSize: size_of::<MODULEENTRY32W>() as u32,
            ..Default::default()
        };
        let mut files = Vec::new();
        // SAFETY: valid snapshot handle; `entry` has dwSize set.
        let mut ok = unsafe { Module32FirstW(snap.as_raw_handle(), &mut entry) };
        while ok != 0 {
            files.push(from_wide(&entry.szExePath));
            // SAFETY: as above.
            ok = unsafe { Module32NextW(snap.as_raw_handle(), &mut entry) };
        }
        let err = WinError::last("Module32NextW");
        if code_of(&err) != Some(ERROR_NO_MORE_FILES) {
            return Err(err);
        }
        return Ok(files);
    }
    Err(last.expect("at least one attempt"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_holds_its_exe_cwd_and_dlls() {
        let held = held_paths(std::process::id()).unwrap();
        let exe = normalize(std::env::current_exe().unwrap());
        let cwd = normalize(std::env::current_dir().unwrap());
        let has = |how: HeldAs, path: &PathBuf| {
            held.iter().any(|h| {
                h.how == how
                    && h.path
                        .to_string_lossy()
                        .eq_ignore_ascii_case(&path.to_string_lossy())
            })
        };
        assert!(has(HeldAs::Executable, &exe), "{held:#?} lacks {exe:?}");
        assert!(
            has(HeldAs::WorkingDirectory, &cwd),
            "{held:#?} lacks {cwd:?}"
        );
        assert!(
            has(HeldAs::MappedFile, &exe),
            "{held:#?} does not map {exe:?}"
        );
        let kernel32 = held.iter().any(|h| {
            h.how == HeldAs::MappedFile
                && h.path
                    .file_name()
                    .is_some_and(|name| name.eq_ignore_ascii_case("kernel32.dll"))
        });
        assert!(kernel32, "{held:#?} maps no kernel32.dll");
        assert!(held.iter().all(|h| !h.deleted));
    }

    #[test]
    fn a_missing_process_is_not_found() {
        // Windows pids are multiples of 4; this one is never handed out.
        let err = held_paths(0xFFFF_FFF3).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
    }

    #[test]
    fn trailing_separators_do_not_matter() {
        assert_eq!(
            normalize(PathBuf::from(r"C:\work\")),
            PathBuf::from(r"C:\work")
        );
        assert_eq!(normalize(PathBuf::from(r"C:\")), PathBuf::from(r"C:\"));
    }
}
