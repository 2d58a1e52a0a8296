//! Extern calls the native code makes itself (`native/stmt/extern_calls.rs`, [`super::direct`]) against
//! the closures' paths: the same frames for narrow, concatenated, `inout`, wide and constant
//! arguments and narrow and wide return values, results read by the statements after the call, a
//! failing extern counted and dropped alike, a panicking one's panic carried out alike, and call
//! sites the extern binds for itself.

use crate::load::compile::{self, Cx};
use crate::{Backend, Engine, Outputs, Worker};
use p4sec_externs::iface::{
    BitBuf, BoundArg, BoundCall, Dir, ExternError, ExternObject, ExternType, MethodSig, Payload,
};
use p4sec_externs::layout::ArgLayout;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// `extern mixer { mixer(); ... }` (tests only): `mix` combines its arguments into each result
/// (every result depends on every input bit), `fail(how)` fails (1), panics (2), hands its
/// `out` argument back resized (3) or sets it to `how + 1`, `widen` returns a value wider than 64
/// bits, and `twice` is bound for itself when its call site is planned (`y = 2 * x`, a fault when
/// `x` is 0xdead), `thrice` (not bound) `y = 3 * x`; `widen(0xee)` and `shrink_ret(1)` hand
/// their return values back resized, `shrink_ret(x)` is `x ^ 0x5a` otherwise.
struct MixerType;
struct Mixer;

fn mix_bytes(seed: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(seed, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3).rotate_left(5)
    })
}

fn resize_err(wd: u32, b: &BitBuf) -> Result<(), ExternError> {
    if b.bytes.len() != wd.div_ceil(8) as usize {
        return Err(ExternError::BadArgument(format!("{} bytes", b.bytes.len())));
    }
    Ok(())
}

impl ExternType for MixerType {
    fn name(&self) -> &str {
        "mixer"
    }
    fn instantiate(&self, _: &str, _: &[BitBuf]) -> Result<Box<dyn ExternObject>, String> {
        Ok(Box::new(Mixer))
    }
}

struct Twice {
    x: ArgLayout,
    y: ArgLayout,
}

impl BoundCall for Twice {
    fn call(&self, slots: &mut [u64], _: &mut Payload<'_>) -> Result<(), ExternError> {
        let mut b = [0u8; 2];
        self.x.read(slots, &mut b);
        let x = u16::from_be_bytes(b);
        if x == 0xdead {
            return Err(ExternError::Failed("twice: 0xdead".into()));
        }
        self.y.write(&x.wrapping_mul(2).to_be_bytes(), slots);
        Ok(())
    }
}

