//! Table applies on both backends with the tables written between packets (one key: exact, LPM
//! and ternary; several keys of mixed kinds): the native lookup path reads the engine's storage as
//! the closures do, so each insert, modify and delete shows in the next packet on both, with `hit`
//! and the default action.

use super::tests::{coverage, engines, run};
use crate::testutil::pair::Kept;
use crate::Engine;
use p4sec_ir::{ActionCall, FieldMatch, TableEntry, Value};

const TABLES: &str = r#"#include <v1model.p4>
header h_t { bit<8> a; bit<16> b; bit<8> c; bit<8> oa; bit<8> ob; bit<8> oc; bit<8> hits; }
struct hs { h_t h; }
struct m { }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    action sa(bit<8> v) { hdr.h.oa = v; }
    action sb(bit<8> v) { hdr.h.ob = v; }
    action sc(bit<8> v) { hdr.h.oc = v; }
    table te { key = { hdr.h.a: exact; } actions = { sa; NoAction; } default_action = sa(0xee); }
    table tl { key = { hdr.h.b: lpm; } actions = { sb; NoAction; } default_action = NoAction(); }
    table tt { key = { hdr.h.c: ternary; } actions = { sc; NoAction; } default_action = NoAction(); }
    apply {
        sm.egress_spec = 1;
        hdr.h.hits = 0;
        if (te.apply().hit) { hdr.h.hits = hdr.h.hits | 1; }
        if (tl.apply().hit) { hdr.h.hits = hdr.h.hits | 2; }
        if (tt.apply().hit) { hdr.h.hits = hdr.h.hits | 4; }
    }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), V(), D()) main;
"#;

fn entry(e: &Engine, action: &str, m: FieldMatch, v: u64, priority: i32) -> TableEntry {
    let a = e
        .prog
        .actions
        .iter()
        .position(|x| x.name == action)
        .unwrap();
    TableEntry {
        matches: vec![m],
        action: ActionCall {
            action: a as u32,
            args: vec![Value::new(8, v)],
        },
        priority,
    }
}

/// (oa, ob, oc, hits) of the frame both engines emit for keys a, b, c.
fn out(x: &Kept, y: &Kept, a: u8, b: u16, c: u8) -> [u8; 4] {
    let mut pkt = vec![a];
    pkt.extend(b.to_be_bytes());
    pkt.extend([c, 0, 0, 0, 0]);
    let f = run(x, y, &pkt).expect("forwarded");
    [f[4], f[5], f[6], f[7]]
}

#[test]
fn tables_written_between_packets() {
    let (x, y) = engines(TABLES);
    let t = |n: &str| x.table_index(n).unwrap();
    let (te, tl, tt) = (t("I.te"), t("I.tl"), t("I.tt"));
    // empty tables: the defaults (te's with its argument)
    assert_eq!(out(&x, &y, 1, 0x0a01, 7), [0xee, 0, 0, 0]);
    let exact = |v| FieldMatch::Exact(Value::new(8, v));
    let lpm = |v, l| FieldMatch::Lpm {
        value: Value::new(16, v),
        prefix_len: l,
    };
    let tern = |v, m| FieldMatch::Ternary {
        value: Value::new(8, v),
        mask: Value::new(8, m),
    };
    for e in [&x, &y] {
        e.table_insert(te, entry(e, "I.sa", exact(1), 0x11, 0))
            .unwrap();
        e.table_insert(tl, entry(e, "I.sb", lpm(0x0a00, 8), 0x21, 0))
            .unwrap();
        e.table_insert(tl, entry(e, "I.sb", lpm(0x0a01, 16), 0x22, 0))
            .unwrap();
        e.table_insert(tt, entry(e, "I.sc", tern(0x04, 0x0c), 0x31, 1))
            .unwrap();
        e.table_insert(tt, entry(e, "I.sc", tern(0x07, 0xff), 0x32, 2))
            .unwrap();
    }
    assert_eq!(out(&x, &y, 1, 0x0a01, 7), [0x11, 0x22, 0x32, 7]);
    assert_eq!(out(&x, &y, 2, 0x0a02, 5), [0xee, 0x21, 0x31, 6]);
    assert_eq!(out(&x, &y, 2, 0x0b01, 0), [0xee, 0, 0, 0]);
    // modified, deleted, inserted: seen by the next packet
    for e in [&x, &y] {
        e.table_modify(te, entry(e, "I.sa", exact(1), 0x12, 0))
            .unwrap();
        e.table_delete(tl, &entry(e, "I.sb", lpm(0x0a01, 16), 0x22, 0))
            .unwrap();
        e.table_delete(tt, &entry(e, "I.sc", tern(0x07, 0xff), 0x32, 2))
            .unwrap();
        e.table_insert(te, entry(e, "I.sa", exact(2), 0x13, 0))
            .unwrap();
    }
    assert_eq!(out(&x, &y, 1, 0x0a01, 7), [0x12, 0x21, 0x31, 7]);
    assert_eq!(out(&x, &y, 2, 0x0a01, 0x13), [0x13, 0x21, 0, 3]);
    // many entries and random keys: the same frames on both
    for e in [&x, &y] {
        for i in 3..200u64 {
            e.table_insert(te, entry(e, "I.sa", exact(i), i, 0))
                .unwrap();
            e.table_insert(tl, entry(e, "I.sb", lpm(i << 8, 8 + (i % 9) as u32), i, 0))
                .unwrap_or(());
        }
    }
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..500 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        out(&x, &y, s as u8, (s >> 8) as u16, (s >> 24) as u8);
    }
}

