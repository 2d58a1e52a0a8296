//! The deparser on both backends: `emit` of valid and invalid headers, after headers that leave the
//! output off a byte boundary, the payload after them and truncation; the deferred
//! `update_checksum` computed from the emitted words for every header length and checksum offset.

use super::tests::{agree_on_random, coverage, engines, run};
use crate::hash::csum16;

const MIXED: &str = r#"#include <v1model.p4>
header a_t { bit<8> k; bit<8> n; bit<16> c; bit<32> x; }
header b_t { bit<16> y; bit<16> c; bit<24> z; bit<8> w; }
header n_t { bit<4> v; }
header p_t { bit<12> q; bit<4> r; }
struct hs { a_t a; b_t b; n_t n; p_t p; }
struct m { }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(hdr.a); transition select(hdr.a.k[0:0]) { 1: more; default: accept; } }
    state more { p.extract(hdr.b); transition accept; }
}
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (hdr.a.k[1:1] == 1) { hdr.b.setInvalid(); }
        if (hdr.a.k[2:2] == 1) { hdr.n.setValid(); hdr.n.v = hdr.a.n[3:0]; }
        if (hdr.a.k[3:3] == 1) { hdr.p.setValid(); hdr.p.q = 0xabc; hdr.p.r = 5; }
        if (hdr.a.k[4:4] == 1) { truncate((bit<32>)hdr.a.n); }
        if (hdr.a.k[5:5] == 1) { hdr.a.setInvalid(); }
        hdr.a.x = hdr.a.x + 1;
        hdr.b.w = hdr.b.w ^ 0x5a;
    }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs hdr, inout m meta) {
    apply {
        update_checksum(hdr.a.isValid() && hdr.a.k[6:6] == 0, { hdr.a.k, hdr.a.n, hdr.a.x },
            hdr.a.c, HashAlgorithm.csum16);
        update_checksum(hdr.b.isValid(), { hdr.b.y, hdr.b.z, hdr.b.w }, hdr.b.c,
            HashAlgorithm.csum16);
    }
}
control D(packet_out p, in hs hdr) {
    apply { p.emit(hdr.a); p.emit(hdr.n); p.emit(hdr.p); p.emit(hdr.b); }
}
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;

fn packet(k: u8, n: u8) -> Vec<u8> {
    let mut p = vec![k, n, 0x12, 0x34, 0, 0, 0, 9];
    p.extend([1, 2, 0x56, 0x78, 3, 4, 5, 6]);
    p.extend(b"payload!");
    p
}

#[test]
fn emit_skips_invalid_headers_and_keeps_payload_and_truncation() {
    let (a, b) = engines(MIXED);
    // both headers valid: both checksums computed from the emitted bytes, the payload after
    let out = run(&a, &b, &packet(0x01, 0)).expect("forwarded");
    assert_eq!(out.len(), 24);
    assert_eq!(&out[4..8], &[0, 0, 0, 10], "a.x incremented");
    assert_eq!(csum16(&out[0..8]), 0, "a's checksum");
    assert_eq!(out[15], 6 ^ 0x5a, "b.w changed");
    assert_eq!(csum16(&out[8..16]), 0, "b's checksum");
    assert_eq!(&out[16..], b"payload!");
    // b extracted, then invalid: not emitted; the payload follows a
    let out = run(&a, &b, &packet(0x03, 0)).expect("forwarded");
    assert_eq!((out.len(), &out[8..]), (16, &b"payload!"[..]));
    // a's checksum not due: its field as parsed
    let out = run(&a, &b, &packet(0x41, 0)).expect("forwarded");
    assert_eq!(&out[2..4], &[0x12, 0x34]);
    assert_eq!(csum16(&out[8..16]), 0);
    // a 4-bit header before p and b: they are emitted off a byte boundary (the closures' path)
    let out = run(&a, &b, &packet(0x0d, 0x0f)).expect("forwarded");
    assert_eq!(
        out.len(),
        8 + 11 + 8,
        "a, then 4 + 16 + 64 bits padded to 11 bytes, then the payload"
    );
    assert_eq!(&out[8..11], &[0xfa, 0xbc, 0x50]);
    // truncated to n bytes
    let out = run(&a, &b, &packet(0x11, 11)).expect("forwarded");
    assert_eq!(out.len(), 11);
    // a invalid, b valid: b first
    let out = run(&a, &b, &packet(0x21, 0)).expect("forwarded");
    assert_eq!((out.len(), csum16(&out[0..8])), (16, 0));
    for len in [8, 12, 16, 20, 24, 40] {
        agree_on_random(&a, &b, len);
    }
    let c = coverage(MIXED);
    assert_eq!(c.failed, 0, "{c:?}");
}

