//! `p4sec`: the one binary of the p4sec switch.
//!
//! Subcommands: `compile` (P4 → program + P4Info), `stf` (run STF packet tests), `bench` (engine
//! forwarding benchmark).

mod bench;
mod stf_runner;

#[global_allocator]
static GLOBAL: bench::CountingAlloc = bench::CountingAlloc;

use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "p4sec", version, about = "A P4-programmable software switch with security in its data plane")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Compile a P4_16 v1model program: writes OUTDIR/program.json and OUTDIR/p4info.txtpb.
    Compile {
        program: PathBuf,
        #[arg(short = 'o', long = "out")]
        out: PathBuf,
        /// Add an include directory.
        #[arg(short = 'I', value_name = "DIR")]
        include: Vec<PathBuf>,
        /// Define a preprocessor macro: NAME or NAME=VALUE.
        #[arg(short = 'D', value_name = "NAME[=VALUE]")]
        define: Vec<String>,
    },
    /// Run STF packet tests: `p4sec stf PROGRAM.p4 TEST.stf` or `p4sec stf --suite DIR`.
    Stf {
        program: Option<PathBuf>,
        test: Option<PathBuf>,
        /// Run every NAME.p4 / NAME.stf pair in DIR.
        #[arg(long)]
        suite: Option<PathBuf>,
        /// With --suite: write a Markdown report of the failures to FILE.
        #[arg(long)]
        report: Option<PathBuf>,
        /// Print each packet's path through the pipeline.
        #[arg(long)]
        trace: bool,
    },
    /// Forwarding benchmark: the IPv4 LPM router over 64-byte packets, in process, one core.
    Bench {
        /// Number of routes in the LPM table.
        #[arg(long, default_value_t = 10_000)]
        routes: u32,
        /// Seconds to measure.
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        /// Write the figures as JSON.
        #[arg(long)]
        json: Option<PathBuf>,
    },
}

fn parse_defines(defs: &[String]) -> Vec<(String, Option<String>)> {
    defs.iter()
        .map(|d| match d.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (d.clone(), None),
        })
        .collect()
}

pub fn compile(path: &Path, include: &[PathBuf], defines: &[(String, Option<String>)]) -> Result<p4sec_ir::Program, String> {
    let opts = p4sec_frontend::CompileOptions { include_dirs: include.to_vec(), defines: defines.to_vec() };
    p4sec_frontend::compile_file(path, &opts).map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Compile { program, out, include, define } => {
            let prog = match compile(&program, &include, &parse_defines(&define)) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("{e}");
                    return ExitCode::FAILURE;
                }
            };
            if let Err(e) = std::fs::create_dir_all(&out) {
                eprintln!("p4sec compile: cannot create {}: {e}", out.display());
                return ExitCode::FAILURE;
            }
            let files = [("program.json", prog.to_json()), ("p4info.txtpb", p4sec_ir::p4info::to_text(&prog))];
            for (name, text) in files {
                let path = out.join(name);
                if let Err(e) = std::fs::write(&path, text) {
                    eprintln!("p4sec compile: cannot write {}: {e}", path.display());
                    return ExitCode::FAILURE;
                }
            }
            ExitCode::SUCCESS
        }
        Cmd::Stf { program, test, suite, report, trace } => {
            if let Some(dir) = suite {
                return stf_runner::run_suite(&dir, report.as_deref());
            }
            match (program, test) {
                (Some(p), Some(t)) => stf_runner::run_one_cli(&p, &t, trace),
                _ => {
                    eprintln!("usage: p4sec stf PROGRAM.p4 TEST.stf | p4sec stf --suite DIR");
                    ExitCode::from(2)
                }
            }
        }
        Cmd::Bench { routes, seconds, json } => bench::run(routes, seconds, json.as_deref()),
    }
}
