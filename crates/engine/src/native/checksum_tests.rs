//! The compute-checksum control as a native stage (`checksum.rs`) on both backends: deferred
//! `update_checksum`s whose condition holds, does not hold, or whose header is invalid, between
//! statements that are not deferred (translated inline or called back).

use super::tests::{agree_on_random, engines, run};
use crate::hash::csum16;

/// `compute`: the compute control's body.
fn program(compute: &str) -> String {
    format!(
        r#"#include <v1model.p4>
header a_t {{ bit<8> k; bit<8> n; bit<16> c; bit<32> x; }}
header b_t {{ bit<16> y; bit<16> c; bit<24> z; bit<8> w; }}
struct hs {{ a_t a; b_t b; }}
struct m {{ bit<16> t; }}
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {{
    state start {{ p.extract(hdr.a); transition select(hdr.a.k[0:0]) {{ 1: more; default: accept; }} }}
    state more {{ p.extract(hdr.b); transition accept; }}
}}
control V(inout hs hdr, inout m meta) {{ apply {{ }} }}
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {{
    apply {{
        sm.egress_spec = 1;
        if (hdr.a.k[1:1] == 1) {{ hdr.b.setInvalid(); }}
        hdr.a.x = hdr.a.x + 1;
    }}
}}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) {{ apply {{ }} }}
control C(inout hs hdr, inout m meta) {{
    apply {{ {compute} }}
}}
control D(packet_out p, in hs hdr) {{ apply {{ p.emit(hdr.a); p.emit(hdr.b); }} }}
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#
    )
}

/// Deferred (a's, b's), with a statement that is not deferred between them.
const DEFERRED: &str = r#"
    update_checksum(hdr.a.isValid() && hdr.a.k[6:6] == 0, { hdr.a.k, hdr.a.n, hdr.a.x },
        hdr.a.c, HashAlgorithm.csum16);
    if (hdr.b.isValid() && hdr.a.k[5:5] == 1) { hdr.b.w = hdr.b.w + 1; }
    update_checksum(hdr.b.isValid(), { hdr.b.y, hdr.b.z, hdr.b.w }, hdr.b.c,
        HashAlgorithm.csum16);
"#;

fn packet(k: u8) -> Vec<u8> {
    let mut p = vec![k, 3, 0x12, 0x34, 0, 0, 0, 9];
    p.extend([1, 2, 0x56, 0x78, 3, 4, 5, 6]);
    p.extend(b"payload!");
    p
}

#[test]
fn deferred_checksums_run_as_a_native_stage_of_the_pass() {
    let (a, b) = engines(&program(DEFERRED));
    let n = &b.controls.native;
    assert!(n.compute.is_some(), "the compute control is native");
    assert!(n.pass.is_some_and(|p| p.compute.is_some()), "in the pass");
    // both conditions hold: both checksums from the emitted bytes
    let out = run(&a, &b, &packet(0x01)).expect("forwarded");
    assert_eq!(out.len(), 24);
    assert_eq!(&out[4..8], &[0, 0, 0, 10], "a.x incremented");
    assert_eq!((csum16(&out[0..8]), csum16(&out[8..16])), (0, 0));
    assert_eq!(out[15], 6, "b.w as parsed");
    // the statement between them changes b before its checksum
    let out = run(&a, &b, &packet(0x21)).expect("forwarded");
    assert_eq!((out[15], csum16(&out[8..16])), (7, 0));
    // a's condition false: its checksum field as parsed; b's computed
    let out = run(&a, &b, &packet(0x41)).expect("forwarded");
    assert_eq!(&out[2..4], &[0x12, 0x34]);
    assert_ne!(csum16(&out[0..8]), 0);
    assert_eq!(csum16(&out[8..16]), 0);
    // b invalid (never extracted, or invalidated by ingress): only a, its checksum computed, the
    // rest of the packet as payload
    for k in [0x00, 0x03] {
        let out = run(&a, &b, &packet(k)).expect("forwarded");
        assert_eq!(csum16(&out[0..8]), 0, "k {k:#x}");
        let rest = if k == 0 { 16 } else { 8 };
        assert_eq!(out.len(), 8 + rest);
    }
    for len in [8, 12, 16, 20, 24] {
        agree_on_random(&a, &b, len);
    }
}

#[test]
fn a_compute_control_without_deferred_checksums_agrees() {
    // a's checksum over part of the header, and b's followed by a write of b: neither deferred
    // (summed from the fields by their closures), with an inline assignment and an exit
    let compute = r#"
        update_checksum(hdr.a.isValid(), { hdr.a.k, hdr.a.n }, hdr.a.c, HashAlgorithm.csum16);
        meta.t = hdr.a.c;
        if (hdr.a.k[5:5] == 1) { exit; }
        update_checksum(hdr.b.isValid(), { hdr.b.y, hdr.b.z, hdr.b.w }, hdr.b.c,
            HashAlgorithm.csum16);
        hdr.b.w = (bit<8>)meta.t;
    "#;
    let (a, b) = engines(&program(compute));
    for k in [0x00, 0x01, 0x03, 0x21, 0x41] {
        let out = run(&a, &b, &packet(k)).expect("forwarded");
        assert_eq!(out[2..4], csum16(&[k, 3]).to_be_bytes(), "k {k:#x}");
    }
    let out = run(&a, &b, &packet(0x01)).expect("forwarded");
    assert_eq!(out[15], out[3], "b.w written after its checksum");
    for len in [8, 16, 24] {
        agree_on_random(&a, &b, len);
    }
}
