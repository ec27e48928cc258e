//! Knowing when we run under Wine, to skip tests of what Wine lacks.
//!
//! Wine exports `wine_get_version` from its ntdll; Windows does not. Tests
//! of behaviour Wine 8 does not implement (ConPTY output,
//! `ResizePseudoConsole`) call [`version`] and skip, naming the gap, so
//! that on real Windows they run.

use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleW, GetProcAddress};

/// Wine's version (`"8.0"`), or `None` on Windows.
pub fn version() -> Option<String> {
    let ntdll: Vec<u16> = "ntdll.dll\0".encode_utf16().collect();
    // SAFETY: ntdll is loaded in every process; the name is NUL-terminated.
    let module = unsafe { GetModuleHandleW(ntdll.as_ptr()) };
    if module.is_null() {
        return None;
    }
    // SAFETY: valid module and NUL-terminated ASCII name.
    let proc = unsafe { GetProcAddress(module, c"wine_get_version".as_ptr().cast()) }?;
    // SAFETY: Wine declares it `const char * CDECL wine_get_version(void)`
    // (cdecl and the system ABI are one on x86_64), returning a static
    // NUL-terminated string.
    let version = unsafe {
        let get: extern "C" fn() -> *const std::ffi::c_char = std::mem::transmute(proc);
        std::ffi::CStr::from_ptr(get())
    };
    Some(version.to_string_lossy().into_owned())
}
