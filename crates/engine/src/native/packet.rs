//! Translation of the header statements: `extract` of fixed headers from the packet bytes, the
//! IPv4-style `verify_checksum` summed from those bytes, and the deparser's `emit` of fixed headers
//! written straight into the output buffer, with the deferred `update_checksum` of the header
//! (`load/compile.rs`, `Deferred`) computed from the words just written. Each keeps the closure
//! backend's semantics (`pipeline/headers.rs`): what the fast path does not cover calls the
//! statement's closure back.

use super::helpers::{Ctx, Out, OFF_BW_N, OFF_CSUM_PENDING};
use super::stmt::Fx;
use crate::load::plans::HeaderPlan;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, Block, InstBuilder, MemFlagsData, Type, Value};
use p4sec_ir::*;

/// A deferred `update_checksum` the deparser's emit of its header computes: (its bit in
/// `Emit::csum_pending`, the checksum field's byte offset in the header, the field's slot).
pub(crate) type DeferredCsum = (u64, usize, u32);

/// A narrow header's fields (`HeaderPlan::fields`: slot, byte offset, right shift after a 64-bit
/// load there, mask, width) grouped by the 64-bit big-endian word they are read from: each word
/// starts at the byte of the first field that does not fit in the word before, and takes the
/// consecutive fields wholly inside it. Per word: (its byte offset in the header, per field (slot,
/// right shift from that word, mask)).
pub(crate) type WordFields = Vec<(u32, Vec<(u32, u32, u64)>)>;

/// The word grouping of `fields` (see [`WordFields`]).
pub(crate) fn shared_words(fields: &[(u32, u32, u32, u64, u32)]) -> WordFields {
    let mut words: WordFields = vec![];
    for &(slot, off, shift, m, w) in fields {
        // the field's first bit in the header
        let pos = off * 8 + 64 - shift - w;
        match words.last_mut() {
            Some((base, group)) if pos + w <= *base * 8 + 64 => {
                group.push((slot, *base * 8 + 64 - pos - w, m));
            }
            _ => words.push((off, vec![(slot, shift, m)])),
        }
    }
    words
}

impl Fx<'_, '_> {
    /// `extract` of a fixed header whose fields are all narrow, as `extract_static` does it: when
    /// the cursor is on a byte and the header and 8 bytes of slack lie in the packet, 64-bit
    /// big-endian loads each shared by the consecutive fields that fit in it ([`shared_words`]),
    /// each field shifted and masked out of its word; anything else (a bit-aligned cursor, the end of the packet) calls
    /// back the closure, which takes the interpreter's path.
    pub(crate) fn extract(&mut self, h: usize, s: &Stmt) -> Option<bool> {
        let layout = self.cx.prog.headers.get(h)?;
        let p = HeaderPlan::new(layout);
        let need = p.fixed.div_ceil(8) + 8;
        let ok = p.narrow
            && p.fields
                .iter()
                .all(|f| f.1 as usize + 8 <= need && self.slot_ok(f.0))
            && self.slot_ok(layout.valid.slot);
        if !ok {
            return None;
        }
        let (slow, done) = (self.b.create_block(), self.b.create_block());
        let flags = MemFlagsData::trusted();
        let cur = self
            .b
            .ins()
            .load(self.ptr, flags, self.ctx, Ctx::OFF_CURSOR);
        let bit = self.b.ins().band_imm_u(cur, 7);
        let aligned = self.b.create_block();
        self.b.ins().brif(bit, slow, &[], aligned, &[]);
        self.b.switch_to_block(aligned);
        let pos = self.b.ins().ushr_imm_u(cur, 3);
        let at = self.packet_at(pos, need, slow);
        // packet bytes: in bounds (checked above), any alignment
        let bytes = MemFlagsData::new().with_notrap();
        for (base, group) in shared_words(&p.fields) {
            // a whole byte on a byte boundary is one zero-extending byte load; the word is loaded
            // (once) for the other fields
            let mut word = None;
            for (slot, shift, m) in group {
                let v = if m == 0 {
                    self.konst(0)
                } else if m == 0xff && shift % 8 == 0 {
                    let at_byte = base + (56 - shift) / 8;
                    self.b.ins().uload8(types::I64, bytes, at, at_byte as i32)
                } else {
                    let word = *word.get_or_insert_with(|| {
                        let w = self.b.ins().load(types::I64, bytes, at, base as i32);
                        self.b.ins().bswap(w)
                    });
                    let v = if shift > 0 {
                        self.b.ins().ushr_imm_u(word, shift as i64)
                    } else {
                        word
                    };
                    // a field at the top of the word has nothing above it after the shift
                    if shift as u64 + u64::from(m.count_ones()) == 64 {
                        v
                    } else {
                        self.b.ins().band_imm_u(v, m as i64)
                    }
                };
                self.store_slot(slot, v);
            }
        }
        let cur2 = self.b.ins().iadd_imm_u(cur, p.fixed as i64);
        self.b.ins().store(flags, cur2, self.ctx, Ctx::OFF_CURSOR);
        let one = self.b.ins().iconst(types::I64, 1);
        self.store_slot(layout.valid.slot, one);
        let offs = self
            .b
            .ins()
            .load(self.ptr, flags, self.ctx, Ctx::OFF_HDR_OFF);
        self.b.ins().store(flags, pos, offs, (h * 8) as i32);
        self.fast_path_end(s, slow, done)
    }

