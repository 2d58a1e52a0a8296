//! Tests of the one-key apply of an exact table indexed directly (a 9-bit key, as an ingress
//! port; `Engine::select_direct` and native code's `np_select_direct`): tables of 1 to 9 entries
//! with hits, misses and the default action, a 128-bit action argument, arguments not held inline,
//! a default action of more words than the fast path writes, `hit` and `action_run`, counters, and
//! entries modified, deleted and the default changed between packets, on both engines against a
//! model.

use crate::testutil::pair::{self, Kept};
use crate::testutil::two_tables::{self, shown, Act};
use crate::{Engine, Outputs, Worker};
use p4sec_ir::*;
use std::collections::HashMap;

/// t1's default action.
const T1_DEFAULT: Act = Act::Fwd(0xd0, 0x0102030405060708090a0b0c0d0e0f10);

/// Both engines of the program: t1 and t2 on a 9-bit exact key (`port`), `fwd`'s key of 128
/// bits.
fn engines() -> [Kept; 2] {
    pair::engines(&two_tables::program(
        "bit<7> pad; bit<9> port;",
        128,
        ["hdr.h.port : exact;", "hdr.h.port : exact;"],
        T1_DEFAULT,
        false,
    ))
}

fn entry(e: &Engine, port: u16, a: Act) -> TableEntry {
    pair::exact(9, port.into(), a.call(e))
}

/// (o, k, hits, run) of a packet on `port` through t1 (`sel` 0) or t2, the same on both engines.
fn out(es: &[Kept; 2], port: u16, sel: u8) -> (u8, u128, u8, u8) {
    shown(
        es,
        &port.to_be_bytes(),
        sel,
        &format_args!("port {port}, sel {sel}"),
    )
}

/// What the model says a packet on `port` gets: (o, k, hit, action_run mark).
fn want(held: &HashMap<u16, Act>, default: Act, port: u16) -> (u8, u128, u8, u8) {
    match held.get(&port) {
        Some(a) => a.shows(true),
        None => default.shows(false),
    }
}

/// Tables of 1 to 9 entries (fwd with a 128-bit key, big with its arguments not inline,
/// NoAction), every port probed, then entries modified and deleted and the default action
/// changed between packets of the same workers; t1 reports `action_run`, t2 `hit`.
#[test]
fn direct_exact_tables_of_few_entries_follow_changes() {
    for n in 1..=9u16 {
        let es = engines();
        let [t1, t2] = ["I.t1", "I.t2"].map(|t| es[0].table_index(t).unwrap());
        let mut held: HashMap<u16, Act> = HashMap::new();
        let act = |i: u16, round: u16| {
            let k = (0x1111_2222_3333_4444_u128 << 64 | 0x5555_6666_7777_8888)
                ^ (i as u128 * 0x9e37_79b9 + round as u128) << 60;
            match (i + round) % 3 {
                0 => Act::Fwd(i as u8 + 1, k),
                1 => Act::Big(i as u8 + 0x40, k, 0x1234_5678_9abc_def0 ^ i as u64),
                _ => Act::No,
            }
        };
        let port = |i: u16| (i * 37 + n) % 512;
        for i in 0..n {
            for (e, t) in es.iter().flat_map(|e| [(e, t1), (e, t2)]) {
                e.table_insert(t, entry(e, port(i), act(i, 0))).unwrap();
            }
            held.insert(port(i), act(i, 0));
        }
        let d1 = T1_DEFAULT;
        let mut d2 = two_tables::T2_DEFAULT;
        let probe = |held: &HashMap<u16, Act>, d2: Act| {
            let (mut hits, mut misses) = (0, 0);
            for i in 0..n + 3 {
                let p = port(i);
                let (o, k, _, run) = out(&es, p, 0);
                let (wo, wk, wh, wr) = want(held, d1, p);
                assert_eq!((o, k, run), (wo, wk, wr), "t1, {n} entries, port {p}");
                let (o, k, hit, _) = out(&es, p, 1);
                let (wo, wk, _, _) = want(held, d2, p);
                assert_eq!((o, k, hit), (wo, wk, wh), "t2, {n} entries, port {p}");
                if wh == 1 {
                    hits += 1;
                } else {
                    misses += 1;
                }
            }
            (hits, misses)
        };
        let (h0, m0) = probe(&held, d2);
        assert_eq!((h0, m0), (n as u64, 3));
        // every entry's action modified, then every other one deleted, then the default changed
        for i in 0..n {
            for (e, t) in es.iter().flat_map(|e| [(e, t1), (e, t2)]) {
                e.table_modify(t, entry(e, port(i), act(i, 1))).unwrap();
            }
            held.insert(port(i), act(i, 1));
        }
        let (h1, m1) = probe(&held, d2);
        for i in (0..n).step_by(2) {
            for (e, t) in es.iter().flat_map(|e| [(e, t1), (e, t2)]) {
                e.table_delete(t, &entry(e, port(i), Act::No)).unwrap();
            }
            held.remove(&port(i));
        }
        d2 = Act::Fwd(0x77, u128::MAX - 5);
        for e in &es {
            e.table_set_default(t2, d2.call(e)).unwrap();
        }
        let (h2, m2) = probe(&held, d2);
        assert_eq!(h2 + m2, n as u64 + 3);
        assert_eq!(h2, (n / 2) as u64);
        for e in &es {
            let want = (h0 + h1 + h2, m0 + m1 + m2);
            assert_eq!(e.table_stats(t1), want, "t1 counters, {:?}", e.backend());
            assert_eq!(e.table_stats(t2), want, "t2 counters, {:?}", e.backend());
        }
    }
}

