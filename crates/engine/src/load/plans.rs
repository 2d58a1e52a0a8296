//! Facts about the program's layout computed once when the engine is built: per header type, how to
//! extract and emit it ([`HeaderPlan`]); where the standard metadata fields the pipeline reads and
//! sets live ([`StdSlots`]).

use crate::bits::{self, mask64 as mask};
use p4sec_ir::*;

/// Precomputed extraction facts of one header type.
#[derive(Clone, Debug)]
pub(crate) struct HeaderPlan {
    /// Sum of the fixed field widths (bits).
    pub fixed: usize,
    /// Maximum width of the varbit field (0 when there is none).
    pub var_max: u32,
    /// All fields fixed, and each slot word of each field read with one 64-bit big-endian load:
    /// fields of at most 56 bits, and wider ones (IPv6 addresses) whose slot words each lie
    /// within 8 bytes from a byte boundary.
    pub narrow: bool,
    /// All fields fixed and at most 56 bits wide (a 64-bit accumulator takes each with the bits
    /// of the byte before it left over).
    pub small: bool,
    /// For narrow headers: per slot word, in header order (a field of at most 64 bits is one; a
    /// wider one has a word per 64 bits of its value, its most significant first), (slot, byte
    /// offset in the header, right shift after a 64-bit load, mask, width).
    pub fields: Vec<(u32, u32, u32, u64, u32)>,
    /// For narrow headers of at most 128 bytes: how to build the header's bytes as big-endian
    /// 64-bit words, one (slot, mask, right shift, left shift, word) per slot word and header
    /// word it touches.
    pub emit_ops: Vec<(u32, u64, u32, u32, u32)>,
}

impl HeaderPlan {
    pub fn new(h: &HeaderLayout) -> HeaderPlan {
        let mut fixed = 0usize;
        let mut var_max = 0;
        for f in &h.fields {
            if f.varbit_len.is_some() {
                var_max = f.loc.width;
            } else {
                fixed += f.loc.width as usize;
            }
        }
        // each field's slot words as (slot, first bit in the header, width), in header order:
        // word j of a wide field holds its value's bits [64j, 64j + 64), the header's bits
        // [pos + w - 64j - len, pos + w - 64j)
        let mut pieces = vec![];
        let mut pos = 0u32;
        for f in h.fields.iter().filter(|f| f.varbit_len.is_none()) {
            let w = f.loc.width;
            if w <= 64 {
                pieces.push((f.loc.slot, pos, w));
            } else {
                for j in (0..words_for(w)).rev() {
                    let len = (w - 64 * j).min(64);
                    pieces.push((f.loc.slot + j, pos + w - 64 * j - len, len));
                }
            }
            pos += w;
        }
        let small = var_max == 0 && h.fields.iter().all(|f| f.loc.width <= 56);
        let narrow = var_max == 0 && pieces.iter().all(|&(_, q, w)| w <= 56 || q % 8 + w <= 64);
        let mut fields = vec![];
        let mut emit_ops = vec![];
        if narrow {
            for &(slot, pos, w) in &pieces {
                fields.push((slot, pos / 8, 64 - pos % 8 - w, mask(w), w));
                if w > 0 && fixed <= 1024 {
                    // the field's bits [pos, pos + w) of the header, in each 64-bit word they
                    // overlap
                    for k in pos / 64..=(pos + w - 1) / 64 {
                        let s = 64 * (k as i64 + 1) - (pos + w) as i64;
                        let (r, l) = if s >= 0 {
                            (0, s as u32)
                        } else {
                            ((-s) as u32, 0)
                        };
                        emit_ops.push((slot, mask(w), r, l, k));
                    }
                }
            }
        }
        HeaderPlan {
            fixed,
            var_max,
            narrow,
            small,
            fields,
            emit_ops,
        }
    }
}

