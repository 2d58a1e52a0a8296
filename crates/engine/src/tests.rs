//! Engine tests on programs compiled from P4 source.
use super::*;
use p4sec_externs::iface::BitBuf;
use p4sec_ir::*;
use std::sync::atomic::Ordering;
use std::sync::Arc;

fn engine(src: &str) -> Engine {
    let prog = p4sec_frontend::compile_str("test.p4", src, &Default::default())
        .unwrap_or_else(|e| panic!("{e}"));
    Engine::new(Arc::new(prog), &test_externs::registry()).unwrap()
}

/// A v1model program with one header `h` of `fields`, extracted and emitted, no metadata, and
/// `ingress` as the body of control `I` (its actions, tables and `apply` block).
fn one_header_program(fields: &str, ingress: &str) -> String {
    format!(
        r#"#include <v1model.p4>
header h_t {{ {fields} }}
struct hs {{ h_t h; }}
struct m {{ }}
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {{ state start {{ p.extract(hdr.h); transition accept; }} }}
control V(inout hs hdr, inout m meta) {{ apply {{ }} }}
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {{
{ingress}
}}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) {{ apply {{ }} }}
control D(packet_out p, in hs hdr) {{ apply {{ p.emit(hdr.h); }} }}
V1Switch(P(), V(), I(), E(), V(), D()) main;
"#
    )
}

const ROUTER: &str = include_str!("../../../programs/ipv4_router.p4");

fn ipv4_packet(dst: [u8; 4], ttl: u8) -> Vec<u8> {
    let mut p = vec![0u8; 14 + 20 + 6];
    p[12] = 0x08;
    p[14] = 0x45;
    p[16..18].copy_from_slice(&(26u16).to_be_bytes());
    p[22] = ttl;
    p[23] = 17;
    p[26..30].copy_from_slice(&[10, 0, 0, 1]);
    p[30..34].copy_from_slice(&dst);
    let c = hash::csum16(&p[14..34]);
    p[24..26].copy_from_slice(&c.to_be_bytes());
    p
}

fn route(e: &Engine, prefix: u32, len: u32, port: u64) {
    let t = e.table_index("RouterIngress.ipv4_lpm").unwrap();
    let set_nhop = e
        .prog
        .actions
        .iter()
        .position(|a| a.name == "RouterIngress.set_nhop")
        .unwrap() as u32;
    e.table_insert(
        t,
        TableEntry {
            matches: vec![FieldMatch::Lpm {
                value: Value::new(32, prefix as u64),
                prefix_len: len,
            }],
            action: ActionCall {
                action: set_nhop,
                args: vec![
                    Value::new(48, 0xaabbccddeeff),
                    Value::new(48, 0x112233445566),
                    Value::new(9, port),
                ],
            },
            priority: 0,
        },
    )
    .unwrap();
}

#[test]
fn router_lpm_ttl_and_checksum() {
    let e = engine(ROUTER);
    route(&e, 0x0a000000, 8, 1);
    route(&e, 0x0a010000, 16, 2);
    let mut w = Worker::new(&e);
    let mut out = Outputs::default();
    e.process(&mut w, 0, &ipv4_packet([10, 1, 2, 3], 64), &mut out);
    e.process(&mut w, 0, &ipv4_packet([10, 2, 2, 3], 64), &mut out);
    e.process(&mut w, 0, &ipv4_packet([11, 2, 2, 3], 64), &mut out); // no route: dropped
    e.process(&mut w, 0, &ipv4_packet([10, 1, 2, 3], 1), &mut out); // ttl 1: dropped
    let frames: Vec<(u32, Vec<u8>)> = out.iter().map(|(p, b)| (p, b.to_vec())).collect();
    assert_eq!(frames.len(), 2);
    assert_eq!(frames[0].0, 2, "longest prefix wins");
    assert_eq!(frames[1].0, 1);
    let f = &frames[0].1;
    assert_eq!(&f[0..6], &[0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff]);
    assert_eq!(f[22], 63, "ttl decremented");
    assert_eq!(hash::csum16(&f[14..34]), 0, "checksum recomputed");
    assert_eq!(f.len(), 40, "payload kept");
}

