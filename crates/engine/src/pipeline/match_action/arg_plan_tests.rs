//! Tests of the per-action write plans of inline arguments (`ArgPlan`): actions whose parameters
//! are 1, 9, 32, 48 and 64 bits wide (three words inline, two words inline, four words held in the
//! entry), a miss's default action arguments, and an entry modified between table versions; each
//! packet the same on the closure and the native engine, and each parameter read back from the
//! emitted header.

use crate::testutil::one_header_program;
use crate::{Backend, Engine, Outputs, Worker};
use p4sec_ir::*;
use std::sync::Arc;

/// The header after the key: (name, width) of each output field, in order.
const FIELDS: [(&str, u32); 10] = [
    ("f1", 1),
    ("f9", 9),
    ("f48", 48),
    ("f32", 32),
    ("f64", 64),
    ("g64", 64),
    ("g48", 48),
    ("g9", 9),
    ("g1", 1),
    ("pad", 4),
];

const INGRESS: &str = "
    action a3(bit<1> p1, bit<9> p9, bit<48> p48) { hdr.h.f1 = p1; hdr.h.f9 = p9; hdr.h.f48 = p48; }
    action a2(bit<32> p32, bit<64> p64) { hdr.h.f32 = p32; hdr.h.f64 = p64; }
    action a4(bit<64> q64, bit<48> q48, bit<9> q9, bit<1> q1) {
        hdr.h.g64 = q64; hdr.h.g48 = q48; hdr.h.g9 = q9; hdr.h.g1 = q1;
    }
    table t { key = { hdr.h.k : exact; } actions = { a3; a2; a4; }
              default_action = a3(1, 0x1a5, 0xfedc_ba98_7654); size = 64; }
    apply { sm.egress_spec = 1; t.apply(); }";

fn engines() -> [Engine; 2] {
    let fields: String = std::iter::once("bit<16> k; ".to_string())
        .chain(FIELDS.iter().map(|(n, w)| format!("bit<{w}> {n}; ")))
        .collect();
    let src = one_header_program(&fields, INGRESS);
    let prog = Arc::new(p4sec_frontend::compile_str("args.p4", &src, &Default::default()).unwrap());
    let a = Engine::with_backend(prog.clone(), &[], Backend::Closure).unwrap();
    let b = Engine::with_backend(prog, &[], Backend::Native).unwrap();
    assert_eq!(b.backend(), Backend::Native);
    [a, b]
}

fn call(e: &Engine, name: &str, args: &[(u32, u64)]) -> ActionCall {
    ActionCall {
        action: e.prog.actions.iter().position(|a| a.name == name).unwrap() as u32,
        args: args.iter().map(|&(w, v)| Value::new(w, v)).collect(),
    }
}

fn entry(e: &Engine, k: u16, name: &str, args: &[(u32, u64)]) -> TableEntry {
    TableEntry {
        matches: vec![FieldMatch::Exact(Value::new(16, k as u64))],
        action: call(e, name, args),
        priority: 0,
    }
}

/// The output fields (by name) of a packet with key `k` and all output fields zero, the same on
/// both engines.
fn out(
    es: &[Engine; 2],
    ws: &mut [Worker; 2],
    k: u16,
) -> std::collections::HashMap<&'static str, u64> {
    let bits: u32 = 16 + FIELDS.iter().map(|f| f.1).sum::<u32>();
    let mut pkt = k.to_be_bytes().to_vec();
    pkt.resize(bits.div_ceil(8) as usize, 0);
    let mut frames = vec![];
    for (e, w) in es.iter().zip(ws.iter_mut()) {
        let mut o = Outputs::default();
        e.process(w, 0, &pkt, &mut o);
        frames.push(o.iter().map(|(_, f)| f.to_vec()).next().expect("forwarded"));
    }
    assert_eq!(frames[0], frames[1], "closure vs native for k={k:#x}");
    let f = &frames[0];
    let mut at = 16usize;
    let mut m = std::collections::HashMap::new();
    for &(n, w) in &FIELDS {
        let mut v = 0u64;
        for b in at..at + w as usize {
            v = (v << 1) | ((f[b / 8] >> (7 - b % 8)) & 1) as u64;
        }
        m.insert(n, v);
        at += w as usize;
    }
    m
}

