//! Tests of the pristine-header analysis: which call sites are vouched for, and that hashes over
//! vouched headers give the digest of what the program sees, for frames of every length.

use super::Pristine;
use crate::{Engine, Outputs, Worker};
use p4sec_externs::hash::{self, HashAlg};
use std::sync::Arc;

const KEY: u128 = 0x0001_0203_0405_0607_0809_0a0b_0c0d_0e0f;

/// A program hashing header `h` and the payload with SipHash-2-4 in action `a` of table `t`,
/// the digest's top 48 bits then written into `h.src`; the placeholders put writes before and
/// after the call.
fn program(parser_extra: &str, other: &str, before: &str, apply: &str, egress: &str) -> String {
    r#"#include <core.p4>
#include <v1model.p4>
#include <p4sec.p4>
header h_t { bit<48> dst; bit<48> src; bit<16> type; }
header g_t { bit<32> x; }
struct hs { h_t h; g_t g; }
struct m { bit<64> d; bit<8> flag; }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
state start { p.extract(hdr.h); PARSER_EXTRA transition accept; }
}
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
action other() { OTHER }
action a(bit<128> k) {
    BEFORE
    p4sec_hash_payload(meta.d, p4sec_hash_alg_t.SIPHASH_2_4, k, hdr.h);
    hdr.h.src = meta.d[63:16];
}
table t0 { key = { sm.ingress_port : exact; } actions = { other; } default_action = other(); }
table t { key = { sm.ingress_port : exact; } actions = { a; } default_action = a(KEY); }
apply { sm.egress_spec = 1; APPLY }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { EGRESS } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); p.emit(hdr.g); } }
V1Switch(P(), V(), I(), E(), V(), D()) main;
"#
    .replace("PARSER_EXTRA", parser_extra)
    .replace("OTHER", other)
    .replace("BEFORE", before)
    .replace("APPLY", apply)
    .replace("EGRESS", egress)
    .replace("KEY", &format!("128w{KEY:#x}"))
}

/// `h.src` after the call: the top 48 bits of SipHash-2-4 over `header ++ payload` (the
/// digest's first 8 bytes as a number).
fn hashed(header: &mut [u8; 14], payload: &[u8]) {
    let msg = [&header[..], payload].concat();
    let mut d = [0u8; 8];
    hash::compute(HashAlg::SipHash24, &KEY.to_be_bytes(), &msg, &mut d).unwrap();
    header[6..12].copy_from_slice(&d[..6]);
}

struct Case {
    name: &'static str,
    src: String,
    /// How many call sites the analysis vouches for.
    vouched: usize,
    /// The second header is extracted too (so `h` is not right in front of the payload).
    with_g: bool,
    /// The header as the program changes it before the first call.
    before: fn(&mut [u8; 14]),
    calls: usize,
    after: fn(&mut [u8; 14]),
}

