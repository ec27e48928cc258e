//! `tether man`: man pages generated from the command line itself —
//! `tether(1)` and one page per subcommand (`tether-run(1)`, …), as git
//! has them.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::ArgAction;
use clap::Args;
use clap_mangen::Man;
use roff::{Roff, bold, italic, roman};

use crate::EXIT_TETHER_ERROR;

#[derive(Args, Debug)]
#[command(after_help = "\
Prints tether(1) — or with COMMAND that subcommand's page, tether-COMMAND(1) — as roff on \
stdout. With --dir, writes every page (tether.1, tether-run.1, …) into DIR instead and prints \
their paths; put DIR under a MANPATH directory's man1 to read them with man.

Examples:
  tether man | man -l -
  tether man run | man -l -
  tether man --dir ~/.local/share/man/man1")]
pub struct ManArgs {
    /// The subcommand whose page to print (default: the overview, tether(1)).
    #[arg(value_name = "COMMAND", conflicts_with = "dir")]
    command: Option<String>,
    /// Write every page into DIR (created if missing) instead of printing one.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

pub fn main(args: ManArgs) -> ExitCode {
    let fail = |what: String| {
        eprintln!("tether man: {what}");
        ExitCode::from(EXIT_TETHER_ERROR)
    };
    let pages = pages();
    if let Some(dir) = args.dir {
        if let Err(e) = std::fs::create_dir_all(&dir) {
            return fail(format!("{}: {e}", dir.display()));
        }
        for (name, page) in &pages {
            let path = dir.join(name);
            if let Err(e) = std::fs::write(&path, page) {
                return fail(format!("{}: {e}", path.display()));
            }
            println!("{}", path.display());
        }
        return ExitCode::SUCCESS;
    }
    let wanted = match &args.command {
        Some(command) => format!("tether-{command}.1"),
        None => "tether.1".to_owned(),
    };
    let Some((_, page)) = pages.iter().find(|(name, _)| *name == wanted) else {
        let names: Vec<&str> = pages
            .iter()
            .filter_map(|(name, _)| name.strip_prefix("tether-")?.strip_suffix(".1"))
            .collect();
        return fail(format!(
            "no page for {:?}; the subcommands are: {}",
            args.command.unwrap_or_default(),
            names.join(", ")
        ));
    };
    match std::io::stdout().lock().write_all(page) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e.to_string()),
    }
}

/// Every page: (file name, roff), `tether.1` first.
pub fn pages() -> Vec<(String, Vec<u8>)> {
    let mut cmd = crate::help::command().disable_help_subcommand(true);
    cmd.build();
    let mut pages = vec![page(&cmd)];
    pages.extend(cmd.get_subcommands().filter(|s| !s.is_hide_set()).map(page));
    pages
}

/// One page: clap_mangen's sections, with the long help after the options
/// rendered as prose and an EXAMPLES section (clap_mangen would run its
/// lines together into one paragraph).
fn page(cmd: &clap::Command) -> (String, Vec<u8>) {
    let man = Man::new(cmd.clone()).source(concat!("tether ", env!("CARGO_PKG_VERSION")));
    let mut out = Vec::new();
    let sections = [Man::render_title, Man::render_name_section];
    for render in sections {
        render(&man, &mut out).expect("writing to a Vec");
    }
    synopsis(cmd).to_writer(&mut out).expect("writing to a Vec");
    man.render_description_section(&mut out)
        .expect("writing to a Vec");
    let text = cmd
        .get_after_long_help()
        .or_else(|| cmd.get_after_help())
        .map(|t| t.to_string())
        .unwrap_or_default();
    let (prose, examples) = match text.find("Examples:\n") {
        Some(at) => (&text[..at], &text[at + "Examples:\n".len()..]),
        None => (text.as_str(), ""),
    };
    let mut roff = Roff::new();
    paragraphs(&mut roff, prose);
    roff.to_writer(&mut out).expect("writing to a Vec");
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut out)
            .expect("writing to a Vec");
    }
    if cmd.has_subcommands() {
        man.render_subcommands_section(&mut out)
            .expect("writing to a Vec");
    }
    if !examples.trim().is_empty() {
        let mut roff = Roff::new();
        roff.control("SH", ["EXAMPLES"]);
        roff.control("nf", []);
        for line in examples.lines() {
            roff.text([roman(line)]);
        }
        roff.control("fi", []);
        roff.to_writer(&mut out).expect("writing to a Vec");
    }
    if cmd.get_version().is_some() {
        man.render_version_section(&mut out)
            .expect("writing to a Vec");
    }
    (man.get_filename(), finish(out))
}

