//! Reading another process's environment, command line and working
//! directory from its PEB.
//!
//! Windows has no `/proc/<pid>/environ`. What it has is each process's
//! Process Environment Block, whose `ProcessParameters`
//! (`RTL_USER_PROCESS_PARAMETERS`) point at the live environment block and
//! command line. Reading them is what psutil (`psutil_get_proc_info` in
//! `_psutil_windows`) and Process Explorer do:
//! `NtQueryInformationProcess(ProcessBasicInformation)` gives the PEB's
//! address, then `ReadProcessMemory` follows the pointers. This is how
//! `tether ps`/`reap` find the `TETHER_SPAWN` tag of processes they hold no
//! handle to.
//!
//! Everything read here is attacker-shaped input (the target can scribble
//! on its own PEB): sizes are bounded, a short or failed read is an error,
//! never a guess, and the block is parsed without trusting its layout.
//! Needs `PROCESS_QUERY_INFORMATION | PROCESS_VM_READ` (`VirtualQueryEx`
//! refuses the limited query right: measured under Wine 8, as documented),
//! which a user has on their own processes of the same or lower integrity.
//!
//! Limits: the offsets are those of a 64-bit process read by a 64-bit
//! reader. A 32-bit (WOW64) process also has a 64-bit PEB, whose parameters
//! hold the environment it was *created* with; a change it made later to its
//! own environment lives in its 32-bit PEB, not read here. The spawn tag is
//! set at creation, so the tag scan still finds it.

use std::ffi::OsString;
use std::io;
use std::os::windows::io::{AsRawHandle, BorrowedHandle};

use windows_sys::Wdk::System::Threading::{NtQueryInformationProcess, ProcessBasicInformation};
use windows_sys::Win32::System::Diagnostics::Debug::ReadProcessMemory;
use windows_sys::Win32::System::Memory::{MEMORY_BASIC_INFORMATION, VirtualQueryEx};
use windows_sys::Win32::System::Threading::{
    PROCESS_BASIC_INFORMATION, PROCESS_QUERY_INFORMATION, PROCESS_SYNCHRONIZE, PROCESS_VM_READ,
};

use super::environment::Environment;
use super::win_error::WinError;

/// Access needed on the handle passed to this module's functions.
/// (`SYNCHRONIZE` too, so the same handle tells whether it has exited.)
pub const PEB_READ: u32 = PROCESS_QUERY_INFORMATION | PROCESS_VM_READ | PROCESS_SYNCHRONIZE;

/// Largest environment block read (the largest Windows allows a process to
/// pass is 32 767 characters per variable, with no total limit; real blocks
/// are a few KiB).
const MAX_ENVIRONMENT_BYTES: usize = 16 << 20;
/// Largest string read (a command line: Windows' limit is 32 767 UTF-16 units).
const MAX_STRING_BYTES: usize = 32_767 * 2;

// Offsets in the 64-bit structures (winternl.h and psutil's ntextapi.h).
#[cfg(target_pointer_width = "64")]
mod offsets {
    /// `PEB.Ldr`: set by the new process's own loader.
    pub const PEB_LDR: usize = 0x18;
    pub const PEB_PROCESS_PARAMETERS: usize = 0x20;
    /// `CurrentDirectory.DosPath` (a `CURDIR` starts with its path).
    pub const PARAMS_CURRENT_DIRECTORY: usize = 0x38;
    pub const PARAMS_COMMAND_LINE: usize = 0x70;
    pub const PARAMS_ENVIRONMENT: usize = 0x80;
    pub const PARAMS_ENVIRONMENT_SIZE: usize = 0x3F0;
    /// `UNICODE_STRING { Length: u16, MaximumLength: u16, Buffer: *u16 }`.
    pub const UNICODE_STRING_BUFFER: usize = 8;
}
#[cfg(target_pointer_width = "32")]
mod offsets {
    pub const PEB_LDR: usize = 0x0C;
    pub const PEB_PROCESS_PARAMETERS: usize = 0x10;
    pub const PARAMS_CURRENT_DIRECTORY: usize = 0x24;
    pub const PARAMS_COMMAND_LINE: usize = 0x40;
    pub const PARAMS_ENVIRONMENT: usize = 0x48;
    pub const PARAMS_ENVIRONMENT_SIZE: usize = 0x290;
    pub const UNICODE_STRING_BUFFER: usize = 4;
}

