//! The translation of each statement and expression kind, run on both backends: the same frames out
//! of the same packets, explicit results for the edge cases (width masking, signed operations,
//! shifts by the width or more, division by zero, saturation), and which statements went inline
//! and which fell back to their closure (slices of wide values, loops).

use super::Coverage;
use crate::load::compile::{self, Cx};
use crate::testutil::one_header_program;
use crate::testutil::pair::{self, first_frame, Kept};
use crate::Backend;

/// The closure and the native engine of `src`, each with the worker and the output (its buffer
/// with room) that [`run`] keeps across the packets of a test, as a switch keeps them: the native
/// engine's generated emit writes into that output itself.
pub(super) fn engines(src: &str) -> (Kept, Kept) {
    let [a, b] = pair::engines(src);
    (a, b)
}

/// What the native translation of `src` covered.
pub(super) fn coverage(src: &str) -> Coverage {
    let mut prog = p4sec_frontend::compile_str("test.p4", src, &Default::default()).unwrap();
    prog.optimize();
    let cx = Cx {
        prog: &prog,
        externs: &[],
        methods: &[],
        pristine: &Default::default(),
    };
    let mut code = compile::compile(&cx);
    super::compile(&cx, &mut code).expect("a code generator for this machine")
}

/// The frame each backend emits for `pkt` (asserted equal), or `None` when dropped: through the
/// worker and the output each engine keeps.
pub(super) fn run(a: &Kept, b: &Kept, pkt: &[u8]) -> Option<Vec<u8>> {
    first_frame([a, b], pkt, false, &format_args!("{pkt:02x?}"))
}

/// Both backends on a few hundred pseudo-random packets of `len` bytes.
pub(super) fn agree_on_random(a: &Kept, b: &Kept, len: usize) {
    let mut x = 0x2545f4914f6cdd1du64;
    for _ in 0..400 {
        let pkt: Vec<u8> = (0..len)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // many small and boundary bytes
                match x % 5 {
                    0 => 0,
                    1 => 0xff,
                    2 => (x >> 8) as u8 % 9,
                    _ => (x >> 16) as u8 ^ i as u8,
                }
            })
            .collect();
        run(a, b, &pkt);
    }
}

const ARITH: &str = r#"
    apply {
        hdr.h.sum = hdr.h.a + hdr.h.b;
        hdr.h.diff = hdr.h.a - hdr.h.b;
        hdr.h.prod = hdr.h.a * hdr.h.b;
        hdr.h.shl = hdr.h.a << hdr.h.sh;
        hdr.h.shr = hdr.h.a >> hdr.h.sh;
        hdr.h.sat = hdr.h.a |+| hdr.h.b;
        hdr.h.usat = hdr.h.a |-| hdr.h.b;
        hdr.h.neg = -hdr.h.a;
        hdr.h.inv = ~hdr.h.b;
        hdr.h.cat = hdr.h.a ++ hdr.h.b;
        hdr.h.sl = hdr.h.cat[11:4];
        hdr.h.wide16 = (bit<16>)hdr.h.a;
    }
"#;
const ARITH_FIELDS: &str = "bit<8> a; bit<8> b; bit<8> sh; bit<8> sum; bit<8> diff; bit<8> prod; \
    bit<8> shl; bit<8> shr; bit<8> sat; bit<8> usat; bit<8> neg; bit<8> inv; bit<16> cat; \
    bit<8> sl; bit<16> wide16;";

