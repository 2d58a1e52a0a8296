//! Call sites an extern binds for itself, on both engines: what the bound call sees of the payload
//! (the received packet's bytes, or the worker's buffer once an extern rewrote it), when the engine
//! vouches for a header argument (only while the header holds the bytes in front of the payload),
//! and failing and panicking bound calls, with the same frames and faults on both engines.

use crate::{Backend, Engine, Outputs, Worker};
use p4sec_externs::iface::{
    BitBuf, BoundArg, BoundCall, ExternError, ExternObject, ExternType, MethodSig, Payload,
};
use p4sec_externs::layout::ArgLayout;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// `extern spy { look(in h_t h, out bit<16> r); poke(in bit<8> v); }` (tests only). `look`, bound
/// for itself, writes `r` = flags << 8 | a digest (low byte) of `h ++ payload`; flags: 1 the engine
/// vouched for `h`, 2 the payload is still the received packet's bytes, 4 the engine vouched but
/// the bytes in front of the payload are not `h` (must never be seen). A payload starting with
/// 0xff fails the call, with 0xfe panics it. `poke(v)` rewrites the payload (its first byte xor
/// `v`, and one more byte), so that it is no longer the packet's.
struct SpyType;
struct Spy;

struct Look {
    h: ArgLayout,
    r: ArgLayout,
}

fn digest(bytes: impl IntoIterator<Item = u8>) -> u8 {
    bytes.into_iter().fold(0x1234_5678u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3).rotate_left(7)
    }) as u8
}

impl BoundCall for Look {
    fn call(&self, slots: &mut [u64], payload: &mut Payload<'_>) -> Result<(), ExternError> {
        let n = self.h.nbytes();
        let mut h = [0u8; 14];
        self.h.read(slots, &mut h[..n]);
        match payload.bytes().first() {
            Some(0xff) => return Err(ExternError::Failed("look: told to fail".into())),
            Some(0xfe) => panic!("look: told to panic"),
            _ => {}
        }
        let vouched = payload.prefix_vouched(n);
        let lie = vouched && payload.with_bytes_before(n).map(|(b, _)| b) != Some(&h[..n]);
        let flags = vouched as u16 | (payload.is_in_packet() as u16) << 1 | (lie as u16) << 2;
        let d = digest(h[..n].iter().chain(payload.bytes()).copied());
        self.r.write(&(flags << 8 | d as u16).to_be_bytes(), slots);
        Ok(())
    }
}

impl ExternType for SpyType {
    fn name(&self) -> &str {
        "spy"
    }
    fn instantiate(&self, _: &str, _: &[BitBuf]) -> Result<Box<dyn ExternObject>, String> {
        Ok(Box::new(Spy))
    }
}

impl ExternObject for Spy {
    fn resolve(&self, sig: &MethodSig) -> Result<u32, String> {
        match sig.name.as_str() {
            "look" => Ok(0),
            "poke" => Ok(1),
            m => Err(format!("spy: no method {m}")),
        }
    }
    fn call(
        &self,
        method: u32,
        args: &mut [BitBuf],
        _: Option<&mut BitBuf>,
        payload: &mut Payload<'_>,
    ) -> Result<(), ExternError> {
        match method {
            1 => {
                let v = payload.vec_mut();
                if let Some(b) = v.first_mut() {
                    *b ^= args[0].as_u64() as u8;
                }
                v.push(0x5c);
                Ok(())
            }
            _ => Err(ExternError::Failed("spy: look is only called bound".into())),
        }
    }
    fn bind(
        &self,
        method: u32,
        args: &[BoundArg<'_>],
        _: Option<&ArgLayout>,
    ) -> Option<Box<dyn BoundCall>> {
        match (method, args) {
            (0, [h, r]) if h.layout.nbytes() <= 14 && r.layout.nbytes() == 2 => {
                Some(Box::new(Look {
                    h: h.layout.clone(),
                    r: r.layout.clone(),
                }))
            }
            _ => None,
        }
    }
}

/// Ether type 1: `look` at the header as extracted (vouched for); 2: after the program wrote it
/// (the site is not vouched for); 3: after `poke` rewrote the payload (vouched for by the
/// analysis, but the payload is no longer the packet's). The result lands in the source MAC.
const SRC: &str = r#"
#include <v1model.p4>
header h_t { bit<48> dst; bit<48> src; bit<16> type; }
extern spy {
    spy();
    void look(in h_t h, out bit<16> r);
    void poke(in bit<8> v);
}
struct hs { h_t h; }
struct m { bit<16> r; }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control V(inout hs hdr, inout m meta) { apply {} }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    spy() x;
    apply {
        sm.egress_spec = 1;
        if (hdr.h.type == 1) {
            x.look(hdr.h, meta.r);
        } else if (hdr.h.type == 2) {
            hdr.h.dst = hdr.h.dst ^ 48w0x0102030405;
            x.look(hdr.h, meta.r);
        } else if (hdr.h.type == 3) {
            x.poke(hdr.h.src[7:0]);
            x.look(hdr.h, meta.r);
        }
        hdr.h.src = meta.r ++ 32w0;
    }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply {} }
