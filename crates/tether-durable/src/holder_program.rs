//! Which program to start as the holder when none runs.
//!
//! A Rust program that starts durable sessions should not need the
//! `tether` CLI installed, just as it needs no `tether-keeper`: on Linux a
//! program that links this crate *is* a holder — an `.init_array`
//! constructor (declared below with `tether::embedded_entry!`, the
//! mechanism the core crate's embedded keeper uses) runs the holder
//! before `main`, and instead of it, when the program is started as
//! `<program> __tether-holder <build id>`. Only those exact words trigger
//! it; any other command line costs one comparison at start-up.
//!
//! Why this first, before a `tether` found on disk: the holder is then of
//! the very build of its requester (its protocol matches to the last
//! request), started through `/proc/self/exe` (the running file, even if
//! its path was rebuilt or removed since), and nothing has to be
//! installed or found. Why not a hook called from `main`, as
//! `tether::keeper::run_if_requested`: a program that forgot it would run
//! its own `main` with the marker as arguments — anything at all — where
//! the constructor cannot be forgotten.
//!
//! Elsewhere — macOS (no constructor: see the core crate's
//! `contain/macos`), or this crate inside a shared library (the Python
//! extension, whose main program is the interpreter) — the holder is a
//! `tether` executable run as `tether holder`: the one next to this
//! program, else the first on `PATH`; when there is none, starting fails
//! with [`DurableError::HolderStart`] naming what to install, before
//! anything starts. Windows has no durable sessions: the holder's socket
//! cannot be had there, and every request fails with
//! [`DurableError::Unreachable`] (`Unsupported`).

use std::path::{Path, PathBuf};

use crate::HOLDER_ARG;
use crate::error::{DurableError, Result};

/// The first argument that makes a program linking this crate a holder
/// (followed by the core library's build id).
pub const EMBEDDED_HOLDER_ARG: &str = "__tether-holder";

tether::embedded_entry! {
    /// This program, when it can be started as its own holder.
    fn embedded_holder(EMBEDDED_HOLDER_ARG) => run_embedded_holder
}

/// The embedded holder's `main`: serves `$TETHER_HOME`'s install (which
/// the requester set) and exits with the holder's status.
fn run_embedded_holder() -> ! {
    let status = crate::holder::main(tether::Install::from_env());
    std::process::exit(i32::from(status))
}

/// A program and the arguments that make it this user's holder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HolderProgram {
    program: PathBuf,
    args: Vec<String>,
}

impl HolderProgram {
    /// A `tether` executable, run as `tether holder`.
    pub fn tether(program: impl Into<PathBuf>) -> HolderProgram {
        HolderProgram {
            program: program.into(),
            args: vec![HOLDER_ARG.to_owned()],
        }
    }

    /// This very program as its own holder (Linux, when this crate is
    /// part of the main program); `None` elsewhere.
    pub fn embedded() -> Option<HolderProgram> {
        embedded_holder().map(|program| HolderProgram {
            program,
            args: vec![
                EMBEDDED_HOLDER_ARG.to_owned(),
                tether::__embedded::BUILD_ID.to_owned(),
            ],
        })
    }

    /// The holder to start: [`embedded`](Self::embedded), else a `tether`
    /// executable next to this program, else the first `tether` on
    /// `PATH`.
    ///
    /// # Errors
    /// [`DurableError::HolderStart`] naming what to install when there is
    /// none of them.
    pub fn find() -> Result<HolderProgram> {
        if let Some(embedded) = HolderProgram::embedded() {
            return Ok(embedded);
        }
        let name = format!("tether{}", std::env::consts::EXE_SUFFIX);
        let beside = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(|dir| dir.join(&name)));
        let on_path = std::env::var_os("PATH")
            .into_iter()
            .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
            .map(|dir| dir.join(&name));
        beside
            .into_iter()
            .chain(on_path)
            .find(|candidate| candidate.is_file())
            .map(HolderProgram::tether)
            .ok_or_else(|| {
                DurableError::HolderStart(format!(
                    "no holder program: this program cannot be its own holder here (only on \
                     Linux, linked into the main program), and no `{name}` is next to it or on \
                     PATH; install the tether CLI (`cargo install process-tether-cli`) or pass \
                     one with DurableOptions::holder_program"
                ))
            })
    }

    /// The program.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// Its arguments.
    pub fn args(&self) -> &[String] {
        &self.args
    }
}