#[test]
fn arithmetic_is_masked_to_the_width() {
    let src = one_header_program(ARITH_FIELDS, ARITH);
    let (a, b) = engines(&src);
    // a = 0xf0, b = 0x20, shift by 9 (more than the width)
    let mut pkt = vec![0u8; 18];
    pkt[..3].copy_from_slice(&[0xf0, 0x20, 9]);
    let out = run(&a, &b, &pkt).unwrap();
    assert_eq!(out[3], 0x10, "0xf0 + 0x20 wraps at 8 bits");
    assert_eq!(out[4], 0xd0, "0xf0 - 0x20");
    assert_eq!(out[5], 0x00, "0xf0 * 0x20 = 0x1e00 masked");
    assert_eq!(out[6], 0, "a shift left by 9 >= 8 gives 0");
    assert_eq!(out[7], 0, "a shift right by 9 gives 0");
    assert_eq!(out[8], 0xff, "saturating add");
    assert_eq!(out[9], 0xd0, "saturating sub");
    assert_eq!(out[10], 0x10, "-0xf0 at 8 bits");
    assert_eq!(out[11], 0xdf, "~0x20 at 8 bits");
    assert_eq!(&out[12..14], &[0xf0, 0x20], "concatenation");
    assert_eq!(out[14], 0x02, "slice [11:4] of 0xf020");
    assert_eq!(&out[15..17], &[0, 0xf0], "widening cast");
    // shift by 3: inside the width
    pkt[2] = 3;
    let out = run(&a, &b, &pkt).unwrap();
    assert_eq!((out[6], out[7]), (0x80, 0x1e));
    // saturating sub below zero
    pkt[..2].copy_from_slice(&[0x10, 0x20]);
    assert_eq!(run(&a, &b, &pkt).unwrap()[9], 0);
    agree_on_random(&a, &b, 6);
    let c = coverage(&src);
    assert!(c.inline >= 12, "{c:?}");
}

#[test]
fn signed_operations_sign_extend() {
    let src = one_header_program(
        "int<8> s; int<8> t; bit<8> sh; int<8> shr; bit<8> lt; bit<8> ge; int<16> ext; int<8> sat;",
        r#"apply {
            hdr.h.shr = hdr.h.s >> hdr.h.sh;
            hdr.h.lt = (hdr.h.s < hdr.h.t) ? 8w1 : 8w0;
            hdr.h.ge = (hdr.h.s >= -8s3) ? 8w1 : 8w0;
            hdr.h.ext = (int<16>)hdr.h.s;
            hdr.h.sat = hdr.h.s |+| hdr.h.t;
        }"#,
    );
    let (a, b) = engines(&src);
    // s = -128, t = 1, shift by 200
    let mut pkt = vec![0x80, 0x01, 200, 0, 0, 0, 0, 0, 0];
    let out = run(&a, &b, &pkt).unwrap();
    assert_eq!(out[3], 0xff, "-128 >> 200 is -1");
    assert_eq!(out[4], 1, "-128 < 1");
    assert_eq!(out[5], 0, "-128 >= -3 is false");
    assert_eq!(&out[6..8], &[0xff, 0x80], "sign extension");
    // -128 |+| -128 saturates at -128 (signed saturation falls back to its closure)
    pkt[1] = 0x80;
    assert_eq!(run(&a, &b, &pkt).unwrap()[8], 0x80);
    agree_on_random(&a, &b, 9);
}

#[test]
fn wide_values_fall_back_to_closures() {
    let src = one_header_program(
        "bit<128> w; bit<8> lo; bit<8> hi; bit<64> top;",
        r#"apply {
            hdr.h.lo = hdr.h.w[7:0];
            hdr.h.hi = hdr.h.w[127:120];
            hdr.h.top = hdr.h.w[127:64];
        }"#,
    );
    let (a, b) = engines(&src);
    let mut pkt: Vec<u8> = (1..=16).collect();
    pkt.extend([0; 10]);
    let out = run(&a, &b, &pkt).unwrap();
    assert_eq!((out[16], out[17]), (16, 1));
    assert_eq!(&out[18..26], &[1, 2, 3, 4, 5, 6, 7, 8]);
    agree_on_random(&a, &b, 26);
    let c = coverage(&src);
    assert!(c.fallback >= 1, "{c:?}");
}

