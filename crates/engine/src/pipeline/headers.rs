//! The headers stage: header extraction (the parser's `extract`), emission (the deparser's `emit`),
//! header copies, and their compiled fast paths; the deparser's deferred `update_checksum`s,
//! computed from the emitted bytes.

use crate::bits::{mask64 as mask, read_wide};
use crate::code::Flow;
use crate::engine::SF;
use crate::load::plans::HeaderPlan;
use crate::{Engine, Worker};
use p4sec_externs::checksum;
use p4sec_externs::layout::read_bits;
use p4sec_ir::*;

/// `extract` of a fixed header instance whose fields are all narrow: when the header starts on a
/// byte with 8 bytes to spare after it, one unaligned 64-bit big-endian load per field, the plan
/// resolved here once. Anything else (a bit-aligned cursor, the end of the packet, wide fields)
/// takes the interpreter's path.
pub(crate) fn extract_static(h: u32) -> SF {
    /// Per field (slot, byte offset, right shift, mask); the header's bits; the bytes read (the
    /// header plus 8 bytes of slack); the validity slot; one past the highest slot written.
    type Plan = (Vec<(usize, usize, u32, u64)>, usize, usize, usize, usize);
    let plan: std::sync::OnceLock<Option<Plan>> = std::sync::OnceLock::new();
    let hr = HeaderRef::Static(h);
    Box::new(move |e, w| {
        let fast = plan.get_or_init(|| {
            let layout = e.prog.headers.get(h as usize)?;
            let p = HeaderPlan::new(layout);
            let need = p.fixed.div_ceil(8) + 8;
            let mut fields: Vec<(usize, usize, u32, u64)> = p
                .fields
                .iter()
                .map(|&(slot, off, shift, m, _)| (slot as usize, off as usize, shift, m))
                .collect();
            // padded to a multiple of four with repeats of the first field (the same word into the
            // same slot), so that fields are read four at a time
            while !fields.is_empty() && !fields.len().is_multiple_of(4) {
                fields.push(fields[0]);
            }
            // every load stays inside the `need` bytes taken below
            let inside = fields.iter().all(|f| f.1 + 8 <= need);
            let end = fields
                .iter()
                .map(|f| f.0 + 1)
                .max()
                .unwrap_or(0)
                .max(layout.valid.slot as usize + 1);
            (p.narrow && inside).then_some((fields, p.fixed, need, layout.valid.slot as usize, end))
        });
        if let Some((fields, fixed, need, valid, end)) = fast {
            let pos = w.packet.cursor;
            if pos % 8 == 0 && w.trace.is_none() && *end <= w.slots.len() {
                if let Some(bytes) = w.packet.pkt.get(pos / 8..pos / 8 + need) {
                    let slots = &mut w.slots[..];
                    for quad in fields.chunks_exact(4) {
                        for &(slot, off, shift, m) in quad {
                            // SAFETY: off + 8 <= need == bytes.len() and slot < end <= slots.len(),
                            // both checked above (the plan's invariants)
                            unsafe {
                                let word = u64::from_be_bytes(
                                    *(bytes.as_ptr().add(off) as *const [u8; 8]),
                                );
                                *slots.get_unchecked_mut(slot) = (word >> shift) & m;
                            }
                        }
                    }
                    w.packet.cursor = pos + fixed;
                    w.slots[*valid] = 1;
                    if let Some(o) = w.packet.hdr_off.get_mut(h as usize) {
                        *o = pos / 8;
                    }
                    return Flow::Next;
                }
            }
        }
        std::hint::cold_path();
        e.extract(w, &hr, None)
    })
}

