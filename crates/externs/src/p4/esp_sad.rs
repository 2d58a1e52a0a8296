//! `esp_sad`: the ESP security association database extern (RFC 4303 tunnel mode): SA slots
//! installed by the control plane (`add_sa`, undone by `del_sa`; `sa_stats`), and `encap`/`decap`
//! of the packet's payload.

use super::common::{NO_SA, OK, SCRATCH};
use crate::esp::{esp_of_ip, EspError, Sa, SaConfig};
use crate::iface::{
    BitBuf, BoundArg, BoundCall, Dir, ExternError, ExternObject, ExternType, MethodSig, Payload,
};
use crate::layout::ArgLayout;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

pub(super) struct EspSadType;

impl ExternType for EspSadType {
    fn name(&self) -> &str {
        "esp_sad"
    }
    fn instantiate(&self, _name: &str, args: &[BitBuf]) -> Result<Box<dyn ExternObject>, String> {
        let size = args
            .first()
            .map(|a| a.as_u64())
            .ok_or("esp_sad needs a size")?;
        if size == 0 || size > 1 << 20 {
            return Err(format!("esp_sad size {size} is out of range (1..2^20)"));
        }
        Ok(Box::new(EspSad {
            db: Arc::new(Sad {
                slots: (0..size).map(|_| RwLock::new(None)).collect(),
                by_spi: RwLock::new(HashMap::new()),
            }),
        }))
    }
    fn undo_op(&self, op: &str) -> Option<&'static str> {
        (op == "add_sa").then_some("del_sa")
    }
}

/// One `esp_sad` instance: its SA database, shared with the call sites it binds
/// ([`ExternObject::bind`]).
pub struct EspSad {
    db: Arc<Sad>,
}

/// Slots of SAs and an SPI index for inbound lookups. Readers take per-slot read locks (uncontended
/// on the packet path) and use the SA under the lock; SA state itself is per SA.
struct Sad {
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

/// Method indexes ([`ExternObject::resolve`]).
const ENCAP: u32 = 0;
const DECAP: u32 = 1;
const ENCAP_HDR: u32 = 2;
const DECAP_SA: u32 = 3;
const LIFETIME: u32 = 4;
const LIFETIME_SPI: u32 = 5;
const ENCAP_SPLIT: u32 = 6;
const DECAP_SPLIT: u32 = 7;

impl Sad {
    fn sa(&self, i: u64) -> Option<Arc<Sa>> {
        self.slots
            .get(i as usize)
            .and_then(|s| s.read().unwrap_or_else(|p| p.into_inner()).clone())
    }

    /// `f` with the SA in slot `i`, under the slot's read lock (no reference taken); `None`: no SA
    /// there.
    #[inline]
    fn with_sa<R>(&self, i: u64, f: impl FnOnce(&Sa) -> R) -> Option<R> {
        let slot = self.slots.get(usize::try_from(i).ok()?)?;
        let sa = slot.read().unwrap_or_else(|p| p.into_inner());
        sa.as_deref().map(f)
    }

    /// `encap`: the inner packet is `head` (an IP header given as a parsed header, or nothing)
    /// followed by the payload; the payload becomes outer IP header, ESP header, IV, ciphertext and
    /// ICV. The status.
    fn encap(&self, i: u64, head: &[u8], payload: &mut Payload<'_>) -> u64 {
        self.with_sa(i, |sa| {
            SCRATCH.with(|s| {
                let mut out = s.borrow_mut();
                match sa.encapsulate_parts(head, payload.bytes(), &mut out) {
                    Ok(_) => {
                        payload.swap_in(&mut out);
                        OK
                    }
                    Err(e) => e.code() as u64,
                }
            })
        })
        .unwrap_or(NO_SA)
    }

    /// `encap_split`: the inner packet is `head` (its IP header) followed by the payload, copied
    /// once (into the buffer that becomes the payload) and encrypted there; the outer IP header
    /// goes to `outer4` (20 bytes, IPv4) or `outer6` (40 bytes, IPv6), the payload becomes ESP
    /// header, IV, ciphertext and ICV. (outer version, status); the header not chosen is left as it
    /// is. With `head` `None`, the header is the bytes in front of the payload in the received
    /// packet, `vouched` long (the engine vouched for them: [`Payload::prefix_vouched`]), and the
    /// inner packet is read there in one piece.
    fn encap_split(
        &self,
        i: u64,
        head: Option<&[u8]>,
        vouched: usize,
        outer4: &mut [u8],
        outer6: &mut [u8],
        payload: &mut Payload<'_>,
    ) -> (u64, u64) {
        self.with_sa(i, |sa| {
            SCRATCH.with(|s| {
                let mut out = s.borrow_mut();
                let mut outer = [0u8; 40];
                let (head, body) = match head {
                    Some(h) => (h, payload.bytes()),
                    None => (
                        &[][..],
                        payload
                            .with_bytes_before(vouched)
                            .map_or(&[][..], |(_, whole)| whole),
                    ),
                };
                match sa.encapsulate_split_at(head, body, &mut outer, &mut out, HEADROOM) {
                    Ok((_, 20)) if outer4.len() == 20 => {
                        outer4.copy_from_slice(&outer[..20]);
                        payload.swap_in_from(&mut out, HEADROOM);
                        (4, OK)
                    }
                    Ok((_, 40)) if outer6.len() == 40 => {
                        outer6.copy_from_slice(&outer);
                        payload.swap_in_from(&mut out, HEADROOM);
                        (6, OK)
                    }
                    // an SA without tunnel endpoints has no outer header to return
                    Ok(_) => (0, EspError::BadInner.code() as u64),
                    Err(e) => (0, e.code() as u64),
                }
            })
        })
        .unwrap_or((0, NO_SA))
    }

