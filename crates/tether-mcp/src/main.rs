//! `tether-mcp`: the same server as `tether mcp`, as a program of its own
//! (for MCP clients configured with one command, and for this crate's
//! integration tests).

use clap::Parser;

/// Serve tether's terminal tools over MCP (stdio).
#[derive(Parser, Debug)]
#[command(name = "tether-mcp", version)]
struct Cli {
    #[command(flatten)]
    options: tether_mcp::Options,
}

fn main() -> std::process::ExitCode {
    // Started as a keeper, this program runs the keeper and never returns.
    tether::keeper::run_if_requested();
    tether_mcp::serve(Cli::parse().options)
}
