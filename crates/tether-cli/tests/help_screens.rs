//! `-h` fits a screen and ends with examples; `--help` is the long form
//! and carries the same examples; completions and man pages are generated
//! from the same command line and know every subcommand.

// The suite runs on Linux (real bash and groff read what is generated);
// the help itself is platform-free.
#![cfg(target_os = "linux")]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Output, Stdio};

use support::tether;

/// The screen `-h` must fit: 80 columns (clap wraps to `COLUMNS` when
/// stdout is not a terminal), 40 rows — a laptop's terminal at its default
/// font, with room for the prompt. `tether run -h` with 11 options and
/// 4 examples is 31 rows.
const COLUMNS: usize = 80;
const ROWS: usize = 40;

fn run(args: &[&str]) -> Output {
    let out = tether()
        .args(args)
        .env("COLUMNS", COLUMNS.to_string())
        .stdin(Stdio::null())
        .output()
        .expect("run tether");
    assert!(
        out.status.success(),
        "tether {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn text(args: &[&str]) -> String {
    String::from_utf8(run(args).stdout).expect("UTF-8 help")
}

/// Every subcommand, as `tether --help` lists them (so a new one is
/// checked without editing this test).
fn subcommands() -> Vec<String> {
    let help = text(&["--help"]);
    let list = help
        .split("Commands:\n")
        .nth(1)
        .expect("a Commands: section")
        .split("\n\n")
        .next()
        .unwrap();
    let names: Vec<String> = list
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect();
    for expected in ["run", "mcp", "ps", "reap", "doctor", "completions", "man"] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} missing from {names:?}"
        );
    }
    names
}

/// The `Examples:` section at the end of a help text.
fn examples(help: &str) -> &str {
    let at = help
        .rfind("Examples:\n")
        .unwrap_or_else(|| panic!("no Examples: section in\n{help}"));
    help[at..].trim_end()
}

#[test]
fn short_help_fits_a_screen_and_ends_with_examples() {
    let mut screens = vec![vec![]];
    screens.extend(subcommands().into_iter().map(|s| vec![s]));
    for args in screens {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let short = text(&[args.as_slice(), &["-h"]].concat());
        let long = text(&[args.as_slice(), &["--help"]].concat());
        let rows = short.lines().count();
        assert!(
            rows <= ROWS,
            "tether {args:?} -h is {rows} rows at {COLUMNS} columns, more than a screen \
             ({ROWS}):\n{short}"
        );
        let too_wide: Vec<&str> = short
            .lines()
            .filter(|l| l.chars().count() > COLUMNS)
            .collect();
        assert!(too_wide.is_empty(), "tether {args:?} -h: {too_wide:?}");
        if !args.is_empty() {
            // The help flag's own line says a long form exists: the
            // subcommand's options and texts were in place when clap made
            // it (they are added late, `help::command`).
            assert!(
                short.contains("see more with '--help'"),
                "tether {args:?} -h does not point at --help:\n{short}"
            );
        }
        let short_examples = examples(&short);
        assert!(
            short_examples.lines().count() >= 2,
            "tether {args:?} -h has no example:\n{short}"
        );
        assert!(
            long.contains(short_examples),
            "tether {args:?} --help lacks the examples of -h:\n{long}"
        );
        assert!(
            long.lines().count() >= rows,
            "tether {args:?} --help is shorter than -h"
        );
    }
    // A subcommand's summary is its variant's, not its options type's doc
    // comment (`tether_mcp::Options` has one of its own).
    for args in [&["mcp", "-h"][..], &["help"]] {
        let screen = text(args);
        assert!(
            screen.contains("Serve a terminal tool to agents over MCP"),
            "tether {args:?}:\n{screen}"
        );
    }
    // The long form carries what -h leaves out.
    let run_long = text(&["run", "--help"]);
    let run_short = text(&["run", "-h"]);
    assert!(run_long.contains("Exit status") && !run_short.contains("Exit status"));
}

