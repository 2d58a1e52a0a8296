//! Tests of match-action: lookups of every match kind through control-plane changes, atomic
//! publication, action arguments, what an apply records.

use crate::testutil::*;
use crate::*;
use p4sec_ir::*;
use std::sync::atomic::Ordering;
use std::sync::Arc;

#[test]
fn table_writes_do_not_block_lookups() {
    let e = Arc::new(engine(ROUTER));
    let writer = {
        let e = e.clone();
        std::thread::spawn(move || {
            for i in 0..2000u32 {
                route(&e, 0x0b000000 | (i << 8), 24, 3);
            }
        })
    };
    let mut w = Worker::new(&e);
    let mut out = Outputs::default();
    for _ in 0..2000 {
        e.process(&mut w, 0, &ipv4_packet([11, 0, 5, 1], 64), &mut out);
    }
    writer.join().unwrap();
    out.clear();
    e.process(&mut w, 0, &ipv4_packet([11, 0, 5, 1], 64), &mut out);
    assert_eq!(out.iter().next().map(|f| f.0), Some(3));
}

/// Changes published together by `tables_update_atomic` are seen together: a packet never sees one
/// table's new entry with the other table's old one, while a writer keeps changing both.
#[test]
fn atomic_updates_of_two_tables_are_seen_together() {
    let src = one_header_program(
        "bit<8> k; bit<32> b; bit<32> c;",
        "    action set_b(bit<32> v) { hdr.h.b = v; }
    action set_c(bit<32> v) { hdr.h.c = v; }
    table tb { key = { hdr.h.k : exact; } actions = { set_b; NoAction; } default_action = NoAction(); }
    table tc { key = { hdr.h.k : exact; } actions = { set_c; NoAction; } default_action = NoAction(); }
    apply { tb.apply(); tc.apply(); sm.egress_spec = 1; }",
    );
    let e = Arc::new(engine(&src));
    let (tb, tc) = (
        e.table_index("I.tb").unwrap(),
        e.table_index("I.tc").unwrap(),
    );
    let act = |n: &str| e.prog.actions.iter().position(|a| a.name == n).unwrap() as u32;
    let (sb, sc) = (act("I.set_b"), act("I.set_c"));
    let entry = |a: u32, v: u64| TableEntry {
        matches: vec![FieldMatch::Exact(Value::new(8, 7))],
        action: ActionCall {
            action: a,
            args: vec![Value::new(32, v)],
        },
        priority: 0,
    };
    e.tables_update_atomic(&[tb, tc], |ti, t, d| {
        d.insert(t, entry(if ti == tb { sb } else { sc }, 0))
    })
    .unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (e, stop) = (e.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut v = 0;
            while !stop.load(Ordering::Relaxed) {
                v += 1;
                e.tables_update_atomic(&[tb, tc], |ti, t, d| {
                    d.modify(t, entry(if ti == tb { sb } else { sc }, v))
                })
                .unwrap();
            }
            v
        })
    };
    let mut w = Worker::new(&e);
    let mut out = Outputs::default();
    let mut pkt = vec![0u8; 9 + 8];
    pkt[0] = 7;
    let mut seen = std::collections::HashSet::new();
    for _ in 0..200_000 {
        out.clear();
        e.process(&mut w, 0, &pkt, &mut out);
        let (_, f) = out.iter().next().unwrap();
        let b = u32::from_be_bytes(f[1..5].try_into().unwrap());
        let c = u32::from_be_bytes(f[5..9].try_into().unwrap());
        assert_eq!(b, c, "a packet saw one table updated without the other");
        seen.insert(b);
    }
    stop.store(true, Ordering::Relaxed);
    let writes = writer.join().unwrap();
    assert!(
        writes > 10 && seen.len() > 2,
        "the writer made {writes} changes, packets saw {} versions",
        seen.len()
    );
    // a failing change leaves both tables as they were
    let before = e.table_entries(tb).unwrap()[0].0.clone();
    let r = e.tables_update_atomic(&[tb, tc], |ti, t, d| {
        if ti == tb {
            d.modify(t, entry(sb, 999_999))
        } else {
            d.insert(t, entry(sc, 1))
        }
    });
    assert!(r.is_err());
    assert_eq!(e.table_entries(tb).unwrap()[0].0, before);
}