/// A header of `n` bytes (8-bit fields but a 16-bit checksum at byte `off`, and a 32-bit field
/// when there is room) whose checksum the compute control updates after ingress changes a byte.
fn checksum_program(n: usize, off: usize) -> String {
    let mut fields = vec![];
    let mut data = vec![];
    let mut i = 0;
    while i < n {
        if i == off {
            fields.push("bit<16> c;".to_string());
            i += 2;
        } else if i + 4 <= n && (i + 4 <= off || i > off) && i % 4 == 1 {
            fields.push(format!("bit<32> f{i};"));
            data.push(format!("hdr.h.f{i}"));
            i += 4;
        } else {
            fields.push(format!("bit<8> f{i};"));
            data.push(format!("hdr.h.f{i}"));
            i += 1;
        }
    }
    let first = data[0].clone();
    format!(
        r#"#include <v1model.p4>
header h_t {{ {} }}
struct hs {{ h_t h; }}
struct m {{ }}
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {{
    state start {{ p.extract(hdr.h); transition accept; }}
}}
control V(inout hs hdr, inout m meta) {{ apply {{ }} }}
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {{
    apply {{ sm.egress_spec = 1; {first} = {first} + 1; }}
}}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) {{ apply {{ }} }}
control C(inout hs hdr, inout m meta) {{
    apply {{ update_checksum(hdr.h.isValid(), {{ {} }}, hdr.h.c, HashAlgorithm.csum16); }}
}}
control D(packet_out p, in hs hdr) {{ apply {{ p.emit(hdr.h); }} }}
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#,
        fields.join(" "),
        data.join(", ")
    )
}

#[test]
fn deferred_checksum_over_every_length_and_offset() {
    for n in (4..=26).step_by(2).chain([40, 64]) {
        let mut offs = vec![0, n - 2, (n / 2) & !1];
        offs.dedup();
        for off in offs {
            let src = checksum_program(n, off);
            let (a, b) = engines(&src);
            for fill in [0x00u8, 0xff, 0x5a] {
                let mut pkt = vec![fill; n + 3];
                pkt[off] = 0x77;
                let out = run(&a, &b, &pkt).expect("forwarded");
                assert_eq!(out.len(), n + 3);
                assert_eq!(
                    csum16(&out[..n]),
                    0,
                    "n {n}, checksum at {off}, fill {fill:#x}"
                );
            }
            agree_on_random(&a, &b, n + 5);
            // cut inside the header: not extracted, nothing emitted but the bytes
            run(&a, &b, &vec![1u8; n - 1]);
        }
    }
}

/// Headers of whole-byte fields of every width (emitted field by field: `packet::field_stores`),
/// one whose 48-bit field's 8-byte store would pass its words (emitted word by word), and one of
/// 4-bit fields; ingress writes every field (`+ 1`, carries into the bits above the width
/// dropped) so none is taken from the packet's bytes.
const WHOLE_BYTES: &str = r#"#include <v1model.p4>
header f_t { bit<8> a; bit<16> b; bit<24> c; bit<32> d; bit<40> e; bit<48> g; bit<56> h;
             bit<16> t; }