/// How many times a read that raced the target's own update of its
/// parameters is tried again.
const RACED_READS: usize = 3;

/// The environment block of `process`, parsed.
///
/// A starting process moves its parameters and environment once (Wine's
/// loader copies both into heap blocks of their own and swaps the
/// pointers; `SetEnvironmentVariableW` can reallocate the block later), so
/// a block read in the middle of a swap can be a stale or half-written
/// copy. The pointers are read again after the block: if either moved, the
/// read raced and is repeated, and a block that keeps moving is an error,
/// never a guess.
pub fn environment(process: BorrowedHandle<'_>) -> io::Result<Environment> {
    for _ in 0..RACED_READS {
        let params = process_parameters(process)?;
        let block = read_usize(process, params + offsets::PARAMS_ENVIRONMENT)?;
        let environment = environment_at(process, params, block)?;
        let params_now = process_parameters(process)?;
        let block_now = read_usize(process, params_now + offsets::PARAMS_ENVIRONMENT)?;
        if (params, block) == (params_now, block_now) {
            return Ok(environment);
        }
    }
    Err(corrupt("the environment kept moving while it was read"))
}

/// The environment block at `block`, whose parameters are at `params`.
fn environment_at(
    process: BorrowedHandle<'_>,
    params: usize,
    block: usize,
) -> io::Result<Environment> {
    if block == 0 {
        return Err(corrupt("the environment pointer is NULL"));
    }
    // EnvironmentSize (Vista+) is the block's size in bytes. Where it is
    // missing or absurd, read to the end of the memory region instead.
    let recorded = read_usize(process, params + offsets::PARAMS_ENVIRONMENT_SIZE)?;
    let region = region_remaining(process, block)?;
    let size = if recorded > 0 && recorded <= region {
        recorded
    } else {
        region
    }
    .min(MAX_ENVIRONMENT_BYTES);
    let bytes = read(process, block, size & !1)?;
    Ok(Environment::parse(&to_u16(&bytes)))
}

/// This process's own environment block, in place: from its first
/// character up to (not including) the NUL that ends the block — the very
/// memory [`environment`] reads from another process.
///
/// # Safety
/// The slice aliases memory the Win32 environment calls change and move:
/// hold the PEB lock (`RtlAcquirePebLock`) from before this call until the
/// slice is dropped, and call nothing in between that takes another path
/// to the environment.
pub unsafe fn own_environment_block<'a>() -> io::Result<&'a mut [u16]> {
    // SAFETY: the pseudo handle of the current process, valid always;
    // `BorrowedHandle` admits its -1 value.
    let me = unsafe {
        BorrowedHandle::borrow_raw(windows_sys::Win32::System::Threading::GetCurrentProcess())
    };
    let params = process_parameters(me)?;
    let block = read_usize(me, params + offsets::PARAMS_ENVIRONMENT)?;
    if block == 0 {
        return Err(corrupt("the environment pointer is NULL"));
    }
    // The block's own end (entries, then one more NUL), within the size
    // the parameters record and the memory region it lies in.
    let recorded = read_usize(me, params + offsets::PARAMS_ENVIRONMENT_SIZE)?;
    let region = region_remaining(me, block)?;
    let bound = if recorded > 0 && recorded <= region {
        recorded
    } else {
        region
    }
    .min(MAX_ENVIRONMENT_BYTES)
        / 2;
    // SAFETY: `bound` UTF-16 units from `block` lie in one committed
    // region of this process (checked above); the caller holds the PEB
    // lock, so nothing moves or frees the block while the slice lives.
    let all = unsafe { std::slice::from_raw_parts_mut(block as *mut u16, bound) };
    let mut end = 0;
    while end < all.len() && all[end] != 0 {
        end += all[end..]
            .iter()
            .position(|&c| c == 0)
            .unwrap_or(all.len() - end)
            + 1;
    }
    Ok(&mut all[..end.min(bound)])
}

