//! The v1model built-ins (drop, clone, resubmit, recirculate, hash and checksum, registers,
//! counters, meters, digests, ...) run per packet, with the data concatenation and the checksums
//! they compute.

use crate::bits::{self, mask64 as mask, BitWriter};
use crate::code::Flow;
use crate::hash;
use crate::meters::MeterCell;
use crate::{Engine, Worker};
use p4sec_externs::checksum;
use p4sec_ir::*;
use std::sync::atomic::Ordering;

/// The colour meter cell `cell` gives a packet of `len` bytes, metered in `unit`s.
#[inline]
fn meter_color(cell: &MeterCell, unit: CounterUnit, len: u64) -> u64 {
    cell.execute(if unit == CounterUnit::Bytes { len } else { 1 }, len)
}

impl Engine {
    #[inline(never)]
    pub(crate) fn builtin(&self, w: &mut Worker, b: &Builtin) -> Flow {
        let sm = &self.prog.std_meta;
        match b {
            Builtin::Verify { cond, error } => {
                if self.eval(w, cond) == 0 {
                    return Flow::Reject(*error);
                }
            }
            Builtin::MarkToDrop => {
                self.store(w, sm.egress_spec, 511);
                self.store(w, sm.mcast_grp, 0);
            }
            Builtin::Hash {
                dst,
                algo,
                base,
                data,
                max,
            } => {
                self.concat_data(w, data);
                let h = hash::compute(*algo, &w.emit.scratch, &mut w.calls.rng);
                let base = self.eval(w, base);
                let max = self.eval(w, max);
                let v = if max == 0 {
                    base.wrapping_add(h)
                } else {
                    base.wrapping_add(h % max)
                };
                if let Some(l) = self.resolve(w, dst) {
                    self.store(w, l, v);
                }
            }
            Builtin::VerifyChecksum {
                cond,
                data,
                field,
                algo,
                with_payload,
            } => {
                if self.eval(w, cond) != 0 {
                    let h = self.checksum(w, data, *algo, *with_payload) & mask(field.width());
                    if h != self.eval(w, field) {
                        self.store(w, sm.checksum_error, 1);
                    }
                }
            }
            Builtin::UpdateChecksum {
                cond,
                data,
                dst,
                algo,
                with_payload,
            } => {
                if self.eval(w, cond) != 0 {
                    let h = self.checksum(w, data, *algo, *with_payload);
                    if let Some(l) = self.resolve(w, dst) {
                        self.store(w, l, h);
                    }
                }
            }
            Builtin::RegisterRead { reg, dst, index } => {
                let i = self.eval(w, index) as usize;
                let r = &self.externs.registers[*reg as usize];
                if let Some(l) = self.resolve(w, dst) {
                    let words = r.words;
                    if i < r.size {
                        if words == 1 {
                            let v = r.cells[i].load(Ordering::Relaxed);
                            self.store(w, l, v);
                        } else {
                            let mut v = bits::ZERO;
                            for (k, x) in v.iter_mut().enumerate().take(words) {
                                *x = r.cells[i * words + k].load(Ordering::Relaxed);
                            }
                            self.store_wide(w, l, &v);
                        }
                    } else {
                        self.store(w, l, 0);
                    }
                }
            }
            Builtin::RegisterWrite { reg, index, value } => {
                let i = self.eval(w, index) as usize;
                let r = &self.externs.registers[*reg as usize];
                if i < r.size {
                    if r.words == 1 {
                        let v = self.eval(w, value) & mask(r.width);
                        r.cells[i].store(v, Ordering::Relaxed);
                    } else {
                        let mut v = self.eval_wide(w, value);
                        bits::truncate(&mut v, r.width);
                        for (k, x) in v.iter().enumerate().take(r.words) {
                            r.cells[i * r.words + k].store(*x, Ordering::Relaxed);
                        }
                    }
                }
            }
            Builtin::CounterCount { counter, index } => {
                let i = self.eval(w, index) as usize;
                let c = &self.externs.counters[*counter as usize];
                if let Some(cell) = c.get(i) {
                    cell.0.fetch_add(1, Ordering::Relaxed);
                    cell.1.fetch_add(w.packet.len as u64, Ordering::Relaxed);
                }
            }
            Builtin::MeterExecute { meter, index, dst } => {
                let i = self.eval(w, index) as usize;
                let m = &self.externs.meters[*meter as usize];
                let unit = self.prog.meters[*meter as usize].unit;
                let color = match m.get(i) {
                    Some(cell) => meter_color(cell, unit, w.packet.len as u64),
                    None => crate::meters::GREEN,
                };
                if let Some(l) = self.resolve(w, dst) {
                    self.store(w, l, color);
                }
            }
            Builtin::DirectMeterRead { meter, dst } => {
                let unit = self.prog.direct_meters[*meter as usize].unit;
                let color = match w.calls.cur_meter.clone() {
                    Some(cell) => meter_color(&cell, unit, w.packet.len as u64),
                    None => crate::meters::GREEN,
                };
                if let Some(l) = self.resolve(w, dst) {
                    self.store(w, l, color);
                }
            }
            Builtin::DirectCounterCount { .. } => {}
            Builtin::Clone {
                kind,
                session,
                field_list,
            } => {
                let s = self.eval(w, session) as u32;
                match kind {
                    CloneKind::I2E => w.fx.clone_i2e(s, *field_list),
                    CloneKind::E2E => w.fx.clone_e2e(s, *field_list),
                }
            }
            Builtin::Resubmit { field_list } => w.fx.resubmit(*field_list),
            Builtin::Recirculate { field_list } => w.fx.recirculate(*field_list),
            Builtin::Truncate { length } => {
                let n = self.eval(w, length) as usize;
                w.fx.truncate(n);
            }
            Builtin::Digest { digest, data } => {
                let mut vals = Vec::with_capacity(data.len());
                for e in data {
                    let width = e.width();
                    let v = self.eval_wide(w, e);
                    vals.push(Value {
                        width,
                        words: v[..words_for(width) as usize].to_vec(),
                    });
                }
                self.push_digest(*digest, vals);
            }
            Builtin::Random { dst, lo, hi } => {
                let lo = self.eval(w, lo);
                let hi = self.eval(w, hi);
                let r = hash::next_random(&mut w.calls.rng);
                let v = if hi <= lo { lo } else { lo + r % (hi - lo + 1) };
                if let Some(l) = self.resolve(w, dst) {
                    self.store(w, l, v);
                }
            }
            Builtin::LogMsg { format, args } => {
                if w.trace.is_some() {
                    let mut s = String::new();
                    let mut vals = args.iter();
                    let mut parts = format.split("{}");
                    if let Some(p) = parts.next() {
                        s.push_str(p);
                    }
                    for p in parts {
                        if let Some(e) = vals.next() {
                            let v = self.eval(w, e);
                            s.push_str(&v.to_string());
                        }
                        s.push_str(p);
                    }
                    if let Some(t) = w.trace.as_mut() {
                        t.push(format!("log_msg: {s}"));
                    }
                }
            }
            Builtin::Assert { cond } => {
                if self.eval(w, cond) == 0 {
                    crate::bump(&w.stats.assert_failures);
                    w.fx.drop();
                    return Flow::Exit;
                }
            }
        }
        Flow::Next
    }
    /// The checksum of the concatenated `data` (and the payload when asked).
    #[inline(never)]
    fn checksum(&self, w: &mut Worker, data: &[Expr], algo: HashAlgo, with_payload: bool) -> u64 {
        let narrow = |e: &Expr| match e {
            Expr::Load(LValue::Static(l)) => l.width <= 64,
            _ => e.width() <= 64,
        };
        if algo == HashAlgo::Csum16 && !with_payload && data.iter().all(narrow) {
            // fast path: one's complement sum of the bit string taken 16 bits at a time, without a
            // buffer; the tail is padded with zeros to 16 bits, as the byte form pads to a byte and
            // then to a word
            let (mut acc, mut n, mut sum) = (0u64, 0u32, 0u64);
            // `acc` holds `n` < 16 pending bits; a piece of at most 48 bits keeps it within 64
            let mut feed = |v: u64, width: u32| {
                acc = (acc << width) | v;
                n += width;
                while n >= 16 {
                    n -= 16;
                    sum += (acc >> n) & 0xffff;
                }
                acc &= (1u64 << n) - 1;
            };
            for e in data {
                let (v, width) = match e {
                    Expr::Load(LValue::Static(l)) => (w.slots[l.slot as usize], l.width),
                    _ => (self.eval(w, e), e.width()),
                };
                let v = v & mask(width);
                if width > 48 {
                    feed(v >> 32, width - 32);
                    feed(v & 0xffff_ffff, 32);
                } else if width > 0 {
                    feed(v, width);
                }
            }
            if n > 0 {
                sum += (acc << (16 - n)) & 0xffff;
            }
            return !checksum::fold(sum) as u64;
        }
        self.concat_data(w, data);
        if with_payload {
            let mut scratch = std::mem::take(&mut w.emit.scratch);
            scratch.extend_from_slice(w.payload_bytes());
            w.emit.scratch = scratch;
        }
        hash::compute(algo, &w.emit.scratch, &mut w.calls.rng)
    }

    /// Concatenate data expressions into `w.emit.scratch` as bytes (zero-padded at the end).
    fn concat_data(&self, w: &mut Worker, data: &[Expr]) {
        let mut buf = std::mem::take(&mut w.emit.scratch);
        buf.clear();
        let mut bw = BitWriter::default();
        for e in data {
            match e {
                Expr::Load(LValue::Static(l)) if l.width <= 64 => {
                    bw.put(&mut buf, w.slots[l.slot as usize], l.width)
                }
                _ => {
                    let width = e.width();
                    if width <= 64 {
                        let v = self.eval(w, e);
                        bw.put(&mut buf, v, width);
                    } else {
                        let v = self.eval_wide(w, e);
                        bw.put_wide(&mut buf, &v, width);
                    }
                }
            }
        }
        bw.finish(&mut buf);
        w.emit.scratch = buf;
    }
}