/// `emit` of a fixed header instance whose fields are all narrow, on a byte boundary: the header's
/// bytes built as big-endian 64-bit words, a word at a time, straight into the output. Anything
/// else takes the interpreter's path.
pub(crate) fn emit_static(h: u32) -> SF {
    // ops, word ends, length, validity slot, the deferred checksum of this header: (bit, F's
    // offset, F's slot), and one past the highest slot read
    type Plan = (
        Vec<(usize, u64, u32, u32)>,
        Vec<usize>,
        usize,
        usize,
        Option<(u64, usize, usize)>,
        usize,
        Option<Vec<(usize, usize, u32)>>,
    );
    let plan: std::sync::OnceLock<Option<Plan>> = std::sync::OnceLock::new();
    let hr = HeaderRef::Static(h);
    Box::new(move |e, w| {
        let fast = plan.get_or_init(|| {
            let layout = e.prog.headers.get(h as usize)?;
            let p = HeaderPlan::new(layout);
            if !p.narrow || p.emit_ops.is_empty() || !p.fixed.is_multiple_of(8) {
                return None;
            }
            // the ops grouped by the word they build: `ends[k]` is where word k's ops end
            let mut ops: Vec<(u32, (usize, u64, u32, u32))> = p
                .emit_ops
                .iter()
                .map(|&(slot, m, r, l, k)| (k, (slot as usize, m, r, l)))
                .collect();
            ops.sort_by_key(|o| o.0);
            let words = p.fixed.div_ceil(64);
            let ends = (0..words)
                .map(|k| ops.iter().filter(|o| o.0 as usize <= k).count())
                .collect();
            let csum = e
                .deparser
                .deferred
                .iter()
                .position(|d| d.header == h as usize)
                .map(|i| {
                    (
                        1u64 << i,
                        e.deparser.deferred[i].f_off,
                        e.deparser.deferred[i].f_slot,
                    )
                });
            let end = ops.iter().map(|o| o.1 .0 + 1).max().unwrap_or(0);
            // every field whole bytes on a byte boundary: one 8-byte big-endian store per field at
            // its offset, in order (each store's spill past the field is overwritten by the next
            // field, or lies beyond the header's length)
            // (per slot word of the plan, in header order: a wide field's words too)
            let mut bytewise = Some(vec![]);
            for &(slot, off, shift, _, w) in &p.fields {
                let bit = off * 8 + 64 - shift - w;
                if bit % 8 != 0 || w % 8 != 0 {
                    bytewise = None;
                    break;
                }
                if w > 0 {
                    if let Some(b) = bytewise.as_mut() {
                        b.push((slot as usize, off as usize, 64 - w));
                    }
                }
            }
            // padded to a multiple of four with repeats of the last field (its bytes stored again,
            // after the store before it), so that fields are stored four at a time
            if let Some(b) = bytewise.as_mut() {
                while !b.is_empty() && b.len() % 4 != 0 {
                    b.push(b[b.len() - 1]);
                }
            }
            Some((
                ops.into_iter().map(|o| o.1).collect(),
                ends,
                p.fixed / 8,
                layout.valid.slot as usize,
                csum,
                end,
                bytewise,
            ))
        });
        match fast {
            Some((ops, ends, len, valid, csum, end, bytewise))
                if w.emit.bw.n % 8 == 0 && *end <= w.slots.len() =>
            {
                if w.slots[*valid] == 0 {
                    return Flow::Next;
                }
                if w.emit.bw.n != 0 {
                    let mut bw = w.emit.bw;
                    bw.finish(&mut w.emit.out);
                    w.emit.bw = bw;
                }
                let (slots, out) = (&w.slots[..], &mut w.emit.out);
                let base = out.len();
                out.reserve(ends.len() * 8 + 8);
                let dst = out.spare_capacity_mut().as_mut_ptr() as *mut u8;
                match bytewise {
                    Some(fields) => {
                        for quad in fields.chunks_exact(4) {
                            for &(slot, off, shl) in quad {
                                // SAFETY: slot < the plan's `end` <= slots.len(), checked above;
                                // off < len, and `reserve` made room for len + 8 bytes past `base`
                                unsafe {
                                    std::ptr::write_unaligned(
                                        dst.add(off) as *mut [u8; 8],
                                        (*slots.get_unchecked(slot) << shl).to_be_bytes(),
                                    )
                                };
                            }
                        }
                    }
                    None => {
                        let mut start = 0;
                        for (k, &end) in ends.iter().enumerate() {
                            let mut word = 0u64;
                            for &(slot, m, r, l) in &ops[start..end] {
                                // SAFETY: slot < the plan's `end` <= slots.len(), checked above
                                word |= ((unsafe { *slots.get_unchecked(slot) } & m) >> r) << l;
                            }
                            // SAFETY: `reserve` made room for `ends.len()` words past `base`
                            unsafe {
                                std::ptr::write_unaligned(
                                    dst.add(8 * k) as *mut [u8; 8],
                                    word.to_be_bytes(),
                                )
                            };
                            start = end;
                        }
                    }
                }
                // SAFETY: the first `len` (<= 8 * ends.len()) bytes past `base` were written above
                unsafe { out.set_len(base + len) };
                if let Some((bit, f_off, f_slot)) = *csum {
                    if w.emit.csum_pending & bit != 0 {
                        w.emit.csum_pending &= !bit;
                        let bytes = &mut w.emit.out[base..base + len];
                        let c = checksum::csum16_without(bytes, f_off) as u64;
                        bytes[f_off..f_off + 2].copy_from_slice(&(c as u16).to_be_bytes());
                        w.slots[f_slot] = c;
                    }
                }
            }
            _ => {
                std::hint::cold_path();
                if w.emit.csum_pending != 0 {
                    settle_checksums(e, w);
                }
                e.emit(w, &hr)
            }
        }
        Flow::Next
    })
}

