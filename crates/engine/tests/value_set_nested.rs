//! A value set whose element is a struct with a nested struct: the leaves, flattened in order, are
//! its elements; members installed through the engine select the parser state as a select with
//! those keys.

use p4sec_engine::{Engine, Outputs, Worker};
use p4sec_ir::{FieldMatch, Value};
use std::sync::Arc;

const SRC: &str = r#"
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> op; bit<8> a; bit<16> w; }
struct hs { h_t h; }
struct m { }
struct inner_t { bit<8> a; @match(ternary) bit<4> b; }
struct outer_t { bit<8> op; inner_t inr; }
parser P(packet_in pk, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    value_set<outer_t>(4) vs;
    state start {
        pk.extract(hdr.h);
        transition select(hdr.h.op, hdr.h.a, hdr.h.w[3:0]) { vs: mark; default: accept; }
    }
    state mark { hdr.h.w = 16w0xFFFF; transition accept; }
}
control VC(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { sm.egress_spec = 1; } }
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control CC(inout hs hdr, inout m meta) { apply { } }
control D(packet_out pk, in hs hdr) { apply { pk.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"#;

fn run(engine: &Engine, pkt: &[u8]) -> Vec<u8> {
    let mut worker = Worker::new(engine);
    let mut out = Outputs::default();
    engine.process(&mut worker, 0, pkt, &mut out);
    let (_, got) = out.iter().next().expect("one packet out");
    got.to_vec()
}

#[test]
fn nested_struct_value_set_matches_its_leaves() {
    let prog = p4sec_frontend::compile_str("vs.p4", SRC, &Default::default())
        .unwrap_or_else(|e| panic!("{}", e.messages.join("\n")));
    let vs = &prog.value_sets[0];
    assert_eq!(vs.widths, vec![8, 8, 4]);
    assert_eq!(
        vs.names,
        vec!["op".to_string(), "inr.a".to_string(), "inr.b".to_string()]
    );
    assert_eq!(vs.kind(2), p4sec_ir::MatchKind::Ternary);
    let engine = Engine::new(Arc::new(prog), &[]).expect("engine");
    // empty: every packet takes the default branch
    assert_eq!(run(&engine, &[1, 2, 0, 5]), vec![1, 2, 0, 5]);
    let member = vec![
        FieldMatch::Exact(Value::new(8, 1)),
        FieldMatch::Exact(Value::new(8, 2)),
        FieldMatch::Ternary {
            value: Value::new(4, 4),
            mask: Value::new(4, 0xC),
        },
    ];
    engine
        .value_set_set(0, vec![member])
        .expect("member installed");
    assert_eq!(
        run(&engine, &[1, 2, 0, 5]),
        vec![1, 2, 0xFF, 0xFF],
        "op 1, a 2, low nibble 01xx"
    );
    assert_eq!(run(&engine, &[1, 2, 0x12, 7]), vec![1, 2, 0xFF, 0xFF]);
    assert_eq!(
        run(&engine, &[1, 2, 0, 9]),
        vec![1, 2, 0, 9],
        "low nibble 10xx is outside the mask"
    );
    assert_eq!(
        run(&engine, &[1, 3, 0, 5]),
        vec![1, 3, 0, 5],
        "the nested field a differs"
    );
    // a member must give one match per leaf
    assert!(engine
        .value_set_set(0, vec![vec![FieldMatch::Exact(Value::new(8, 1))]])
        .is_err());
}
