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
            // No message echoes a value whole: a line past this length is cut (the values in
            // it are cut where they are named; this bounds what they did not).
            const LINE: usize = 2000;
            match err.downcast_ref::<grove::grammar::GrammarError>() {
                Some(g) => g.to_string().lines().for_each(|l| eprintln!("{}", grove::input::clip(l, LINE))),
                None => eprintln!("{}", grove::input::clip(&format!("error: {err:#}").replace('\n', " "), LINE)),
            }
            ExitCode::FAILURE
        }
    }
}
