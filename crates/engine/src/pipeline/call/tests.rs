//! Tests of extern calls: planned arguments against the general path, faults, payload hand-over.

use crate::pipeline::call;
use crate::testutil::*;
use crate::*;
use p4sec_externs::iface::BitBuf;
use p4sec_ir::*;
use std::sync::Arc;

/// Extern argument layouts resolved at compile time ([`call::plan_arg`]) pack and unpack exactly
/// what the general path does, for random mixes of narrow, byte-aligned, wide and constant parts.
#[test]
fn planned_extern_arguments_match_the_general_path() {
    let e = engine(include_str!("../../../../../programs/ipv4_router.p4"));
    let mut w = Worker::new(&e);
    w.slots.resize(256, 0);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let (mut planned, mut general) = (0, 0);
    for round in 0..600 {
        let nparts = 1 + rnd() % 6;
        let (mut parts, mut locs, mut width, mut slot) = (vec![], vec![], 0u32, 0u32);
        let constants = round % 3 == 0;
        for _ in 0..nparts {
            let wd = match rnd() % 9 {
                0 | 1 => 8 * (1 + rnd() % 16) as u32, // whole bytes, up to 128 bits
                2 => 0,                               // bit<0>
                _ => 1 + (rnd() % 64) as u32,
            };
            let l = Loc { slot, width: wd };
            slot += wd.div_ceil(64);
            for k in 0..wd.div_ceil(64) {
                let left = wd - 64 * k;
                w.slots[(l.slot + k) as usize] = rnd()
                    & if left >= 64 {
                        u64::MAX
                    } else {
                        (1u64 << left) - 1
                    };
            }
            if constants && wd > 0 && wd <= 64 && rnd() % 2 == 0 {
                parts.push(Expr::Small {
                    value: rnd() & (u64::MAX >> (64 - wd)),
                    width: wd,
                });
            } else {
                parts.push(Expr::Load(LValue::Static(l)));
                locs.push(l);
            }
            width += wd;
        }
        // in: the bytes handed to the extern
        let a = ExternArg {
            dir: Direction::In,
            width,
            parts: parts.clone(),
            dsts: vec![],
        };
        let (mut g, mut p) = (BitBuf::default(), BitBuf::default());
        e.marshal_arg(&mut w, &a, &mut g);
        match call::plan_arg(&a) {
            Some(plan) => {
                plan.marshal(&w.slots, true, &mut p.bytes);
                assert_eq!(p.bytes, g.bytes, "round {round}: {parts:?}");
                planned += 1;
            }
            None => {
                // only wide fields off the byte grid have no plan
                assert!(
                    locs.iter().any(|l| l.width > 64),
                    "round {round}: no plan for {parts:?}"
                );
                general += 1;
            }
        }
        // out: random bytes split back into the fields
        if constants {
            continue;
        }
        let dsts: Vec<LValue> = locs.iter().map(|l| LValue::Static(*l)).collect();
        let a = ExternArg {
            dir: Direction::Out,
            width,
            parts: vec![],
            dsts,
        };
        let mut bytes: Vec<u8> = (0..width.div_ceil(8)).map(|_| rnd() as u8).collect();
        if let Some(b0) = bytes.first_mut() {
            *b0 &= 0xffu8 >> (width.div_ceil(8) * 8 - width);
        }
        let b = BitBuf { width, bytes };
        let before = w.slots.clone();
        e.write_back_arg(&mut w, &a, &b);
        let want = std::mem::replace(&mut w.slots, before);
        if let Some(plan) = call::plan_arg(&a) {
            plan.write(&b.bytes, &mut w.slots);
            assert_eq!(w.slots, want, "round {round}: write-back of {locs:?}");
        }
    }
    assert!(
        planned > 300 && general > 0,
        "{planned} planned, {general} general"
    );
}

/// An extern that hands an `out` argument back with the wrong length is a fault: the packet is
/// dropped and counted, nothing is written back, nothing panics (compiled and interpreted call
/// paths alike).
#[test]
fn an_extern_that_resizes_its_out_argument_is_a_fault() {
    let src = r#"
#include <v1model.p4>
extern void extern_shrink(out bit<32> d);
header h_t { bit<32> a; bit<32> b; }
struct hs { h_t h; }
struct m {}
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) { state start { p.extract(hdr.h); transition accept; } }
control V(inout hs hdr, inout m meta) { apply {} }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (hdr.h.b == 7) { extern_shrink(hdr.h.a); }
        else { hdr.h.a = 5; extern_shrink(hdr.h.b); }
    }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply {} }
