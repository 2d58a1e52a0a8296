//! Whole-frame keyed hashing (the shape of programs/hash_frames.p4) on both engines: a directly
//! indexed exact table on the ingress port whose actions hold the port and a 128-bit key, the
//! bound `p4sec_hash_payload` call over the Ethernet header and the rest of the frame (vouched
//! for, or not when the action rewrote the header first), the digest in the source MAC. Hits with
//! different wide keys, misses with the default action (changed between packets), frames from a
//! bare header up, several packets on one worker per engine; each frame checked against SipHash
//! computed here, and both engines' frames compared.

use crate::{Backend, Engine, Outputs, Worker};
use p4sec_externs::hash::{self, HashAlg};
use p4sec_ir::*;
use std::sync::Arc;

const SRC: &str = r#"#include <core.p4>
#include <v1model.p4>
#include <p4sec.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
struct hs { eth_t e; }
struct m { bit<64> d; }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(hdr.e); transition accept; }
}
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    action fwd(bit<9> port, bit<128> key) {
        sm.egress_spec = port;
        p4sec_hash_payload(meta.d, p4sec_hash_alg_t.SIPHASH_2_4, key, hdr.e);
        hdr.e.src = meta.d[63:16];
    }
    action fwd_rw(bit<9> port, bit<128> key) {
        sm.egress_spec = port;
        hdr.e.dst = hdr.e.dst ^ 48w0x0a0b0c0d0e0f;
        p4sec_hash_payload(meta.d, p4sec_hash_alg_t.SIPHASH_2_4, key, hdr.e);
        hdr.e.src = meta.d[63:16];
    }
    table port_key {
        key = { sm.ingress_port : exact; }
        actions = { fwd; fwd_rw; }
        default_action = fwd(7, 0);
    }
    apply { port_key.apply(); }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.e); } }
V1Switch(P(), V(), I(), E(), V(), D()) main;
"#;

/// What an entry (or the default) does: (rewrites the header first, out port, key).
type Act = (bool, u16, u128);

fn engines() -> [Engine; 2] {
    let prog = Arc::new(
        p4sec_frontend::compile_str("hash_frames_test.p4", SRC, &Default::default())
            .unwrap_or_else(|e| panic!("{e}")),
    );
    let reg = p4sec_externs::p4::registry();
    let a = Engine::with_backend(prog.clone(), &reg, Backend::Closure).unwrap();
    let b = Engine::with_backend(prog, &reg, Backend::Native).unwrap();
    assert_eq!(b.backend(), Backend::Native);
    [a, b]
}

fn call(e: &Engine, (rw, port, key): Act) -> ActionCall {
    let name = if rw { "I.fwd_rw" } else { "I.fwd" };
    ActionCall {
        action: e.prog.actions.iter().position(|a| a.name == name).unwrap() as u32,
        args: vec![
            Value::new(9, port as u64),
            Value {
                width: 128,
                words: vec![key as u64, (key >> 64) as u64],
            },
        ],
    }
}

/// The frame `f` leaves as under `act`: the header (its destination rewritten first for a
/// rewriting action), the top 48 bits of SipHash-2-4 keyed with the key over that header and the
/// payload in its source MAC; and the port.
fn want(f: &[u8], (rw, port, key): Act) -> (u32, Vec<u8>) {
    let mut h: [u8; 14] = f[..14].try_into().unwrap();
    if rw {
        for (b, x) in h[..6].iter_mut().zip([0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f]) {
            *b ^= x;
        }
    }
    let msg = [&h[..], &f[14..]].concat();
    let mut d = [0u8; 8];
    hash::compute(HashAlg::SipHash24, &key.to_be_bytes(), &msg, &mut d).unwrap();
    h[6..12].copy_from_slice(&d[..6]);
    (port as u32, [&h[..], &f[14..]].concat())
}

fn frame(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(29) ^ seed.wrapping_mul(0x9e37)) as u8)
        .collect()
}