fn cases() -> Vec<Case> {
    let none: fn(&mut [u8; 14]) = |_| {};
    let case = |name, src, vouched, before, calls, after| Case {
        name,
        src,
        vouched,
        with_g: false,
        before,
        calls,
        after,
    };
    let mut v = vec![
        case(
            "clean",
            program("", "", "", "t.apply();", ""),
            1,
            none,
            1,
            none,
        ),
        case(
            "metadata written before",
            program("", "", "meta.flag = 8w1;", "t.apply();", ""),
            1,
            none,
            1,
            none,
        ),
        case(
            "header written after, in egress",
            program("", "", "", "t.apply();", "hdr.h.dst = 48w3;"),
            1,
            none,
            1,
            |h| h[..6].copy_from_slice(&[0, 0, 0, 0, 0, 3]),
        ),
        case(
            "written before, same action",
            program("", "", "hdr.h.dst = 48w1;", "t.apply();", ""),
            0,
            |h| h[..6].copy_from_slice(&[0, 0, 0, 0, 0, 1]),
            1,
            none,
        ),
        case(
            "written by an earlier table",
            program(
                "",
                "hdr.h.type = 16w0x0800;",
                "",
                "t0.apply(); t.apply();",
                "",
            ),
            0,
            |h| h[12..].copy_from_slice(&[8, 0]),
            1,
            none,
        ),
        case(
            "table applied twice, written after the call",
            program("", "", "", "t.apply(); t.apply();", ""),
            0,
            none,
            2,
            none,
        ),
        case(
            "written in one branch",
            program(
                "",
                "",
                "",
                "if (sm.ingress_port == 0) { hdr.h.dst = 48w2; } t.apply();",
                "",
            ),
            0,
            |h| h[..6].copy_from_slice(&[0, 0, 0, 0, 0, 2]),
            1,
            none,
        ),
        case(
            "written in the parser",
            program("hdr.h.type = 16w7;", "", "", "t.apply();", ""),
            0,
            |h| h[12..].copy_from_slice(&[0, 7]),
            1,
            none,
        ),
        case(
            "made valid before",
            program("", "", "hdr.h.setValid();", "t.apply();", ""),
            0,
            none,
            1,
            none,
        ),
        case(
            "an extern's out argument before",
            program(
                "",
                "",
                "p4sec_hash(hdr.h.dst, p4sec_hash_alg_t.CRC32, k, hdr.h.type);",
                "t.apply();",
                "",
            ),
            0,
            |h| {
                let mut c = [0u8; 4];
                hash::compute(HashAlg::Crc32, &[], &h[12..14], &mut c).unwrap();
                h[..6].copy_from_slice(&[0, 0, c[0], c[1], c[2], c[3]]);
            },
            1,
            none,
        ),
    ];
    // vouched for by the analysis, but not at run time: `g` lies between `h` and the payload
    v.push(Case {
        with_g: true,
        ..case(
            "another header in between",
            program("p.extract(hdr.g);", "", "", "t.apply();", ""),
            1,
            none,
            1,
            none,
        )
    });
    v
}

/// Every case: the analysis vouches for exactly the clean call sites, and the digest in the
/// frame that leaves is the hash of the header as the program left it before the call, never of
/// the bytes received.
#[test]
fn only_headers_nothing_wrote_are_vouched_for_and_digests_follow_the_writes() {
    let frame: Vec<u8> = (0..60u32).map(|i| (i * 29 + 5) as u8).collect();
    for c in cases() {
        let prog = p4sec_frontend::compile_str("pristine.p4", &c.src, &Default::default())
            .unwrap_or_else(|e| panic!("{}: {e}", c.name));
        assert_eq!(Pristine::analyse(&prog).len(), c.vouched, "{}", c.name);
        let e = Engine::new(Arc::new(prog), &p4sec_externs::p4::registry())
            .unwrap_or_else(|e| panic!("{}: {e}", c.name));
        let mut w = Worker::new(&e);
        let mut out = Outputs::default();
        // twice: the second packet must not see anything of the first
        for _ in 0..2 {
            out.clear();
            e.process(&mut w, 0, &frame, &mut out);
            let (port, got) = out
                .iter()
                .next()
                .unwrap_or_else(|| panic!("{}: dropped", c.name));
            assert_eq!(port, 1, "{}", c.name);
            let mut h: [u8; 14] = frame[..14].try_into().unwrap();
            let rest = if c.with_g { &frame[18..] } else { &frame[14..] };
            (c.before)(&mut h);
            for _ in 0..c.calls {
                hashed(&mut h, rest);
            }
            (c.after)(&mut h);
            let mut want = h.to_vec();
            if c.with_g {
                want.extend_from_slice(&frame[14..18]);
            }
            want.extend_from_slice(rest);
            assert_eq!(got, &want[..], "{}", c.name);
        }
    }
}

/// Frames of each length through `src`: the header that leaves carries the digest over itself
/// as received and the payload, and the payload leaves unchanged.
fn check_frames(src: &str, lens: &[usize]) {
    let prog = p4sec_frontend::compile_str("pristine.p4", src, &Default::default()).unwrap();
    let e = Engine::new(Arc::new(prog), &p4sec_externs::p4::registry()).unwrap();
    let mut w = Worker::new(&e);
    let mut out = Outputs::default();
    for &len in lens {
        let frame: Vec<u8> = (0..len as u32).map(|i| (i * 13 + 1) as u8).collect();
        out.clear();
        e.process(&mut w, 0, &frame, &mut out);
        let (_, got) = out.iter().next().expect("forwarded");
        let mut h: [u8; 14] = frame[..14].try_into().unwrap();
        hashed(&mut h, &frame[14..]);
        assert_eq!(&got[..14], &h[..], "length {len}");
        assert_eq!(&got[14..], &frame[14..], "length {len}");
    }
}

