//! The `grove` command: parses the command line, runs it, and prints the error chain.

use std::process::ExitCode;

fn main() -> ExitCode {
    match grove::cli::run() {
        Ok(code) => code,
        Err(err) => {
            if let Some(stopped) = err.downcast_ref::<grove::task::base::options::Stopped>() {
                eprintln!("{stopped}");
                return ExitCode::from(130);
            }
            // Grammar errors already read `file:line:col: error: message`, one per line.
            match err.downcast_ref::<grove::grammar::GrammarError>() {
                Some(g) => eprintln!("{g}"),
                None => eprintln!("error: {err:#}"),
            }
            ExitCode::FAILURE
        }
    }
}