#[test]
fn plans_write_each_width_of_several_actions() {
    let es = engines();
    let t = es[0].table_index("I.t").unwrap();
    for e in &es {
        e.table_insert(
            t,
            entry(e, 1, "I.a3", &[(1, 1), (9, 0x1ff), (48, 0xffff_ffff_fffe)]),
        )
        .unwrap();
        e.table_insert(
            t,
            entry(e, 2, "I.a2", &[(32, 0xdead_beef), (64, u64::MAX - 5)]),
        )
        .unwrap();
        let a4 = [
            (64, 0x0123_4567_89ab_cdef),
            (48, 0xa0b0_c0d0_e0f0),
            (9, 0x101),
            (1, 1),
        ];
        e.table_insert(t, entry(e, 4, "I.a4", &a4)).unwrap();
        e.table_insert(t, entry(e, 5, "I.a3", &[(1, 0), (9, 0x0aa), (48, 0x1)]))
            .unwrap();
    }
    let mut ws = [Worker::new(&es[0]), Worker::new(&es[1])];
    let o = out(&es, &mut ws, 1);
    assert_eq!((o["f1"], o["f9"], o["f48"]), (1, 0x1ff, 0xffff_ffff_fffe));
    assert_eq!((o["f32"], o["f64"], o["g64"]), (0, 0, 0));
    let o = out(&es, &mut ws, 2);
    assert_eq!((o["f32"], o["f64"]), (0xdead_beef, u64::MAX - 5));
    assert_eq!((o["f1"], o["f9"], o["f48"]), (0, 0, 0));
    // four parameter words: held in the entry, not inline
    let o = out(&es, &mut ws, 4);
    assert_eq!(
        (o["g64"], o["g48"], o["g9"], o["g1"]),
        (0x0123_4567_89ab_cdef, 0xa0b0_c0d0_e0f0, 0x101, 1)
    );
    // the same action again with other arguments: nothing left of the first hit's
    let o = out(&es, &mut ws, 5);
    assert_eq!((o["f1"], o["f9"], o["f48"]), (0, 0x0aa, 1));
    // a miss: the default action's arguments
    let o = out(&es, &mut ws, 9);
    assert_eq!((o["f1"], o["f9"], o["f48"]), (1, 0x1a5, 0xfedc_ba98_7654));
    assert_eq!(es[1].table_stats(t), (4, 1));
    // a default of another action, set in a new version
    for e in &es {
        let d = call(e, "I.a2", &[(32, 7), (64, 1 << 63)]);
        e.table_set_default(t, d).unwrap();
    }
    let o = out(&es, &mut ws, 9);
    assert_eq!((o["f32"], o["f64"], o["f1"]), (7, 1 << 63, 0));
}

#[test]
fn plans_follow_an_entry_modified_between_versions() {
    let es = engines();
    let t = es[0].table_index("I.t").unwrap();
    let mut ws = [Worker::new(&es[0]), Worker::new(&es[1])];
    for e in &es {
        e.table_insert(t, entry(e, 3, "I.a3", &[(1, 1), (9, 0x100), (48, 0xabc)]))
            .unwrap();
    }
    let o = out(&es, &mut ws, 3);
    assert_eq!((o["f1"], o["f9"], o["f48"]), (1, 0x100, 0xabc));
    // new arguments of the same action
    for e in &es {
        e.table_modify(
            t,
            entry(e, 3, "I.a3", &[(1, 0), (9, 0x0ff), (48, 0x8000_0000_0000)]),
        )
        .unwrap();
    }
    let o = out(&es, &mut ws, 3);
    assert_eq!((o["f1"], o["f9"], o["f48"]), (0, 0x0ff, 0x8000_0000_0000));
    // another action of another number of words
    for e in &es {
        e.table_modify(t, entry(e, 3, "I.a2", &[(32, 0xffff_ffff), (64, 0x42)]))
            .unwrap();
    }
    let o = out(&es, &mut ws, 3);
    assert_eq!((o["f32"], o["f64"]), (0xffff_ffff, 0x42));
    assert_eq!((o["f1"], o["f9"], o["f48"]), (0, 0, 0));
    // and one whose arguments do not fit inline
    for e in &es {
        let a4 = [(64, u64::MAX), (48, 0xffff_ffff_ffff), (9, 0x1ff), (1, 1)];
        e.table_modify(t, entry(e, 3, "I.a4", &a4)).unwrap();
    }
    let o = out(&es, &mut ws, 3);
    assert_eq!(
        (o["g64"], o["g48"], o["g9"], o["g1"]),
        (u64::MAX, 0xffff_ffff_ffff, 0x1ff, 1)
    );
    assert_eq!(es[1].table_stats(t), (4, 0));
}

/// The plan of each action: its parameter words' slots and masks, padded with writes of nothing
/// into the sink slot; the action of four words has a plan no hot line's count matches (hot lines
/// hold at most `INLINE_ARGS` words, or none inline).
#[test]
fn plans_of_the_program_actions() {
    let es = engines();
    let e = &es[1];
    let sink = e.prog.slots;
    for (a, words) in e.match_action.param_words.iter().enumerate() {
        let p = &e.match_action.arg_plans[a];
        if words.len() > crate::tables::INLINE_ARGS {
            assert_ne!(p.words, crate::tables::Hot::NOT_INLINE);
            assert!(p.words as usize > crate::tables::INLINE_ARGS);
            continue;
        }
        assert_eq!(p.words as usize, words.len());
        for i in 0..crate::tables::INLINE_ARGS {
            match words.get(i) {
                Some(&(s, m, _, _)) => assert_eq!((p.slots[i], p.masks[i]), (s, m)),
                None => assert_eq!((p.slots[i], p.masks[i]), (sink, 0)),
            }
        }
    }
    let a3 = e
        .prog
        .actions
        .iter()
        .position(|a| a.name == "I.a3")
        .unwrap();
    let m = &e.match_action.arg_plans[a3].masks;
    assert_eq!(*m, [1, 0x1ff, 0xffff_ffff_ffff]);
}
