//! Calls: the v1model built-ins (drop, clone, resubmit, recirculate, hash and checksum, registers,
//! counters, meters, digests, ...) and calls of registered extern methods, with their argument
//! planning (layouts resolved at load time, call sites an extern binds for itself, and the general
//! marshalling path).

use crate::bits::{self, mask64 as mask, read_wide, BitWriter};
use crate::code::Flow;
use crate::hash;
use crate::{Engine, Worker};
use p4sec_externs::checksum;
use p4sec_externs::iface::{BitBuf, BoundArg, BoundCall, Dir, ExternError, ExternObject, Payload};
use p4sec_externs::layout::{read_bits, ArgLayout, Part};
use p4sec_ir::*;
use std::sync::atomic::Ordering;

/// The layout of extern argument `a` ([`ArgLayout`]), if every part is a load of a fixed location
/// or a narrow constant (and, for `out`/`inout`, every destination is a fixed location) and fields
/// wider than 64 bits sit on byte boundaries.
pub(crate) fn plan_arg(a: &ExternArg) -> Option<ArgLayout> {
    let field = |l: &Loc| Part::Field {
        slot: l.slot,
        width: l.width,
    };
    let parts: Vec<Part> = if a.dir == Direction::In {
        let mut parts = vec![];
        for e in &a.parts {
            match e {
                Expr::Load(LValue::Static(l)) => parts.push(field(l)),
                Expr::Small { value, width } => parts.push(Part::Const {
                    value: *value,
                    width: *width,
                }),
                // a constant wider than 64 bits (a key written in the program): 64-bit pieces, most
                // significant first
                Expr::Const(v) => {
                    let n = words_for(v.width);
                    for k in (0..n).rev() {
                        let width = if k + 1 == n { v.width - 64 * k } else { 64 };
                        parts.push(Part::Const {
                            value: v.words.get(k as usize).copied().unwrap_or(0)
                                & crate::bits::mask64(width),
                            width,
                        });
                    }
                }
                _ => return None,
            }
        }
        parts
    } else {
        a.dsts
            .iter()
            .map(|d| {
                if let LValue::Static(l) = d {
                    Some(field(l))
                } else {
                    None
                }
            })
            .collect::<Option<_>>()?
    };
    if a.dir == Direction::InOut {
        // the value going in must be the destinations' own
        let same = a.parts.len() == parts.len()
            && a.parts
                .iter()
                .zip(&parts)
                .all(|(e, p)| matches!((e, p), (Expr::Load(LValue::Static(x)), Part::Field { slot, width }) if x.slot == *slot && x.width == *width));
        if !same {
            return None;
        }
    }
    ArgLayout::new(a.width, &parts)
}

/// The extern interface's direction of a P4 parameter direction.
pub(crate) fn dir_of(d: Direction) -> Dir {
    match d {
        Direction::In => Dir::In,
        Direction::Out => Dir::Out,
        Direction::InOut => Dir::InOut,
    }
}

/// An extern call site whose arguments are all planned ([`ArgLayout`]) and whose return value, if
/// any, goes to a fixed location: what [`Engine::extern_call_planned`] needs per packet, resolved
/// once.
pub(crate) struct PlannedCall {
    inst: usize,
    method: u32,
    /// Per argument: its layout and its direction.
    args: Vec<(ArgLayout, Direction)>,
    ret: Option<Loc>,
}

impl PlannedCall {
    pub(crate) fn new(
        inst: usize,
        method: u32,
        args: &[ExternArg],
        plans: &[Option<ArgLayout>],
        ret: Option<&LValue>,
    ) -> Option<Self> {
        let ret = match ret {
            None => None,
            Some(LValue::Static(l)) => Some(*l),
            Some(_) => return None,
        };
        let args = args
            .iter()
            .zip(plans)
            .map(|(a, p)| p.clone().map(|p| (p, a.dir)))
            .collect::<Option<Vec<_>>>()?;
        Some(PlannedCall {
            inst,
            method,
            args,
            ret,
        })
    }

