//! Which shell runs a `command` string (`--shell`).
//!
//! The default is the platform's: `/bin/sh -c` on Unix, `cmd.exe /d /s /c`
//! on Windows — cmd because every Windows machine has it, it starts fast,
//! and it is what Python's `subprocess(shell=True)` and Node's
//! `child_process.exec` use there, so a command an agent developer tried
//! with those behaves the same. PowerShell (`powershell`, `pwsh`) and
//! Git-for-Windows bash (`bash`) are one option away; the tool description
//! the model reads names the shell in use, so it writes commands for it.

use std::ffi::OsString;
use std::path::PathBuf;

/// The shell of `command` strings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Shell {
    /// The platform's (see the module docs).
    #[default]
    Platform,
    /// Windows PowerShell: `powershell -NoProfile -NonInteractive -Command`.
    Powershell,
    /// PowerShell 7: `pwsh -NoProfile -NonInteractive -Command`.
    Pwsh,
    /// `bash -c` (on Windows, Git for Windows' bash from `PATH`).
    Bash,
    /// Another program, given `-c <command>`.
    Program(PathBuf),
}

/// `--shell`: `sh`/`cmd` (the platform's), `powershell`, `pwsh`, `bash`, or
/// a program path that takes `-c`.
pub fn parse(text: &str) -> Result<Shell, String> {
    Ok(match text {
        "" => return Err("empty shell".into()),
        "default" | "sh" | "cmd" | "cmd.exe" => Shell::Platform,
        "powershell" | "powershell.exe" => Shell::Powershell,
        "pwsh" | "pwsh.exe" => Shell::Pwsh,
        "bash" | "bash.exe" => Shell::Bash,
        path => Shell::Program(PathBuf::from(path)),
    })
}

impl Shell {
    /// The argv that runs `script`; `None` for the platform shell (the
    /// library's own `RunSpec::shell`, which quotes for cmd.exe itself).
    pub fn argv(&self, script: &str) -> Option<Vec<OsString>> {
        let ps = |program: &str| {
            vec![
                program.into(),
                "-NoProfile".into(),
                "-NonInteractive".into(),
                "-Command".into(),
                script.into(),
            ]
        };
        Some(match self {
            Shell::Platform => return None,
            Shell::Powershell => ps("powershell"),
            Shell::Pwsh => ps("pwsh"),
            Shell::Bash => vec!["bash".into(), "-c".into(), script.into()],
            Shell::Program(path) => vec![path.into(), "-c".into(), script.into()],
        })
    }

    /// How the tool description names it.
    pub fn describe(&self) -> String {
        match self {
            Shell::Platform => crate::platform_shell!().into(),
            Shell::Powershell => "Windows PowerShell (powershell -Command)".into(),
            Shell::Pwsh => "PowerShell 7 (pwsh -Command)".into(),
            Shell::Bash => "bash -c".into(),
            Shell::Program(path) => format!("{} -c", path.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_build_argvs() {
        assert_eq!(parse("cmd").unwrap(), Shell::Platform);
        assert_eq!(parse("sh").unwrap().argv("x"), None);
        let ps = parse("pwsh").unwrap().argv("Get-Date").unwrap();
        assert_eq!(ps.first().unwrap(), "pwsh");
        assert_eq!(ps.last().unwrap(), "Get-Date");
        let bash = parse("bash").unwrap().argv("ls -la").unwrap();
        assert_eq!(bash, ["bash", "-c", "ls -la"]);
        assert!(parse("").is_err());
    }
}
