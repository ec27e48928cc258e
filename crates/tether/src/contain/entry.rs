//! Entry points embedded in a program that links tether, beside the
//! keeper's: a crate built on this one (the durable sessions' holder,
//! `process-tether-durable`) declares one with [`embedded_entry!`], and a
//! program that links that crate becomes that entry — instead of running
//! its `main` — when started as `<program> <marker> <build id>`.
//!
//! Linux only, as the keeper's own (`linux/embedded.rs` says why a
//! constructor and not a binary carried in the library): the constructor
//! is an `.init_array` entry, and the program is started again through
//! `/proc/self/exe`, only when this code is part of the main program (in a
//! shared library loaded by something else — the Python extension — the
//! main program is someone else's). Elsewhere [`self_program`] is `None`
//! and the entry is never reached: the caller finds another program.
//!
//! For tether's own crates; not a stable API.

/// This build of the library; the second word of an entry's command line,
/// so that only the exact words the library passes trigger it.
pub const BUILD_ID: &str = env!("TETHER_BUILD_ID");

#[cfg(target_os = "linux")]
pub use super::os::embedded::{as_main, self_program, started_as};

/// This program, to be started again as one of its embedded entries:
/// `None` here (no constructors outside Linux).
#[cfg(not(target_os = "linux"))]
pub fn self_program() -> Option<std::path::PathBuf> {
    None
}

/// Declares `fn $program() -> Option<PathBuf>`: the program to start as
/// `<program> $marker <BUILD_ID>` so that it runs `$entry` (a `fn() -> !`)
/// before — and instead of — its `main`; `None` where this program cannot
/// be (not Linux; inside a shared library). Calling `$program` is also
/// what keeps the constructor linked (an object of a library archive
/// that nothing references is left out, its `.init_array` entry with it).
///
/// `$marker` must be a word nobody types by accident (`__tether-…`); the
/// entry runs only when it and [`BUILD_ID`] are exactly the program's
/// first two arguments. Other constructors of the program may run before
/// it; `main` never does.
#[doc(hidden)]
#[macro_export]
macro_rules! embedded_entry {
    ($(#[$attr:meta])* $vis:vis fn $program:ident($marker:expr) => $entry:path) => {
        $(#[$attr])*
        $vis fn $program() -> ::core::option::Option<::std::path::PathBuf> {
            #[cfg(target_os = "linux")]
            {
                extern "C" fn enter(
                    argc: ::core::ffi::c_int,
                    argv: *const *const ::core::ffi::c_char,
                    _envp: *const *const ::core::ffi::c_char,
                ) {
                    // SAFETY: the `argc` and `argv` the C library
                    // passes every `.init_array` function.
                    if unsafe { $crate::__embedded::started_as($marker, argc, argv) } {
                        // What Rust's start-up would have done by `main`.
                        $crate::__embedded::as_main();
                        $entry()
                    }
                }
                // glibc passes `argc`, `argv` and `envp` to each
                // `.init_array` function; musl passes nothing, and
                // `started_as` reads `/proc/self/cmdline` there.
                #[used]
                #[unsafe(link_section = ".init_array")]
                static CONSTRUCTOR: extern "C" fn(
                    ::core::ffi::c_int,
                    *const *const ::core::ffi::c_char,
                    *const *const ::core::ffi::c_char,
                ) = enter;
                ::std::hint::black_box(&CONSTRUCTOR);
            }
            #[cfg(not(target_os = "linux"))]
            let _: fn() -> ! = $entry;
            $crate::__embedded::self_program()
        }
    };
}