/// The committed, read-write memory region of this process that contains
/// `address` (`VirtualQuery`), as UTF-16 units; empty when that region is
/// anything else. Where the environment block lives: under Wine the
/// process heap, which also keeps the copies Wine made while it built the
/// environment at start (seen here: the full initial block, 30,000 units
/// past the live one).
///
/// # Safety
/// The slice aliases this process's live memory: the caller must hold
/// every lock that serializes writers to it (the PEB lock and the heap's
/// lock) and hold no other reference into the region while it lives.
pub unsafe fn own_region_containing<'a>(address: usize) -> io::Result<&'a mut [u16]> {
    use windows_sys::Win32::System::Memory::{MEM_COMMIT, PAGE_READWRITE, VirtualQuery};
    let mut info = MEMORY_BASIC_INFORMATION::default();
    // SAFETY: `info` is writable for its size; the address is only looked
    // up, never dereferenced.
    let written = unsafe {
        VirtualQuery(
            address as *const core::ffi::c_void,
            &mut info,
            size_of::<MEMORY_BASIC_INFORMATION>(),
        )
    };
    if written == 0 {
        return Err(WinError::last("VirtualQuery"));
    }
    if info.State != MEM_COMMIT || info.Protect != PAGE_READWRITE {
        return Ok(&mut []);
    }
    // SAFETY: the whole region is committed read-write memory of this
    // process (checked above), page-aligned and so aligned for `u16`; the
    // caller serializes its writers (see `# Safety`).
    Ok(unsafe {
        std::slice::from_raw_parts_mut(info.BaseAddress.cast::<u16>(), info.RegionSize / 2)
    })
}

/// Whether `process` has finished starting: its loader has run
/// (`PEB.Ldr` is set by the new process's first thread, before any of its
/// own code). Until then its parameters may not be in place — under Wine
/// a new process builds them itself after `CreateProcessW` returned in its
/// creator, and an environment read then came back without the spawn tag
/// (seen in CI) — so what they hold says nothing yet.
pub fn has_started(process: BorrowedHandle<'_>) -> io::Result<bool> {
    let peb = peb_address(process)?;
    Ok(read_usize(process, peb + offsets::PEB_LDR)? != 0)
}

/// The command line of `process`, as its creator passed it.
pub fn command_line(process: BorrowedHandle<'_>) -> io::Result<OsString> {
    let params = process_parameters(process)?;
    unicode_string(
        process,
        params + offsets::PARAMS_COMMAND_LINE,
        "command line",
    )
}

/// The working directory of `process` now, as Windows spells it (a DOS
/// path ending in `\`). Read from the live parameters, so it follows
/// `SetCurrentDirectoryW`; the target can also write anything there, so
/// it is a claim, not proof.
pub fn current_directory(process: BorrowedHandle<'_>) -> io::Result<OsString> {
    let params = process_parameters(process)?;
    unicode_string(
        process,
        params + offsets::PARAMS_CURRENT_DIRECTORY,
        "working directory",
    )
}

/// The `UNICODE_STRING` at `string` in the target, bounded and checked.
fn unicode_string(process: BorrowedHandle<'_>, string: usize, what: &str) -> io::Result<OsString> {
    use std::os::windows::ffi::OsStringExt;
    let length = read(process, string, 2)?;
    let length = usize::from(u16::from_ne_bytes([length[0], length[1]]));
    if length > MAX_STRING_BYTES || length % 2 != 0 {
        return Err(corrupt(&format!("the {what} length is invalid")));
    }
    let buffer = read_usize(process, string + offsets::UNICODE_STRING_BUFFER)?;
    if length == 0 {
        return Ok(OsString::new());
    }
    if buffer == 0 {
        return Err(corrupt(&format!("the {what} pointer is NULL")));
    }
    let bytes = read(process, buffer, length)?;
    Ok(OsString::from_wide(&to_u16(&bytes)))
}

