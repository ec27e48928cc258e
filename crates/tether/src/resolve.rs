//! Finding the program to run the way the OS would, but before spawning,
//! so that "not found" and "not executable" are precise errors.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::contain::resolve::{
    DEFAULT_PATH, candidates, executable, is_path, is_path_var, path_candidates,
};
use crate::error::{Error, Result};

/// The executable `program` names: itself if it is a path (relative to
/// `cwd`), else the first executable match on the `PATH` of `env` (or the
/// platform's default path).
pub(crate) fn resolve_program(
    program: &OsStr,
    env: &[(OsString, OsString)],
    cwd: Option<&Path>,
) -> Result<PathBuf> {
    if program.is_empty() {
        return Err(Error::InvalidInput {
            what: "program",
            reason: "empty program name".into(),
        });
    }
    let display = program.to_string_lossy().into_owned();
    if is_path(program) {
        let path = Path::new(program);
        let path = match (path.is_relative(), cwd) {
            (true, Some(cwd)) => cwd.join(path),
            _ => std::path::absolute(path)?,
        };
        let mut not_executable = None;
        for candidate in path_candidates(&path) {
            match executable(&candidate) {
                Ok(()) => return Ok(candidate),
                Err(Some(reason)) if not_executable.is_none() => {
                    not_executable = Some((candidate, reason))
                }
                Err(_) => {}
            }
        }
        return match not_executable {
            Some((path, reason)) => Err(Error::NotExecutable { path, reason }),
            None => Err(Error::ProgramNotFound {
                program: display,
                path_searched: String::new(),
            }),
        };
    }
    let search = env
        .iter()
        .find(|(k, _)| is_path_var(k))
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| DEFAULT_PATH.into());
    let mut not_executable = None;
    for dir in std::env::split_paths(&search) {
        let dir = if dir.as_os_str().is_empty() {
            cwd.map(Path::to_path_buf).unwrap_or_default()
        } else {
            dir
        };
        for candidate in candidates(&dir, program) {
            match executable(&candidate) {
                Ok(()) => return Ok(std::path::absolute(candidate)?),
                Err(Some(reason)) if not_executable.is_none() => {
                    not_executable = Some((candidate, reason))
                }
                Err(_) => {}
            }
        }
    }
    match not_executable {
        Some((path, reason)) => Err(Error::NotExecutable { path, reason }),
        None => Err(Error::ProgramNotFound {
            program: display,
            path_searched: search.to_string_lossy().into_owned(),
        }),
    }
}