    /// A `verify_checksum` over a whole header that nothing but `extract` writes (see
    /// `compile::header_checksum`), as `verify_from_bytes` does it: when the header was extracted
    /// by the fast path in this pass and its bytes lie in the packet, the Internet checksum of
    /// those bytes without the checksum field's word, summed inline (`checksum::csum16_without`'s
    /// lanes: 64-bit loads split in two 32-bit halves, then a 32-bit and a 16-bit tail); otherwise
    /// the closure, which sums the fields.
    pub(crate) fn verify_bytes(
        &mut self,
        s: &Stmt,
        h: usize,
        f_off: usize,
        len: usize,
    ) -> Option<bool> {
        let Stmt::Builtin(Builtin::VerifyChecksum { cond, field, .. }) = s else {
            return None;
        };
        let err = self.cx.prog.std_meta.checksum_error;
        let ok = cond.width() <= 64
            && field.width() <= 64
            && self.covered(cond)
            && self.covered(field)
            && h < self.cx.prog.headers.len()
            && f_off + 2 <= len
            && len.is_multiple_of(2)
            && (err.width == 0 || self.slot_ok(err.slot));
        if !ok {
            return None;
        }
        let (have, slow, done) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        let (at, none) = self.recorded_offset(h);
        self.b.ins().brif(none, slow, &[], have, &[]);
        self.b.switch_to_block(have);
        let p = self.packet_at(at, len, slow);
        let bytes = MemFlagsData::new().with_notrap();
        let mut sum = self.konst(0);
        let mut i = 0;
        while i + 8 <= len {
            let x = self.b.ins().load(types::I64, bytes, p, i as i32);
            let x = self.b.ins().bswap(x);
            let hi = self.b.ins().ushr_imm_u(x, 32);
            let lo = self.b.ins().band_imm_u(x, 0xffff_ffff);
            let t = self.b.ins().iadd(hi, lo);
            sum = self.b.ins().iadd(sum, t);
            i += 8;
        }
        if i + 4 <= len {
            let x = self.load_be(types::I32, p, i);
            sum = self.b.ins().iadd(sum, x);
            i += 4;
        }
        if i + 2 <= len {
            let x = self.load_be(types::I16, p, i);
            let x = self.b.ins().ishl_imm_u(x, 16);
            sum = self.b.ins().iadd(sum, x);
        }
        sum = self.without_word(sum, p, f_off);
        let csum = self.csum_fold(sum, len.div_ceil(4));
        let c = self.expr(cond);
        let check = self.b.create_block();
        self.b.ins().brif(c, check, &[], done, &[]);
        self.b.switch_to_block(check);
        let f = self.expr(field);
        let ne = self.b.ins().icmp(IntCC::NotEqual, csum, f);
        let set = self.b.create_block();
        self.b.ins().brif(ne, set, &[], done, &[]);
        self.b.switch_to_block(set);
        if err.width > 0 {
            let one = self.konst(1);
            self.store_slot(err.slot, one);
        }
        self.fast_path_end(s, slow, done)
    }