/// Issue 34 item 9 / issue 39: `run --help` and tether-run(1) said SIGINT,
/// SIGTERM and SIGHUP go to the program's process group; SIGTERM and SIGHUP
/// go to every process of the tree (regression.rs tests that a `setsid`
/// child gets the SIGTERM).
#[test]
fn run_help_and_man_page_say_where_each_signal_goes() {
    let words = |text: &str| {
        // Roff escapes `-` and `'`.
        text.replace("\\-", "-")
            .replace("\\*(Aq", "'")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    for args in [&["run", "--help"][..], &["man", "run"]] {
        let text = words(&text(args));
        for said in [
            "SIGINT sent to tether is forwarded to the program's process group",
            "SIGTERM and SIGHUP to every process of the tree at once",
            "the whole tree is killed after --grace",
        ] {
            assert!(
                text.contains(said),
                "tether {args:?} does not say {said:?}:\n{text}"
            );
        }
        assert!(!text.contains("SIGINT, SIGTERM and SIGHUP sent to tether are forwarded to the program's process group"), "tether {args:?}");
    }
}

#[test]
fn completions_know_every_subcommand() {
    let subcommands = subcommands();
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let script = text(&["completions", shell]);
        for sub in &subcommands {
            assert!(
                script.contains(sub.as_str()),
                "{shell} completions never mention {sub}"
            );
        }
        // Options of subcommands too, not only their names (fish writes
        // `-l timeout`).
        assert!(script.contains("timeout"), "{shell}: no --timeout");
    }
    let out = tether()
        .args(["completions", "tcsh"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(125),
        "an unknown shell is bad input"
    );
}

#[test]
fn bash_completion_completes_subcommands_and_options() {
    // The script loads into a real bash and completes `tether r` and
    // `tether run --ti` the way a user's Tab would.
    let script = text(&["completions", "bash"]);
    let probe = format!(
        "{script}\n\
         COMP_WORDS=(tether r); COMP_CWORD=1; _tether tether r tether; echo \"${{COMPREPLY[*]}}\"\n\
         COMP_WORDS=(tether run --ti); COMP_CWORD=2; _tether tether --ti run; echo \"${{COMPREPLY[*]}}\""
    );
    let out = Command::new("bash")
        .args(["--norc", "-c", &probe])
        .stdin(Stdio::null())
        .output()
        .expect("run bash");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut lines = stdout.lines();
    let first = lines.next().unwrap_or_default();
    assert!(
        first.split(' ').any(|w| w == "run") && first.split(' ').any(|w| w == "reap"),
        "`tether r<Tab>` gave {first:?}; stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let second = lines.next().unwrap_or_default();
    assert_eq!(second, "--timeout", "`tether run --ti<Tab>`");
}

#[test]
fn man_pages_cover_every_subcommand() {
    let subcommands = subcommands();
    let overview = text(&["man"]);
    assert!(overview.contains("\n.TH tether 1 "), "{overview}");
    assert_eq!(overview.matches(".TH ").count(), 1, "{overview}");
    for sub in &subcommands {
        assert!(
            overview.contains(&format!("tether\\-{}(1)", sub.replace('-', "\\-"))),
            "tether(1) does not list tether-{sub}(1)"
        );
        let page = text(&["man", sub]);
        assert!(
            page.contains(&format!("\n.TH tether-{sub} 1 ")),
            "tether man {sub}: {}",
            &page[..page.len().min(300)]
        );
        assert!(
            page.contains(".SH EXAMPLES"),
            "tether-{sub}(1) has no EXAMPLES"
        );
        assert_troff_reads(&page, sub);
        assert!(
            page.contains(".SH SYNOPSIS"),
            "tether-{sub}(1) has no SYNOPSIS"
        );
    }
    assert_troff_reads(&overview, "tether");
    let run = text(&["man", "run"]);
    assert!(run.contains("\\-\\-timeout") && run.contains("Exit status"));

    let dir = tempfile::tempdir().unwrap();
    let listed = text(&["man", "--dir", dir.path().to_str().unwrap()]);
    let mut written: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    written.sort();
    let mut expected: Vec<String> = subcommands
        .iter()
        .map(|s| format!("tether-{s}.1"))
        .chain(["tether.1".to_owned()])
        .collect();
    expected.sort();
    assert_eq!(written, expected);
    assert_eq!(listed.lines().count(), expected.len());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("tether-run.1")).unwrap(),
        run
    );

    let out = tether()
        .args(["man", "nonesuch"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).contains("run"));
}