/// Where the standard metadata fields the pipeline frame sets and reads per packet live: (slot,
/// mask of the width). A field the program's standard_metadata_t does not have maps to the worker's
/// sink slot (the one after the program's slots) with mask 0.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StdSlots {
    pub(crate) ingress_port: (usize, u64),
    pub(crate) instance_type: (usize, u64),
    pub(crate) packet_length: (usize, u64),
    pub(crate) egress_port: (usize, u64),
    pub(crate) egress_spec: (usize, u64),
    pub(crate) egress_rid: (usize, u64),
    pub(crate) mcast_grp: (usize, u64),
    pub(crate) priority: (usize, u64),
    pub(crate) enq_timestamp: (usize, u64),
    pub(crate) enq_qdepth: (usize, u64),
    pub(crate) deq_timedelta: (usize, u64),
    pub(crate) deq_qdepth: (usize, u64),
    pub(crate) ingress_ts: (usize, u64),
    pub(crate) egress_ts: (usize, u64),
    /// Which of the traffic manager's fields the program refers to (the others are never written).
    pub(crate) tm: TmFieldUse,
    /// `tm.clock || tm.queue`: the one test the inline path makes.
    pub(crate) tm_any: bool,
}

impl StdSlots {
    pub(crate) fn new(p: &Program) -> StdSlots {
        let sink = p.slots as usize;
        let at = |l: Loc| {
            if l.width == 0 {
                (sink, 0)
            } else {
                (l.slot as usize, bits::mask64(l.width))
            }
        };
        let sm = &p.std_meta;
        let tm = p.tm_field_use();
        StdSlots {
            ingress_port: at(sm.ingress_port),
            instance_type: at(sm.instance_type),
            packet_length: at(sm.packet_length),
            egress_port: at(sm.egress_port),
            egress_spec: at(sm.egress_spec),
            egress_rid: at(sm.egress_rid),
            mcast_grp: at(sm.mcast_grp),
            priority: at(sm.priority),
            enq_timestamp: at(sm.enq_timestamp),
            enq_qdepth: at(sm.enq_qdepth),
            deq_timedelta: at(sm.deq_timedelta),
            deq_qdepth: at(sm.deq_qdepth),
            ingress_ts: at(sm.ingress_global_timestamp),
            egress_ts: at(sm.egress_global_timestamp),
            tm,
            tm_any: tm.clock || tm.queue,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(widths: &[u32]) -> HeaderLayout {
        let mut slot = 1;
        let fields = widths
            .iter()
            .enumerate()
            .map(|(i, &w)| {
                let f = FieldLayout {
                    name: format!("f{i}"),
                    loc: Loc { slot, width: w },
                    varbit_len: None,
                };
                slot += words_for(w);
                f
            })
            .collect();
        HeaderLayout {
            name: "h".into(),
            valid: Loc { slot: 0, width: 1 },
            fields,
            max_bits: widths.iter().sum(),
        }
    }

    /// An IPv6 header (two 128-bit addresses on byte boundaries) is read a slot word at a time:
    /// each address as two 64-bit loads, its most significant word first in header order, into
    /// its slots least significant first; a field wider than 56 bits off a byte boundary makes
    /// the header not narrow; only a header of fields of at most 56 bits is `small`.
    #[test]
    fn wide_fields_on_byte_boundaries_are_read_a_slot_word_at_a_time() {
        let v6 = HeaderPlan::new(&layout(&[4, 8, 20, 16, 8, 8, 128, 128]));
        assert!(v6.narrow && !v6.small);
        assert_eq!(v6.fixed, 320);
        // src: slots 7 (low word) and 8 (high), header bytes 8..24; dst: slots 9, 10, bytes 24..40
        let wide: Vec<_> = v6.fields[6..]
            .iter()
            .map(|f| (f.0, f.1, f.2, f.4))
            .collect();
        assert_eq!(
            wide,
            vec![
                (8, 8, 0, 64),
                (7, 16, 0, 64),
                (10, 24, 0, 64),
                (9, 32, 0, 64)
            ]
        );
        // a 72-bit field after a byte: its high 8 bits, then its low 64
        let odd = HeaderPlan::new(&layout(&[8, 72]));
        assert!(odd.narrow);
        let f: Vec<_> = odd
            .fields
            .iter()
            .map(|f| (f.0, f.1, f.2, f.3, f.4))
            .collect();
        assert_eq!(
            f,
            vec![
                (1, 0, 56, 0xff, 8),
                (3, 1, 56, 0xff, 8),
                (2, 2, 0, u64::MAX, 64)
            ]
        );
        // the emit ops put each slot word into the header words it overlaps
        assert!(odd.emit_ops.iter().any(|o| o.0 == 2 && o.4 == 1));
        // a 65-bit field two bits off a byte boundary: its low word spans 9 bytes
        assert!(!HeaderPlan::new(&layout(&[6, 65])).narrow);
        assert!(HeaderPlan::new(&layout(&[7, 56, 1])).small);
    }
}