    /// Decapsulate the payload (it starts at the ESP header) with `sa`: the payload becomes the
    /// inner packet, copied once (out of the received packet, decrypted where it lands). With
    /// `inner`: a plain inner IP header (IPv4 without options, or IPv6) goes to `inner.0` (20
    /// bytes) or `inner.1` (40 bytes) instead, the payload being what follows it (handed over
    /// without moving it: `Payload::swap_in_from`), and its version is returned (0: the payload is
    /// the whole inner packet). (inner version, status).
    fn decap_with(
        sa: &Sa,
        payload: &mut Payload<'_>,
        inner: Option<(&mut [u8], &mut [u8])>,
    ) -> (u64, u64) {
        SCRATCH.with(|s| {
            let mut out = s.borrow_mut();
            match sa.decapsulate_at(payload.bytes(), &mut out, HEADROOM) {
                Ok(_) => {
                    let pkt = &out[HEADROOM..];
                    let split = match (inner, pkt.first()) {
                        (Some((i4, _)), Some(0x45)) if pkt.len() >= 20 && i4.len() == 20 => {
                            i4.copy_from_slice(&pkt[..20]);
                            Some((4, 20))
                        }
                        (Some((_, i6)), Some(b))
                            if b >> 4 == 6 && pkt.len() >= 40 && i6.len() == 40 =>
                        {
                            i6.copy_from_slice(&pkt[..40]);
                            Some((6, 40))
                        }
                        _ => None,
                    };
                    match split {
                        Some((v, hl)) => {
                            payload.swap_in_from(&mut out, HEADROOM + hl);
                            (v, OK)
                        }
                        None => {
                            payload.swap_in_from(&mut out, HEADROOM);
                            (0, OK)
                        }
                    }
                }
                Err(e) => (0, e.code() as u64),
            }
        })
    }

    /// `decap` by SPI: (SA index, status).
    fn decap_spi(&self, spi: u32, payload: &mut Payload<'_>) -> (u64, u64) {
        let idx = self
            .by_spi
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&spi)
            .copied();
        idx.and_then(|i| {
            self.with_sa(i as u64, |sa| {
                (i as u64, Self::decap_with(sa, payload, None).1)
            })
        })
        .unwrap_or((0, NO_SA))
    }

    /// The lifetime event the SA in slot `i` reached since the last call, and its SPI (0, 0 without
    /// an SA).
    fn lifetime_event(&self, i: u64) -> (u64, u64) {
        self.with_sa(i, |sa| (sa.take_event() as u64, sa.cfg.spi as u64))
            .unwrap_or((0, 0))
    }
}

impl ExternObject for EspSad {
    fn resolve(&self, sig: &MethodSig) -> Result<u32, String> {
        match (sig.name.as_str(), sig.args.as_slice()) {
            ("encap", [(Dir::In, 32), (Dir::Out, 8)]) => Ok(ENCAP),
            ("encap", [(Dir::In, 32), (Dir::In, h), (Dir::Out, 8)]) if h % 8 == 0 => Ok(ENCAP_HDR),
            ("decap", [(Dir::In, 32), (Dir::Out, 32), (Dir::Out, 8)]) => Ok(DECAP),
            ("decap_sa", [(Dir::In, 32), (Dir::Out, 8)]) => Ok(DECAP_SA),
            (
                "encap_split",
                [(Dir::In, 32), (Dir::In, h), (Dir::Out, 160), (Dir::Out, 320), (Dir::Out, 8), (Dir::Out, 8)],
            ) if h % 8 == 0 => Ok(ENCAP_SPLIT),
            (
                "decap_split",
                [(Dir::In, 32), (Dir::Out, 160), (Dir::Out, 320), (Dir::Out, 8), (Dir::Out, 8)],
            ) => Ok(DECAP_SPLIT),
            ("lifetime_event", [(Dir::In, 32), (Dir::Out, 8)]) => Ok(LIFETIME),
            ("lifetime_event", [(Dir::In, 32), (Dir::Out, 8), (Dir::Out, 32)]) => Ok(LIFETIME_SPI),
            (n, _) => Err(format!("esp_sad has no method `{n}` with this signature")),
        }
    }