/// Address of the target's `RTL_USER_PROCESS_PARAMETERS`.
fn process_parameters(process: BorrowedHandle<'_>) -> io::Result<usize> {
    let peb = peb_address(process)?;
    let params = read_usize(process, peb + offsets::PEB_PROCESS_PARAMETERS)?;
    if params == 0 {
        return Err(corrupt("the PEB has no process parameters"));
    }
    Ok(params)
}

/// Address of the target's PEB.
fn peb_address(process: BorrowedHandle<'_>) -> io::Result<usize> {
    let mut info = PROCESS_BASIC_INFORMATION::default();
    // SAFETY: valid handle; `info` is the structure this class fills.
    let status = unsafe {
        NtQueryInformationProcess(
            process.as_raw_handle(),
            ProcessBasicInformation,
            (&mut info as *mut PROCESS_BASIC_INFORMATION).cast(),
            size_of::<PROCESS_BASIC_INFORMATION>() as u32,
            std::ptr::null_mut(),
        )
    };
    if status < 0 {
        return Err(WinError::from_ntstatus(
            "NtQueryInformationProcess(ProcessBasicInformation)",
            status,
        ));
    }
    let peb = info.PebBaseAddress as usize;
    if peb == 0 {
        // A process still being created, or a pico/minimal process.
        return Err(corrupt("the process has no PEB"));
    }
    Ok(peb)
}

/// Bytes from `address` to the end of its committed memory region.
fn region_remaining(process: BorrowedHandle<'_>, address: usize) -> io::Result<usize> {
    let mut info = MEMORY_BASIC_INFORMATION::default();
    // SAFETY: valid handle; `info` is writable for its size.
    let written = unsafe {
        VirtualQueryEx(
            process.as_raw_handle(),
            address as *const core::ffi::c_void,
            &mut info,
            size_of::<MEMORY_BASIC_INFORMATION>(),
        )
    };
    if written == 0 {
        return Err(WinError::last("VirtualQueryEx"));
    }
    let end = (info.BaseAddress as usize).saturating_add(info.RegionSize);
    Ok(end.saturating_sub(address))
}

fn read_usize(process: BorrowedHandle<'_>, address: usize) -> io::Result<usize> {
    let bytes = read(process, address, size_of::<usize>())?;
    Ok(usize::from_ne_bytes(
        bytes.try_into().expect("read returns len bytes"),
    ))
}

/// Exactly `len` bytes at `address` in the target, or an error.
fn read(process: BorrowedHandle<'_>, address: usize, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let mut got = 0usize;
    // SAFETY: valid handle with PROCESS_VM_READ; `buf` is writable for
    // `len` bytes. The target address is only read by the kernel, which
    // fails cleanly on unmapped memory.
    let ok = unsafe {
        ReadProcessMemory(
            process.as_raw_handle(),
            address as *const core::ffi::c_void,
            buf.as_mut_ptr().cast(),
            len,
            &mut got,
        )
    };
    if ok == 0 {
        return Err(WinError::last("ReadProcessMemory"));
    }
    if got != len {
        return Err(corrupt("short read of the target's memory"));
    }
    Ok(buf)
}

fn to_u16(bytes: &[u8]) -> Vec<u16> {
    bytes
        .chunks_exact(2)
        .map(|pair| u16::from_ne_bytes([pair[0], pair[1]]))
        .collect()
}