/// The SYNOPSIS section: every option with its value's name, as `--help`
/// shows them (`[--timeout DUR]`, `[--env KEY=VALUE]...`), then the
/// operands (clap_mangen's own lists the option names alone, issue 39).
fn synopsis(cmd: &clap::Command) -> Roff {
    let name = cmd.get_bin_name().unwrap_or_else(|| cmd.get_name());
    let mut line = vec![bold(name)];
    // Options first, then operands, as `--help`'s usage line has them.
    let (operands, options): (Vec<_>, Vec<_>) = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .partition(|a| a.is_positional());
    for arg in options.into_iter().chain(operands) {
        line.push(roman(" "));
        let optional = !arg.is_required_set();
        if optional {
            line.push(roman("["));
        }
        if !arg.is_positional() {
            let flag = match (arg.get_short(), arg.get_long()) {
                (Some(short), Some(long)) => format!("-{short}|--{long}"),
                (Some(short), None) => format!("-{short}"),
                (None, Some(long)) => format!("--{long}"),
                (None, None) => continue,
            };
            line.push(bold(flag));
        }
        if arg.get_num_args().is_some_and(|n| n.takes_values()) {
            let value = arg.get_value_names().map_or_else(
                || arg.get_id().as_str().to_uppercase(),
                |names| names.join(" "),
            );
            if !arg.is_positional() {
                line.push(roman(" "));
            }
            line.push(italic(value));
        }
        if optional {
            line.push(roman("]"));
        }
        let repeats = matches!(arg.get_action(), ArgAction::Append | ArgAction::Count)
            || arg.get_num_args().is_some_and(|n| n.max_values() > 1);
        if repeats {
            line.push(roman("..."));
        }
    }
    if cmd.has_subcommands() {
        line.extend([roman(" "), italic("COMMAND")]);
    }
    let mut roff = Roff::new();
    roff.control("SH", ["SYNOPSIS"]);
    roff.text(line);
    roff
}

/// The page as troff wants it: roff's two-line apostrophe preamble once at
/// the top (every rendered part starts with it), and every non-ASCII
/// character (the help's dashes and ellipses) as a `\[uXXXX]` escape, which
/// groff and mandoc read whatever the input encoding.
fn finish(page: Vec<u8>) -> Vec<u8> {
    const PREAMBLE: &str = ".ie \\n(.g .ds Aq \\(aq\n.el .ds Aq '\n";
    let text = String::from_utf8(page).expect("roff is UTF-8");
    let mut out = String::with_capacity(text.len());
    if text.starts_with(PREAMBLE) {
        out.push_str(PREAMBLE);
    }
    for c in text.replace(PREAMBLE, "").chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            out.push_str(&format!("\\[u{:04X}]", c as u32));
        }
    }
    out.into_bytes()
}

/// Blank-line separated paragraphs; indented lines keep their lines.
fn paragraphs(roff: &mut Roff, text: &str) {
    for block in text.split("\n\n").filter(|b| !b.trim().is_empty()) {
        roff.control("PP", []);
        let mut filling = true;
        for line in block.lines() {
            let indented = line.starts_with(' ');
            if indented == filling {
                roff.control(if indented { "nf" } else { "fi" }, []);
                filling = !indented;
            }
            roff.text([roman(line)]);
        }
        if !filling {
            roff.control("fi", []);
        }
    }
}