/// LPM tables (one LPM key alone, and an exact key beside it) against a reference model while
/// entries are inserted, modified and deleted at random: the longest live prefix wins and its
/// current action data is used (the hot per-entry data stays in step with the entries through swaps
/// on delete).
#[test]
fn lpm_lookups_follow_inserts_modifies_and_deletes() {
    for with_exact in [false, true] {
        let key = if with_exact {
            "hdr.h.k : exact; hdr.h.a : lpm;"
        } else {
            "hdr.h.a : lpm;"
        };
        let src = format!(
            r#"#include <v1model.p4>
header h_t {{ bit<8> k; bit<32> a; bit<32> b; }}
struct hs {{ h_t h; }}
struct m {{ }}
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {{ state start {{ p.extract(hdr.h); transition accept; }} }}
control V(inout hs hdr, inout m meta) {{ apply {{ }} }}
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {{
    action set(bit<32> v) {{ hdr.h.b = v; sm.egress_spec = 1; }}
    action miss() {{ hdr.h.b = 0; sm.egress_spec = 1; }}
    table t {{ key = {{ {key} }} actions = {{ set; miss; }} default_action = miss(); size = 4096; }}
    apply {{ t.apply(); }}
}}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) {{ apply {{ }} }}
control C(inout hs hdr, inout m meta) {{ apply {{ }} }}
control D(packet_out p, in hs hdr) {{ apply {{ p.emit(hdr.h); }} }}
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#
        );
        let e = engine(&src);
        let ti = e.table_index("I.t").unwrap();
        let set = e
            .prog
            .actions
            .iter()
            .position(|a| a.name == "I.set")
            .unwrap() as u32;
        let entry = |k: u8, prefix: u32, len: u32, v: u32| {
            let mut matches = vec![FieldMatch::Lpm {
                value: Value::new(32, prefix as u64),
                prefix_len: len,
            }];
            if with_exact {
                matches.insert(0, FieldMatch::Exact(Value::new(8, k as u64)));
            }
            TableEntry {
                matches,
                action: ActionCall {
                    action: set,
                    args: vec![Value::new(32, v as u64)],
                },
                priority: 0,
            }
        };
        // the reference: (k, prefix, len) -> value
        let mut model: std::collections::HashMap<(u8, u32, u32), u32> = Default::default();
        let mut rng = 7u64;
        let mut w = Worker::new(&e);
        let mut out = Outputs::default();
        for round in 0..3000 {
            let r = hash::next_random(&mut rng);
            let len = [0, 8, 12, 16, 20, 24, 28, 32][(r % 8) as usize];
            let k = if with_exact { ((r >> 8) % 3) as u8 } else { 0 };
            let prefix = ((r >> 16) as u32 & 0x0f0f_ff0f)
                & if len == 0 { 0 } else { u32::MAX << (32 - len) };
            let v = round + 1;
            match (r >> 60) % 4 {
                0 | 1 if !model.contains_key(&(k, prefix, len)) => {
                    e.table_insert(ti, entry(k, prefix, len, v)).unwrap();
                    model.insert((k, prefix, len), v);
                }
                2 if model.contains_key(&(k, prefix, len)) => {
                    e.table_modify(ti, entry(k, prefix, len, v)).unwrap();
                    model.insert((k, prefix, len), v);
                }
                3 => {
                    // delete some live entry
                    if let Some(&key) = model.keys().nth((r % 97) as usize % model.len().max(1)) {
                        e.table_delete(ti, &entry(key.0, key.1, key.2, 0)).unwrap();
                        model.remove(&key);
                    }
                }
                _ => {}
            }
            // look up a few addresses
            for _ in 0..4 {
                let q = hash::next_random(&mut rng);
                let (qk, qa) = (
                    if with_exact { (q % 3) as u8 } else { 0 },
                    (q >> 16) as u32 & 0x0f0f_ff0f,
                );
                let want = model
                    .iter()
                    .filter(|((mk, p, l), _)| {
                        *mk == qk && (*l == 0 || qa & (u32::MAX << (32 - l)) == *p)
                    })
                    .max_by_key(|((_, _, l), _)| *l)
                    .map(|(_, v)| *v)
                    .unwrap_or(0);
                let mut pkt = vec![qk];
                pkt.extend_from_slice(&qa.to_be_bytes());
                pkt.extend_from_slice(&[0xee; 4]);
                out.clear();
                e.process(&mut w, 0, &pkt, &mut out);
                let (_, f) = out.iter().next().unwrap();
                assert_eq!(
                    u32::from_be_bytes([f[5], f[6], f[7], f[8]]),
                    want,
                    "round {round}, key {qk} {qa:#x} (exact key: {with_exact})"
                );
            }
        }
        assert!(
            model.len() > 50,
            "the table held many entries ({})",
            model.len()
        );
    }
}

