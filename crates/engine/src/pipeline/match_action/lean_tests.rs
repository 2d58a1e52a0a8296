//! Tests of the lean one-key apply (`Engine::select_lean`) and the narrow indexes under it (the
//! LPM levels of a 32-bit key, the flat index of a 16-bit exact key): on both backends, through
//! inserts, modifies and deletes published as new versions, the longest prefix wins, a /0 entry
//! catches the rest, a miss runs the default action with its arguments, and hits and misses are
//! counted.

use crate::testutil::one_header_program;
use crate::testutil::pair::{self, call, first_frame, Kept};
use crate::Engine;
use p4sec_ir::*;

const INGRESS: &str = "    action set(bit<8> v, bit<16> w) { hdr.h.o1 = v; hdr.h.o2 = w; }
    action sx(bit<8> v) { hdr.h.ox = v; }
    table tl { key = { hdr.h.d : lpm; } actions = { set; NoAction; }
               default_action = set(0xd0, 0xbeef); size = 4096; }
    table tx { key = { hdr.h.x : exact; } actions = { sx; NoAction; }
               default_action = sx(0x11); size = 4096; }
    apply {
        sm.egress_spec = 1;
        hdr.h.hits = 0;
        if (tl.apply().hit) { hdr.h.hits = hdr.h.hits | 1; }
        switch (tx.apply().action_run) {
            NoAction: { hdr.h.hits = hdr.h.hits | 2; }
            default: { }
        }
    }";

/// The closure and the native engine of the test program.
fn engines() -> [Kept; 2] {
    pair::engines(&one_header_program(
        "bit<32> d; bit<16> x; bit<8> o1; bit<16> o2; bit<8> ox; bit<8> hits;",
        INGRESS,
    ))
}

fn route(e: &Engine, prefix: u32, len: u32, v: u64, w: u64) -> TableEntry {
    pair::lpm(
        32,
        prefix.into(),
        len,
        call(e, "I.set", &[v.into(), w.into()]),
    )
}

fn exact(e: &Engine, x: u16, v: Option<u64>) -> TableEntry {
    let action = match v {
        Some(v) => call(e, "I.sx", &[v.into()]),
        None => call(e, "NoAction", &[]),
    };
    pair::exact(16, x.into(), action)
}

/// (o1, o2, ox, hits) for keys `d` and `x`, the same on both engines (through the workers they
/// keep, or new ones when `fresh`).
fn out(es: &[Kept; 2], d: u32, x: u16, fresh: bool) -> (u8, u16, u8, u8) {
    let mut pkt = d.to_be_bytes().to_vec();
    pkt.extend(x.to_be_bytes());
    pkt.extend([0u8; 5]);
    let what = format_args!("d={d:#x} x={x:#x}");
    let f = first_frame([&es[0], &es[1]], &pkt, fresh, &what).expect("forwarded");
    (f[6], u16::from_be_bytes([f[7], f[8]]), f[9], f[10])
}

