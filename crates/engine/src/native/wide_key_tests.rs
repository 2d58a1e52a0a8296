//! Table applies of keys wider than 64 bits from native code (an IPv6 destination by LPM, alone
//! and beside a VRF; a 72-bit exact key, its top word masked; a 128-bit ternary key), and the
//! extract and emit of the header holding them: generated inline, nothing left to a closure, and
//! the same frames on both engines as a model of each table expects, through inserts and deletes
//! between packets.

use super::tests::{coverage, engines, run};
use crate::testutil::pair::{self, Kept};
use crate::Engine;
use p4sec_ir::{FieldMatch, TableEntry};

const PROGRAM: &str = r#"#include <v1model.p4>
header h_t { bit<128> dst; bit<8> vrf; bit<72> odd; bit<8> o6; bit<8> ov; bit<8> oo; bit<8> ot; }
struct hs { h_t h; }
struct m { }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    action s6(bit<8> v) { hdr.h.o6 = v; }
    action sv(bit<8> v) { hdr.h.ov = v; }
    action so(bit<8> v) { hdr.h.oo = v; }
    action st(bit<8> v) { hdr.h.ot = v; }
    table t6 { key = { hdr.h.dst: lpm; } actions = { s6; } default_action = s6(0xd6); }
    table tv { key = { hdr.h.vrf: exact; hdr.h.dst: lpm; } actions = { sv; } default_action = sv(0xdd); }
    table to { key = { hdr.h.odd: exact; } actions = { so; } default_action = so(0xd0); }
    table tt { key = { hdr.h.dst: ternary; } actions = { st; } default_action = st(0xdf); }
    apply {
        sm.egress_spec = 1;
        t6.apply();
        tv.apply();
        to.apply();
        tt.apply();
    }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), V(), D()) main;
"#;

/// 128-bit prefix of length `len`.
fn mask128(len: u32) -> u128 {
    u128::MAX.checked_shl(128 - len).unwrap_or(0)
}

/// The routes of each table and what a packet shows.
#[derive(Default)]
struct Model {
    t6: Vec<(u128, u32, u8)>,
    tv: Vec<(u8, u128, u32, u8)>,
    to: Vec<(u128, u8)>,
    tt: Vec<(u128, u128, i32, u8)>,
}

impl Model {
    /// (o6, ov, oo, ot) for a packet of `dst`, `vrf`, `odd`.
    fn want(&self, dst: u128, vrf: u8, odd: u128) -> [u8; 4] {
        let lpm6 = self
            .t6
            .iter()
            .filter(|r| dst & mask128(r.1) == r.0)
            .max_by_key(|r| r.1);
        let lpmv = self
            .tv
            .iter()
            .filter(|r| r.0 == vrf && dst & mask128(r.2) == r.1)
            .max_by_key(|r| r.2);
        let tern = self
            .tt
            .iter()
            .filter(|r| dst & r.1 == r.0)
            .max_by_key(|r| r.2);
        [
            lpm6.map_or(0xd6, |r| r.2),
            lpmv.map_or(0xdd, |r| r.3),
            self.to.iter().find(|r| r.0 == odd).map_or(0xd0, |r| r.1),
            tern.map_or(0xdf, |r| r.3),
        ]
    }
}

fn call(e: &Engine, a: &str, v: u8) -> p4sec_ir::ActionCall {
    pair::call(e, a, &[v.into()])
}

fn lpm(dst: u128, len: u32) -> FieldMatch {
    FieldMatch::Lpm {
        value: pair::value(128, dst),
        prefix_len: len,
    }
}

fn entries(e: &Engine, m: &Model) -> Vec<(&'static str, TableEntry)> {
    let mut v = vec![];
    for &(p, l, o) in &m.t6 {
        v.push((
            "I.t6",
            TableEntry {
                matches: vec![lpm(p, l)],
                action: call(e, "I.s6", o),
                priority: 0,
            },
        ));
    }
    for &(vrf, p, l, o) in &m.tv {
        let matches = vec![FieldMatch::Exact(pair::value(8, vrf.into())), lpm(p, l)];
        v.push((
            "I.tv",
            TableEntry {
                matches,
                action: call(e, "I.sv", o),
                priority: 0,
            },
        ));
    }
    for &(k, o) in &m.to {
        let matches = vec![FieldMatch::Exact(pair::value(72, k))];
        v.push((
            "I.to",
            TableEntry {
                matches,
                action: call(e, "I.so", o),
                priority: 0,
            },
        ));
    }
    for &(k, mask, prio, o) in &m.tt {
        let matches = vec![FieldMatch::Ternary {
            value: pair::value(128, k),
            mask: pair::value(128, mask),
        }];
        v.push((
            "I.tt",
            TableEntry {
                matches,
                action: call(e, "I.st", o),
                priority: prio,
            },
        ));
    }
    v
}

/// The frame's four outputs for a packet of `dst`, `vrf`, `odd`, the same on both engines.
fn out(a: &Kept, b: &Kept, dst: u128, vrf: u8, odd: u128) -> [u8; 4] {
    let mut pkt = dst.to_be_bytes().to_vec();
    pkt.push(vrf);
    pkt.extend(&odd.to_be_bytes()[7..]);
    pkt.extend([0u8; 4]);
    let f = run(a, b, &pkt).expect("forwarded");
    f[26..30].try_into().unwrap()
}