#[test]
fn control_flow_switch_exit_and_validity() {
    let src = one_header_program(
        "bit<8> k; bit<8> o; bit<8> x;",
        r#"action set(bit<8> v) { hdr.h.o = v; }
        action off() { hdr.h.setInvalid(); }
        action stop() { hdr.h.o = 0xee; exit; }
        table t { key = { hdr.h.k: exact; } actions = { set; off; stop; NoAction; }
            const entries = { 1 : set(0x11); 2 : off(); 3 : stop(); }
            default_action = NoAction(); }
        apply {
            switch (t.apply().action_run) {
                set: { hdr.h.x = 1; }
                stop: { hdr.h.x = 2; }
                default: {
                    if (hdr.h.k > 9 && hdr.h.k != 0xff || hdr.h.k == 7) { hdr.h.x = 3; }
                    else { hdr.h.x = 4; }
                }
            }
            if (hdr.h.k == 3) { hdr.h.x = 5; }
            if (hdr.h.k == 8) { mark_to_drop(sm); }
        }"#,
    );
    let (a, b) = engines(&src);
    let r = |k: u8| run(&a, &b, &[k, 0, 0, 0xaa]);
    assert_eq!(r(1).unwrap()[..3], [1, 0x11, 1]);
    assert_eq!(
        r(2).unwrap(),
        vec![0xaa],
        "setInvalid: the header is not emitted"
    );
    assert_eq!(
        r(3).unwrap()[..3],
        [3, 0xee, 0],
        "exit skips the rest of the control"
    );
    assert_eq!(r(7).unwrap()[2], 3);
    assert_eq!(r(10).unwrap()[2], 3);
    assert_eq!(r(0xff).unwrap()[2], 4);
    assert_eq!(r(8), None, "mark_to_drop");
    agree_on_random(&a, &b, 4);
    let c = coverage(&src);
    assert!(c.lists >= 2 && c.failed == 0 && c.inline >= 10, "{c:?}");
}

#[test]
fn loops_and_stacks_run_by_their_closures() {
    let src = r#"#include <v1model.p4>
header h_t { bit<8> v; }
struct hs { h_t[4] s; }
struct m { bit<8> n; }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(hdr.s.next); transition select(hdr.s.last.v) { 0: accept; default: start; } }
}
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    apply { meta.n = 0; if (hdr.s[1].isValid()) { hdr.s[1].v = hdr.s[0].v + 1; } }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.s); } }
V1Switch(P(), V(), I(), E(), V(), D()) main;
"#;
    let (a, b) = engines(src);
    assert_eq!(run(&a, &b, &[5, 9, 0, 7]).unwrap(), vec![5, 6, 0, 7]);
    // past the stack's end: a parser error
    run(&a, &b, &[1, 1, 1, 1, 1, 1]);
    agree_on_random(&a, &b, 5);
}

#[test]
fn backend_names_parse_and_print() {
    assert_eq!("native".parse::<Backend>(), Ok(Backend::Native));
    assert_eq!("closure".parse::<Backend>(), Ok(Backend::Closure));
    let e = "jit".parse::<Backend>().unwrap_err();
    assert!(
        e.contains("`jit`") && e.contains("closure") && e.contains("native"),
        "{e}"
    );
    assert_eq!(Backend::Native.to_string(), "native");
    assert_eq!(Backend::default(), Backend::Native);
}

#[test]
fn extract_on_and_off_byte_boundaries() {
    // `a` is 4 bits: `b` starts off a byte boundary (the closure's path), `c` after both on one
    let src = r#"#include <v1model.p4>
header a_t { bit<4> x; }
header b_t { bit<4> y; bit<16> z; }
header c_t { bit<8> k; bit<32> v; }
struct hs { a_t a; b_t b; c_t c; }
struct m { }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(hdr.a); p.extract(hdr.b); p.extract(hdr.c); transition accept; }
}
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    apply { hdr.c.v = hdr.c.v + (bit<32>)hdr.b.z; if (!hdr.c.isValid()) { mark_to_drop(sm); } }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.a); p.emit(hdr.b); p.emit(hdr.c); } }
V1Switch(P(), V(), I(), E(), V(), D()) main;
"#;
    let (a, b) = engines(src);
    let pkt = [0x12, 0x34, 0x56, 7, 0, 0, 1, 0, 9, 9, 9, 9, 9, 9, 9, 9];
    // z = 0x3456, v = 0x00000100 + 0x3456
    let out = run(&a, &b, &pkt).unwrap();
    assert_eq!(&out[..8], &[0x12, 0x34, 0x56, 7, 0, 0, 0x35, 0x56]);
    // too short for c (and for its 8 bytes of slack): the interpreter's path, then PacketTooShort
    for n in 0..pkt.len() {
        run(&a, &b, &pkt[..n]);
    }
    agree_on_random(&a, &b, 12);
    let c = coverage(src);
    assert!(c.inline >= 3, "{c:?}");
}

