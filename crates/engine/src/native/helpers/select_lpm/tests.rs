//! Tests of native code's narrow LPM apply (`np_select_lpm32`, `Engine::select_lpm32`): nested
//! and overlapping prefixes (longest wins), a /0 route, misses to default actions of few and of
//! many words, arguments not held inline, `hit` and `action_run`, counters, traced packets, and
//! routes deleted, re-added and modified between packets of the same workers, on both engines
//! against a model of the longest match.

use crate::testutil::pair::{self, lpm, Kept};
use crate::testutil::two_tables::{self, shown, Act};
use crate::{Engine, Outputs, Worker};
use p4sec_ir::*;

/// t1's default action.
const T1_DEFAULT: Act = Act::Fwd(0xd0, 0x0a0b0c0d0e0f);

/// Both engines of the program: t1 on a 32-bit key (`dst`), t2 on a 20-bit one (`low`), `fwd`'s
/// key of 48 bits.
fn engines() -> [Kept; 2] {
    pair::engines(&two_tables::program(
        "bit<32> dst; bit<4> pad; bit<20> low;",
        48,
        ["hdr.h.dst : lpm;", "hdr.h.low : lpm;"],
        T1_DEFAULT,
        true,
    ))
}

fn route(e: &Engine, width: u32, prefix: u32, len: u32, a: Act) -> TableEntry {
    lpm(width, prefix.into(), len, a.call(e))
}

fn mask(width: u32, len: u32) -> u32 {
    if len == 0 {
        0
    } else {
        (u32::MAX >> (32 - len)) << (width - len)
    }
}

/// A table's routes as the model holds them: (prefix, length, action).
struct Model {
    width: u32,
    routes: Vec<(u32, u32, Act)>,
    default: Act,
}

impl Model {
    /// The longest matching route's action and whether one matched.
    fn get(&self, k: u32) -> (Act, bool) {
        self.routes
            .iter()
            .filter(|&&(p, l, _)| k & mask(self.width, l) == p)
            .max_by_key(|&&(_, l, _)| l)
            .map_or((self.default, false), |&(_, _, a)| (a, true))
    }
}

/// (o, k, hits, run) of a packet with `dst` and `low` through t1 (`sel` 0; 2: an apply that
/// marks nothing) or t2 (`sel` 1), the same on both engines (traced when `trace`, the trace
/// naming the table's outcome).
fn out(es: &[Kept; 2], dst: u32, low: u32, sel: u8, trace: bool) -> (u8, u128, u8, u8) {
    let mut keys = dst.to_be_bytes().to_vec();
    keys.extend_from_slice(&(low & 0xf_ffff).to_be_bytes()[1..]);
    for e in es {
        e.worker().set_trace(trace);
    }
    let what = format_args!("dst {dst:#x}, low {low:#x}, sel {sel}");
    let got = shown(es, &keys, sel, &what);
    if trace {
        for e in es {
            let mut w = e.worker();
            let t = w.take_trace().join("\n");
            let name = if sel == 1 { "t2 " } else { "t1 " };
            assert!(t.contains(name), "trace of {:?}: {t}", e.backend());
            w.set_trace(false);
        }
    }
    got
}

/// What the model says a packet gets: (o, k, hit, action_run mark).
fn want(m: &Model, key: u32) -> (u8, u128, u8, u8) {
    let (a, hit) = m.get(key);
    a.shows(hit)
}

/// The routes of a round: nested and overlapping prefixes of many lengths under a few tops, each
/// action kind among them (big's arguments are not held inline).
fn routes(width: u32, round: u32) -> Vec<(u32, u32, Act)> {
    let mut v = vec![];
    let full = if width == 32 {
        u32::MAX
    } else {
        (1 << width) - 1
    };
    for (i, top) in [0x0a00_0000u32, 0xc0a8_0000, 0x7f00_0000]
        .iter()
        .enumerate()
    {
        let top = (top >> (32 - width)) & full;
        for (j, len) in [8u32, 12, 16, 20, 24, 28, 31, width].iter().enumerate() {
            let len = (*len).min(width);
            let p =
                (top | (0x0101_0101u32 >> (32 - width)).wrapping_mul(j as u32)) & mask(width, len);
            if v.iter().any(|&(q, l, _)| (q, l) == (p, len)) {
                continue;
            }
            let n = (i * 8 + j) as u32 + round;
            let a = match n % 3 {
                0 => Act::Fwd(n as u8 + 1, 0x1111_2222_3333 ^ n as u128),
                1 => Act::Big(
                    n as u8 + 0x40,
                    0x9999_8888_7777_6666_u128 << 64 | n as u128,
                    0x5555 ^ n as u64,
                ),
                _ => Act::No,
            };
            v.push((p, len, a));
        }
    }
    v
}