    /// `emit` of a fixed header instance whose fields are all narrow and whose length is whole
    /// bytes, as `emit_static` does it: an invalid header emits nothing; when the output is on a
    /// byte boundary and its buffer has room for the header's 64-bit words, the words are built
    /// from the fields and stored big-endian after the output's bytes (a header of whole-byte
    /// fields without a deferred checksum: each field stored by itself), and the header's deferred
    /// checksum, when due, is summed from those words and patched into the bytes and its field.
    /// Anything else (pending bits, a full buffer) calls back the closure, which takes the
    /// interpreter's path.
    pub(crate) fn emit(&mut self, h: usize, s: &Stmt) -> Option<bool> {
        let layout = self.cx.prog.headers.get(h)?;
        let p = HeaderPlan::new(layout);
        let csum = self.deferred_of(h);
        let ok = p.narrow
            && !p.emit_ops.is_empty()
            && p.fixed.is_multiple_of(8)
            && p.emit_ops.iter().all(|o| self.slot_ok(o.0))
            && self.slot_ok(layout.valid.slot)
            && csum.is_none_or(|(_, f_off, slot)| self.slot_ok(slot) && f_off + 2 <= p.fixed / 8);
        if !ok {
            return None;
        }
        if !self.emits {
            return None;
        }
        // a plain emit saves about one closure call; with its checksum, the call and the sum
        self.keep.weight += if csum.is_some() { 2 } else { 0 };
        let (len, words) = (p.fixed / 8, p.fixed.div_ceil(64));
        let flags = MemFlagsData::trusted();
        let (check, room, fast, slow, done) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        let valid = self.load_slot(layout.valid.slot);
        self.b.ins().brif(valid, check, &[], done, &[]);
        self.b.switch_to_block(check);
        let out = self.b.ins().load(self.ptr, flags, self.ctx, Ctx::OFF_OUT);
        let emit = self.b.ins().load(self.ptr, flags, out, Out::OFF_EMIT);
        let pending_bits = self.b.ins().load(types::I32, flags, emit, OFF_BW_N);
        self.b.ins().brif(pending_bits, slow, &[], room, &[]);
        self.b.switch_to_block(room);
        let len0 = self.b.ins().load(self.ptr, flags, out, Out::OFF_LEN);
        let cap = self.b.ins().load(self.ptr, flags, out, Out::OFF_CAP);
        let end = self.b.ins().iadd_imm_u(len0, (words * 8) as i64);
        let full = self.b.ins().icmp(IntCC::UnsignedGreaterThan, end, cap);
        self.b.ins().brif(full, slow, &[], fast, &[]);
        self.b.switch_to_block(fast);
        let base = self.b.ins().load(self.ptr, flags, out, Out::OFF_PTR);
        let dst = self.b.ins().iadd(base, len0);
        // output bytes: below the buffer's capacity (checked above), any alignment
        let bytes = MemFlagsData::new().with_notrap();
        let from_bytes = self.bytes_emit_plan(h, &p, words);
        let by_field = match (&csum, &from_bytes) {
            (None, None) => field_stores(&p.fields, words),
            _ => None,
        };
        let built = if let Some(stores) = by_field {
            self.store_fields(&stores, dst);
            vec![]
        } else {
            let built = match from_bytes {
                Some(written) => self.words_from_bytes(h, &p, words, &written),
                None => self.words_of_fields(&p, words, None),
            };
            for (k, &word) in built.iter().enumerate() {
                let be = self.b.ins().bswap(word);
                self.b.ins().store(bytes, be, dst, (8 * k) as i32);
            }
            built
        };
        let len1 = self.b.ins().iadd_imm_u(len0, len as i64);
        self.b.ins().store(flags, len1, out, Out::OFF_LEN);
        if let Some((bit, f_off, f_slot)) = csum {
            let due = self.b.create_block();
            let pending = self.b.ins().load(types::I64, flags, emit, OFF_CSUM_PENDING);
            let set = self.b.ins().band_imm_u(pending, bit as i64);
            self.b.ins().brif(set, due, &[], done, &[]);
            self.b.switch_to_block(due);
            let left = self.b.ins().band_imm_u(pending, !bit as i64);
            self.b.ins().store(flags, left, emit, OFF_CSUM_PENDING);
            // the words past the header's length are zero: the sum of the 32-bit halves of the
            // words is `csum16_without`'s over the header's bytes
            let mut sum = self.konst(0);
            for w in built {
                let hi = self.b.ins().ushr_imm_u(w, 32);
                let lo = self.b.ins().band_imm_u(w, 0xffff_ffff);
                let t = self.b.ins().iadd(hi, lo);
                sum = self.b.ins().iadd(sum, t);
            }
            sum = self.without_word(sum, dst, f_off);
            let c = self.csum_fold(sum, 2 * words);
            let c16 = self.b.ins().ireduce(types::I16, c);
            let be = self.b.ins().bswap(c16);
            self.b.ins().store(bytes, be, dst, f_off as i32);
            self.store_slot(f_slot, c);
        }
        self.fast_path_end(s, slow, done)
    }

