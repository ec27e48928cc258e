//! The keeper inside every program that links tether: a constructor
//! (`.init_array`) that runs before `main` and turns the program into its
//! own keeper when the library started it as one, so that a crate with
//! `process-tether` as its only dependency runs its first example without
//! a `tether-keeper` program installed and without a hook in `main`
//! (issue 39 item 2: the crate README's example failed with
//! `KeeperNotFound`).
//!
//! Why not a keeper binary embedded in the library and started from
//! memory (`memfd_create` + `execveat`)? A crate's `build.rs` cannot
//! build a binary of the crate it belongs to (the library is not built
//! yet), and building a second crate from inside a build script means a
//! nested `cargo` with its own target directory, network and toolchain
//! questions, on every target and in every offline or vendored build. The
//! constructor needs no build step at all: the keeper is the code already
//! linked into the program, so it is always of the same build (its wire
//! format matches), and it costs nothing until used — one comparison of
//! `argv[1]` at start-up.
//!
//! The program runs as a keeper only when started as
//! `<program> __tether-keeper <this build's id>` — the exact words the
//! library passes, which no user types by accident — and the constructor
//! then never returns (the keeper exits the process). Other constructors
//! of the program may run before it (their order is the linker's); `main`
//! and everything it would do never run.
//!
//! The program is started through `/proc/self/exe` (the very file that is
//! running, even after an upgrade replaced or removed its path), and only
//! when this code is part of the main program: linked into a shared
//! library that something else loaded (the Python extension), the main
//! program is someone else's and cannot be a keeper.

use std::ffi::{CStr, c_char, c_int};
use std::sync::atomic::{AtomicU8, Ordering};

use crate::contain::unix::keeper_entry::{BUILD_ID, KEEPER_ARG};

/// Runs before `main` (glibc passes `argc`, `argv` and `envp` to each
/// `.init_array` function; musl passes nothing, so there the command line
/// is read from `/proc/self/cmdline`).
extern "C" fn enter_keeper_if_started_as_one(
    argc: c_int,
    argv: *const *const c_char,
    _envp: *const *const c_char,
) {
    if started_as_keeper(argc, argv) {
        crate::contain::unix::keeper_entry::main();
    }
}

#[used]
#[unsafe(link_section = ".init_array")]
static CONSTRUCTOR: extern "C" fn(c_int, *const *const c_char, *const *const c_char) =
    enter_keeper_if_started_as_one;

/// Whether the command line is `<program> __tether-keeper <BUILD_ID>`.
fn started_as_keeper(argc: c_int, argv: *const *const c_char) -> bool {
    // SAFETY: the constructor's own `argc` and `argv`, from the C library.
    unsafe { started_as(KEEPER_ARG, argc, argv) }
}

/// Whether the command line is `<program> <marker> <BUILD_ID>`: what an
/// embedded entry's constructor asks (`tether::embedded_entry!`), with the
/// `argc` and `argv` it was given (ignored outside glibc, where the command
/// line is read from `/proc/self/cmdline`).
///
/// # Safety
/// On glibc, `argv` must be null or hold `argc` valid NUL-terminated
/// strings — what the C library passes an `.init_array` function.
pub unsafe fn started_as(marker: &str, argc: c_int, argv: *const *const c_char) -> bool {
    let want = |i: usize, arg: &[u8]| match i {
        1 => arg == marker.as_bytes(),
        _ => arg == BUILD_ID.as_bytes(),
    };
    if cfg!(target_env = "gnu") {
        if argc < 3 || argv.is_null() {
            return false;
        }
        (1..=2).all(|i| {
            // SAFETY: glibc passes the process's argv (the caller's
            // promise): `argc` valid, NUL-terminated strings.
            let arg = unsafe { *argv.add(i) };
            !arg.is_null() && want(i, unsafe { CStr::from_ptr(arg) }.to_bytes())
        })
    } else {
        // Only the first bytes are needed; a short read is a no.
        let Ok(line) = std::fs::read("/proc/self/cmdline") else {
            return false;
        };
        let args: Vec<&[u8]> = line.split(|&b| b == 0).collect();
        args.len() >= 3 && want(1, args[1]) && want(2, args[2])
    }
}

/// What Rust's own start-up does before `main`, for an entry that runs
/// before it: `SIGPIPE` ignored, so a write to a pipe whose reader is gone
/// is an `EPIPE` and not the process's death (the durable holder writes
/// to its sessions' stdin; a session that closed it killed an embedded
/// holder, and every session it held with it).
pub fn as_main() {
    // SAFETY: setting a disposition to SIG_IGN installs no handler code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

/// This program, to be started again as one of its embedded entries:
/// `/proc/self/exe` if this code is part of the main program (see the
/// module docs), else `None`.
pub fn self_program() -> Option<std::path::PathBuf> {
    if !in_main_program() {
        return None;
    }
    let exe = std::path::PathBuf::from("/proc/self/exe");
    exe.is_file().then_some(exe)
}

/// The program to start as this program's own keeper: `/proc/self/exe`,
/// if this code is part of the main program (see the module docs).
pub(crate) fn self_as_keeper() -> Option<std::path::PathBuf> {
    // Referenced here so that the linker keeps the constructor wherever
    // spawning is linked (an object of a library archive that nothing
    // references is left out, and its `.init_array` entry with it).
    std::hint::black_box(&CONSTRUCTOR);
    self_program()
}

/// Whether this code is in the main program, not a shared library loaded
/// into it: the first object `dl_iterate_phdr` reports is the main
/// program, and one of its loaded segments holds this function.
fn in_main_program() -> bool {
    static CACHED: AtomicU8 = AtomicU8::new(0);
    match CACHED.load(Ordering::Relaxed) {
        1 => return true,
        2 => return false,
        _ => {}
    }
    struct Search {
        address: usize,
        index: usize,
        found_in: Option<usize>,
    }
    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> c_int {
        // SAFETY: the C library passes a valid `dl_phdr_info` and our own
        // `data`, a `Search`, for the duration of the call.
        let (info, search) = unsafe { (&*info, &mut *(data as *mut Search)) };
        for i in 0..info.dlpi_phnum as usize {
            // SAFETY: `dlpi_phdr` holds `dlpi_phnum` program headers.
            let header = unsafe { &*info.dlpi_phdr.add(i) };
            if header.p_type != libc::PT_LOAD {
                continue;
            }
            let start = info.dlpi_addr as usize + header.p_vaddr as usize;
            if (start..start + header.p_memsz as usize).contains(&search.address) {
                search.found_in = Some(search.index);
                return 1;
            }
        }
        search.index += 1;
        0
    }
    let mut search = Search {
        address: in_main_program as *const () as usize,
        index: 0,
        found_in: None,
    };
    // SAFETY: `visit` matches the callback's signature and only reads what
    // it is given; `search` outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(visit), &mut search as *mut Search as *mut libc::c_void) };
    let main = search.found_in == Some(0);
    CACHED.store(if main { 1 } else { 2 }, Ordering::Relaxed);
    main
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_test_binary_is_its_own_main_program() {
        assert_eq!(
            super::self_as_keeper(),
            Some(std::path::PathBuf::from("/proc/self/exe"))
        );
    }
}
