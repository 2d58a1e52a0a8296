//! Per-packet overhead of the pipeline stages (development aid): empty program vs parse-only vs
//! router.
use p4sec_engine::{Engine, Outputs, Worker};
use std::sync::Arc;
use std::time::Instant;

/// Fastest of 15 rounds of 200k packets (ns/packet): the machine is shared, so the minimum is the
/// stable figure.
fn best_of(mut f: impl FnMut()) -> f64 {
    // OVERHEAD_ROUNDS=1 for a single short round (e.g. under valgrind --tool=callgrind)
    let rounds: usize = std::env::var("OVERHEAD_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    let n = if rounds == 1 { 20_000 } else { 200_000 };
    (0..rounds)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                f();
            }
            t.elapsed().as_secs_f64() * 1e9 / n as f64
        })
        .fold(f64::MAX, f64::min)
}

fn wanted(name: &str) -> bool {
    std::env::args().nth(1).is_none_or(|f| name.starts_with(&f))
}

fn time(name: &str, src: &str) {
    if !wanted(name) {
        return;
    }
    let prog = p4sec_frontend::compile_str("x.p4", src, &Default::default()).unwrap();
    let e = Engine::new(Arc::new(prog), &[]).unwrap();
    let mut w = Worker::new(&e);
    let mut out = Outputs::default();
    let pkt = vec![0u8; 64];
    let ns = best_of(|| {
        out.clear();
        e.process(&mut w, 0, &pkt, &mut out);
    });
    println!("{name:<20} {ns:>8.1} ns/packet  {:>6.2} Mpps", 1e3 / ns);
}

fn time_ipv4(name: &str, src: &str) {
    if !wanted(name) {
        return;
    }
    let prog = p4sec_frontend::compile_str("x.p4", src, &Default::default()).unwrap();
    let e = Engine::new(Arc::new(prog), &[]).unwrap();
    let mut w = Worker::new(&e);
    let mut out = Outputs::default();
    let mut pkt = vec![0u8; 64];
    pkt[12] = 8;
    pkt[14] = 0x45;
    pkt[22] = 64;
    let c = p4sec_engine::hash::csum16(&pkt[14..34]);
    pkt[24..26].copy_from_slice(&c.to_be_bytes());
    for routed in [false, true] {
        if routed {
            use p4sec_ir::*;
            let t = e.table_index("RouterIngress.ipv4_lpm").unwrap();
            let a = e
                .prog
                .actions
                .iter()
                .position(|a| a.name == "RouterIngress.set_nhop")
                .unwrap() as u32;
            e.table_insert(
                t,
                TableEntry {
                    matches: vec![FieldMatch::Lpm {
                        value: Value::new(32, 0),
                        prefix_len: 0,
                    }],
                    action: ActionCall {
                        action: a,
                        args: vec![Value::new(48, 1), Value::new(48, 2), Value::new(9, 3)],
                    },
                    priority: 0,
                },
            )
            .unwrap();
        }
        let ns = best_of(|| {
            out.clear();
            e.process(&mut w, 0, &pkt, &mut out);
        });
        println!(
            "{name:<20} {ns:>8.1} ns/packet  {:>6.2} Mpps routed={routed} out={}",
            1e3 / ns,
            out.len()
        );
    }
}

/// programs/hash_frames.p4 with and without SipHash-2-4 over the whole 64-byte frame (extern call
/// cost); with `entry`, the key comes from an entry for the ingress port (a table hit) instead of
/// the default action.
fn time_hash(name: &str, alg: Option<&str>, entry: bool) {
    if !wanted(name) {
        return;
    }
    let mut opts = p4sec_frontend::CompileOptions::default();
    if let Some(a) = alg {
        opts.defines.push(("HASH_ALG".into(), Some(a.into())));
    }
    let src = include_str!("../../../programs/hash_frames.p4");
    let prog = p4sec_frontend::compile_str("hash_frames.p4", src, &opts).unwrap();
    let e = Engine::new(Arc::new(prog), &p4sec_externs::p4::registry()).unwrap();
    if entry {
        use p4sec_ir::*;
        let t = e.table_index("HfIngress.port_key").unwrap();
        let fwd = e
            .prog
            .actions
            .iter()
            .position(|a| a.name == "HfIngress.forward")
            .unwrap() as u32;
        let key = Value {
            width: 128,
            words: vec![0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908],
        };
        let m = vec![FieldMatch::Exact(Value::new(9, 0))];
        e.table_insert(
            t,
            TableEntry {
                matches: m,
                action: ActionCall {
                    action: fwd,
                    args: vec![Value::new(9, 1), key],
                },
                priority: 0,
            },
        )
        .unwrap();
    }
    let mut w = Worker::new(&e);
    let mut out = Outputs::default();
    // a minimum-size frame as the pipeline receives it (64 bytes on the wire less the 4-byte FCS)
    let pkt = vec![0x11u8; 60];
    let ns = best_of(|| {
        out.clear();
        e.process(&mut w, 0, &pkt, &mut out);
    });
    println!(
        "{name:<20} {ns:>8.1} ns/packet  {:>6.2} Mpps out={}",
        1e3 / ns,
        out.len()
    );
}

fn main() {
    time_hash("hash-baseline", None, false);
    time_hash("hash-siphash", Some("SIPHASH_2_4"), false);
    time_hash("hash-entry-siphash", Some("SIPHASH_2_4"), true);
    let base = r#"#include <v1model.p4>
header h_t { bit<48> a; bit<48> b; bit<16> t; }
struct hs { h_t h; }
struct m { }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) { state start { PARSE transition accept; } }
control C(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { ING } }
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs hdr) { apply { DEP } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
"#;
    time(
        "empty",
        &base
            .replace("PARSE", "")
            .replace("ING", "")
            .replace("DEP", ""),
    );
    time(
        "parse",
        &base
            .replace("PARSE", "p.extract(hdr.h);")
            .replace("ING", "")
            .replace("DEP", ""),
    );
    time(
        "parse+emit",
        &base
            .replace("PARSE", "p.extract(hdr.h);")
            .replace("ING", "")
            .replace("DEP", "p.emit(hdr.h);"),
    );
    let router = include_str!("../../../programs/ipv4_router.p4");
    time_ipv4("router", router);
    let no_ck = router
        .replace("verify_checksum(", "if (false) verify_checksum(")
        .replace("update_checksum(", "if (false) update_checksum(");
    time_ipv4("router-no-checksum", &no_ck);
    time(
        "parse+assign+emit",
        &base
            .replace("PARSE", "p.extract(hdr.h);")
            .replace("ING", "hdr.h.a = hdr.h.b + 1; sm.egress_spec = 1;")
            .replace("DEP", "p.emit(hdr.h);"),
    );
}

#[allow(dead_code)]
fn router_variants() {}
