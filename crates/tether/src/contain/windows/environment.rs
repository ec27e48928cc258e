//! Environment blocks: what `CreateProcessW` takes and what another
//! process's PEB holds.
//!
//! A block is `NAME=value\0` entries followed by one more `\0`, in UTF-16
//! (with `CREATE_UNICODE_ENVIRONMENT`). Names are case-insensitive (`Path`
//! and `PATH` are one variable), and Windows requires the entries sorted by
//! name, case-insensitively, in ordinal (not locale) order — the order
//! `CompareStringOrdinal(.., TRUE)` gives, which is what std uses too. Names
//! may start with `=` (cmd's hidden per-drive directories, `=C:=C:\work`);
//! the separator is the first `=` after the first character.

use std::cmp::Ordering;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::windows::ffi::{OsStrExt, OsStringExt};

use windows_sys::Win32::Globalization::{CSTR_EQUAL, CSTR_LESS_THAN, CompareStringOrdinal};

const EQUALS: u16 = b'=' as u16;

/// `tether::withhold_environment` on Windows (see `withheld.rs`): under
/// the PEB lock, every value `withhold` names is overwritten with `*` in
/// the PEB's environment block — what another process of the same user
/// reads with `ReadProcessMemory` — and in every other copy of its
/// `NAME=value` entry in the memory region that block lies in (under Wine,
/// the process heap, where the blocks Wine built at start remain: one held
/// the value 30,000 characters past the live block); then the variable is
/// removed with `SetEnvironmentVariableW`, which moves the entries after it
/// down over it. The filler keeps the block well formed (a NUL would end
/// it early); what removal leaves past the new end is a copy of later
/// entries, their withheld values already overwritten. Other threads may
/// run: every Win32 environment call takes the PEB lock, and the heap's
/// lock is held while its copies are overwritten.
pub(crate) fn withhold(
    withhold: &dyn Fn(&OsStr) -> bool,
) -> Result<crate::withheld::Withheld, crate::error::WithholdError> {
    use crate::error::WithholdError;
    let mut withheld = crate::withheld::Withheld::default();
    let mut names: Vec<Vec<u16>> = Vec::new();
    {
        let _lock = PebLock::acquire();
        // Each withheld entry as it was (`NAME=value`), to find its copies;
        // zeroed before it is dropped.
        let mut entries: Vec<Vec<u16>> = Vec::new();
        let block_at = {
            // SAFETY: the PEB lock is held until after the block is dropped
            // (`_lock` outlives it), and nothing in between touches the
            // environment another way.
            let block =
                unsafe { super::peb::own_environment_block() }.map_err(WithholdError::Io)?;
            let mut start = 0;
            while start < block.len() {
                let len = block[start..]
                    .iter()
                    .position(|&c| c == 0)
                    .unwrap_or(block.len() - start);
                let entry = &mut block[start..start + len];
                // The separator is the first `=` after the first character.
                if let Some(eq) = entry
                    .iter()
                    .skip(1)
                    .position(|&c| c == EQUALS)
                    .map(|i| i + 1)
                    && withhold(&OsString::from_wide(&entry[..eq]))
                {
                    entries.push(entry.to_vec());
                    entry[eq + 1..].fill(u16::from(b'*'));
                    withheld.overwritten += 1;
                    if !names
                        .iter()
                        .any(|n| compare_names(n, &entry[..eq]) == Ordering::Equal)
                    {
                        names.push(entry[..eq].to_vec());
                    }
                }
                start += len + 1;
            }
            block.as_ptr() as usize
        };
        if !entries.is_empty() {
            let _heap = HeapGuard::acquire();
            // SAFETY: the PEB lock and the process heap's lock are held
            // while the slice lives, and the block's slice above is gone.
            let region = unsafe { super::peb::own_region_containing(block_at) }
                .map_err(WithholdError::Io)?;
            for entry in &entries {
                withheld.overwritten += overwrite_copies(region, entry);
            }
        }
        for entry in &mut entries {
            entry.fill(0);
        }
    }
    withheld.names = names.iter().map(|n| OsString::from_wide(n)).collect();
    for name in &withheld.names {
        // SAFETY: std documents `remove_var` as always safe on Windows,
        // from any number of threads (`SetEnvironmentVariableW` takes the
        // PEB lock).
        unsafe { std::env::remove_var(name) };
    }
    Ok(withheld)
}

