//! The lane (`lane.rs`) against the closure engine: every uncommon case leaving it (drop in
//! ingress and egress, multicast, clones, resubmit, recirculate, truncate, a parser reject, an
//! output buffer that must grow, a table written between packets) gives the same frames and
//! counters, with one worker per engine kept across the packets.

use crate::testutil::{ipv4_packet, route, ROUTER};
use crate::{Backend, Engine, Outputs, Worker};
use std::sync::Arc;

const LANE: &str = r#"#include <v1model.p4>
header e_t { bit<8> kind; bit<8> n; bit<8> port; bit<8> x; }
header h_t { bit<16> a; }
struct hs { e_t e; h_t h; }
struct m { @field_list(1) bit<8> keep; }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start {
        p.extract(hdr.e);
        transition select(hdr.e.kind) { 1: more; 2: reject; default: accept; }
    }
    state more { p.extract(hdr.h); transition accept; }
}
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = (bit<9>)hdr.e.port;
        hdr.e.x = hdr.e.x + (bit<8>)sm.instance_type;
        if (hdr.e.n == 1) { mark_to_drop(sm); }
        if (hdr.e.n == 2) { sm.mcast_grp = 1; }
        if (hdr.e.n == 3) { clone(CloneType.I2E, 32w5); }
        if (hdr.e.n == 4 && sm.instance_type == 0) {
            meta.keep = 7;
            resubmit_preserving_field_list(1);
        }
        if (hdr.e.n == 4 && sm.instance_type != 0) { hdr.e.x = meta.keep; }
        if (hdr.e.n == 8) { truncate(32w3); }
    }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    apply {
        hdr.e.x = hdr.e.x + 16;
        if (hdr.e.n == 5 && sm.instance_type == 0) { recirculate_preserving_field_list(1); }
        if (hdr.e.n == 6) { mark_to_drop(sm); }
        if (hdr.e.n == 7 && sm.instance_type == 0) { clone(CloneType.E2E, 32w5); }
    }
}
control C(inout hs hdr, inout m meta) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.e); p.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;

/// The closure and native engines of `src`, with mirror session 5 (to port 9) and multicast
/// group 1 (ports 3 and 4).
fn engines(src: &str) -> (Engine, Engine) {
    let prog = Arc::new(
        p4sec_frontend::compile_str("test.p4", src, &Default::default())
            .unwrap_or_else(|e| panic!("{e}")),
    );
    let reg = crate::test_externs::registry();
    let mk = |b| {
        let e = Engine::with_backend(prog.clone(), &reg, b).unwrap();
        e.mirroring_add(5, 9);
        e.mc_group_set(1, &[(1, 3), (2, 4)]);
        e
    };
    let (a, b) = (mk(Backend::Closure), mk(Backend::Native));
    assert_eq!(b.backend(), Backend::Native);
    (a, b)
}

/// Frames of each packet (port and bytes), in order.
type Sent = Vec<Vec<(u32, Vec<u8>)>>;

/// `pkts` through one worker per engine kept across them (`between(i, engine)` runs before
/// packet `i` on each), each packet's outputs cleared before it unless `keep_outputs`: what each
/// packet sent (asserted equal on both engines, and the counters too).
fn run_seq(
    a: &Engine,
    b: &Engine,
    pkts: &[Vec<u8>],
    keep_outputs: bool,
    between: &dyn Fn(usize, &Engine),
) -> Sent {
    let mut sent = vec![];
    for e in [a, b] {
        let mut w = Worker::new(e);
        let mut o = Outputs::default();
        let mut got = vec![];
        for (i, p) in pkts.iter().enumerate() {
            between(i, e);
            let (n, len) = if keep_outputs {
                (o.len(), o.data.len())
            } else {
                o.clear();
                (0, 0)
            };
            e.process(&mut w, 1, p, &mut o);
            let frames: Vec<(u32, Vec<u8>)> =
                o.iter().skip(n).map(|(q, f)| (q, f.to_vec())).collect();
            assert!(o.data.len() >= len, "earlier frames kept");
            got.push(frames);
        }
        sent.push(got);
    }
    assert_eq!(sent[0], sent[1], "closure vs native");
    assert_eq!(a.stats(), b.stats(), "counters");
    sent.pop().unwrap()
}

fn pkt(kind: u8, n: u8, port: u8) -> Vec<u8> {
    let mut p = vec![kind, n, port, 0];
    if kind == 1 {
        p.extend([0xab, 0xcd]);
    }
    p.extend(b"payload");
    p
}