impl ExternObject for Mixer {
    fn resolve(&self, sig: &MethodSig) -> Result<u32, String> {
        Ok(match sig.name.as_str() {
            "mix" => 0,
            "fail" => 1,
            "widen" => 2,
            "twice" => 3,
            "thrice" => 4,
            "shrink_ret" => 5,
            m => return Err(format!("mixer: no method {m}")),
        })
    }
    fn call(
        &self,
        method: u32,
        args: &mut [BitBuf],
        ret: Option<&mut BitBuf>,
        _: &mut Payload<'_>,
    ) -> Result<(), ExternError> {
        for a in args.iter() {
            resize_err(a.width, a)?;
        }
        match method {
            0 => {
                let h = args
                    .iter()
                    .fold(7, |h, a| mix_bytes(h ^ a.width as u64, &a.bytes));
                for (i, a) in args.iter_mut().enumerate() {
                    let v: Vec<u8> = (0..a.bytes.len())
                        .map(|k| (h >> ((k + i) % 8 * 8)) as u8 ^ k as u8)
                        .collect();
                    // only the results change: `in` arguments are handed back as they came
                    if i >= 2 {
                        a.set_bytes(&v);
                    }
                }
                if let Some(r) = ret {
                    r.set_u64(h.rotate_left(17));
                }
            }
            1 => match args[0].as_u64() {
                1 => return Err(ExternError::Failed("mixer: told to fail".into())),
                2 => panic!("mixer: told to panic"),
                3 => args[1].bytes.push(0),
                how => args[1].set_u64(how + 1),
            },
            2 => {
                let x = args[0].as_u64() as u8;
                if let Some(r) = ret {
                    let v: Vec<u8> = (0..r.bytes.len()).map(|k| x ^ (k as u8 * 29)).collect();
                    r.set_bytes(&v);
                    if x == 0xee {
                        r.bytes.push(0);
                    }
                }
            }
            5 => {
                let x = args[0].as_u64() as u8;
                if let Some(r) = ret {
                    match x {
                        1 => r.bytes.clear(),
                        _ => r.set_u64((x ^ 0x5a) as u64),
                    }
                }
            }
            3 => {
                let x = args[0].as_u64() as u16;
                if x == 0xdead {
                    return Err(ExternError::Failed("twice: 0xdead".into()));
                }
                args[1].set_u64(x.wrapping_mul(2) as u64);
            }
            _ => {
                let x = args[0].as_u64() as u16;
                args[1].set_u64(x.wrapping_mul(3) as u64);
            }
        }
        Ok(())
    }
    fn bind(
        &self,
        method: u32,
        args: &[BoundArg<'_>],
        _: Option<&ArgLayout>,
    ) -> Option<Box<dyn BoundCall>> {
        match (method, args) {
            (3, [x, y]) if x.dir == Dir::In && y.layout.nbytes() == 2 => Some(Box::new(Twice {
                x: x.layout.clone(),
                y: y.layout.clone(),
            })),
            _ => None,
        }
    }
}

const SRC: &str = r#"
#include <v1model.p4>
struct pair_t { bit<8> hi; bit<8> lo; }
extern mixer {
    mixer();
    bit<32> mix(in bit<8> a, in bit<40> b, inout bit<16> c, out bit<12> d, in bit<128> k, out bit<72> wide);
    void fail(in bit<8> how, out bit<8> r);
    bit<100> widen(in bit<8> x);
    void twice(in bit<16> x, out bit<16> y);
    void thrice(in pair_t x, out pair_t y);
    bit<8> shrink_ret(in bit<8> x);
}
header h_t {
    bit<8> op; bit<8> a; bit<32> b; bit<16> c; bit<12> d; bit<4> e; bit<128> k; bit<72> wide;
    bit<32> r; bit<8> after; bit<100> w100; bit<4> pad; bit<16> t;
}
struct hs { h_t h; }
struct m { pair_t p; pair_t q; }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control V(inout hs hdr, inout m meta) { apply {} }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    mixer() x;
    apply {
        sm.egress_spec = 1;
        if (hdr.h.op == 0) {
            // narrow arguments: an expression, a concatenation, an inout field, split results
            hdr.h.r = x.mix(hdr.h.a + 3, hdr.h.e ++ 4w9 ++ hdr.h.b, hdr.h.c, hdr.h.d, hdr.h.k, hdr.h.wide);
            // the results read after the call
            if (hdr.h.d[0:0] == 1) { hdr.h.after = hdr.h.r[7:0] + (bit<8>)hdr.h.c; }
            else { hdr.h.after = 0xaa; }
        } else if (hdr.h.op == 1) {
            // a wide constant and wide results
            hdr.h.r = x.mix(hdr.h.a, 40w0x123456789a, hdr.h.c, hdr.h.d, 128w0x0102030405060708090a0b0c0d0e0f10, hdr.h.wide);
            hdr.h.w100 = x.widen(hdr.h.after);
        } else if (hdr.h.op == 2) {
            x.fail(hdr.h.a, hdr.h.after);
            hdr.h.r = (bit<32>)hdr.h.after + 1;
        } else if (hdr.h.op == 3) {
            x.twice(hdr.h.t, hdr.h.t);
            hdr.h.after = hdr.h.t[15:8];
        } else if (hdr.h.op == 5) {
            // return values handed back resized: a narrow one (a == 1), a wide one (after == 0xee)
            hdr.h.after = x.shrink_ret(hdr.h.a);
            hdr.h.w100 = x.widen(hdr.h.after);
        } else {
            // a struct in and out (several parts, several destinations), read back after
            meta.p.hi = hdr.h.t[15:8];
            meta.p.lo = hdr.h.t[7:0];
            x.thrice(meta.p, meta.q);
            hdr.h.after = meta.q.lo ^ meta.q.hi;
            hdr.h.t = meta.q.lo ++ meta.q.hi;
        }
    }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply {} }