fn corrupt(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("reading another process's parameters: {what}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;
    use std::io::{BufRead, Read};
    use std::os::windows::io::AsHandle;
    use std::process::{Command, Stdio};

    /// The variable withheld by the child of
    /// `withheld_values_are_gone_from_the_peb_block`, and one kept.
    const WITHHELD: &str = "WITHHOLD_TEST_TOKEN";
    const KEPT: &str = "WITHHOLD_TEST_KEPT";

    /// The child: withholds [`WITHHELD`], says so, waits for stdin to close.
    #[test]
    #[ignore = "run as a child by withheld_values_are_gone_from_the_peb_block"]
    fn withhold_then_wait() {
        let withheld = crate::withhold_environment(|name| name == OsStr::new(WITHHELD)).unwrap();
        assert_eq!(withheld.names, [OsStr::new(WITHHELD)]);
        // The live value, and under Wine the copy in its start-up block.
        assert!(withheld.overwritten >= 1, "{withheld:?}");
        assert!(std::env::var_os(WITHHELD).is_none());
        println!("withheld");
        let _ = std::io::stdin().read(&mut [0u8; 1]);
    }

    // issue 16 item 1 on Windows: another process of the same user reads a
    // process's environment from its PEB; a withheld value must be gone
    // from the whole block, not only from what parses as the environment.
    #[test]
    fn withheld_values_are_gone_from_the_peb_block() {
        let secret = format!("secret-{}-value", std::process::id());
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "contain::os::peb::tests::withhold_then_wait",
                "--nocapture",
            ])
            .env(WITHHELD, &secret)
            .env(KEPT, "visible")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while !line.contains("withheld") {
            line.clear();
            let n = stdout.read_line(&mut line).unwrap();
            assert!(n > 0, "the child exited before it withheld");
        }
        let process = super::super::process::open(child.id(), PEB_READ).unwrap();
        let env = environment(process.as_handle()).unwrap();
        // The whole region the block lies in, past its end too.
        let params = process_parameters(process.as_handle()).unwrap();
        let block = read_usize(process.as_handle(), params + offsets::PARAMS_ENVIRONMENT).unwrap();
        let region = region_remaining(process.as_handle(), block)
            .unwrap()
            .min(MAX_ENVIRONMENT_BYTES);
        let raw = to_u16(&read(process.as_handle(), block, region & !1).unwrap());
        drop(child.stdin.take());
        assert!(child.wait().unwrap().success());
        assert_eq!(env.get(OsStr::new(KEPT)), Some("visible".into()));
        assert!(env.get(OsStr::new(WITHHELD)).is_none(), "{env:?}");
        let needle: Vec<u16> = secret.encode_utf16().collect();
        let at = raw
            .windows(needle.len())
            .position(|w| w == needle.as_slice());
        let live = raw
            .windows(2)
            .position(|w| w == [0, 0])
            .unwrap_or(raw.len());
        assert!(
            at.is_none(),
            "the value is still in the PEB's environment region: at {at:?} of {} units, \
             the live block is {live} units; around it: {:?}",
            raw.len(),
            at.map(|i| String::from_utf16_lossy(
                &raw[i.saturating_sub(80)..(i + 80).min(raw.len())]
            ))
        );
    }

    #[test]
    fn reads_this_process_like_any_other() {
        let me = super::super::process::open(std::process::id(), PEB_READ).unwrap();
        let env = environment(me.as_handle()).unwrap();
        let (name, value) = std::env::vars_os().next().unwrap();
        assert_eq!(env.get(&name), Some(value));
        let line = command_line(me.as_handle()).unwrap();
        let exe = std::env::current_exe().unwrap();
        let stem = exe.file_stem().unwrap().to_string_lossy();
        assert!(
            line.to_string_lossy().contains(&*stem),
            "{line:?} does not name {stem}"
        );
        assert!(env.get(OsStr::new("NO_SUCH_VARIABLE_HERE")).is_none());
        assert!(has_started(me.as_handle()).unwrap());
        let cwd = current_directory(me.as_handle()).unwrap();
        let here = std::env::current_dir().unwrap();
        let cwd = std::path::PathBuf::from(cwd);
        assert_eq!(
            cwd.components().collect::<Vec<_>>(),
            here.components().collect::<Vec<_>>(),
            "the PEB's working directory is not this process's"
        );
    }
}