/// groff formats `page` without a warning (`-ww`: all of them), as `man`
/// would; non-ASCII input is one (the pages escape it).
fn assert_troff_reads(page: &str, name: &str) {
    use std::io::Write;
    let groff = Command::new("groff")
        .args(["-man", "-Tutf8", "-ww", "-z"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    // CI installs groff-base (.ci/run); elsewhere say what is missing.
    let Ok(mut groff) = groff else {
        tether_testkit::require(false, "groff (Debian: groff-base) to check the man pages");
        return;
    };
    groff
        .stdin
        .take()
        .unwrap()
        .write_all(page.as_bytes())
        .unwrap();
    let out = groff.wait_with_output().unwrap();
    let warnings = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && warnings.is_empty(),
        "groff on {name}'s page: {warnings}"
    );
}

/// The long options an options screen (`-h` or `--help`) lists, with the
/// name of each one's value (`--timeout` → `Some("DUR")`), `--help` and
/// `--version` left out.
fn help_options(help: &str) -> BTreeMap<String, Option<String>> {
    let section = help
        .split("\nOptions:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no Options: section in\n{help}"));
    section
        .lines()
        .filter(|l| {
            let indent = l.len() - l.trim_start().len();
            (2..=6).contains(&indent) && l.trim_start().starts_with('-')
        })
        .filter_map(|l| {
            let mut words = l.split_whitespace().skip_while(|w| !w.starts_with("--"));
            let long = words.next()?.trim_end_matches(',').to_owned();
            let value = words
                .next()
                .and_then(|w| w.strip_prefix('<')?.strip_suffix('>'))
                .map(str::to_owned);
            Some((long, value))
        })
        .filter(|(long, _)| long != "--help" && long != "--version")
        .collect()
}

/// The options docs/cli.md documents, per subcommand: the rows of its
/// option tables (`| option | meaning | default |`), whose first cell
/// names one or more options in backticks (`` `--memory SIZE` / `--pids
/// N` ``). A table belongs to the subcommands its section's heading names
/// (`` ## `tether ps` and `tether reap` ``), or to the one its first header
/// cell names (`` `tether man` option ``); a table with a column per
/// subcommand (`` | option | `ps` | `reap` | ``) gives an option to those
/// whose cell is not `—`.
fn documented_options(doc: &str) -> BTreeMap<String, BTreeSet<String>> {
    fn cells(row: &str) -> Vec<&str> {
        let row = row.trim().trim_start_matches('|').trim_end_matches('|');
        // `\|` inside a cell is not a column break.
        let mut cells = Vec::new();
        let mut start = 0;
        let bytes = row.as_bytes();
        for (i, &b) in bytes.iter().enumerate() {
            if b == b'|' && (i == 0 || bytes[i - 1] != b'\\') {
                cells.push(row[start..i].trim());
                start = i + 1;
            }
        }
        cells.push(row[start..].trim());
        cells
    }
    fn commands(text: &str) -> Vec<String> {
        text.split("`tether ")
            .skip(1)
            .filter_map(|rest| rest.split(['`', ' ']).next())
            .filter(|name| !name.is_empty() && !name.starts_with('-'))
            .map(str::to_owned)
            .collect()
    }
    let mut documented: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut section: Vec<String> = Vec::new();
    // The current table's subcommands, each with its column (None: all).
    let mut table: Option<Vec<(String, Option<usize>)>> = None;
    for line in doc.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            section = commands(heading);
            table = None;
            continue;
        }
        if !line.starts_with('|') {
            table = None;
            continue;
        }
        let row = cells(line);
        if row[0] == "option" || row[0].ends_with("` option") {
            let named = commands(row[0]);
            let columns: Vec<(String, Option<usize>)> = row
                .iter()
                .enumerate()
                .skip(1)
                .filter_map(|(i, c)| {
                    let name = c.strip_prefix('`')?.strip_suffix('`')?;
                    section
                        .iter()
                        .any(|s| s == name)
                        .then(|| (name.to_owned(), Some(i)))
                })
                .collect();
            table = Some(if !columns.is_empty() {
                columns
            } else if !named.is_empty() {
                named.into_iter().map(|n| (n, None)).collect()
            } else {
                section.iter().map(|n| (n.clone(), None)).collect()
            });
            continue;
        }
        let Some(owners) = &table else { continue };
        let options: Vec<String> = row[0]
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|span| span.starts_with('-'))
            .filter_map(|span| span.split_whitespace().next())
            .map(str::to_owned)
            .collect();
        for (command, column) in owners {
            if column.is_some_and(|c| row.get(c).is_none_or(|cell| *cell == "—")) {
                continue;
            }
            documented
                .entry(command.clone())
                .or_default()
                .extend(options.iter().cloned());
        }
    }
    documented
}

