//! The ESP path of `esp_sad` through the packet: encapsulation and decapsulation of the payload
//! with the SA a slot or an SPI names, the headers split off or put in front, and the general call
//! of every method (arguments as bit strings).

use super::methods::{
    DECAP, DECAP_SA, DECAP_SPLIT, ENCAP, ENCAP_HDR, ENCAP_SPLIT, LIFETIME, LIFETIME_SPI,
};
use super::sa_table::Sad;
use crate::esp::{EspError, Sa};
use crate::iface::{BitBuf, ExternError, Payload};
use crate::p4::common::{NO_SA, OK, SCRATCH};

/// Bytes left free in front of the payload `encap_split` and `decap_split` make (the buffer they
/// write it into): the engine's deparser puts the headers it emits there and sends that buffer,
/// without copying the payload again (Ethernet, VLAN tags and an outer IPv6 header fit).
pub(super) const HEADROOM: usize = 64;

impl Sad {
    /// `encap`: the inner packet is `head` (an IP header given as a parsed header, or nothing)
    /// followed by the payload; the payload becomes outer IP header, ESP header, IV, ciphertext and
    /// ICV. The status.
    pub(super) fn encap(&self, i: u64, head: &[u8], payload: &mut Payload<'_>) -> u64 {
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
    pub(super) fn encap_split(
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
    pub(super) fn decap_with(
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
    pub(super) fn decap_spi(&self, spi: u32, payload: &mut Payload<'_>) -> (u64, u64) {
        let idx = self.slot_of_spi(spi);
        idx.and_then(|i| {
            self.with_sa(i as u64, |sa| {
                (i as u64, Self::decap_with(sa, payload, None).1)
            })
        })
        .unwrap_or((0, NO_SA))
    }

    /// The lifetime event the SA in slot `i` reached since the last call, and its SPI (0, 0 without
    /// an SA).
    pub(super) fn lifetime_event(&self, i: u64) -> (u64, u64) {
        self.with_sa(i, |sa| (sa.take_event() as u64, sa.cfg.spi as u64))
            .unwrap_or((0, 0))
    }
}

/// The general call of method `method` (its index) with its arguments as bit strings.
pub(super) fn call(
    db: &Sad,
    method: u32,
    args: &mut [BitBuf],
    payload: &mut Payload<'_>,
) -> Result<(), ExternError> {
    let n = args.len();
    let short = || ExternError::BadArgument(format!("esp_sad method {method} given {n} arguments"));
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
