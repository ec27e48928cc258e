//! Noticing a command that wants a person: one that asked for an editor
//! (which here is a stand-in that fails with [`NO_EDITOR_MESSAGE`]), and
//! one whose output ends in a prompt (`Password:`, `[y/N]`, `Continue?`).
//! Commands here have no terminal; the result then says what to do
//! instead of leaving the model to wait for a timeout.

use std::sync::LazyLock;

use regex::Regex;

/// What the stand-in editor prints (to stderr) before it fails.
pub const NO_EDITOR_MESSAGE: &str = "tether: no editor here (commands run without a terminal): \
pass the text on the command line instead, e.g. git commit -m \"message\" or git merge \
--no-edit, or run the command in a PTY session";

/// The value of `EDITOR`, `VISUAL` and `GIT_EDITOR` for commands: a shell
/// snippet (git and most tools run the editor through `sh -c`, appending
/// the file name) that prints [`NO_EDITOR_MESSAGE`] and fails at once. A
/// program that executes it as one path fails at once too (no such file).
pub fn no_editor_command() -> String {
    let escaped = NO_EDITOR_MESSAGE.replace('"', "\\\"");
    format!("sh -c 'echo \"{escaped}\" >&2; exit 1' tether-no-editor")
}

/// The last line of an interactive program that has answered and waits for
/// the next input: Python (`>>> `, `... `), IPython (`In [3]: `), Node
/// (`> `), irb, ghci, the SQL shells, pdb and gdb, and a shell prompt
/// ending in `$ `, `# ` or `% `. With it, a REPL turn through `write`
/// returns the moment the prompt is back instead of after the quiet
/// window (a regex for [`tether::registry::WaitOptions::prompt`], matched
/// against the whole last line).
pub const REPL_PROMPT: &str = r"(?:>>>|\.\.\.) |In \[\d+\]: |(?:\x1b\[[0-9;?]*[A-Za-z])*> |irb\([^)]*\):\d+:\d+[>*] |(?:ghci|Prelude[^>]*)> |(?:sqlite|mysql|mariadb)> |[A-Za-z0-9_]+[=-]# |\((?:Pdb|gdb)\) |[^\n]{0,80}[$#%] ";

/// Whether `output` shows that the stand-in editor was run.
pub fn editor_refused(output: &str) -> bool {
    output.contains("tether: no editor here")
}

static PROMPT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?ix)
        ( (password|passphrase|passcode|username|user\ name|login|token|otp|verification\ code|pin)
              [^\n]{0,80} [:?] \s*$ )
        | ( [\[(] \s* y(es)? \s* / \s* n(o)? \s* [\])] [^\n]{0,20} $ )
        | ( (continue|proceed|overwrite|replace|are\ you\ sure|do\ you\ want)
              [^\n]{0,120} \? \s*$ )
        | ( \(yes/no(/\[fingerprint\])?\) [^\n]{0,5} $ )",
    )
    .expect("prompt regex")
});

/// The last line of `output` if it looks like a prompt waiting for an
/// answer (a prompt has no newline after it).
pub fn waiting_prompt(output: &str) -> Option<&str> {
    if output.ends_with('\n') {
        return None;
    }
    let last = output.rsplit('\n').next()?.trim_end();
    (!last.is_empty() && last.len() <= 200 && PROMPT.is_match(last)).then_some(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repl_prompts_are_whole_last_lines() {
        let prompt = regex::Regex::new(&format!(r"\A(?:{REPL_PROMPT})\z")).unwrap();
        for line in [
            ">>> ",
            "... ",
            "In [12]: ",
            "> ",
            "irb(main):001:0> ",
            "ghci> ",
            "sqlite> ",
            "postgres=# ",
            "(Pdb) ",
            "user@host:~/src$ ",
            "sh-5.2# ",
        ] {
            assert!(prompt.is_match(line), "{line:?}");
        }
        for line in ["2", ">>>", "got >>> x", "Building 50%", ""] {
            assert!(!prompt.is_match(line), "{line:?}");
        }
    }

    #[test]
    fn prompts_are_recognised_and_ordinary_lines_are_not() {
        for prompt in [
            "[sudo] password for me: ",
            "Password:",
            "Enter passphrase for key '/root/.ssh/id_ed25519': ",
            "Do you want to continue? [Y/n] ",
            "Overwrite file.txt? (y/n)",
            "Are you sure you want to continue connecting (yes/no/[fingerprint])? ",
            "Username for 'https://github.com': ",
        ] {
            assert!(waiting_prompt(prompt).is_some(), "{prompt:?}");
        }
        for line in [
            "building...\n",
            "50% done",
            "Password: ok\n",
            "compiling foo v1.0",
            "",
        ] {
            assert!(waiting_prompt(line).is_none(), "{line:?}");
        }
    }

    #[test]
    fn the_no_editor_command_is_one_shell_word_list() {
        let cmd = no_editor_command();
        assert!(cmd.starts_with("sh -c '"));
        assert!(!NO_EDITOR_MESSAGE.contains('\''), "would break the quoting");
        assert!(editor_refused(NO_EDITOR_MESSAGE));
    }
}
