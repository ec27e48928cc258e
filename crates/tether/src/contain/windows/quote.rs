//! Command lines: Windows passes a child one string, and each program splits
//! it itself.
//!
//! Almost every program splits it by the MSVCRT rules (the C runtime's
//! `argv`, `CommandLineToArgvW`, Rust's `std::env::args`):
//! - arguments are separated by spaces or tabs; one in double quotes may
//!   contain them;
//! - `2n` backslashes before a `"` are `n` backslashes and the quote is a
//!   delimiter; `2n+1` backslashes before a `"` are `n` backslashes and a
//!   literal quote; backslashes anywhere else are literal;
//! - the program name (`argv[0]`) is different: it ends at the first space
//!   unless quoted, and inside its quotes nothing is escaped.
//!
//! [`command_line`] quotes by those rules. `cmd.exe` does not follow them:
//! it expands `%VAR%`, treats `&|<>^()` as syntax and knows nothing of
//! backslash escapes, which is how batch-file arguments became a command
//! injection (CVE-2024-24576, "BatBadBut"). [`cmd_script`] and
//! [`batch_file`] build `cmd.exe` lines by cmd's own rules.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::windows::ffi::{OsStrExt, OsStringExt};

use windows_sys::Win32::Foundation::LocalFree;
use windows_sys::Win32::UI::Shell::CommandLineToArgvW;

const QUOTE: u16 = b'"' as u16;
const BACKSLASH: u16 = b'\\' as u16;

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

/// The NUL-terminated command line that makes an MSVCRT-rules program see
/// exactly `program` as `argv[0]` and `args` as the rest.
///
/// Fails if `program` contains a `"` (it cannot be expressed in `argv[0]`,
/// and no Windows file name contains one) or anything contains a NUL.
pub fn command_line(program: &OsStr, args: &[&OsStr]) -> io::Result<Vec<u16>> {
    let mut line = Vec::new();
    push_program(&mut line, program)?;
    for arg in args {
        line.push(b' ' as u16);
        push_arg(&mut line, arg)?;
    }
    line.push(0);
    Ok(line)
}

/// `argv[0]`: always quoted (so a path with spaces is one word and nothing
/// after it is mistaken for part of it), never escaped.
fn push_program(line: &mut Vec<u16>, program: &OsStr) -> io::Result<()> {
    let wide: Vec<u16> = program.encode_wide().collect();
    if wide.contains(&QUOTE) {
        return Err(invalid(format!(
            "program name {program:?} contains a double quote, which Windows cannot pass as argv[0]"
        )));
    }
    no_nul(&wide, program)?;
    line.push(QUOTE);
    line.extend_from_slice(&wide);
    line.push(QUOTE);
    Ok(())
}

/// One argument by the MSVCRT rules.
fn push_arg(line: &mut Vec<u16>, arg: &OsStr) -> io::Result<()> {
    let wide: Vec<u16> = arg.encode_wide().collect();
    no_nul(&wide, arg)?;
    // Quote when empty (else it vanishes) or when it holds a separator; a
    // quote inside is escaped either way.
    let quoted = wide.is_empty()
        || wide
            .iter()
            .any(|&c| c == b' ' as u16 || c == b'\t' as u16 || c == b'\n' as u16 || c == 0x0b);
    if quoted {
        line.push(QUOTE);
    }
    let mut backslashes = 0usize;
    for &c in &wide {
        if c == BACKSLASH {
            backslashes += 1;
        } else {
            if c == QUOTE {
                // n backslashes before a literal quote become 2n+1.
                line.extend(std::iter::repeat_n(BACKSLASH, backslashes + 1));
            }
            backslashes = 0;
        }
        line.push(c);
    }
    if quoted {
        // n trailing backslashes before the closing quote become 2n.
        line.extend(std::iter::repeat_n(BACKSLASH, backslashes));
        line.push(QUOTE);
    }
    Ok(())
}

fn no_nul(wide: &[u16], original: &OsStr) -> io::Result<()> {
    if wide.contains(&0) {
        return Err(invalid(format!("{original:?} contains a NUL character")));
    }
    Ok(())
}