control C(inout hs hdr, inout m meta) { apply {} }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;

/// Byte offsets in the frame of `r` (`after` follows it) and `t`.
const R: usize = 35;
const AFTER: usize = 39;
const T: usize = 53;

fn registry() -> Vec<Box<dyn ExternType>> {
    let mut r = crate::test_externs::registry();
    r.push(Box::new(MixerType));
    r
}

fn engines() -> (Engine, Engine) {
    let prog = Arc::new(
        p4sec_frontend::compile_str("test.p4", SRC, &Default::default())
            .unwrap_or_else(|e| panic!("{e}")),
    );
    let a = Engine::with_backend(prog.clone(), &registry(), Backend::Closure).unwrap();
    let b = Engine::with_backend(prog, &registry(), Backend::Native).unwrap();
    assert_eq!(b.backend(), Backend::Native);
    (a, b)
}

/// What one engine makes of `pkt`: the frame out (`None`: dropped), or the panic's message.
fn outcome(e: &Engine, pkt: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let mut w = Worker::new(e);
    let mut o = Outputs::default();
    catch_unwind(AssertUnwindSafe(|| e.process(&mut w, 0, pkt, &mut o)))
        .map(|_| o.iter().map(|(_, f)| f.to_vec()).next())
        .map_err(|p| {
            p.downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default()
        })
}

/// Both engines on `pkt`: the same outcome, returned.
fn both(a: &Engine, b: &Engine, pkt: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let (x, y) = (outcome(a, pkt), outcome(b, pkt));
    assert_eq!(x, y, "closure vs native for {pkt:02x?}");
    x
}

fn frame(op: u8, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut f: Vec<u8> = (0..60)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    f[0] = op;
    f
}

/// Every extern call site of a program is translated: no more statements left on their closures
/// than without the calls.
#[test]
fn extern_calls_are_translated() {
    let src = r#"
#include <v1model.p4>
struct pair_t { bit<8> hi; bit<8> lo; }
extern mixer {
    mixer();
    void fail(in bit<8> how, out bit<8> r);
    void thrice(in pair_t x, out pair_t y);
    bit<8> shrink_ret(in bit<8> x);
}
header h_t { bit<8> a; bit<8> b; bit<16> t; bit<64> z; }
struct hs { h_t h; }
struct m { pair_t p; pair_t q; }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control V(inout hs hdr, inout m meta) { apply {} }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    mixer() x;
    apply {
        x.fail(hdr.h.a, hdr.h.b);
        if (hdr.h.b == 3) { x.thrice(meta.p, meta.q); }
        hdr.h.t = meta.q.lo ++ meta.q.hi;
    }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply {} }
control C(inout hs hdr, inout m meta) { apply {} }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;
    let coverage = |src: &str| {
        let mut prog = p4sec_frontend::compile_str("test.p4", src, &Default::default()).unwrap();
        prog.optimize();
        let cx = Cx {
            prog: &prog,
            externs: &[],
            methods: &[],
            pristine: &Default::default(),
        };
        let mut code = compile::compile(&cx);
        crate::native::compile(&cx, &mut code).expect("a code generator")
    };
    let with = coverage(src);
    let without = coverage(
        &src.replace("x.fail(hdr.h.a, hdr.h.b);", "")
            .replace("x.thrice(meta.p, meta.q);", ""),
    );
    assert_eq!(with.fallback, without.fallback, "{with:?} / {without:?}");
    assert_eq!(with.inline, without.inline + 2, "{with:?} / {without:?}");
}

