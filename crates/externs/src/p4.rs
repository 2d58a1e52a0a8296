//! The P4-facing side of the security externs: implementations of the extern types declared in
//! `p4include/p4sec.p4`, bound by name through the engine's extern registry ([`registry`]).

use crate::ascon::{self, Variant};
use crate::esp::{esp_of_ip, EspError, Sa, SaConfig};
use crate::hash::{self, HashAlg};
use crate::iface::{store_be, BitBuf, BoundArg, BoundCall, Dir, ExternError, ExternObject, ExternType, MethodSig, Payload};
use crate::layout::ArgLayout;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// Status codes of `p4sec.p4`.
pub const OK: u64 = 0;
pub const NO_SA: u64 = 1;

/// All extern types of p4sec.p4.
pub fn registry() -> Vec<Box<dyn ExternType>> {
    vec![
        Box::new(EspSadType),
        Box::new(HashType { name: "p4sec_hash", with_payload: false }),
        Box::new(HashType { name: "p4sec_hash_payload", with_payload: true }),
        Box::new(CryptoHashType),
        Box::new(crate::dfa::DfaMatcherType),
        Box::new(AsconType { name: "p4sec_ascon_encrypt", decrypt: false, with_len: false }),
        Box::new(AsconType { name: "p4sec_ascon_decrypt", decrypt: true, with_len: false }),
        Box::new(AsconType { name: "p4sec_ascon_seal", decrypt: false, with_len: true }),
        Box::new(crate::compat::IpsecCryptType),
        Box::new(AsconType { name: "p4sec_ascon_open", decrypt: true, with_len: true }),
    ]
}

fn bad(m: &str) -> ExternError {
    ExternError::BadArgument(m.to_string())
}

thread_local! {
    static SCRATCH: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(4096));
}

// ------------------------------------------------------------------------------------------------ ESP

struct EspSadType;

impl ExternType for EspSadType {
    fn name(&self) -> &str {
        "esp_sad"
    }
    fn instantiate(&self, _name: &str, args: &[BitBuf]) -> Result<Box<dyn ExternObject>, String> {
        let size = args.first().map(|a| a.as_u64()).ok_or("esp_sad needs a size")?;
        if size == 0 || size > 1 << 20 {
            return Err(format!("esp_sad size {size} is out of range (1..2^20)"));
        }
        Ok(Box::new(EspSad { slots: (0..size).map(|_| RwLock::new(None)).collect(), by_spi: RwLock::new(HashMap::new()) }))
    }
}

/// The SA database: slots of SAs and an SPI index for inbound lookups. Readers take per-slot read locks
/// (uncontended on the packet path); SA state itself is per SA.
pub struct EspSad {
    slots: Vec<RwLock<Option<Arc<Sa>>>>,
    by_spi: RwLock<HashMap<u32, u32>>,
}

#[derive(serde::Deserialize)]
struct AddSa {
    index: u32,
    sa: SaConfig,
}

#[derive(serde::Deserialize)]
struct Index {
    index: u32,
}

impl EspSad {
    fn sa(&self, i: u64) -> Option<Arc<Sa>> {
        self.slots.get(i as usize).and_then(|s| s.read().unwrap_or_else(|p| p.into_inner()).clone())
    }
}

/// Encapsulate the inner packet given as its parsed IP header (`hdr`) followed by `payload`; the header's
/// buffer holds the concatenation meanwhile (no allocation once it has grown).
fn encap_with_header(sa: &Sa, hdr: &mut BitBuf, payload: &[u8], out: &mut Vec<u8>) -> Result<u64, EspError> {
    let hdr_len = hdr.bytes.len();
    hdr.bytes.extend_from_slice(payload);
    let r = sa.encapsulate(&hdr.bytes, out);
    hdr.bytes.truncate(hdr_len);
    r
}

/// The IP header at the start of `pkt` into `hdrs[0]` (IPv4 without options, 20 bytes) or `hdrs[1]` (IPv6,
/// 40 bytes): its version and length; `None` for anything else (options, truncated, not IP).
fn split_ip_header(pkt: &[u8], hdrs: &mut [BitBuf]) -> Option<(u64, usize)> {
    match pkt.first()? {
        0x45 if pkt.len() >= 20 => {
            hdrs[0].bytes.copy_from_slice(&pkt[..20]);
            Some((4, 20))
        }
        b if b >> 4 == 6 && pkt.len() >= 40 => {
            hdrs[1].bytes.copy_from_slice(&pkt[..40]);
            Some((6, 40))
        }
        _ => None,
    }
}