/// Keys to probe: inside each route (at its start, its end and a middle), just outside it, and
/// a few anywhere.
fn keys(m: &Model) -> Vec<u32> {
    let full = if m.width == 32 {
        u32::MAX
    } else {
        (1 << m.width) - 1
    };
    let mut v = vec![0, full, 0x1234_5678 & full];
    for &(p, l, _) in &m.routes {
        let span = !mask(m.width, l) & full;
        v.extend([
            p,
            p | span,
            p | (span & 0x5a5a_5a5a),
            p.wrapping_sub(1) & full,
            (p | span).wrapping_add(1) & full,
        ]);
    }
    v
}

/// Both tables (t1 on a 32-bit key reporting `action_run`, t2 on a 20-bit one reporting `hit`)
/// through rounds of routes: inserted, probed, every other one deleted, probed, re-added with
/// other actions, a /0 route added and the defaults changed, probed (some packets traced); the
/// counters at the end as the model counted.
#[test]
fn lpm_applies_agree_with_the_longest_match() {
    let es = engines();
    let [t1, t2] = ["I.t1", "I.t2"].map(|t| es[0].table_index(t).unwrap());
    let mut m1 = Model {
        width: 32,
        routes: vec![],
        default: T1_DEFAULT,
    };
    let mut m2 = Model {
        width: 20,
        routes: vec![],
        default: two_tables::T2_DEFAULT,
    };
    let (mut hits, mut misses) = ([0u64; 2], [0u64; 2]);
    let mut probe = |m1: &Model, m2: &Model, round: u32| {
        for (n, k) in keys(m1).into_iter().enumerate() {
            let trace = (n as u32 + round).is_multiple_of(7);
            let (o, kk, _, run) = out(&es, k, 0, 0, trace);
            let (wo, wk, wh, wr) = want(m1, k);
            assert_eq!((o, kk, run), (wo, wk, wr), "t1 round {round}, key {k:#x}");
            // the same apply marking neither `hit` nor `action_run`
            let (o, kk, _, run) = out(&es, k, 0, 2, trace);
            assert_eq!(
                (o, kk, run),
                (wo, wk, 0),
                "t1 unmarked, round {round}, key {k:#x}"
            );
            if wh == 1 {
                hits[0] += 2
            } else {
                misses[0] += 2
            }
        }
        for (n, k) in keys(m2).into_iter().enumerate() {
            let trace = (n as u32 + round).is_multiple_of(5);
            let (o, kk, hit, _) = out(&es, 0, k, 1, trace);
            let (wo, wk, wh, _) = want(m2, k);
            assert_eq!((o, kk, hit), (wo, wk, wh), "t2 round {round}, key {k:#x}");
            if wh == 1 {
                hits[1] += 1
            } else {
                misses[1] += 1
            }
        }
    };
    // no routes: every packet misses to the default
    probe(&m1, &m2, 0);
    for round in 0..3u32 {
        for (t, m) in [(t1, &mut m1), (t2, &mut m2)] {
            for (p, l, a) in routes(m.width, round) {
                for e in &es {
                    e.table_insert(t, route(e, m.width, p, l, a)).unwrap();
                }
                m.routes.push((p, l, a));
            }
        }
        probe(&m1, &m2, round * 10 + 1);
        // every other route deleted, then the same ones back with other actions
        for (t, m) in [(t1, &mut m1), (t2, &mut m2)] {
            let gone: Vec<_> = m.routes.iter().copied().step_by(2).collect();
            for &(p, l, a) in &gone {
                for e in &es {
                    e.table_delete(t, &route(e, m.width, p, l, a)).unwrap();
                }
                m.routes.retain(|r| (r.0, r.1) != (p, l));
            }
            probe_after(m, &gone);
        }
        probe(&m1, &m2, round * 10 + 2);
        for (t, m) in [(t1, &mut m1), (t2, &mut m2)] {
            for (p, l, _) in routes(m.width, round).into_iter().step_by(2) {
                let a = Act::Fwd(0x70 + l as u8, p as u128 ^ 0xabc);
                for e in &es {
                    e.table_insert(t, route(e, m.width, p, l, a)).unwrap();
                }
                m.routes.push((p, l, a));
            }
        }
        // every third route given another action in place (the copy of what a hit needs, kept
        // in its key's slot, follows)
        for (t, m) in [(t1, &mut m1), (t2, &mut m2)] {
            let width = m.width;
            for r in m.routes.iter_mut().step_by(3) {
                let a = Act::Fwd(0x90 + r.1 as u8, r.0 as u128 ^ 0x5a5a);
                for e in &es {
                    e.table_modify(t, route(e, width, r.0, r.1, a)).unwrap();
                }
                r.2 = a;
            }
        }
        // a /0 route in t1, t2's default changed to one of few words, then back to a default of
        // more words than the fast path writes
        if round == 1 {
            let a = Act::Big(0x33, 7, 8);
            for e in &es {
                e.table_insert(t1, route(e, 32, 0, 0, a)).unwrap();
                e.table_set_default(t2, Act::Fwd(0x44, 0x55).call(e))
                    .unwrap();
            }
            m1.routes.push((0, 0, a));
            m2.default = Act::Fwd(0x44, 0x55);
        }
        if round == 2 {
            let a = Act::Big(0x66, 1 << 100, 9);
            for e in &es {
                e.table_insert(t1, route(e, 32, 0, 0, Act::No)).unwrap();
                e.table_modify(t1, route(e, 32, 0, 0, a)).unwrap();
                e.table_set_default(t2, Act::Big(0x11, 3, 4).call(e))
                    .unwrap();
            }
            m1.routes.push((0, 0, a));
            m2.default = Act::Big(0x11, 3, 4);
        }
        probe(&m1, &m2, round * 10 + 3);
        // clean up for the next round: all routes deleted
        for (t, m) in [(t1, &mut m1), (t2, &mut m2)] {
            for &(p, l, a) in &m.routes {
                for e in &es {
                    e.table_delete(t, &route(e, m.width, p, l, a)).unwrap();
                }
            }
            m.routes.clear();
        }
    }
    assert!(hits[0] > 100 && misses[0] > 10 && hits[1] > 100 && misses[1] > 10);
    for e in &es {
        assert_eq!(
            e.table_stats(t1),
            (hits[0], misses[0]),
            "t1, {:?}",
            e.backend()
        );
        assert_eq!(
            e.table_stats(t2),
            (hits[1], misses[1]),
            "t2, {:?}",
            e.backend()
        );
    }
}

