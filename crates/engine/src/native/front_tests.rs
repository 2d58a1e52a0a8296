//! The generated front of a fused pass (`front.rs`, `PassCx::run_fresh`) against the closure
//! backend, one worker per engine kept across packets (so what the front resets is checked: the
//! slots, the tracked headers' offsets, the standard metadata): accepting, rejecting and short
//! packets, headers never extracted reading 0, the standard metadata's values, resubmissions and
//! recirculations (with preserved fields: the frame's own resets) and a program whose slots the
//! front leaves to Rust's `fill`.

use super::tests::engines;
use crate::hash::csum16;
use crate::{Engine, Outputs, Worker};

const FRONT: &str = r#"#include <v1model.p4>
header e_t { bit<8> kind; bit<8> n; bit<8> port; bit<8> len; bit<8> itype; bit<8> seen; }
header h_t { bit<8> a; bit<8> b; bit<16> c; bit<8> ce; bit<8> pe; }
struct hs { e_t e; h_t h; }
struct m { @field_list(1) bit<8> count; bit<8> acc; }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start {
        p.extract(hdr.e);
        transition select(hdr.e.kind) { 1: more; 2: reject; default: accept; }
    }
    state more { p.extract(hdr.h); transition accept; }
}
control V(inout hs hdr, inout m meta) {
    apply {
        verify_checksum(hdr.h.isValid(), { hdr.h.a, hdr.h.b, hdr.h.ce, hdr.h.pe }, hdr.h.c,
            HashAlgorithm.csum16);
    }
}
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 2;
        meta.acc = meta.acc + 1;
        hdr.e.port = (bit<8>)sm.ingress_port;
        hdr.e.len = (bit<8>)sm.packet_length;
        hdr.e.itype = (bit<8>)sm.instance_type;
        // h's fields read 0 when h was not extracted; meta.acc is 1 on every new packet
        hdr.e.seen = hdr.h.a + hdr.h.b + meta.acc + (bit<8>)sm.checksum_error * 16
            + ((sm.parser_error != error.NoError) ? 8w64 : 8w0);
        if (hdr.e.n == 9) { mark_to_drop(sm); }
        if (hdr.e.n == 7) {
            if (sm.instance_type == 0) {
                meta.count = 5;
                resubmit_preserving_field_list(1);
            } else {
                hdr.e.n = meta.count;
            }
        }
        if (hdr.h.isValid()) { hdr.h.ce = (bit<8>)sm.checksum_error; }
    }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.e.n == 6 && sm.instance_type == 0) {
            hdr.e.n = 8;
            meta.count = 3;
            recirculate_preserving_field_list(1);
        }
    }
}
control C(inout hs hdr, inout m meta) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.e); p.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;

/// `e` (6 bytes) then, for kind 1, `h` (its checksum right when `good`), then a payload.
fn packet(kind: u8, n: u8, a: u8, good: bool) -> Vec<u8> {
    let mut p = vec![kind, n, 0, 0, 0, 0];
    let mut h = vec![a, 7, 0, 0, 0, 0];
    if good {
        let c = csum16(&h);
        h[2..4].copy_from_slice(&c.to_be_bytes());
    }
    p.extend(h);
    p.extend(b"tail");
    p
}

/// Each packet of `pkts` (with its ingress port) through one worker per engine, kept across the
/// packets: the frames each sends (asserted equal), `None` for a packet dropped.
fn run_seq(a: &Engine, b: &Engine, pkts: &[(u32, Vec<u8>)]) -> Vec<Option<(u32, Vec<u8>)>> {
    let mut outs = vec![];
    for e in [a, b] {
        let mut w = Worker::new(e);
        let mut got = vec![];
        for (port, pkt) in pkts {
            let mut o = Outputs::default();
            e.process(&mut w, *port, pkt, &mut o);
            got.push(o.iter().map(|(p, f)| (p, f.to_vec())).next());
        }
        outs.push(got);
    }
    assert_eq!(outs[0], outs[1], "closure vs native");
    outs.pop().unwrap()
}