impl ExternObject for EspSad {
    fn resolve(&self, sig: &MethodSig) -> Result<u32, String> {
        match (sig.name.as_str(), sig.args.as_slice()) {
            ("encap", [(Dir::In, 32), (Dir::Out, 8)]) => Ok(0),
            ("encap", [(Dir::In, 32), (Dir::In, h), (Dir::Out, 8)]) if h % 8 == 0 => Ok(2),
            ("decap", [(Dir::In, 32), (Dir::Out, 32), (Dir::Out, 8)]) => Ok(1),
            ("decap_sa", [(Dir::In, 32), (Dir::Out, 8)]) => Ok(3),
            ("encap_split", [(Dir::In, 32), (Dir::In, h), (Dir::Out, 160), (Dir::Out, 320), (Dir::Out, 8), (Dir::Out, 8)]) if h % 8 == 0 => Ok(6),
            ("decap_split", [(Dir::In, 32), (Dir::Out, 160), (Dir::Out, 320), (Dir::Out, 8), (Dir::Out, 8)]) => Ok(7),
            ("lifetime_event", [(Dir::In, 32), (Dir::Out, 8)]) => Ok(4),
            ("lifetime_event", [(Dir::In, 32), (Dir::Out, 8), (Dir::Out, 32)]) => Ok(5),
            (n, _) => Err(format!("esp_sad has no method `{n}` with this signature")),
        }
    }

    fn call(&self, method: u32, args: &mut [BitBuf], _ret: Option<&mut BitBuf>, payload: &mut Payload<'_>) -> Result<(), ExternError> {
        match method {
            0 | 2 => {
                // method 2 passes the inner packet's IP header as a parsed header: it goes in front of the payload
                let status_arg = if method == 0 { 1 } else { 2 };
                let status = match self.sa(args[0].as_u64()) {
                    None => NO_SA,
                    Some(sa) => SCRATCH.with(|s| {
                        let mut out = s.borrow_mut();
                        let r = if method == 0 {
                            sa.encapsulate(payload.bytes(), &mut out)
                        } else {
                            encap_with_header(&sa, &mut args[1], payload.bytes(), &mut out)
                        };
                        match r {
                            Ok(_) => {
                                payload.swap_in(&mut *out);
                                OK
                            }
                            Err(e) => e.code() as u64,
                        }
                    }),
                };
                args[status_arg].set_u64(status);
                Ok(())
            }
            1 => {
                let spi = args[0].as_u64() as u32;
                let idx = self.by_spi.read().unwrap_or_else(|p| p.into_inner()).get(&spi).copied();
                let (index, status) = match idx.and_then(|i| self.sa(i as u64).map(|s| (i, s))) {
                    None => (0, NO_SA),
                    Some((i, sa)) => SCRATCH.with(|s| {
                        let mut out = s.borrow_mut();
                        match sa.decapsulate(payload.bytes(), &mut out) {
                            Ok(_) => {
                                payload.swap_in(&mut *out);
                                (i, OK)
                            }
                            Err(e) => (i, e.code() as u64),
                        }
                    }),
                };
                args[1].set_u64(index as u64);
                args[2].set_u64(status);
                Ok(())
            }
            3 => {
                // the SA chosen by the program (SAD-dec table on outer addresses and SPI); the SPI must be its own
                let status = match self.sa(args[0].as_u64()) {
                    None => NO_SA,
                    Some(sa) => SCRATCH.with(|s| {
                        let mut out = s.borrow_mut();
                        match sa.decapsulate(payload.bytes(), &mut out) {
                            Ok(_) => {
                                payload.swap_in(&mut *out);
                                OK
                            }
                            Err(e) => e.code() as u64,
                        }
                    }),
                };
                args[1].set_u64(status);
                Ok(())
            }
            6 => {
                // encap with the inner IP header given as a parsed header; the outer IP header comes back in
                // `outer4` or `outer6` (by `outer_version`), the payload is ESP header, IV, ciphertext and ICV
                let (mut version, mut status) = (0u64, NO_SA);
                if let Some(sa) = self.sa(args[0].as_u64()) {
                    SCRATCH.with(|s| {
                        let mut out = s.borrow_mut();
                        status = match encap_with_header(&sa, &mut args[1], payload.bytes(), &mut out) {
                            Ok(_) => match split_ip_header(&out, &mut args[2..4]) {
                                Some((v, hl)) => {
                                    version = v;
                                    payload.set(&out[hl..]);
                                    OK
                                }
                                None => EspError::BadInner.code() as u64,
                            },
                            Err(e) => e.code() as u64,
                        };
                    });
                }
                args[4].set_u64(version);
                args[5].set_u64(status);
                Ok(())
            }
            7 => {
                // decap with the SA the program selected; a plain inner IP header (IPv4 without options, or
                // IPv6) comes back in `inner4` or `inner6` (by `inner_version`) and the payload is what follows
                // it; otherwise `inner_version` is 0 and the payload is the whole inner packet
                let (mut version, mut status) = (0u64, NO_SA);
                if let Some(sa) = self.sa(args[0].as_u64()) {
                    SCRATCH.with(|s| {
                        let mut out = s.borrow_mut();
                        status = match sa.decapsulate(payload.bytes(), &mut out) {
                            Ok(_) => {
                                match split_ip_header(&out, &mut args[1..3]) {
                                    Some((v, hl)) => {
                                        version = v;
                                        payload.set(&out[hl..]);
                                    }
                                    None => payload.swap_in(&mut *out),
                                }
                                OK
                            }
                            Err(e) => e.code() as u64,
                        };
                    });
                }
                args[3].set_u64(version);
                args[4].set_u64(status);
                Ok(())
            }
            4 | 5 => {
                let sa = self.sa(args[0].as_u64());
                let ev = sa.as_ref().map(|sa| sa.take_event()).unwrap_or(0);
                args[1].set_u64(ev as u64);
                if method == 5 {
                    args[2].set_u64(sa.map(|sa| sa.cfg.spi as u64).unwrap_or(0));
                }
                Ok(())
            }
            m => Err(ExternError::UnknownMethod(m)),
        }
    }

