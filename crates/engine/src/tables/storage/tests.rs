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
