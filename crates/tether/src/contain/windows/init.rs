//! `tether init` on Windows: unsupported. There is no PID 1 to be and no
//! zombie to reap; a job object holds a tree (`tether run`), and a Windows
//! container's entry point is the job's first process.

use std::ffi::{OsStr, OsString};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::init::InitReport;

pub(crate) fn run(_program: &OsStr, _args: &[OsString], _grace: Duration) -> Result<InitReport> {
    Err(Error::Unsupported {
        what: "tether init (an init process reaping zombies)",
        os: "Windows",
    })
}