/// Ternary + range tables large enough for tuple space search, against a reference model (highest
/// priority wins, then the earlier insertion) while entries are inserted, modified and deleted at
/// random.
#[test]
fn ternary_and_range_lookups_follow_priorities_through_changes() {
    let src = r#"#include <v1model.p4>
header h_t { bit<8> k; bit<32> a; bit<16> p; bit<32> b; }
struct hs { h_t h; }
struct m { }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) { state start { p.extract(hdr.h); transition accept; } }
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    action set(bit<32> v) { hdr.h.b = v; sm.egress_spec = 1; }
    action miss() { hdr.h.b = 0; sm.egress_spec = 1; }
    table t { key = { hdr.h.k : ternary; hdr.h.a : ternary; hdr.h.p : range; } actions = { set; miss; } default_action = miss(); size = 4096; }
    apply { t.apply(); }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs hdr, inout m meta) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;
    let e = engine(src);
    let ti = e.table_index("I.t").unwrap();
    let set = e
        .prog
        .actions
        .iter()
        .position(|a| a.name == "I.set")
        .unwrap() as u32;
    // (k value, k mask, a value, a mask, lo, hi, priority)
    type M = (u8, u8, u32, u32, u16, u16, i32);
    let entry = |m: &M, v: u32| TableEntry {
        matches: vec![
            FieldMatch::Ternary {
                value: Value::new(8, m.0 as u64),
                mask: Value::new(8, m.1 as u64),
            },
            FieldMatch::Ternary {
                value: Value::new(32, m.2 as u64),
                mask: Value::new(32, m.3 as u64),
            },
            FieldMatch::Range {
                lo: Value::new(16, m.4 as u64),
                hi: Value::new(16, m.5 as u64),
            },
        ],
        action: ActionCall {
            action: set,
            args: vec![Value::new(32, v as u64)],
        },
        priority: m.6,
    };
    let masks_k = [0u8, 0xff, 0xf0];
    let masks_a = [0u32, 0xffff_ffff, 0xffff_ff00, 0xffff_0000];
    // the reference: (match, seq, value) in insertion order
    let mut model: Vec<(M, u64, u32)> = vec![];
    let mut seq = 0u64;
    let mut rng = 11u64;
    let mut w = Worker::new(&e);
    let mut out = Outputs::default();
    for round in 0..4000u32 {
        let r = hash::next_random(&mut rng);
        let r2 = hash::next_random(&mut rng);
        let (km, am) = (masks_k[(r % 3) as usize], masks_a[((r >> 2) % 4) as usize]);
        let lo = (r2 % 4) as u16 * 1000;
        let m: M = (
            ((r >> 8) & 3) as u8 & km,
            km,
            ((r >> 16) as u32 & 0x0003_0303) & am,
            am,
            lo,
            lo + 1500,
            ((r >> 40) % 6) as i32 + 1,
        );
        let pos = model.iter().position(|(x, _, _)| *x == m);
        match (r >> 60) % 4 {
            0 | 1 if pos.is_none() => {
                seq += 1;
                e.table_insert(ti, entry(&m, round + 1)).unwrap();
                model.push((m, seq, round + 1));
            }
            2 if pos.is_some() => {
                e.table_modify(ti, entry(&m, round + 1)).unwrap();
                model[pos.unwrap()].2 = round + 1;
            }
            3 if !model.is_empty() => {
                let (x, _, _) = model.remove((r2 >> 20) as usize % model.len());
                e.table_delete(ti, &entry(&x, 0)).unwrap();
            }
            0 | 1 => assert!(
                e.table_insert(ti, entry(&m, 1)).is_err(),
                "a duplicate is refused"
            ),
            _ => {}
        }
        for _ in 0..4 {
            let q = hash::next_random(&mut rng);
            let (qk, qa, qp) = (
                (q & 3) as u8,
                (q >> 8) as u32 & 0x0003_0303,
                ((q >> 40) % 5000) as u16,
            );
            let want = model
                .iter()
                .filter(|((k, km, a, am, lo, hi, _), _, _)| {
                    qk & km == *k && qa & am == *a && (*lo..=*hi).contains(&qp)
                })
                .min_by_key(|((.., p), s, _)| (std::cmp::Reverse(*p), *s))
                .map(|(_, _, v)| *v)
                .unwrap_or(0);
            let mut pkt = vec![qk];
            pkt.extend_from_slice(&qa.to_be_bytes());
            pkt.extend_from_slice(&qp.to_be_bytes());
            pkt.extend_from_slice(&[0xee; 4]);
            out.clear();
            e.process(&mut w, 0, &pkt, &mut out);
            let (_, f) = out.iter().next().unwrap();
            assert_eq!(
                u32::from_be_bytes([f[7], f[8], f[9], f[10]]),
                want,
                "round {round}: key {qk} {qa:#x} {qp}"
            );
        }
    }
    assert!(
        model.len() > 100,
        "the table held many entries ({})",
        model.len()
    );
}