/// Overwrites with `*` the value of every copy of the NUL-terminated entry
/// `entry` (`NAME=value`) in `memory`; how many there were.
fn overwrite_copies(memory: &mut [u16], entry: &[u16]) -> usize {
    let Some(eq) = entry
        .iter()
        .skip(1)
        .position(|&c| c == EQUALS)
        .map(|i| i + 1)
    else {
        return 0;
    };
    let mut found = 0;
    let mut at = 0;
    while at + entry.len() < memory.len() {
        if memory[at..].starts_with(entry) && memory[at + entry.len()] == 0 {
            memory[at + eq + 1..at + entry.len()].fill(u16::from(b'*'));
            found += 1;
            at += entry.len();
        } else {
            at += 1;
        }
    }
    found
}

/// The process heap's lock, held until dropped: no other thread allocates
/// or frees in it meanwhile.
struct HeapGuard(windows_sys::Win32::Foundation::HANDLE);

impl HeapGuard {
    fn acquire() -> HeapGuard {
        use windows_sys::Win32::System::Memory::{GetProcessHeap, HeapLock};
        // SAFETY: plain calls on the process's own heap handle, valid for
        // its lifetime; paired with `HeapUnlock` in `drop`.
        unsafe {
            let heap = GetProcessHeap();
            HeapLock(heap);
            HeapGuard(heap)
        }
    }
}

impl Drop for HeapGuard {
    fn drop(&mut self) {
        // SAFETY: this thread locked it in `acquire`.
        unsafe { windows_sys::Win32::System::Memory::HeapUnlock(self.0) };
    }
}

#[link(name = "ntdll.dll", kind = "raw-dylib", modifiers = "+verbatim")]
unsafe extern "system" {
    /// Enters the PEB's lock (a critical section, recursive for its
    /// owner), which every Win32 environment call takes too.
    fn RtlAcquirePebLock();
    /// Leaves it.
    fn RtlReleasePebLock();
}

/// The PEB lock, held until dropped.
struct PebLock;

impl PebLock {
    fn acquire() -> PebLock {
        // SAFETY: no arguments; paired with the release in `drop`.
        unsafe { RtlAcquirePebLock() };
        PebLock
    }
}

impl Drop for PebLock {
    fn drop(&mut self) {
        // SAFETY: this thread acquired it in `acquire`.
        unsafe { RtlReleasePebLock() };
    }
}

/// A set of environment variables with Windows' case-insensitive names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Environment {
    /// Unique by case-insensitive name; kept in block order.
    vars: Vec<(Vec<u16>, Vec<u16>)>,
}

impl Environment {
    /// No variables at all. Note that many programs fail without
    /// `SystemRoot`; a caller clearing the environment should put it back.
    pub fn empty() -> Environment {
        Environment::default()
    }

    /// The current process's environment.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn inherit() -> Environment {
        let mut env = Environment::empty();
        for (name, value) in std::env::vars_os() {
            // The live environment is already valid; a variable std could
            // not split is skipped rather than guessed at.
            let _ = env.set(&name, &value);
        }
        env
    }

    /// Sets `name` (replacing any spelling of it) to `value`.
    ///
    /// Fails on an empty name, an `=` in the name after its first
    /// character, or a NUL anywhere — each would corrupt the block.
    pub fn set(&mut self, name: &OsStr, value: &OsStr) -> io::Result<()> {
        let name_w: Vec<u16> = name.encode_wide().collect();
        let value_w: Vec<u16> = value.encode_wide().collect();
        if name_w.is_empty() || name_w[1..].contains(&EQUALS) || name_w.contains(&0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("invalid environment variable name {name:?}"),
            ));
        }
        if value_w.contains(&0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("environment variable {name:?} has a NUL in its value"),
            ));
        }
        match self.position(&name_w) {
            Ok(i) => self.vars[i] = (name_w, value_w),
            Err(i) => self.vars.insert(i, (name_w, value_w)),
        }
        Ok(())
    }

    /// Removes `name`, whatever its spelling.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn remove(&mut self, name: &OsStr) {
        let name_w: Vec<u16> = name.encode_wide().collect();
        if let Ok(i) = self.position(&name_w) {
            self.vars.remove(i);
        }
    }

    /// The value of `name`, whatever its spelling.
    pub fn get(&self, name: &OsStr) -> Option<OsString> {
        let name_w: Vec<u16> = name.encode_wide().collect();
        let i = self.position(&name_w).ok()?;
        Some(OsString::from_wide(&self.vars[i].1))
    }

    /// The variables, in block order.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn iter(&self) -> impl Iterator<Item = (OsString, OsString)> + '_ {
        self.vars
            .iter()
            .map(|(n, v)| (OsString::from_wide(n), OsString::from_wide(v)))
    }

    /// The sorted, double-NUL-terminated UTF-16 block for `CreateProcessW`.
    pub fn block(&self) -> Vec<u16> {
        let mut block = Vec::new();
        for (name, value) in &self.vars {
            block.extend_from_slice(name);
            block.push(EQUALS);
            block.extend_from_slice(value);
            block.push(0);
        }
        if block.is_empty() {
            // An empty block is still two NULs: one empty entry ends it.
            block.push(0);
        }
        block.push(0);
        block
    }

    /// Parses a block read from elsewhere (another process's PEB): entries
    /// up to the first empty one or the end of `block`. Entries without a
    /// separator are skipped; nothing here trusts the input's sorting or
    /// uniqueness (the first of two spellings wins).
    pub fn parse(block: &[u16]) -> Environment {
        let mut env = Environment::empty();
        for entry in block.split(|&c| c == 0) {
            if entry.is_empty() {
                break;
            }
            let Some(eq) = entry.iter().skip(1).position(|&c| c == EQUALS) else {
                continue;
            };
            let (name, value) = (&entry[..eq + 1], &entry[eq + 2..]);
            if let Err(i) = env.position(name) {
                env.vars.insert(i, (name.to_vec(), value.to_vec()));
            }
        }
        env
    }

    fn position(&self, name: &[u16]) -> Result<usize, usize> {
        self.vars
            .binary_search_by(|(probe, _)| compare_names(probe, name))
    }
}

