//! `P4SEC_ENGINE` picks the backend `Engine::new` builds: unset or empty the default (native
//! machine code), `closure` the closures, anything else an error naming the variable and the allowed values. One
//! test in its own binary: it changes the process's environment.

use p4sec_engine::{Backend, Engine, BACKEND_ENV};
use std::sync::Arc;

const PROG: &str = r#"#include <v1model.p4>
header h_t { bit<8> a; }
struct hs { h_t h; }
struct m { }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    apply { hdr.h.a = hdr.h.a + 1; sm.egress_spec = 2; }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), V(), D()) main;
"#;

#[test]
fn the_environment_picks_the_backend() {
    let prog = Arc::new(p4sec_frontend::compile_str("t.p4", PROG, &Default::default()).unwrap());
    let load = || Engine::new(prog.clone(), &[]);
    // SAFETY (edition 2021: safe to call): the only test of this binary, no other thread reads
    // the environment
    std::env::remove_var(BACKEND_ENV);
    assert_eq!(load().unwrap().backend(), Backend::Native);
    std::env::set_var(BACKEND_ENV, "");
    assert_eq!(load().unwrap().backend(), Backend::Native);
    std::env::set_var(BACKEND_ENV, "native");
    let e = load().unwrap();
    assert_eq!(e.backend(), Backend::Native);
    // and it runs: one packet through, the field incremented
    let mut w = p4sec_engine::Worker::new(&e);
    let mut out = p4sec_engine::Outputs::default();
    e.process(&mut w, 1, &[41], &mut out);
    assert_eq!(out.iter().collect::<Vec<_>>(), vec![(2, &[42u8][..])]);
    std::env::set_var(BACKEND_ENV, "Native");
    let err = load().err().expect("a bad value is refused");
    assert!(
        err.contains("P4SEC_ENGINE") && err.contains("`Native`") && err.contains("`closure`"),
        "{err}"
    );
    std::env::set_var(BACKEND_ENV, "closure");
    let c = load().unwrap();
    assert_eq!(c.backend(), Backend::Closure);
    let mut w = p4sec_engine::Worker::new(&c);
    out.clear();
    c.process(&mut w, 1, &[41], &mut out);
    assert_eq!(out.iter().collect::<Vec<_>>(), vec![(2, &[42u8][..])]);
}