#[test]
fn parser_error_keeps_payload() {
    let e = engine(ROUTER);
    let mut w = Worker::new(&e);
    let mut out = Outputs::default();
    // 20 bytes: Ethernet + 6 bytes, IPv4 extract fails with PacketTooShort; ingress drops non-IPv4
    let mut p = vec![0u8; 20];
    p[12] = 0x08;
    e.process(&mut w, 0, &p, &mut out);
    assert!(out.is_empty());
}

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

#[test]
fn stats_are_summed_over_workers() {
    let e = engine(ROUTER);
    route(&e, 0x0a000000, 8, 1);
    let (mut a, mut b) = (Worker::new(&e), Worker::new(&e));
    let mut out = Outputs::default();
    e.process(&mut a, 0, &ipv4_packet([10, 1, 2, 3], 64), &mut out);
    e.process(&mut b, 0, &ipv4_packet([10, 1, 2, 3], 64), &mut out);
    e.process(&mut b, 0, &ipv4_packet([12, 1, 2, 3], 64), &mut out);
    let s = e.stats();
    assert_eq!((s.packets_in, s.packets_out, s.dropped), (3, 2, 1));
}

/// The word-at-a-time checksum path must agree with checksumming the concatenated bytes, for field
/// widths that straddle 16-bit words and a tail that is not a whole word.
#[test]
fn csum16_over_odd_width_fields_matches_the_byte_form() {
    let src = r#"#include <v1model.p4>
header h_t { bit<4> a; bit<7> b; bit<13> c; bit<56> d; bit<64> e; bit<16> ck; bit<8> f; }
struct hs { h_t h; }
struct m { }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) { state start { p.extract(hdr.h); transition accept; } }
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { sm.egress_spec = 1; } }
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs hdr, inout m meta) {
    apply { update_checksum(true, { hdr.h.a, hdr.h.b, hdr.h.c, hdr.h.d, hdr.h.e, hdr.h.f, 3w5 }, hdr.h.ck, HashAlgorithm.csum16); }
}
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;
    let e = engine(src);
    let mut w = Worker::new(&e);
    let mut out = Outputs::default();
    let mut rng = 0x1234_5678u64;
    for _ in 0..200 {
        let pkt: Vec<u8> = (0..22)
            .map(|_| (hash::next_random(&mut rng) >> 24) as u8)
            .collect();
        out.clear();
        e.process(&mut w, 0, &pkt, &mut out);
        let (_, f) = out.iter().next().unwrap();
        // the checksummed bits: everything but the 16-bit checksum (bits 144..160), then 3w5
        let mut bits: Vec<u8> = vec![];
        for i in 0..168 {
            if !(144..160).contains(&i) {
                bits.push((pkt[i / 8] >> (7 - i % 8)) & 1);
            }
        }
        bits.extend([1, 0, 1]);
        let mut bytes = vec![0u8; bits.len().div_ceil(8)];
        for (i, b) in bits.iter().enumerate() {
            bytes[i / 8] |= b << (7 - i % 8);
        }
        let want = hash::csum16(&bytes);
        assert_eq!(u16::from_be_bytes([f[18], f[19]]), want);
        assert_eq!(&f[..18], &pkt[..18]);
        assert_eq!(f[20], pkt[20]);
    }
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

