//! Lossless, bounded storage for one output stream of a session (G6).
//!
//! # How it works
//!
//! Every byte gets an absolute offset: byte N of the stream has offset N
//! forever, so a reader's cursor never has to be adjusted when memory is
//! trimmed. The stream is kept in up to three regions:
//!
//! ```text
//! 0 ........ spill_bytes ....... memory_start ........ end_offset
//! [ spill file ][ dropped, counted ][ in-memory ring, newest bytes ]
//! ```
//!
//! * The **ring** holds the newest `max_memory` bytes. It grows on demand up
//!   to that cap and never beyond, so memory is bounded whatever the child
//!   writes.
//! * The **spill file** keeps the oldest `spill_cap` bytes that fell out of
//!   the ring (the head of the output is where compilers and test runners
//!   put the first error, so that is the part worth keeping on disk).
//! * Bytes evicted after the spill file is full (or could not be written)
//!   are **dropped**; readers are told how many they missed, where, and why
//!   (a [`Gap`]: its offsets, its newline count so line numbers stay true
//!   across it, and its [`GapCause`] — the cap, or the write error, e.g.
//!   `ENOSPC`), never silently handed a shorter stream. A stream has at most
//!   one gap: spill file, then gap, then memory.
//!
//! The spill is written *behind* the ring: when the first byte has to leave
//! memory, every not-yet-spilled byte of the ring goes to disk in one write,
//! so at 64 KiB appends into a 1 MiB ring the file sees one ~1 MiB write per
//! MiB appended instead of one small write per append. Appends larger than
//! the ring go from the caller's slice straight to the file, uncopied.
//! Reads use positional I/O (`pread`), so they take `&self` and concurrent
//! readers never race on a shared file cursor.
//!
//! The spill file **never has a name** that could outlive the buffer: on
//! Linux it is made with `O_TMPFILE` (an inode with no directory entry at
//! all), elsewhere — or on a file system without `O_TMPFILE` — it is
//! created under a random name and unlinked before a byte is written. Its
//! space comes back when the descriptor closes, however the process ends:
//! three 400 MB commands under a `SIGKILL`ed `tether mcp` used to leave
//! 805 MB behind in a named spill directory (issue 8). Only the owner's
//! descriptor (close-on-exec, never inherited) reaches the bytes.
//!
//! ```
//! use tether::output::{GapCause, OutputBuffer, OutputConfig};
//!
//! let dir = tempfile::tempdir()?;
//! let mut out = OutputBuffer::new(OutputConfig {
//!     max_memory: 8,                        // the newest 8 bytes in memory
//!     spill_cap: 4,                         // the oldest 4 on disk
//!     spill_dir: Some(dir.path().to_owned()),
//! });
//! out.append(b"line 1\nline 2\nline 3\n")?; // 21 bytes
//! assert_eq!(out.end_offset(), 21);
//!
//! let head = out.read(0, 100)?;
//! assert_eq!(head.data, b"line"); // from the spill file, up to the gap
//! let rest = out.read(head.next_offset, 100)?;
//! assert_eq!((rest.offset, rest.dropped), (13, 9)); // offsets 4..13 are gone
//! assert_eq!(rest.data, b"\nline 3\n");
//! let gap = rest.gap.expect("a gap");
//! assert_eq!((gap.start, gap.end, gap.newlines), (4, 13, Some(1)));
//! assert_eq!(gap.cause, GapCause::SpillCap { cap: 4 });
//! assert_eq!(std::fs::read_dir(dir.path())?.count(), 0); // the spill file has no name
//! # Ok::<(), std::io::Error>(())
//! ```

use std::borrow::Cow;
use std::fmt;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// Default cap on the in-memory ring: 1 MiB.
pub const DEFAULT_MAX_MEMORY: usize = 1 << 20;
/// Default cap on the spill file: 256 MiB.
pub const DEFAULT_SPILL_CAP: u64 = 256 << 20;

/// The smallest ring allocation, so a chatty child doesn't cause a
/// reallocation per line while the ring is still small.
const MIN_RING_ALLOC: usize = 4096;