#[test]
fn extract_shares_words_across_long_headers_at_odd_offsets() {
    // `w` is 25 bytes after a 1-byte header: fields crossing the 8-byte words, a header longer
    // than 16 bytes at an odd offset, fields written between extract and emit
    let src = r#"#include <v1model.p4>
header o_t { bit<8> k; }
header w_t {
    bit<12> a; bit<20> b; bit<40> c; bit<56> d; bit<3> e; bit<5> f; bit<48> g; bit<16> t;
}
header z_t { bit<16> u; bit<8> r; bit<8> s; }
struct hs { o_t o; w_t w; z_t z; }
struct m { }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(hdr.o); p.extract(hdr.w); p.extract(hdr.z); transition accept; }
}
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (hdr.o.k[0:0] == 1) {
            hdr.w.c = hdr.w.c + 1;
            hdr.w.e = hdr.o.k[3:1];
            hdr.w.g = hdr.w.g ^ (bit<48>)hdr.w.a;
            hdr.w.t = hdr.w.b[15:0];
            // wrapping past the widths: the slots hold the values masked to them
            hdr.w.f = hdr.w.f + 31;
            hdr.w.a = hdr.w.a - 0x800;
            hdr.z.r = hdr.z.r + hdr.z.s;
        }
    }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.o); p.emit(hdr.w); p.emit(hdr.z); } }
V1Switch(P(), V(), I(), E(), V(), D()) main;
"#;
    let (a, b) = engines(src);
    let mut pkt = vec![0x00];
    pkt.extend((1..=25u8).map(|i| i.wrapping_mul(37)));
    // z: whole bytes at an even offset (byte loads for r and s)
    pkt.extend([0xab, 0xcd, 0xf0, 0x20]);
    pkt.extend(b"tail");
    // unchanged: the bytes as parsed
    let out = run(&a, &b, &pkt).unwrap();
    assert_eq!(out, pkt);
    // written: c + 1 (bits 32..72 of w), e = 5, g ^= a, t = b[15:0], f + 31 and a - 0x800
    // wrapped
    pkt[0] = 0x0b;
    let out = run(&a, &b, &pkt).unwrap();
    let w = &pkt[1..26];
    let field = |bytes: &[u8], lo: usize, n: usize| -> u64 {
        (lo..lo + n).fold(0, |v, i| {
            v << 1 | u64::from(bytes[i / 8] >> (7 - i % 8) & 1)
        })
    };
    let ow = &out[1..26];
    assert_eq!(field(ow, 32, 40), field(w, 32, 40) + 1);
    assert_eq!(field(ow, 128, 3), 5);
    assert_eq!(field(ow, 136, 48), field(w, 136, 48) ^ field(w, 0, 12));
    assert_eq!(field(ow, 184, 16), field(w, 12, 20) & 0xffff);
    assert_eq!(field(ow, 72, 56), field(w, 72, 56), "d unchanged");
    assert_eq!(field(ow, 131, 5), (field(w, 131, 5) + 31) & 31);
    assert_eq!(
        field(ow, 0, 12),
        field(w, 0, 12).wrapping_sub(0x800) & 0xfff
    );
    assert_eq!(field(ow, 12, 20), field(w, 12, 20), "b unchanged");
    assert_eq!(&out[26..30], &[0xab, 0xcd, 0x10, 0x20], "z.r + z.s wrapped");
    assert_eq!(&out[30..], b"tail");
    // every shorter packet, down to one byte short of w and past it
    for n in 0..pkt.len() {
        run(&a, &b, &pkt[..n]);
    }
    agree_on_random(&a, &b, 34);
    agree_on_random(&a, &b, 38);
    let c = coverage(src);
    assert!(c.inline >= 6, "{c:?}");
}

