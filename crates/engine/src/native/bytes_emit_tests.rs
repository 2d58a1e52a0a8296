//! The deparser's emit from the packet's bytes (`load::unwritten`, `Fx::words_from_bytes`): which
//! headers and fields the analysis lets it take from the bytes, and both backends agreeing frame
//! for frame, one worker each kept across packets, where the recorded offsets could be stale: a
//! clone whose parse took another path, multicast copies, a resubmission, packets that do not carry
//! the header.

use crate::load::unwritten::Unwritten;
use crate::Backend;
use crate::{Engine, Outputs, Worker};
use p4sec_ir::Program;
use std::sync::Arc;

const PROG: &str = r#"#include <v1model.p4>
header pad_t { bit<16> p; }
header e_t { bit<48> d; bit<48> s; bit<16> t; }
header v_t { bit<4> ver; bit<4> ihl; bit<8> tos; bit<16> len; bit<16> id; bit<3> fl; bit<13> fo;
             bit<8> ttl; bit<8> proto; bit<16> csum; bit<32> src; bit<32> dst; }
header o_t { bit<8> a; bit<8> b; bit<16> c; bit<32> d; bit<32> x; }
struct hs { pad_t pad; e_t e; v_t v; o_t o; }
struct m { @field_list(1) bit<8> path; }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start { transition select(meta.path) { 1: pad; default: eth; } }
    state pad { p.extract(hdr.pad); p.extract(hdr.e); p.extract(hdr.v); transition accept; }
    state eth { p.extract(hdr.e); transition select(hdr.e.t) { 0x0800: v; 0x9999: o; default: accept; } }
    state v { p.extract(hdr.v); transition select(hdr.v.proto) { 0x99: o; default: accept; } }
    state o { p.extract(hdr.o); transition accept; }
}
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 2;
        if (hdr.v.isValid()) {
            hdr.v.ttl = hdr.v.ttl - 1;
            if (hdr.v.tos == 7) { meta.path = 1; clone_preserving_field_list(CloneType.I2E, 5, 1); }
            if (hdr.v.tos == 8) { sm.mcast_grp = 3; }
            if (hdr.v.tos == 9 && sm.instance_type == 0) { resubmit_preserving_field_list(1); }
        }
        if (hdr.o.isValid()) { hdr.o.b = hdr.o.b + 1; }
    }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    apply { if (sm.instance_type != 0 && hdr.o.isValid()) { hdr.o.b = 0x42; } }
}
control C(inout hs hdr, inout m meta) {
    apply {
        update_checksum(hdr.v.isValid(), { hdr.v.ver, hdr.v.ihl, hdr.v.tos, hdr.v.len, hdr.v.id,
            hdr.v.fl, hdr.v.fo, hdr.v.ttl, hdr.v.proto, hdr.v.src, hdr.v.dst }, hdr.v.csum,
            HashAlgorithm.csum16);
    }
}
control D(packet_out p, in hs hdr) {
    apply { p.emit(hdr.pad); p.emit(hdr.e); p.emit(hdr.v); p.emit(hdr.o); }
}
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;

fn program(src: &str) -> Program {
    let mut p = p4sec_frontend::compile_str("test.p4", src, &Default::default())
        .unwrap_or_else(|e| panic!("{e}"));
    p.optimize();
    p
}

fn header(p: &Program, name: &str) -> usize {
    p.headers
        .iter()
        .position(|h| h.name.ends_with(name))
        .unwrap_or_else(|| panic!("no header {name}"))
}

fn field_slot(p: &Program, h: usize, name: &str) -> u32 {
    let f = p.headers[h].fields.iter().find(|f| f.name == name);
    f.unwrap_or_else(|| panic!("no field {name}")).loc.slot
}