    /// `add_sa` {"index", "sa": SaConfig}, `del_sa` {"index"}, `sa_stats` {"index"}, `get_sas` {} (every occupied
    /// slot as `{"sas": [[index, spi], ...]}`, for a controller comparing its state with the switch's; no keys) (JSON).
    fn control(&self, op: &str, args: &[u8]) -> Result<Vec<u8>, String> {
        match op {
            "add_sa" => {
                let a: AddSa = serde_json::from_slice(args).map_err(|e| format!("add_sa: {e}"))?;
                let slot = self.slots.get(a.index as usize).ok_or_else(|| format!("SA index {} is out of range ({} slots)", a.index, self.slots.len()))?;
                let spi = a.sa.spi;
                let sa = Sa::new(a.sa).map_err(|e| format!("add_sa: invalid SA ({e:?})"))?;
                let mut by = self.by_spi.write().unwrap_or_else(|p| p.into_inner());
                if let Some(other) = by.get(&spi) {
                    if *other != a.index {
                        return Err(format!("SPI {spi:#x} is already used by SA {other}"));
                    }
                }
                let mut s = slot.write().unwrap_or_else(|p| p.into_inner());
                if let Some(old) = s.as_ref() {
                    by.remove(&old.cfg.spi);
                }
                *s = Some(Arc::new(sa));
                by.insert(spi, a.index);
                Ok(b"{}".to_vec())
            }
            "del_sa" => {
                let a: Index = serde_json::from_slice(args).map_err(|e| format!("del_sa: {e}"))?;
                let slot = self.slots.get(a.index as usize).ok_or_else(|| format!("SA index {} is out of range", a.index))?;
                let old = slot.write().unwrap_or_else(|p| p.into_inner()).take().ok_or_else(|| format!("no SA in slot {}", a.index))?;
                self.by_spi.write().unwrap_or_else(|p| p.into_inner()).remove(&old.cfg.spi);
                Ok(b"{}".to_vec())
            }
            "sa_stats" => {
                let a: Index = serde_json::from_slice(args).map_err(|e| format!("sa_stats: {e}"))?;
                let sa = self.sa(a.index as u64).ok_or_else(|| format!("no SA in slot {}", a.index))?;
                Ok(serde_json::to_vec(&sa.stats()).unwrap_or_default())
            }
            "get_sas" => {
                let mut sas = Vec::new();
                for (i, slot) in self.slots.iter().enumerate() {
                    if let Some(sa) = slot.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
                        sas.push((i as u64, sa.cfg.spi));
                    }
                }
                Ok(serde_json::to_vec(&serde_json::json!({ "sas": sas })).unwrap_or_default())
            }
            other => Err(format!("esp_sad has no control operation `{other}` (add_sa, del_sa, sa_stats, get_sas)")),
        }
    }

    fn drain_events(&self) -> Vec<String> {
        let mut v = vec![];
        for s in &self.slots {
            if let Some(sa) = s.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
                v.extend(sa.drain_events());
            }
        }
        v
    }
}

/// Decapsulate a whole outer IP packet (helper for tests and tools).
pub fn decap_ip(sa: &Sa, packet: &[u8], out: &mut Vec<u8>) -> Result<u64, EspError> {
    sa.decapsulate(esp_of_ip(packet)?, out)
}

// ------------------------------------------------------------------------------------------------ hashes

struct HashType {
    name: &'static str,
    with_payload: bool,
}

thread_local! {
    /// Message buffer of `p4sec_hash_payload` (fields followed by the payload), reused across packets.
    static HASH_MSG: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(16 * 1024));
}

struct HashObj {
    with_payload: bool,
}

impl ExternType for HashType {
    fn name(&self) -> &str {
        self.name
    }
    fn instantiate(&self, _: &str, _: &[BitBuf]) -> Result<Box<dyn ExternObject>, String> {
        Ok(Box::new(HashObj { with_payload: self.with_payload }))
    }
}

impl ExternObject for HashObj {
    fn resolve(&self, sig: &MethodSig) -> Result<u32, String> {
        match sig.args.as_slice() {
            [(Dir::Out, o), (Dir::In, 8), (Dir::In, k), (Dir::In, d)] if *o > 0 && *o <= 512 && k % 8 == 0 && d % 8 == 0 => Ok(0),
            [(Dir::Out, _), (Dir::In, 8), (Dir::In, _), (Dir::In, _)] => {
                Err("the key and data of p4sec_hash must be whole bytes, and the result 1..512 bits".into())
            }
            _ => Err("p4sec_hash takes (out result, in p4sec_hash_alg_t alg, in key, in data)".into()),
        }
    }