#[test]
fn extract_loads_each_word_once_for_the_router_headers() {
    use crate::load::plans::HeaderPlan;
    use crate::testutil::ROUTER;
    let prog = p4sec_frontend::compile_str("r.p4", ROUTER, &Default::default()).unwrap();
    let words = |name: &str| {
        let h = prog
            .headers
            .iter()
            .find(|h| h.name.ends_with(name))
            .unwrap();
        let p = HeaderPlan::new(h);
        let w = super::packet::shared_words(&p.fields);
        // each field read from its word as from its own load
        for (base, group) in &w {
            for &(slot, shift, m) in group {
                let f = p.fields.iter().find(|f| f.0 == slot).unwrap();
                assert_eq!(m, f.3);
                assert_eq!(shift + 8 * (f.1 - base), f.2, "{name} slot {slot}");
            }
        }
        w.iter().map(|g| g.0).collect::<Vec<_>>()
    };
    assert_eq!(words("ethernet"), [0, 6]);
    assert_eq!(words("ipv4"), [0, 8, 16]);
}

#[test]
fn checksum_folds_take_the_rounds_the_sum_bound_needs() {
    use super::packet::fold_rounds;
    let fold = |x: u64| (x & 0xffff) + (x >> 16);
    // every sum up to the bound ends below 2^16 after the rounds; one fewer does not for the
    // worst value
    for b in (0..0x30000u64)
        .step_by(0x1001)
        .chain([0x1ffff, 0x10000, 0xffff, 0x1fffe])
    {
        let r = fold_rounds(b);
        let worst = (0..=b)
            .map(|x| (0..r).fold(x, |x, _| fold(x)))
            .max()
            .unwrap();
        assert!(worst <= 0xffff, "bound {b:#x}: {r} rounds leave {worst:#x}");
        if r > 0 {
            let less = (0..=b)
                .map(|x| (1..r).fold(x, |x, _| fold(x)))
                .max()
                .unwrap();
            assert!(less > 0xffff, "bound {b:#x}: {} rounds suffice", r - 1);
        }
    }
    // the IPv4 header's five 32-bit lanes: three rounds, as for any sum up to 2^48; 64 bits: four
    assert_eq!(fold_rounds(5 * 0xffff_ffff), 3);
    assert_eq!(fold_rounds((1 << 48) - 1), 3);
    assert_eq!(fold_rounds(u64::MAX), 4);
    assert_eq!(fold_rounds(0xffff), 0);
}

#[test]
fn ipv4_checksum_verified_from_the_packet_bytes() {
    use crate::testutil::{ipv4_packet, route, ROUTER};
    let (a, b) = engines(ROUTER);
    for e in [&a, &b] {
        route(e, 0x0a00_0000, 8, 3);
    }
    let good = ipv4_packet([10, 1, 2, 3], 64);
    let out = run(&a, &b, &good).expect("routed");
    assert_eq!(out[22], 63, "ttl decremented");
    assert_eq!(crate::hash::csum16(&out[14..34]), 0, "checksum updated");
    // a wrong checksum: checksum_error set, the router drops
    let mut bad = good.clone();
    bad[24] ^= 1;
    assert_eq!(run(&a, &b, &bad), None);
    // ihl != 5: not verified
    let mut opt = good.clone();
    opt[14] = 0x46;
    opt[24] ^= 1;
    run(&a, &b, &opt);
    // cut inside the header: the fields' path
    for n in 14..good.len() {
        run(&a, &b, &good[..n]);
    }
    let c = coverage(ROUTER);
    assert!(c.failed == 0 && c.inline >= 5, "{c:?}");
}