#[test]
fn wide_keys_are_applied_inline_and_agree_with_the_model() {
    // the four applies inline, adding no call back to a closure; and the header's extract and
    // emit inline too (its wide fields' words each on bytes of their own), their slow paths (a
    // cursor off a byte boundary, the end of the packet) the only call backs
    let c = coverage(PROGRAM);
    let without = PROGRAM
        .replace("t6.apply();", "")
        .replace("tv.apply();", "");
    let without = coverage(
        &without
            .replace("to.apply();", "")
            .replace("tt.apply();", ""),
    );
    assert_eq!(c.failed, 0, "{c:?}");
    assert_eq!(c.fallback, without.fallback, "{c:?} {without:?}");
    assert_eq!((without.inline, without.fallback), (2, 2), "{without:?}");
    assert!(c.inline >= without.inline + 8, "{c:?} {without:?}");
    let (a, b) = engines(PROGRAM);
    let top = 0x2001_0db8_0000_0000_0000_0000_0000_0000u128;
    let mut m = Model::default();
    let probes = |m: &Model| {
        let mut v = vec![(0u128, 0u8, 0u128), (u128::MAX, 1, (1u128 << 72) - 1)];
        for (i, r) in m.t6.iter().enumerate() {
            let span = !mask128(r.1);
            v.extend([
                (r.0, 1, 5),
                (r.0 | span, 2, 7),
                ((r.0 | span).wrapping_add(1), i as u8 % 3, 9),
            ]);
        }
        for r in &m.to {
            v.push((top, 1, r.0));
            v.push((top, 1, r.0 ^ 1 << 70));
        }
        v
    };
    let check = |m: &Model, what: &str| {
        for (dst, vrf, odd) in probes(m) {
            assert_eq!(
                out(&a, &b, dst, vrf, odd),
                m.want(dst, vrf, odd),
                "{what}: {dst:#x} vrf {vrf} odd {odd:#x}"
            );
        }
    };
    check(&m, "no entries");
    for (j, len) in [16u32, 32, 48, 56, 64, 72, 96, 127, 128]
        .into_iter()
        .enumerate()
    {
        let p = (top | (0x1111_2222_3333_4444_5555_6666_7777_8888u128 >> (j * 3))) & mask128(len);
        m.t6.push((p, len, j as u8 + 1));
        m.tv.push((j as u8 % 3, p, len, j as u8 + 0x20));
        m.tt.push((p, mask128(len), len as i32, j as u8 + 0x40));
    }
    m.t6.push((0, 0, 0x60));
    for k in [1u128, 1 << 64, (1 << 72) - 1, 0xab << 64 | 0x1234] {
        m.to.push((k, (k % 200) as u8 + 1));
    }
    for (t, e) in entries(&a, &m) {
        for x in [&a, &b] {
            x.table_insert(x.table_index(t).unwrap(), e.clone())
                .unwrap();
        }
    }
    check(&m, "after inserts");
    // every other route deleted from each table
    let gone = Model {
        t6: m.t6.iter().copied().step_by(2).collect(),
        tv: m.tv.iter().copied().step_by(2).collect(),
        to: m.to.iter().copied().step_by(2).collect(),
        tt: m.tt.iter().copied().step_by(2).collect(),
    };
    for (t, e) in entries(&a, &gone) {
        for x in [&a, &b] {
            x.table_delete(x.table_index(t).unwrap(), &e).unwrap();
        }
    }
    m.t6.retain(|r| !gone.t6.contains(r));
    m.tv.retain(|r| !gone.tv.contains(r));
    m.to.retain(|r| !gone.to.contains(r));
    m.tt.retain(|r| !gone.tt.contains(r));
    check(&m, "after deletes");
}

/// A header of 128-bit fields on byte boundaries emitted from the packet's bytes (most of its
/// fields never written; a payload after it, so that the fast extract records its offset), its one
/// written wide field, written by an action from another, put in from its slots, both words of it:
/// the frames both engines emit, and the value written.
#[test]
fn written_wide_fields_are_put_into_a_header_emitted_from_the_bytes() {
    let src = crate::testutil::one_header_program(
        "bit<8> k; bit<128> a; bit<128> b; bit<128> d; bit<128> e; bit<128> f; bit<32> pad;",
        r#"action copy() { hdr.h.b = hdr.h.a; }
        table t { key = { hdr.h.k: exact; } actions = { copy; NoAction; }
                  const entries = { 1 : copy(); } default_action = NoAction(); }
        apply { t.apply(); }"#,
    );
    let (a, b) = engines(&src);
    let mut pkt = vec![1u8];
    pkt.extend((1..=80u8).map(|x| x.wrapping_mul(7)));
    pkt.extend([0xee; 4]);
    // the payload
    pkt.extend([0x5a; 16]);
    let out = run(&a, &b, &pkt).expect("forwarded");
    assert_eq!(&out[1..17], &pkt[1..17], "a as it came");
    assert_eq!(&out[17..33], &pkt[1..17], "b = a, both words");
    assert_eq!(
        &out[33..],
        &pkt[33..],
        "the rest and the payload as they came"
    );
    // k = 2: nothing written, the header as it came
    pkt[0] = 2;
    assert_eq!(run(&a, &b, &pkt).expect("forwarded"), pkt);
    super::tests::agree_on_random(&a, &b, 101);
}
