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
    lower_with(Lowerer::new(text), prog)
}

/// Lowers `prog` with `lw`, then frees the lowerer's scopes, whether lowering succeeded or not.
fn lower_with(mut lw: Lowerer, prog: &ast::Program) -> PResult<ir::Program> {
    let global = lw.global.clone();
    let out = lw
        .declare_globals(prog)
        .and_then(|()| lw.elaborate_main(prog))
        .map(|()| lw.finish());
    global.release_all();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    /// Lowers `src` and tells whether its global scope outlived the lowering.
    fn scopes_outlive(src: &str) -> (bool, bool) {
        let pp = crate::pp::preprocess_str("t.p4", src, &crate::pp_options(&Default::default()))
            .expect("preprocesses");
        let prog = crate::syntax::parse_program(&pp.text).expect("parses");
        let lw = Lowerer::new(&pp.text);
        let global = Rc::downgrade(&lw.global);
        let ok = lower_with(lw, &prog).is_ok();
        (ok, global.upgrade().is_some())
    }

    #[test]
    fn lowering_frees_its_scopes_on_success_and_on_error() {
        let good = r#"#include <v1model.p4>
header h_t { bit<8> a; }
struct hs { h_t h; }
struct m { }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control C(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    action set(bit<8> v) { hdr.h.a = v; }
    table t { key = { hdr.h.a : exact; } actions = { set; } }
    apply { t.apply(); }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
"#;
        let (ok, outlives) = scopes_outlive(good);
        assert!(ok, "the program lowers");
        assert!(!outlives, "the scopes of a lowering are freed");
        // without `main`: refused after the declarations (the action and the table captured
        // their control's scope)
        let (ok, outlives) =
            scopes_outlive(&good.replace("V1Switch(P(), C(), I(), E(), C(), D()) main;", ""));
        assert!(!ok, "a program without main is refused");
        assert!(!outlives, "the scopes of a failed lowering are freed");
        let bad = "control C() { apply { undefined_name = 1; } }";
        let (ok, outlives) = scopes_outlive(bad);
        assert!(!ok);
        assert!(!outlives);
    }
}