#[test]
fn the_analysis_lists_the_fields_statements_write() {
    let p = program(PROG);
    let u = Unwritten::analyse(&p);
    let v = header(&p, ".v");
    // ttl by the ingress, csum by update_checksum: the other ten come from the bytes
    let mut want = [field_slot(&p, v, "ttl"), field_slot(&p, v, "csum")];
    want.sort_unstable();
    assert_eq!(u.written(v), Some(&want[..]));
    let o = header(&p, ".o");
    assert_eq!(u.written(o), Some(&[field_slot(&p, o, "b")][..]));
    let e = header(&p, ".e");
    assert_eq!(u.written(e), Some(&[][..]));
    // `setInvalid` leaves a header qualifying
    let invalid = PROG.replace(
        "if (hdr.o.isValid()) { hdr.o.b = hdr.o.b + 1; }",
        "if (hdr.o.isValid()) { hdr.o.setInvalid(); }",
    );
    let p1 = program(&invalid);
    assert!(Unwritten::analyse(&p1).written(header(&p1, ".o")).is_some());
    // a header made valid by `setValid` is built from its fields
    let set_valid = PROG.replace(
        "if (hdr.o.isValid()) { hdr.o.b = hdr.o.b + 1; }",
        "if (!hdr.o.isValid()) { hdr.o.setValid(); }",
    );
    let p2 = program(&set_valid);
    let u2 = Unwritten::analyse(&p2);
    assert_eq!(u2.written(header(&p2, ".o")), None);
    assert!(u2.written(header(&p2, ".v")).is_some());
    // a header copied into is built from its fields too
    let copy = PROG.replace(
        "if (hdr.o.isValid()) { hdr.o.b = hdr.o.b + 1; }",
        "hdr.o = hdr.o;",
    );
    let p3 = program(&copy);
    let u3 = Unwritten::analyse(&p3);
    if p3.headers.len() == p.headers.len() {
        // (the front end may fold a self-copy away entirely)
        let o3 = header(&p3, ".o");
        assert!(u3.written(o3).is_none_or(|w| w.is_empty()));
    }
}

#[test]
fn stacks_and_run_time_indexes_leave_nothing_to_the_bytes() {
    let stacked = r#"#include <v1model.p4>
header h_t { bit<8> v; bit<8> w; bit<16> x; bit<32> y; }
header k_t { bit<8> i; bit<8> a; bit<16> b; bit<32> c; bit<32> d; }
struct hs { k_t k; h_t[3] s; }
struct m { }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(hdr.k); p.extract(hdr.s.next); transition accept; }
}
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    apply { sm.egress_spec = 1; hdr.s[hdr.k.i].v = 3; }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs hdr, inout m meta) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.k); p.emit(hdr.s); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;
    let p = program(stacked);
    let u = Unwritten::analyse(&p);
    assert_eq!(
        u.headers().count(),
        0,
        "a run-time index may write any header"
    );
    // without the run-time index: the stack's elements still never qualify, `k` does
    let p2 = program(&stacked.replace("hdr.s[hdr.k.i].v = 3;", "hdr.s[1].v = 3;"));
    let u2 = Unwritten::analyse(&p2);
    let k = header(&p2, ".k");
    assert_eq!(u2.headers().collect::<Vec<_>>(), vec![k]);
}

#[test]
fn extern_results_and_hashes_count_as_writes() {
    let src = PROG.replace(
        "if (hdr.o.isValid()) { hdr.o.b = hdr.o.b + 1; }",
        "hash(hdr.o.d, HashAlgorithm.crc32, 32w0, { hdr.v.src }, 32w0xffffffff);",
    );
    let p = program(&src);
    let u = Unwritten::analyse(&p);
    let o = header(&p, ".o");
    // (`b` by the egress)
    let mut want = [field_slot(&p, o, "b"), field_slot(&p, o, "d")];
    want.sort_unstable();
    assert_eq!(u.written(o), Some(&want[..]));
}

/// Both engines, a worker and an output each kept across packets (as a switch keeps them: the
/// output's buffer has room, so the generated emit writes into it itself).
struct Pair {
    a: (Engine, Worker, Outputs),
    b: (Engine, Worker, Outputs),
}

impl Pair {
    fn new(src: &str) -> Pair {
        // the program as `p4sec compile` writes it (optimised)
        let prog = Arc::new(program(src));
        let reg = crate::test_externs::registry();
        let a = Engine::with_backend(prog.clone(), &reg, Backend::Closure).unwrap();
        let b = Engine::with_backend(prog, &reg, Backend::Native).unwrap();
        assert_eq!(b.backend(), Backend::Native);
        for e in [&a, &b] {
            e.mirroring_add(5, 7);
            e.mc_group_create(3).unwrap();
            e.mc_group_set(3, &[(1, 3), (2, 4)]);
        }
        let (wa, wb) = (Worker::new(&a), Worker::new(&b));
        let out = || {
            let mut o = Outputs::default();
            o.data.reserve(4096);
            o
        };
        Pair {
            a: (a, wa, out()),
            b: (b, wb, out()),
        }
    }

