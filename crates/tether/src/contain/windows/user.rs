//! Which user a process runs as: the SID in its token.
//!
//! `reap` signals only processes of the user running it (the Unix side
//! checks the real uid). On Windows the equivalent is the token's user SID;
//! an elevated process of the same user has the same SID, a service or
//! another user's process does not.

use std::fmt;
use std::io;
use std::os::windows::io::{AsRawHandle, BorrowedHandle};

use windows_sys::Win32::Foundation::HANDLE;
use windows_sys::Win32::Security::{
    GetLengthSid, GetTokenInformation, TOKEN_QUERY, TOKEN_USER, TokenUser,
};
use windows_sys::Win32::System::Threading::{GetCurrentProcess, OpenProcessToken};

use super::handle::owned;
use super::win_error::WinError;

/// A security identifier in its binary form (comparable byte for byte:
/// the encoding is canonical).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Sid(Vec<u8>);

impl Sid {
    /// The user `process` runs as (needs `PROCESS_QUERY_LIMITED_INFORMATION`).
    pub fn of_process(process: BorrowedHandle<'_>) -> io::Result<Sid> {
        user_of(process.as_raw_handle())
    }

    /// The SID's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The user this process runs as.
    pub fn current() -> io::Result<Sid> {
        // SAFETY: the pseudo handle needs no closing and is always valid.
        user_of(unsafe { GetCurrentProcess() })
    }
}

fn user_of(process: HANDLE) -> io::Result<Sid> {
    let mut token: HANDLE = std::ptr::null_mut();
    // SAFETY: valid process handle, valid out pointer.
    if unsafe { OpenProcessToken(process, TOKEN_QUERY, &mut token) } == 0 {
        return Err(WinError::last("OpenProcessToken"));
    }
    // SAFETY: OpenProcessToken just made the handle for us alone.
    let token = unsafe { owned(token, "OpenProcessToken") }?;
    // TOKEN_USER plus the SID it points into; 256 bytes holds any SID
    // (at most 68 bytes) with room to spare, and the loop covers the rest.
    let mut buf = vec![0usize; 256 / size_of::<usize>()];
    loop {
        let bytes = (buf.len() * size_of::<usize>()) as u32;
        let mut needed = 0u32;
        // SAFETY: valid token with TOKEN_QUERY; `buf` is writable and
        // aligned for TOKEN_USER.
        let ok = unsafe {
            GetTokenInformation(
                token.as_raw_handle(),
                TokenUser,
                buf.as_mut_ptr().cast(),
                bytes,
                &mut needed,
            )
        };
        if ok == 0 {
            let err = WinError::last("GetTokenInformation(TokenUser)");
            if needed > bytes {
                buf.resize((needed as usize).div_ceil(size_of::<usize>()), 0);
                continue;
            }
            return Err(err);
        }
        // SAFETY: the call filled a TOKEN_USER whose SID pointer points into
        // `buf`; GetLengthSid reads only that valid SID.
        let sid = unsafe {
            let user = &*buf.as_ptr().cast::<TOKEN_USER>();
            let psid = user.User.Sid;
            let len = GetLengthSid(psid) as usize;
            std::slice::from_raw_parts(psid.cast::<u8>(), len).to_vec()
        };
        return Ok(Sid(sid));
    }
}

impl fmt::Display for Sid {
    /// The string form, `S-1-5-21-…`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        if b.len() < 8 {
            return f.write_str("S-?");
        }
        let authority = b[2..8]
            .iter()
            .fold(0u64, |acc, &x| (acc << 8) | u64::from(x));
        write!(f, "S-{}-{authority}", b[0])?;
        for chunk in b[8..].chunks_exact(4).take(usize::from(b[1])) {
            write!(
                f,
                "-{}",
                u32::from_le_bytes(chunk.try_into().expect("4 bytes"))
            )?;
        }
        Ok(())
    }
}

impl fmt::Debug for Sid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::windows::io::AsHandle;

    #[test]
    fn this_process_runs_as_the_current_user() {
        let me = Sid::current().unwrap();
        assert!(me.to_string().starts_with("S-1-"), "{me}");
        let handle =
            super::super::process::open(std::process::id(), super::super::process::QUERY).unwrap();
        assert_eq!(Sid::of_process(handle.as_handle()).unwrap(), me);
    }
}