    fn call(
        &self,
        method: u32,
        args: &mut [BitBuf],
        _ret: Option<&mut BitBuf>,
        payload: &mut Payload<'_>,
    ) -> Result<(), ExternError> {
        let db = &*self.db;
        let n = args.len();
        let short =
            || ExternError::BadArgument(format!("esp_sad method {method} given {n} arguments"));
        match method {
            ENCAP => {
                let [index, status] = args else {
                    return Err(short());
                };
                let st = db.encap(index.as_u64(), &[], payload);
                status.set_u64(st);
            }
            ENCAP_HDR => {
                // the inner packet's IP header as a parsed header: it goes in front of the payload
                let [index, head, status] = args else {
                    return Err(short());
                };
                let st = db.encap(index.as_u64(), &head.bytes, payload);
                status.set_u64(st);
            }
            DECAP => {
                let [spi, index, status] = args else {
                    return Err(short());
                };
                let (i, st) = db.decap_spi(spi.as_u64() as u32, payload);
                index.set_u64(i);
                status.set_u64(st);
            }
            DECAP_SA => {
                // the SA chosen by the program (SAD-dec table on outer addresses and SPI); the SPI
                // must be its own
                let [index, status] = args else {
                    return Err(short());
                };
                let st = db
                    .with_sa(index.as_u64(), |sa| Sad::decap_with(sa, payload, None).1)
                    .unwrap_or(NO_SA);
                status.set_u64(st);
            }
            ENCAP_SPLIT => {
                // encap with the inner IP header given as a parsed header; the outer IP header
                // comes back in `outer4` or `outer6` (by `outer_version`), the payload is ESP
                // header, IV, ciphertext and ICV
                let [index, head, o4, o6, version, status] = args else {
                    return Err(short());
                };
                let (v, st) = db.encap_split(
                    index.as_u64(),
                    Some(&head.bytes),
                    0,
                    &mut o4.bytes,
                    &mut o6.bytes,
                    payload,
                );
                version.set_u64(v);
                status.set_u64(st);
            }
            DECAP_SPLIT => {
                // decap with the SA the program selected; a plain inner IP header (IPv4 without
                // options, or IPv6) comes back in `inner4` or `inner6` (by `inner_version`) and the
                // payload is what follows it; otherwise `inner_version` is 0 and the payload is the
                // whole inner packet
                let [index, i4, i6, version, status] = args else {
                    return Err(short());
                };
                let (v, st) = db
                    .with_sa(index.as_u64(), |sa| {
                        Sad::decap_with(sa, payload, Some((&mut i4.bytes, &mut i6.bytes)))
                    })
                    .unwrap_or((0, NO_SA));
                version.set_u64(v);
                status.set_u64(st);
            }
            LIFETIME => {
                let [index, event] = args else {
                    return Err(short());
                };
                event.set_u64(db.lifetime_event(index.as_u64()).0);
            }
            LIFETIME_SPI => {
                let [index, event, spi] = args else {
                    return Err(short());
                };
                let (ev, s) = db.lifetime_event(index.as_u64());
                event.set_u64(ev);
                spi.set_u64(s);
            }
            m => return Err(ExternError::UnknownMethod(m)),
        }
        Ok(())
    }