#[test]
fn whole_parser_loops_selects_errors_and_general_transitions() {
    // state `s` loops on itself; `spin` never ends (ParserTimeout); `r` selects on a range (the
    // general loop's transition); no case (NoMatch), `reject`, the end of the packet
    // (PacketTooShort): the error each packet ends with is emitted
    let src = r#"#include <v1model.p4>
header h_t { bit<8> t; bit<8> u; }
header o_t { bit<8> err; bit<32> n; }
struct hs { o_t o; h_t h; }
struct m { bit<32> n; }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start { transition s; }
    state s {
        p.extract(hdr.h);
        meta.n = meta.n + 1;
        transition select(hdr.h.t, hdr.h.u) {
            (1, _): s; (2, 0xf0 &&& 0xf0): reject; (3, _): r; (4, 7): accept; (5, _): spin;
            (6, _): accept;
        }
    }
    state spin { meta.n = meta.n + 1; transition spin; }
    state r { transition select(hdr.h.u) { 1..5: accept; 9: s; } }
}
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    apply {
        hdr.o.setValid();
        hdr.o.n = meta.n;
        if (sm.parser_error == error.NoError) { hdr.o.err = 0; }
        else if (sm.parser_error == error.NoMatch) { hdr.o.err = 1; }
        else if (sm.parser_error == error.PacketTooShort) { hdr.o.err = 2; }
        else if (sm.parser_error == error.ParserTimeout) { hdr.o.err = 3; }
        else { hdr.o.err = 4; }
        sm.egress_spec = 1;
    }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.o); p.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), V(), D()) main;
"#;
    let (a, b) = engines(src);
    let cases: [(&[u8], u8, u32); 7] = [
        (&[1, 0, 1, 0, 4, 7], 0, 3),
        // `reject` leaves no error (`u32::MAX`: parser_error unchanged)
        (&[1, 0, 2, 0xf3], 0, 2),
        (&[3, 2, 0xee], 0, 1),
        (&[3, 9, 6, 0], 0, 2),
        (&[3, 7, 0], 1, 1),
        (&[5, 0], 3, 10_000),
        (&[1, 0, 1], 2, 1),
    ];
    for (pkt, err, n) in cases {
        let out = run(&a, &b, pkt).unwrap();
        assert_eq!(out[0], err, "{pkt:?}");
        assert_eq!(
            u32::from_be_bytes(out[1..5].try_into().unwrap()),
            n,
            "{pkt:?}"
        );
    }
    agree_on_random(&a, &b, 12);
    agree_on_random(&a, &b, 3);
}

#[test]
fn selects_on_three_and_four_keys_stay_in_the_native_parser() {
    // an IPv4-like select on (ihl, frag, proto) and one on four keys with masks and defaults; a
    // range case keeps its state on the general loop
    let src = r#"#include <v1model.p4>
header h_t { bit<4> ihl; bit<4> v; bit<13> frag; bit<3> fl; bit<8> proto; bit<8> a; }
header o_t { bit<8> path; bit<8> err; }
struct hs { h_t h; o_t o; }
struct m { }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start {
        p.extract(hdr.h);
        transition select(hdr.h.ihl, hdr.h.frag, hdr.h.proto) {
            (5, 0, 6): tcp;
            (5, 0, 17): udp;
            (5, 0 &&& 0x1ff0, _): small;
            (_, _, 1): four;
            default: accept;
        }
    }
    state tcp { hdr.o.path = 1; transition accept; }
    state udp { hdr.o.path = 2; transition accept; }
    state small { hdr.o.path = 3; transition accept; }
    state four {
        hdr.o.path = 4;
        transition select(hdr.h.v, hdr.h.fl, hdr.h.a, hdr.h.ihl) {
            (1, 0 &&& 4, 0x80 &&& 0xf0, _): tcp;
            (2, _, _, 7): udp;
            (3, _, _, _): ranged;
        }
    }
    state ranged {
        transition select(hdr.h.a, hdr.h.v, hdr.h.fl) {
            (0 .. 9, 3, _): small;
            default: reject;
        }
    }
}
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.o.setValid();
        if (sm.parser_error == error.NoMatch) { hdr.o.err = 1; }
        if (sm.parser_error == error.PacketTooShort) { hdr.o.err = 2; }
    }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); p.emit(hdr.o); } }
