//! A whole pass on one native context (`PassCx::run_front`, `PassCx::run_back`) against the
//! closure backend: the parser accepting, rejecting and running out of packet, verify and ingress
//! seeing the parser's and the checksum's errors, compute and the deparser after them.

use super::tests::{agree_on_random, engines, run};
use crate::hash::csum16;

const PASS: &str = r#"#include <v1model.p4>
header e_t { bit<8> kind; bit<8> n; }
header h_t { bit<8> a; bit<8> b; bit<16> c; bit<8> pe; bit<8> ce; bit<16> x; }
struct hs { e_t e; h_t h; }
struct m { }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start {
        p.extract(hdr.e);
        transition select(hdr.e.kind) { 1: more; 2: reject; default: accept; }
    }
    state more { p.extract(hdr.h); transition accept; }
}
control V(inout hs hdr, inout m meta) {
    apply {
        verify_checksum(hdr.h.isValid(), { hdr.h.a, hdr.h.b, hdr.h.pe, hdr.h.ce, hdr.h.x },
            hdr.h.c, HashAlgorithm.csum16);
    }
}
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 2;
        if (hdr.e.n == 9) { mark_to_drop(sm); }
        if (sm.parser_error != error.NoError) { hdr.e.n = 0xee; }
        if (hdr.h.isValid()) {
            hdr.h.ce = (bit<8>)sm.checksum_error;
            hdr.h.pe = (sm.parser_error == error.NoError) ? 8w0 : 8w1;
            hdr.h.x = hdr.h.x + 1;
        }
    }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs hdr, inout m meta) {
    apply {
        update_checksum(hdr.h.isValid() && hdr.h.a != 0, { hdr.h.a, hdr.h.b, hdr.h.pe, hdr.h.ce,
            hdr.h.x }, hdr.h.c, HashAlgorithm.csum16);
    }
}
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.e); p.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;

/// `e` then `h` (its checksum right when `good`), then a payload.
fn packet(kind: u8, n: u8, a: u8, good: bool) -> Vec<u8> {
    let mut h = vec![a, 7, 0, 0, 0, 0, 0x12, 0x34];
    if good {
        let c = csum16(&h);
        h[2..4].copy_from_slice(&c.to_be_bytes());
    }
    let mut p = vec![kind, n];
    p.extend(h);
    p.extend(b"tail");
    p
}

#[test]
fn a_fused_pass_agrees_with_the_closures_on_every_parser_end() {
    let (a, b) = engines(PASS);
    let pass = b.controls.native.pass.expect("every stage native");
    assert!(pass.verify.is_some() && pass.ingress.is_some() && pass.compute.is_some());
    // accepted, checksum right: verified, the new checksum computed
    let out = run(&a, &b, &packet(1, 3, 5, true)).expect("forwarded");
    assert_eq!(
        (out[6], out[7]),
        (0, 0),
        "no parser error, no checksum error"
    );
    assert_eq!(&out[8..10], &[0x12, 0x35]);
    assert_eq!(csum16(&out[2..10]), 0);
    assert_eq!(&out[10..], b"tail");
    // checksum wrong: the checksum error seen by ingress
    let out = run(&a, &b, &packet(1, 3, 5, false)).expect("forwarded");
    assert_eq!(out[7], 1);
    // compute's condition false: the checksum field as parsed
    let out = run(&a, &b, &packet(1, 3, 0, false)).expect("forwarded");
    assert_eq!(&out[4..6], &[0, 0]);
    // accepted without h
    let out = run(&a, &b, &packet(0, 3, 5, true)).expect("forwarded");
    assert_eq!((out.len(), out[1]), (14, 3));
    // rejected by the parser (`transition reject`: no error code): v1model goes on with the
    // packet, h not extracted
    let out = run(&a, &b, &packet(2, 3, 5, true)).expect("forwarded");
    assert_eq!((out[1], out.len()), (3, 14));
    // out of packet inside h: ingress sees the error, h not valid
    let short = &packet(1, 3, 5, true)[..6];
    let out = run(&a, &b, short).expect("forwarded");
    assert_eq!((out[1], out.len()), (0xee, 6));
    // dropped in ingress
    assert_eq!(run(&a, &b, &packet(1, 9, 5, true)), None);
    for len in [0, 1, 2, 5, 9, 10, 11, 16] {
        agree_on_random(&a, &b, len);
    }
}