header z_t { bit<8> a; bit<48> b; bit<8> c; }
header n_t { bit<4> x; bit<4> y; }
struct hs { f_t f; z_t z; n_t n; }
struct m { }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(hdr.f); transition select(hdr.f.a[0:0]) { 1: more; default: accept; } }
    state more { p.extract(hdr.z); p.extract(hdr.n); transition accept; }
}
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.f.a = hdr.f.a + 2; hdr.f.b = hdr.f.b + 1; hdr.f.c = hdr.f.c + 1;
        hdr.f.d = hdr.f.d + 1; hdr.f.e = hdr.f.e + 1; hdr.f.g = hdr.f.g + 1;
        hdr.f.h = hdr.f.h + 1; hdr.f.t = hdr.f.t + 1;
        hdr.z.a = hdr.z.a + 1; hdr.z.b = hdr.z.b + 1; hdr.z.c = hdr.z.c + 1;
        hdr.n.x = hdr.n.x + 1; hdr.n.y = hdr.n.y + 1;
    }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs hdr, inout m meta) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.f); p.emit(hdr.z); p.emit(hdr.n); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;

/// Each field of `pkt[from..from + widths.sum()]` (big-endian, `widths` in bytes) plus one, wrapped
/// to its width.
fn plus_one(pkt: &mut [u8], from: usize, widths: &[usize]) {
    let mut at = from;
    for &w in widths {
        for i in (at..at + w).rev() {
            pkt[i] = pkt[i].wrapping_add(1);
            if pkt[i] != 0 {
                break;
            }
        }
        at += w;
    }
}

#[test]
fn whole_byte_fields_are_emitted_field_by_field_as_the_closures_emit_them() {
    use crate::{Outputs, Worker};
    let (a, b) = engines(WHOLE_BYTES);
    // one worker and one output buffer with room per engine, kept across packets (the generated
    // emit needs the room; a fresh `Outputs` has none and takes the closures' path)
    let mut kept: Vec<_> = [&a, &b]
        .into_iter()
        .map(|e| {
            let mut o = Outputs::default();
            o.data.reserve(4096);
            (e, Worker::new(e), o)
        })
        .collect();
    let mut run_kept = |pkt: &[u8]| {
        let mut got = vec![];
        for (e, w, o) in kept.iter_mut() {
            o.clear();
            e.process(w, 0, pkt, o);
            got.push(o.iter().map(|(_, f)| f.to_vec()).next());
        }
        assert_eq!(got[0], got[1], "closure vs native for {pkt:02x?}");
        got.pop().unwrap()
    };
    let mut x = 0x9e3779b97f4a7c15u64;
    for round in 0..300 {
        let mut pkt: Vec<u8> = (0..30 + 8 + 1 + 5)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // all-ones fields often, so the increments carry past the widths
                if x.is_multiple_of(3) {
                    0xff
                } else {
                    (x >> 24) as u8
                }
            })
            .collect();
        // f alone or f, z and n
        let more = round % 2 == 1;
        pkt[0] = (pkt[0] & !1) | more as u8;
        let out = run_kept(&pkt).expect("forwarded");
        let mut want = pkt.clone();
        plus_one(&mut want, 0, &[1, 2, 3, 4, 5, 6, 7, 2]);
        // `a + 2`: one more
        want[0] = want[0].wrapping_add(1);
        if more {
            plus_one(&mut want, 30, &[1, 6, 1]);
            want[38] = ((want[38] >> 4).wrapping_add(1) & 0xf) << 4
                | ((want[38] & 0xf).wrapping_add(1) & 0xf);
        }
        assert_eq!(out, want, "for {pkt:02x?}");
    }
    // too short for f: nothing extracted, the bytes as they came
    let short = vec![0xffu8; 29];
    assert_eq!(run_kept(&short).expect("forwarded"), short);
}
