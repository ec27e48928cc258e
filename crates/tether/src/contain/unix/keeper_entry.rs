//! Running the keeper: as the standalone `tether-keeper` program, or inside
//! a program that embeds tether and calls [`run_if_requested`].

use std::sync::atomic::Ordering;

/// The argument that makes a program that embeds tether act as its keeper.
pub const KEEPER_ARG: &str = "__tether-keeper";

/// Runs the keeper on the socket at fd 0 and exits the process: 0 once
/// the owner closed the lifeline and every tree it held is dead, 125 if
/// fd 0 is not a keeper socket or serving it failed. What the
/// `tether-keeper` binary's `main` is; the library starts it, nobody
/// else should.
pub fn main() -> ! {
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