    /// The fields of [`field_stores`]'s `stores` written big-endian at `dst` one by one, in
    /// order: each store's bytes past its field are zero, and the next field's store (or the
    /// bytes past the header, which the output does not count) covers them; the field's bits
    /// above its width shift out (as the closure's mask drops them).
    fn store_fields(&mut self, stores: &[(u32, u32, u32, u32)], dst: Value) {
        let bytes = MemFlagsData::new().with_notrap();
        for &(slot, off, size, shift) in stores {
            let v = self.load_slot(slot);
            let v = if shift > 0 {
                self.b.ins().ishl_imm_u(v, shift as i64)
            } else {
                v
            };
            let ty = match size {
                1 => types::I8,
                2 => types::I16,
                4 => types::I32,
                _ => types::I64,
            };
            let v = if size < 8 {
                self.b.ins().ireduce(ty, v)
            } else {
                v
            };
            let v = if size > 1 { self.b.ins().bswap(v) } else { v };
            self.b.ins().store(bytes, v, dst, off as i32);
        }
    }

    /// The end of a statement's fast path (jumping to `done`), then its `slow` path: the
    /// statement's closure called back; the code goes on at `done`.
    fn fast_path_end(&mut self, s: &Stmt, slow: Block, done: Block) -> Option<bool> {
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(slow);
        self.fallback(s);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
        Some(true)
    }

    /// Header `h`'s words (big-endian, the bits past the header zero) built from its fields: each
    /// field's slot masked to its width, as the closure's emit does (a value with bits above its
    /// width, however a path stored it, never spills into the next field). With `base`, the
    /// header's bytes as words: only the fields of `base.1` (their first slots) are put in,
    /// replacing those bits of the words.
    fn words_of_fields(
        &mut self,
        p: &HeaderPlan,
        words: usize,
        base: Option<(&[Value], &[u32])>,
    ) -> Vec<Value> {
        let mut built = Vec::with_capacity(words);
        for k in 0..words {
            let mut word: Option<Value> = base.map(|(w, _)| w[k]);
            for &(slot, m, r, l, _) in p.emit_ops.iter().filter(|o| o.4 as usize == k) {
                let keep = base.is_none_or(|(_, written)| written.contains(&slot));
                if !keep {
                    continue;
                }
                let v = self.load_slot(slot);
                let v = self.b.ins().band_imm_u(v, m as i64);
                let v = if r > 0 {
                    self.b.ins().ushr_imm_u(v, r as i64)
                } else {
                    v
                };
                let v = if l > 0 {
                    self.b.ins().ishl_imm_u(v, l as i64)
                } else {
                    v
                };
                word = Some(match word {
                    Some(x) if base.is_some() => {
                        // the field's bits of the packet's word replaced
                        let bits = (m >> r) << l;
                        let x = self.b.ins().band_imm_u(x, !bits as i64);
                        self.b.ins().bor(x, v)
                    }
                    Some(x) => self.b.ins().bor(x, v),
                    None => v,
                });
            }
            built.push(word.unwrap_or_else(|| self.konst(0)));
        }
        built
    }

