//! `steplens-bench`: see [`steplens_tools::bench`].

use std::process::ExitCode;

use clap::Parser;
use steplens_tools::bench::{BenchArgs, run};

fn main() -> ExitCode {
    let args = BenchArgs::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let causes: Vec<String> = err.chain().map(ToString::to_string).collect();
            #[allow(clippy::print_stderr)]
            {
                eprintln!("steplens-bench: error: {}", causes.join(": "));
            }
            ExitCode::from(2)
        }
    }
}
