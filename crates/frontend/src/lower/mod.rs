//! Name resolution, type checking, constant evaluation and lowering of a v1model program to the IR.
//!
//! The lowering elaborates the program from `main`: every parser/control instance, function and
//! directly called action is inlined with its own storage, so the IR refers only to slots, tables
//! and externs. Types are computed for every expression as it is lowered; mismatches are reported
//! with a span.

mod access;
mod actions;
mod annotations;
mod assignment;
mod calls;
mod casts;
mod controls;
mod conversions;
mod decl;
mod env;
mod expr;
mod extern_functions;
mod externs;
mod instances;
mod loops;
mod lowerer;
mod methods;
mod operators;
mod order;
mod p4info_notes;
mod package;
mod parsers;
mod runloops;
mod stmt;
mod storage;
mod tables;
mod type_resolution;

pub use annotations::*;
pub use env::*;

use crate::ast;
use crate::diag::PResult;
use lowerer::Lowerer;
use p4sec_ir as ir;

/// Lower a parsed program. `text` is the preprocessed source (used for key names).
pub fn lower_program(prog: &ast::Program, text: &str) -> PResult<ir::Program> {
    let mut lw = Lowerer::new(text);
    lw.declare_globals(prog)?;
    lw.elaborate_main(prog)?;
    Ok(lw.finish())
}
