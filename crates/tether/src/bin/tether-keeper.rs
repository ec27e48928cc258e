//! The standalone keeper program. Programs embedding the tether library find
//! it beside themselves or on `PATH` (or set `TETHER_KEEPER`); the `tether`
//! CLI is its own keeper and does not need it.

fn main() {
    tether::keeper::main();
}