/// The deleted routes are gone from the model.
fn probe_after(m: &Model, gone: &[(u32, u32, Act)]) {
    for &(p, l, _) in gone {
        assert!(!m.routes.iter().any(|r| (r.0, r.1) == (p, l)));
    }
}

/// The fast path's shape checks: a hit whose arguments its plan writes and a miss to a default
/// of few words taken (arguments written, counted); a hit whose arguments are not inline, a miss
/// to a default of more words, a traced packet and an exact table left with nothing written and
/// nothing counted.
#[test]
fn select_lpm32_takes_its_cases_and_leaves_the_rest() {
    let es = engines();
    let e = &es[1];
    let [t1, t2] = ["I.t1", "I.t2"].map(|t| e.table_index(t).unwrap());
    e.table_insert(t1, route(e, 32, 0x0a00_0000, 8, Act::Fwd(9, 0xbeef)))
        .unwrap();
    e.table_insert(t1, route(e, 32, 0x0a01_0000, 16, Act::Big(9, 5, 1)))
        .unwrap();
    let mut w = Worker::new(e);
    // a packet refreshes the worker's snapshots
    e.process(&mut w, 0, &[0u8; 32], &mut Outputs::default());
    let before = e.table_stats(t1);
    let (fwd, big) = (
        pair::action_index(e, "I.fwd"),
        pair::action_index(e, "I.big"),
    );
    let params = e.match_action.param_words[fwd].clone();
    let run = Some(Loc {
        slot: params[0].0,
        width: 8,
    });
    assert_eq!(
        e.select_lpm32(&mut w, t1, 0x0a02_0304, &None, &None),
        Some(fwd)
    );
    let got: Vec<u64> = params.iter().map(|p| w.slots[p.0 as usize]).collect();
    assert_eq!(got, [9, 0xbeef]);
    // a miss: the default's arguments, and `action_run` written
    assert_eq!(
        e.select_lpm32(&mut w, t1, 0x0b00_0000, &None, &run),
        Some(fwd)
    );
    let got: Vec<u64> = params.iter().map(|p| w.slots[p.0 as usize]).collect();
    assert_eq!(got, [fwd as u64, 0x0a0b0c0d0e0f]);
    assert_eq!(e.table_stats(t1), (before.0 + 1, before.1 + 1));
    let slots = w.slots.clone();
    assert_eq!(e.select_lpm32(&mut w, t1, 0x0a01_0203, &None, &None), None);
    assert_eq!(e.select_lpm32(&mut w, t2, 0x1234, &None, &None), None);
    w.set_trace(true);
    assert_eq!(e.select_lpm32(&mut w, t1, 0x0a02_0304, &None, &None), None);
    w.set_trace(false);
    assert_eq!(w.slots, slots);
    assert_eq!(e.table_stats(t1), (before.0 + 1, before.1 + 1));
    // the general lean path takes what it left
    assert_eq!(
        e.select_lean(&mut w, t1, 0x0a01_0203, &None, &None),
        Some(big)
    );
    let bigp = e.match_action.param_words[big].clone();
    let got: Vec<u64> = bigp.iter().map(|p| w.slots[p.0 as usize]).collect();
    assert_eq!(got, [9, 5, 0, 1]);
    // the helper is chosen for narrow LPM keys only
    let t = &e.prog.tables[t1];
    assert!(super::lpm32_helpers(t, true).is_some());
    assert_ne!(
        super::lpm32_helpers(t, true),
        super::lpm32_helpers(t, false)
    );
    let mut exact = t.clone();
    exact.keys[0].kind = MatchKind::Exact;
    assert!(super::lpm32_helpers(&exact, false).is_none());
    let mut wide = t.clone();
    wide.keys[0].width = 48;
    assert!(super::lpm32_helpers(&wide, true).is_none());
    let mut timed = t.clone();
    timed.support_timeout = true;
    assert!(super::lpm32_helpers(&timed, true).is_none());
}