/// Compute the deferred checksums still due from the fields (before an emit that cannot patch its
/// bytes, and after the deparser for headers it did not emit).
#[cold]
pub(crate) fn settle_checksums(e: &Engine, w: &mut Worker) {
    while w.emit.csum_pending != 0 {
        let i = w.emit.csum_pending.trailing_zeros() as usize;
        w.emit.csum_pending &= !(1u64 << i);
        if let Some(d) = e.deparser.deferred.get(i) {
            let v = (d.sum)(e, w) & d.m;
            w.slots[d.f_slot] = v;
        }
    }
}

impl Engine {
    // ------------------------------------------------------------ headers

    /// The header index a reference denotes (None when out of bounds).
    pub(crate) fn header_index(&self, w: &mut Worker, h: &HeaderRef) -> Option<u32> {
        match h {
            HeaderRef::Static(i) => Some(*i),
            HeaderRef::Dynamic { stack, index } => {
                let s = &self.prog.stacks[*stack as usize];
                let i = self.eval(w, index);
                s.elements
                    .get(i as usize)
                    .copied()
                    .filter(|h| *h != u32::MAX)
            }
            HeaderRef::Next { stack } => {
                let s = &self.prog.stacks[*stack as usize];
                let i = self.load(w, s.next_index);
                s.elements
                    .get(i as usize)
                    .copied()
                    .filter(|h| *h != u32::MAX)
            }
        }
    }

    #[inline(never)]
    pub(crate) fn extract(
        &self,
        w: &mut Worker,
        h: &HeaderRef,
        varbit_bits: Option<&Expr>,
    ) -> Flow {
        let Some(hi) = self.header_index(w, h) else {
            return Flow::Reject(self.layout.errors.stack_oob);
        };
        let layout = &self.prog.headers[hi as usize];
        let plan = &self.layout.headers[hi as usize];
        let (fixed, var_max) = (plan.fixed, plan.var_max);
        // the header's fields no longer come from a recorded offset (see `Worker::hdr_off`)
        if let Some(o) = w.packet.hdr_off.get_mut(hi as usize) {
            *o = crate::NO_OFFSET;
        }
        let var = match varbit_bits {
            Some(e) => {
                let n = self.eval(w, e);
                if n > var_max as u64 {
                    return Flow::Reject(self.layout.errors.header_too_short);
                }
                if !n.is_multiple_of(8) {
                    return Flow::Reject(self.layout.errors.invalid_arg);
                }
                n as usize
            }
            None => 0,
        };
        if w.packet.cursor + fixed + var > w.packet.pkt.len() * 8 {
            return Flow::Reject(self.layout.errors.too_short);
        }
        let mut pos = w.packet.cursor;
        if plan.narrow
            && pos.is_multiple_of(8)
            && pos / 8 + fixed.div_ceil(8) + 8 <= w.packet.pkt.len()
        {
            // fast path: one unaligned 64-bit big-endian load per field (8 bytes of slack past the
            // header)
            let base = pos / 8;
            let bytes = &w.packet.pkt[base..base + fixed.div_ceil(8) + 8];
            for &(slot, off, shift, m, _) in &plan.fields {
                let i = off as usize;
                let word = u64::from_be_bytes(bytes[i..i + 8].try_into().unwrap());
                w.slots[slot as usize] = (word >> shift) & m;
            }
            pos += fixed;
        } else if plan.small && pos.is_multiple_of(8) {
            // byte-aligned header of narrow fields near the end of the packet: a 64-bit accumulator
            let bytes = &w.packet.pkt[pos / 8..(pos + fixed).div_ceil(8)];
            let mut acc: u64 = 0;
            let mut n: u32 = 0;
            let mut i = 0;
            for f in &layout.fields {
                let fw = f.loc.width;
                while n < fw {
                    acc = (acc << 8) | bytes[i] as u64;
                    i += 1;
                    n += 8;
                }
                n -= fw;
                w.slots[f.loc.slot as usize] = (acc >> n) & mask(fw);
            }
            pos += fixed;
        } else {
            for f in &layout.fields {
                match f.varbit_len {
                    Some(len) => {
                        let v = read_wide(&w.packet.pkt, pos, var as u32);
                        self.store_wide(w, f.loc, &v);
                        self.store(w, len, var as u64);
                        pos += var;
                    }
                    None => {
                        if f.loc.width <= 64 {
                            let v = read_bits(&w.packet.pkt, pos, f.loc.width);
                            w.slots[f.loc.slot as usize] = v;
                        } else {
                            let v = read_wide(&w.packet.pkt, pos, f.loc.width);
                            self.store_wide(w, f.loc, &v);
                        }
                        pos += f.loc.width as usize;
                    }
                }
            }
        }
        w.packet.cursor = pos;
        w.slots[layout.valid.slot as usize] = 1;
        if let HeaderRef::Next { stack } = h {
            let ni = self.prog.stacks[*stack as usize].next_index;
            let v = self.load(w, ni) + 1;
            self.store(w, ni, v);
        }
        if let Some(t) = w.trace.as_mut() {
            t.push(format!("extract {}", layout.name));
        }
        Flow::Next
    }