/// Hits on fwd and fwd_rw entries with keys that differ in both words, misses on other ports
/// (the default action, changed once), frames of 14 to 100 bytes, all in turn on one worker per
/// engine: every frame leaves with the digest and port its action says, alike on both engines.
#[test]
fn whole_frame_hashes_follow_the_table_on_both_engines() {
    let es = engines();
    let ti = es[0].table_index("I.port_key").unwrap();
    let key =
        |i: u128| 0x0011_2233_4455_6677_8899_aabb_ccdd_eeff ^ (i * 0x0123_4567_89ab_cdef) << 61;
    let held: Vec<(u16, Act)> = vec![
        (1, (false, 2, key(1))),
        (2, (true, 3, key(2))),
        (5, (false, 4, key(3))),
        (300, (true, 9, key(4))),
    ];
    for e in &es {
        for &(port, act) in &held {
            let entry = TableEntry {
                matches: vec![FieldMatch::Exact(Value::new(9, port as u64))],
                action: call(e, act),
                priority: 0,
            };
            e.table_insert(ti, entry).unwrap();
        }
    }
    let mut ws = [Worker::new(&es[0]), Worker::new(&es[1])];
    let mut default: Act = (false, 7, 0);
    let mut n = 0;
    for round in 0..2u32 {
        if round == 1 {
            default = (true, 6, key(9));
            for e in &es {
                e.table_set_default(ti, call(e, default)).unwrap();
            }
        }
        for len in [14usize, 15, 21, 22, 23, 60, 64, 100] {
            for port in [0u16, 1, 2, 3, 5, 300, 511, 2, 1] {
                let f = frame(len, round * 1000 + len as u32 + port as u32);
                let act = held
                    .iter()
                    .find(|(p, _)| *p == port)
                    .map_or(default, |&(_, a)| a);
                let mut got = vec![];
                for (e, w) in es.iter().zip(ws.iter_mut()) {
                    let mut o = Outputs::default();
                    e.process(w, port as u32, &f, &mut o);
                    let outs: Vec<(u32, Vec<u8>)> =
                        o.iter().map(|(p, b)| (p, b.to_vec())).collect();
                    got.push(outs);
                }
                assert_eq!(
                    got[0], got[1],
                    "closure vs native, port {port}, {len} bytes"
                );
                assert_eq!(got[0], vec![want(&f, act)], "port {port}, {len} bytes");
                n += 1;
            }
        }
    }
    assert_eq!(n, 2 * 8 * 9);
    for e in &es {
        assert_eq!(e.stats().extern_faults, 0);
    }
}

/// The frames of one engine's outputs.
fn frames_of(o: &Outputs) -> Vec<(u32, Vec<u8>)> {
    o.iter().map(|(p, b)| (p, b.to_vec())).collect()
}

/// Frames of every length from a bare header to 150 bytes (the lane's payload copies: under 8
/// bytes, two copies of 8, 16 or 32 bytes, over 64 through the vector), each into a fresh output
/// (buffers that must grow), into one output cleared between packets (room to spare: the copies
/// inline) and into one output kept across packets (the output swapped in): alike on both
/// engines and as computed here.
#[test]
fn every_payload_length_into_fresh_cleared_and_kept_outputs_on_both_engines() {
    let es = engines();
    let mut ws = [Worker::new(&es[0]), Worker::new(&es[1])];
    let mut cleared = [Outputs::default(), Outputs::default()];
    let mut kept = [Outputs::default(), Outputs::default()];
    let mut want_kept = vec![];
    for len in 14..=150usize {
        let f = frame(len, len as u32 * 7);
        let want1 = want(&f, (false, 7, 0));
        for (((e, w), c), k) in es.iter().zip(&mut ws).zip(&mut cleared).zip(&mut kept) {
            let mut o = Outputs::default();
            e.process(w, 3, &f, &mut o);
            assert_eq!(
                frames_of(&o),
                vec![want1.clone()],
                "{len} bytes, fresh output"
            );
            c.clear();
            e.process(w, 3, &f, c);
            assert_eq!(
                frames_of(c),
                vec![want1.clone()],
                "{len} bytes, cleared output"
            );
            e.process(w, 3, &f, k);
        }
        want_kept.push(want1);
    }
    for k in &kept {
        assert_eq!(frames_of(k), want_kept, "one output kept across packets");
    }
    for e in &es {
        assert_eq!(e.stats().extern_faults, 0);
    }
}
