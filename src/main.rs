//! The `grove` command: parses the command line, runs it, and prints the error chain.

use std::process::ExitCode;

fn main() -> ExitCode {
    match grove::cli::run() {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
