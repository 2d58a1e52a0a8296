//! Bound call sites of `esp_sad` ([`ExternObject::bind`](crate::iface::ExternObject::bind)):
//! `encap_split`, `decap_split` and `lifetime_event` reading their arguments straight from the
//! engine's slots and writing their results back through the arguments' layouts, doing what the
//! general call (`packet.rs`) does with the same bit strings.

use super::methods::{DECAP_SPLIT, ENCAP_SPLIT, LIFETIME, LIFETIME_SPI};
use super::sa_table::Sad;
use crate::iface::{BoundArg, BoundCall, ExternError, Payload};
use crate::layout::ArgLayout;
use crate::p4::common::NO_SA;
use std::sync::Arc;

/// Largest inner header argument a bound `encap_split` reads onto the stack (larger ones take the
/// general call).
const BOUND_HEADER_MAX: usize = 64;

/// `encap_split`, `decap_split` and `lifetime_event` call sites read their arguments from the
/// slots and write their results back through the layouts, with no argument buffers (the other
/// methods take the general call).
pub(super) fn bind(
    db: &Arc<Sad>,
    method: u32,
    args: &[BoundArg<'_>],
) -> Option<Box<dyn BoundCall>> {
    let db = db.clone();
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
