//! `tether::sys::held_paths` on Windows: **a documented stub** until the
//! Windows backend fills it in — every call fails with `Unsupported`, so
//! `tether ps --holding` and `tether reap --holding` say they cannot see
//! holders instead of claiming a path is free.
//!
//! How to implement it (best effort): the executable from
//! `QueryFullProcessImageNameW`; the working directory from the process
//! parameters in the PEB (`CurrentDirectory`, as `sys` already reads the
//! environment); mapped images from `EnumProcessModulesEx` +
//! `GetModuleFileNameExW`; open files have no per-process API — the
//! Restart Manager (`RmStartSession`, `RmRegisterResources` with the files
//! under the path, `RmGetList`) answers the inverse question, "who holds
//! these files", which is what an updater asks.

use std::io;

use crate::contain::sys::Held;

pub(crate) fn held_paths(_pid: u32) -> io::Result<Vec<Held>> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "what a process holds is not read on Windows yet",
    ))
}