#[test]
fn lpm_longest_prefix_default_route_and_deletes_across_versions() {
    let es = engines();
    let tl = es[0].table_index("I.tl").unwrap();
    // empty table: the default action with its arguments
    assert_eq!(out(&es, 0x0a01_0203, 0, false).0, 0xd0);
    assert_eq!(out(&es, 0x0a01_0203, 0, false).1, 0xbeef);
    // overlapping prefixes, inserted shortest last so that the order of inserts does not matter
    let routes = [
        (0x0a01_0203, 32, 32),
        (0x0a01_0200, 24, 24),
        (0x0a01_0000, 16, 16),
        (0x0a00_0000, 8, 8),
        (0x0a01_0280, 25, 25),
    ];
    for e in &es {
        for &(p, l, v) in &routes {
            e.table_insert(tl, route(e, p, l, v, 0x100 + v)).unwrap();
        }
    }
    let hit = |d| {
        let (o1, o2, _, hits) = out(&es, d, 0, true);
        (o1, o2, hits & 1)
    };
    assert_eq!(hit(0x0a01_0203), (32, 0x120, 1));
    assert_eq!(hit(0x0a01_0204), (24, 0x118, 1));
    assert_eq!(hit(0x0a01_02ff), (25, 0x119, 1));
    assert_eq!(hit(0x0a01_0301), (16, 0x110, 1));
    assert_eq!(hit(0x0aff_ffff), (8, 0x108, 1));
    assert_eq!(hit(0x0b00_0000), (0xd0, 0xbeef, 0));
    // a /0 entry catches every other address
    for e in &es {
        e.table_insert(tl, route(e, 0, 0, 0x77, 0x7777)).unwrap();
    }
    assert_eq!(hit(0x0b00_0000), (0x77, 0x7777, 1));
    assert_eq!(hit(0), (0x77, 0x7777, 1));
    assert_eq!(hit(0x0a01_0204), (24, 0x118, 1));
    // deleted in a new version: the next longest prefix, then the default again
    for e in &es {
        e.table_delete(tl, &route(e, 0x0a01_0200, 24, 0, 0))
            .unwrap();
    }
    assert_eq!(hit(0x0a01_0204), (16, 0x110, 1));
    assert_eq!(hit(0x0a01_0281), (25, 0x119, 1));
    for e in &es {
        e.table_delete(tl, &route(e, 0, 0, 0, 0)).unwrap();
        e.table_modify(tl, route(e, 0x0a01_0000, 16, 0x61, 0x6161))
            .unwrap();
    }
    assert_eq!(hit(0x0a01_0204), (0x61, 0x6161, 1));
    assert_eq!(hit(0x0b00_0000), (0xd0, 0xbeef, 0));
    // the worker made before the changes sees them too (its snapshot is refreshed)
    assert_eq!(out(&es, 0x0a01_0204, 0, false).0, 0x61);
}

#[test]
fn hits_and_misses_are_counted_and_the_lean_path_is_taken() {
    let es = engines();
    let tl = es[0].table_index("I.tl").unwrap();
    for e in &es {
        e.table_insert(tl, route(e, 0x0a00_0000, 8, 1, 2)).unwrap();
    }
    for i in 0..10u32 {
        let d = if i % 5 == 0 {
            0x0b00_0000
        } else {
            0x0a00_0000 | i
        };
        out(&es, d, 0, false);
    }
    for e in &es {
        assert_eq!(e.table_stats(tl), (8, 2), "{:?}", e.backend());
    }
    // the native engine's version of the table is of the lean shape, and an untraced packet's
    // lookup takes it: the hit's arguments in the action's parameters
    let (e, mut w) = (&es[1], es[1].worker());
    let w = &mut *w;
    let set = pair::action_index(e, "I.set");
    assert_eq!(e.select_lean(w, tl, 0x0a00_0001, &None, &None), Some(set));
    let params = &e.match_action.param_words[set];
    assert_eq!(w.slots[params[0].0 as usize], 1);
    assert_eq!(w.slots[params[1].0 as usize], 2);
    assert_eq!(e.table_stats(tl), (9, 2));
    // a miss: the default action's arguments
    assert_eq!(e.select_lean(w, tl, 0x0c00_0001, &None, &None), Some(set));
    assert_eq!(w.slots[params[0].0 as usize], 0xd0);
    assert_eq!(w.slots[params[1].0 as usize], 0xbeef);
    assert_eq!(e.table_stats(tl), (9, 3));
}

