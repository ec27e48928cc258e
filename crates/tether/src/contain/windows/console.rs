//! This process's own console, for a PTY command attached to it (`tether
//! run --pty`): raw VT mode that is always undone, the window size, its
//! changes, and the copy loop between the console and the command's
//! pseudoconsole.
//!
//! Raw mode on a Windows console is two modes: on stdin, keys arrive as VT
//! input (`ENABLE_VIRTUAL_TERMINAL_INPUT`: arrows as `ESC [ A`, Ctrl-C as
//! the byte 3 — not a `CTRL_C_EVENT` for tether, since
//! `ENABLE_PROCESSED_INPUT` is off — no line editing, no echo); on stdout,
//! the command's VT output is interpreted
//! (`ENABLE_VIRTUAL_TERMINAL_PROCESSING`, and `DISABLE_NEWLINE_AUTO_RETURN`
//! so a line feed is only a line feed, as the program meant). The command's
//! own conhost then does what a terminal does with those keys: Ctrl-C
//! becomes its `CTRL_C_EVENT`. Window-size changes arrive among the input
//! records (`WINDOW_BUFFER_SIZE_EVENT`, with `ENABLE_WINDOW_INPUT`), so
//! there is no signal to watch: [`WinchWatcher`] holds nothing here.

use std::io::{self, Read, Write};
use std::os::windows::io::AsRawHandle;
use std::sync::Arc;

use windows_sys::Win32::Foundation::{HANDLE, INVALID_HANDLE_VALUE, WAIT_OBJECT_0};
use windows_sys::Win32::System::Console::{
    CONSOLE_MODE, CONSOLE_SCREEN_BUFFER_INFO, DISABLE_NEWLINE_AUTO_RETURN, ENABLE_ECHO_INPUT,
    ENABLE_LINE_INPUT, ENABLE_PROCESSED_INPUT, ENABLE_PROCESSED_OUTPUT,
    ENABLE_VIRTUAL_TERMINAL_INPUT, ENABLE_VIRTUAL_TERMINAL_PROCESSING, ENABLE_WINDOW_INPUT,
    GetConsoleMode, GetConsoleScreenBufferInfo, GetStdHandle, INPUT_RECORD, KEY_EVENT,
    ReadConsoleInputW, STD_ERROR_HANDLE, STD_HANDLE, STD_INPUT_HANDLE, STD_OUTPUT_HANDLE,
    SetConsoleMode, WINDOW_BUFFER_SIZE_EVENT,
};
use windows_sys::Win32::System::Threading::{INFINITE, SetEvent, WaitForMultipleObjects};

use super::async_pipe::event;
use super::pty::Pty;
use super::win_error::WinError;
use crate::terminal::PtySize;

/// Window-size changes of this console: they come as input records, which
/// [`Console::pass_through`] reads anyway, so there is nothing to install.
#[derive(Debug)]
pub(crate) struct WinchWatcher(());

impl WinchWatcher {
    /// Nothing to block or start on Windows.
    pub(crate) fn install() -> io::Result<WinchWatcher> {
        Ok(WinchWatcher(()))
    }
}

/// A standard handle of this process, if it has one.
fn std_handle(which: STD_HANDLE) -> Option<HANDLE> {
    // SAFETY: plain call; the handle stays owned by the process's std slot.
    let handle = unsafe { GetStdHandle(which) };
    (!handle.is_null() && handle != INVALID_HANDLE_VALUE).then_some(handle)
}

/// The console mode of `handle`, or `None` if it is not a console.
fn mode_of(handle: HANDLE) -> Option<CONSOLE_MODE> {
    let mut mode = 0;
    // SAFETY: a std handle of this process and a valid out pointer; a
    // handle that is not a console only makes the call fail.
    (unsafe { GetConsoleMode(handle, &mut mode) } != 0).then_some(mode)
}

fn set_mode(handle: HANDLE, mode: CONSOLE_MODE, what: &'static str) -> io::Result<()> {
    // SAFETY: a console handle of this process (its mode was just read).
    if unsafe { SetConsoleMode(handle, mode) } == 0 {
        return Err(WinError::last(what));
    }
    Ok(())
}

/// This process's console in raw VT mode for as long as the value lives.
/// Dropping it restores the modes it found — on a normal return, an error,
/// a panic's unwinding alike.
#[derive(Debug)]
pub(crate) struct Console {
    /// stdin's console handle and the mode found on it.
    input: Option<(HANDLE, CONSOLE_MODE)>,
    /// stdout's console handle and the mode found on it.
    output: Option<(HANDLE, CONSOLE_MODE)>,
}