    /// `encap_split`, `decap_split` and `lifetime_event` call sites read their arguments from the
    /// slots and write their results back through the layouts, with no argument buffers (the other
    /// methods take the general call).
    fn bind(
        &self,
        method: u32,
        args: &[BoundArg<'_>],
        _ret: Option<&ArgLayout>,
    ) -> Option<Box<dyn BoundCall>> {
        let db = self.db.clone();
        let l = |a: &BoundArg<'_>| a.layout.clone();
        let w = Word::of;
        match (method, args) {
            (ENCAP_SPLIT, [index, head, o4, o6, version, status])
                if head.layout.nbytes() <= BOUND_HEADER_MAX =>
            {
                Some(Box::new(BoundEncapSplit {
                    db,
                    index: w(index)?,
                    head: l(head),
                    vouchable: head.frame_prefix,
                    outer4: l(o4),
                    outer6: l(o6),
                    version: w(version)?,
                    status: w(status)?,
                }))
            }
            (DECAP_SPLIT, [index, i4, i6, version, status]) => Some(Box::new(BoundDecapSplit {
                db,
                index: w(index)?,
                inner4: l(i4),
                inner6: l(i6),
                version: w(version)?,
                status: w(status)?,
            })),
            (LIFETIME, [index, event]) => Some(Box::new(BoundLifetime {
                db,
                index: w(index)?,
                event: w(event)?,
                spi: None,
            })),
            (LIFETIME_SPI, [index, event, spi]) => Some(Box::new(BoundLifetime {
                db,
                index: w(index)?,
                event: w(event)?,
                spi: Some(w(spi)?),
            })),
            _ => None,
        }
    }

    /// `add_sa` {"index", "sa": SaConfig}, `del_sa` {"index"}, `sa_stats` {"index"}, `get_sas` {}
    /// (every occupied slot as `{"sas": [[index, spi], ...]}`, for a controller comparing its state
    /// with the switch's; no keys) (JSON).
    fn control(&self, op: &str, args: &[u8]) -> Result<Vec<u8>, String> {
        match op {
            "add_sa" => {
                let a: AddSa = serde_json::from_slice(args).map_err(|e| format!("add_sa: {e}"))?;
                let slot = self.db.slots.get(a.index as usize).ok_or_else(|| {
                    format!(
                        "SA index {} is out of range ({} slots)",
                        a.index,
                        self.db.slots.len()
                    )
                })?;
                let spi = a.sa.spi;
                if let Some(why) = a.sa.problem() {
                    return Err(format!("add_sa: invalid SA {spi:#x}: {why}"));
                }
                let sa =
                    Sa::new(a.sa).map_err(|e| format!("add_sa: invalid SA {spi:#x} ({e:?})"))?;
                let mut by = self.db.by_spi.write().unwrap_or_else(|p| p.into_inner());
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
                let slot = self
                    .db
                    .slots
                    .get(a.index as usize)
                    .ok_or_else(|| format!("SA index {} is out of range", a.index))?;
                let old = slot
                    .write()
                    .unwrap_or_else(|p| p.into_inner())
                    .take()
                    .ok_or_else(|| format!("no SA in slot {}", a.index))?;
                self.db
                    .by_spi
                    .write()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&old.cfg.spi);
                Ok(b"{}".to_vec())
            }
            "sa_stats" => {
                let a: Index =
                    serde_json::from_slice(args).map_err(|e| format!("sa_stats: {e}"))?;
                let sa = self
                    .db
                    .sa(a.index as u64)
                    .ok_or_else(|| format!("no SA in slot {}", a.index))?;
                Ok(serde_json::to_vec(&sa.stats()).unwrap_or_default())
            }
            "get_sas" => {
                let mut sas = Vec::new();
                for (i, slot) in self.db.slots.iter().enumerate() {
                    if let Some(sa) = slot.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
                        sas.push((i as u64, sa.cfg.spi));
                    }
                }
                Ok(serde_json::to_vec(&serde_json::json!({ "sas": sas })).unwrap_or_default())
            }
            other => Err(format!(
                "esp_sad has no control operation `{other}` (add_sa, del_sa, sa_stats, get_sas)"
            )),
        }
    }

    fn drain_events(&self) -> Vec<String> {
        let mut v = vec![];
        for s in &self.db.slots {
            if let Some(sa) = s.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
                v.extend(sa.drain_events());
            }
        }
        v
    }
}

/// Bytes left free in front of the payload `encap_split` and `decap_split` make (the buffer they
/// write it into): the engine's deparser puts the headers it emits there and sends that buffer,
/// without copying the payload again (Ethernet, VLAN tags and an outer IPv6 header fit).
const HEADROOM: usize = 64;

/// Largest inner header argument a bound `encap_split` reads onto the stack (larger ones take the
/// general call).
const BOUND_HEADER_MAX: usize = 64;

/// A narrow argument (an SA index, a status, a version, an SPI): one slot word when it is exactly
/// one field of whole bytes, else its layout.
enum Word {
    Slot { slot: usize, mask: u64 },
    Layout(ArgLayout),
}

impl Word {
    fn of(a: &BoundArg<'_>) -> Option<Word> {
        let l = a.layout;
        if l.nbytes() > 8 {
            return None;
        }
        Some(match l.single_field() {
            Some(slot) => Word::Slot {
                slot: slot as usize,
                mask: if l.width() >= 64 {
                    u64::MAX
                } else {
                    (1u64 << l.width()) - 1
                },
            },
            None => Word::Layout(l.clone()),
        })
    }

    /// The argument's value (what `BitBuf::as_u64` gives on the general path).
    #[inline(always)]
    fn read(&self, slots: &[u64]) -> u64 {
        match self {
            Word::Slot { slot, mask } => slots.get(*slot).map_or(0, |v| v & mask),
            Word::Layout(l) => {
                let mut b = [0u8; 8];
                l.read(slots, &mut b[8 - l.nbytes()..]);
                u64::from_be_bytes(b)
            }
        }
    }