#[test]
fn every_uncommon_case_leaves_the_lane_as_the_general_path_runs_it() {
    let (a, b) = engines(LANE);
    assert!(b.controls.lane.is_some(), "the program has a lane");
    assert!(a.controls.lane.is_none(), "closures: no lane");
    let pkts = vec![
        pkt(1, 0, 2),               // 0: forwarded on the lane
        pkt(1, 1, 2),               // 1: dropped in ingress
        pkt(0, 2, 2),               // 2: multicast to 3 and 4
        pkt(1, 3, 2),               // 3: I2E clone to 9, the original to 2
        pkt(0, 4, 2),               // 4: resubmitted, then forwarded with `keep`
        pkt(1, 5, 2),               // 5: recirculated once
        pkt(0, 6, 2),               // 6: dropped in egress
        pkt(1, 7, 2),               // 7: E2E clone
        pkt(1, 8, 2),               // 8: truncated to 3 bytes
        pkt(2, 0, 2),               // 9: parser reject (e extracted, h not)
        pkt(1, 0, 2)[..5].to_vec(), // 10: out of packet inside h
        vec![],                     // 11: empty
        pkt(0, 0, 255),             // 12: to port 255
        pkt(1, 0, 3),               // 13: back on the lane
    ];
    let s = run_seq(&a, &b, &pkts, false, &|_, _| {});
    let one = |i: usize| {
        assert_eq!(s[i].len(), 1, "packet {i}: one frame");
        s[i][0].clone()
    };
    let mut p0 = pkt(1, 0, 2);
    p0[3] = 16;
    assert_eq!(one(0), (2, p0.clone()), "e.x: egress ran");
    assert!(s[1].is_empty());
    let ports: Vec<u32> = s[2].iter().map(|f| f.0).collect();
    assert_eq!(ports, vec![3, 4], "multicast");
    let ports: Vec<u32> = s[3].iter().map(|f| f.0).collect();
    assert_eq!(ports, vec![2, 9], "the original, then its clone");
    assert_eq!(one(4).1[3], 7 + 16, "resubmitted: the preserved field");
    assert_eq!(one(5).1[3], 4 + 16 + 16, "recirculated: instance type 4");
    assert!(s[6].is_empty(), "dropped in egress");
    assert_eq!(s[7].len(), 2, "E2E clone");
    assert_eq!(one(8).1.len(), 3, "truncated");
    assert_eq!(
        one(9).1.len(),
        4 + 7,
        "rejected: e then what the parser left"
    );
    assert_eq!(one(13).0, 3);
    let st = b.stats();
    assert_eq!(st.packets_in, pkts.len() as u64);
    assert_eq!(st.dropped, 2);
}

#[test]
fn a_program_without_egress_code_runs_the_lane_too() {
    let src = LANE.replace(
        "control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) {\n    apply {",
        "control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) {\n    apply { }\n    action unused() {",
    );
    let (a, b) = engines(&src);
    assert!(b.controls.lane.is_some(), "a lane");
    let pass = b.controls.native.pass.expect("a fused pass");
    assert!(pass.egress.is_none(), "no egress code");
    let pkts: Vec<Vec<u8>> = (0..12u8).map(|n| pkt(n % 3, n, 2)).collect();
    let s = run_seq(&a, &b, &pkts, false, &|_, _| {});
    assert_eq!(s[0], vec![(2, pkt(0, 0, 2))]);
}

#[test]
fn an_output_buffer_that_must_grow_and_frames_kept_across_packets() {
    let (a, b) = engines(LANE);
    // frames of a few hundred bytes into one output, never cleared: its buffer grows while the
    // deparser writes
    let pkts: Vec<Vec<u8>> = (0..300u32)
        .map(|i| {
            let mut p = pkt(1, [0, 0, 2, 3, 0][i as usize % 5], 2);
            p.extend(std::iter::repeat_n(i as u8, (i as usize * 7) % 700));
            p
        })
        .collect();
    let s = run_seq(&a, &b, &pkts, true, &|_, _| {});
    assert_eq!(s[1][0].1.len(), pkts[1].len());
}

#[test]
fn a_table_written_between_packets_is_seen_by_the_next() {
    let prog = Arc::new(p4sec_frontend::compile_str("r.p4", ROUTER, &Default::default()).unwrap());
    let reg = crate::test_externs::registry();
    let a = Engine::with_backend(prog.clone(), &reg, Backend::Closure).unwrap();
    let b = Engine::with_backend(prog, &reg, Backend::Native).unwrap();
    assert!(b.controls.lane.is_some(), "the router has a lane");
    for e in [&a, &b] {
        route(e, 0x0a000000, 8, 1);
    }
    let pkts: Vec<Vec<u8>> = (0..8u8)
        .map(|i| ipv4_packet([10, i % 2, 2, 3], 64 - i))
        .collect();
    let s = run_seq(&a, &b, &pkts, false, &|i, e| {
        if i == 4 {
            route(e, 0x0a010000, 16, 2);
        }
    });
    let ports: Vec<u32> = s.iter().map(|f| f[0].0).collect();
    assert_eq!(
        ports,
        vec![1, 1, 1, 1, 1, 2, 1, 2],
        "the new route from packet 4 on"
    );
}

#[test]
fn payloads_of_every_short_length_are_copied_whole() {
    let (a, b) = engines(LANE);
    // the lane copies tails of 8 to 32 bytes as two overlapping words, others with `memcpy`:
    // every length from nothing to past 32, each byte distinct
    let pkts: Vec<Vec<u8>> = (0..=40u8)
        .map(|n| {
            let mut p = vec![1, 0, 2, 0, 0xab, 0xcd];
            p.extend((0..n).map(|i| 0x80 | i));
            p
        })
        .collect();
    let s = run_seq(&a, &b, &pkts, true, &|_, _| {});
    for (p, f) in pkts.iter().zip(&s) {
        let mut want = p.clone();
        want[3] = 16;
        assert_eq!(f, &vec![(2, want)], "payload of {} bytes", p.len() - 6);
    }
}