/// Case-insensitive ordinal comparison, as Windows sorts environment blocks.
fn compare_names(a: &[u16], b: &[u16]) -> Ordering {
    // SAFETY: both slices are valid for their lengths (passed explicitly,
    // so no NUL terminator is needed).
    let result =
        unsafe { CompareStringOrdinal(a.as_ptr(), a.len() as i32, b.as_ptr(), b.len() as i32, 1) };
    match result {
        CSTR_LESS_THAN => Ordering::Less,
        CSTR_EQUAL => Ordering::Equal,
        _ => Ordering::Greater,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wide(s: &str) -> Vec<u16> {
        s.encode_utf16().collect()
    }

    #[test]
    fn names_are_case_insensitive_and_blocks_sorted() {
        let mut env = Environment::empty();
        env.set(OsStr::new("Path"), OsStr::new("C:\\a")).unwrap();
        env.set(OsStr::new("zeta"), OsStr::new("z")).unwrap();
        env.set(OsStr::new("ALPHA"), OsStr::new("1")).unwrap();
        env.set(OsStr::new("_under"), OsStr::new("u")).unwrap();
        env.set(OsStr::new("=C:"), OsStr::new("C:\\work")).unwrap();
        env.set(OsStr::new("PATH"), OsStr::new("C:\\b")).unwrap();
        assert_eq!(env.get(OsStr::new("path")).unwrap(), "C:\\b");
        // Ordinal on the upper-cased names: '=' (0x3D) < 'A' < 'P' < 'Z'
        // (0x5A) < '_' (0x5F) — so `zeta` sorts before `_under`, unlike in
        // a lower-case comparison.
        let want = wide("=C:=C:\\work\0ALPHA=1\0PATH=C:\\b\0zeta=z\0_under=u\0\0");
        assert_eq!(env.block(), want);
        env.remove(OsStr::new("pAtH"));
        assert_eq!(env.get(OsStr::new("Path")), None);
    }

    #[test]
    fn empty_block_is_two_nuls_and_bad_names_are_refused() {
        assert_eq!(Environment::empty().block(), vec![0, 0]);
        let mut env = Environment::empty();
        assert!(env.set(OsStr::new(""), OsStr::new("x")).is_err());
        assert!(env.set(OsStr::new("A=B"), OsStr::new("x")).is_err());
        assert!(env.set(OsStr::new("A"), OsStr::new("x\0y")).is_err());
        assert_eq!(env, Environment::empty());
    }

    #[test]
    fn parse_reads_what_block_wrote_and_stops_at_the_end() {
        let mut env = Environment::empty();
        env.set(OsStr::new("TETHER_SPAWN"), OsStr::new("v1:a:b=c"))
            .unwrap();
        env.set(OsStr::new("=D:"), OsStr::new("D:\\")).unwrap();
        let mut block = env.block();
        block.extend(wide("AFTER=end\0\0"));
        assert_eq!(Environment::parse(&block), env);
        // Truncated input (no terminator) and junk entries.
        let parsed = Environment::parse(&wide("junk\0K=v\0K2=unterminated"));
        let got: Vec<_> = parsed.iter().collect();
        assert_eq!(
            got,
            vec![
                ("K".into(), "v".into()),
                ("K2".into(), "unterminated".into())
            ]
        );
    }

    #[test]
    fn inherit_sees_this_process() {
        let env = Environment::inherit();
        let (name, value) = std::env::vars_os().next().expect("some variable");
        let lower = name.to_string_lossy().to_lowercase();
        assert_eq!(env.get(OsStr::new(&lower)), Some(value));
    }
}