    /// Write `v` back, truncated to the argument's width (what `BitBuf::set_u64` and the engine's
    /// write-back of an `out` argument do on the general path).
    #[inline(always)]
    fn write(&self, slots: &mut [u64], v: u64) {
        match self {
            Word::Slot { slot, mask } => {
                if let Some(x) = slots.get_mut(*slot) {
                    *x = v & mask;
                }
            }
            Word::Layout(l) => {
                let w = l.width();
                let v = if w < 64 { v & ((1u64 << w) - 1) } else { v };
                l.write(&v.to_be_bytes()[8 - l.nbytes()..], slots);
            }
        }
    }
}

/// The two header arguments of `encap_split` / `decap_split` written back: the one of IP version
/// `v` from its bytes, the other (all zeros, as the general path passes an `out` argument in)
/// cleared field by field.
#[inline(always)]
fn write_header(
    v: u64,
    (l4, b4): (&ArgLayout, &[u8]),
    (l6, b6): (&ArgLayout, &[u8]),
    slots: &mut [u64],
) {
    match v {
        4 => {
            l4.write(b4, slots);
            l6.clear(slots);
        }
        6 => {
            l4.clear(slots);
            l6.write(b6, slots);
        }
        _ => {
            l4.clear(slots);
            l6.clear(slots);
        }
    }
}

/// A bound `encap_split(sa_index, inner_header, outer4, outer6, outer_version, status)`.
struct BoundEncapSplit {
    db: Arc<Sad>,
    index: Word,
    head: ArgLayout,
    /// The engine may vouch for `head` ([`BoundArg::frame_prefix`]).
    vouchable: bool,
    outer4: ArgLayout,
    outer6: ArgLayout,
    version: Word,
    status: Word,
}

impl BoundCall for BoundEncapSplit {
    fn call(&self, slots: &mut [u64], payload: &mut Payload<'_>) -> Result<(), ExternError> {
        let mut buf = [0u8; BOUND_HEADER_MAX];
        let n = self.head.nbytes();
        let head = if self.vouchable && payload.prefix_vouched(n) {
            // the header's fields hold the bytes in front of the payload: the inner packet is read
            // in one piece
            None
        } else {
            self.head.read(slots, &mut buf[..n]);
            Some(&buf[..n])
        };
        // `out` arguments start as zeros, as on the general path
        let (mut o4, mut o6) = ([0u8; 20], [0u8; 40]);
        let (v, st) =
            self.db
                .encap_split(self.index.read(slots), head, n, &mut o4, &mut o6, payload);
        write_header(v, (&self.outer4, &o4), (&self.outer6, &o6), slots);
        self.version.write(slots, v);
        self.status.write(slots, st);
        Ok(())
    }
}

/// A bound `decap_split(sa_index, inner4, inner6, inner_version, status)`.
struct BoundDecapSplit {
    db: Arc<Sad>,
    index: Word,
    inner4: ArgLayout,
    inner6: ArgLayout,
    version: Word,
    status: Word,
}

impl BoundCall for BoundDecapSplit {
    fn call(&self, slots: &mut [u64], payload: &mut Payload<'_>) -> Result<(), ExternError> {
        let (mut i4, mut i6) = ([0u8; 20], [0u8; 40]);
        let (v, st) = self
            .db
            .with_sa(self.index.read(slots), |sa| {
                Sad::decap_with(sa, payload, Some((&mut i4, &mut i6)))
            })
            .unwrap_or((0, NO_SA));
        write_header(v, (&self.inner4, &i4), (&self.inner6, &i6), slots);
        self.version.write(slots, v);
        self.status.write(slots, st);
        Ok(())
    }
}

/// A bound `lifetime_event(sa_index, event)` or `lifetime_event(sa_index, event, spi)`.
struct BoundLifetime {
    db: Arc<Sad>,
    index: Word,
    event: Word,
    spi: Option<Word>,
}

impl BoundCall for BoundLifetime {
    fn call(&self, slots: &mut [u64], _payload: &mut Payload<'_>) -> Result<(), ExternError> {
        let (ev, spi) = self.db.lifetime_event(self.index.read(slots));
        self.event.write(slots, ev);
        if let Some(l) = &self.spi {
            l.write(slots, spi);
        }
        Ok(())
    }
}