/// Issue 39: the CLI reference cannot drift from the binary. Every option
/// of every subcommand's `--help` is in docs/cli.md's option tables, and
/// every option those tables give a subcommand exists.
#[test]
fn the_cli_reference_documents_every_option_and_no_other() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/cli.md");
    let doc = std::fs::read_to_string(path).expect("docs/cli.md");
    let documented = documented_options(&doc);
    let subcommands = subcommands();
    let mut wrong = Vec::new();
    for sub in &subcommands {
        let real: BTreeSet<String> = help_options(&text(&[sub, "--help"])).into_keys().collect();
        let listed = documented.get(sub).cloned().unwrap_or_default();
        for option in real.difference(&listed) {
            wrong.push(format!(
                "`tether {sub} {option}` is missing from docs/cli.md"
            ));
        }
        for option in listed.difference(&real) {
            wrong.push(format!(
                "docs/cli.md documents `tether {sub} {option}`, which does not exist"
            ));
        }
    }
    for sub in documented.keys().filter(|d| !subcommands.contains(d)) {
        wrong.push(format!(
            "docs/cli.md documents options of `tether {sub}`, which does not exist"
        ));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The parser reads what it must: a shared table's `—` cells.
    assert!(documented["ps"].contains("--tree") && !documented["reap"].contains("--tree"));
}

/// Issue 39: the man pages' SYNOPSIS named the options without their
/// values (`[--timeout]`); each option is there as `--help` shows it.
#[test]
fn man_page_synopses_name_each_options_value() {
    for sub in subcommands() {
        let page = text(&["man", &sub]);
        let synopsis = page
            .split(".SH SYNOPSIS\n")
            .nth(1)
            .and_then(|rest| rest.lines().next())
            .unwrap_or_else(|| panic!("tether-{sub}(1) has no SYNOPSIS"));
        let synopsis = synopsis
            .replace("\\fB", "")
            .replace("\\fI", "")
            .replace("\\fR", "")
            .replace("\\-", "-");
        for (option, value) in help_options(&text(&[&sub, "-h"])) {
            let shown = match value {
                Some(value) => format!("{option} {value}"),
                None => format!("[{option}]"),
            };
            assert!(
                synopsis.contains(&shown),
                "tether-{sub}(1)'s SYNOPSIS lacks {shown:?}: {synopsis}"
            );
        }
    }
}

/// Issue 39: `tether mcp -h` showed `--shell … [default: default]`; a
/// default a help screen shows is a value the option takes, never a
/// placeholder or an empty string.
#[test]
fn shown_defaults_say_something() {
    for sub in subcommands() {
        for flag in ["-h", "--help"] {
            let help = text(&[&sub, flag]);
            for bad in ["[default: default]", "[default: \"\"]", "[default: ]"] {
                assert!(
                    !help.contains(bad),
                    "tether {sub} {flag} shows {bad}:\n{help}"
                );
            }
        }
    }
}

/// Issue 39: `reap -h` listed the interactive purposes without
/// `interactive-*`. Every purpose `reap` refuses is named by `-h`, `--help`
/// and docs/cli.md.
#[test]
fn reap_names_every_purpose_it_refuses() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/cli.md"))
        .expect("docs/cli.md");
    let words = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    let purposes: Vec<String> = tether_ledger::proof::INTERACTIVE_PURPOSES
        .iter()
        .map(|p| format!("{p},"))
        .chain(["interactive.*".into(), "interactive-*".into()])
        .collect();
    for (what, text) in [
        ("reap -h", words(&text(&["reap", "-h"]))),
        ("reap --help", words(&text(&["reap", "--help"]))),
        ("docs/cli.md", words(&doc.replace('`', ""))),
    ] {
        for purpose in &purposes {
            assert!(
                text.contains(purpose.as_str()),
                "{what} does not name {purpose}"
            );
        }
    }
    // What the list claims is what is refused.
    for purpose in ["interactive-python", "interactive.py", "tui"] {
        let out = tether()
            .args(["reap", "--dry-run", "--purpose", purpose])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(125), "{purpose}");
    }
}