    fn call(&self, _m: u32, args: &mut [BitBuf], _ret: Option<&mut BitBuf>, payload: &mut Payload<'_>) -> Result<(), ExternError> {
        let alg = HashAlg::from_code(args[1].as_u64()).ok_or_else(|| bad("unknown hash algorithm"))?;
        let (result, rest) = args.split_at_mut(1);
        let r = &mut result[0];
        let tail = if self.with_payload { Tail::Payload(0) } else { Tail::None };
        hash_tail(alg, &rest[1].bytes, &rest[2].bytes, tail, payload, &mut r.bytes, r.width)
    }

    fn bind(&self, _m: u32, args: &[BoundArg<'_>], _ret: Option<&ArgLayout>) -> Option<Box<dyn BoundCall>> {
        // a constant algorithm (the usual case: an enum member) is settled here
        let [result, alg, key, data] = args else { return None };
        let alg = HashAlg::from_code(*alg.layout.constant()?.first()? as u64)?;
        BoundHash::bind(alg, result, key, data, if self.with_payload { BoundTail::Payload } else { BoundTail::None })
    }
}

/// What a hash covers after its data argument.
#[derive(Clone, Copy)]
enum Tail {
    /// Nothing: the data argument only.
    None,
    /// The payload (the bytes after the parsed headers) from this offset; past its end nothing.
    Payload(u64),
}

/// `result = H(key, data ++ tail)`. When the whole payload follows and `data` is exactly the bytes in front of
/// it in the received packet (headers the program has not changed since the parser extracted them), the
/// message is read from the packet in one piece.
fn hash_tail(alg: HashAlg, key: &[u8], data: &[u8], tail: Tail, payload: &Payload<'_>, result: &mut [u8], owidth: u32) -> Result<(), ExternError> {
    let mut out = [0u8; 64];
    let d = &mut out[..digest_len(alg, owidth)];
    digest_tail(alg, key, data, tail, payload, d)?;
    fit(alg, d, result, owidth);
    Ok(())
}

/// [`digest`] over `data` and what follows it ([`Tail`]).
#[inline]
fn digest_tail(alg: HashAlg, key: &[u8], data: &[u8], tail: Tail, payload: &Payload<'_>, out: &mut [u8]) -> Result<(), ExternError> {
    match tail {
        Tail::None => digest(alg, key, data, None, out),
        Tail::Payload(0) => match payload.with_prefix(data) {
            Some(msg) => digest(alg, key, msg, None, out),
            None => digest(alg, key, data, Some(payload.bytes()), out),
        },
        Tail::Payload(off) => {
            let p = payload.bytes();
            digest(alg, key, data, Some(&p[(off.min(p.len() as u64)) as usize..]), out)
        }
    }
}

/// Largest key and data arguments a bound hash call takes on the stack (larger ones use the general call).
const BOUND_KEY_MAX: usize = 64;
const BOUND_DATA_MAX: usize = 128;

/// A hash call site bound when the program is loaded ([`ExternObject::bind`]): the algorithm is settled, the
/// key and data are read from the slots into stack buffers, the result is written straight back.
struct BoundHash {
    alg: HashAlg,
    key: ArgLayout,
    data: ArgLayout,
    result: ArgLayout,
    tail: BoundTail,
    /// The data argument is one the engine may vouch for ([`BoundArg::frame_prefix`]).
    vouchable: bool,
}

enum BoundTail {
    None,
    /// The whole payload.
    Payload,
    /// The payload from the offset in this (at most 64-bit) argument.
    PayloadFrom(ArgLayout),
}

impl BoundHash {
    /// `args`: result, key, data (all of them whole bytes but the result, as `resolve` checked).
    fn bind(alg: HashAlg, result: &BoundArg<'_>, key: &BoundArg<'_>, data: &BoundArg<'_>, tail: BoundTail) -> Option<Box<dyn BoundCall>> {
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
        let sip = match (alg, &tail, key.layout.single_field(), result.layout.single_field()) {
            (HashAlg::SipHash24, BoundTail::Payload, Some(k), Some(r)) if key.layout.width() == 128 && rw <= 64 && rw % 8 == 0 => Some((k as usize, r as usize, 64 - rw)),
            _ => None,
        };
        let general = BoundHash { alg, key: key.layout.clone(), data: data.layout.clone(), result: result.layout.clone(), tail, vouchable: data.frame_prefix };
        Some(match sip {
            Some((ks, rs, shift)) => Box::new(BoundSipFrame { ks, rs, shift, general }),
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

/// A SipHash-2-4 call site over a data argument and the whole payload, with a key that is one `bit<128>` field
/// and a result of whole bytes in one field of at most 64 bits: keys and result move as words, and while the
/// data argument is still the bytes in front of the payload in the received packet (headers the program has
/// not changed), the frame is hashed where it lies. Otherwise the general bound call runs.
struct BoundSipFrame {
    /// The key's slots (`ks`: low word, `ks + 1`: high word), the result's slot and its right shift.
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
                // the frame's bytes are the data argument when the engine vouched for it, or when they compare
                // equal (after the hash: the compare's loads then run beside the hash's chain of rounds)
                if (self.general.vouchable && payload.prefix_vouched(n)) || same_bytes(data, slots, before) {
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

/// `data`'s bytes are `bytes` ([`ArgLayout::equals`]), out of line: inlined, the compare's general loop would
/// weigh on the registers and stack frame of the hash beside it.
#[inline(never)]
fn same_bytes(data: &ArgLayout, slots: &[u64], bytes: &[u8]) -> bool {
    data.equals(slots, bytes)
}

impl BoundSipFrame {
    /// The general bound call, out of line: kept apart, its buffers do not weigh on the hot path's registers
    /// and stack frame.
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
            // the data argument is the bytes in front of the payload (the engine vouched): the frame in one piece
            if let Some((_, msg)) = payload.with_bytes_before(n) {
                hash_tail(self.alg, key, msg, Tail::None, payload, r, self.result.width())?;
                self.result.write(r, slots);
                return Ok(());
            }
        }
        let data = &mut data[..n];
        self.data.read(slots, data);
        hash_tail(self.alg, key, data, self.tail(slots), payload, r, self.result.width())?;
        self.result.write(r, slots);
        Ok(())
    }
}

/// How many bytes of digest `alg` computes for an `owidth`-bit result (BLAKE2b: as many as the result holds).
fn digest_len(alg: HashAlg, owidth: u32) -> usize {
    if alg == HashAlg::Blake2b {
        (owidth.div_ceil(8) as usize).clamp(1, 64)
    } else {
        alg.out_len()
    }
}

/// `H(key, data ++ tail)` into `out` (`digest_len` bytes).
#[inline]
fn digest(alg: HashAlg, key: &[u8], data: &[u8], tail: Option<&[u8]>, out: &mut [u8]) -> Result<(), ExternError> {
    // an all-zero key selects unkeyed BLAKE2b
    let key: &[u8] = if alg == HashAlg::Blake2b && key.iter().all(|b| *b == 0) { &[] } else { key };
    let r = match tail {
        // fields and payload hashed as one message: in two pieces where the algorithm takes them, else
        // assembled in a per-thread buffer (no allocation)
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

fn is_numeric(alg: HashAlg) -> bool {
    matches!(alg, HashAlg::Crc16 | HashAlg::Crc32 | HashAlg::Crc32c | HashAlg::Csum16)
}

/// The digest `d` as the `owidth`-bit `result`: digests keep their first bytes (truncated to the result's
/// width, or right-aligned in a wider result); CRCs and checksums are numbers.
fn fit(alg: HashAlg, d: &mut [u8], result: &mut [u8], owidth: u32) {
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
fn key_bits(alg: HashAlg) -> Option<u32> {
    match alg {
        HashAlg::SipHash24 => Some(128),
        HashAlg::HalfSipHash24 => Some(64),
        HashAlg::Poly1305Aes => Some(384),
        _ => None,
    }
}

// ------------------------------------------------------------------------------------------------ crypto_hash

/// `crypto_hash(alg)`: a hash unit whose algorithm is fixed when the program is loaded.
struct CryptoHashType;

struct CryptoHash {
    alg: HashAlg,
    name: String,
}

impl ExternType for CryptoHashType {
    fn name(&self) -> &str {
        "crypto_hash"
    }
    fn instantiate(&self, name: &str, args: &[BitBuf]) -> Result<Box<dyn ExternObject>, String> {
        let code = args.first().map(|a| a.as_u64()).ok_or("crypto_hash needs an algorithm")?;
        let alg = HashAlg::from_code(code).ok_or_else(|| format!("crypto_hash `{name}`: unknown algorithm code {code}"))?;
        Ok(Box::new(CryptoHash { alg, name: name.to_string() }))
    }
}

impl ExternObject for CryptoHash {
    fn resolve(&self, sig: &MethodSig) -> Result<u32, String> {
        let who = format!("crypto_hash `{}` ({})", self.name, self.alg.name());
        let (m, o, k, d) = match (sig.name.as_str(), sig.args.as_slice()) {
            ("get", [(Dir::Out, o), (Dir::In, k), (Dir::In, d)]) => (0, *o, *k, *d),
            ("get_packet", [(Dir::Out, o), (Dir::In, k), (Dir::In, d), (Dir::In, 32)]) => (1, *o, *k, *d),
            ("get", _) => return Err(format!("{who}: get takes (out result, in key, in data)")),
            ("get_packet", _) => return Err(format!("{who}: get_packet takes (out result, in key, in data, in bit<32> offset)")),
            (other, _) => return Err(format!("{who}: no method `{other}`")),
        };
        if o == 0 || o > 512 {
            return Err(format!("{who}: the result must be 1..512 bits wide, not {o}"));
        }
        if k % 8 != 0 || d % 8 != 0 {
            return Err(format!("{who}: key ({k} bits) and data ({d} bits) must be whole bytes"));
        }
        if let Some(need) = key_bits(self.alg) {
            if k != need {
                return Err(format!("{who}: the key must be bit<{need}>, not bit<{k}>"));
            }
        }
        Ok(m)
    }

    fn call(&self, m: u32, args: &mut [BitBuf], _ret: Option<&mut BitBuf>, payload: &mut Payload<'_>) -> Result<(), ExternError> {
        let (result, rest) = args.split_at_mut(1);
        let r = &mut result[0];
        let tail = match m {
            1 => Tail::Payload(rest[2].as_u64()),
            _ => Tail::None,
        };
        hash_tail(self.alg, &rest[0].bytes, &rest[1].bytes, tail, payload, &mut r.bytes, r.width)
    }

    fn bind(&self, m: u32, args: &[BoundArg<'_>], _ret: Option<&ArgLayout>) -> Option<Box<dyn BoundCall>> {
        match (m, args) {
            (0, [result, key, data]) => BoundHash::bind(self.alg, result, key, data, BoundTail::None),
            (1, [result, key, data, off]) if off.layout.nbytes() <= 8 => BoundHash::bind(self.alg, result, key, data, BoundTail::PayloadFrom(off.layout.clone())),
            _ => None,
        }
    }
}

// ------------------------------------------------------------------------------------------------ ASCON

/// `p4sec_ascon_encrypt`/`_decrypt` use all of their AD and data arguments; `p4sec_ascon_seal`/`_open`
/// (`with_len`) only the first `ad_len`/`data_len` bytes and report a status.
struct AsconType {
    name: &'static str,
    decrypt: bool,
    with_len: bool,
}

struct AsconObj {
    name: &'static str,
    decrypt: bool,
    with_len: bool,
}

/// Status codes of p4sec_ascon_seal/open (p4sec.p4).
const ASCON_TAG_FAIL: u64 = 4;
const ASCON_BAD_LENGTH: u64 = 5;

impl ExternType for AsconType {
    fn name(&self) -> &str {
        self.name
    }
    fn instantiate(&self, _: &str, _: &[BitBuf]) -> Result<Box<dyn ExternObject>, String> {
        Ok(Box::new(AsconObj { name: self.name, decrypt: self.decrypt, with_len: self.with_len }))
    }
}

fn arr16(b: &BitBuf) -> [u8; 16] {
    let mut a = [0u8; 16];
    let n = b.bytes.len().min(16);
    a[16 - n..].copy_from_slice(&b.bytes[b.bytes.len() - n..]);
    a
}

impl ExternObject for AsconObj {
    fn resolve(&self, sig: &MethodSig) -> Result<u32, String> {
        let a = sig.args.as_slice();
        let ok = match (self.with_len, self.decrypt) {
            (false, true) => {
                matches!(a, [(Dir::In, 8), (Dir::In, 128), (Dir::In, 128), (Dir::In, ad), (Dir::InOut, d), (Dir::In, 128), (Dir::Out, 8)] if ad % 8 == 0 && d % 8 == 0)
            }
            (false, false) => {
                matches!(a, [(Dir::In, 8), (Dir::In, 128), (Dir::In, 128), (Dir::In, ad), (Dir::InOut, d), (Dir::Out, 128)] if ad % 8 == 0 && d % 8 == 0)
            }
            (true, true) => {
                matches!(a, [(Dir::In, 8), (Dir::In, 128), (Dir::In, 128), (Dir::In, ad), (Dir::In, 8), (Dir::InOut, d), (Dir::In, 8), (Dir::In, 128), (Dir::Out, 8)]
                if ad % 8 == 0 && d % 8 == 0)
            }
            (true, false) => {
                matches!(a, [(Dir::In, 8), (Dir::In, 128), (Dir::In, 128), (Dir::In, ad), (Dir::In, 8), (Dir::InOut, d), (Dir::In, 8), (Dir::Out, 128), (Dir::Out, 8)]
                if ad % 8 == 0 && d % 8 == 0)
            }
        };
        if ok {
            Ok(0)
        } else {
            Err(format!("{} needs byte-aligned associated data and data and the signature of p4sec.p4", self.name))
        }
    }

    fn call(&self, _m: u32, args: &mut [BitBuf], _ret: Option<&mut BitBuf>, _p: &mut Payload<'_>) -> Result<(), ExternError> {
        let v = match args[0].as_u64() {
            0 => Variant::Aead128,
            1 => Variant::V12,
            _ => return Err(bad("unknown ASCON variant")),
        };
        let key = arr16(&args[1]);
        let nonce = arr16(&args[2]);
        // (variant, key, nonce, ad, [ad_len,] data, [data_len,] tag, [status]): positions of data, tag, status
        let (d, t, st) = if self.with_len { (5, 7, 8) } else { (4, 5, 6) };
        let (alen, dlen) = if self.with_len { (args[4].as_u64() as usize, args[6].as_u64() as usize) } else { (args[3].bytes.len(), args[4].bytes.len()) };
        if alen > args[3].bytes.len() || dlen > args[d].bytes.len() {
            args[st].set_u64(ASCON_BAD_LENGTH);
            return Ok(());
        }
        let (head, tail) = args.split_at_mut(4);
        let ad = &head[3].bytes[..alen];
        let tag_in = arr16(&tail[t - 4]);
        let data = &mut tail[d - 4].bytes[..dlen];
        if self.decrypt {
            let tag = tag_in;
            // decrypt a copy: the data stays as it was when the tag does not verify
            let status = SCRATCH.with(|s| {
                let mut buf = s.borrow_mut();
                buf.clear();
                buf.extend_from_slice(data);
                match ascon::decrypt(v, &key, &nonce, ad, &mut buf, &tag) {
                    Ok(()) => {
                        data.copy_from_slice(&buf);
                        OK
                    }
                    Err(_) => ASCON_TAG_FAIL,
                }
            });
            tail[st - 4].set_u64(status);
        } else {
            let tag = ascon::encrypt(v, &key, &nonce, ad, data).map_err(|_| bad("ASCON key"))?;
            tail[t - 4].set_bytes(&tag);
            if self.with_len {
                tail[st - 4].set_u64(OK);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Part;

    /// A 14-byte header as the engine holds it: slot 10 its first 8 bytes, slot 11 the other 6.
    fn header_slots(slots: &mut [u64], hdr: [u8; 14]) {
        slots[10] = u64::from_be_bytes(hdr[..8].try_into().unwrap());
        slots[11] = u64::from_be_bytes([0, 0, hdr[8], hdr[9], hdr[10], hdr[11], hdr[12], hdr[13]]);
    }

    /// The bit strings the general call receives for these layouts.
    fn bit_strings(layouts: &[&ArgLayout], slots: &[u64]) -> Vec<BitBuf> {
        layouts
            .iter()
            .map(|l| {
                let mut b = BitBuf::zero(l.width());
                l.read(slots, &mut b.bytes);
                b
            })
            .collect()
    }

    /// A bound hash call site does what the general call does with the same bit strings: every algorithm,
    /// results narrower and wider than the digest and off the byte grid, data equal to the bytes in front of
    /// the payload or not, payload offsets inside and past the payload.
    #[test]
    fn bound_hash_calls_match_the_general_call() {
        let pkt: Vec<u8> = (0..80u32).map(|i| (i * 37 + 11) as u8).collect();
        let at = 14; // the payload starts after a 14-byte header
        let mut checked = 0;
        for alg in HashAlg::ALL {
            let kbits = key_bits(alg).unwrap_or(128);
            for owidth in [31u32, 64, 256] {
                for same_header in [true, false] {
                    for off in [0u64, 5, 200] {
                        // slots: 0 result (up to 4 words), 4.. key words, 10..12 header fields
                        let mut slots = vec![0u64; 16];
                        for (i, s) in slots.iter_mut().enumerate().take(10).skip(4) {
                            *s = 0x0123_4567_89ab_cdefu64.rotate_left(i as u32 * 7);
                        }
                        header_slots(&mut slots, if same_header { pkt[..14].try_into().unwrap() } else { [7; 14] });
                        slots[12] = off;
                        let result = ArgLayout::new(owidth, &[Part::Field { slot: 0, width: owidth }]);
                        let Some(result) = result else { continue };
                        let key = ArgLayout::new(kbits, &[Part::Field { slot: 4, width: kbits }]).unwrap();
                        let data = ArgLayout::new(112, &[Part::Field { slot: 10, width: 64 }, Part::Field { slot: 11, width: 48 }]).unwrap();
                        let offl = ArgLayout::new(32, &[Part::Field { slot: 12, width: 32 }]).unwrap();
                        let arg = |dir, layout| BoundArg { dir, layout, frame_prefix: false };
                        let obj = CryptoHash { alg, name: "h".into() };
                        // the general call with the same bit strings
                        let mut bufs = bit_strings(&[&result, &key, &data, &offl], &slots);
                        bufs[0] = BitBuf::zero(owidth);
                        let (mut o1, mut o2) = (vec![], vec![]);
                        let general = obj.call(1, &mut bufs, None, &mut Payload::in_packet(&pkt, at, &mut o1));
                        let bound = obj
                            .bind(1, &[arg(Dir::Out, &result), arg(Dir::In, &key), arg(Dir::In, &data), arg(Dir::In, &offl)], None)
                            .expect("bound");
                        let mut s2 = slots.clone();
                        let r = bound.call(&mut s2, &mut Payload::in_packet(&pkt, at, &mut o2));
                        assert_eq!(general.is_ok(), r.is_ok(), "{alg:?}");
                        let mut got = BitBuf::zero(owidth);
                        result.read(&s2, &mut got.bytes);
                        assert_eq!(got.bytes, bufs[0].bytes, "{alg:?} owidth {owidth} same_header {same_header} off {off}");
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 150, "{checked}");
        // p4sec_hash_payload (the algorithm a constant argument), over the frame as received or a changed header
        for alg in HashAlg::ALL {
            let kbits = key_bits(alg).unwrap_or(128);
            for same_header in [true, false] {
                let mut slots = vec![0u64; 16];
                for (i, s) in slots.iter_mut().enumerate().take(10).skip(4) {
                    *s = 0x0f1e_2d3c_4b5a_6978u64.rotate_left(i as u32 * 5);
                }
                header_slots(&mut slots, if same_header { pkt[..14].try_into().unwrap() } else { [9; 14] });
                let result = ArgLayout::new(64, &[Part::Field { slot: 0, width: 64 }]).unwrap();
                let code = ArgLayout::new(8, &[Part::Const { value: alg.code() as u64, width: 8 }]).unwrap();
                let key = ArgLayout::new(kbits, &[Part::Field { slot: 4, width: kbits }]).unwrap();
                let data = ArgLayout::new(112, &[Part::Field { slot: 10, width: 64 }, Part::Field { slot: 11, width: 48 }]).unwrap();
                let obj = HashObj { with_payload: true };
                let mut bufs = bit_strings(&[&result, &code, &key, &data], &slots);
                let (mut o1, mut o2) = (vec![], vec![]);
                obj.call(0, &mut bufs, None, &mut Payload::in_packet(&pkt, 14, &mut o1)).unwrap();
                let a = |dir, layout| BoundArg { dir, layout, frame_prefix: false };
                let bound = obj.bind(0, &[a(Dir::Out, &result), a(Dir::In, &code), a(Dir::In, &key), a(Dir::In, &data)], None).expect("bound");
                let mut s2 = slots.clone();
                bound.call(&mut s2, &mut Payload::in_packet(&pkt, 14, &mut o2)).unwrap();
                let mut got = BitBuf::zero(64);
                result.read(&s2, &mut got.bytes);
                assert_eq!(got.bytes, bufs[0].bytes, "{alg:?} same_header {same_header}");
            }
        }
        // p4sec_hash_payload: the algorithm is a constant argument; a field algorithm is not bound
        let obj = HashObj { with_payload: true };
        let r = ArgLayout::new(64, &[Part::Field { slot: 0, width: 64 }]).unwrap();
        let k = ArgLayout::new(128, &[Part::Field { slot: 4, width: 128 }]).unwrap();
        let d = ArgLayout::new(8, &[Part::Field { slot: 6, width: 8 }]).unwrap();
        let alg_const = ArgLayout::new(8, &[Part::Const { value: HashAlg::SipHash24.code() as u64, width: 8 }]).unwrap();
        let alg_field = ArgLayout::new(8, &[Part::Field { slot: 7, width: 8 }]).unwrap();
        let a = |dir, layout| BoundArg { dir, layout, frame_prefix: false };
        assert!(obj.bind(0, &[a(Dir::Out, &r), a(Dir::In, &alg_const), a(Dir::In, &k), a(Dir::In, &d)], None).is_some());
        assert!(obj.bind(0, &[a(Dir::Out, &r), a(Dir::In, &alg_field), a(Dir::In, &k), a(Dir::In, &d)], None).is_none());
    }

    /// Where the engine vouches for the data argument ([`Payload::vouch_prefix`] on a `frame_prefix` argument),
    /// a bound `p4sec_hash_payload` hashes the frame's bytes without comparing them with the argument: shown here
    /// with an argument that differs from them (which the engine never vouches for). Without the vouch, with a
    /// vouch for another length, or on an argument not marked `frame_prefix`, the argument is what is hashed.
    #[test]
    fn a_vouched_data_argument_is_read_from_the_frame() {
        let pkt: Vec<u8> = (0..64u32).map(|i| (i * 41 + 3) as u8).collect();
        for alg in [HashAlg::SipHash24, HashAlg::HmacSha256, HashAlg::Blake2b] {
            let kbits = key_bits(alg).unwrap_or(128);
            let mut slots = vec![0u64; 16];
            for (i, s) in slots.iter_mut().enumerate().take(10).skip(4) {
                *s = 0x1122_3344_5566_7788u64.rotate_left(i as u32 * 3);
            }
            header_slots(&mut slots, [5; 14]);
            let result = ArgLayout::new(64, &[Part::Field { slot: 0, width: 64 }]).unwrap();
            let code = ArgLayout::new(8, &[Part::Const { value: alg.code() as u64, width: 8 }]).unwrap();
            let key = ArgLayout::new(kbits, &[Part::Field { slot: 4, width: kbits }]).unwrap();
            let data = ArgLayout::new(112, &[Part::Field { slot: 10, width: 64 }, Part::Field { slot: 11, width: 48 }]).unwrap();
            let obj = HashObj { with_payload: true };
            let digest_of = |header: &[u8]| {
                let mut bufs = bit_strings(&[&result, &code, &key, &data], &slots);
                bufs[3].bytes = header.to_vec();
                let mut o = vec![];
                obj.call(0, &mut bufs, None, &mut Payload::in_packet(&pkt, 14, &mut o)).unwrap();
                bufs[0].bytes.clone()
            };
            let (of_frame, of_argument) = (digest_of(&pkt[..14]), digest_of(&[5; 14]));
            assert_ne!(of_frame, of_argument);
            for (marked, vouch, want) in [(true, Some(14), &of_frame), (true, None, &of_argument), (true, Some(13), &of_argument), (false, Some(14), &of_argument)] {
                let a = |dir, layout, frame_prefix| BoundArg { dir, layout, frame_prefix };
                let bound = obj
                    .bind(0, &[a(Dir::Out, &result, false), a(Dir::In, &code, false), a(Dir::In, &key, false), a(Dir::In, &data, marked)], None)
                    .expect("bound");
                let (mut s2, mut o) = (slots.clone(), vec![]);
                let mut payload = Payload::in_packet(&pkt, 14, &mut o);
                if let Some(n) = vouch {
                    payload.vouch_prefix(n);
                }
                bound.call(&mut s2, &mut payload).unwrap();
                let mut got = BitBuf::zero(64);
                result.read(&s2, &mut got.bytes);
                assert_eq!(&got.bytes, want, "{alg:?} marked {marked} vouch {vouch:?}");
            }
        }
    }
}