/// A miss writes the default action's arguments into its parameters, for the lean one-key apply and
/// the general apply alike: one, three and five parameter words (the published writes come in
/// fours), a 128-bit parameter, and a default changed at run time.
#[test]
fn actions_get_their_arguments_on_a_miss_and_on_a_hit() {
    let src = r#"#include <v1model.p4>
header h_t { bit<8> a; bit<32> b; bit<64> c; bit<16> d; bit<8> e; }
struct hs { h_t h; }
struct m { bit<128> wide; }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) { state start { p.extract(hdr.h); transition accept; } }
control C(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    action one(bit<9> port) { sm.egress_spec = port; }
    action three(bit<9> port, bit<128> w) { sm.egress_spec = port; meta.wide = w; hdr.h.c = w[127:64]; hdr.h.b = w[31:0]; }
    action five(bit<9> port, bit<8> a, bit<32> b, bit<64> c, bit<16> d) { sm.egress_spec = port; hdr.h.a = a; hdr.h.b = b; hdr.h.c = c; hdr.h.d = d; }
    table lean { key = { hdr.h.e : exact; } actions = { one; three; five; } default_action = one(1); }
    table general { key = { hdr.h.e : exact; hdr.h.a : exact; } actions = { one; three; five; } default_action = one(2); }
    apply { if (hdr.h.e == 0) { lean.apply(); } else { general.apply(); } }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
"#;
    let e = engine(src);
    let mut w = Worker::new(&e);
    let mut out = Outputs::default();
    let action = |n: &str| {
        e.prog
            .actions
            .iter()
            .position(|a| a.name == format!("I.{n}"))
            .unwrap() as u32
    };
    let run = |w: &mut Worker, out: &mut Outputs, e_field: u8| -> (u32, Vec<u8>) {
        out.clear();
        e.process(
            w,
            0,
            &[9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, e_field],
            out,
        );
        let (port, bytes) = out.iter().next().expect("a frame out");
        (port, bytes.to_vec())
    };
    for (ti, e_field) in [
        (e.table_index("I.lean").unwrap(), 0u8),
        (e.table_index("I.general").unwrap(), 1u8),
    ] {
        e.table_set_default(
            ti,
            ActionCall {
                action: action("one"),
                args: vec![Value::new(9, 5)],
            },
        )
        .unwrap();
        assert_eq!(run(&mut w, &mut out, e_field).0, 5);
        let wide = Value {
            width: 128,
            words: vec![0x1122_3344_5566_7788, 0x99aa_bbcc_ddee_ff00],
        };
        e.table_set_default(
            ti,
            ActionCall {
                action: action("three"),
                args: vec![Value::new(9, 6), wide],
            },
        )
        .unwrap();
        let (port, bytes) = run(&mut w, &mut out, e_field);
        assert_eq!(port, 6);
        assert_eq!(
            &bytes[1..5],
            &[0x55, 0x66, 0x77, 0x88],
            "b = the low 32 bits"
        );
        assert_eq!(
            &bytes[5..13],
            &[0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x00],
            "c = the high 64 bits"
        );
        let args = vec![
            Value::new(9, 7),
            Value::new(8, 0xa1),
            Value::new(32, 0xb2b3_b4b5),
            Value::new(64, 0xc1c2_c3c4_c5c6_c7c8),
            Value::new(16, 0xd1d2),
        ];
        e.table_set_default(
            ti,
            ActionCall {
                action: action("five"),
                args,
            },
        )
        .unwrap();
        let (port, bytes) = run(&mut w, &mut out, e_field);
        assert_eq!(port, 7);
        assert_eq!(
            bytes[..15],
            [
                0xa1, 0xb2, 0xb3, 0xb4, 0xb5, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xd1,
                0xd2
            ],
            "table {ti}"
        );
        assert_eq!(bytes[15], e_field);
    }
    // hits: an entry's arguments, inline (`one`'s word; `three`'s three words, its 128-bit argument
    // two of them) or not (`five`'s five words), through the lean one-key apply (`lean`) and the
    // general one (`general`, two keys); the default action stays `five`
    for (ti, e_field) in [
        (e.table_index("I.lean").unwrap(), 0u8),
        (e.table_index("I.general").unwrap(), 1u8),
    ] {
        let matches = if e_field == 0 {
            vec![FieldMatch::Exact(Value::new(8, 0))]
        } else {
            vec![
                FieldMatch::Exact(Value::new(8, 1)),
                FieldMatch::Exact(Value::new(8, 9)),
            ]
        };
        let entry = |a: &str, args: Vec<Value>| TableEntry {
            matches: matches.clone(),
            action: ActionCall {
                action: action(a),
                args,
            },
            priority: 0,
        };
        e.table_insert(ti, entry("one", vec![Value::new(9, 11)]))
            .unwrap();
        assert_eq!(run(&mut w, &mut out, e_field).0, 11);
        let wide = Value {
            width: 128,
            words: vec![0x0102_0304_0506_0708, 0x1112_1314_1516_1718],
        };
        e.table_modify(ti, entry("three", vec![Value::new(9, 12), wide]))
            .unwrap();
        let (port, bytes) = run(&mut w, &mut out, e_field);
        assert_eq!(port, 12);
        assert_eq!(
            &bytes[1..13],
            &[0x05, 0x06, 0x07, 0x08, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18],
            "table {ti}"
        );
        let args = vec![
            Value::new(9, 13),
            Value::new(8, 0xe1),
            Value::new(32, 0xe2e3_e4e5),
            Value::new(64, 0xf1f2_f3f4_f5f6_f7f8),
            Value::new(16, 0xe9ea),
        ];
        e.table_modify(ti, entry("five", args)).unwrap();
        let (port, bytes) = run(&mut w, &mut out, e_field);
        assert_eq!(port, 13);
        assert_eq!(
            bytes[..15],
            [
                0xe1, 0xe2, 0xe3, 0xe4, 0xe5, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xe9,
                0xea
            ],
            "table {ti}"
        );
    }
}

