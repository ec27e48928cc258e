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
///
/// Each subcommand's options are added only when that subcommand is built
/// (clap's `defer`): when it is parsed, or for a help screen, the
/// completions or the man pages. Building every subcommand's options on
/// each start took ~0.15 ms of the ~1 ms of CPU a `tether run --
/// /bin/true` costs its owner.
pub fn command() -> clap::Command {
    macro_rules! deferred {
        ($cmd:expr, $($name:literal => $args:ty),* $(,)?) => {
            $cmd$(.mut_subcommand($name, |sub| sub.defer(build::<$args>)))*
        };
    }
    deferred!(
        crate::Cli::command(),
        "run" => crate::run::RunArgs,
        "sessions" => crate::durable::SessionsArgs,
        "attach" => crate::durable::AttachArgs,
        "kill" => crate::durable::KillArgs,
        "extend" => crate::durable::ExtendArgs,
        "holder" => crate::durable::HolderArgs,
        "ps" => crate::ps::PsArgs,
        "reap" => crate::reap::ReapArgs,
        "mcp" => tether_mcp::Options,
        "exec" => crate::exec::ExecArgs,
        "spawn-tag" => crate::spawn_tag::SpawnTagArgs,
        "init" => crate::init::InitArgs,
        "doctor" => crate::doctor::DoctorArgs,
        "completions" => crate::completions::CompletionsArgs,
        "man" => crate::man_page::ManArgs,
    )
}

/// A subcommand's options (`A`) added to it, as the derive would, with
/// its `-h` made the short form ([`examples_for_short_help`]) before clap
/// adds the help flag (whose text says whether there is a long form).
/// Its summary stays the one `Command`'s variant gives it (the options
/// type's own doc comment, as `tether_mcp::Options` has, would replace it).
fn build<A: clap::Args>(sub: clap::Command) -> clap::Command {
    let about = sub.get_about().cloned();
    let long_about = sub.get_long_about().cloned();
    let mut sub = examples_for_short_help(A::augment_args(sub));
    if let Some(about) = about {
        sub = sub.about(about);
    }
    if let Some(long_about) = long_about {
        sub = sub.long_about(long_about);
    }
    sub
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