control C(inout hs hdr, inout m meta) { apply {} }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;

fn engines() -> (Engine, Engine) {
    let prog = Arc::new(
        p4sec_frontend::compile_str("spy.p4", SRC, &Default::default())
            .unwrap_or_else(|e| panic!("{e}")),
    );
    let mut reg = crate::test_externs::registry();
    reg.push(Box::new(SpyType));
    let a = Engine::with_backend(prog.clone(), &reg, Backend::Closure).unwrap();
    let b = Engine::with_backend(prog, &reg, Backend::Native).unwrap();
    assert_eq!(b.backend(), Backend::Native);
    (a, b)
}

/// What one engine makes of `pkt` (on a worker that carries over from the packets before): the
/// frame out (`None`: dropped), or the panic's message.
fn outcome(e: &Engine, w: &mut Worker, pkt: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let mut o = Outputs::default();
    catch_unwind(AssertUnwindSafe(|| e.process(w, 0, pkt, &mut o)))
        .map(|_| o.iter().map(|(_, f)| f.to_vec()).next())
        .map_err(|p| {
            p.downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default()
        })
}

fn frame(ty: u8, len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut f: Vec<u8> = (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    f[12..14].copy_from_slice(&[0, ty]);
    if let Some(b) = f.get_mut(14) {
        // 0xff and 0xfe fail and panic the call: tested on their own (`poke` xors in f[11])
        *b &= 0x7f;
        f[11] &= 0x7f;
    }
    f
}

/// The frame `look` leaves for `f` (ether type `ty`): its flags and the digest over the header and
/// payload it saw, in the source MAC; `poke`'s rewrite of the payload for type 3.
fn expected(f: &[u8], ty: u8) -> Vec<u8> {
    let mut h = f[..14].to_vec();
    let mut payload = f[14..].to_vec();
    let flags: u8 = match ty {
        1 => 3,
        2 => {
            for (b, x) in h[1..6].iter_mut().zip([1u8, 2, 3, 4, 5]) {
                *b ^= x;
            }
            2
        }
        _ => {
            if let Some(b) = payload.first_mut() {
                *b ^= f[11];
            }
            payload.push(0x5c);
            0
        }
    };
    let d = digest(h.iter().chain(&payload).copied());
    h[6..12].copy_from_slice(&[flags, d, 0, 0, 0, 0]);
    [h, payload].concat()
}

/// The payload as the packet's bytes (vouched for, and not), and as the worker's buffer after a
/// rewrite, for frames from a bare header to 100 bytes, in every order on one worker per engine:
/// both engines give the frames `look` should see, and the engine never vouches for a header that
/// is not the bytes in front of the payload.
#[test]
fn a_bound_call_sees_the_payload_and_vouches_alike_on_both_engines() {
    let (a, b) = engines();
    let (mut wa, mut wb) = (Worker::new(&a), Worker::new(&b));
    let mut n = 0;
    for seed in 0..40u64 {
        for len in [14usize, 15, 22, 60, 64, 100] {
            for ty in [1u8, 2, 3, 1, 3, 2] {
                let f = frame(ty, len, seed * 131 + len as u64);
                let mut want = expected(&f, ty);
                let x = outcome(&a, &mut wa, &f);
                let y = outcome(&b, &mut wb, &f);
                assert_eq!(x, y, "closure vs native, type {ty}, {f:02x?}");
                if ty == 1 && len < 22 {
                    // the parser's fast path (which records the header's offset, the vouch's
                    // ground) needs 8 bytes of slack after the header: without them, no vouch
                    want[6] = 2;
                }
                assert_eq!(x, Ok(Some(want)), "type {ty}, {f:02x?}");
                n += 1;
            }
        }
    }
    assert_eq!(n, 40 * 6 * 6);
    assert_eq!((a.stats().extern_faults, b.stats().extern_faults), (0, 0));
}

/// A bound call that fails drops the packet and is counted, one that panics panics alike, on both
/// engines, with the payload in the packet (type 1) and in the worker's buffer (type 3); the
/// engines go on working after either.
#[test]
fn a_failing_or_panicking_bound_call_behaves_alike_on_both_engines() {
    let (a, b) = engines();
    for e in [&a, &b] {
        let mut w = Worker::new(e);
        for ty in [1u8, 3] {
            let mut f = frame(ty, 60, 9);
            // type 3 pokes the payload's first byte with the source MAC's last byte first
            let poke = if ty == 3 { f[11] } else { 0 };
            f[14] = 0xff ^ poke;
            assert_eq!(outcome(e, &mut w, &f), Ok(None), "type {ty}: told to fail");
            f[14] = 0xfe ^ poke;
            assert_eq!(
                outcome(e, &mut w, &f),
                Err("look: told to panic".to_string()),
                "type {ty}"
            );
            f[14] = 0x10;
            let want = expected(&f, ty);
            assert_eq!(
                outcome(e, &mut w, &f),
                Ok(Some(want)),
                "type {ty} after them"
            );
        }
        assert_eq!(e.stats().extern_faults, 2);
    }
}