#[test]
fn narrow_and_wide_arguments_give_the_closures_results() {
    let (a, b) = engines();
    let mut seen = std::collections::HashSet::new();
    for seed in 0..200u64 {
        for op in [0u8, 1, 3, 4] {
            let mut f = frame(op, seed * 7919 + op as u64);
            if f[AFTER] == 0xee {
                // widen(0xee) resizes its result (a fault, tested below)
                f[AFTER] = 0;
            }
            let out = both(&a, &b, &f).expect("no panic").expect("forwarded");
            assert_eq!(out.len(), f.len());
            seen.insert((op, out[1..].to_vec()));
            if op == 0 {
                // the call's results are in the frame and were read after it
                assert_ne!(&out[1..], &f[1..], "op 0 changed nothing");
            }
        }
    }
    assert_eq!(seen.len(), 800, "every frame its own result");
    // `twice` bound for itself: y = 2 * x (in place, then read after the call)
    let mut f = frame(3, 5);
    f[T..T + 2].copy_from_slice(&0x1234u16.to_be_bytes());
    let out = both(&a, &b, &f).unwrap().unwrap();
    assert_eq!((&out[T..T + 2], out[AFTER]), (&[0x24, 0x68][..], 0x24));
    // `thrice` on a struct: y = 3 * x = 0x369c, split into q.hi and q.lo, read back swapped
    f[0] = 4;
    let out = both(&a, &b, &f).unwrap().unwrap();
    assert_eq!(
        (&out[T..T + 2], out[AFTER]),
        (&[0x9c, 0x36][..], 0x9c ^ 0x36)
    );
}

#[test]
fn a_failing_extern_is_a_fault_on_both_engines() {
    let (a, b) = engines();
    for e in [&a, &b] {
        let mut f = frame(2, 3);
        f[1] = 1;
        assert_eq!(outcome(e, &f), Ok(None), "told to fail: dropped");
        f[1] = 3;
        assert_eq!(outcome(e, &f), Ok(None), "a resized out argument: dropped");
        f[1] = 9;
        let out = outcome(e, &f).unwrap().expect("forwarded");
        assert_eq!(out[1], 9);
        assert_eq!(out[6..8], f[6..8]);
        // r = after + 1 where after = how + 1
        assert_eq!(&out[R..R + 5], &[0, 0, 0, 11, 10]);
        // a bound call that fails
        let mut f = frame(3, 4);
        f[T..T + 2].copy_from_slice(&0xdeadu16.to_be_bytes());
        assert_eq!(outcome(e, &f), Ok(None), "0xdead: dropped");
        // resized return values, narrow and wide
        let mut f = frame(5, 6);
        f[1] = 1;
        assert_eq!(outcome(e, &f), Ok(None), "a narrow return value resized");
        f[1] = 0xee ^ 0x5a;
        assert_eq!(outcome(e, &f), Ok(None), "a wide return value resized");
        f[1] = 2;
        let out = outcome(e, &f).unwrap().expect("forwarded");
        assert_eq!(out[AFTER], 2 ^ 0x5a);
        assert_eq!(e.stats().extern_faults, 5);
    }
}

#[test]
fn a_panicking_extern_panics_alike() {
    let (a, b) = engines();
    let mut f = frame(2, 3);
    f[1] = 2;
    assert_eq!(both(&a, &b, &f), Err("mixer: told to panic".to_string()));
    // the engines still work after it
    f[1] = 0;
    assert!(both(&a, &b, &f).unwrap().is_some());
}
