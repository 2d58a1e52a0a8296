//! `p4sec_hash` and `p4sec_hash_payload`: keyed and unkeyed hashes over fields (and the payload),
//! with call sites bound at load time ([`BoundHash`], [`BoundSipFrame`]); the digest helpers
//! `crypto_hash` shares.

use super::common::bad;
use crate::hash::{self, HashAlg};
use crate::iface::{
    store_be, BitBuf, BoundArg, BoundCall, Dir, ExternError, ExternObject, ExternType, MethodSig,
    Payload,
};
use crate::layout::ArgLayout;
use std::cell::RefCell;

pub(super) struct HashType {
    pub(super) name: &'static str,
    pub(super) with_payload: bool,
}

thread_local! {
    /// Message buffer of `p4sec_hash_payload` (fields followed by the payload), reused across
    /// packets.
    static HASH_MSG: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(16 * 1024));
}

pub(super) struct HashObj {
    pub(super) with_payload: bool,
}

impl ExternType for HashType {
    fn name(&self) -> &str {
        self.name
    }
    fn instantiate(&self, _: &str, _: &[BitBuf]) -> Result<Box<dyn ExternObject>, String> {
        Ok(Box::new(HashObj {
            with_payload: self.with_payload,
        }))
    }
}

impl ExternObject for HashObj {
    fn resolve(&self, sig: &MethodSig) -> Result<u32, String> {
        match sig.args.as_slice() {
            [(Dir::Out, o), (Dir::In, 8), (Dir::In, k), (Dir::In, d)]
                if *o > 0 && *o <= 512 && k % 8 == 0 && d % 8 == 0 =>
            {
                Ok(0)
            }
            [(Dir::Out, _), (Dir::In, 8), (Dir::In, _), (Dir::In, _)] => Err(
                "the key and data of p4sec_hash must be whole bytes, and the result 1..512 bits"
                    .into(),
            ),
            _ => Err(
                "p4sec_hash takes (out result, in p4sec_hash_alg_t alg, in key, in data)".into(),
            ),
        }
    }

    fn call(
        &self,
        _m: u32,
        args: &mut [BitBuf],
        _ret: Option<&mut BitBuf>,
        payload: &mut Payload<'_>,
    ) -> Result<(), ExternError> {
        let alg =
            HashAlg::from_code(args[1].as_u64()).ok_or_else(|| bad("unknown hash algorithm"))?;
        let (result, rest) = args.split_at_mut(1);
        let r = &mut result[0];
        let tail = if self.with_payload {
            Tail::Payload(0)
        } else {
            Tail::None
        };
        hash_tail(
            alg,
            &rest[1].bytes,
            &rest[2].bytes,
            tail,
            payload,
            &mut r.bytes,
            r.width,
        )
    }

