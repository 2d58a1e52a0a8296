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
    /// All fields fixed and at most 56 bits wide: each is read with one 64-bit big-endian load.
    pub narrow: bool,
    /// For narrow headers: per field, (slot, byte offset in the header, right shift after a 64-bit
    /// load, mask, width).
    pub fields: Vec<(u32, u32, u32, u64, u32)>,
    /// For narrow headers of at most 128 bytes: how to build the header's bytes as big-endian
    /// 64-bit words, one (slot, mask, right shift, left shift, word) per field and word it touches.
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
        let narrow = var_max == 0 && h.fields.iter().all(|f| f.loc.width <= 56);
        let mut fields = vec![];
        let mut emit_ops = vec![];
        if narrow {
            let mut pos = 0u32;
            for f in &h.fields {
                let w = f.loc.width;
                fields.push((f.loc.slot, pos / 8, 64 - pos % 8 - w, mask(w), w));
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
                        emit_ops.push((f.loc.slot, mask(w), r, l, k));
                    }
                }
                pos += w;
            }
        }
        HeaderPlan {
            fixed,
            var_max,
            narrow,
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
