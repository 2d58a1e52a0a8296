//! Cost of one table write (insert of a single entry, published as a new table version) as the
//! table grows: `cargo run --release -p p4sec-engine --example write_cost`.
use p4sec_engine::Engine;
use p4sec_ir::{ActionCall, FieldMatch, TableEntry, Value};
use std::sync::Arc;
use std::time::Instant;

const SRC: &str = r#"#include <v1model.p4>
header h_t { bit<32> a; bit<32> b; }
struct hs { h_t h; }
struct m { }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) { state start { p.extract(hdr.h); transition accept; } }
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    action set(bit<32> v) { hdr.h.b = v; }
    table ex { key = { hdr.h.a : exact; } actions = { set; NoAction; } size = 1000000; }
    table tern { key = { hdr.h.a : ternary; } actions = { set; NoAction; } size = 1000000; }
    apply { ex.apply(); tern.apply(); }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs hdr, inout m meta) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;

fn main() {
    let prog = p4sec_frontend::compile_str("w.p4", SRC, &Default::default()).expect("compiles");
    let e = Engine::new(Arc::new(prog), &[]).expect("engine");
    let set = e
        .prog
        .actions
        .iter()
        .position(|a| a.name == "I.set")
        .unwrap() as u32;
    for (name, ternary) in [("I.ex", false), ("I.tern", true)] {
        let t = e.table_index(name).unwrap();
        let entry = |k: u32| TableEntry {
            matches: vec![if ternary {
                FieldMatch::Ternary {
                    value: Value::new(32, k as u64),
                    mask: Value::new(32, 0xffff_ffff),
                }
            } else {
                FieldMatch::Exact(Value::new(32, k as u64))
            }],
            action: ActionCall {
                action: set,
                args: vec![Value::new(32, 1)],
            },
            priority: if ternary { 1 } else { 0 },
        };
        let mut n = 0u32;
        for size in [0u32, 1_000, 10_000, 100_000] {
            let batch: Vec<_> = (n..size).map(entry).collect();
            e.table_insert_batch(t, batch).unwrap();
            n = size;
            let mut times = vec![];
            for k in 0..50u32 {
                let t0 = Instant::now();
                e.table_insert(t, entry(10_000_000 + k)).unwrap();
                times.push(t0.elapsed().as_secs_f64() * 1e6);
                e.table_delete(t, &entry(10_000_000 + k)).unwrap();
            }
            times.sort_by(|a, b| a.partial_cmp(b).unwrap());
            println!(
                "{name:7} {size:>7} entries: one insert {:8.1} us (median of 50)",
                times[25]
            );
        }
    }
}