/// `t.apply();` as a statement records neither hit nor action run; an apply whose result is read
/// records it, and the empty table's miss and an installed entry's hit both come out right.
#[test]
fn apply_records_hit_and_action_run_only_where_they_are_read() {
    let src = one_header_program(
        "bit<8> k; bit<8> hit; bit<8> run;",
        "    action a() { sm.egress_spec = 1; }
    action b() { sm.egress_spec = 2; }
    table plain { key = { hdr.h.k : exact; } actions = { a; b; } default_action = a(); }
    table tested { key = { hdr.h.k : exact; } actions = { a; b; } default_action = a(); }
    table switched { key = { hdr.h.k : exact; } actions = { a; b; } default_action = a(); }
    apply {
        plain.apply();
        if (tested.apply().hit) { hdr.h.hit = 1; } else { hdr.h.hit = 2; }
        switch (switched.apply().action_run) { a: { hdr.h.run = 10; } b: { hdr.h.run = 20; } }
    }",
    );
    let e = engine(&src);
    fn applies(body: &[Stmt], out: &mut Vec<(u32, bool, bool)>) {
        for s in body {
            match s {
                Stmt::ApplyTable {
                    table,
                    hit,
                    action_run,
                } => out.push((*table, hit.is_some(), action_run.is_some())),
                Stmt::Block { body, .. } => applies(body, out),
                Stmt::If { then, else_, .. } => {
                    applies(then, out);
                    applies(else_, out);
                }
                _ => {}
            }
        }
    }
    let mut found = vec![];
    applies(&e.prog.ingress.body, &mut found);
    let t = |n: &str| e.table_index(n).unwrap() as u32;
    assert!(found.contains(&(t("I.plain"), false, false)), "{found:?}");
    assert!(
        found.iter().any(|&(ti, hit, _)| ti == t("I.tested") && hit),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|&(ti, _, run)| ti == t("I.switched") && run),
        "{found:?}"
    );

    let mut w = Worker::new(&e);
    let mut out = Outputs::default();
    let mut run = |k: u8| -> Vec<u8> {
        out.clear();
        e.process(&mut w, 0, &[k, 0, 0], &mut out);
        out.iter().next().expect("a frame out").1.to_vec()
    };
    // all three tables empty: misses, the default action a
    assert_eq!(run(7), [7, 2, 10]);
    let b = e.prog.actions.iter().position(|a| a.name == "I.b").unwrap() as u32;
    for n in ["I.plain", "I.tested", "I.switched"] {
        let entry = TableEntry {
            matches: vec![FieldMatch::Exact(Value::new(8, 7))],
            action: ActionCall {
                action: b,
                args: vec![],
            },
            priority: 0,
        };
        e.table_insert(e.table_index(n).unwrap(), entry).unwrap();
    }
    assert_eq!(run(7), [7, 1, 20]);
    assert_eq!(run(8), [8, 2, 10]);
}

