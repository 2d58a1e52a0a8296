//! Tests of the v1model passes: a packet through the router, statistics over workers.

use crate::testutil::*;
use crate::*;

#[test]
fn router_lpm_ttl_and_checksum() {
    let e = engine(ROUTER);
    route(&e, 0x0a000000, 8, 1);
    route(&e, 0x0a010000, 16, 2);
    let mut w = Worker::new(&e);
    let mut out = Outputs::default();
    e.process(&mut w, 0, &ipv4_packet([10, 1, 2, 3], 64), &mut out);
    e.process(&mut w, 0, &ipv4_packet([10, 2, 2, 3], 64), &mut out);
    e.process(&mut w, 0, &ipv4_packet([11, 2, 2, 3], 64), &mut out); // no route: dropped
    e.process(&mut w, 0, &ipv4_packet([10, 1, 2, 3], 1), &mut out); // ttl 1: dropped
    let frames: Vec<(u32, Vec<u8>)> = out.iter().map(|(p, b)| (p, b.to_vec())).collect();
    assert_eq!(frames.len(), 2);
    assert_eq!(frames[0].0, 2, "longest prefix wins");
    assert_eq!(frames[1].0, 1);
    let f = &frames[0].1;
    assert_eq!(&f[0..6], &[0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff]);
    assert_eq!(f[22], 63, "ttl decremented");
    assert_eq!(hash::csum16(&f[14..34]), 0, "checksum recomputed");
    assert_eq!(f.len(), 40, "payload kept");
}

#[test]
fn stats_are_summed_over_workers() {
    let e = engine(ROUTER);
    route(&e, 0x0a000000, 8, 1);
    let (mut a, mut b) = (Worker::new(&e), Worker::new(&e));
    let mut out = Outputs::default();
    e.process(&mut a, 0, &ipv4_packet([10, 1, 2, 3], 64), &mut out);
    e.process(&mut b, 0, &ipv4_packet([10, 1, 2, 3], 64), &mut out);
    e.process(&mut b, 0, &ipv4_packet([12, 1, 2, 3], 64), &mut out);
    let s = e.stats();
    assert_eq!((s.packets_in, s.packets_out, s.dropped), (3, 2, 1));
}

/// A run-time loop that never ends is stopped after `MAX_LOOP_STEPS` iterations of the pass: the
/// packet is dropped and counted, the worker goes on with the next packet, whose loops start with
/// a fresh budget (two loops of 600k iterations each stay under it together only per packet).
#[test]
fn a_loop_that_never_ends_drops_its_packet() {
    let e = engine(&one_header_program(
        "bit<8> step; bit<32> n; bit<32> r;",
        "apply {
            sm.egress_spec = 1;
            for (bit<8> i = 0; i != 9; i = i + hdr.h.step) { }
            for (bit<32> k = 0; k < hdr.h.n; k = k + 1) { hdr.h.r = hdr.h.r + 1; }
        }",
    ));
    let mut w = Worker::new(&e);
    let mut out = Outputs::default();
    e.process(&mut w, 0, &[0, 0, 0, 0, 1, 0, 0, 0, 0], &mut out);
    assert!(out.is_empty(), "the packet of the endless loop went out");
    assert_eq!(e.stats().loop_limit, 1);
    // 9 steps of the first loop and 600,000 of the second: under the budget, in each of two packets
    for _ in 0..2 {
        let mut out = Outputs::default();
        e.process(&mut w, 0, &[1, 0, 0x09, 0x27, 0xc0, 0, 0, 0, 0], &mut out);
        let f = out.iter().next().expect("the packet went out");
        assert_eq!(&f.1[5..9], &[0, 0x09, 0x27, 0xc0]);
    }
    assert_eq!(e.stats().loop_limit, 1);
}
