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
