//! macOS: the keeper with process group + spawn tag containment (in progress).

pub(crate) mod holding;
pub(crate) mod watchdog;
