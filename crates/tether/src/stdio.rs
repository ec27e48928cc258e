//! What a child's standard streams are connected to, and the owner's ends
//! of piped ones.

use std::fs::File;
use std::io::{self, Read, Write};

use crate::contain::{ChildIo, OwnedIo};

/// What a child's standard stream is connected to.
#[derive(Debug)]
pub enum Stdio {
    /// The owner's own stream.
    Inherit,
    /// The null device (`/dev/null`, `NUL`).
    Null,
    /// A new pipe; the owner's end is on the [`Child`](crate::Child).
    Piped,
    /// An OS handle the caller gave (`From<File>`, or on Unix
    /// `From<OwnedFd>`); duplicated for each spawn.
    Os(OsStdio),
}

/// An OS handle for a child's stream (a descriptor on Unix, a handle on
/// Windows). Made by `Stdio::from(file)`, or on Unix `Stdio::from(fd)`.
#[derive(Debug)]
pub struct OsStdio(pub(crate) OwnedIo);

impl From<File> for Stdio {
    fn from(file: File) -> Stdio {
        Stdio::Os(OsStdio(file.into()))
    }
}

impl Stdio {
    /// The open descriptor `fd` of this process (on Windows a C runtime
    /// descriptor, as Python's `fileno()` gives), duplicated now: the
    /// caller keeps its own and may close it after the spawn.
    ///
    /// # Errors
    /// `EBADF` if `fd` is not open; the duplication's own error.
    pub fn from_descriptor(fd: i32) -> io::Result<Stdio> {
        Ok(Stdio::Os(OsStdio(crate::contain::duplicate_descriptor(
            fd,
        )?)))
    }

    pub(crate) fn to_child_io(&self) -> io::Result<ChildIo> {
        Ok(match self {
            Stdio::Inherit => ChildIo::Inherit,
            Stdio::Null => ChildIo::Null,
            Stdio::Piped => ChildIo::Piped,
            Stdio::Os(OsStdio(handle)) => ChildIo::Os(handle.try_clone()?),
        })
    }
}

macro_rules! stdio_handle {
    ($name:ident, $doc:literal) => {
        #[doc = $doc]
        #[derive(Debug)]
        pub struct $name(pub(crate) File);

        impl $name {
            /// The end as a `File` (for handing it on).
            pub fn into_file(self) -> File {
                self.0
            }
        }
    };
}

stdio_handle!(ChildStdin, "The owner's end of a child's piped stdin.");
stdio_handle!(ChildStdout, "The owner's end of a child's piped stdout.");
stdio_handle!(ChildStderr, "The owner's end of a child's piped stderr.");

impl Write for ChildStdin {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl Read for ChildStdout {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl Read for ChildStderr {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}
