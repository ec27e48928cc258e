//! The registry's behaviour, one module per behaviour, in one test binary
//! (one link and one process start instead of twelve).

mod bytes;
mod completion;
mod cycles;
mod kill_race;
mod large_output;
mod limits;
mod lost;
mod observer;
mod orphan_pipe;
mod pty;
mod stdin;
mod support;
mod teardown;
mod wait;