    /// Whether the emit of header `h` takes its never-written fields from the packet's bytes
    /// (`load::unwritten`): the written fields' slots when the header qualifies and the fields
    /// left out save more than the offset's checks cost.
    fn bytes_emit_plan(&self, h: usize, p: &HeaderPlan, words: usize) -> Option<Vec<u32>> {
        let firsts = self.cx.pristine.unwritten.written(h)?;
        // every slot word of a written field (the plan's ops are per slot word: a field wider
        // than 64 bits has several)
        let written: Vec<u32> = self
            .cx
            .prog
            .headers
            .get(h)?
            .fields
            .iter()
            .filter(|f| firsts.contains(&f.loc.slot))
            .flat_map(|f| f.loc.slot..f.loc.slot + words_for(f.loc.width))
            .collect();
        let (mut kept, mut patched) = (0usize, 0usize);
        for o in &p.emit_ops {
            if written.contains(&o.0) {
                patched += 1;
            } else {
                kept += 1;
            }
        }
        // about 4 instructions per field put in a word; a patch costs 1 more, each word loaded
        // from the packet 2, the offset's and the bounds' checks about 10
        (4 * kept > patched + 2 * words + 10).then_some(written)
    }

    /// Header `h`'s words (as [`Fx::words_of_fields`] builds them) from the packet's bytes at the
    /// offset its extract recorded in this pass, the `written` fields put in from their slots;
    /// from the fields alone when no offset is recorded or the bytes do not lie in the packet.
    fn words_from_bytes(
        &mut self,
        h: usize,
        p: &HeaderPlan,
        words: usize,
        written: &[u32],
    ) -> Vec<Value> {
        let (have, pack, join) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        let (at, none) = self.recorded_offset(h);
        self.b.ins().brif(none, pack, &[], have, &[]);
        self.b.switch_to_block(have);
        let src = self.packet_at(at, words * 8, pack);
        // packet bytes: in bounds (checked above), any alignment
        let bytes = MemFlagsData::new().with_notrap();
        let tail = (p.fixed / 8) % 8;
        let mut raw = Vec::with_capacity(words);
        for k in 0..words {
            let x = self.b.ins().load(types::I64, bytes, src, (8 * k) as i32);
            let x = self.b.ins().bswap(x);
            // the bytes past the header (the payload's) cleared, as the fields' words have them
            let x = if k + 1 == words && tail != 0 {
                self.b
                    .ins()
                    .band_imm_u(x, (!0u64 << (64 - 8 * tail)) as i64)
            } else {
                x
            };
            raw.push(x);
        }
        let mixed = self.words_of_fields(p, words, Some((&raw, written)));
        let args: Vec<_> = mixed.iter().map(|&v| v.into()).collect();
        self.b.ins().jump(join, &args);
        self.b.switch_to_block(pack);
        let built = self.words_of_fields(p, words, None);
        let args: Vec<_> = built.iter().map(|&v| v.into()).collect();
        self.b.ins().jump(join, &args);
        self.b.switch_to_block(join);
        (0..words)
            .map(|_| self.b.append_block_param(join, types::I64))
            .collect()
    }

    /// Header `h`'s offset as its extract recorded it in this pass (`Worker::hdr_off`), and whether
    /// none is recorded.
    fn recorded_offset(&mut self, h: usize) -> (Value, Value) {
        let flags = MemFlagsData::trusted();
        let offs = self
            .b
            .ins()
            .load(self.ptr, flags, self.ctx, Ctx::OFF_HDR_OFF);
        let at = self.b.ins().load(types::I64, flags, offs, (h * 8) as i32);
        let none = self
            .b
            .ins()
            .icmp_imm_u(IntCC::Equal, at, crate::NO_OFFSET as i64);
        (at, none)
    }

    /// The address of the `n` packet bytes from byte `at`, in a new block, when they lie in the
    /// packet; a jump to `slow` otherwise.
    fn packet_at(&mut self, at: Value, n: usize, slow: Block) -> Value {
        let flags = MemFlagsData::trusted();
        let fast = self.b.create_block();
        let end = self.b.ins().iadd_imm_u(at, n as i64);
        let len = self
            .b
            .ins()
            .load(self.ptr, flags, self.ctx, Ctx::OFF_PKT_LEN);
        let short = self.b.ins().icmp(IntCC::UnsignedGreaterThan, end, len);
        self.b.ins().brif(short, slow, &[], fast, &[]);
        self.b.switch_to_block(fast);
        let base = self.b.ins().load(self.ptr, flags, self.ctx, Ctx::OFF_PKT);
        self.b.ins().iadd(base, at)
    }