/// A 16-bit exact key (the flat 32-bit index): hundreds of entries through growth, deletes that
/// move entries (the last one into the hole) and modifies, checked key by key against a model.
#[test]
fn exact_narrow_index_follows_many_changes() {
    let es = engines();
    let tx = es[0].table_index("I.tx").unwrap();
    let mut model = std::collections::HashMap::new();
    let key = |i: u16| i.wrapping_mul(40503);
    for i in 0..600u16 {
        let v = (i % 200) as u64 + 1;
        for e in &es {
            e.table_insert(tx, exact(e, key(i), Some(v))).unwrap();
        }
        model.insert(key(i), Some(v as u8));
    }
    for i in (0..600u16).step_by(3) {
        for e in &es {
            e.table_delete(tx, &exact(e, key(i), None)).unwrap();
        }
        model.remove(&key(i));
    }
    for i in (1..600u16).step_by(7) {
        if model.contains_key(&key(i)) {
            for e in &es {
                e.table_modify(tx, exact(e, key(i), None)).unwrap();
            }
            model.insert(key(i), None);
        }
    }
    for i in 0..700u16 {
        let (_, _, ox, hits) = out(&es, 0, key(i), false);
        match model.get(&key(i)) {
            Some(Some(v)) => assert_eq!((ox, hits & 2), (*v, 0), "key {}", key(i)),
            Some(None) => assert_eq!((ox, hits & 2), (0, 2), "key {}", key(i)),
            None => assert_eq!((ox, hits & 2), (0x11, 0), "key {}", key(i)),
        }
    }
}

/// Routes of every prefix length (0 to 32), nested and overlapping, installed in batches, some
/// deleted and some modified (each change a new version): past the summary's growth and its
/// rebuilds after deletes, every address takes the longest held prefix's arguments, or the default
/// action's, as a scan of the held routes says (on both engines).
#[test]
fn lpm_many_lengths_against_a_scan() {
    let es = engines();
    let tl = es[0].table_index("I.tl").unwrap();
    let mask = |l: u32| if l == 0 { 0 } else { u32::MAX << (32 - l) };
    let mut s = 99u64;
    let mut next = move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 32) as u32
    };
    // (prefix, length) -> v; the prefixes under a few /8s so that they nest
    let mut held: std::collections::HashMap<(u32, u32), u8> = Default::default();
    let mut batch = vec![];
    for i in 0..1500u32 {
        let l = next() % 33;
        let p = ((next() % 4 + 10) << 24 | (next() & 0x00ff_ffff)) & mask(l);
        let v = (i % 250) as u8 + 1;
        if held.insert((p, l), v).is_none() {
            batch.push((p, l, v));
        } else if let Some(b) = batch.iter_mut().find(|b| (b.0, b.1) == (p, l)) {
            b.2 = v; // not installed yet
        } else {
            for e in &es {
                e.table_modify(tl, route(e, p, l, v as u64, v as u64 * 3))
                    .unwrap();
            }
        }
        if batch.len() == 100 {
            for e in &es {
                let entries = batch
                    .iter()
                    .map(|&(p, l, v)| route(e, p, l, v as u64, v as u64 * 3))
                    .collect();
                e.table_insert_batch(tl, entries).unwrap();
            }
            batch.clear();
        }
    }
    for e in &es {
        for &(p, l, v) in &batch {
            e.table_insert(tl, route(e, p, l, v as u64, v as u64 * 3))
                .unwrap();
        }
    }
    let mut keys: Vec<(u32, u32)> = held.keys().copied().collect();
    keys.sort_unstable();
    for &(p, l) in keys.iter().step_by(2) {
        for e in &es {
            e.table_delete(tl, &route(e, p, l, 0, 0)).unwrap();
        }
        held.remove(&(p, l));
    }
    let mut hits = 0;
    for j in 0..3000usize {
        // addresses inside routes held or deleted, and anywhere
        let d = match keys.get(j % (keys.len() + 50)) {
            Some(&(p, l)) => p | (next() & !mask(l)),
            None => next(),
        };
        let want = (0..=32u32)
            .rev()
            .find_map(|l| held.get(&(d & mask(l), l)))
            .map(|&v| (v, v as u16 * 3, 1));
        let (o1, o2, _, h) = out(&es, d, 0, false);
        assert_eq!(
            (o1, o2, h & 1),
            want.unwrap_or((0xd0, 0xbeef, 0)),
            "address {d:#x}"
        );
        hits += want.is_some() as usize;
    }
    assert!(hits > 1500, "{hits} hits of 3000");
}