#[test]
fn the_generated_front_resets_each_packet_as_the_closures_do() {
    let (a, b) = engines(FRONT);
    let pass = b.controls.native.pass.expect("every stage native");
    let front = pass.front.expect("a generated front");
    assert!(front.zeroes, "a few slots: zeroed by the front");
    let pkts = vec![
        (3, packet(1, 1, 5, true)),               // 0: h extracted, checksum right
        (4, packet(0, 1, 0, true)), // 1: accepted without h (h's fields and offset stale)
        (5, packet(1, 1, 9, false)), // 2: checksum wrong
        (6, packet(2, 1, 5, true)), // 3: `transition reject`
        (7, packet(1, 1, 5, true)[..8].to_vec()), // 4: out of packet inside h
        (8, packet(1, 9, 5, true)), // 5: dropped in ingress
        (9, packet(1, 7, 5, true)), // 6: resubmitted (its pass preserves `count`)
        (10, packet(0, 6, 0, true)), // 7: recirculated
        (11, packet(0, 1, 0, true)), // 8: after both, as 1
        (12, vec![]),               // 9: empty
    ];
    let out = run_seq(&a, &b, &pkts);
    let f = |i: usize| out[i].clone().expect("forwarded").1;
    // e: kind n port len itype seen
    let p0 = f(0);
    assert_eq!(&p0[..6], &[1, 1, 3, 16, 0, 5 + 7 + 1]);
    assert_eq!(p0[10], 0, "no checksum error");
    let p1 = f(1);
    assert_eq!(&p1[..6], &[0, 1, 4, 16, 0, 1], "h reads 0, acc is 1");
    assert_eq!(p1.len(), 16, "h not emitted: the payload follows e");
    let p2 = f(2);
    assert_eq!((p2[5], p2[10]), (9 + 7 + 1 + 16, 1), "checksum error");
    let p3 = f(3);
    assert_eq!(&p3[..6], &[2, 1, 6, 16, 0, 1], "rejected: h not extracted");
    let p4 = f(4);
    assert_eq!(
        &p4[..6],
        &[1, 1, 7, 8, 0, 1 + 64],
        "parser error seen by ingress"
    );
    assert_eq!(p4.len(), 8, "h invalid: e, then what the parser left");
    assert_eq!(out[5], None);
    let p6 = f(6);
    assert_eq!(
        &p6[..6],
        &[1, 5, 9, 16, 6, 5 + 7 + 1],
        "resubmitted: count kept, acc reset"
    );
    let p7 = f(7);
    assert_eq!(
        &p7[..6],
        &[0, 8, 10, 16, 4, 1],
        "recirculated: instance type 4"
    );
    assert_eq!(&f(8)[..6], &[0, 1, 11, 16, 0, 1], "as packet 1");
    assert!(
        out[9].as_ref().is_none_or(|(_, f)| f.is_empty()),
        "an empty packet: e not extracted, nothing emitted"
    );
}

#[test]
fn a_program_with_many_slots_has_them_zeroed_before_the_front() {
    let fields: String = (0..80).map(|i| format!("bit<8> f{i}; ")).collect();
    let src = format!(
        r#"#include <v1model.p4>
header e_t {{ bit<8> kind; bit<8> n; }}
header big_t {{ {fields} }}
struct hs {{ e_t e; big_t big; }}
struct m {{ bit<8> acc; }}
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {{
    state start {{
        p.extract(hdr.e);
        transition select(hdr.e.kind) {{ 1: big; default: accept; }}
    }}
    state big {{ p.extract(hdr.big); transition accept; }}
}}
control V(inout hs hdr, inout m meta) {{ apply {{ }} }}
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {{
    apply {{
        sm.egress_spec = 1;
        meta.acc = meta.acc + 1;
        hdr.e.n = meta.acc + hdr.big.f79 + hdr.big.f3;
    }}
}}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) {{ apply {{ }} }}
control C(inout hs hdr, inout m meta) {{ apply {{ }} }}
control D(packet_out p, in hs hdr) {{ apply {{ p.emit(hdr.e); p.emit(hdr.big); }} }}
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#
    );
    let (a, b) = engines(&src);
    let front = b.controls.native.pass.and_then(|p| p.front);
    assert!(
        !front.expect("a generated front").zeroes,
        "many slots: zeroed by Rust"
    );
    let mut big = vec![1, 0];
    big.extend([0x11; 80]);
    let pkts = vec![
        (1, big.clone()),
        (1, vec![0, 0, 0xaa]),
        (1, big),
        (1, vec![0, 0]),
    ];
    let out = run_seq(&a, &b, &pkts);
    let n: Vec<u8> = out
        .iter()
        .map(|o| o.clone().expect("forwarded").1[1])
        .collect();
    assert_eq!(
        n,
        vec![0x23, 1, 0x23, 1],
        "big's fields read 0 when not extracted"
    );
}

const BACK: &str = r#"#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; bit<16> c; bit<8> x; bit<8> y; }
struct hs { h_t h; }
struct m { }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    apply { sm.egress_spec = 1; hdr.h.x = hdr.h.x + 1; }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs hdr, inout m meta) {
    apply {
        update_checksum(hdr.h.isValid() && hdr.h.a != 0, { hdr.h.a, hdr.h.b, hdr.h.x, hdr.h.y },
            hdr.h.c, HashAlgorithm.csum16);
    }
}
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;

#[test]
fn the_generated_back_computes_checksums_then_deparses() {
    let (a, b) = engines(BACK);
    let pass = b.controls.native.pass.expect("every stage native");
    assert!(
        pass.compute.is_some() && pass.deparser.is_some(),
        "compute {} deparser {}",
        pass.compute.is_some(),
        pass.deparser.is_some()
    );
    assert!(pass.back.is_some(), "compute and deparser as one function");
    let pkts = vec![
        (1, vec![5, 6, 0, 0, 9, 3, 0xaa]), // checksum computed
        (1, vec![0, 6, 0x12, 0x34, 9, 3]), // condition false: the field as parsed
        (1, vec![5, 6, 0]),                // too short: h invalid, nothing computed
        (1, vec![7, 8, 0, 0, 1, 2]),
    ];
    let out = run_seq(&a, &b, &pkts);
    let f = |i: usize| out[i].clone().expect("forwarded").1;
    let p0 = f(0);
    assert_eq!((p0[4], &p0[6..]), (10, &[0xaa][..]));
    assert_eq!(csum16(&[5, 6, 10, 3]), u16::from_be_bytes([p0[2], p0[3]]));
    assert_eq!(&f(1)[..], &[0, 6, 0x12, 0x34, 10, 3]);
    assert_eq!(&f(2)[..], &[5, 6, 0], "the packet as it came");
    let p3 = f(3);
    assert_eq!(csum16(&[7, 8, 2, 2]), u16::from_be_bytes([p3[2], p3[3]]));
}