    #[inline(never)]
    pub(crate) fn emit(&self, w: &mut Worker, h: &HeaderRef) {
        let Some(hi) = self.header_index(w, h) else {
            return;
        };
        let layout = &self.prog.headers[hi as usize];
        if w.slots[layout.valid.slot as usize] == 0 {
            return;
        }
        let plan = &self.layout.headers[hi as usize];
        let mut out = std::mem::take(&mut w.emit.out);
        let mut bw = w.emit.bw;
        let len = plan.fixed.div_ceil(8);
        if plan.narrow && bw.n.is_multiple_of(8) && !plan.emit_ops.is_empty() {
            // fast path: each field OR-ed into the 64-bit words it overlaps, then the words stored
            // big-endian
            bw.finish(&mut out);
            let base = out.len();
            let mut words = [0u64; 16];
            for &(slot, m, r, l, k) in &plan.emit_ops {
                words[k as usize] |= ((w.slots[slot as usize] & m) >> r) << l;
            }
            let mut buf = [0u8; 128];
            for (k, word) in words.iter().enumerate().take(len.div_ceil(8)) {
                buf[8 * k..8 * k + 8].copy_from_slice(&word.to_be_bytes());
            }
            out.extend_from_slice(&buf[..len]);
            let tail = plan.fixed % 8;
            out.truncate(base + len);
            if tail != 0 {
                // a header whose width is not a whole number of bytes leaves its last bits pending
                let last = out.pop().unwrap_or(0);
                bw.acc = (last >> (8 - tail)) as u128;
                bw.n = tail as u32;
            }
            w.emit.bw = bw;
            w.emit.out = out;
            return;
        }
        for f in &layout.fields {
            match f.varbit_len {
                Some(len) => {
                    let n = self.load(w, len) as u32;
                    let v = self.load_wide(w, f.loc);
                    bw.put_wide(&mut out, &v, n);
                }
                None => {
                    if f.loc.width <= 64 {
                        bw.put(&mut out, w.slots[f.loc.slot as usize], f.loc.width);
                    } else {
                        let v = self.load_wide(w, f.loc);
                        bw.put_wide(&mut out, &v, f.loc.width);
                    }
                }
            }
        }
        w.emit.bw = bw;
        w.emit.out = out;
    }

    #[inline(never)]
    pub(crate) fn copy_header(&self, w: &mut Worker, dst: &HeaderRef, src: &HeaderRef) {
        let (Some(d), Some(s)) = (self.header_index(w, dst), self.header_index(w, src)) else {
            return;
        };
        let (dl, sl) = (
            &self.prog.headers[d as usize],
            &self.prog.headers[s as usize],
        );
        w.slots[dl.valid.slot as usize] = w.slots[sl.valid.slot as usize];
        for (df, sf) in dl.fields.iter().zip(&sl.fields) {
            let n = words_for(df.loc.width) as usize;
            for k in 0..n {
                w.slots[df.loc.slot as usize + k] = w.slots[sf.loc.slot as usize + k];
            }
            if let (Some(a), Some(b)) = (df.varbit_len, sf.varbit_len) {
                w.slots[a.slot as usize] = w.slots[b.slot as usize];
            }
        }
    }
}

#[cfg(test)]
mod tests;