    /// The call site compiled by its extern, if the extern binds it ([`ExternObject::bind`]);
    /// `frame_prefix`: the argument the engine may vouch for ([`crate::load::pristine`]).
    pub(crate) fn bind(
        &self,
        externs: &[Box<dyn ExternObject>],
        methods: &[Vec<u32>],
        frame_prefix: Option<usize>,
    ) -> Option<Box<dyn BoundCall>> {
        let obj = externs.get(self.inst)?;
        let m = *methods.get(self.inst)?.get(self.method as usize)?;
        let args: Vec<BoundArg> = self
            .args
            .iter()
            .enumerate()
            .map(|(i, (layout, d))| BoundArg {
                dir: dir_of(*d),
                layout,
                frame_prefix: frame_prefix == Some(i),
            })
            .collect();
        let ret = match self.ret {
            Some(l) => Some(ArgLayout::new(
                l.width,
                &[Part::Field {
                    slot: l.slot,
                    width: l.width,
                }],
            )?),
            None => None,
        };
        obj.bind(m, &args, ret.as_ref())
    }
}

/// Run `f` (an extern method) with the payload as a view of the received packet while it is still
/// there (an extern that only reads it costs no copy; the first write copies it out,
/// `Payload::vec_mut`), and note when it no longer is.
#[inline(always)]
fn with_payload<R>(
    pkt: &[u8],
    payload_at: &mut usize,
    owned: &mut Vec<u8>,
    skip: &mut usize,
    f: impl FnOnce(&mut Payload<'_>) -> R,
) -> R {
    let mut payload = if *payload_at != crate::NOT_IN_PKT {
        Payload::in_packet(pkt, *payload_at, owned)
    } else {
        Payload::owned_from(owned, *skip)
    };
    let r = f(&mut payload);
    if !payload.is_in_packet() {
        *payload_at = crate::NOT_IN_PKT;
        *skip = payload.skip();
    }
    r
}

/// [`ExternObject::call`] through [`with_payload`].
#[inline]
fn call_with_payload(
    obj: &dyn ExternObject,
    m: u32,
    bufs: &mut [BitBuf],
    ret: Option<&mut BitBuf>,
    pkt: &[u8],
    payload_at: &mut usize,
    owned: &mut Vec<u8>,
    skip: &mut usize,
) -> Result<(), ExternError> {
    with_payload(pkt, payload_at, owned, skip, |p| obj.call(m, bufs, ret, p))
}

/// An extern that resized an argument it writes, or the return value, broke the interface: a fault,
/// not a write-back of the wrong bits. `outs`: (width, buffer) of each `out`/`inout` argument.
#[inline(always)]
fn check_lengths<'a>(
    mut outs: impl Iterator<Item = (u32, &'a BitBuf)>,
    ret: Option<(u32, &BitBuf)>,
) -> Result<(), ExternError> {
    if let Some((wd, b)) = outs.find(|(wd, b)| b.bytes.len() != wd.div_ceil(8) as usize) {
        return Err(ExternError::Failed(format!(
            "an out argument of {wd} bits came back as {} bytes",
            b.bytes.len()
        )));
    }
    match ret {
        Some((wd, b)) if b.bytes.len() != wd.div_ceil(8) as usize => {
            Err(ExternError::Failed(format!(
                "the return value of {wd} bits came back as {} bytes",
                b.bytes.len()
            )))
        }
        _ => Ok(()),
    }
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
                            for k in 0..words {
                                v[k] = r.cells[i * words + k].load(Ordering::Relaxed);
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
                        for k in 0..r.words {
                            r.cells[i * r.words + k].store(v[k], Ordering::Relaxed);
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
                    Some(cell) => cell.execute(
                        if unit == CounterUnit::Bytes {
                            w.packet.len as u64
                        } else {
                            1
                        },
                        w.packet.len as u64,
                    ),
                    None => crate::meters::GREEN,
                };
                if let Some(l) = self.resolve(w, dst) {
                    self.store(w, l, color);
                }
            }
            Builtin::DirectMeterRead { meter, dst } => {
                let unit = self.prog.direct_meters[*meter as usize].unit;
                let color = match w.calls.cur_meter.clone() {
                    Some(cell) => cell.execute(
                        if unit == CounterUnit::Bytes {
                            w.packet.len as u64
                        } else {
                            1
                        },
                        w.packet.len as u64,
                    ),
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

    /// Append the bits of `e` (MSB first) through the bit writer `bw`.
    #[inline]
    fn put_expr(&self, w: &mut Worker, e: &Expr, buf: &mut Vec<u8>, bw: &mut BitWriter) {
        if let Expr::Load(LValue::Static(l)) = e {
            if l.width % 8 == 0 && bw.n % 8 == 0 {
                // whole bytes at a byte boundary (header fields, addresses): the slot words' bytes,
                // MSB first
                bw.finish(buf);
                let nb = (l.width / 8) as usize;
                for k in (0..words_for(l.width) as usize).rev() {
                    let x = w.slots[l.slot as usize + k].to_be_bytes();
                    let take = (nb - 8 * k).min(8);
                    buf.extend_from_slice(&x[8 - take..]);
                }
                return;
            }
            if l.width <= 64 {
                bw.put(buf, w.slots[l.slot as usize], l.width);
                return;
            }
        }
        let width = e.width();
        if width <= 64 {
            let v = self.eval(w, e);
            bw.put(buf, v, width);
        } else {
            let v = self.eval_wide(w, e);
            bw.put_wide(buf, &v, width);
        }
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

    #[inline(never)]
    /// Marshal argument `a` into `b` the general way: each part evaluated and packed bit by bit.
    pub(crate) fn marshal_arg(&self, w: &mut Worker, a: &ExternArg, b: &mut BitBuf) {
        // the value right-aligned in whole bytes: leading pad bits, then the parts, MSB first
        let nbytes = a.width.div_ceil(8) as usize;
        let mut tmp = std::mem::take(&mut b.bytes);
        tmp.clear();
        if a.dir == Direction::Out {
            // nothing goes in: zeros
            tmp.resize(nbytes, 0);
            b.bytes = tmp;
            return;
        }
        let mut bw = BitWriter::default();
        bw.put(&mut tmp, 0, nbytes as u32 * 8 - a.width);
        for e in &a.parts {
            self.put_expr(w, e, &mut tmp, &mut bw);
        }
        bw.finish(&mut tmp);
        tmp.resize(nbytes, 0);
        b.bytes = tmp;
    }

    /// Split an `out`/`inout` argument's bit string back into its destinations, the general way.
    pub(crate) fn write_back_arg(&self, w: &mut Worker, a: &ExternArg, b: &BitBuf) {
        let nbytes = a.width.div_ceil(8) as usize;
        let mut pos = nbytes * 8 - a.width as usize;
        for d in &a.dsts {
            let Some(l) = self.resolve(w, d) else {
                continue;
            };
            if pos % 8 == 0 && l.width % 8 == 0 {
                // whole bytes at a byte boundary: straight into the slot words (least significant
                // first)
                let nb = (l.width / 8) as usize;
                let bytes = &b.bytes[pos / 8..pos / 8 + nb];
                for k in 0..words_for(l.width) as usize {
                    let end = nb - 8 * k;
                    let x = match bytes[end.saturating_sub(8)..end].try_into() {
                        Ok(b8) => u64::from_be_bytes(b8),
                        Err(_) => bytes[..end].iter().fold(0u64, |x, &y| (x << 8) | y as u64),
                    };
                    w.slots[l.slot as usize + k] = x;
                }
                pos += l.width as usize;
                continue;
            }
            self.store_bits(w, l, &b.bytes, pos);
            pos += l.width as usize;
        }
    }

    /// Store the `l.width` bits of `bytes` from bit `pos` (MSB first) into `l`.
    fn store_bits(&self, w: &mut Worker, l: Loc, bytes: &[u8], pos: usize) {
        if l.width <= 64 {
            let v = read_bits(bytes, pos, l.width);
            self.store(w, l, v);
        } else {
            let v = read_wide(bytes, pos, l.width);
            self.store_wide(w, l, &v);
        }
    }

    /// Call extern method `method` of instance `inst`. `plans[i]`, when there, is argument i's
    /// layout computed at compile time ([`ArgLayout`]); arguments without one are packed and
    /// unpacked the general way.
    pub(crate) fn extern_call(
        &self,
        w: &mut Worker,
        inst: usize,
        method: u32,
        args: &[ExternArg],
        plans: &[Option<ArgLayout>],
        ret: Option<&LValue>,
    ) -> Flow {
        let mut bufs = std::mem::take(&mut w.calls.bitbufs);
        if bufs.len() < args.len() {
            bufs.resize_with(args.len(), BitBuf::default);
        }
        for (i, (a, b)) in args.iter().zip(bufs.iter_mut()).enumerate() {
            b.width = a.width;
            match plans.get(i) {
                Some(Some(p)) => p.marshal(&w.slots, a.dir != Direction::Out, &mut b.bytes),
                _ => self.marshal_arg(w, a, b),
            }
        }
        let mut retbuf = std::mem::take(&mut w.calls.retbuf);
        let ret_width = ret.map(|lv| match lv {
            LValue::Static(l) => l.width,
            LValue::Dynamic { base, .. } => base.width,
        });
        if let Some(width) = ret_width {
            retbuf.width = width;
            retbuf.bytes.clear();
            retbuf.bytes.resize(width.div_ceil(8) as usize, 0);
        }
        let r = self
            .invoke(
                w,
                inst,
                method,
                &mut bufs[..args.len()],
                ret_width.map(|_| &mut retbuf),
            )
            .and_then(|()| {
                let outs = args
                    .iter()
                    .zip(bufs.iter())
                    .filter(|(a, _)| a.dir != Direction::In)
                    .map(|(a, b)| (a.width, b));
                check_lengths(outs, ret_width.map(|wd| (wd, &retbuf)))
            });
        if let Err(e) = r {
            w.calls.bitbufs = bufs;
            w.calls.retbuf = retbuf;
            return self.extern_fault(w, e);
        }
        for (i, (a, b)) in args.iter().zip(bufs.iter()).enumerate() {
            if a.dir == Direction::In {
                continue;
            }
            match plans.get(i) {
                Some(Some(p)) => p.write(&b.bytes, &mut w.slots),
                _ => self.write_back_arg(w, a, b),
            }
        }
        if let (Some(lv), Some(_)) = (ret, ret_width) {
            if let Some(l) = self.resolve(w, lv) {
                self.store_bits(
                    w,
                    l,
                    &retbuf.bytes,
                    retbuf.bytes.len() * 8 - l.width as usize,
                );
            }
        }
        w.calls.bitbufs = bufs;
        w.calls.retbuf = retbuf;
        Flow::Next
    }

    /// [`Engine::extern_call`] for a call site whose arguments are all planned: arguments
    /// marshalled straight into the worker's buffers (borrowed in place, not moved out and back),
    /// only `out`/`inout` arguments checked and written back.
    pub(crate) fn extern_call_planned(&self, w: &mut Worker, pc: &PlannedCall) -> Flow {
        let n = pc.args.len();
        if w.calls.bitbufs.len() < n {
            w.calls.bitbufs.resize_with(n, BitBuf::default);
        }
        for ((plan, dir), b) in pc.args.iter().zip(w.calls.bitbufs.iter_mut()) {
            b.width = plan.width();
            plan.marshal(&w.slots, *dir != Direction::Out, &mut b.bytes);
        }
        if let Some(l) = pc.ret {
            w.calls.retbuf.width = l.width;
            w.calls.retbuf.bytes.clear();
            w.calls.retbuf.bytes.resize(l.width.div_ceil(8) as usize, 0);
        }
        let r = self
            .invoke_in_place(w, pc.inst, pc.method, n, pc.ret.is_some())
            .and_then(|()| {
                let outs = pc
                    .args
                    .iter()
                    .zip(w.calls.bitbufs.iter())
                    .filter(|((_, d), _)| *d != Direction::In)
                    .map(|((p, _), b)| (p.width(), b));
                check_lengths(outs, pc.ret.map(|l| (l.width, &w.calls.retbuf)))
            });
        if let Err(e) = r {
            return self.extern_fault(w, e);
        }
        for ((plan, dir), b) in pc.args.iter().zip(w.calls.bitbufs.iter()) {
            if *dir != Direction::In {
                plan.write(&b.bytes, &mut w.slots);
            }
        }
        if let Some(l) = pc.ret {
            let bytes = std::mem::take(&mut w.calls.retbuf.bytes);
            self.store_bits(w, l, &bytes, bytes.len() * 8 - l.width as usize);
            w.calls.retbuf.bytes = bytes;
        }
        Flow::Next
    }

    /// A call site its extern compiled for itself ([`PlannedCall::bind`]): it reads and writes the
    /// slots.
    #[inline(always)]
    pub(crate) fn extern_call_bound(
        &self,
        w: &mut Worker,
        inst: usize,
        method: u32,
        b: &dyn BoundCall,
    ) -> Flow {
        let r = with_payload(
            &w.packet.pkt,
            &mut w.packet.payload_at,
            &mut w.packet.payload,
            &mut w.packet.payload_skip,
            |p| b.call(&mut w.slots, p),
        );
        self.trace_extern(w, inst, method);
        match r {
            Ok(()) => Flow::Next,
            Err(e) => self.extern_fault(w, e),
        }
    }

    /// [`Engine::extern_call_bound`] for a call site whose argument is a header no statement can
    /// have written before the call ([`crate::load::pristine`]): vouched for when the header is valid (so
    /// extracted in this pass, which also wrote its offset, or cleared it on the general path), the
    /// fast path recorded its offset, and the payload, still the received packet's bytes, starts
    /// right after it.
    #[inline(always)]
    pub(crate) fn extern_call_bound_pristine(
        &self,
        w: &mut Worker,
        inst: usize,
        method: u32,
        b: &dyn BoundCall,
        p: crate::load::pristine::PristineArg,
    ) -> Flow {
        let valid = w.slots.get(p.valid).is_some_and(|v| *v != 0);
        let off = w
            .packet
            .hdr_off
            .get(p.header)
            .copied()
            .unwrap_or(crate::NO_OFFSET);
        let vouch = valid && off != crate::NO_OFFSET && off + p.len == w.packet.payload_at;
        let r = with_payload(
            &w.packet.pkt,
            &mut w.packet.payload_at,
            &mut w.packet.payload,
            &mut w.packet.payload_skip,
            |pl| {
                if vouch {
                    pl.vouch_prefix(p.len);
                }
                b.call(&mut w.slots, pl)
            },
        );
        self.trace_extern(w, inst, method);
        match r {
            Ok(()) => Flow::Next,
            Err(e) => self.extern_fault(w, e),
        }
    }

    /// Call extern method `method` of instance `inst` with the worker's argument buffers in place
    /// (the first `n`, and the return buffer when `with_ret`).
    #[inline]
    fn invoke_in_place(
        &self,
        w: &mut Worker,
        inst: usize,
        method: u32,
        n: usize,
        with_ret: bool,
    ) -> Result<(), ExternError> {
        let (bufs, retbuf) = (&mut w.calls.bitbufs[..n], &mut w.calls.retbuf);
        let r = call_with_payload(
            &*self.externs.instances[inst],
            self.externs.methods[inst][method as usize],
            bufs,
            with_ret.then_some(retbuf),
            &w.packet.pkt,
            &mut w.packet.payload_at,
            &mut w.packet.payload,
            &mut w.packet.payload_skip,
        );
        self.trace_extern(w, inst, method);
        r
    }

    /// Call extern method `method` of instance `inst` with argument buffers held apart from the
    /// worker.
    fn invoke(
        &self,
        w: &mut Worker,
        inst: usize,
        method: u32,
        bufs: &mut [BitBuf],
        ret: Option<&mut BitBuf>,
    ) -> Result<(), ExternError> {
        let r = call_with_payload(
            &*self.externs.instances[inst],
            self.externs.methods[inst][method as usize],
            bufs,
            ret,
            &w.packet.pkt,
            &mut w.packet.payload_at,
            &mut w.packet.payload,
            &mut w.packet.payload_skip,
        );
        self.trace_extern(w, inst, method);
        r
    }

    #[inline(always)]
    fn trace_extern(&self, w: &mut Worker, inst: usize, method: u32) {
        if w.trace.is_some() {
            self.trace_extern_line(w, inst, method);
        }
    }

    #[cold]
    #[inline(never)]
    fn trace_extern_line(&self, w: &mut Worker, inst: usize, method: u32) {
        if let Some(t) = w.trace.as_mut() {
            let x = &self.prog.externs[inst];
            t.push(format!(
                "extern {}.{}",
                x.name, x.methods[method as usize].name
            ));
        }
    }

    /// An extern call failed: counted, traced, the packet dropped.
    #[cold]
    fn extern_fault(&self, w: &mut Worker, e: ExternError) -> Flow {
        crate::bump(&w.stats.extern_faults);
        if let Some(t) = w.trace.as_mut() {
            t.push(format!("extern fault: {e}"));
        }
        w.fx.drop();
        Flow::Exit
    }
}

#[cfg(test)]
mod tests;
