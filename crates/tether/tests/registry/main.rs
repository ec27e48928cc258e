//! The registry's behaviour, one module per behaviour, in one test binary
//! (one link and one process start instead of twelve).

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

mod bytes;
mod close;
mod completion;
mod cycles;
mod from_command;
mod kill_race;
mod large_output;
mod limits;
mod lost;
mod observer;
mod orphan_pipe;
mod pty;
mod runtimes;
mod stdin;
mod support;
mod teardown;
mod wait;
