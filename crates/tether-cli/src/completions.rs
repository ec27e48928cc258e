//! `tether completions SHELL`: a completion script generated from the
//! command line itself, so it knows every subcommand and option.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use clap_complete::Shell;

use crate::EXIT_TETHER_ERROR;

#[derive(Args, Debug)]
#[command(after_help = "\
Prints the script on stdout; install it where your shell loads completions from (the paths \
below are the usual per-user ones; package managers use the system-wide ones, e.g. \
/usr/share/bash-completion/completions/tether, /usr/share/zsh/site-functions/_tether, \
/usr/share/fish/vendor_completions.d/tether.fish).

Examples:
  tether completions bash > ~/.local/share/bash-completion/completions/tether
  tether completions zsh > ~/.zfunc/_tether     (with fpath+=~/.zfunc before compinit)
  tether completions fish > ~/.config/fish/completions/tether.fish
  tether completions powershell >> $PROFILE
  tether completions elvish >> ~/.config/elvish/rc.elv")]
pub struct CompletionsArgs {
    /// The shell to write a completion script for.
    #[arg(value_enum)]
    shell: Shell,
}

pub fn main(args: CompletionsArgs) -> ExitCode {
    let mut script = Vec::new();
    clap_complete::generate(
        args.shell,
        &mut crate::help::command(),
        "tether",
        &mut script,
    );
    // Written whole, so a closed pipe (`| head`) is an error, not a panic.
    match std::io::stdout().lock().write_all(&script) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tether completions: {e}");
            ExitCode::from(EXIT_TETHER_ERROR)
        }
    }
}
