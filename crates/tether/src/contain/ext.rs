//! The platform-specific public modules, re-exported at the crate root
//! (`tether::unix`, `tether::windows`): they exist only on their platform,
//! and this is the only place that says so.

#[cfg(unix)]
#[path = "unix/api.rs"]
pub mod unix;

#[cfg(windows)]
#[path = "windows/api.rs"]
pub mod windows;