/// Decapsulate a whole outer IP packet (helper for tests and tools).
pub fn decap_ip(sa: &Sa, packet: &[u8], out: &mut Vec<u8>) -> Result<u64, EspError> {
    sa.decapsulate(esp_of_ip(packet)?, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::esp::{Cipher, Integ, Limits};
    use crate::layout::Part;
    use std::net::IpAddr;

    fn sa_cfg(spi: u32, tunnel: Option<(&str, &str)>, soft_packets: Option<u64>) -> SaConfig {
        SaConfig {
            spi,
            cipher: Cipher::AesGcm128,
            integ: Integ::None,
            enc_key: (0..20u8).map(|b| b ^ spi as u8).collect(),
            auth_key: vec![],
            esn: false,
            replay_window: 64,
            tunnel: tunnel
                .map(|(a, b)| (a.parse::<IpAddr>().unwrap(), b.parse::<IpAddr>().unwrap())),
            soft: Limits {
                packets: soft_packets,
                ..Limits::default()
            },
            hard: Limits::default(),
            initial_seq: 0,
            udp_encap: None,
        }
    }

    /// An `esp_sad` with SA 0 (IPv4 tunnel), 1 (IPv6 tunnel), 2 (no tunnel: transport), 3 (IPv4
    /// tunnel, soft limit after one packet).
    fn sad() -> Box<dyn ExternObject> {
        let obj = EspSadType
            .instantiate(
                "sad",
                &[BitBuf {
                    width: 32,
                    bytes: vec![0, 0, 0, 8],
                }],
            )
            .unwrap();
        let sas = [
            sa_cfg(0x100, Some(("192.0.2.1", "198.51.100.1")), None),
            sa_cfg(0x101, Some(("2001:db8::1", "2001:db8::2")), None),
            sa_cfg(0x102, None, None),
            sa_cfg(0x103, Some(("192.0.2.1", "198.51.100.1")), Some(1)),
        ];
        for (i, c) in sas.into_iter().enumerate() {
            let j = serde_json::json!({ "index": i, "sa": c });
            obj.control("add_sa", j.to_string().as_bytes()).unwrap();
        }
        obj
    }

    /// Slots as a gateway program holds them: 0 the SA index, 1..=12 an IPv4 header's fields,
    /// 13..=22 an IPv6 header's (its addresses two words each), 23 a version, 24 a status, 25 an
    /// event, 26 an SPI.
    fn layouts() -> (ArgLayout, ArgLayout, ArgLayout, [ArgLayout; 4]) {
        let f = |slot, width| Part::Field { slot, width };
        let v4 = [4, 4, 8, 16, 16, 3, 13, 8, 8, 16, 32, 32]
            .iter()
            .enumerate()
            .map(|(i, w)| f(1 + i as u32, *w))
            .collect::<Vec<_>>();
        let v6 = [
            f(13, 4),
            f(14, 8),
            f(15, 20),
            f(16, 16),
            f(17, 8),
            f(18, 8),
            f(19, 128),
            f(21, 128),
        ];
        let one = |slot, width| ArgLayout::new(width, &[f(slot, width)]).unwrap();
        (
            ArgLayout::new(160, &v4).unwrap(),
            ArgLayout::new(320, &v6).unwrap(),
            one(0, 32),
            [one(23, 8), one(24, 8), one(25, 8), one(26, 32)],
        )
    }

    /// Run a call the general way (bit strings from the layouts, `out` ones zero, written back in
    /// order) and the bound way on copies of `slots` and of the payload; both must leave the same
    /// slots and payload.
    fn both_ways(
        method: u32,
        args: &[(Dir, &ArgLayout)],
        slots: &[u64],
        pkt: &[u8],
        at: usize,
    ) -> (Vec<u64>, Vec<u8>) {
        both_ways_after(|_| {}, method, args, slots, pkt, at)
    }

    /// [`both_ways`] on instances that `prep` ran on first.
    fn both_ways_after(
        prep: impl Fn(&dyn ExternObject),
        method: u32,
        args: &[(Dir, &ArgLayout)],
        slots: &[u64],
        pkt: &[u8],
        at: usize,
    ) -> (Vec<u64>, Vec<u8>) {
        let (general_obj, bound_obj) = (sad(), sad());
        prep(&*general_obj);
        prep(&*bound_obj);
        let mut bufs: Vec<BitBuf> = args
            .iter()
            .map(|(d, l)| {
                let mut b = BitBuf::zero(l.width());
                if *d == Dir::In {
                    l.read(slots, &mut b.bytes);
                }
                b
            })
            .collect();
        let (mut g_slots, mut g_owned) = (slots.to_vec(), vec![]);
        let mut p = Payload::in_packet(pkt, at, &mut g_owned);
        general_obj.call(method, &mut bufs, None, &mut p).unwrap();
        let g_payload = p.bytes().to_vec();
        for ((d, l), b) in args.iter().zip(&bufs) {
            if *d != Dir::In {
                l.write(&b.bytes, &mut g_slots);
            }
        }
        let bargs: Vec<BoundArg> = args
            .iter()
            .map(|(dir, layout)| BoundArg {
                dir: *dir,
                layout,
                frame_prefix: false,
            })
            .collect();
        let bound = bound_obj.bind(method, &bargs, None).expect("bound");
        let (mut b_slots, mut b_owned) = (slots.to_vec(), vec![]);
        let mut p = Payload::in_packet(pkt, at, &mut b_owned);
        bound.call(&mut b_slots, &mut p).unwrap();
        assert_eq!(b_slots, g_slots, "method {method}: slots");
        assert_eq!(p.bytes(), &g_payload[..], "method {method}: payload");
        (b_slots, g_payload)
    }

    /// An inner IPv4 (or, `v6`, IPv6) packet of `len` bytes behind a 14-byte Ethernet header.
    fn frame(len: usize, v6: bool) -> Vec<u8> {
        let mut f = vec![0u8; 14 + len];
        for (i, b) in f.iter_mut().enumerate() {
            *b = (i * 7 + 3) as u8;
        }
        if v6 {
            f[14] = 0x60;
            f[18..20].copy_from_slice(&((len - 40) as u16).to_be_bytes());
        } else {
            f[14] = 0x45;
            f[16..18].copy_from_slice(&(len as u16).to_be_bytes());
        }
        f
    }

    /// The bound `encap_split`, `decap_split` and `lifetime_event` call sites do what the general
    /// call does: both tunnel families, an SA without tunnel endpoints, an empty slot, an inner
    /// IPv6 packet, a packet that fails its ICV, a lifetime event.
    #[test]
    fn bound_esp_calls_match_the_general_call() {
        let (v4, v6, index, [version, status, event, spi]) = layouts();
        let encap_args = |head: &ArgLayout| {
            let h = head.clone();
            move |index: &ArgLayout,
                  v4: &ArgLayout,
                  v6: &ArgLayout,
                  version: &ArgLayout,
                  status: &ArgLayout| {
                vec![
                    (Dir::In, index.clone()),
                    (Dir::In, h.clone()),
                    (Dir::Out, v4.clone()),
                    (Dir::Out, v6.clone()),
                    (Dir::Out, version.clone()),
                    (Dir::Out, status.clone()),
                ]
            }
        };
        for (sa, want_version, want_status) in [
            (0u64, 4u64, OK),
            (1, 6, OK),
            (2, 0, EspError::BadInner.code() as u64),
            (7, 0, NO_SA),
        ] {
            for inner_v6 in [false, true] {
                let pkt = frame(if inner_v6 { 300 } else { 200 }, inner_v6);
                // the inner IP header parsed into its header's slots (the IPv4 one: the payload
                // follows it)
                let mut slots = vec![0x5a5a_5a5a_5a5a_5a5a; 27];
                slots[0] = sa;
                let head = if inner_v6 { &v6 } else { &v4 };
                let hl = if inner_v6 { 40 } else { 20 };
                head.write(&pkt[14..14 + hl], &mut slots);
                let args = encap_args(head)(&index, &v4, &v6, &version, &status);
                let refs: Vec<(Dir, &ArgLayout)> = args.iter().map(|(d, l)| (*d, l)).collect();
                let (after, esp) = both_ways(ENCAP_SPLIT, &refs, &slots, &pkt, 14 + hl);
                // the same with the header vouched for by the engine: read in one piece from the
                // packet
                {
                    let bargs: Vec<BoundArg> = refs
                        .iter()
                        .enumerate()
                        .map(|(i, (dir, layout))| BoundArg {
                            dir: *dir,
                            layout,
                            frame_prefix: i == 1,
                        })
                        .collect();
                    let bound = sad().bind(ENCAP_SPLIT, &bargs, None).expect("bound");
                    let (mut s2, mut owned) = (slots.clone(), vec![]);
                    let mut p = Payload::in_packet(&pkt, 14 + hl, &mut owned);
                    p.vouch_prefix(hl);
                    bound.call(&mut s2, &mut p).unwrap();
                    assert_eq!(
                        (&s2, p.bytes()),
                        (&after, &esp[..]),
                        "vouched header, SA {sa}"
                    );
                }
                assert_eq!(
                    (after[23], after[24]),
                    (want_version, want_status),
                    "SA {sa}"
                );
                if want_status != OK {
                    assert_eq!(esp, &pkt[14 + hl..], "a failed encap leaves the payload");
                    continue;
                }
                // the outer header and ESP are what `Sa::encapsulate` makes of the inner packet
                let mut whole = vec![];
                Sa::new(sa_cfg(
                    0x100 + sa as u32,
                    [
                        Some(("192.0.2.1", "198.51.100.1")),
                        Some(("2001:db8::1", "2001:db8::2")),
                    ][sa as usize],
                    None,
                ))
                .unwrap()
                .encapsulate(&pkt[14..], &mut whole)
                .unwrap();
                let ohl = if want_version == 4 { 20 } else { 40 };
                let mut outer = vec![0u8; ohl];
                (if want_version == 4 { &v4 } else { &v6 }).read(&after, &mut outer);
                assert_eq!((&outer[..], &esp[..]), (&whole[..ohl], &whole[ohl..]));
                // decap_split of that ESP gives the inner header back in its header and the rest as
                // payload
                let mut esp_frame = vec![0u8; 14 + ohl];
                esp_frame.extend_from_slice(&esp);
                let mut slots = vec![0x1234; 27];
                slots[0] = sa;
                let dargs = [
                    (Dir::In, &index),
                    (Dir::Out, &v4),
                    (Dir::Out, &v6),
                    (Dir::Out, &version),
                    (Dir::Out, &status),
                ];
                let (after, inner) = both_ways(DECAP_SPLIT, &dargs, &slots, &esp_frame, 14 + ohl);
                assert_eq!((after[23], after[24]), (if inner_v6 { 6 } else { 4 }, OK));
                let mut h = vec![0u8; hl];
                head.read(&after, &mut h);
                assert_eq!((&h[..], &inner[..]), (&pkt[14..14 + hl], &pkt[14 + hl..]));
                // the same ESP with its ICV broken
                *esp_frame.last_mut().unwrap() ^= 1;
                let (after, _) = both_ways(DECAP_SPLIT, &dargs, &slots, &esp_frame, 14 + ohl);
                assert_eq!(
                    (after[23], after[24]),
                    (0, EspError::IcvMismatch.code() as u64)
                );
            }
        }
        // lifetime_event with and without the SPI, an SA with a pending event (SA 3 reaches its
        // soft limit with the packet `prep` encapsulates) and an empty slot
        let prep = |o: &dyn ExternObject| {
            let pkt = frame(60, false);
            let (mut owned, mut args) = (
                vec![],
                [
                    BitBuf {
                        width: 32,
                        bytes: vec![0, 0, 0, 3],
                    },
                    BitBuf::zero(8),
                ],
            );
            o.call(
                ENCAP,
                &mut args,
                None,
                &mut Payload::in_packet(&pkt, 14, &mut owned),
            )
            .unwrap();
            assert_eq!(args[1].as_u64(), OK);
        };
        for sa in [0u64, 3, 7] {
            let mut slots = vec![9u64; 27];
            slots[0] = sa;
            let (after, _) = both_ways_after(
                prep,
                LIFETIME_SPI,
                &[(Dir::In, &index), (Dir::Out, &event), (Dir::Out, &spi)],
                &slots,
                &[],
                0,
            );
            let want = match sa {
                7 => (0, 0),
                3 => (1, 0x103),
                _ => (0, 0x100 + sa),
            };
            assert_eq!((after[25], after[26]), want, "SA {sa}");
            let (after, _) = both_ways_after(
                prep,
                LIFETIME,
                &[(Dir::In, &index), (Dir::Out, &event)],
                &slots,
                &[],
                0,
            );
            assert_eq!(
                (after[25], after[26]),
                (want.0, 9),
                "SA {sa}: the SPI's slot untouched"
            );
        }
    }

    /// `encap` with a header argument makes the outer header and ESP of `encap_split` in one
    /// payload, and `decap` by SPI undoes it.
    #[test]
    fn encap_and_decap_by_spi() {
        let o = sad();
        let pkt = frame(120, false);
        let mut owned = vec![];
        let mut p = Payload::in_packet(&pkt, 34, &mut owned);
        let mut args = [
            BitBuf {
                width: 32,
                bytes: vec![0; 4],
            },
            BitBuf {
                width: 160,
                bytes: pkt[14..34].to_vec(),
            },
            BitBuf::zero(8),
        ];
        o.call(ENCAP_HDR, &mut args, None, &mut p).unwrap();
        assert_eq!(args[2].as_u64(), OK);
        let mut whole = vec![];
        Sa::new(sa_cfg(0x100, Some(("192.0.2.1", "198.51.100.1")), None))
            .unwrap()
            .encapsulate(&pkt[14..], &mut whole)
            .unwrap();
        assert_eq!(p.bytes(), &whole[..]);
        let esp = p.bytes()[20..].to_vec();
        let mut owned2 = vec![];
        let mut p = Payload::owned(&mut owned2);
        p.set(&esp);
        let mut args = [
            BitBuf {
                width: 32,
                bytes: 0x100u32.to_be_bytes().to_vec(),
            },
            BitBuf::zero(32),
            BitBuf::zero(8),
        ];
        o.call(DECAP, &mut args, None, &mut p).unwrap();
        assert_eq!((args[1].as_u64(), args[2].as_u64()), (0, OK));
        assert_eq!(p.bytes(), &pkt[14..]);
        // too few arguments: a precise error, not a panic
        assert!(o.call(DECAP, &mut args[..2], None, &mut p).is_err());
    }

    /// `esp_sad` names `del_sa` as the undo of `add_sa` (what a P4Runtime DELETE of an SA entry
    /// runs), and nothing else has an undo.
    #[test]
    fn add_sa_is_undone_by_del_sa() {
        assert_eq!(EspSadType.undo_op("add_sa"), Some("del_sa"));
        assert_eq!(EspSadType.undo_op("del_sa"), None);
        assert_eq!(EspSadType.undo_op("sa_stats"), None);
    }
}