    fn bind(
        &self,
        _m: u32,
        args: &[BoundArg<'_>],
        _ret: Option<&ArgLayout>,
    ) -> Option<Box<dyn BoundCall>> {
        // a constant algorithm (the usual case: an enum member) is settled here
        let [result, alg, key, data] = args else {
            return None;
        };
        let alg = HashAlg::from_code(*alg.layout.constant()?.first()? as u64)?;
        BoundHash::bind(
            alg,
            result,
            key,
            data,
            if self.with_payload {
                BoundTail::Payload
            } else {
                BoundTail::None
            },
        )
    }
}

/// What a hash covers after its data argument.
#[derive(Clone, Copy)]
pub(super) enum Tail {
    /// Nothing: the data argument only.
    None,
    /// The payload (the bytes after the parsed headers) from this offset; past its end nothing.
    Payload(u64),
}

/// `result = H(key, data ++ tail)`. When the whole payload follows and `data` is exactly the bytes
/// in front of it in the received packet (headers the program has not changed since the parser
/// extracted them), the message is read from the packet in one piece.
pub(super) fn hash_tail(
    alg: HashAlg,
    key: &[u8],
    data: &[u8],
    tail: Tail,
    payload: &Payload<'_>,
    result: &mut [u8],
    owidth: u32,
) -> Result<(), ExternError> {
    let mut out = [0u8; 64];
    let d = &mut out[..digest_len(alg, owidth)];
    digest_tail(alg, key, data, tail, payload, d)?;
    fit(alg, d, result, owidth);
    Ok(())
}

/// [`digest`] over `data` and what follows it ([`Tail`]).
#[inline]
pub(super) fn digest_tail(
    alg: HashAlg,
    key: &[u8],
    data: &[u8],
    tail: Tail,
    payload: &Payload<'_>,
    out: &mut [u8],
) -> Result<(), ExternError> {
    match tail {
        Tail::None => digest(alg, key, data, None, out),
        Tail::Payload(0) => match payload.with_prefix(data) {
            Some(msg) => digest(alg, key, msg, None, out),
            None => digest(alg, key, data, Some(payload.bytes()), out),
        },
        Tail::Payload(off) => {
            let p = payload.bytes();
            digest(
                alg,
                key,
                data,
                Some(&p[(off.min(p.len() as u64)) as usize..]),
                out,
            )
        }
    }
}

/// Largest key and data arguments a bound hash call takes on the stack (larger ones use the general
/// call).
pub(super) const BOUND_KEY_MAX: usize = 64;
pub(super) const BOUND_DATA_MAX: usize = 128;

/// A hash call site bound when the program is loaded ([`ExternObject::bind`]): the algorithm is
/// settled, the key and data are read from the slots into stack buffers, the result is written
/// straight back.
pub(super) struct BoundHash {
    alg: HashAlg,
    key: ArgLayout,
    data: ArgLayout,
    result: ArgLayout,
    tail: BoundTail,
    /// The data argument is one the engine may vouch for ([`BoundArg::frame_prefix`]).
    vouchable: bool,
}

pub(super) enum BoundTail {
    None,
    /// The whole payload.
    Payload,
    /// The payload from the offset in this (at most 64-bit) argument.
    PayloadFrom(ArgLayout),
}

impl BoundHash {
    /// `args`: result, key, data (all of them whole bytes but the result, as `resolve` checked).
    pub(super) fn bind(
        alg: HashAlg,
        result: &BoundArg<'_>,
        key: &BoundArg<'_>,
        data: &BoundArg<'_>,
        tail: BoundTail,
    ) -> Option<Box<dyn BoundCall>> {
        let fits = result.dir == Dir::Out
            && key.dir == Dir::In
            && data.dir == Dir::In
            && result.layout.nbytes() <= 64
            && key.layout.nbytes() <= BOUND_KEY_MAX
            && data.layout.nbytes() <= BOUND_DATA_MAX;
        if !fits {
            return None;
        }
        let rw = result.layout.width();
        let sip = match (
            alg,
            &tail,
            key.layout.single_field(),
            result.layout.single_field(),
        ) {
            (HashAlg::SipHash24, BoundTail::Payload, Some(k), Some(r))
                if key.layout.width() == 128 && rw <= 64 && rw.is_multiple_of(8) =>
            {
                Some((k as usize, r as usize, 64 - rw))
            }
            _ => None,
        };
        let general = BoundHash {
            alg,
            key: key.layout.clone(),
            data: data.layout.clone(),
            result: result.layout.clone(),
            tail,
            vouchable: data.frame_prefix,
        };
        Some(match sip {
            Some((ks, rs, shift)) => Box::new(BoundSipFrame {
                ks,
                rs,
                shift,
                general,
            }),
            None => Box::new(general),
        })
    }

