//! Tests of tables whose packed key takes two words (an IPv6 destination, or two exact keys of at
//! most 64 bits): their maps hold the words as a pair ([`super::super::keys::KeyMap::Two`]).

use super::tests::longest_match;
use super::*;
use p4sec_ir::Value;

/// A 128-bit value of `x`.
fn v128(x: u128) -> Value {
    Value {
        width: 128,
        words: vec![x as u64, (x >> 64) as u64],
    }
}

/// The mask of the top `len` bits of 128.
fn mask(len: u32) -> u128 {
    u128::MAX.checked_shl(128 - len).unwrap_or(0)
}

/// An LPM table of one 128-bit key (IPv6 routes, lengths 0 to 128 with some on either side of
/// the word boundary): through inserts, modifies and deletes, its lookups agree with a scan of its
/// entries, for keys inside the prefixes and beside them.
#[test]
fn ipv6_routes_agree_with_a_scan() {
    let e = crate::testutil::engine(crate::testutil::ROUTER);
    let ti = e.table_index("RouterIngress.ipv4_lpm").unwrap();
    let mut t = e.prog.tables[ti].clone();
    t.keys[0].width = 128;
    let template = crate::testutil::route_entry(&e, 0, 8, 1, 2);
    let route = |p: u128, len: u32, port: u64| {
        let mut r = template.clone();
        r.action.args[0] = Value::new(48, 0x0200_0000_0000 | port);
        r.matches = vec![FieldMatch::Lpm {
            value: v128(p & mask(len)),
            prefix_len: len,
        }];
        r
    };
    let key = |dst: u128| vec![dst as u64, (dst >> 64) as u64];
    let mut d = TableData::new(&t).unwrap();
    assert!(d.kind == Kind::Lpm && d.key_words == 2);
    let mut held: Vec<(u128, u32)> = vec![];
    let base = 0x2001_0db8u128 << 96;
    let addr = |x: u32| base ^ (x as u128).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835);
    for x in 0..1200u32 {
        let len = [0, 16, 32, 48, 48, 56, 63, 64, 65, 96, 127, 128][x as usize % 12];
        let p = addr(x / 3) & mask(len);
        let port = x as u64 % 7 + 1;
        match x % 9 {
            7 if !held.is_empty() => {
                let (p, l) = held[x as usize % held.len()];
                d.modify(&t, route(p, l, port)).unwrap();
            }
            8 if !held.is_empty() => {
                let (p, l) = held.swap_remove(x as usize % held.len());
                d.delete(&t, &route(p, l, 1)).unwrap();
            }
            _ if !held.contains(&(p, len)) => {
                d.insert(&t, route(p, len, port)).unwrap();
                held.push((p, len));
            }
            _ => {}
        }
    }
    assert_eq!(d.entries.len(), held.len());
    let (mut found, mut missed) = (0, 0);
    for x in 0..4000u32 {
        // a held prefix with its host bits set, or an address beside every prefix
        let dst = match held.get(x as usize % (held.len() + 40)) {
            Some(&(p, l)) => p | (addr(x ^ 0x5555) & !mask(l)),
            None => addr(x) ^ (1 << (x % 128)),
        };
        let i = d.lookup(&t, &key(dst));
        assert_eq!(i, longest_match(&d, &t, &key(dst)), "{dst:#x}");
        if i.is_some() {
            found += 1;
        } else {
            missed += 1;
        }
    }
    assert!(found > 3000, "{found} keys found");
    // the default route deleted: keys outside every prefix miss
    for (p, l) in held.clone().into_iter().filter(|h| h.1 == 0) {
        d.delete(&t, &route(p, l, 1)).unwrap();
    }
    let beside = addr(77) ^ (1 << 127);
    assert_eq!(
        d.lookup(&t, &key(beside)),
        longest_match(&d, &t, &key(beside))
    );
    assert!(missed > 0 || d.lookup(&t, &key(beside)).is_none());
}

/// An exact table of a 32-bit and a 48-bit key (two key words): every entry found by its two
/// words, a key differing in either word alone not found, through deletes.
#[test]
fn two_exact_keys_agree_with_a_scan() {
    let e = crate::testutil::engine(crate::testutil::ROUTER);
    let ti = e.table_index("RouterIngress.ipv4_lpm").unwrap();
    let mut t = e.prog.tables[ti].clone();
    t.keys[0].kind = MatchKind::Exact;
    let mut mac = t.keys[0].clone();
    mac.width = 48;
    t.keys.push(mac);
    let template = crate::testutil::route_entry(&e, 0, 8, 1, 2);
    let entry = |a: u64, b: u64| {
        let mut r = template.clone();
        r.matches = vec![
            FieldMatch::Exact(Value::new(32, a)),
            FieldMatch::Exact(Value::new(48, b)),
        ];
        r
    };
    let mut d = TableData::new(&t).unwrap();
    assert!(d.kind == Kind::Exact && d.key_words == 2);
    let keys: Vec<(u64, u64)> = (0..500u64)
        .map(|x| (x % 37, (x * 0x9e37_79b9_7f4a) & 0xffff_ffff_ffff))
        .collect();
    for &(a, b) in &keys {
        d.insert(&t, entry(a, b)).unwrap();
    }
    for &(a, b) in keys.iter().step_by(3) {
        d.delete(&t, &entry(a, b)).unwrap();
    }
    for (n, &(a, b)) in keys.iter().enumerate() {
        for k in [[a, b], [a ^ 1, b], [a, b ^ (1 << 47)]] {
            let i = d.lookup(&t, &k);
            assert_eq!(i, longest_match(&d, &t, &k), "{k:?}");
            if k == [a, b] {
                assert_eq!(i.is_some(), n % 3 != 0, "{k:?}");
            }
        }
    }
}