/// How an [`OutputBuffer`] bounds its memory and disk use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputConfig {
    /// Most bytes kept in memory (default [`DEFAULT_MAX_MEMORY`]); 0 is
    /// raised to 1.
    pub max_memory: usize,
    /// Most bytes written to the spill file (default [`DEFAULT_SPILL_CAP`]);
    /// 0 disables spilling.
    pub spill_cap: u64,
    /// Directory the spill file is made in (default `None`: no spilling).
    /// The file never has a name there (see the module docs), so the
    /// directory may be shared, like the system temp dir. It is created
    /// with mode 0700 if missing; an existing one must belong to the
    /// effective user or root and, if others may write it, carry the sticky
    /// bit (as `/tmp` does), or spilling is refused.
    pub spill_dir: Option<PathBuf>,
}

impl Default for OutputConfig {
    fn default() -> Self {
        Self {
            max_memory: DEFAULT_MAX_MEMORY,
            spill_cap: DEFAULT_SPILL_CAP,
            spill_dir: None,
        }
    }
}

/// The answer to [`OutputBuffer::read`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReadChunk {
    /// The bytes, exactly as the child wrote them.
    pub data: Vec<u8>,
    /// Offset of `data[0]`; later than the requested offset when bytes were
    /// dropped.
    pub offset: u64,
    /// Where the next read should start (`offset + data.len()`).
    pub next_offset: u64,
    /// Bytes between the requested offset and `offset` that are gone for
    /// good (evicted with no room left in the spill file).
    pub dropped: u64,
    /// The stream's gap as of this read, whether or not this read reached
    /// it (`None`: nothing is gone). When `dropped > 0`, the skipped bytes
    /// are its part from the requested offset on.
    pub gap: Option<Gap>,
}

/// Bytes of a stream that are gone for good: evicted from memory with no
/// room (or no way) to keep them on disk. A stream has at most one gap,
/// between what the spill file holds and what memory holds; it grows at
/// its end while output keeps coming.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gap {
    /// Offset of the first byte gone.
    pub start: u64,
    /// Offset just past the last byte gone (where memory starts).
    pub end: u64,
    /// Newlines among the bytes gone, so a reader that counts lines can
    /// count across the gap; `None` when unknown (the spill file was
    /// removed, and its bytes were never counted).
    pub newlines: Option<u64>,
    /// Why the bytes are gone.
    pub cause: GapCause,
}

impl Gap {
    /// Bytes gone.
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    /// Whether no byte is gone (never, for a gap a buffer reports).
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

/// Why bytes of a stream are gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GapCause {
    /// The buffer keeps no spill file (no directory, or a cap of 0).
    NoSpill,
    /// The spill file was full: it holds at most `cap` bytes.
    SpillCap {
        /// [`OutputConfig::spill_cap`].
        cap: u64,
    },
    /// Creating or writing the spill file failed (a full disk, a directory
    /// that is not private); `error` is the message, with the directory.
    SpillFailed {
        /// What failed and why.
        error: String,
    },
    /// The spill file was closed with [`OutputBuffer::remove_spill`].
    SpillRemoved,
}

impl fmt::Display for GapCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GapCause::NoSpill => write!(f, "evicted from memory, and no spill file is kept"),
            GapCause::SpillCap { cap } => write!(f, "beyond the spill cap ({cap} bytes)"),
            GapCause::SpillFailed { error } => {
                write!(f, "the spill file could not be written: {error}")
            }
            GapCause::SpillRemoved => write!(f, "the spill file was removed"),
        }
    }
}

/// Where evicted bytes go.
#[derive(Debug)]
enum Spill {
    /// Not spilling (no directory, cap 0, removed, or creation failed):
    /// evicted bytes are dropped.
    Off,
    /// Spilling is on; the file is created at the first eviction, so a
    /// session with little output never touches the disk.
    Lazy { dir: PathBuf },
    /// The (nameless) file holds stream bytes `[0, spilled)`.
    File { file: File, dir: PathBuf },
}

/// One byte stream with absolute offsets: a bounded in-memory ring of the
/// newest bytes plus an optional spill file for evicted ones.
///
/// The spill file, if any, has no name and is gone when the buffer is
/// dropped or the process dies.
pub struct OutputBuffer {
    /// Byte at offset `o` lives at `ring[o % cap]`; `ring.len()` grows up to
    /// `cap` and then stays there.
    ring: Vec<u8>,
    cap: usize,
    end: u64,
    spill: Spill,
    /// The spill file takes bytes while `spilled < spill_limit`; lowered to
    /// `spilled` after a write error so a broken disk stops costing time.
    spill_limit: u64,
    spilled: u64,
    /// [`OutputConfig::spill_cap`] when spilling was configured, else 0.
    spill_cap: u64,
    /// Why the spill file stopped taking bytes early, if it did.
    spill_failure: Option<String>,
    /// The spill file was removed.
    spill_removed: bool,
    /// Newlines in the gap `[spilled, memory_start)`, counted as bytes
    /// fall into it; `None` once unknown (after `remove_spill`).
    gap_newlines: Option<u64>,
}