impl Console {
    /// Raw VT mode on stdin and stdout where they are consoles; nothing
    /// for those that are not (a pipe, a file).
    ///
    /// # Errors
    /// A console that refuses VT mode (before Windows 10 1809); then no
    /// mode is left changed.
    pub(crate) fn raw() -> io::Result<Console> {
        let found = |which| std_handle(which).and_then(|h| mode_of(h).map(|m| (h, m)));
        // Made first, so that whatever is changed below is undone on an
        // error too.
        let console = Console {
            input: found(STD_INPUT_HANDLE),
            output: found(STD_OUTPUT_HANDLE),
        };
        if let Some((handle, mode)) = console.input {
            let raw = (mode | ENABLE_VIRTUAL_TERMINAL_INPUT | ENABLE_WINDOW_INPUT)
                & !(ENABLE_LINE_INPUT | ENABLE_ECHO_INPUT | ENABLE_PROCESSED_INPUT);
            set_mode(handle, raw, "SetConsoleMode(stdin, VT input)")?;
        }
        if let Some((handle, mode)) = console.output {
            let vt = mode
                | ENABLE_PROCESSED_OUTPUT
                | ENABLE_VIRTUAL_TERMINAL_PROCESSING
                | DISABLE_NEWLINE_AUTO_RETURN;
            set_mode(handle, vt, "SetConsoleMode(stdout, VT processing)")?;
        }
        Ok(console)
    }

    /// The size of this process's console window (stdout's, else
    /// stderr's), or `None` if neither is a console.
    pub(crate) fn size() -> Option<PtySize> {
        [STD_OUTPUT_HANDLE, STD_ERROR_HANDLE]
            .into_iter()
            .filter_map(std_handle)
            .find_map(window_size)
    }

    /// Copies this process's stdin to `pty` and `pty` to stdout until the
    /// pseudoconsole's output reaches end of file (the job emptied and the
    /// pseudoconsole was closed), and passes window-size changes on. At the
    /// end of a stdin that is not a console, the command gets `^Z` Enter
    /// once (a pipe fed into a PTY command ends as a closed pipe would).
    /// An input error (the console is gone) returns at once, as on Unix;
    /// the output thread then finishes on its own at the output's end.
    pub(crate) fn pass_through(
        &self,
        pty: &Pty,
        _winch: &WinchWatcher,
        _events: Option<super::EventSource>,
        _on_events: impl FnMut() -> bool,
    ) -> io::Result<()> {
        // Set by the output thread at the end of the output; shared, as
        // the thread outlives this call when the input side fails first.
        let done = Arc::new(event()?);
        let reader = pty.try_clone()?;
        let finished = Arc::clone(&done);
        let copier = std::thread::Builder::new()
            .name("tether-pty-out".into())
            .spawn(move || {
                let copied = copy_out(&reader);
                // SAFETY: a valid event handle, kept alive by this Arc.
                unsafe { SetEvent(finished.as_raw_handle()) };
                copied
            })?;
        match self.input {
            Some((stdin, _)) => copy_console_in(stdin, done.as_raw_handle(), pty)?,
            None => copy_stream_in(pty)?,
        }
        copier
            .join()
            .map_err(|_| io::Error::other("the PTY output thread panicked"))?
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        for (handle, mode) in [self.input, self.output].into_iter().flatten() {
            // SAFETY: a console handle of this process and the mode it had.
            unsafe { SetConsoleMode(handle, mode) };
        }
    }
}

/// The window (not the scroll-back buffer) of the console screen buffer
/// `handle`, or `None` if it is not one.
fn window_size(handle: HANDLE) -> Option<PtySize> {
    let mut info = CONSOLE_SCREEN_BUFFER_INFO::default();
    // SAFETY: a std handle of this process and a valid out pointer.
    if unsafe { GetConsoleScreenBufferInfo(handle, &mut info) } == 0 {
        return None;
    }
    let w = info.srWindow;
    let cols = (i32::from(w.Right) - i32::from(w.Left) + 1).clamp(0, i32::from(u16::MAX));
    let rows = (i32::from(w.Bottom) - i32::from(w.Top) + 1).clamp(0, i32::from(u16::MAX));
    Some(PtySize::clamped(rows as u16, cols as u16))
}

/// The pseudoconsole's output to stdout, until its end of file. std's
/// stdout writes a console in UTF-16 (`WriteConsoleW`), and conhost's
/// output is UTF-8, so characters arrive whole whatever the code page.
fn copy_out(pty: &Pty) -> io::Result<()> {
    let mut buf = vec![0u8; 16 << 10];
    let stdout = io::stdout();
    loop {
        let n = pty.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        let mut out = stdout.lock();
        out.write_all(&buf[..n])?;
        out.flush()?;
    }
}