    /// Every frame of `pkt` from both engines (asserted equal): (port, bytes).
    fn run(&mut self, pkt: &[u8]) -> Vec<(u32, Vec<u8>)> {
        let mut got = vec![];
        for (e, w, o) in [&mut self.a, &mut self.b] {
            o.clear();
            e.process(w, 0, pkt, o);
            got.push(o.iter().map(|(p, f)| (p, f.to_vec())).collect::<Vec<_>>());
        }
        assert_eq!(got[0], got[1], "closure vs native for {pkt:02x?}");
        got.pop().unwrap()
    }
}

fn ipv4(tos: u8, proto: u8, ttl: u8) -> Vec<u8> {
    let mut p = vec![0xaa; 6];
    p.extend([0xbb; 6]);
    p.extend([0x08, 0x00]);
    p.extend([0x45, tos, 0, 46, 0x12, 0x34, 0x40, 0, ttl, proto, 0, 0]);
    p.extend([10, 1, 2, 3, 192, 168, 7, 9]);
    let c = crate::hash::csum16(&p[14..34]);
    p[24..26].copy_from_slice(&c.to_be_bytes());
    // `o` (when proto is 0x99) and a payload
    p.extend([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    p.extend(b"the payload");
    p
}

#[test]
fn unwritten_fields_come_from_the_bytes_and_written_ones_from_the_slots() {
    let mut t = Pair::new(PROG);
    let pkt = ipv4(0, 6, 64);
    let out = t.run(&pkt);
    assert_eq!(out.len(), 1);
    let (port, f) = &out[0];
    assert_eq!(*port, 2);
    assert_eq!(f.len(), pkt.len());
    let mut want = pkt.clone();
    want[22] = 63;
    want[24] = 0;
    want[25] = 0;
    let c = crate::hash::csum16(&want[14..34]);
    want[24..26].copy_from_slice(&c.to_be_bytes());
    assert_eq!(f, &want);
    // `o` after `v`: its written field from its slot, the rest and the payload from the bytes
    let pkt = ipv4(0, 0x99, 9);
    let f = &t.run(&pkt)[0].1;
    assert_eq!(&f[34..46], &[1, 3, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    assert_eq!(&f[46..], b"the payload");
}

#[test]
fn a_clone_parsed_on_another_path_leaves_no_stale_offsets() {
    let mut t = Pair::new(PROG);
    // (a few rounds: the workers' buffers grown by the first)
    for ttl in [30u8, 31, 32] {
        // the clone's parse (its `path` preserved) extracts `pad` first: `e` and `v` two bytes on
        let out = t.run(&ipv4(7, 0x99, ttl));
        assert_eq!(out.len(), 2, "{out:02x?}");
        let orig = out.iter().find(|(p, _)| *p == 2).expect("the original");
        let clone = out.iter().find(|(p, _)| *p == 7).expect("the clone");
        assert_eq!(clone.1.len(), orig.1.len());
        // the original's headers as it was parsed (the clone's parse recorded other offsets)
        let mut want = ipv4(7, 0x99, ttl - 1);
        want[35] = 3;
        assert_eq!(orig.1, want);
    }
}

#[test]
fn multicast_resubmit_and_packets_without_the_header_agree() {
    let mut t = Pair::new(PROG);
    let mc = t.run(&ipv4(8, 0x99, 5));
    assert_eq!(mc.len(), 2);
    assert!(mc.iter().all(|(_, f)| f[22] == 4 && f[35] == 0x42));
    let rs = t.run(&ipv4(9, 6, 5));
    assert_eq!(rs.len(), 1);
    // the resubmitted packet is the one received: decremented once, in the second pass
    assert_eq!(rs[0].1[22], 4);
    // not IPv4, then IPv4 again, on the same workers
    let mut other = vec![0x11; 12];
    other.extend([0x99, 0x99, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    let f = &t.run(&other)[0].1;
    assert_eq!(&f[14..16], &[1, 3]);
    for ttl in [0u8, 1, 2, 255] {
        for tos in [0u8, 7, 8, 9] {
            t.run(&ipv4(tos, 0x99, ttl));
            t.run(&ipv4(tos, 6, ttl));
        }
    }
    // short packets: the header's bytes not all there
    for n in 0..ipv4(0, 0x99, 1).len() {
        t.run(&ipv4(0, 0x99, 1)[..n]);
    }
}
