//! `p4sec stf`: one STF test of a program, or a directory of them (`--suite`), run by
//! [`crate::stf_runner`].

use super::parse_defines;
use crate::stf_runner;
use std::path::PathBuf;
use std::process::ExitCode;

// `p4sec stf` (its description is on `Cmd::Stf`)
#[derive(clap::Args)]
pub struct Args {
    /// The P4_16 program under test (without --suite).
    pub program: Option<PathBuf>,
    /// The STF file: table entries to add, packets to send and the packets expected out
    /// (without --suite).
    pub test: Option<PathBuf>,
    /// Run every NAME.p4 / NAME.stf pair in DIR.
    #[arg(long)]
    pub suite: Option<PathBuf>,
    /// With --suite: write the suite's section of a Markdown report (FILE keeps other suites'
    /// sections).
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// With --report: the reasons for failing programs, lines `PROGRAM: reason`.
    #[arg(long)]
    pub notes: Option<PathBuf>,
    /// Print each packet's path through the pipeline.
    #[arg(long)]
    pub trace: bool,
    /// Add an include directory (single test).
    #[arg(short = 'I', value_name = "DIR")]
    pub include: Vec<PathBuf>,
    /// Define a preprocessor macro: NAME or NAME=VALUE (single test).
    #[arg(short = 'D', value_name = "NAME[=VALUE]")]
    pub define: Vec<String>,
}

pub fn run(a: Args) -> ExitCode {
    if let Some(dir) = a.suite {
        return stf_runner::run_suite(&dir, a.report.as_deref(), a.notes.as_deref());
    }
    match (a.program, a.test) {
        (Some(p), Some(t)) => {
            stf_runner::run_one_cli(&p, &t, &a.include, &parse_defines(&a.define), a.trace)
        }
        _ => {
            eprintln!("usage: p4sec stf PROGRAM.p4 TEST.stf | p4sec stf --suite DIR");
            ExitCode::from(2)
        }
    }
}
