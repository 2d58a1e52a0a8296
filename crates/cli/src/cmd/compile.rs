//! `p4sec compile` (also run as `p4c`/`p4c-bm2-ss`, [`crate::bmv2`]): its flags, the compiler
//! run on the program, and the files written (the program, the P4Info in each format asked for).

use super::parse_defines;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

// `p4sec compile` (its description is on `Cmd::Compile`)
#[derive(clap::Args)]
pub struct Args {
    /// The P4_16 program (v1model architecture) to compile.
    pub program: PathBuf,
    /// The output directory (created when missing): program.json for `p4sec switch --program`
    /// and `SetForwardingPipelineConfig` (also as NAME.json, the name p4c gives it, after the
    /// source NAME.p4), p4info.txtpb and p4info.binpb for P4Runtime clients. A name ending in
    /// .json: the program file only.
    #[arg(
        short = 'o',
        long = "out",
        value_name = "OUTDIR|FILE.json",
        required_unless_present = "as_p4c"
    )]
    pub out: Option<PathBuf>,
    /// Run as `p4c`/`p4c-bm2-ss` (by that name): write what p4c writes, OUTDIR/NAME.json (-o
    /// default: .) and the P4Info files asked for.
    #[arg(long = "as-p4c", hide = true)]
    pub as_p4c: bool,
    /// Add an include directory.
    #[arg(short = 'I', value_name = "DIR")]
    pub include: Vec<PathBuf>,
    /// Define a preprocessor macro: NAME or NAME=VALUE.
    #[arg(short = 'D', value_name = "NAME[=VALUE]")]
    pub define: Vec<String>,
    /// Also write the P4Info to these files, comma-separated (repeatable), the format by
    /// extension: .txt, .txtpb or .pb.txt text, .json JSON, .bin, .binpb or .pb binary protobuf
    /// (p4c's flag).
    #[arg(
        long = "p4runtime-files",
        value_delimiter = ',',
        value_name = "FILE[,FILE...]"
    )]
    pub p4runtime_files: Vec<PathBuf>,
    /// Also write the P4Info to FILE, in --p4runtime-format (p4c's older flag).
    #[arg(long = "p4runtime-file", value_name = "FILE")]
    pub p4runtime_file: Option<PathBuf>,
    /// The format of --p4runtime-file.
    #[arg(long = "p4runtime-format", value_name = "FORMAT", value_parser = ["text", "json", "binary"], default_value = "text")]
    pub p4runtime_format: String,
    /// The target (p4c's flag): bmv2 only, the target whose v1model p4sec runs.
    #[arg(long, short = 'b', value_name = "TARGET", value_parser = ["bmv2"])]
    pub target: Option<String>,
    /// The architecture (p4c's flag): v1model only.
    #[arg(long, short = 'a', value_name = "ARCH", value_parser = ["v1model"])]
    pub arch: Option<String>,
    /// The language version (p4c's flag): p4-16 only.
    #[arg(long, value_name = "STD", value_parser = ["p4-16"])]
    pub std: Option<String>,
    /// The language version as p4c-bm2-ss takes it: 16 only.
    #[arg(long, value_name = "VERSION", value_parser = ["16"])]
    pub p4v: Option<String>,
    /// Accepted for p4c's sake and ignored: p4sec's program file always describes the externs
    /// it calls.
    #[arg(long)]
    pub emit_externs: bool,
    /// Accepted for p4c's sake (debug information): p4sec's program file keeps the names of
    /// tables, actions and parser states always.
    #[arg(short = 'g')]
    pub debug_info: bool,
    /// Accepted for p4c's sake: p4c's verbosity (p4sec's compiler says only what is wrong).
    #[arg(short = 'v', long = "verbose", value_name = "N", num_args = 0..=1, default_missing_value = "1")]
    pub verbose: Option<u32>,
    /// Accepted for p4c's sake: p4c's diagnostics to silence or demote (p4sec's compiler
    /// issues errors only).
    #[arg(long = "Wdisable", alias = "Wwarn", value_name = "DIAG", num_args = 0..=1, default_missing_value = "")]
    pub wdisable: Vec<String>,
}

pub fn run(a: Args) -> ExitCode {
    // (--target, --arch, --std, --p4v: their one accepted value is checked by the parser;
    // --emit-externs ignored)
    let mut infos = vec![];
    for f in a.p4runtime_files {
        match P4InfoFormat::of(&f) {
            Some(fmt) => infos.push((f, fmt)),
            None => {
                eprintln!(
                    "p4sec compile: --p4runtime-files {}: unknown P4Info format (by extension: .txt, .txtpb or .pb.txt text; .json; .bin, .binpb or .pb binary)",
                    f.display()
                );
                return ExitCode::from(2);
            }
        }
    }
    if let Some(f) = a.p4runtime_file {
        infos.push((f, P4InfoFormat::named(&a.p4runtime_format)));
    }
    let prog = match compile(&a.program, &a.include, &parse_defines(&a.define)) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let out = a.out.unwrap_or_else(|| PathBuf::from("."));
    write_compiled(&prog, &a.program, &out, &infos, a.as_p4c)
}