/// Replacing a multicast group's replicas again and again (P4Runtime MODIFY) or deleting the group
/// frees its old replication nodes; a node another group still uses stays.
#[test]
fn multicast_group_changes_free_their_nodes() {
    let e = engine(ROUTER);
    for round in 0..50u32 {
        e.mc_group_set(1, &[(0, 1 + round % 3), (1, 2), (2, 3)]);
        e.mc_group_set(2, &[(0, 4)]);
    }
    let live = |e: &Engine| e.pre.load().nodes.iter().filter(|n| n.is_some()).count();
    assert_eq!(live(&e), 4, "three replicas of group 1 and one of group 2");
    assert!(
        e.pre.load().nodes.len() <= 8,
        "handles are reused ({} slots)",
        e.pre.load().nodes.len()
    );
    assert_eq!(
        e.pre.load().groups[&1]
            .iter()
            .map(|h| e.pre.load().nodes[*h as usize].clone().unwrap().1[0])
            .collect::<Vec<_>>(),
        vec![2, 2, 3]
    );
    // a node shared with another group survives the first group's deletion
    let shared = e.mc_node_create(9, vec![7]);
    e.mc_group_create(3).unwrap();
    e.mc_node_associate(3, shared).unwrap();
    e.mc_node_associate(2, shared).unwrap();
    e.mc_group_delete(3).unwrap();
    assert!(e.pre.load().nodes[shared as usize].is_some());
    e.mc_group_delete(1).unwrap();
    e.mc_group_delete(2).unwrap();
    assert_eq!(live(&e), 0);
    assert!(e.mc_group_delete(2).is_err());
}

/// verify_checksum over a whole header is computed from the packet bytes when the header came
/// straight from the packet: every single-bit error in the header must still be detected, and a
/// correct checksum accepted, including for a header whose other words are nearly all zero.
#[test]
fn header_checksum_from_bytes_agrees_with_fields() {
    let e = engine(ROUTER);
    route(&e, 0, 0, 1);
    let mut w = Worker::new(&e);
    let good = ipv4_packet([10, 1, 2, 3], 64);
    let mut out = Outputs::default();
    e.process(&mut w, 0, &good, &mut out);
    assert_eq!(
        out.len(),
        1,
        "a packet with a correct checksum is forwarded"
    );
    // every single-bit error in the IPv4 header makes the checksum wrong (the router then drops)
    for bit in 0..160 {
        let mut p = good.clone();
        p[14 + bit / 8] ^= 0x80 >> (bit % 8);
        if p[14] >> 4 != 4 || p[14] & 15 != 5 || p[22] <= 1 {
            continue; // not IPv4 with ihl 5 any more, or ttl too low: dropped for other reasons
        }
        let mut out = Outputs::default();
        e.process(&mut w, 0, &p, &mut out);
        assert_eq!(
            out.len(),
            0,
            "bit {bit} flipped: checksum error not detected"
        );
    }
    // a header that is zero but for version, ihl and ttl
    let mut z = vec![0u8; 40];
    z[12] = 0x08;
    z[14] = 0x45;
    z[22] = 64;
    let c = hash::csum16(&z[14..34]);
    z[24..26].copy_from_slice(&c.to_be_bytes());
    let mut out = Outputs::default();
    e.process(&mut w, 0, &z, &mut out);
    assert_eq!(
        out.len(),
        1,
        "correct checksum of a nearly empty header accepted"
    );
}

