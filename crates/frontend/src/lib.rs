//! The p4sec P4_16 compiler front end: one module per phase.
//!
//! pp (preprocessor) → syntax (lexer, parser → ast) → lower (names, types, constants, inlining →
//! `p4sec_ir::Program`)
pub mod ast;
pub mod diag;
pub mod lower;
pub mod pp;
pub mod semantic_types;
pub mod syntax;

use diag::{CompileError, SourceMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The include files shipped with the compiler (`#include <core.p4>` etc.).
pub fn builtin_include(name: &str) -> Option<&'static str> {
    match name {
        "core.p4" => Some(include_str!("../../../p4include/core.p4")),
        "v1model.p4" => Some(include_str!("../../../p4include/v1model.p4")),
        "p4sec.p4" => Some(include_str!("../../../p4include/p4sec.p4")),
        _ => None,
    }
}

#[derive(Clone, Debug, Default)]
pub struct CompileOptions {
    pub include_dirs: Vec<PathBuf>,
    pub defines: Vec<(String, Option<String>)>,
}

fn pp_options(opts: &CompileOptions) -> pp::Options {
    pp::Options {
        include_dirs: opts.include_dirs.clone(),
        defines: opts.defines.clone(),
        builtin: builtin_include,
    }
}

/// Compile a P4 file to the engine's program.
pub fn compile_file(path: &Path, opts: &CompileOptions) -> Result<p4sec_ir::Program, CompileError> {
    let pp = pp::preprocess_file(path, &pp_options(opts)).map_err(|e| CompileError {
        messages: vec![e.to_string()],
    })?;
    compile_preprocessed(pp, &path.display().to_string())
}

/// Compile P4 source text (`name` is used in messages and for relative includes).
pub fn compile_str(
    name: &str,
    text: &str,
    opts: &CompileOptions,
) -> Result<p4sec_ir::Program, CompileError> {
    let pp = pp::preprocess_str(name, text, &pp_options(opts)).map_err(|e| CompileError {
        messages: vec![e.to_string()],
    })?;
    compile_preprocessed(pp, name)
}

fn compile_preprocessed(
    pp: pp::Preprocessed,
    name: &str,
) -> Result<p4sec_ir::Program, CompileError> {
    let origins: Vec<(Arc<str>, u32)> = pp.lines.iter().map(|l| (l.file.clone(), l.line)).collect();
    let map = SourceMap::new(&pp.text, origins);
    let fail = |d: diag::Diagnostic| CompileError {
        messages: vec![d.render(&map)],
    };
    let prog = syntax::parse_program(&pp.text).map_err(fail)?;
    let mut ir = lower::lower_program(&prog, &pp.text).map_err(fail)?;
    ir.source = name.to_string();
    Ok(ir)
}