/// Console input records to the pseudoconsole until `done` is set: key
/// presses as the UTF-8 of their characters (VT input mode makes every
/// special key a character sequence), window-size changes as resizes.
fn copy_console_in(stdin: HANDLE, done: HANDLE, pty: &Pty) -> io::Result<()> {
    let mut records = [INPUT_RECORD::default(); 64];
    let mut typed = Typed::default();
    loop {
        let handles = [done, stdin];
        // SAFETY: two valid waitable handles (an event; console input is
        // signalled while it holds records).
        let which = unsafe { WaitForMultipleObjects(2, handles.as_ptr(), 0, INFINITE) };
        if which == WAIT_OBJECT_0 {
            return Ok(());
        }
        if which != WAIT_OBJECT_0 + 1 {
            return Err(WinError::last("WaitForMultipleObjects(console input)"));
        }
        let mut got = 0u32;
        // SAFETY: valid console input handle, buffer of `records.len()`.
        let ok = unsafe {
            ReadConsoleInputW(stdin, records.as_mut_ptr(), records.len() as u32, &mut got)
        };
        if ok == 0 {
            return Err(WinError::last("ReadConsoleInputW"));
        }
        let mut resized = false;
        for record in &records[..got as usize] {
            match u32::from(record.EventType) {
                KEY_EVENT => {
                    // SAFETY: the union member EventType names.
                    let key = unsafe { record.Event.KeyEvent };
                    // SAFETY: UnicodeChar is the member ReadConsoleInputW fills.
                    let unit = unsafe { key.uChar.UnicodeChar };
                    if key.bKeyDown != 0 && unit != 0 {
                        for _ in 0..key.wRepeatCount.max(1) {
                            typed.push(unit);
                        }
                    }
                }
                WINDOW_BUFFER_SIZE_EVENT => resized = true,
                _ => {}
            }
        }
        if resized && let Some(size) = Console::size() {
            // Under Wine 8 this fails (E_NOTIMPL); the command keeps its size.
            let _ = pty.resize(size);
        }
        let bytes = typed.take();
        if !bytes.is_empty() && write_all(pty, &bytes).is_err() {
            // Nobody reads the pseudoconsole any more: its output's end is
            // next, and ends the pass-through.
            return Ok(());
        }
    }
}

/// A stdin that is not a console (a pipe, a file, NUL) to the
/// pseudoconsole, then `^Z` Enter at its end, on a thread of its own that
/// is left behind if stdin never ends (it holds only the input pipe).
fn copy_stream_in(pty: &Pty) -> io::Result<()> {
    let input = pty.input().try_clone()?;
    let eof = pty.eof_input();
    std::thread::Builder::new()
        .name("tether-pty-in".into())
        .spawn(move || {
            let mut input = input;
            let mut buf = vec![0u8; 16 << 10];
            let mut stdin = io::stdin().lock();
            loop {
                match stdin.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if input.write_all(&buf[..n]).is_err() {
                            return;
                        }
                    }
                }
            }
            let _ = input.write_all(&eof);
        })?;
    Ok(())
}

fn write_all(pty: &Pty, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        let n = pty.write(bytes)?;
        bytes = &bytes[n..];
    }
    Ok(())
}

/// UTF-16 code units from key events, to UTF-8 for the pseudoconsole. A
/// character outside the BMP comes as two key events (a surrogate pair):
/// a high surrogate waits for its partner.
#[derive(Default)]
struct Typed {
    units: Vec<u16>,
}

impl Typed {
    fn push(&mut self, unit: u16) {
        self.units.push(unit);
    }

    /// The UTF-8 of every complete character so far (an unpaired
    /// surrogate becomes U+FFFD); a trailing high surrogate is kept.
    fn take(&mut self) -> Vec<u8> {
        let keep = match self.units.last() {
            Some(&u) if (0xD800..0xDC00).contains(&u) => 1,
            _ => 0,
        };
        let whole: Vec<u16> = self.units.drain(..self.units.len() - keep).collect();
        char::decode_utf16(whole)
            .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect::<String>()
            .into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::Typed;

    #[test]
    fn key_characters_become_utf8_and_surrogate_pairs_wait_for_their_partner() {
        let mut typed = Typed::default();
        for u in "aé\u{1b}[A".encode_utf16() {
            typed.push(u);
        }
        assert_eq!(typed.take(), "aé\u{1b}[A".as_bytes());
        let pair: Vec<u16> = "😀".encode_utf16().collect();
        typed.push(pair[0]);
        assert!(typed.take().is_empty(), "half a pair is held back");
        typed.push(pair[1]);
        assert_eq!(typed.take(), "😀".as_bytes());
        typed.push(0xDC00); // a lone low surrogate
        assert_eq!(typed.take(), "\u{FFFD}".as_bytes());
    }
}