/// update_checksum over a whole header is left to the deparser, which sums the emitted bytes;
/// behind a 4-bit header (not on a byte boundary) the deparser cannot patch its bytes and computes
/// it from the fields first. Both must give the header a correct checksum, and a false condition
/// none.
#[test]
fn deferred_header_checksum() {
    let src = |pre: &str| {
        ROUTER
            .replace(
                "header ipv4_t {",
                &format!("header nib_t {{ bit<4> x; bit<4> y; }}\nheader ipv4_t {{"),
            )
            .replace("ipv4_t     ipv4;", "ipv4_t     ipv4;\n    nib_t nib;")
            .replace(
                "pkt.emit(hdr.ethernet);",
                &format!("pkt.emit(hdr.ethernet); {pre}"),
            )
    };
    for (pre, nib) in [("", false), ("pkt.emit(hdr.nib);", true)] {
        let mut p = src(pre);
        if nib {
            // the nibble header becomes valid in ingress and is emitted before IPv4 (4 + 4 bits:
            // IPv4 then starts on a byte again, so emit the 4-bit part alone: shrink y to nothing)
            p = p.replace("bit<4> y; ", "").replace(
                "ipv4_lpm.apply();",
                "ipv4_lpm.apply(); hdr.nib.setValid(); hdr.nib.x = 0xa;",
            );
        }
        let e = engine(&p);
        route(&e, 0, 0, 1);
        let mut w = Worker::new(&e);
        let mut out = Outputs::default();
        e.process(&mut w, 0, &ipv4_packet([10, 1, 2, 3], 64), &mut out);
        let (_, f) = out.iter().next().expect("forwarded");
        if nib {
            // 14 bytes Ethernet, then the nibble and IPv4 shifted by 4 bits: undo the shift to
            // check
            assert_eq!(f[14] >> 4, 0xa);
            let ip: Vec<u8> = (0..20)
                .map(|i| (f[14 + i] << 4) | (f[15 + i] >> 4))
                .collect();
            assert_eq!(ip[8], 63, "ttl decremented");
            assert_eq!(
                hash::csum16(&ip),
                0,
                "checksum computed from the fields before an unaligned emit"
            );
        } else {
            assert_eq!(f[22], 63);
            assert_eq!(
                hash::csum16(&f[14..34]),
                0,
                "checksum patched into the emitted bytes"
            );
        }
    }
    // a false condition (ihl != 5 is not verified either, so it is forwarded) leaves the checksum
    // alone
    let e = engine(ROUTER);
    route(&e, 0, 0, 1);
    let mut w = Worker::new(&e);
    let mut p = ipv4_packet([10, 1, 2, 3], 64);
    p[14] = 0x46;
    p.extend_from_slice(&[0; 4]);
    let mut out = Outputs::default();
    e.process(&mut w, 0, &p, &mut out);
    let (_, f) = out.iter().next().expect("forwarded");
    assert_eq!(
        &f[24..26],
        &p[24..26],
        "checksum field untouched when the condition is false"
    );
}

/// Extern argument layouts resolved at compile time ([`call::plan_arg`]) pack and unpack exactly
/// what the general path does, for random mixes of narrow, byte-aligned, wide and constant parts.
#[test]
fn planned_extern_arguments_match_the_general_path() {
    let e = engine(include_str!("../../../programs/ipv4_router.p4"));
    let mut w = Worker::new(&e);
    w.slots.resize(256, 0);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let (mut planned, mut general) = (0, 0);
    for round in 0..600 {
        let nparts = 1 + rnd() % 6;
        let (mut parts, mut locs, mut width, mut slot) = (vec![], vec![], 0u32, 0u32);
        let constants = round % 3 == 0;
        for _ in 0..nparts {
            let wd = match rnd() % 9 {
                0 | 1 => 8 * (1 + rnd() % 16) as u32, // whole bytes, up to 128 bits
                2 => 0,                               // bit<0>
                _ => 1 + (rnd() % 64) as u32,
            };
            let l = Loc { slot, width: wd };
            slot += wd.div_ceil(64);
            for k in 0..wd.div_ceil(64) {
                let left = wd - 64 * k;
                w.slots[(l.slot + k) as usize] = rnd()
                    & if left >= 64 {
                        u64::MAX
                    } else {
                        (1u64 << left) - 1
                    };
            }
            if constants && wd > 0 && wd <= 64 && rnd() % 2 == 0 {
                parts.push(Expr::Small {
                    value: rnd() & (u64::MAX >> (64 - wd)),
                    width: wd,
                });
            } else {
                parts.push(Expr::Load(LValue::Static(l)));
                locs.push(l);
            }
            width += wd;
        }
        // in: the bytes handed to the extern
        let a = ExternArg {
            dir: Direction::In,
            width,
            parts: parts.clone(),
            dsts: vec![],
        };
        let (mut g, mut p) = (BitBuf::default(), BitBuf::default());
        e.marshal_arg(&mut w, &a, &mut g);
        match call::plan_arg(&a) {
            Some(plan) => {
                plan.marshal(&w.slots, true, &mut p.bytes);
                assert_eq!(p.bytes, g.bytes, "round {round}: {parts:?}");
                planned += 1;
            }
            None => {
                // only wide fields off the byte grid have no plan
                assert!(
                    locs.iter().any(|l| l.width > 64),
                    "round {round}: no plan for {parts:?}"
                );
                general += 1;
            }
        }
        // out: random bytes split back into the fields
        if constants {
            continue;
        }
        let dsts: Vec<LValue> = locs.iter().map(|l| LValue::Static(*l)).collect();
        let a = ExternArg {
            dir: Direction::Out,
            width,
            parts: vec![],
            dsts,
        };
        let mut bytes: Vec<u8> = (0..width.div_ceil(8)).map(|_| rnd() as u8).collect();
        if let Some(b0) = bytes.first_mut() {
            *b0 &= 0xffu8 >> (width.div_ceil(8) * 8 - width);
        }
        let b = BitBuf { width, bytes };
        let before = w.slots.clone();
        e.write_back_arg(&mut w, &a, &b);
        let want = std::mem::replace(&mut w.slots, before);
        if let Some(plan) = call::plan_arg(&a) {
            plan.write(&b.bytes, &mut w.slots);
            assert_eq!(w.slots, want, "round {round}: write-back of {locs:?}");
        }
    }
    assert!(
        planned > 300 && general > 0,
        "{planned} planned, {general} general"
    );
}

