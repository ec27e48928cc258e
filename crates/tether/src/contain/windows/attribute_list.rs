//! `PROC_THREAD_ATTRIBUTE_LIST`: the extra facts `CreateProcessW` takes
//! through `STARTUPINFOEXW` (job list, handle list, pseudoconsole).
//!
//! The list stores *pointers* to the values, which must stay valid until
//! the process is created; the `'a` lifetime makes the borrow checker hold
//! them for as long as the list lives.

use std::io;
use std::marker::PhantomData;

use windows_sys::Win32::Foundation::HANDLE;
use windows_sys::Win32::System::Console::HPCON;
use windows_sys::Win32::System::Threading::{
    DeleteProcThreadAttributeList, InitializeProcThreadAttributeList, LPPROC_THREAD_ATTRIBUTE_LIST,
    PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE, UpdateProcThreadAttribute,
};

use super::win_error::WinError;

/// An initialized attribute list with room for a fixed number of entries.
pub struct AttributeList<'a> {
    /// The opaque list; `usize` elements keep it pointer-aligned. Its heap
    /// allocation never moves, so the pointer stays valid when `self` moves.
    buf: Vec<usize>,
    values: PhantomData<&'a [HANDLE]>,
}

impl<'a> AttributeList<'a> {
    /// A list with room for `count` attributes.
    pub fn new(count: u32) -> io::Result<AttributeList<'a>> {
        let mut size = 0usize;
        // SAFETY: the sizing call takes a NULL list and writes the size; it
        // "fails" with ERROR_INSUFFICIENT_BUFFER by design.
        unsafe { InitializeProcThreadAttributeList(std::ptr::null_mut(), count, 0, &mut size) };
        if size == 0 {
            return Err(WinError::last("InitializeProcThreadAttributeList(size)"));
        }
        let mut buf = vec![0usize; size.div_ceil(size_of::<usize>())];
        // SAFETY: `buf` is at least `size` bytes and pointer-aligned.
        let ok = unsafe {
            InitializeProcThreadAttributeList(buf.as_mut_ptr().cast(), count, 0, &mut size)
        };
        if ok == 0 {
            return Err(WinError::last("InitializeProcThreadAttributeList"));
        }
        Ok(AttributeList {
            buf,
            values: PhantomData,
        })
    }

    /// Sets an attribute whose value is an array of handles
    /// (`PROC_THREAD_ATTRIBUTE_JOB_LIST`, `PROC_THREAD_ATTRIBUTE_HANDLE_LIST`).
    /// `call` names the attribute in the error.
    pub fn set_handles(
        &mut self,
        attribute: u32,
        handles: &'a [HANDLE],
        call: &'static str,
    ) -> io::Result<()> {
        // SAFETY: the list is initialized; `handles` outlives the list ('a)
        // and is `size_of_val(handles)` bytes.
        let ok = unsafe {
            UpdateProcThreadAttribute(
                self.as_ptr(),
                0,
                attribute as usize,
                handles.as_ptr().cast(),
                size_of_val(handles),
                std::ptr::null_mut(),
                std::ptr::null(),
            )
        };
        if ok == 0 {
            return Err(WinError::last(call));
        }
        Ok(())
    }

    /// Attaches the child to a pseudoconsole. Unlike the handle lists, the
    /// value here is the `HPCON` itself, not a pointer to it (as the ConPTY
    /// documentation's sample passes it).
    pub fn set_pseudoconsole(&mut self, console: HPCON) -> io::Result<()> {
        // SAFETY: the list is initialized; the value is passed by value in
        // the pointer argument, `size_of::<HPCON>()` as documented.
        let ok = unsafe {
            UpdateProcThreadAttribute(
                self.as_ptr(),
                0,
                PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE as usize,
                console as *const core::ffi::c_void,
                size_of::<HPCON>(),
                std::ptr::null_mut(),
                std::ptr::null(),
            )
        };
        if ok == 0 {
            return Err(WinError::last(
                "UpdateProcThreadAttribute(PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE)",
            ));
        }
        Ok(())
    }

    /// The list, for `STARTUPINFOEXW::lpAttributeList`.
    pub fn as_ptr(&mut self) -> LPPROC_THREAD_ATTRIBUTE_LIST {
        self.buf.as_mut_ptr().cast()
    }
}

impl Drop for AttributeList<'_> {
    fn drop(&mut self) {
        // SAFETY: the list was initialized in `new` and is deleted once.
        unsafe { DeleteProcThreadAttributeList(self.as_ptr()) };
    }
}
