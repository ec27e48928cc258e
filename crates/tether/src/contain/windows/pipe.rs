//! Anonymous pipes for a child's stdio and a pseudoconsole's streams.

use std::fs::File;
use std::io;

use windows_sys::Win32::Foundation::HANDLE;
use windows_sys::Win32::System::Pipes::CreatePipe;

use super::handle::owned;
use super::win_error::WinError;

/// A new anonymous pipe, `(read end, write end)`. Both ends are
/// non-inheritable; `spawn` duplicates the child's end as inheritable for
/// exactly its own `CreateProcessW` call. Synchronous (not overlapped), as a
/// pseudoconsole requires.
pub fn pipe() -> io::Result<(File, File)> {
    let mut read: HANDLE = std::ptr::null_mut();
    let mut write: HANDLE = std::ptr::null_mut();
    // SAFETY: valid out pointers; NULL attributes (non-inheritable); 0 is
    // the default buffer size.
    if unsafe { CreatePipe(&mut read, &mut write, std::ptr::null(), 0) } == 0 {
        return Err(WinError::last("CreatePipe"));
    }
    // SAFETY: CreatePipe just made both handles for us alone.
    let (read, write) = unsafe { (owned(read, "CreatePipe")?, owned(write, "CreatePipe")?) };
    Ok((File::from(read), File::from(write)))
}
