//! Tests of table versions' storage: the packed keys of exact and LPM entries, and narrow LPM
//! tables with and without hit maps.

use super::*;
use p4sec_ir::Value;

/// The packed key of a table of an exact and an LPM field (and of the router's narrow LPM
/// table): exact values whole in their field's words, prefixes masked to their length (bits
/// past the prefix cleared), anything else zero; the prefix length of LPM and wildcard
/// matches.
#[test]
fn index_keys_pack_each_field_in_its_words() {
    let e = crate::testutil::engine(crate::testutil::ROUTER);
    let ti = e.table_index("RouterIngress.ipv4_lpm").unwrap();
    let mut t = e.prog.tables[ti].clone();
    let d = TableData::new(&t).unwrap();
    assert!(d.lpm_narrow());
    let entry = |matches: Vec<FieldMatch>| TableEntry {
        matches,
        action: d.default.clone(),
        priority: 0,
    };
    let v = |w: u32, x: u64| Value::new(w, x);
    for (m, want) in [
        (FieldMatch::Any, (0, 0)),
        (FieldMatch::Exact(v(32, 0xdead_beef)), (0xdead_beef, 0)),
        (
            FieldMatch::Lpm {
                value: v(32, 0x0a0b_0cff),
                prefix_len: 24,
            },
            (0x0a0b_0c00, 24),
        ),
        (
            FieldMatch::Lpm {
                value: v(32, 0xffff_ffff),
                prefix_len: 1,
            },
            (0x8000_0000, 1),
        ),
        (
            FieldMatch::Lpm {
                value: v(32, 0xffff_ffff),
                prefix_len: 0,
            },
            (0, 0),
        ),
        (
            FieldMatch::Range {
                lo: v(32, 1),
                hi: v(32, 9),
            },
            (0, 0),
        ),
    ] {
        assert_eq!(
            d.index_key(&t, &entry(vec![m.clone()])).narrow(),
            want,
            "{m:?}"
        );
    }
    // a 16-bit exact field, then a 72-bit LPM field (two words)
    let mut lpm = t.keys[0].clone();
    lpm.width = 72;
    let mut exact = t.keys[0].clone();
    exact.width = 16;
    exact.kind = MatchKind::Exact;
    t.keys = vec![exact, lpm];
    let d = TableData::new(&t).unwrap();
    assert!(d.kind == Kind::Lpm && !d.lpm_narrow());
    let wide = Value {
        width: 72,
        words: vec![0xffff_ffff_ffff_ffff, 0xff],
    };
    let k = d.index_key(
        &t,
        &entry(vec![
            FieldMatch::Exact(v(16, 0xbeef)),
            FieldMatch::Lpm {
                value: wide.clone(),
                prefix_len: 12,
            },
        ]),
    );
    // the top 12 of 72 bits: bits 60..72, 4 in the low word and 8 in the high one
    assert_eq!(
        (k.key(), k.plen),
        (&[0xbeef, 0xf000_0000_0000_0000, 0xff][..], Some(12))
    );
    let k = d.index_key(
        &t,
        &entry(vec![FieldMatch::Exact(v(16, 7)), FieldMatch::Any]),
    );
    assert_eq!((k.key(), k.plen), (&[7, 0, 0][..], Some(0)));
}

