//! Assignments of values wider than 64 bits (65, 96, 128 and 129 bits) translated as word copies:
//! from header fields, metadata, action parameters (a table's default action and a direct call)
//! and constants, truncating casts whose source has bits above the destination's width; the
//! same frames as the closure backend, explicit results, and no statement left to a closure.

use super::tests::{agree_on_random, coverage, engines, run};

/// `fields` in header `h`, `meta` in the metadata struct, `body` as the ingress control's body.
fn program(fields: &str, meta: &str, body: &str) -> String {
    format!(
        r#"#include <v1model.p4>
header h_t {{ {fields} }}
struct hs {{ h_t h; }}
struct m {{ {meta} }}
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {{ state start {{ p.extract(hdr.h); transition accept; }} }}
control V(inout hs hdr, inout m meta) {{ apply {{ }} }}
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {{
{body}
}}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) {{ apply {{ }} }}
control D(packet_out p, in hs hdr) {{ apply {{ p.emit(hdr.h); }} }}
V1Switch(P(), V(), I(), E(), V(), D()) main;
"#
    )
}

// byte offsets: c 0, k 16, kb 32, b 44, b2 56, c2 68, dk 84; bit offsets: a 800, a2 865,
// d 930, d2 1059, t 1188, x 1253, pad 1382 (1392 bits, 174 bytes)
const FIELDS: &str = "bit<128> c; bit<128> k; bit<96> kb; bit<96> b; bit<96> b2; bit<128> c2; \
    bit<128> dk; bit<65> a; bit<65> a2; bit<129> d; bit<129> d2; bit<65> t; bit<129> x; \
    bit<10> pad;";
const META: &str = "bit<65> m65; bit<96> m96; bit<128> m128; bit<129> m129;";
const LEN: usize = 174;

const BODY: &str = r#"
    action set(bit<128> key, bit<96> kb) { meta.m128 = key; hdr.h.k = meta.m128; hdr.h.kb = kb; }
    action direct(bit<128> key) { hdr.h.dk = key; }
    table t { key = { hdr.h.pad: exact; } actions = { set; }
              default_action = set(0xfedcba9876543210_0123456789abcdef, 0x0a0b0c0d_01020304_05060708); }
    apply {
        meta.m65 = hdr.h.a; hdr.h.a2 = meta.m65;
        meta.m96 = hdr.h.b; hdr.h.b2 = meta.m96;
        hdr.h.c2 = hdr.h.c;
        meta.m129 = hdr.h.d; hdr.h.d2 = meta.m129;
        hdr.h.t = (bit<65>)hdr.h.d;
        hdr.h.x = 129w0x1_8000000000000001_f0f0f0f0f0f0f0f0;
        direct(hdr.h.c);
        t.apply();
    }
"#;

/// Bit `i` (most significant first) of `buf`.
fn bit(buf: &[u8], i: usize) -> u8 {
    (buf[i / 8] >> (7 - i % 8)) & 1
}

fn bits(buf: &[u8], off: usize, w: usize) -> Vec<u8> {
    (off..off + w).map(|i| bit(buf, i)).collect()
}

/// `v`'s low `w` bits, most significant first.
fn bits_of(v: u128, top: u8, w: usize) -> Vec<u8> {
    let mut out: Vec<u8> = (0..w.min(128)).rev().map(|i| (v >> i) as u8 & 1).collect();
    if w > 128 {
        out.insert(0, top);
    }
    out
}

#[test]
fn wide_assignments_copy_words_masked_to_the_width() {
    let src = program(FIELDS, META, BODY);
    let (a, b) = engines(&src);
    let pkt: Vec<u8> = (0..LEN)
        .map(|i| (i as u8).wrapping_mul(37) ^ 0xa5)
        .collect();
    let out = run(&a, &b, &pkt).unwrap();
    assert_eq!(
        &out[16..32],
        &0xfedcba9876543210_0123456789abcdefu128.to_be_bytes(),
        "a 128-bit action parameter through metadata"
    );
    assert_eq!(
        &out[32..44],
        &[10, 11, 12, 13, 1, 2, 3, 4, 5, 6, 7, 8],
        "96-bit parameter"
    );
    assert_eq!(&out[56..68], &pkt[44..56], "96 bits through metadata");
    assert_eq!(&out[68..84], &pkt[0..16], "128-bit field copy");
    assert_eq!(
        &out[84..100],
        &pkt[0..16],
        "128-bit argument of a direct call"
    );
    assert_eq!(
        bits(&out, 865, 65),
        bits(&pkt, 800, 65),
        "65 bits through metadata"
    );
    assert_eq!(
        bits(&out, 1059, 129),
        bits(&pkt, 930, 129),
        "129 bits through metadata"
    );
    assert_eq!(
        bits(&out, 1188, 65),
        bits(&pkt, 930 + 64, 65),
        "a 129-bit value cast to 65 bits keeps its low 65"
    );
    let x = bits_of(0x8000000000000001_f0f0f0f0f0f0f0f0, 1, 129);
    assert_eq!(bits(&out, 1253, 129), x, "129-bit constant");
    agree_on_random(&a, &b, LEN);
    // the wide assignments add no call back to a closure
    let base = coverage(&program(FIELDS, META, "apply { }"));
    let c = coverage(&src);
    assert_eq!(c.fallback, base.fallback, "{c:?} vs {base:?}");
    assert!(c.inline >= base.inline + 12, "{c:?} vs {base:?}");
}

#[test]
fn sources_with_bits_above_the_width_and_uncovered_forms() {
    // widening and narrowing casts, constants with a 1 in the top word; a sign-extending cast
    // and a wide slice stay on closures (and still agree)
    let src = program(
        "bit<129> w; bit<65> n; bit<128> up; bit<96> lo; int<65> s; int<129> se; bit<128> sl; \
         bit<4> pad;",
        "bit<129> m;",
        r#"apply {
            meta.m = hdr.h.w;
            hdr.h.n = (bit<65>)meta.m;
            hdr.h.up = (bit<128>)hdr.h.n;
            hdr.h.lo = (bit<96>)(bit<65>)hdr.h.w;
            hdr.h.se = (int<129>)hdr.h.s;
            hdr.h.sl = hdr.h.w[128:1];
            hdr.h.w = 129w0x1_0000000000000000_0000000000000000;
        }"#,
    );
    let (a, b) = engines(&src);
    // 129+65+128+96+65+129+128+4 = 744 bits
    let len = 93;
    let pkt = vec![0xffu8; len];
    let out = run(&a, &b, &pkt).unwrap();
    assert_eq!(bits(&out, 129, 65), vec![1; 65], "low 65 bits of all ones");
    let up = bits(&out, 194, 128);
    assert_eq!(&up[..63], &[0; 63][..], "zero above the 65 bits");
    assert_eq!(&up[63..], &[1; 65][..]);
    let lo = bits(&out, 322, 96);
    assert_eq!((&lo[..31], &lo[31..]), (&[0; 31][..], &[1; 65][..]));
    assert_eq!(bits(&out, 483, 129), vec![1; 129], "-1 sign-extended");
    let w = bits(&out, 0, 129);
    assert_eq!((w[0], w[1..].iter().all(|&x| x == 0)), (1, true));
    agree_on_random(&a, &b, len);
    let c = coverage(&src);
    assert!(c.fallback >= 1, "the sign extension and the slice: {c:?}");
}
