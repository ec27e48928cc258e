//! Running the keeper: as the standalone `tether-keeper` program, or inside
//! a program that embeds tether and calls [`run_if_requested`].

use std::sync::atomic::Ordering;

/// The argument that makes a program that embeds tether act as its keeper.
pub const KEEPER_ARG: &str = "__tether-keeper";

/// This build of the library (a hash of its source and version, from
/// `build.rs`). The owner passes it after [`KEEPER_ARG`]; a keeper program
/// of another build speaks another wire format.
pub(crate) const BUILD_ID: &str = env!("TETHER_BUILD_ID");

/// The keeper's exit status when the owner is of another build: it exits
/// at once, before reading anything, and the owner starts another keeper
/// program (see `discovery.rs`).
pub(crate) const OTHER_BUILD: i32 = 122;

/// Whether a keeper started with `build` (the argument after
/// [`KEEPER_ARG`], if any) may serve: yes for this build's id, and for
/// none (started by hand, or by a program that names no build).
pub(crate) fn serves(build: Option<&std::ffi::OsStr>) -> bool {
    build.is_none_or(|id| id == BUILD_ID)
}

/// Runs the keeper on the socket at fd 0 and exits the process: 0 once
/// the owner closed the lifeline and every tree it held is dead, 125 if
/// fd 0 is not a keeper socket or serving it failed, 122 (before reading
/// anything) if the owner is of another build of tether. What the
/// `tether-keeper` binary's `main` is; the library starts it, nobody
/// else should.
pub fn main() -> ! {
    if !serves(std::env::args_os().nth(2).as_deref()) {
        std::process::exit(OTHER_BUILD);
    }
    let code = match super::keeper::serve() {
        Ok(()) => 0,
        Err(_) => 125,
    };
    std::process::exit(code)
}

/// Lets a program that embeds tether be its own keeper.
///
/// Call it first thing in `main`. When the library starts this program as a
/// keeper (with the argument `__tether-keeper`), the call runs the keeper
/// and never returns; otherwise it records that this program can serve as
/// the keeper and returns at once, so no separate `tether-keeper` binary
/// needs to be installed.
///
/// ```
/// tether::keeper::run_if_requested();
/// // … the program as usual …
/// ```
pub fn run_if_requested() {
    if std::env::args_os().nth(1).is_some_and(|a| a == KEEPER_ARG) {
        main();
    }
    super::discovery::SELF_IS_KEEPER.store(true, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keeper_serves_its_own_build_only() {
        assert!(serves(Some(BUILD_ID.as_ref())));
        assert!(serves(None));
        assert!(!serves(Some("0123456789abcdef".as_ref())));
        assert!(!serves(Some("".as_ref())));
        assert_eq!(BUILD_ID.len(), 16, "{BUILD_ID}");
    }
}