impl OutputBuffer {
    /// Creates an empty buffer. Allocates nothing and touches no file yet.
    pub fn new(config: OutputConfig) -> Self {
        let (spill, spill_limit) = match config.spill_dir {
            Some(dir) if config.spill_cap > 0 => (Spill::Lazy { dir }, config.spill_cap),
            _ => (Spill::Off, 0),
        };
        Self {
            ring: Vec::new(),
            cap: config.max_memory.max(1),
            end: 0,
            spill,
            spill_limit,
            spilled: 0,
            spill_cap: spill_limit,
            spill_failure: None,
            spill_removed: false,
            gap_newlines: Some(0),
        }
    }

    /// Oldest offset still readable from memory or the spill file.
    pub fn start_offset(&self) -> u64 {
        if self.spilled > 0 {
            0
        } else {
            self.memory_start()
        }
    }

    /// Total bytes ever appended; the offset the next byte will get.
    pub fn end_offset(&self) -> u64 {
        self.end
    }

    /// Oldest offset still held in memory.
    pub fn memory_start(&self) -> u64 {
        self.end.saturating_sub(self.cap as u64)
    }

    /// Bytes evicted that neither memory nor the spill file holds any more.
    pub fn dropped_total(&self) -> u64 {
        self.memory_start().saturating_sub(self.spilled)
    }

    /// Bytes held in the spill file (stream offsets `[0, spill_bytes)`).
    pub fn spill_bytes(&self) -> u64 {
        self.spilled
    }

    /// Whether every byte from `from` on is still readable (from memory
    /// or the spill file) after `more` bytes are appended — so a reader
    /// lagging at `from` can still catch up. A spill file whose write
    /// fails later drops bytes this said were kept.
    pub(crate) fn keeps(&self, from: u64, more: usize) -> bool {
        let readable_now = from < self.spilled || from >= self.memory_start();
        let new_memory_start = (self.end + more as u64).saturating_sub(self.cap as u64);
        readable_now
            && (from >= new_memory_start
                || (!matches!(self.spill, Spill::Off) && new_memory_start <= self.spill_limit))
    }

    /// The most bytes the ring holds ([`OutputConfig::max_memory`]).
    pub(crate) fn memory_cap(&self) -> usize {
        self.cap
    }

    /// The bytes that are gone (see [`Gap`]), if any: where, how many
    /// newlines, and why. `None` while every byte is still readable.
    pub fn gap(&self) -> Option<Gap> {
        let end = self.memory_start();
        if end <= self.spilled {
            return None;
        }
        let cause = if self.spill_removed {
            GapCause::SpillRemoved
        } else if let Some(error) = &self.spill_failure {
            GapCause::SpillFailed {
                error: error.clone(),
            }
        } else if self.spill_cap == 0 {
            GapCause::NoSpill
        } else {
            GapCause::SpillCap {
                cap: self.spill_cap,
            }
        };
        Some(Gap {
            start: self.spilled,
            end,
            newlines: self.gap_newlines,
            cause,
        })
    }

    /// Why the spill file stopped taking bytes before its cap (creating or
    /// writing it failed), if it did.
    pub fn spill_error(&self) -> Option<&str> {
        self.spill_failure.as_deref()
    }

    /// Bytes currently allocated for the ring; never more than
    /// [`OutputConfig::max_memory`].
    pub fn memory_capacity(&self) -> usize {
        self.ring.capacity()
    }

    /// The directory the spill file was made in, once there is one (the
    /// file itself has no name there).
    pub fn spill_dir(&self) -> Option<&Path> {
        match &self.spill {
            Spill::File { dir, .. } => Some(dir),
            _ => None,
        }
    }