control C(inout hs hdr, inout m meta) { apply {} }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;
    let e = engine(src);
    let mut w = Worker::new(&e);
    for b in [7u8, 9] {
        let mut out = Outputs::default();
        e.process(&mut w, 0, &[0, 0, 0, 1, 0, 0, 0, b, 0xee], &mut out);
        assert!(out.is_empty(), "b={b}: the packet went out");
    }
    assert_eq!(e.stats().extern_faults, 2);
}

/// `extern payload_room { payload_room(); void put(in bit<8> n); }` (tests only): the payload
/// handed back in a buffer of its own with `n` bytes (0xee) in front of it, as ESP encapsulation
/// and decapsulation do.
struct RoomType;
struct RoomObj;

impl p4sec_externs::iface::ExternType for RoomType {
    fn name(&self) -> &str {
        "payload_room"
    }
    fn instantiate(
        &self,
        _name: &str,
        _args: &[BitBuf],
    ) -> Result<Box<dyn p4sec_externs::iface::ExternObject>, String> {
        Ok(Box::new(RoomObj))
    }
}

impl p4sec_externs::iface::ExternObject for RoomObj {
    fn resolve(&self, sig: &p4sec_externs::iface::MethodSig) -> Result<u32, String> {
        match sig.args.as_slice() {
            [(p4sec_externs::iface::Dir::In, 8)] => Ok(0),
            _ => Err("payload_room.put takes (in bit<8> n)".into()),
        }
    }
    fn call(
        &self,
        _method: u32,
        args: &mut [BitBuf],
        _ret: Option<&mut BitBuf>,
        payload: &mut p4sec_externs::iface::Payload<'_>,
    ) -> Result<(), p4sec_externs::iface::ExternError> {
        let n = args[0].as_u64() as usize;
        let mut v = vec![0xee; n];
        v.extend_from_slice(payload.bytes());
        payload.swap_in_from(&mut v, n);
        Ok(())
    }
}

/// A payload an extern hands back with room in front of it: the deparser puts the headers there and
/// sends that buffer when the room suffices and the frame is the first in its output (else it
/// copies the payload after the headers as usual); multicast copies and a second frame in the same
/// output see the same bytes.
#[test]
fn payload_with_room_in_front_goes_out_unchanged() {
    let src = r#"#include <v1model.p4>
extern payload_room { payload_room(); void put(in bit<8> n); }
header h_t { bit<8> room; bit<8> grp; bit<16> x; }
struct hs { h_t h; }
struct m { }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) { state start { p.extract(hdr.h); transition accept; } }
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    payload_room() r;
    apply {
        r.put(hdr.h.room);
        sm.egress_spec = 1;
        if (hdr.h.grp != 0) { sm.mcast_grp = (bit<16>) hdr.h.grp; }
    }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { hdr.h.x = hdr.h.x + 1; } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), V(), D()) main;
"#;
    let prog = p4sec_frontend::compile_str("test.p4", src, &Default::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let mut reg = test_externs::registry();
    reg.push(Box::new(RoomType));
    let e = Engine::new(Arc::new(prog), &reg).unwrap();
    e.mc_group_set(1, &[(0, 2), (1, 3)]);
    let mut w = Worker::new(&e);
    let frame = |room: u8, grp: u8| -> Vec<u8> {
        [room, grp, 0x12, 0x34]
            .into_iter()
            .chain((0..100u8).map(|i| i ^ 0x5a))
            .collect()
    };
    let want = |f: &[u8]| -> Vec<u8> {
        [f[0], f[1], 0x12, 0x35]
            .into_iter()
            .chain(f[4..].iter().copied())
            .collect()
    };
    for room in [0u8, 1, 3, 4, 5, 64] {
        // one frame in the output: the buffer with room becomes the output when the 4 header bytes
        // fit
        let f = frame(room, 0);
        let mut out = Outputs::default();
        e.process(&mut w, 0, &f, &mut out);
        assert_eq!(
            out.iter().collect::<Vec<_>>(),
            vec![(1, &want(&f)[..])],
            "room {room}"
        );
        // a second frame into the same output goes after the first
        let g = frame(room, 0);
        e.process(&mut w, 0, &g, &mut out);
        assert_eq!(
            out.iter().map(|(p, b)| (p, b.to_vec())).collect::<Vec<_>>(),
            vec![(1, want(&f)), (1, want(&g))],
            "room {room}, two frames"
        );
        // multicast: each copy's payload taken from the buffer with room
        let h = frame(room, 1);
        let mut out = Outputs::default();
        e.process(&mut w, 0, &h, &mut out);
        assert_eq!(
            out.iter().map(|(p, b)| (p, b.to_vec())).collect::<Vec<_>>(),
            vec![(2, want(&h)), (3, want(&h))],
            "room {room}, multicast"
        );
    }
}