    #[inline(always)]
    fn tail(&self, slots: &[u64]) -> Tail {
        match &self.tail {
            BoundTail::None => Tail::None,
            BoundTail::Payload => Tail::Payload(0),
            BoundTail::PayloadFrom(off) => {
                let mut b = [0u8; 8];
                off.read(slots, &mut b[8 - off.nbytes()..]);
                Tail::Payload(u64::from_be_bytes(b))
            }
        }
    }
}

/// A SipHash-2-4 call site over a data argument and the whole payload, with a key that is one
/// `bit<128>` field and a result of whole bytes in one field of at most 64 bits: keys and result
/// move as words, and while the data argument is still the bytes in front of the payload in the
/// received packet (headers the program has not changed), the frame is hashed where it lies.
/// Otherwise the general bound call runs.
pub(super) struct BoundSipFrame {
    /// The key's slots (`ks`: low word, `ks + 1`: high word), the result's slot and its right
    /// shift.
    ks: usize,
    rs: usize,
    shift: u32,
    general: BoundHash,
}

impl BoundCall for BoundSipFrame {
    fn call(&self, slots: &mut [u64], payload: &mut Payload<'_>) -> Result<(), ExternError> {
        let data = &self.general.data;
        let n = data.nbytes();
        if let Some((before, msg)) = payload.with_bytes_before(n) {
            // the key's bytes are its high word then its low word, big-endian; SipHash reads k0, k1
            // little-endian
            if let (Some(&lo), Some(&hi)) = (slots.get(self.ks), slots.get(self.ks + 1)) {
                let h = hash::siphash24(hi.swap_bytes(), lo.swap_bytes(), msg);
                // the frame's bytes are the data argument when the engine vouched for it, or when
                // they compare equal (after the hash: the compare's loads then run beside the
                // hash's chain of rounds)
                if (self.general.vouchable && payload.prefix_vouched(n))
                    || same_bytes(data, slots, before)
                {
                    // the digest is h little-endian; the result is its first bytes as a number
                    if let Some(r) = slots.get_mut(self.rs) {
                        *r = h.swap_bytes() >> self.shift;
                        return Ok(());
                    }
                }
            }
        }
        self.fallback(slots, payload)
    }
}

/// `data`'s bytes are `bytes` ([`ArgLayout::equals`]), out of line: inlined, the compare's general
/// loop would weigh on the registers and stack frame of the hash beside it.
#[inline(never)]
pub(super) fn same_bytes(data: &ArgLayout, slots: &[u64], bytes: &[u8]) -> bool {
    data.equals(slots, bytes)
}

impl BoundSipFrame {
    /// The general bound call, out of line: kept apart, its buffers do not weigh on the hot path's
    /// registers and stack frame.
    #[cold]
    #[inline(never)]
    fn fallback(&self, slots: &mut [u64], payload: &mut Payload<'_>) -> Result<(), ExternError> {
        self.general.call(slots, payload)
    }
}

impl BoundCall for BoundHash {
    fn call(&self, slots: &mut [u64], payload: &mut Payload<'_>) -> Result<(), ExternError> {
        let (mut key, mut data, mut r) = ([0u8; BOUND_KEY_MAX], [0u8; BOUND_DATA_MAX], [0u8; 64]);
        let key = &mut key[..self.key.nbytes()];
        let r = &mut r[..self.result.nbytes()];
        self.key.read(slots, key);
        let n = self.data.nbytes();
        if self.vouchable && matches!(self.tail, BoundTail::Payload) && payload.prefix_vouched(n) {
            // the data argument is the bytes in front of the payload (the engine vouched): the
            // frame in one piece
            if let Some((_, msg)) = payload.with_bytes_before(n) {
                hash_tail(
                    self.alg,
                    key,
                    msg,
                    Tail::None,
                    payload,
                    r,
                    self.result.width(),
                )?;
                self.result.write(r, slots);
                return Ok(());
            }
        }
        let data = &mut data[..n];
        self.data.read(slots, data);
        hash_tail(
            self.alg,
            key,
            data,
            self.tail(slots),
            payload,
            r,
            self.result.width(),
        )?;
        self.result.write(r, slots);
        Ok(())
    }
}

/// How many bytes of digest `alg` computes for an `owidth`-bit result (BLAKE2b: as many as the
/// result holds).
pub(super) fn digest_len(alg: HashAlg, owidth: u32) -> usize {
    if alg == HashAlg::Blake2b {
        (owidth.div_ceil(8) as usize).clamp(1, 64)
    } else {
        alg.out_len()
    }
}

/// `H(key, data ++ tail)` into `out` (`digest_len` bytes).
#[inline]
pub(super) fn digest(
    alg: HashAlg,
    key: &[u8],
    data: &[u8],
    tail: Option<&[u8]>,
    out: &mut [u8],
) -> Result<(), ExternError> {
    // an all-zero key selects unkeyed BLAKE2b
    let key: &[u8] = if alg == HashAlg::Blake2b && key.iter().all(|b| *b == 0) {
        &[]
    } else {
        key
    };
    let r = match tail {
        // fields and payload hashed as one message: in two pieces where the algorithm takes them,
        // else assembled in a per-thread buffer (no allocation)
        Some(t) => match hash::compute2(alg, key, data, t, out) {
            Some(r) => r,
            None => HASH_MSG.with(|s| {
                let mut msg = s.borrow_mut();
                msg.clear();
                msg.extend_from_slice(data);
                msg.extend_from_slice(t);
                hash::compute(alg, key, &msg, out)
            }),
        },
        None => hash::compute(alg, key, data, out),
    };
    r.map_err(|e| bad(&e.to_string()))
}

pub(super) fn is_numeric(alg: HashAlg) -> bool {
    matches!(
        alg,
        HashAlg::Crc16 | HashAlg::Crc32 | HashAlg::Crc32c | HashAlg::Csum16
    )
}

/// The digest `d` as the `owidth`-bit `result`: digests keep their first bytes (truncated to the
/// result's width, or right-aligned in a wider result); CRCs and checksums are numbers.
pub(super) fn fit(alg: HashAlg, d: &mut [u8], result: &mut [u8], owidth: u32) {
    if is_numeric(alg) {
        store_be(result, owidth, d);
        return;
    }
    // the first bytes of the digest
    let take = (owidth.div_ceil(8) as usize).min(d.len());
    let v = &mut d[..take];
    let extra = (take * 8) as u32 - owidth.min(take as u32 * 8);
    if extra == 0 && result.len() == take {
        // the usual case: whole bytes of the digest, as many as the result holds
        result.copy_from_slice(v);
        return;
    }
    if extra > 0 {
        // keep the leading `owidth` bits: shift right
        let mut carry = 0u8;
        for b in v.iter_mut() {
            let nb = (*b >> extra) | carry;
            carry = *b << (8 - extra);
            *b = nb;
        }
    }
    store_be(result, owidth, v);
}

/// Key width (bits) an algorithm requires, if it requires one.
pub(super) fn key_bits(alg: HashAlg) -> Option<u32> {
    match alg {
        HashAlg::SipHash24 => Some(128),
        HashAlg::HalfSipHash24 => Some(64),
        HashAlg::Poly1305Aes => Some(384),
        _ => None,
    }
}