V1Switch(P(), V(), I(), E(), V(), D()) main;
"#;
    // only the range's state goes to the general loop
    let c = coverage(src);
    assert_eq!(c.parser_general, 1, "{c:?}");
    let (a, b) = engines(src);
    let pkt = |ihl: u8, v: u8, frag: u16, fl: u8, proto: u8, x: u8| {
        let w = (frag << 3) | fl as u16;
        vec![ihl << 4 | v, (w >> 8) as u8, w as u8, proto, x]
    };
    let path = |p: &[u8]| {
        let f = run(&a, &b, p).expect("forwarded");
        (f[f.len() - 2], f[f.len() - 1])
    };
    assert_eq!(path(&pkt(5, 0, 0, 0, 6, 0)), (1, 0));
    assert_eq!(path(&pkt(5, 0, 0, 0, 17, 0)), (2, 0));
    assert_eq!(path(&pkt(5, 0, 0x0f, 0, 99, 0)), (3, 0));
    assert_eq!(path(&pkt(5, 0, 0x10, 0, 99, 0)), (0, 0)); // default: accept
    assert_eq!(path(&pkt(6, 1, 0, 3, 1, 0x85)), (1, 0)); // four -> tcp
    assert_eq!(path(&pkt(7, 2, 0, 0, 1, 0)), (2, 0)); // four -> udp
    assert_eq!(path(&pkt(6, 2, 0, 0, 1, 0)), (4, 1)); // four, no case: NoMatch
    assert_eq!(path(&pkt(6, 3, 0, 0, 1, 5)), (3, 0)); // four -> ranged (general loop) -> small
    run(&a, &b, &pkt(6, 3, 0, 0, 1, 50)); // ranged: reject (dropped or not, the same on both)
                                          // cut short inside the header
    for n in 0..5 {
        run(&a, &b, &pkt(5, 0, 0, 0, 6, 0)[..n]);
    }
    agree_on_random(&a, &b, 5);
}

#[test]
fn a_light_deparser_is_native_when_it_lets_the_pass_run_on_one_context() {
    // the deparser's one `emit` is worth less than entering native code on its own; with the
    // parser and ingress native it joins them, and the pass runs on one context
    let src = |ingress: &str| {
        format!(
            r#"#include <v1model.p4>
header h_t {{ bit<8> a; bit<8> b; bit<32> w; }}
struct hs {{ h_t h; }}
struct m {{ bit<128> x; }}
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {{
    state start {{ p.extract(hdr.h); transition accept; }}
}}
control V(inout hs hdr, inout m meta) {{ apply {{ }} }}
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {{
    apply {{ {ingress} }}
}}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) {{ apply {{ }} }}
control D(packet_out p, in hs hdr) {{ apply {{ p.emit(hdr.h); }} }}
V1Switch(P(), V(), I(), E(), V(), D()) main;
"#
        )
    };
    let native = "sm.egress_spec = 1; hdr.h.b = hdr.h.a + 1; if (hdr.h.a == 7) { hdr.h.b = 0; }";
    // an ingress of only a digest (not translated) stays on its closure: no pass on one context, so the
    // deparser stays on its closure too
    let closures = "digest<bit<8>>(1, hdr.h.a);";
    let (one, none) = (src(native), src(closures));
    let (a, b) = engines(&one);
    assert!(b.controls.native.pass.is_some() && b.controls.native.deparser.is_some());
    for pkt in [&[7u8, 0, 1][..], &[1, 2, 3]] {
        let mut p = pkt.to_vec();
        p.resize(6, 9);
        run(&a, &b, &p);
    }
    agree_on_random(&a, &b, 6);
    let (c, d) = engines(&none);
    assert!(d.controls.native.pass.is_none() && d.controls.native.deparser.is_none());
    agree_on_random(&c, &d, 6);
    // the coverage counts the emit inline in the first, called back in the second
    let (x, y) = (coverage(&one), coverage(&none));
    assert!(
        x.inline > y.inline && y.fallback > x.fallback,
        "{x:?} {y:?}"
    );
}
