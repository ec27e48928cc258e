//! The identity of an open file: volume serial number and file index, what
//! `(st_dev, st_ino)` is on Unix (the ledger checks with it that the store
//! it judged is the one still at the path).

use std::fs::File;
use std::io;
use std::os::windows::io::AsRawHandle;

use windows_sys::Win32::Storage::FileSystem::{
    BY_HANDLE_FILE_INFORMATION, GetFileInformationByHandle,
};

use super::win_error::WinError;

/// `(volume serial number, file index)` of `file`.
pub fn of(file: &File) -> io::Result<(u64, u64)> {
    let mut info = BY_HANDLE_FILE_INFORMATION::default();
    // SAFETY: a valid file handle and a writable out structure.
    if unsafe { GetFileInformationByHandle(file.as_raw_handle(), &mut info) } == 0 {
        return Err(WinError::last("GetFileInformationByHandle"));
    }
    let index = (u64::from(info.nFileIndexHigh) << 32) | u64::from(info.nFileIndexLow);
    Ok((u64::from(info.dwVolumeSerialNumber), index))
}