    /// The deferred checksum the emit of header `h` computes, if any (the first entry for `h`, as
    /// `emit_static` takes it).
    fn deferred_of(&self, h: usize) -> Option<DeferredCsum> {
        self.deferred
            .iter()
            .position(|d| d.0 == h)
            .map(|i| (1u64 << i, self.deferred[i].1, self.deferred[i].2))
    }

    /// `sum` less the 16-bit big-endian word at `p + off`, weighted as `csum16_without` does (the
    /// upper half of its 32-bit lane when `off` is a multiple of 4).
    fn without_word(&mut self, sum: Value, p: Value, off: usize) -> Value {
        let x = self.load_be(types::I16, p, off);
        let x = if off.is_multiple_of(4) {
            self.b.ins().ishl_imm_u(x, 16)
        } else {
            x
        };
        self.b.ins().isub(sum, x)
    }

    /// The big-endian value of type `ty` at `p + off` (bytes checked to be there; any alignment),
    /// zero-extended to 64 bits.
    fn load_be(&mut self, ty: Type, p: Value, off: usize) -> Value {
        let bytes = MemFlagsData::new().with_notrap();
        let x = self.b.ins().load(ty, bytes, p, off as i32);
        let x = self.b.ins().bswap(x);
        self.b.ins().uextend(types::I64, x)
    }

    /// The Internet checksum of a sum of at most `lanes` 32-bit lanes: folded with end-around
    /// carries (`(x & 0xffff) + (x >> 16)`) while the sum's bound passes 32 bits, then, when it
    /// passes 16, once in 32 bits as `(x + rotl(x, 16)) >> 16` (the upper half of that sum is the
    /// two halves' sum with its end-around carry: the same value as the folds to 16 bits, in
    /// fewer instructions), then complemented.
    fn csum_fold(&mut self, mut sum: Value, lanes: usize) -> Value {
        let mut bound = lanes as u64 * 0xffff_ffff;
        while bound > 0xffff_ffff {
            let lo = self.b.ins().band_imm_u(sum, 0xffff);
            let hi = self.b.ins().ushr_imm_u(sum, 16);
            sum = self.b.ins().iadd(lo, hi);
            bound = fold_bound(bound);
        }
        if bound > 0xffff {
            let x = self.b.ins().ireduce(types::I32, sum);
            let r = self.b.ins().rotl_imm_u(x, 16);
            let t = self.b.ins().iadd(x, r);
            let f = self.b.ins().ushr_imm_u(t, 16);
            sum = self.b.ins().uextend(types::I64, f);
        }
        self.b.ins().bxor_imm_u(sum, 0xffff)
    }
}

/// The stores that emit a header whose fields are all whole bytes (`HeaderPlan::fields`), field by
/// field instead of word by word (fewer shifts, masks and merges): per field, (slot, byte offset,
/// store size in bytes: the smallest of 1, 2, 4, 8 holding the field, left shift putting the
/// field at the top of the store); `None` when a field is not whole bytes or a store would end
/// past the `words` 64-bit words checked to be in the buffer.
pub(crate) fn field_stores(
    fields: &[(u32, u32, u32, u64, u32)],
    words: usize,
) -> Option<Vec<(u32, u32, u32, u32)>> {
    let mut stores = vec![];
    for &(slot, off, _, _, w) in fields {
        if !w.is_multiple_of(8) {
            return None;
        }
        if w == 0 {
            continue;
        }
        let size = (w / 8).next_power_of_two();
        if (off + size) as usize > words * 8 {
            return None;
        }
        stores.push((slot, off, size, size * 8 - w));
    }
    Some(stores)
}

/// How many end-around-carry folds (`x & 0xffff) + (x >> 16)` take any sum up to `bound` below
/// 2^16: each round's bound is the largest fold of a value up to the previous one.
#[cfg(test)]
pub(crate) fn fold_rounds(mut bound: u64) -> u32 {
    let mut rounds = 0;
    while bound > 0xffff {
        bound = fold_bound(bound);
        rounds += 1;
    }
    rounds
}

/// The largest fold `(x & 0xffff) + (x >> 16)` of any `x` up to `bound` (above 0xffff): the top
/// half at its maximum with the bound's low half, or one below it with a full low half.
fn fold_bound(bound: u64) -> u64 {
    let hi = bound >> 16;
    (hi + (bound & 0xffff)).max(hi - 1 + 0xffff)
}