/// `cmd.exe /d /s /c "<script>"`: a shell command string run by cmd, as
/// typed at its prompt. `/d` skips the AutoRun commands of the registry (a
/// user's `doskey` macros must not change what an agent's command does);
/// `/s` makes cmd strip exactly the outer quotes and run the rest verbatim,
/// whatever quotes the script has itself.
///
/// Fails on a CR or LF: cmd runs only the first line of a `/c` command and
/// would silently drop the rest (join lines with `&` or `&&` instead).
pub fn cmd_script(cmd_exe: &OsStr, script: &OsStr) -> io::Result<Vec<u16>> {
    let wide: Vec<u16> = script.encode_wide().collect();
    no_nul(&wide, script)?;
    if wide.iter().any(|&c| c == b'\r' as u16 || c == b'\n' as u16) {
        return Err(invalid(
            "cmd.exe runs only the first line of a command; join the lines with `&` or `&&`"
                .to_owned(),
        ));
    }
    let mut line = Vec::new();
    push_program(&mut line, cmd_exe)?;
    line.extend(OsStr::new(" /d /s /c \"").encode_wide());
    line.extend_from_slice(&wide);
    line.push(QUOTE);
    line.push(0);
    Ok(line)
}

/// The `cmd.exe` line that runs the batch file `script` with `args` arriving
/// in `%1`, `%2`, … exactly as given (what `CreateProcessW` on a `.bat`
/// would do, but safe).
///
/// cmd's rules: the whole command after `/c` is wrapped in one more pair of
/// quotes; an argument is quoted when it has anything but
/// `[A-Za-z0-9#$*+-./:?@\_]` or non-ASCII letters; a `"` inside is doubled;
/// `%` becomes `%%cd:~,%` (an empty substring of `%cd%`, so `%PATH%` in an
/// argument is not expanded); backslashes before a quote are doubled, as
/// `"%~1"` in the script would otherwise see an escaped quote. CR and LF
/// cannot be passed at all and are refused. `/e:ON` (command extensions, which the `%`
/// rule needs) and `/v:OFF` (no `!VAR!` expansion) are set explicitly
/// because the registry can change their defaults.
pub fn batch_file(cmd_exe: &OsStr, script: &OsStr, args: &[&OsStr]) -> io::Result<Vec<u16>> {
    let script_wide: Vec<u16> = script.encode_wide().collect();
    no_nul(&script_wide, script)?;
    if script_wide.contains(&QUOTE) || script_wide.last() == Some(&BACKSLASH) {
        return Err(invalid(format!(
            "batch file path {script:?} contains a double quote or ends with a backslash"
        )));
    }
    let mut line = Vec::new();
    push_program(&mut line, cmd_exe)?;
    line.extend(OsStr::new(" /e:ON /v:OFF /d /c \"\"").encode_wide());
    line.extend_from_slice(&script_wide);
    line.push(QUOTE);
    for arg in args {
        line.push(b' ' as u16);
        push_batch_arg(&mut line, arg)?;
    }
    line.push(QUOTE);
    line.push(0);
    Ok(line)
}

fn push_batch_arg(line: &mut Vec<u16>, arg: &OsStr) -> io::Result<()> {
    let wide: Vec<u16> = arg.encode_wide().collect();
    no_nul(&wide, arg)?;
    if wide.iter().any(|&c| c == b'\r' as u16 || c == b'\n' as u16) {
        return Err(invalid(format!(
            "batch file argument {arg:?} contains a line break, which cmd.exe cannot pass"
        )));
    }
    const UNQUOTED: &[u8] = br"#$*+-./:?@\_";
    let quoted = wide.is_empty()
        || wide.last() == Some(&BACKSLASH)
        || char::decode_utf16(wide.iter().copied()).any(|c| match c {
            Ok(c) if c.is_ascii() => !(c.is_ascii_alphanumeric() || UNQUOTED.contains(&(c as u8))),
            Ok(c) => c.is_control(),
            // Unpaired surrogates: quote them, never guess.
            Err(_) => true,
        });
    if quoted {
        line.push(QUOTE);
    }
    let mut backslashes = 0usize;
    for &c in &wide {
        if c == BACKSLASH {
            backslashes += 1;
        } else {
            if c == QUOTE {
                // Backslashes before it doubled, then the quote doubled.
                line.extend(std::iter::repeat_n(BACKSLASH, backslashes));
                line.push(QUOTE);
            } else if c == b'%' as u16 {
                line.extend(OsStr::new("%%cd:~,").encode_wide());
            }
            backslashes = 0;
        }
        line.push(c);
    }
    if quoted {
        line.extend(std::iter::repeat_n(BACKSLASH, backslashes));
        line.push(QUOTE);
    }
    Ok(())
}