/// An extern that hands an `out` argument back with the wrong length is a fault: the packet is
/// dropped and counted, nothing is written back, nothing panics (compiled and interpreted call
/// paths alike).
#[test]
fn an_extern_that_resizes_its_out_argument_is_a_fault() {
    let src = r#"
#include <v1model.p4>
extern void extern_shrink(out bit<32> d);
header h_t { bit<32> a; bit<32> b; }
struct hs { h_t h; }
struct m {}
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) { state start { p.extract(hdr.h); transition accept; } }
control V(inout hs hdr, inout m meta) { apply {} }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (hdr.h.b == 7) { extern_shrink(hdr.h.a); }
        else { hdr.h.a = 5; extern_shrink(hdr.h.b); }
    }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply {} }
control C(inout hs hdr, inout m meta) { apply {} }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;
    let e = engine(src);
    let mut w = Worker::new(&e);
    for b in [7u8, 9] {
        let mut out = Outputs::default();
        e.process(&mut w, 0, &[0, 0, 0, 1, 0, 0, 0, b, 0xee], &mut out);
        assert!(out.is_empty(), "b={b}: the packet went out");
    }
    assert_eq!(e.stats().extern_faults, 2);
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
        e.table_insert(ti, entry(p, 2 + p % 3, p as u64 & 0x7f))
            .unwrap();
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

/// `extern payload_room { payload_room(); void put(in bit<8> n); }` (tests only): the payload
/// handed back in a buffer of its own with `n` bytes (0xee) in front of it, as ESP encapsulation
/// and decapsulation do.
struct RoomType;
struct RoomObj;

impl p4sec_externs::iface::ExternType for RoomType {
    fn name(&self) -> &str {
        "payload_room"
    }
    fn instantiate(
        &self,
        _name: &str,
        _args: &[BitBuf],
    ) -> Result<Box<dyn p4sec_externs::iface::ExternObject>, String> {
        Ok(Box::new(RoomObj))
    }
}

impl p4sec_externs::iface::ExternObject for RoomObj {
    fn resolve(&self, sig: &p4sec_externs::iface::MethodSig) -> Result<u32, String> {
        match sig.args.as_slice() {
            [(p4sec_externs::iface::Dir::In, 8)] => Ok(0),
            _ => Err("payload_room.put takes (in bit<8> n)".into()),
        }
    }
    fn call(
        &self,
        _method: u32,
        args: &mut [BitBuf],
        _ret: Option<&mut BitBuf>,
        payload: &mut p4sec_externs::iface::Payload<'_>,
    ) -> Result<(), p4sec_externs::iface::ExternError> {
        let n = args[0].as_u64() as usize;
        let mut v = vec![0xee; n];
        v.extend_from_slice(payload.bytes());
        payload.swap_in_from(&mut v, n);
        Ok(())
    }
}