/// A table of three keys (exact, LPM, ternary) and one of two keys where one is an expression:
/// applied natively (no statement of the control falls back to its closure), the same frames
/// out of both engines as entries come and go.
const MULTI: &str = r#"#include <v1model.p4>
header h_t { bit<8> a; bit<16> b; bit<8> c; bit<8> oa; bit<8> ob; bit<8> oc; bit<8> hits; }
struct hs { h_t h; }
struct m { }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    action sa(bit<8> v) { hdr.h.oa = v; }
    action sb(bit<8> v) { hdr.h.ob = v; }
    table t3 {
        key = { hdr.h.a: exact; hdr.h.b: lpm; hdr.h.c: ternary; }
        actions = { sa; NoAction; }
        default_action = sa(0xee);
    }
    table t2 {
        key = { hdr.h.a + hdr.h.c: exact; hdr.h.b: exact; }
        actions = { sb; NoAction; }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 1;
        hdr.h.hits = 0;
        if (t3.apply().hit) { hdr.h.hits = hdr.h.hits | 1; }
        if (t2.apply().hit) { hdr.h.hits = hdr.h.hits | 2; }
    }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), V(), D()) main;
"#;

fn entry_of(
    e: &Engine,
    action: &str,
    matches: Vec<FieldMatch>,
    v: u64,
    priority: i32,
) -> TableEntry {
    let mut x = entry(e, action, FieldMatch::Exact(Value::new(8, 0)), v, priority);
    x.matches = matches;
    x
}

#[test]
fn tables_of_several_keys_are_native_and_agree() {
    // the applies add no statement called through its closure: the same fallbacks as the program
    // without them
    let c = coverage(MULTI);
    let without = coverage(
        &MULTI
            .replace("if (t3.apply().hit) { hdr.h.hits = hdr.h.hits | 1; }", "")
            .replace("if (t2.apply().hit) { hdr.h.hits = hdr.h.hits | 2; }", ""),
    );
    assert!(
        c.failed == 0 && c.fallback == without.fallback,
        "{c:?} against {without:?}"
    );
    assert!(c.inline > without.inline, "{c:?} against {without:?}");
    let (x, y) = engines(MULTI);
    let t = |n: &str| x.table_index(n).unwrap();
    let (t3, t2) = (t("I.t3"), t("I.t2"));
    assert_eq!(out(&x, &y, 1, 0x0a01, 7), [0xee, 0, 0, 0]);
    let exact8 = |v| FieldMatch::Exact(Value::new(8, v));
    let exact16 = |v| FieldMatch::Exact(Value::new(16, v));
    let lpm = |v, l| FieldMatch::Lpm {
        value: Value::new(16, v),
        prefix_len: l,
    };
    let tern = |v, m| FieldMatch::Ternary {
        value: Value::new(8, v),
        mask: Value::new(8, m),
    };
    for e in [&x, &y] {
        let m = vec![exact8(1), lpm(0x0a00, 8), tern(0x04, 0x0c)];
        e.table_insert(t3, entry_of(e, "I.sa", m, 0x11, 1)).unwrap();
        let m = vec![exact8(1), lpm(0x0a01, 16), tern(0x07, 0xff)];
        e.table_insert(t3, entry_of(e, "I.sa", m, 0x12, 2)).unwrap();
        let m = vec![exact8(8), exact16(0x0a01)];
        e.table_insert(t2, entry_of(e, "I.sb", m, 0x21, 0)).unwrap();
    }
    // a = 1, c = 7: t3's second entry; a + c = 8, b = 0x0a01: t2's entry
    assert_eq!(out(&x, &y, 1, 0x0a01, 7), [0x12, 0x21, 0, 3]);
    // c = 5 matches the first entry's ternary (0x04 under 0x0c); a + c = 6: t2 misses
    assert_eq!(out(&x, &y, 1, 0x0a02, 5), [0x11, 0, 0, 1]);
    // a = 2: t3 misses (its default); the exact key of t2 is a + c = 8 again
    assert_eq!(out(&x, &y, 2, 0x0a01, 6), [0xee, 0x21, 0, 2]);
    for e in [&x, &y] {
        let m = vec![exact8(1), lpm(0x0a01, 16), tern(0x07, 0xff)];
        e.table_delete(t3, &entry_of(e, "I.sa", m, 0x12, 2))
            .unwrap();
        let m = vec![exact8(8), exact16(0x0a01)];
        e.table_modify(t2, entry_of(e, "I.sb", m, 0x22, 0)).unwrap();
    }
    // the deleted entry no longer matches: the first one does (7 is 0x04 under 0x0c, priority 1);
    // the modified one gives its new argument
    assert_eq!(out(&x, &y, 1, 0x0a01, 7), [0x11, 0x22, 0, 3]);
    // neither matches (8 is not 0x04 under 0x0c): the default
    assert_eq!(out(&x, &y, 1, 0x0a01, 8), [0xee, 0, 0, 0]);
    for e in [&x, &y] {
        for i in 2..150u64 {
            let m = vec![
                exact8(i),
                lpm((i << 8) | i, 8 + (i % 9) as u32),
                tern(i, 0xf0),
            ];
            e.table_insert(t3, entry_of(e, "I.sa", m, i, i as i32))
                .unwrap_or(());
            let m = vec![exact8(i), exact16(i * 3)];
            e.table_insert(t2, entry_of(e, "I.sb", m, i, 0))
                .unwrap_or(());
        }
    }
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..500 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        out(&x, &y, s as u8 & 0x7f, (s >> 8) as u16, (s >> 24) as u8);
    }
}