/// Splits a NUL-terminated command line the way `CommandLineToArgvW` (the
/// MSVCRT rules, in shell32) does — how most programs see their `argv`.
/// Empty if it cannot be split.
pub fn split(line: &[u16]) -> Vec<OsString> {
    if line.last() != Some(&0) {
        let mut terminated = line.to_vec();
        terminated.push(0);
        return split(&terminated);
    }
    let mut count = 0;
    // SAFETY: `line` is NUL-terminated; the call allocates the array.
    let argv = unsafe { CommandLineToArgvW(line.as_ptr(), &mut count) };
    if argv.is_null() {
        return Vec::new();
    }
    let args = (0..count.max(0) as usize)
        .map(|i| {
            // SAFETY: the array holds `count` NUL-terminated strings, valid
            // until it is freed below.
            unsafe {
                let p = *argv.add(i);
                let len = (0..).take_while(|&j| *p.add(j) != 0).count();
                OsString::from_wide(std::slice::from_raw_parts(p, len))
            }
        })
        .collect();
    // SAFETY: the array came from CommandLineToArgvW and is freed once.
    unsafe { LocalFree(argv.cast()) };
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(line: &[u16]) -> String {
        String::from_utf16(&line[..line.len() - 1]).unwrap()
    }

    const TRICKY: &[&str] = &[
        "",
        "plain",
        "two words",
        "tab\there",
        "new\nline",
        "quote\"inside",
        "\"",
        "\"\"",
        "trailing\\",
        "trailing space\\",
        "two trailing\\\\",
        "back\\\\\"slash quote",
        "\\\\server\\share\\",
        "C:\\Program Files\\x\\",
        "a\\b",
        "%PATH%",
        "^&|<>()",
        "ünïcødé ✓",
        " ",
    ];

    #[test]
    fn msvcrt_rules_round_trip_tricky_arguments() {
        let args: Vec<&OsStr> = TRICKY.iter().map(OsStr::new).collect();
        let program = OsStr::new("C:\\Program Files\\tool\\tool.exe");
        let line = command_line(program, &args).unwrap();
        let parsed = split(&line);
        assert_eq!(parsed[0], program, "{}", text(&line));
        let parsed_args: Vec<&OsStr> = parsed[1..].iter().map(|a| a.as_os_str()).collect();
        assert_eq!(parsed_args, args, "line: {}", text(&line));
    }

    #[test]
    fn msvcrt_quoting_matches_the_documented_forms() {
        let cases: &[(&str, &str)] = &[
            ("", "\"\""),
            ("a b", "\"a b\""),
            ("a\"b", "a\\\"b"),
            ("a\\b", "a\\b"),
            ("a b\\", "\"a b\\\\\""),
            ("a\\\"b", "a\\\\\\\"b"),
        ];
        for (arg, want) in cases {
            let line = command_line(OsStr::new("p"), &[OsStr::new(arg)]).unwrap();
            assert_eq!(text(&line), format!("\"p\" {want}"), "for {arg:?}");
        }
    }

    #[test]
    fn refuses_what_cannot_be_expressed() {
        assert!(command_line(OsStr::new("a\"b.exe"), &[]).is_err());
        assert!(command_line(OsStr::new("p"), &[OsStr::new("nul\0byte")]).is_err());
        assert!(cmd_script(OsStr::new("cmd.exe"), OsStr::new("echo a\necho b")).is_err());
        assert!(
            batch_file(
                OsStr::new("cmd.exe"),
                OsStr::new("x.bat"),
                &[OsStr::new("a\r\nb")]
            )
            .is_err()
        );
        assert!(batch_file(OsStr::new("cmd.exe"), OsStr::new("dir\\"), &[]).is_err());
    }

    #[test]
    fn cmd_script_is_passed_verbatim_inside_one_pair_of_quotes() {
        let line = cmd_script(
            OsStr::new("C:\\Windows\\system32\\cmd.exe"),
            OsStr::new("echo \"a b\" & dir %TEMP%"),
        )
        .unwrap();
        assert_eq!(
            text(&line),
            "\"C:\\Windows\\system32\\cmd.exe\" /d /s /c \"echo \"a b\" & dir %TEMP%\""
        );
    }

    #[test]
    fn batch_arguments_are_quoted_and_defused() {
        let line = batch_file(
            OsStr::new("cmd.exe"),
            OsStr::new("C:\\x y\\run.bat"),
            &[
                OsStr::new("plain"),
                OsStr::new("a&calc"),
                OsStr::new("%PATH%"),
                OsStr::new("q\"uote"),
                OsStr::new(""),
                OsStr::new("dir\\"),
            ],
        )
        .unwrap();
        assert_eq!(
            text(&line),
            "\"cmd.exe\" /e:ON /v:OFF /d /c \"\"C:\\x y\\run.bat\" plain \"a&calc\" \
             \"%%cd:~,%PATH%%cd:~,%\" \"q\"\"uote\" \"\" \"dir\\\\\"\""
        );
    }
}