    /// Appends `bytes` at [`end_offset`](Self::end_offset), evicting the
    /// oldest bytes from memory to the spill file as needed.
    ///
    /// # Errors
    /// Creating or writing the spill file can fail (directory not private,
    /// disk full). The bytes are appended anyway, because the caller has
    /// already consumed them from the child and offsets must stay true; the
    /// spill is sealed at what was written, and later evictions are dropped
    /// and counted. The error is returned once, for the caller to report.
    pub fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        let old_end = self.end;
        let new_end = old_end + bytes.len() as u64;
        let new_memory_start = new_end.saturating_sub(self.cap as u64);
        // Spill first: the ring slots about to be overwritten hold the bytes
        // that must reach the file.
        let spilled = if self.spilled < self.spill_limit && self.spilled < new_memory_start {
            self.spill_until(bytes, old_end, new_memory_start)
        } else {
            Ok(())
        };
        if let Err(e) = &spilled {
            self.spill_failure.get_or_insert_with(|| e.to_string());
        }
        self.count_dropped(bytes, old_end, new_memory_start);
        self.store(bytes, old_end, new_memory_start);
        self.end = new_end;
        spilled
    }

    /// Writes every unspilled byte older than `new_memory_start` to the
    /// file, plus the rest of the ring while at it (write-behind batching).
    fn spill_until(&mut self, input: &[u8], old_end: u64, new_memory_start: u64) -> io::Result<()> {
        if let Spill::Lazy { dir } = &self.spill {
            match create_spill_file(dir) {
                Ok(file) => {
                    let dir = dir.clone();
                    self.spill = Spill::File { file, dir };
                }
                Err(e) => {
                    self.spill = Spill::Off;
                    self.spill_limit = 0;
                    return Err(e);
                }
            }
        }
        let Spill::File { file, dir } = &self.spill else {
            return Ok(());
        };
        let ring_to = self.spill_limit.min(old_end);
        let (a, b) = self.ring_range(self.spilled, ring_to.max(self.spilled));
        // Bytes that pass straight through (append larger than the ring).
        let input_to = self.spill_limit.min(new_memory_start);
        let c = if input_to > ring_to {
            &input[(ring_to - old_end) as usize..(input_to - old_end) as usize]
        } else {
            &[]
        };
        let mut pos = self.spilled;
        let mut result = Ok(());
        for part in [a, b, c] {
            if let Err(e) = crate::contain::spill::write_all_at(file, part, pos) {
                let msg = format!("writing spill file in {}: {e}", dir.display());
                result = Err(io::Error::new(e.kind(), msg));
                break;
            }
            pos += part.len() as u64;
        }
        self.spilled = pos;
        if result.is_err() {
            self.spill_limit = pos;
        }
        result
    }

    /// Counts the newlines of the bytes about to fall into the gap (evicted
    /// and not spilled): `[max(memory_start, spilled), new_memory_start)`,
    /// from the ring before it is overwritten, then from `input`. Only
    /// dropped bytes are looked at, so a stream within its spill cap pays
    /// nothing.
    fn count_dropped(&mut self, input: &[u8], old_end: u64, new_memory_start: u64) {
        let from = self.memory_start().max(self.spilled);
        let Some(known) = self.gap_newlines.filter(|_| from < new_memory_start) else {
            return;
        };
        let ring_to = new_memory_start.min(old_end);
        let (a, b) = if from < ring_to {
            self.ring_range(from, ring_to)
        } else {
            (&[][..], &[][..])
        };
        let c = if new_memory_start > old_end {
            &input[(from.max(old_end) - old_end) as usize..(new_memory_start - old_end) as usize]
        } else {
            &[]
        };
        self.gap_newlines = Some(known + newlines(a) + newlines(b) + newlines(c));
    }

    /// Copies the part of `bytes` that stays in memory into the ring.
    fn store(&mut self, bytes: &[u8], old_end: u64, new_memory_start: u64) {
        let cap = self.cap;
        let keep_from = old_end.max(new_memory_start);
        let kept = &bytes[(keep_from - old_end) as usize..];
        let new_end = old_end + bytes.len() as u64;
        if new_end <= cap as u64 {
            // Still filling, no wrap yet: `ring.len() == old_end`. Grow by
            // doubling but never past `cap` (plain `extend` could overshoot).
            let needed = new_end as usize;
            if self.ring.capacity() < needed {
                let target = needed
                    .max(2 * self.ring.capacity())
                    .max(MIN_RING_ALLOC)
                    .min(cap);
                self.ring.reserve_exact(target - self.ring.len());
            }
            self.ring.extend_from_slice(kept);
        } else {
            if self.ring.len() < cap {
                self.ring.reserve_exact(cap - self.ring.len());
                self.ring.resize(cap, 0);
            }
            let at = (keep_from % cap as u64) as usize;
            let first = kept.len().min(cap - at);
            self.ring[at..at + first].copy_from_slice(&kept[..first]);
            self.ring[..kept.len() - first].copy_from_slice(&kept[first..]);
        }
    }

    /// The ring bytes for offsets `[from, to)`, as at most two slices.
    /// Callers keep `memory_start() <= from <= to <= end`.
    fn ring_range(&self, from: u64, to: u64) -> (&[u8], &[u8]) {
        let len = (to - from) as usize;
        let at = (from % self.cap as u64) as usize;
        let first = len.min(self.ring.len() - at);
        (&self.ring[at..at + first], &self.ring[..len - first])
    }

    /// Reads up to `max_bytes` starting at `offset`, from the spill file
    /// and/or memory as one contiguous run.
    ///
    /// If `offset` was dropped, the read starts at the oldest byte after the
    /// gap and [`ReadChunk::dropped`] says how many bytes were skipped. An
    /// `offset` at or past the end returns no data with `next_offset` =
    /// end (not an error). A read that reaches a dropped gap stops before
    /// it; the next read reports the gap.
    ///
    /// # Errors
    /// Only reading the spill file can fail (e.g. it was truncated behind
    /// our back, which shows as `UnexpectedEof`).
    pub fn read(&self, offset: u64, max_bytes: usize) -> io::Result<ReadChunk> {
        if offset >= self.end {
            return Ok(ReadChunk {
                offset: self.end,
                next_offset: self.end,
                gap: self.gap(),
                ..ReadChunk::default()
            });
        }
        let memory_start = self.memory_start();
        let start = if offset < self.spilled || offset >= memory_start {
            offset
        } else {
            memory_start
        };
        let stop = start + (self.end - start).min(max_bytes as u64);
        let mut data = Vec::with_capacity((stop - start) as usize);
        let mut pos = start;
        if pos < memory_start {
            // `pos < spilled` here, so the file exists. Stop at the memory
            // boundary even when write-behind put more on disk: memory is
            // cheaper to read.
            let Spill::File { file, .. } = &self.spill else {
                return Err(io::Error::other("spill file missing for spilled bytes"));
            };
            let to = stop.min(self.spilled).min(memory_start);
            data.resize((to - pos) as usize, 0);
            crate::contain::spill::read_exact_at(file, &mut data, pos)?;
            pos = to;
        }
        if pos >= memory_start && pos < stop {
            let (a, b) = self.ring_range(pos, stop);
            data.extend_from_slice(a);
            data.extend_from_slice(b);
            pos = stop;
        }
        Ok(ReadChunk {
            data,
            offset: start,
            next_offset: pos,
            dropped: start - offset,
            gap: self.gap(),
        })
    }

    /// The last `max_bytes` of the stream (fewer if the stream is shorter);
    /// `dropped` is non-zero if part of that window is gone.
    ///
    /// # Errors
    /// As [`read`](Self::read).
    pub fn tail(&self, max_bytes: usize) -> io::Result<ReadChunk> {
        self.read(self.end.saturating_sub(max_bytes as u64), max_bytes)
    }

    /// The bytes still in memory from `offset` (clamped to
    /// `[memory_start, end]`) to the end, with the offset they start at, for
    /// matching new output without a read. Borrowed unless the range wraps
    /// around the ring, in which case it is copied once. Never fails.
    pub fn contiguous_memory_since(&self, offset: u64) -> (u64, Cow<'_, [u8]>) {
        let start = offset.clamp(self.memory_start(), self.end);
        match self.ring_range(start, self.end) {
            (a, []) => (start, Cow::Borrowed(a)),
            (a, b) => (start, Cow::Owned([a, b].concat())),
        }
    }

    /// Closes the spill file now — which frees its space, since it has no
    /// name — and stops spilling: the bytes it held count as dropped from
    /// then on. Done automatically on drop.
    ///
    /// # Errors
    /// None today (closing a nameless file cannot fail in a way that keeps
    /// its bytes); the `Result` leaves room for a platform where it can.
    pub fn remove_spill(&mut self) -> io::Result<()> {
        let spill = std::mem::replace(&mut self.spill, Spill::Off);
        if self.spilled > 0 {
            // Its bytes join the gap uncounted.
            self.spill_removed = true;
            self.gap_newlines = None;
        }
        self.spill_limit = 0;
        self.spilled = 0;
        drop(spill);
        Ok(())
    }
}