/// A narrow LPM table's hit maps give what its entries hold, and a table made without them
/// (the closure engine's) finds the same entries through the general lookup, through route
/// inserts, modifies and deletes.
#[test]
fn lpm_hits_agree_with_and_without_hit_maps() {
    let e = crate::testutil::engine(crate::testutil::ROUTER);
    let ti = e.table_index("RouterIngress.ipv4_lpm").unwrap();
    let t = &e.prog.tables[ti];
    let mut with = TableData::with_hit_maps(t, true).unwrap();
    let mut without = TableData::with_hit_maps(t, false).unwrap();
    assert!(with.lpm32.has_hits() && !without.lpm32.has_hits());
    let route = |(prefix, len): (u32, u32), port: u64| {
        crate::testutil::route_entry(&e, prefix, len, port, 0x0200_0000_0000 | port)
    };
    let mut held: Vec<((u32, u32), u64)> = vec![];
    for x in 0..600u32 {
        let len = [8, 16, 20, 24, 32][x as usize % 5];
        let p = (0x0a00_0000 | x.wrapping_mul(0x9e37_79b9) >> 8) & (u32::MAX << (32 - len));
        let port = x as u64 % 7 + 1;
        for d in [&mut with, &mut without] {
            match x % 6 {
                // a route changed to another port, another deleted
                4 if !held.is_empty() => {
                    let (r, q) = held[x as usize % held.len()];
                    d.modify(t, route(r, q % 7 + 1)).unwrap();
                }
                5 if !held.is_empty() => {
                    let (r, q) = held[x as usize % held.len()];
                    d.delete(t, &route(r, q)).unwrap();
                }
                _ if !held.iter().any(|h| h.0 == (p, len)) => {
                    d.insert(t, route((p, len), port)).unwrap()
                }
                _ => {}
            }
        }
        match x % 6 {
            4 if !held.is_empty() => {
                let j = x as usize % held.len();
                held[j].1 = held[j].1 % 7 + 1;
            }
            5 if !held.is_empty() => drop(held.swap_remove(x as usize % held.len())),
            _ if !held.iter().any(|h| h.0 == (p, len)) => held.push(((p, len), port)),
            _ => {}
        }
    }
    assert_eq!(with.entries.len(), held.len());
    let mut hits = 0;
    for x in 0..4000u32 {
        let k = 0x0a00_0000 | x.wrapping_mul(0x0001_3579) & 0x00ff_ffff;
        // the hit maps answer as the entries' hot lines do, found by the general lookup of
        // either table; a table without hit maps misses in them
        let a = with.lookup_lpm32(k as u64).map(|(c, a)| (c, *a));
        for d in [&with, &without] {
            let i = d.lookup_lean(k as u64).expect("a lean table");
            let hot = i.map(|i| (d.hot(i).code(), d.hot(i).args));
            assert_eq!(a, hot, "{k:#x}");
        }
        assert_eq!(without.lookup_lpm32(k as u64), None);
        hits += a.is_some() as u32;
    }
    assert!(hits > 100, "{hits} of the keys hit");
}

/// The entry a scan of `d`'s entries finds for packed key `key` (each field in its words, as
/// many as its width takes): the longest prefix among the entries every field of which matches
/// (the only match of a table without an LPM key).
pub(super) fn longest_match(d: &TableData, t: &Table, key: &[u64]) -> Option<usize> {
    let lpm = t.keys.iter().position(|k| k.kind == MatchKind::Lpm);
    let mut off = 0;
    let layout: Vec<(usize, usize)> = t
        .keys
        .iter()
        .map(|k| {
            let w = k.width.div_ceil(64) as usize;
            off += w;
            (off - w, w)
        })
        .collect();
    (0..d.entries.len())
        .filter(|&i| {
            let e = &d.entries[i].entry;
            e.matches
                .iter()
                .zip(&t.keys)
                .zip(&layout)
                .all(|((m, k), &(o, w))| super::super::field_matches(m, &key[o..o + w], k.width))
        })
        .max_by_key(|&i| match lpm.map(|l| &d.entries[i].entry.matches[l]) {
            Some(FieldMatch::Lpm { prefix_len, .. }) => *prefix_len,
            _ => 0,
        })
}

