//! UTF-16 strings for Win32 `W` calls.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::windows::ffi::{OsStrExt, OsStringExt};

/// `s` as a NUL-terminated UTF-16 string. An interior NUL would silently
/// cut the string short at the Win32 boundary, so it is an error instead.
pub fn to_wide(s: &OsStr) -> io::Result<Vec<u16>> {
    let mut wide: Vec<u16> = s.encode_wide().collect();
    if wide.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{s:?} contains a NUL character"),
        ));
    }
    wide.push(0);
    Ok(wide)
}

/// UTF-16 up to (not including) the first NUL, or all of it.
pub fn from_wide(wide: &[u16]) -> OsString {
    let end = wide.iter().position(|&c| c == 0).unwrap_or(wide.len());
    OsString::from_wide(&wide[..end])
}
