//! Tests of native code's apply of an LPM table indexed in parts (`np_select_parts`): a VRF
//! (exact) beside a 32-bit prefix, before it in one table and after it in the other, through
//! routes of several VRFs inserted, deleted and modified, and past the parts' limit (the general
//! levels then), on both engines against a model of the longest match in the packet's VRF.

use crate::testutil::pair::{self, Kept};
use crate::testutil::two_tables::{self, shown, Act};
use crate::Engine;
use p4sec_ir::*;

const T1_DEFAULT: Act = Act::Fwd(0xd0, 0x0a0b0c0d0e0f);

/// Both engines: t1 keyed `{vrf: exact; dst: lpm}`, t2 `{dst: lpm; vrf: exact}`.
fn engines() -> [Kept; 2] {
    pair::engines(&two_tables::program(
        "bit<8> vrf; bit<32> dst;",
        48,
        [
            "hdr.h.vrf : exact; hdr.h.dst : lpm;",
            "hdr.h.dst : lpm; hdr.h.vrf : exact;",
        ],
        T1_DEFAULT,
        false,
    ))
}

fn mask(len: u32) -> u32 {
    u32::MAX.checked_shl(32 - len).unwrap_or(0)
}

/// A route of table `t1` (the VRF first) or `t2` (the prefix first).
fn route(e: &Engine, first: bool, (vrf, p, len, a): (u8, u32, u32, Act)) -> TableEntry {
    let mut matches = vec![
        FieldMatch::Exact(pair::value(8, vrf.into())),
        FieldMatch::Lpm {
            value: pair::value(32, p.into()),
            prefix_len: len,
        },
    ];
    if !first {
        matches.reverse();
    }
    TableEntry {
        matches,
        action: a.call(e),
        priority: 0,
    }
}

/// The routes (VRF, prefix, length, action) and the table's default.
struct Model {
    routes: Vec<(u8, u32, u32, Act)>,
    default: Act,
}

impl Model {
    /// (o, k, hit, action_run mark) of a packet of VRF `vrf` towards `dst`.
    fn want(&self, vrf: u8, dst: u32) -> (u8, u128, u8, u8) {
        let best = self
            .routes
            .iter()
            .filter(|r| r.0 == vrf && dst & mask(r.2) == r.1)
            .max_by_key(|r| r.2);
        match best {
            Some(r) => r.3.shows(true),
            None => self.default.shows(false),
        }
    }
}

/// Routes of VRF `vrf` in round `n`: nested prefixes under a few tops, each action kind.
fn routes(vrf: u8, n: u32) -> Vec<(u8, u32, u32, Act)> {
    let mut v = vec![];
    for (i, top) in [0x0a00_0000u32, 0xc0a8_0000].iter().enumerate() {
        for (j, len) in [0u32, 8, 16, 24, 32].iter().enumerate() {
            let p = (top | 0x0001_0101u32.wrapping_mul(j as u32 + vrf as u32)) & mask(*len);
            if v.iter()
                .any(|r: &(u8, u32, u32, Act)| (r.1, r.2) == (p, *len))
            {
                continue;
            }
            let k = (i * 5 + j) as u32 + n + vrf as u32;
            let a = match k % 3 {
                0 => Act::Fwd(k as u8 + 1, 0x1111_2222_3333 ^ k as u128),
                1 => Act::Big(k as u8 + 0x40, 0x9999 << 64 | k as u128, 0x55 ^ k as u64),
                _ => Act::No,
            };
            v.push((vrf, p, *len, a));
        }
    }
    v
}

/// Every route's start, end and just past it, in each VRF of `vrfs` (so also in the wrong one),
/// through t1 (`first`: its `action_run` compared) or t2 (its `hit`).
fn probe(es: &[Kept; 2], m: &Model, vrfs: u8, first: bool, what: &str) {
    let mut keys = vec![0u32, u32::MAX];
    for r in &m.routes {
        keys.extend([r.1, r.1 | !mask(r.2), (r.1 | !mask(r.2)).wrapping_add(1)]);
    }
    keys.sort_unstable();
    keys.dedup();
    for vrf in 0..vrfs {
        for &dst in &keys {
            let mut pkt = vec![vrf];
            pkt.extend(dst.to_be_bytes());
            let w = format!("{what}: vrf {vrf}, dst {dst:#x}");
            let (o, k, hit, run) = shown(es, &pkt, if first { 0 } else { 1 }, &w);
            let (wo, wk, wh, wr) = m.want(vrf, dst);
            if first {
                assert_eq!((o, k, run), (wo, wk, wr), "{w}");
            } else {
                assert_eq!((o, k, hit), (wo, wk, wh), "{w}");
            }
        }
    }
}

/// Both key orders, each through: no routes; routes of four VRFs (a /0 in each); a third of them
/// deleted and others given another action; sixteen VRFs more, past the parts' limit.
#[test]
fn vrf_applies_agree_with_the_longest_match_in_the_vrf() {
    for first in [true, false] {
        let es = engines();
        let t = es[0]
            .table_index(if first { "I.t1" } else { "I.t2" })
            .unwrap();
        let tb = &es[0].prog.tables[t];
        assert!(
            super::parts_helpers(tb, true).is_some(),
            "a table indexed in parts"
        );
        let mut m = Model {
            routes: vec![],
            default: if first {
                T1_DEFAULT
            } else {
                two_tables::T2_DEFAULT
            },
        };
        probe(&es, &m, 2, first, "no routes");
        for vrf in 0..4u8 {
            for r in routes(vrf, 0) {
                for e in &es {
                    e.table_insert(t, route(e, first, r)).unwrap();
                }
                m.routes.push(r);
            }
        }
        probe(&es, &m, 5, first, "four VRFs");
        // every third route deleted, every other one changed to another action
        let old = m.routes.clone();
        for (n, r) in old.into_iter().enumerate() {
            if n % 3 == 0 {
                for e in &es {
                    e.table_delete(t, &route(e, first, r)).unwrap();
                }
                m.routes.retain(|x| *x != r);
            } else if n % 2 == 0 {
                let n = (r.0, r.1, r.2, Act::Fwd(0x77, n as u128));
                for e in &es {
                    e.table_modify(t, route(e, first, n)).unwrap();
                }
                m.routes
                    .iter_mut()
                    .filter(|x| **x == r)
                    .for_each(|x| *x = n);
            }
        }
        probe(&es, &m, 5, first, "after deletes and modifies");
        // more VRFs than the parts take: the general levels answer
        for vrf in 4..20u8 {
            let r = (vrf, 0x0a00_0000, 8, Act::Fwd(vrf, vrf as u128));
            for e in &es {
                e.table_insert(t, route(e, first, r)).unwrap();
            }
            m.routes.push(r);
        }
        probe(&es, &m, 21, first, "twenty VRFs");
    }
}