/// An exact table on the ingress port (9 bits, indexed directly): entries found, changed and
/// removed per port, the other ports missing, across the key's whole range.
#[test]
fn a_port_table_follows_inserts_modifies_and_deletes() {
    let src = one_header_program(
        "bit<8> k;",
        "    action to(bit<9> port, bit<8> tag) { sm.egress_spec = port; hdr.h.k = tag; }
    table by_port { key = { sm.ingress_port : exact; } actions = { to; } default_action = to(1, 0xff); }
    apply { by_port.apply(); }",
    );
    let e = engine(&src);
    let ti = e.table_index("I.by_port").unwrap();
    let to = e
        .prog
        .actions
        .iter()
        .position(|a| a.name == "I.to")
        .unwrap() as u32;
    let entry = |port: u64, out: u64, tag: u64| TableEntry {
        matches: vec![FieldMatch::Exact(Value::new(9, port))],
        action: ActionCall {
            action: to,
            args: vec![Value::new(9, out), Value::new(8, tag)],
        },
        priority: 0,
    };
    let mut w = Worker::new(&e);
    let mut out = Outputs::default();
    let mut run = |port: u32| -> (u32, u8) {
        out.clear();
        e.process(&mut w, port, &[0], &mut out);
        let (p, b) = out.iter().next().expect("a frame out");
        (p, b[0])
    };
    let ports = [0u64, 1, 7, 255, 256, 510, 511];
    for &p in &ports {
        e.table_insert(ti, entry(p, 2 + p % 3, p & 0x7f)).unwrap();
    }
    for p in 0..512u32 {
        let want = if ports.contains(&(p as u64)) {
            (2 + p % 3, (p & 0x7f) as u8)
        } else {
            (1, 0xff)
        };
        assert_eq!(run(p), want, "port {p}");
    }
    e.table_modify(ti, entry(7, 9, 0x42)).unwrap();
    e.table_delete(ti, &entry(256, 0, 0)).unwrap();
    assert_eq!(run(7), (9, 0x42));
    assert_eq!(run(256), (1, 0xff));
    assert_eq!(run(511), (2 + 511 % 3, 0x7f));
    assert!(
        e.table_insert(ti, entry(512, 2, 0)).is_err(),
        "a key beyond 9 bits is refused"
    );
    for &p in &ports {
        if p != 256 {
            e.table_delete(ti, &entry(p, 0, 0)).unwrap();
        }
    }
    for p in [0u32, 7, 511] {
        assert_eq!(run(p), (1, 0xff), "port {p} after the deletes");
    }
}