/// An LPM table keyed by a VRF (exact) beside the IPv4 destination is indexed in parts, one per
/// VRF: through inserts, modifies and deletes its lookups (and, with hit maps, the hits native
/// code reads) agree with a scan of its entries; a 17th VRF makes it give the parts up for the
/// general levels, which agree as well; cleared, it is indexed in parts again.
#[test]
fn vrf_tables_indexed_in_parts_agree_with_a_scan() {
    let e = crate::testutil::engine(crate::testutil::ROUTER);
    let ti = e.table_index("RouterIngress.ipv4_lpm").unwrap();
    let mut t = e.prog.tables[ti].clone();
    let mut vrf = t.keys[0].clone();
    vrf.width = 12;
    vrf.kind = MatchKind::Exact;
    // the VRF after the prefix in one table, before it in the other
    let mut after = t.clone();
    after.keys.push(vrf.clone());
    t.keys.insert(0, vrf);
    for (t, lpm) in [(&t, 1usize), (&after, 0)] {
        let template = crate::testutil::route_entry(&e, 0, 8, 1, 2);
        let route = |v: u64, p: u32, len: u32, port: u64| {
            let mut r = template.clone();
            r.action.args[0] = p4sec_ir::Value::new(48, 0x0200_0000_0000 | port);
            let pm = FieldMatch::Lpm {
                value: Value::new(32, p as u64),
                prefix_len: len,
            };
            r.matches = vec![FieldMatch::Exact(Value::new(12, v)), pm];
            if lpm == 0 {
                r.matches.reverse();
            }
            r
        };
        let key = |v: u64, dst: u32| {
            let mut k = vec![v, dst as u64];
            if lpm == 0 {
                k.reverse();
            }
            k
        };
        for hits in [true, false] {
            let mut d = TableData::with_hit_maps(t, hits).unwrap();
            assert!(d.parts.on, "indexed in parts");
            let mut held: Vec<(u64, u32, u32)> = vec![];
            let check = |d: &TableData, vrfs: u64| {
                let mut found = 0;
                for x in 0..3000u32 {
                    let (v, dst) = (
                        x as u64 % vrfs,
                        0x0a00_0000 | x.wrapping_mul(0x0001_3579) & 0x00ff_ffff,
                    );
                    let k = key(v, dst);
                    let i = d.lookup(t, &k);
                    assert_eq!(i, longest_match(d, t, &k), "vrf {v} {dst:#x}");
                    let hot = i.map(|i| (d.hot(i).code(), d.hot(i).args));
                    let part = d.lookup_parts(&k).map(|(c, a)| (c, *a));
                    if d.has_part_hit_maps() {
                        assert_eq!(part, hot, "vrf {v} {dst:#x}");
                    } else {
                        assert_eq!(part, None);
                    }
                    found += i.is_some() as u32;
                }
                assert!(found > 300, "{found} keys found");
            };
            for x in 0..900u32 {
                let len = [0, 8, 16, 20, 24, 32][x as usize % 6];
                let p = (0x0a00_0000 | x.wrapping_mul(0x9e37_79b9) >> 8)
                    & (u32::MAX.checked_shl(32 - len).unwrap_or(0));
                let v = (x as u64 / 7) % 5;
                let port = x as u64 % 7 + 1;
                match x % 7 {
                    5 if !held.is_empty() => {
                        let j = x as usize % held.len();
                        let (v, p, l) = held[j];
                        d.modify(t, route(v, p, l, port)).unwrap();
                    }
                    6 if !held.is_empty() => {
                        let (v, p, l) = held.swap_remove(x as usize % held.len());
                        d.delete(t, &route(v, p, l, 1)).unwrap();
                    }
                    _ if !held.contains(&(v, p, len)) => {
                        d.insert(t, route(v, p, len, port)).unwrap();
                        held.push((v, p, len));
                    }
                    _ => {}
                }
            }
            assert_eq!(d.entries.len(), held.len());
            assert!(d.parts.on && d.parts.len() == 5, "{} parts", d.parts.len());
            check(&d, 6);
            // every route of VRF 4 deleted: its part is taken by the next VRF
            for (v, p, l) in held.clone().into_iter().filter(|h| h.0 == 4) {
                d.delete(t, &route(v, p, l, 1)).unwrap();
                held.retain(|h| *h != (v, p, l));
            }
            d.insert(t, route(40, 0x0a00_0000, 8, 3)).unwrap();
            assert!(d.parts.on && d.parts.len() == 5);
            check(&d, 41);
            // VRFs up to the parts' limit, then one more
            for v in 5..super::super::parts::MAX_PARTS as u64 {
                d.insert(t, route(v, 0x0a00_0000, 8, 3)).unwrap();
            }
            assert!(d.parts.on && d.parts.len() == super::super::parts::MAX_PARTS);
            d.insert(t, route(99, 0x0a00_0000, 8, 3)).unwrap();
            assert!(!d.parts.on && !d.has_part_hit_maps());
            check(&d, 100);
            d.delete(t, &route(99, 0x0a00_0000, 8, 3)).unwrap();
            check(&d, 20);
            d.clear(t);
            assert!(d.parts.on && d.parts.len() == 0);
            d.insert(t, route(1, 0x0a00_0000, 8, 3)).unwrap();
            assert_eq!(d.lookup(t, &key(1, 0x0a01_0203)), Some(0));
            assert_eq!(d.lookup(t, &key(2, 0x0a01_0203)), None);
        }
    }
}