/// The direct path's shape checks: a directly indexed table takes it (its hit's inline
/// arguments and a miss's default written), an entry whose arguments are not inline and a default
/// of more words than fit leave it with nothing written and nothing counted.
#[test]
fn select_direct_takes_its_cases_and_leaves_the_rest() {
    let es = engines();
    let e = &es[1];
    let [t1, t2] = ["I.t1", "I.t2"].map(|t| e.table_index(t).unwrap());
    let k = 0xaaaa_bbbb_cccc_dddd_1111_2222_3333_4444_u128;
    e.table_insert(t1, entry(e, 5, Act::Fwd(9, k))).unwrap();
    e.table_insert(t1, entry(e, 6, Act::Big(9, k, 1))).unwrap();
    let mut w = Worker::new(e);
    // a packet refreshes the worker's snapshots
    e.process(&mut w, 0, &[0u8; 22], &mut Outputs::default());
    let before = e.table_stats(t1);
    let fwd = pair::action_index(e, "I.fwd");
    let params = e.match_action.param_words[fwd].clone();
    assert_eq!(e.select_direct(&mut w, t1, 5, &None, &None), Ok(fwd));
    let got: Vec<u64> = params.iter().map(|p| w.slots[p.0 as usize]).collect();
    assert_eq!(got, [9, k as u64, (k >> 64) as u64]);
    assert_eq!(e.select_direct(&mut w, t1, 7, &None, &None), Ok(fwd));
    let got: Vec<u64> = params.iter().map(|p| w.slots[p.0 as usize]).collect();
    assert_eq!(got, [0xd0, 0x090a0b0c0d0e0f10, 0x0102030405060708]);
    assert_eq!(e.table_stats(t1), (before.0 + 1, before.1 + 1));
    // not inline: the entry handed on, nothing written or counted; t2's default of four words
    // left to the lean path
    let big = pair::action_index(e, "I.big");
    let bigp = e.match_action.param_words[big].clone();
    let slots = w.slots.clone();
    let Err(Some(i)) = e.select_direct(&mut w, t1, 6, &None, &None) else {
        panic!("entry 6 not handed on")
    };
    assert_eq!(e.select_direct(&mut w, t2, 7, &None, &None), Err(None));
    assert_eq!(w.slots, slots);
    assert_eq!(e.table_stats(t1), (before.0 + 1, before.1 + 1));
    // the hit's arguments from the entry, the hit counted
    assert_eq!(e.direct_hit_args(&mut w, t1, i, &None, &None), Some(big));
    let got: Vec<u64> = bigp.iter().map(|p| w.slots[p.0 as usize]).collect();
    assert_eq!(got, [9, k as u64, (k >> 64) as u64, 1]);
    assert_eq!(e.table_stats(t1), (before.0 + 2, before.1 + 1));
    // the general lean path takes t2's miss
    assert_eq!(e.select_lean(&mut w, t2, 7, &None, &None), Some(big));
    let got: Vec<u64> = bigp.iter().map(|p| w.slots[p.0 as usize]).collect();
    assert_eq!(got, [0xe0, 0x7766554433221100, 0xffeeddccbbaa9988, 0x5a5a]);
}