impl fmt::Debug for OutputBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Not the ring itself: a megabyte of bytes in a log line helps no one.
        f.debug_struct("OutputBuffer")
            .field("memory", &(self.memory_start()..self.end))
            .field("spilled", &self.spilled)
            .field("dropped", &self.dropped_total())
            .field("spill_dir", &self.spill_dir())
            .finish()
    }
}

impl Drop for OutputBuffer {
    fn drop(&mut self) {
        // Closing the nameless file is all it takes.
        let _ = self.remove_spill();
    }
}

/// Newlines in `bytes`. memchr's SIMD search: 0.2 s per 256 MB in a
/// debug build (it is optimised there too, see the workspace manifest),
/// where a byte loop took 5 s.
fn newlines(bytes: &[u8]) -> u64 {
    memchr::memchr_iter(b'\n', bytes).count() as u64
}

/// Makes a spill file in `dir` that has no name (see the module docs).
fn create_spill_file(dir: &Path) -> io::Result<File> {
    let context = |e: io::Error| {
        io::Error::new(
            e.kind(),
            format!("creating spill file in {}: {e}", dir.display()),
        )
    };
    crate::contain::spill::ensure_spill_dir(dir).map_err(context)?;
    crate::contain::spill::create_nameless_file(dir).map_err(context)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A buffer with its spill directory inside `dir` (none if `dir` is None).
    fn buffer(max_memory: usize, spill_cap: u64, dir: Option<&Path>) -> OutputBuffer {
        let spill_dir = dir.map(|d| d.join("spill"));
        OutputBuffer::new(OutputConfig {
            max_memory,
            spill_cap,
            spill_dir,
        })
    }

    fn append_in_chunks(buf: &mut OutputBuffer, data: &[u8], step: usize) {
        data.chunks(step).for_each(|c| buf.append(c).unwrap());
    }

    /// Deterministic pseudo-random numbers (xorshift), no dev-dependency.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self, below: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % below
        }
        fn bytes(&mut self, n: usize) -> Vec<u8> {
            (0..n).map(|_| self.next(256) as u8).collect()
        }
    }

    /// Reads everything from `from` by following `next_offset`; returns the
    /// bytes and the total reported dropped.
    fn read_all(buf: &OutputBuffer, mut from: u64, step: usize) -> (Vec<u8>, u64) {
        let (mut out, mut dropped) = (Vec::new(), 0);
        loop {
            let chunk = buf.read(from, step).unwrap();
            assert_eq!(chunk.next_offset, chunk.offset + chunk.data.len() as u64);
            if chunk.data.is_empty() && chunk.dropped == 0 {
                return (out, dropped);
            }
            dropped += chunk.dropped;
            out.extend_from_slice(&chunk.data);
            from = chunk.next_offset;
        }
    }

    #[test]
    fn round_trip_is_byte_exact_across_eviction() {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for spill_cap in [u64::MAX, 100_000, 999, 0] {
            let mut buf = buffer(1000, spill_cap, Some(dir.path()));
            let mut reference = Vec::new();
            for _ in 0..400 {
                let len = rng.next(2500) as usize;
                let chunk = rng.bytes(len);
                buf.append(&chunk).unwrap();
                reference.extend_from_slice(&chunk);
                let (m, end) = (buf.memory_start(), buf.end_offset());
                assert_eq!(end, reference.len() as u64);
                assert_eq!(buf.dropped_total(), m.saturating_sub(spill_cap));
                // Any read returns the reference bytes at their true offsets,
                // skipping only bytes that are really gone.
                let at = rng.next(end + 1);
                let got = buf.read(at, rng.next(3000) as usize).unwrap();
                let readable = |o: u64| o < buf.spill_bytes() || o >= m;
                assert!(got.dropped == 0 || !readable(at));
                assert_eq!(got.offset, at + got.dropped);
                assert!(readable(got.offset) || got.offset == end);
                let want = &reference[got.offset as usize..got.next_offset as usize];
                assert_eq!(got.data, want);
            }
            let m = buf.memory_start() as usize;
            let on_disk = &reference[..m.min(buf.spill_bytes() as usize)];
            let expect = [on_disk, &reference[m..]].concat();
            assert_eq!(read_all(&buf, 0, 777), (expect, buf.dropped_total()));
        }
    }

    #[test]
    fn offsets_are_stable_and_reads_span_spill_and_memory() {
        let dir = tempfile::tempdir().unwrap();
        let mut buf = buffer(100, 1 << 20, Some(dir.path()));
        let all = Rng(7).bytes(1234);
        buf.append(&all[..50]).unwrap();
        let early = buf.read(3, 40).unwrap();
        append_in_chunks(&mut buf, &all[50..], 33);
        assert_eq!(buf.read(3, 40).unwrap(), early);
        let m = buf.memory_start() as usize;
        let across = buf.read(m as u64 - 40, 80).unwrap();
        assert_eq!(across.data, &all[m - 40..m + 40]);
        assert_eq!(buf.tail(150).unwrap().data, &all[1234 - 150..]);
    }

    #[test]
    fn spill_cap_reached_counts_and_reports_dropped_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let mut buf = buffer(100, 250, Some(dir.path()));
        let all = Rng(11).bytes(1000);
        append_in_chunks(&mut buf, &all, 7);
        assert_eq!((buf.spill_bytes(), buf.memory_start()), (250, 900));
        assert_eq!((buf.dropped_total(), buf.start_offset()), (650, 0));
        // A read that reaches the gap stops before it...
        let head = buf.read(200, 100).unwrap();
        assert_eq!((&head.data[..], head.next_offset), (&all[200..250], 250));
        // ...and the next one reports it.
        let after = buf.read(250, 30).unwrap();
        assert_eq!(
            (&after.data[..], after.offset, after.dropped),
            (&all[900..930], 900, 650)
        );
        let expect = [&all[..250], &all[900..]].concat();
        assert_eq!(read_all(&buf, 0, 64), (expect, 650));
    }

    #[test]
    fn the_gap_counts_its_newlines_and_says_why() {
        let dir = tempfile::tempdir().unwrap();
        // Lines of varying length, appended in odd chunks, so evictions cut
        // lines and chunks anywhere; the gap's newline count must equal the
        // reference's for the same range, whatever the cut.
        let text: Vec<u8> = (0..5000)
            .flat_map(|i| format!("{}\n", "x".repeat(i % 37)).into_bytes())
            .collect();
        // Newlines before each offset.
        let before: Vec<u64> = std::iter::once(0)
            .chain(text.iter().scan(0, |n, &b| {
                *n += u64::from(b == b'\n');
                Some(*n)
            }))
            .collect();
        let count = |r: std::ops::Range<u64>| before[r.end as usize] - before[r.start as usize];
        for (cap, spill_cap, step, dir) in [
            (100, 250, 7, Some(dir.path())),
            (1000, 3000, 1500, Some(dir.path())),
            (64, 0, 13, None),
            (64, 1 << 40, 13, None),
        ] {
            let mut buf = buffer(cap, spill_cap, dir);
            assert_eq!(buf.gap(), None);
            for chunk in text.chunks(step) {
                buf.append(chunk).unwrap();
                if let Some(gap) = buf.gap() {
                    assert_eq!(
                        (gap.start, gap.end),
                        (buf.spill_bytes(), buf.memory_start())
                    );
                    assert_eq!(gap.newlines, Some(count(gap.start..gap.end)));
                }
            }
            let gap = buf.gap().unwrap();
            let cause = if dir.is_some() {
                GapCause::SpillCap { cap: spill_cap }
            } else {
                GapCause::NoSpill
            };
            assert_eq!(gap.cause, cause);
            // Every read says so, and one that skips says how far.
            let read = buf.read(gap.start, 10).unwrap();
            assert_eq!((read.offset, read.dropped), (gap.end, gap.len()));
            assert_eq!(read.gap.as_ref(), Some(&gap));
        }
        let mut buf = buffer(100, 250, Some(dir.path()));
        buf.append(&text[..1000]).unwrap();
        buf.remove_spill().unwrap();
        let gap = buf.gap().unwrap();
        assert_eq!(
            (gap.start, gap.newlines, gap.cause),
            (0, None, GapCause::SpillRemoved)
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_spill_file_that_cannot_be_made_is_the_gaps_cause() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        // Writable by others without the sticky bit: refused (not private).
        let shared = dir.path().join("spill");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        let mut buf = buffer(10, 1000, Some(dir.path()));
        let error = buf.append(b"0123456789\nabcdefghij\n").unwrap_err();
        let gap = buf.gap().unwrap();
        assert_eq!((gap.start, gap.end, gap.newlines), (0, 12, Some(1)));
        let GapCause::SpillFailed { error: why } = &gap.cause else {
            panic!("{:?}", gap.cause)
        };
        assert_eq!(why, &error.to_string());
        assert!(why.contains("creating spill file in"), "{why}");
        assert_eq!(buf.spill_error(), Some(why.as_str()));
        assert!(
            gap.cause
                .to_string()
                .starts_with("the spill file could not be written: ")
        );
    }

    #[test]
    fn without_spill_evicted_bytes_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        for mut buf in [buffer(10, 1000, None), buffer(10, 0, Some(dir.path()))] {
            buf.append(b"abcdefghijklmnopqrstuvwxyz").unwrap();
            assert_eq!(
                (buf.start_offset(), buf.dropped_total(), buf.spill_bytes()),
                (16, 16, 0)
            );
            let got = buf.read(0, 100).unwrap();
            assert_eq!(
                (&got.data[..], got.offset, got.dropped),
                (&b"qrstuvwxyz"[..], 16, 16)
            );
        }
        assert!(
            !dir.path().join("spill").exists(),
            "spill_cap 0 touches no disk"
        );
    }

    #[test]
    fn offset_past_end_is_empty_and_clamped() {
        let mut buf = buffer(DEFAULT_MAX_MEMORY, 0, None);
        buf.append(b"hello").unwrap();
        for at in [5, 6, u64::MAX] {
            let got = buf.read(at, 10).unwrap();
            assert_eq!(
                (got.data.len(), got.offset, got.next_offset, got.dropped),
                (0, 5, 5, 0)
            );
        }
        assert_eq!(buf.read(0, 0).unwrap().next_offset, 0);
    }

    #[test]
    fn invalid_utf8_and_nul_survive_spill() {
        let dir = tempfile::tempdir().unwrap();
        let mut buf = buffer(300, 1 << 20, Some(dir.path()));
        let bytes = (0..=255u8)
            .cycle()
            .take(2000)
            .chain([0, 0xff, 0xc3, 0x28, 0]);
        let all: Vec<u8> = bytes.collect();
        append_in_chunks(&mut buf, &all, 101);
        assert_eq!(read_all(&buf, 0, 4096), (all, 0));
    }

    #[test]
    fn memory_stays_within_cap() {
        let dir = tempfile::tempdir().unwrap();
        let cap = 64 * 1024 + 3; // not a multiple of any chunk size
        for spill in [None, Some(dir.path())] {
            let mut buf = buffer(cap, u64::MAX, spill);
            for i in 0..10 * cap {
                buf.append(&[i as u8]).unwrap();
                assert!(buf.memory_capacity() <= cap);
            }
            let mut buf = buffer(cap, u64::MAX, spill);
            for _ in 0..10 {
                buf.append(&vec![7u8; 1 << 20]).unwrap();
                assert!(buf.memory_capacity() <= cap);
            }
        }
    }

    #[test]
    fn memory_since_borrows_unless_wrapped() {
        let mut buf = buffer(8, 0, None);
        buf.append(b"abcdef").unwrap();
        let (at, bytes) = buf.contiguous_memory_since(2);
        assert_eq!((at, &*bytes), (2, &b"cdef"[..]));
        assert!(matches!(bytes, Cow::Borrowed(_)));
        buf.append(b"ghijk").unwrap();
        assert_eq!(
            buf.contiguous_memory_since(0),
            (3, Cow::from(&b"defghijk"[..]))
        );
        assert_eq!(buf.contiguous_memory_since(99).1.len(), 0);
    }

    /// Manual: `cargo test --release -- --ignored --nocapture throughput`.
    #[test]
    #[ignore = "a measurement, not an assertion"]
    fn throughput() {
        let dir = tempfile::tempdir().unwrap();
        let chunk = Rng(3).bytes(64 * 1024);
        for spill_cap in [DEFAULT_SPILL_CAP, u64::MAX] {
            let mut buf = buffer(1 << 20, spill_cap, Some(dir.path()));
            let start = std::time::Instant::now();
            for _ in 0..(1 << 30) / chunk.len() {
                buf.append(&chunk).unwrap();
            }
            let secs = start.elapsed().as_secs_f64();
            println!("1 GiB, spill cap {spill_cap}: {:.2} GiB/s", 1.0 / secs);
        }
    }
}