/// A table of two exact keys around the prefix (`{ vrf: exact; dst: lpm; zone: exact }`) finds
/// its part by both exact words: lookups agree with a scan, a key differing in either exact word
/// alone finds another part (or none).
#[test]
fn parts_of_two_exact_keys_agree_with_a_scan() {
    let e = crate::testutil::engine(crate::testutil::ROUTER);
    let ti = e.table_index("RouterIngress.ipv4_lpm").unwrap();
    let mut t = e.prog.tables[ti].clone();
    let mut exact = t.keys[0].clone();
    exact.kind = MatchKind::Exact;
    exact.width = 16;
    t.keys = vec![exact.clone(), t.keys[0].clone(), exact];
    let template = crate::testutil::route_entry(&e, 0, 8, 1, 2);
    let route = |vrf: u64, zone: u64, p: u32, len: u32, port: u64| {
        let mut r = template.clone();
        r.action.args[0] = Value::new(48, 0x0200_0000_0000 | port);
        r.matches = vec![
            FieldMatch::Exact(Value::new(16, vrf)),
            FieldMatch::Lpm {
                value: Value::new(32, p as u64),
                prefix_len: len,
            },
            FieldMatch::Exact(Value::new(16, zone)),
        ];
        r
    };
    for hits in [true, false] {
        let mut d = TableData::with_hit_maps(&t, hits).unwrap();
        assert!(d.parts.on);
        for x in 0..400u32 {
            let len = [8, 16, 24, 32][x as usize % 4];
            let p = (0x0a00_0000 | x.wrapping_mul(0x9e37_79b9) >> 8) & (u32::MAX << (32 - len));
            let (vrf, zone) = (x as u64 % 3, x as u64 / 3 % 2);
            if d.find(&t, &route(vrf, zone, p, len, 1)).is_none() {
                d.insert(&t, route(vrf, zone, p, len, x as u64 % 7 + 1))
                    .unwrap();
            }
        }
        assert_eq!(d.parts.len(), 6, "a part per (vrf, zone)");
        let mut found = 0;
        for x in 0..6000u32 {
            let k = [
                x as u64 % 4,
                (0x0a00_0000 | x.wrapping_mul(0x0001_3579) & 0x00ff_ffff) as u64,
                x as u64 / 4 % 3,
            ];
            let i = d.lookup(&t, &k);
            assert_eq!(i, longest_match(&d, &t, &k), "{k:x?}");
            let hot = i.map(|i| (d.hot(i).code(), d.hot(i).args));
            let part = d.lookup_parts(&k).map(|(c, a)| (c, *a));
            assert_eq!(part, if hits { hot } else { None }, "{k:x?}");
            found += i.is_some() as u32;
        }
        assert!(found > 500, "{found} keys found");
    }
}