/// A short frame (the header extracted, nothing after it) and a frame the parser cannot extract
/// the header from: vouched for or not, the digest is the one over what the program sees.
#[test]
fn frames_of_every_length_get_the_digest_of_what_the_program_sees() {
    check_frames(
        &program("", "", "", "t.apply();", ""),
        &[14, 15, 21, 22, 23, 64, 200],
    );
}

/// The offset the parser recorded for a header stays in the worker from one packet to the next:
/// a packet that does not extract the header (and whose payload happens to start where the
/// header would end) must not be vouched for by it. The digest lands in a header emitted on
/// both paths.
#[test]
fn a_header_not_extracted_in_this_pass_is_never_vouched_for() {
    let src = r#"#include <core.p4>
#include <v1model.p4>
#include <p4sec.p4>
header h_t { bit<48> dst; bit<48> src; bit<16> type; }
header g_t { bit<32> x; }
struct hs { h_t h; g_t g; }
struct m { bit<64> d; }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
state start { transition select(sm.ingress_port) { 0: ph; default: pg; } }
state ph { p.extract(hdr.h); transition accept; }
state pg { p.extract(hdr.g); p.advance(80); transition accept; }
}
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
action a(bit<128> k) {
    p4sec_hash_payload(meta.d, p4sec_hash_alg_t.SIPHASH_2_4, k, hdr.h);
    hdr.g.setValid();
    hdr.g.x = meta.d[63:32];
}
table t { key = { sm.ingress_port : exact; } actions = { a; } default_action = a(128w0x0f0e0d0c0b0a09080706050403020100); }
apply { sm.egress_spec = 1; t.apply(); }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); p.emit(hdr.g); } }
V1Switch(P(), V(), I(), E(), V(), D()) main;
"#;
    let prog = p4sec_frontend::compile_str("pristine.p4", src, &Default::default()).unwrap();
    assert_eq!(Pristine::analyse(&prog).len(), 1);
    let e = Engine::new(Arc::new(prog), &p4sec_externs::p4::registry()).unwrap();
    let mut w = Worker::new(&e);
    let mut out = Outputs::default();
    let key: Vec<u8> = (0..16u8).rev().collect();
    let frame: Vec<u8> = (0..40u32).map(|i| (i * 31 + 7) as u8).collect();
    for port in [0u32, 1, 0, 1] {
        out.clear();
        e.process(&mut w, port, &frame, &mut out);
        let (_, got) = out.iter().next().expect("forwarded");
        // port 0: h is the frame's first 14 bytes; port 1: h is invalid (its fields zero) and
        // the payload starts at 14 all the same
        let header = if port == 0 {
            frame[..14].to_vec()
        } else {
            vec![0; 14]
        };
        let mut d = [0u8; 8];
        hash::compute(
            HashAlg::SipHash24,
            &key,
            &[&header[..], &frame[14..]].concat(),
            &mut d,
        )
        .unwrap();
        let g_at = if port == 0 { 14 } else { 0 };
        assert_eq!(&got[g_at..g_at + 4], &d[..4], "port {port}");
    }
}

/// A key written in the program as a 128-bit constant (planned as two 64-bit pieces, most
/// significant first): the digest is the one under that key, on every path.
#[test]
fn a_constant_wide_key_hashes_under_its_value() {
    let src = program("", "", "", "t.apply();", "").replace(
        "p4sec_hash_payload(meta.d, p4sec_hash_alg_t.SIPHASH_2_4, k, hdr.h);",
        &format!("p4sec_hash_payload(meta.d, p4sec_hash_alg_t.SIPHASH_2_4, 128w{KEY:#x}, hdr.h);"),
    );
    assert!(src.contains("128w0x102030405060708090a0b0c0d0e0f, hdr.h"));
    check_frames(&src, &[14, 60, 300]);
}