/// A payload an extern hands back with room in front of it: the deparser puts the headers there and
/// sends that buffer when the room suffices and the frame is the first in its output (else it
/// copies the payload after the headers as usual); multicast copies and a second frame in the same
/// output see the same bytes.
#[test]
fn payload_with_room_in_front_goes_out_unchanged() {
    let src = r#"#include <v1model.p4>
extern payload_room { payload_room(); void put(in bit<8> n); }
header h_t { bit<8> room; bit<8> grp; bit<16> x; }
struct hs { h_t h; }
struct m { }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) { state start { p.extract(hdr.h); transition accept; } }
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    payload_room() r;
    apply {
        r.put(hdr.h.room);
        sm.egress_spec = 1;
        if (hdr.h.grp != 0) { sm.mcast_grp = (bit<16>) hdr.h.grp; }
    }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { hdr.h.x = hdr.h.x + 1; } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), V(), D()) main;
"#;
    let prog = p4sec_frontend::compile_str("test.p4", src, &Default::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let mut reg = test_externs::registry();
    reg.push(Box::new(RoomType));
    let e = Engine::new(Arc::new(prog), &reg).unwrap();
    e.mc_group_set(1, &[(0, 2), (1, 3)]);
    let mut w = Worker::new(&e);
    let frame = |room: u8, grp: u8| -> Vec<u8> {
        [room, grp, 0x12, 0x34]
            .into_iter()
            .chain((0..100u8).map(|i| i ^ 0x5a))
            .collect()
    };
    let want = |f: &[u8]| -> Vec<u8> {
        [f[0], f[1], 0x12, 0x35]
            .into_iter()
            .chain(f[4..].iter().copied())
            .collect()
    };
    for room in [0u8, 1, 3, 4, 5, 64] {
        // one frame in the output: the buffer with room becomes the output when the 4 header bytes
        // fit
        let f = frame(room, 0);
        let mut out = Outputs::default();
        e.process(&mut w, 0, &f, &mut out);
        assert_eq!(
            out.iter().collect::<Vec<_>>(),
            vec![(1, &want(&f)[..])],
            "room {room}"
        );
        // a second frame into the same output goes after the first
        let g = frame(room, 0);
        e.process(&mut w, 0, &g, &mut out);
        assert_eq!(
            out.iter().map(|(p, b)| (p, b.to_vec())).collect::<Vec<_>>(),
            vec![(1, want(&f)), (1, want(&g))],
            "room {room}, two frames"
        );
        // multicast: each copy's payload taken from the buffer with room
        let h = frame(room, 1);
        let mut out = Outputs::default();
        e.process(&mut w, 0, &h, &mut out);
        assert_eq!(
            out.iter().map(|(p, b)| (p, b.to_vec())).collect::<Vec<_>>(),
            vec![(2, want(&h)), (3, want(&h))],
            "room {room}, multicast"
        );
    }
}

/// A run-time loop that never ends is stopped after `MAX_LOOP_STEPS` iterations of the pass: the
/// packet is dropped and counted, the worker goes on with the next packet, whose loops start with
/// a fresh budget (two loops of 600k iterations each stay under it together only per packet).
#[test]
fn a_loop_that_never_ends_drops_its_packet() {
    let e = engine(&one_header_program(
        "bit<8> step; bit<32> n; bit<32> r;",
        "apply {
            sm.egress_spec = 1;
            for (bit<8> i = 0; i != 9; i = i + hdr.h.step) { }
            for (bit<32> k = 0; k < hdr.h.n; k = k + 1) { hdr.h.r = hdr.h.r + 1; }
        }",
    ));
    let mut w = Worker::new(&e);
    let mut out = Outputs::default();
    e.process(&mut w, 0, &[0, 0, 0, 0, 1, 0, 0, 0, 0], &mut out);
    assert!(out.is_empty(), "the packet of the endless loop went out");
    assert_eq!(e.stats().loop_limit, 1);
    // 9 steps of the first loop and 600,000 of the second: under the budget, in each of two packets
    for _ in 0..2 {
        let mut out = Outputs::default();
        e.process(&mut w, 0, &[1, 0, 0x09, 0x27, 0xc0, 0, 0, 0, 0], &mut out);
        let f = out.iter().next().expect("the packet went out");
        assert_eq!(&f.1[5..9], &[0, 0x09, 0x27, 0xc0]);
    }
    assert_eq!(e.stats().loop_limit, 1);
}
