//! The help screens, and the one clap command that help, completions and
//! man pages are made from.
//!
//! `-h` is one screen: usage, one line per option, examples. `--help` is
//! the long form: every option's full text and everything after it (exit
//! status, what happens to the tree, per-OS notes), ending with the same
//! examples. Each subcommand writes its long text as `after_help`, ending
//! in an `Examples:` section; [`command`] makes that the `--help` text and
//! keeps only the examples for `-h`, so the two never drift apart.

use clap::CommandFactory;

/// Where a subcommand's examples start in its `after_help`.
const EXAMPLES: &str = "Examples:\n";

/// `tether`'s command line: what `main` parses, and what `tether
/// completions` and `tether man` describe.
pub fn command() -> clap::Command {
    let mut cmd = crate::Cli::command();
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|sub| sub.get_name().to_owned())
        .collect();
    for name in names {
        cmd = cmd.mut_subcommand(name, examples_for_short_help);
    }
    cmd
}

/// `-h` shows only the examples of a subcommand's `after_help`; `--help`
/// all of it. A subcommand without examples, or with its own
/// `after_long_help`, is left as it is.
fn examples_for_short_help(sub: clap::Command) -> clap::Command {
    if sub.get_after_long_help().is_some() {
        return sub;
    }
    let Some(text) = sub.get_after_help().map(|t| t.to_string()) else {
        return sub;
    };
    match text.find(EXAMPLES) {
        Some(at) if at > 0 => {
            let examples = text[at..].to_owned();
            sub.after_long_help(text).after_help(examples)
        }
        _ => sub,
    }
}