fn compile(
    path: &Path,
    include: &[PathBuf],
    defines: &[(String, Option<String>)],
) -> Result<p4sec_ir::Program, String> {
    let opts = p4sec_frontend::CompileOptions {
        include_dirs: include.to_vec(),
        defines: defines.to_vec(),
    };
    p4sec_frontend::compile_file(path, &opts).map_err(|e| e.to_string())
}

/// The formats `--p4runtime-files` and `--p4runtime-format` write the P4Info in.
#[derive(Clone, Copy)]
enum P4InfoFormat {
    Text,
    Json,
    Binary,
}

impl P4InfoFormat {
    /// The format a file name asks for, by its extension (as p4c decides).
    fn of(path: &Path) -> Option<P4InfoFormat> {
        let name = path.file_name()?.to_str()?.to_ascii_lowercase();
        if name.ends_with(".pb.txt") || name.ends_with(".txt") || name.ends_with(".txtpb") {
            Some(P4InfoFormat::Text)
        } else if name.ends_with(".json") {
            Some(P4InfoFormat::Json)
        } else if name.ends_with(".bin") || name.ends_with(".binpb") || name.ends_with(".pb") {
            Some(P4InfoFormat::Binary)
        } else {
            None
        }
    }

    /// A `--p4runtime-format` value (the parser admits only these three).
    fn named(s: &str) -> P4InfoFormat {
        match s {
            "json" => P4InfoFormat::Json,
            "binary" => P4InfoFormat::Binary,
            _ => P4InfoFormat::Text,
        }
    }
}

/// Writes what `p4sec compile` produces: the program into `out` (a directory, or a file named
/// *.json) and the P4Info into `infos`, saying what it wrote.
fn write_compiled(
    prog: &p4sec_ir::Program,
    source: &Path,
    out: &Path,
    infos: &[(PathBuf, P4InfoFormat)],
    as_p4c: bool,
) -> ExitCode {
    use p4sec_p4runtime::prost_message::Message;
    let binpb = p4sec_p4runtime::p4info::p4info(prog).encode_to_vec();
    // the one P4Info message, written in each format from its bytes
    let text = match p4sec_p4runtime::text::to_text("p4.config.v1.P4Info", &binpb) {
        Ok(t) => t.into_bytes(),
        Err(e) => {
            eprintln!("p4sec compile: cannot write the P4Info in the text format: {e}");
            return ExitCode::FAILURE;
        }
    };
    let json = prog.to_json().into_bytes();
    let mut files: Vec<(PathBuf, Vec<u8>)> = vec![];
    let is_file = out
        .extension()
        .is_some_and(|x| x.eq_ignore_ascii_case("json"))
        && !out.is_dir();
    if is_file {
        files.push((out.to_path_buf(), json));
    } else {
        // p4c names the program after the source (build/NAME.json); p4sec's own tools read
        // program.json
        let stem = source
            .file_stem()
            .map(|s| format!("{}.json", s.to_string_lossy()))
            .unwrap_or_else(|| "program.json".into());
        if as_p4c {
            // (as p4c: its one output in the directory)
            files.push((out.join(stem), json));
        } else {
            if stem != "program.json" {
                files.push((out.join(stem), json.clone()));
            }
            files.push((out.join("program.json"), json));
            files.push((out.join("p4info.txtpb"), text.clone()));
            files.push((out.join("p4info.binpb"), binpb.clone()));
        }
    }
    for (path, fmt) in infos {
        let bytes = match fmt {
            P4InfoFormat::Text => text.clone(),
            P4InfoFormat::Binary => binpb.clone(),
            P4InfoFormat::Json => {
                match p4sec_p4runtime::json::to_json("p4.config.v1.P4Info", &binpb) {
                    Ok(j) => j.into_bytes(),
                    Err(e) => {
                        eprintln!("p4sec compile: the P4Info in JSON: {e}");
                        return ExitCode::FAILURE;
                    }
                }
            }
        };
        files.push((path.clone(), bytes));
    }
    for (path, bytes) in files {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if let Err(e) = std::fs::create_dir_all(dir) {
                eprintln!("p4sec compile: cannot create {}: {e}", dir.display());
                return ExitCode::FAILURE;
            }
        }
        if let Err(e) = std::fs::write(&path, bytes) {
            eprintln!("p4sec compile: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("wrote {}", path.display());
    }
    ExitCode::SUCCESS
}
