//! The interpreter: expressions (u64 fast path, wide path up to MAX_WIDTH bits), statements, parser states,
//! header extraction and emission, tables, v1model built-ins and registered extern calls.

use crate::bits::{self, Wide};
use crate::compile::LeanNext;
use crate::hash;
use crate::{Engine, Worker};
use p4sec_externs::iface::{BitBuf, BoundArg, BoundCall, Dir, ExternError, Payload};
use p4sec_externs::layout::{ArgLayout, Part};
use p4sec_ir::*;
use std::sync::atomic::Ordering;

/// How a statement list finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Next,
    Break(u32),
    Exit,
    /// Parser error (error code); the parser stops.
    Reject(u32),
}

#[inline]
fn mask(w: u32) -> u64 {
    bits::mask64(w)
}

#[inline]
fn sext(v: u64, w: u32) -> i64 {
    if w >= 64 {
        v as i64
    } else {
        ((v << (64 - w)) as i64) >> (64 - w)
    }
}

pub use p4sec_externs::layout::read_bits;

/// Precomputed extraction facts of one header type.
#[derive(Clone, Debug)]
pub(crate) struct HeaderPlan {
    /// Sum of the fixed field widths (bits).
    pub fixed: usize,
    /// Maximum width of the varbit field (0 when there is none).
    pub var_max: u32,
    /// All fields fixed and at most 56 bits wide: each is read with one 64-bit big-endian load.
    pub narrow: bool,
    /// For narrow headers: per field, (slot, byte offset in the header, right shift after a 64-bit load,
    /// mask, width).
    pub fields: Vec<(u32, u32, u32, u64, u32)>,
    /// For narrow headers of at most 128 bytes: how to build the header's bytes as big-endian 64-bit words,
    /// one (slot, mask, right shift, left shift, word) per field and word it touches.
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
                    // the field's bits [pos, pos + w) of the header, in each 64-bit word they overlap
                    for k in pos / 64..=(pos + w - 1) / 64 {
                        let s = 64 * (k as i64 + 1) - (pos + w) as i64;
                        let (r, l) = if s >= 0 { (0, s as u32) } else { ((-s) as u32, 0) };
                        emit_ops.push((f.loc.slot, mask(w), r, l, k));
                    }
                }
                pos += w;
            }
        }
        HeaderPlan { fixed, var_max, narrow, fields, emit_ops }
    }
}

/// Appends bit fields MSB first to a byte vector through a 128-bit accumulator.
#[derive(Default, Clone, Copy, Debug)]
pub struct BitWriter {
    pub(crate) acc: u128,
    pub(crate) n: u32,
}

impl BitWriter {
    #[inline]
    pub fn put(&mut self, out: &mut Vec<u8>, v: u64, width: u32) {
        if width == 0 {
            return;
        }
        self.acc = (self.acc << width) | (v & mask(width)) as u128;
        self.n += width;
        if self.n >= 64 {
            let x = (self.acc >> (self.n - 64)) as u64;
            out.extend_from_slice(&x.to_be_bytes());
            self.n -= 64;
            self.acc &= (1u128 << self.n) - 1;
        }
    }
    pub fn put_wide(&mut self, out: &mut Vec<u8>, v: &Wide, width: u32) {
        let mut remaining = width;
        while remaining > 0 {
            let chunk = if remaining % 64 == 0 { 64 } else { remaining % 64 };
            let x = bits::slice(v, remaining - 1, remaining - chunk)[0];
            self.put(out, x, chunk);
            remaining -= chunk;
        }
    }
    /// Flush the pending bits, padding the last byte with zeros.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        while self.n >= 8 {
            out.push((self.acc >> (self.n - 8)) as u8);
            self.n -= 8;
        }
        if self.n > 0 {
            out.push((self.acc << (8 - self.n)) as u8);
        }
        self.acc = 0;
        self.n = 0;
    }
}

fn read_wide(data: &[u8], pos: usize, width: u32) -> Wide {
    let mut v = bits::ZERO;
    let mut done = 0;
    while done < width {
        let chunk = (width - done).min(64);
        let x = read_bits(data, pos + done as usize, chunk);
        v = bits::shl(&v, chunk, p4sec_ir::MAX_WIDTH);
        v[0] |= x;
        done += chunk;
    }
    v
}

/// The layout of extern argument `a` ([`ArgLayout`]), if every part is a load of a fixed location or a
/// narrow constant (and, for `out`/`inout`, every destination is a fixed location) and fields wider than 64
/// bits sit on byte boundaries.
pub(crate) fn plan_arg(a: &ExternArg) -> Option<ArgLayout> {
    let field = |l: &Loc| Part::Field { slot: l.slot, width: l.width };
    let parts: Vec<Part> = if a.dir == Direction::In {
        let mut parts = vec![];
        for e in &a.parts {
            match e {
                Expr::Load(LValue::Static(l)) => parts.push(field(l)),
                Expr::Small { value, width } => parts.push(Part::Const { value: *value, width: *width }),
                // a constant wider than 64 bits (a key written in the program): 64-bit pieces, most
                // significant first
                Expr::Const(v) => {
                    let n = words_for(v.width);
                    for k in (0..n).rev() {
                        let width = if k + 1 == n { v.width - 64 * k } else { 64 };
                        parts.push(Part::Const { value: v.words.get(k as usize).copied().unwrap_or(0) & crate::bits::mask64(width), width });
                    }
                }
                _ => return None,
            }
        }
        parts
    } else {
        a.dsts.iter().map(|d| if let LValue::Static(l) = d { Some(field(l)) } else { None }).collect::<Option<_>>()?
    };
    if a.dir == Direction::InOut {
        // the value going in must be the destinations' own
        let same = a.parts.len() == parts.len()
            && a.parts.iter().zip(&parts).all(|(e, p)| matches!((e, p), (Expr::Load(LValue::Static(x)), Part::Field { slot, width }) if x.slot == *slot && x.width == *width));
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

/// An extern call site whose arguments are all planned ([`ArgLayout`]) and whose return value, if any, goes to
/// a fixed location: what [`Engine::extern_call_planned`] needs per packet, resolved once.
pub(crate) struct PlannedCall {
    inst: usize,
    method: u32,
    /// Per argument: its layout and its direction.
    args: Vec<(ArgLayout, Direction)>,
    ret: Option<Loc>,
}

impl PlannedCall {
    pub(crate) fn new(inst: usize, method: u32, args: &[ExternArg], plans: &[Option<ArgLayout>], ret: Option<&LValue>) -> Option<Self> {
        let ret = match ret {
            None => None,
            Some(LValue::Static(l)) => Some(*l),
            Some(_) => return None,
        };
        let args = args.iter().zip(plans).map(|(a, p)| p.clone().map(|p| (p, a.dir))).collect::<Option<Vec<_>>>()?;
        Some(PlannedCall { inst, method, args, ret })
    }

    /// The call site compiled by its extern, if the extern binds it ([`ExternObject::bind`]); `frame_prefix`:
    /// the argument the engine may vouch for ([`crate::pristine`]).
    pub(crate) fn bind(&self, cx: &crate::compile::Cx, frame_prefix: Option<usize>) -> Option<Box<dyn BoundCall>> {
        let obj = cx.externs.get(self.inst)?;
        let m = *cx.methods.get(self.inst)?.get(self.method as usize)?;
        let args: Vec<BoundArg> =
            self.args.iter().enumerate().map(|(i, (layout, d))| BoundArg { dir: dir_of(*d), layout, frame_prefix: frame_prefix == Some(i) }).collect();
        let ret = match self.ret {
            Some(l) => Some(ArgLayout::new(l.width, &[Part::Field { slot: l.slot, width: l.width }])?),
            None => None,
        };
        obj.bind(m, &args, ret.as_ref())
    }
}

/// Run `f` (an extern method) with the payload as a view of the received packet while it is still there (an
/// extern that only reads it costs no copy; the first write copies it out, `Payload::vec_mut`), and note when
/// it no longer is.
#[inline(always)]
fn with_payload<R>(pkt: &[u8], payload_at: &mut usize, owned: &mut Vec<u8>, f: impl FnOnce(&mut Payload<'_>) -> R) -> R {
    let mut payload = if *payload_at != crate::NOT_IN_PKT { Payload::in_packet(pkt, *payload_at, owned) } else { Payload::owned(owned) };
    let r = f(&mut payload);
    if !payload.is_in_packet() {
        *payload_at = crate::NOT_IN_PKT;
    }
    r
}

/// [`ExternObject::call`] through [`with_payload`].
#[inline]
fn call_with_payload(
    obj: &dyn p4sec_externs::iface::ExternObject,
    m: u32,
    bufs: &mut [BitBuf],
    ret: Option<&mut BitBuf>,
    pkt: &[u8],
    payload_at: &mut usize,
    owned: &mut Vec<u8>,
) -> Result<(), ExternError> {
    with_payload(pkt, payload_at, owned, |p| obj.call(m, bufs, ret, p))
}

/// An extern that resized an argument it writes, or the return value, broke the interface: a fault, not a
/// write-back of the wrong bits. `outs`: (width, buffer) of each `out`/`inout` argument.
#[inline(always)]
fn check_lengths<'a>(mut outs: impl Iterator<Item = (u32, &'a BitBuf)>, ret: Option<(u32, &BitBuf)>) -> Result<(), ExternError> {
    if let Some((wd, b)) = outs.find(|(wd, b)| b.bytes.len() != wd.div_ceil(8) as usize) {
        return Err(ExternError::Failed(format!("an out argument of {wd} bits came back as {} bytes", b.bytes.len())));
    }
    match ret {
        Some((wd, b)) if b.bytes.len() != wd.div_ceil(8) as usize => {
            Err(ExternError::Failed(format!("the return value of {wd} bits came back as {} bytes", b.bytes.len())))
        }
        _ => Ok(()),
    }
}

impl Engine {
    // ------------------------------------------------------------ locations

    #[inline]
    fn resolve(&self, w: &mut Worker, lv: &LValue) -> Option<Loc> {
        match lv {
            LValue::Static(l) => Some(*l),
            LValue::Dynamic { base, stride, count, index } => {
                let i = self.eval(w, index);
                if i < *count as u64 {
                    Some(Loc { slot: base.slot + stride * i as u32, width: base.width })
                } else {
                    None
                }
            }
        }
    }

    #[inline]
    pub(crate) fn load(&self, w: &Worker, l: Loc) -> u64 {
        w.slots[l.slot as usize]
    }

    #[inline]
    pub(crate) fn store(&self, w: &mut Worker, l: Loc, v: u64) {
        w.slots[l.slot as usize] = v & mask(l.width);
    }

    fn load_wide(&self, w: &Worker, l: Loc) -> Wide {
        let mut v = bits::ZERO;
        let n = words_for(l.width) as usize;
        v[..n].copy_from_slice(&w.slots[l.slot as usize..l.slot as usize + n]);
        v
    }

    fn store_wide(&self, w: &mut Worker, l: Loc, v: &Wide) {
        let n = words_for(l.width) as usize;
        let mut v = *v;
        bits::truncate(&mut v, l.width);
        w.slots[l.slot as usize..l.slot as usize + n].copy_from_slice(&v[..n]);
    }

    #[allow(dead_code)]
    pub(crate) fn load_value(&self, w: &Worker, l: Loc) -> Value {
        let n = words_for(l.width) as usize;
        Value { width: l.width, words: w.slots[l.slot as usize..l.slot as usize + n].to_vec() }
    }

    // ------------------------------------------------------------ expressions

    /// Evaluate an expression of width ≤ 64.
    pub(crate) fn eval(&self, w: &mut Worker, e: &Expr) -> u64 {
        match e {
            Expr::Load(LValue::Static(l)) => w.slots[l.slot as usize],
            Expr::Small { value, .. } => *value,
            Expr::Const(v) => v.as_u64(),
            Expr::Load(lv) => match self.resolve(w, lv) {
                Some(l) => self.load(w, l),
                None => 0,
            },
            Expr::Unary { op, width, arg } => {
                let a = self.eval(w, arg);
                match op {
                    UnOp::Not => (a == 0) as u64,
                    UnOp::BitNot => !a & mask(*width),
                    UnOp::Neg => a.wrapping_neg() & mask(*width),
                }
            }
            Expr::Binary { op, width, signed, lhs, rhs } => {
                match op {
                    BinOp::And => return (self.eval(w, lhs) != 0 && self.eval(w, rhs) != 0) as u64,
                    BinOp::Or => return (self.eval(w, lhs) != 0 || self.eval(w, rhs) != 0) as u64,
                    _ => {}
                }
                let is_cmp = matches!(op, BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge);
                let ow = if is_cmp { lhs.width() } else { *width };
                if ow > 64 {
                    return self.eval_wide_cmp(w, *op, *signed, lhs, rhs);
                }
                let a = self.eval(w, lhs);
                let b = self.eval(w, rhs);
                let m = mask(*width);
                match op {
                    BinOp::Add => a.wrapping_add(b) & m,
                    BinOp::Sub => a.wrapping_sub(b) & m,
                    BinOp::Mul => a.wrapping_mul(b) & m,
                    BinOp::Div => a.checked_div(b).unwrap_or(0) & m,
                    BinOp::Mod => a.checked_rem(b).unwrap_or(0) & m,
                    BinOp::AddSat | BinOp::SubSat => {
                        if *signed {
                            let (x, y) = (sext(a, *width) as i128, sext(b, *width) as i128);
                            let r = if *op == BinOp::AddSat { x + y } else { x - y };
                            let max = (1i128 << (width - 1)) - 1;
                            let min = -(1i128 << (width - 1));
                            (r.clamp(min, max) as u64) & m
                        } else {
                            let r = if *op == BinOp::AddSat { a as u128 + b as u128 } else { (a as u128).saturating_sub(b as u128) };
                            r.min(m as u128) as u64
                        }
                    }
                    BinOp::Shl => {
                        if b >= *width as u64 {
                            0
                        } else {
                            (a << b) & m
                        }
                    }
                    BinOp::Shr => {
                        if *signed {
                            let s = sext(a, *width);
                            (s >> b.min(63)) as u64 & m
                        } else if b >= 64 {
                            0
                        } else {
                            a >> b
                        }
                    }
                    BinOp::BitAnd => a & b,
                    BinOp::BitOr => a | b,
                    BinOp::BitXor => a ^ b,
                    BinOp::Eq => (a == b) as u64,
                    BinOp::Ne => (a != b) as u64,
                    BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                        let ord = if *signed { sext(a, ow).cmp(&sext(b, ow)) } else { a.cmp(&b) };
                        let r = match op {
                            BinOp::Lt => ord.is_lt(),
                            BinOp::Le => ord.is_le(),
                            BinOp::Gt => ord.is_gt(),
                            _ => ord.is_ge(),
                        };
                        r as u64
                    }
                    BinOp::And | BinOp::Or => unreachable!(),
                }
            }
            Expr::Slice { arg, hi, lo } => {
                if arg.width() > 64 {
                    let v = self.eval_wide(w, arg);
                    bits::slice(&v, *hi, *lo)[0]
                } else {
                    (self.eval(w, arg) >> lo) & mask(hi - lo + 1)
                }
            }
            Expr::Concat { hi, lo } => {
                let lw = lo.width();
                let h = self.eval(w, hi);
                let l = self.eval(w, lo);
                if lw >= 64 {
                    l
                } else {
                    (h << lw) | l
                }
            }
            Expr::Cast { arg, width, signed } => {
                let aw = arg.width();
                if aw > 64 {
                    return self.eval_wide(w, arg)[0] & mask(*width);
                }
                let a = self.eval(w, arg);
                if *signed && *width > aw {
                    (sext(a, aw) as u64) & mask(*width)
                } else {
                    a & mask(*width)
                }
            }
            Expr::Cond { cond, then, else_, .. } => {
                if self.eval(w, cond) != 0 {
                    self.eval(w, then)
                } else {
                    self.eval(w, else_)
                }
            }
            Expr::Lookahead { width } => {
                if w.cursor + *width as usize > w.pkt.len() * 8 {
                    w.perr = self.err_too_short;
                    0
                } else {
                    read_bits(&w.pkt, w.cursor, *width)
                }
            }
            Expr::PacketLength => w.pkt.len() as u64,
        }
    }

    #[inline(never)]
    fn eval_wide_cmp(&self, w: &mut Worker, op: BinOp, signed: bool, lhs: &Expr, rhs: &Expr) -> u64 {
        let ow = lhs.width();
        let a = self.eval_wide(w, lhs);
        let b = self.eval_wide(w, rhs);
        let ord = if signed {
            let (na, nb) = (bits::bit(&a, ow - 1), bits::bit(&b, ow - 1));
            match (na, nb) {
                (true, false) => std::cmp::Ordering::Less,
                (false, true) => std::cmp::Ordering::Greater,
                _ => bits::cmp(&a, &b),
            }
        } else {
            bits::cmp(&a, &b)
        };
        (match op {
            BinOp::Eq => ord.is_eq(),
            BinOp::Ne => ord.is_ne(),
            BinOp::Lt => ord.is_lt(),
            BinOp::Le => ord.is_le(),
            BinOp::Gt => ord.is_gt(),
            BinOp::Ge => ord.is_ge(),
            _ => {
                // arithmetic with a narrow result from wide operands cannot occur (widths are equal)
                let r = self.wide_arith(op, signed, ow, &a, &b);
                return r[0];
            }
        }) as u64
    }

    fn wide_arith(&self, op: BinOp, signed: bool, width: u32, a: &Wide, b: &Wide) -> Wide {
        match op {
            BinOp::Add => bits::add(a, b, width),
            BinOp::Sub => bits::sub(a, b, width),
            BinOp::Mul => bits::mul(a, b, width),
            BinOp::Div => bits::divmod(a, b, width).0,
            BinOp::Mod => bits::divmod(a, b, width).1,
            BinOp::BitAnd => std::array::from_fn(|i| a[i] & b[i]),
            BinOp::BitOr => std::array::from_fn(|i| a[i] | b[i]),
            BinOp::BitXor => std::array::from_fn(|i| a[i] ^ b[i]),
            BinOp::Shl => bits::shl(a, if b[1..].iter().any(|x| *x != 0) { u32::MAX } else { b[0].min(u32::MAX as u64) as u32 }, width),
            BinOp::Shr => {
                let n = if b[1..].iter().any(|x| *x != 0) { u32::MAX } else { b[0].min(u32::MAX as u64) as u32 };
                if signed && bits::bit(a, width - 1) {
                    let r = bits::shr(a, n.min(width));
                    bits::sign_extend(&r, width.saturating_sub(n.min(width)).max(1), width)
                } else {
                    bits::shr(a, n)
                }
            }
            BinOp::AddSat | BinOp::SubSat => {
                if signed {
                    // rare: fall back to wrapping
                    if op == BinOp::AddSat {
                        bits::add(a, b, width)
                    } else {
                        bits::sub(a, b, width)
                    }
                } else if op == BinOp::AddSat {
                    let s = bits::add(a, b, width);
                    if bits::cmp(&s, a).is_lt() {
                        bits::not(&bits::ZERO, width)
                    } else {
                        s
                    }
                } else if bits::cmp(a, b).is_lt() {
                    bits::ZERO
                } else {
                    bits::sub(a, b, width)
                }
            }
            _ => bits::ZERO,
        }
    }

    /// Evaluate an expression of any width as a wide value.
    #[inline(never)]
    pub(crate) fn eval_wide(&self, w: &mut Worker, e: &Expr) -> Wide {
        let width = e.width();
        if width <= 64 {
            return bits::from_u64(self.eval(w, e));
        }
        match e {
            Expr::Small { value, .. } => bits::from_u64(*value),
            Expr::Const(v) => {
                let mut x = bits::ZERO;
                for (i, word) in v.words.iter().enumerate().take(bits::WORDS) {
                    x[i] = *word;
                }
                x
            }
            Expr::Load(lv) => match self.resolve(w, lv) {
                Some(l) => self.load_wide(w, l),
                None => bits::ZERO,
            },
            Expr::Unary { op, width, arg } => {
                let a = self.eval_wide(w, arg);
                match op {
                    UnOp::Not => bits::from_u64(bits::is_zero(&a) as u64),
                    UnOp::BitNot => bits::not(&a, *width),
                    UnOp::Neg => bits::neg(&a, *width),
                }
            }
            Expr::Binary { op, width, signed, lhs, rhs } => {
                let a = self.eval_wide(w, lhs);
                let b = self.eval_wide(w, rhs);
                self.wide_arith(*op, *signed, *width, &a, &b)
            }
            Expr::Slice { arg, hi, lo } => {
                let v = self.eval_wide(w, arg);
                bits::slice(&v, *hi, *lo)
            }
            Expr::Concat { hi, lo } => {
                let lw = lo.width();
                let h = self.eval_wide(w, hi);
                let l = self.eval_wide(w, lo);
                let s = bits::shl(&h, lw, p4sec_ir::MAX_WIDTH);
                let mut r: Wide = std::array::from_fn(|i| s[i] | l[i]);
                bits::truncate(&mut r, width);
                r
            }
            Expr::Cast { arg, width, signed } => {
                let aw = arg.width();
                let a = self.eval_wide(w, arg);
                if *signed && *width > aw {
                    bits::sign_extend(&a, aw, *width)
                } else {
                    let mut r = a;
                    bits::truncate(&mut r, *width);
                    r
                }
            }
            Expr::Cond { cond, then, else_, .. } => {
                if self.eval(w, cond) != 0 {
                    self.eval_wide(w, then)
                } else {
                    self.eval_wide(w, else_)
                }
            }
            Expr::Lookahead { width } => {
                if w.cursor + *width as usize > w.pkt.len() * 8 {
                    w.perr = self.err_too_short;
                    bits::ZERO
                } else {
                    read_wide(&w.pkt, w.cursor, *width)
                }
            }
            Expr::PacketLength => bits::from_u64(w.pkt.len() as u64),
        }
    }

    fn assign(&self, w: &mut Worker, dst: &LValue, src: &Expr) {
        let Some(l) = self.resolve(w, dst) else {
            // out-of-bounds stack index: still evaluate for side effects (none), write ignored
            return;
        };
        if l.width <= 64 {
            let v = self.eval(w, src);
            self.store(w, l, v);
        } else {
            let v = self.eval_wide(w, src);
            self.store_wide(w, l, &v);
        }
    }

    /// Append the bits of `e` (MSB first) through the bit writer `bw`.
    #[inline]
    fn put_expr(&self, w: &mut Worker, e: &Expr, buf: &mut Vec<u8>, bw: &mut BitWriter) {
        if let Expr::Load(LValue::Static(l)) = e {
            if l.width % 8 == 0 && bw.n % 8 == 0 {
                // whole bytes at a byte boundary (header fields, addresses): the slot words' bytes, MSB first
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
            // fast path: one's complement sum of the bit string taken 16 bits at a time, without a buffer;
            // the tail is padded with zeros to 16 bits, as the byte form pads to a byte and then to a word
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
            while sum >> 16 != 0 {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            return !(sum as u16) as u64;
        }
        self.concat_data(w, data);
        if with_payload {
            let payload = if w.payload_at != crate::NOT_IN_PKT { &w.pkt[w.payload_at.min(w.pkt.len())..] } else { &w.payload[..] };
            w.scratch.extend_from_slice(payload);
        }
        hash::compute(algo, &w.scratch, &mut w.rng)
    }

    /// Concatenate data expressions into `w.scratch` as bytes (zero-padded at the end).
    fn concat_data(&self, w: &mut Worker, data: &[Expr]) {
        let mut buf = std::mem::take(&mut w.scratch);
        buf.clear();
        let mut bw = BitWriter::default();
        for e in data {
            match e {
                Expr::Load(LValue::Static(l)) if l.width <= 64 => bw.put(&mut buf, w.slots[l.slot as usize], l.width),
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
        w.scratch = buf;
    }

    // ------------------------------------------------------------ headers

    /// The header index a reference denotes (None when out of bounds).
    fn header_index(&self, w: &mut Worker, h: &HeaderRef) -> Option<u32> {
        match h {
            HeaderRef::Static(i) => Some(*i),
            HeaderRef::Dynamic { stack, index } => {
                let s = &self.prog.stacks[*stack as usize];
                let i = self.eval(w, index);
                s.elements.get(i as usize).copied().filter(|h| *h != u32::MAX)
            }
            HeaderRef::Next { stack } => {
                let s = &self.prog.stacks[*stack as usize];
                let i = self.load(w, s.next_index);
                s.elements.get(i as usize).copied().filter(|h| *h != u32::MAX)
            }
        }
    }

    #[inline(never)]
    pub(crate) fn extract(&self, w: &mut Worker, h: &HeaderRef, varbit_bits: Option<&Expr>) -> Flow {
        let Some(hi) = self.header_index(w, h) else {
            return Flow::Reject(self.err_stack_oob);
        };
        let layout = &self.prog.headers[hi as usize];
        let plan = &self.hplans[hi as usize];
        let (fixed, var_max) = (plan.fixed, plan.var_max);
        // the header's fields no longer come from a recorded offset (see `Worker::hdr_off`)
        if let Some(o) = w.hdr_off.get_mut(hi as usize) {
            *o = crate::NO_OFFSET;
        }
        let var = match varbit_bits {
            Some(e) => {
                let n = self.eval(w, e);
                if n > var_max as u64 {
                    return Flow::Reject(self.err_header_too_short);
                }
                if n % 8 != 0 {
                    return Flow::Reject(self.err_invalid_arg);
                }
                n as usize
            }
            None => 0,
        };
        if w.cursor + fixed + var > w.pkt.len() * 8 {
            return Flow::Reject(self.err_too_short);
        }
        let mut pos = w.cursor;
        if plan.narrow && pos % 8 == 0 && pos / 8 + fixed.div_ceil(8) + 8 <= w.pkt.len() {
            // fast path: one unaligned 64-bit big-endian load per field (8 bytes of slack past the header)
            let base = pos / 8;
            let bytes = &w.pkt[base..base + fixed.div_ceil(8) + 8];
            for &(slot, off, shift, m, _) in &plan.fields {
                let i = off as usize;
                let word = u64::from_be_bytes(bytes[i..i + 8].try_into().unwrap());
                w.slots[slot as usize] = (word >> shift) & m;
            }
            pos += fixed;
        } else if plan.narrow && pos % 8 == 0 {
            // byte-aligned header of narrow fields near the end of the packet: a 64-bit accumulator
            let bytes = &w.pkt[pos / 8..(pos + fixed).div_ceil(8)];
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
                        let v = read_wide(&w.pkt, pos, var as u32);
                        self.store_wide(w, f.loc, &v);
                        self.store(w, len, var as u64);
                        pos += var;
                    }
                    None => {
                        if f.loc.width <= 64 {
                            let v = read_bits(&w.pkt, pos, f.loc.width);
                            w.slots[f.loc.slot as usize] = v;
                        } else {
                            let v = read_wide(&w.pkt, pos, f.loc.width);
                            self.store_wide(w, f.loc, &v);
                        }
                        pos += f.loc.width as usize;
                    }
                }
            }
        }
        w.cursor = pos;
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
        let Some(hi) = self.header_index(w, h) else { return };
        let layout = &self.prog.headers[hi as usize];
        if w.slots[layout.valid.slot as usize] == 0 {
            return;
        }
        let plan = &self.hplans[hi as usize];
        let mut out = std::mem::take(&mut w.out);
        let mut bw = w.bw;
        let len = plan.fixed.div_ceil(8);
        if plan.narrow && bw.n % 8 == 0 && !plan.emit_ops.is_empty() {
            // fast path: each field OR-ed into the 64-bit words it overlaps, then the words stored big-endian
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
            w.bw = bw;
            w.out = out;
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
        w.bw = bw;
        w.out = out;
    }

    #[inline(never)]
    fn copy_header(&self, w: &mut Worker, dst: &HeaderRef, src: &HeaderRef) {
        let (Some(d), Some(s)) = (self.header_index(w, dst), self.header_index(w, src)) else { return };
        let (dl, sl) = (&self.prog.headers[d as usize], &self.prog.headers[s as usize]);
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

    // ------------------------------------------------------------ statements

    pub(crate) fn exec(&self, w: &mut Worker, stmts: &[Stmt]) -> Flow {
        for s in stmts {
            let f = self.exec_one(w, s);
            if !matches!(f, Flow::Next) {
                return f;
            }
            if w.perr != 0 {
                let e = w.perr;
                w.perr = 0;
                return Flow::Reject(e);
            }
        }
        Flow::Next
    }

    pub(crate) fn exec_one(&self, w: &mut Worker, s: &Stmt) -> Flow {
        match s {
            Stmt::Assign { dst, src } => {
                self.assign(w, dst, src);
                Flow::Next
            }
            Stmt::SetValid { hdr, valid } => {
                if let Some(h) = self.header_index(w, hdr) {
                    let l = self.prog.headers[h as usize].valid;
                    w.slots[l.slot as usize] = *valid as u64;
                }
                Flow::Next
            }
            Stmt::CopyHeader { dst, src } => {
                self.copy_header(w, dst, src);
                Flow::Next
            }
            Stmt::If { cond, then, else_ } => {
                if self.eval(w, cond) != 0 {
                    self.exec(w, then)
                } else {
                    self.exec(w, else_)
                }
            }
            Stmt::Switch { expr, cases, default } => {
                let v = if expr.width() <= 64 { bits::from_u64(self.eval(w, expr)) } else { self.eval_wide(w, expr) };
                for (vals, body) in cases {
                    if vals.iter().any(|c| c.words.iter().enumerate().all(|(i, x)| *x == v[i])) {
                        return self.exec(w, body);
                    }
                }
                self.exec(w, default)
            }
            Stmt::Block { label, body } => match self.exec(w, body) {
                Flow::Break(l) if l == *label => Flow::Next,
                f => f,
            },
            Stmt::Break(l) => Flow::Break(*l),
            Stmt::Exit => Flow::Exit,
            Stmt::ApplyTable { table, hit, action_run } => self.apply_table(w, *table as usize, *hit, *action_run),
            Stmt::CallAction { action, args } => {
                let a = &self.prog.actions[*action as usize];
                for (p, e) in a.params.iter().zip(args) {
                    let dst = LValue::Static(p.loc);
                    self.assign(w, &dst, e);
                }
                self.exec(w, &a.body)
            }
            Stmt::Extract { hdr, varbit_bits } => self.extract(w, hdr, varbit_bits.as_ref()),
            Stmt::Advance { bits } => {
                let n = self.eval(w, bits) as usize;
                if w.cursor + n > w.pkt.len() * 8 {
                    return Flow::Reject(self.err_too_short);
                }
                w.cursor += n;
                Flow::Next
            }
            Stmt::Emit { hdr } => {
                self.emit(w, hdr);
                Flow::Next
            }
            Stmt::Builtin(b) => self.builtin(w, b),
            Stmt::ExternCall { inst, method, args, ret } => self.extern_call(w, *inst as usize, *method, args, &[], ret.as_ref()),
        }
    }

    #[inline(never)]
    /// Pack table `ti`'s key for this packet into `key` (each field in its layout words).
    fn table_key(&self, w: &mut Worker, ti: usize, key: &mut [u64; crate::tables::KEY_WORDS]) {
        let t = &self.prog.tables[ti];
        let layout = &self.key_layouts[ti];
        for ((k, &(off, words)), ck) in t.keys.iter().zip(layout.iter()).zip(&self.code.table_keys[ti]) {
            if let Some(f) = ck {
                key[off] = f(self, w);
            } else if k.width <= 64 {
                key[off] = self.eval(w, &k.expr);
            } else {
                let v = self.eval_wide(w, &k.expr);
                key[off..off + words].copy_from_slice(&v[..words]);
            }
        }
    }

    pub(crate) fn apply_table(&self, w: &mut Worker, ti: usize, hit: Option<Loc>, action_run: Option<Loc>) -> Flow {
        let t = &self.prog.tables[ti];
        let layout = &self.key_layouts[ti];
        let mut key = [0u64; crate::tables::KEY_WORDS];
        let keys = &self.code.table_keys[ti];
        if let (true, Some(Some(f))) = (self.one_word_key[ti], keys.first()) {
            key[0] = f(self, w);
        } else {
            self.table_key(w, ti, &mut key);
        }
        // action selectors: the selector keys do not match (their words are zero in the lookup key); they
        // choose a member of a group
        let mut selector_key = None;
        if let Some((_, sel)) = &self.selectors[ti] {
            selector_key = Some(key);
            for &k in sel {
                let (off, words) = layout[k];
                key[off..off + words].fill(0);
            }
        }
        // the worker's snapshot of the table (refreshed per packet when the control plane changed a table);
        // taken out of the worker while the action runs, so no reference count is touched
        let data = match w.tables.get_mut(ti).and_then(Option::take) {
            Some(d) => d,
            None => self.tables[ti].data.load_full(),
        };
        let mut found = data.lookup(t, &key);
        let mut chosen = None;
        if let (Some(i), Some(full)) = (found, selector_key.as_ref()) {
            if data.hot(i).selects {
                let h = self.selector_hash(w, ti, full);
                chosen = data.entries[i].indirect.as_deref().and_then(|ind| ind.pick(h));
                if chosen.is_none() {
                    found = None; // an empty group: the table misses
                }
            }
        }
        if let Some((h, m)) = w.stats.tables.get(ti) {
            crate::bump(if found.is_some() { h } else { m });
        }
        let len = w.pkt_len as u64;
        // the action and its arguments: inline in the entry's hot line when possible
        let mut inline = None;
        let call = match found {
            Some(i) => {
                // per-entry state is touched only when the table has it (shared atomics cost a locked
                // instruction and a cache line per hit)
                if self.entry_state[ti] {
                    let e = &data.entries[i];
                    if t.direct_counter.is_some() {
                        e.packets.fetch_add(1, Ordering::Relaxed);
                        e.bytes.fetch_add(len, Ordering::Relaxed);
                    }
                    if t.support_timeout {
                        e.last_hit.store(crate::coarse_ms(), Ordering::Relaxed);
                    }
                    w.cur_meter = if t.direct_meter.is_some() { e.meter.clone() } else { None };
                } else {
                    w.cur_meter = None;
                }
                match chosen {
                    Some(c) => Err(c),
                    None => {
                        let hot = data.hot(i);
                        if hot.nargs != crate::tables::Hot::NOT_INLINE {
                            inline = Some(hot);
                            Ok(hot.action)
                        } else {
                            Err(&data.entries[i].entry.action)
                        }
                    }
                }
            }
            None => {
                w.cur_meter = None;
                Ok(self.default_args(w, &data))
            }
        };
        let a = match call {
            Ok(a) => a,
            Err(c) => c.action,
        } as usize;
        let action = &self.prog.actions[a];
        match (inline, call) {
            (Some(hot), _) => self.inline_args(w, a, hot),
            // arguments not inline (wide arguments, a selected member)
            (None, Err(c)) => self.entry_args(w, a, &c.args),
            (None, Ok(_)) => {}
        }
        if let Some(tr) = w.trace.as_mut() {
            tr.push(format!("table {} {} -> {}", t.name, if found.is_some() { "hit" } else { "miss" }, action.name));
        }
        self.finish_apply(w, ti, data, found.is_some(), a, hit, action_run)
    }

    /// A miss: the default action's arguments into its parameters (slot words resolved when the table version
    /// was published); the action's index.
    #[inline(always)]
    fn default_args(&self, w: &mut Worker, data: &crate::tables::TableData) -> u32 {
        let slots = &mut w.slots[..];
        for quad in data.default_writes.chunks_exact(4) {
            for &(s, v) in quad {
                debug_assert!((s as usize) < slots.len());
                // SAFETY: `param_writes` keeps only the program's slots and the sink slot after them, all of
                // which the worker has (checked on entry to `Engine::process`)
                unsafe { *slots.get_unchecked_mut(s as usize) = v };
            }
        }
        data.default.action
    }

    /// An entry's arguments, held in the entry, into action `a`'s parameters: their words straight into the
    /// parameter slots, each top word masked to the width.
    #[inline]
    fn entry_args(&self, w: &mut Worker, a: usize, args: &[Value]) {
        let slots = &mut w.slots[..];
        for &(s, m, p, k) in &self.param_words[a] {
            if let Some(v) = crate::arg_word(args, p, k, m) {
                slots[s as usize] = v;
            }
        }
    }

    /// A hit's arguments held inline in its hot line (their words in parameter order), into action `a`'s
    /// parameters.
    #[inline(always)]
    fn inline_args(&self, w: &mut Worker, a: usize, hot: &crate::tables::Hot) {
        let words = &hot.args[..(hot.nargs as usize).min(hot.args.len())];
        let ws = &mut w.slots[..];
        for (&(s, m, _, _), v) in self.param_words[a].iter().zip(words) {
            debug_assert!((s as usize) < ws.len());
            // SAFETY: `param_words` holds only the program's slots and the sink slot after them, all of which the
            // worker has (checked on entry to `Engine::process`)
            unsafe { *ws.get_unchecked_mut(s as usize) = *v & m };
        }
    }

    /// [`Engine::apply_table`] for a table with one key of at most 64 bits and no action selector, its key
    /// `k` computed by the call site: a miss and a hit (arguments inline or not) on a table without per-entry
    /// state are handled here; anything else (an action profile group, a traced packet) takes the general path.
    #[inline(always)]
    pub(crate) fn apply_one_key(&self, w: &mut Worker, ti: usize, k: u64, hit: Option<Loc>, action_run: Option<Loc>) -> Flow {
        if w.trace.is_some() || self.entry_state[ti] {
            std::hint::cold_path();
            return self.apply_table(w, ti, hit, action_run);
        }
        let data = match w.tables.get_mut(ti).and_then(Option::take) {
            Some(d) => d,
            None => self.tables[ti].data.load_full(),
        };
        // an empty table misses without a lookup
        let found = data.lookup_one(&self.prog.tables[ti], k);
        let hot = found.map(|i| *data.hot(i));
        if hot.is_some_and(|h| h.selects) {
            std::hint::cold_path();
            if let Some(slot) = w.tables.get_mut(ti) {
                *slot = Some(data);
            }
            return self.apply_table(w, ti, hit, action_run);
        }
        if let Some((h, m)) = w.stats.tables.get(ti) {
            crate::bump(if found.is_some() { h } else { m });
        }
        w.cur_meter = None;
        let a = match (&hot, found) {
            (Some(h), _) if h.nargs != crate::tables::Hot::NOT_INLINE => {
                let a = h.action as usize;
                self.inline_args(w, a, h);
                a
            }
            (Some(_), Some(i)) => {
                // arguments not inline (wide ones, or more than fit)
                let c = &data.entries[i].entry.action;
                self.entry_args(w, c.action as usize, &c.args);
                c.action as usize
            }
            _ => self.default_args(w, &data) as usize,
        };
        self.finish_apply(w, ti, data, found.is_some(), a, hit, action_run)
    }

    /// The end of a table apply, once the action's arguments are in its parameters: `hit` and `action_run`
    /// set, the worker's table snapshot put back, the action run.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn finish_apply(&self, w: &mut Worker, ti: usize, data: std::sync::Arc<crate::tables::TableData>, found: bool, a: usize, hit: Option<Loc>, action_run: Option<Loc>) -> Flow {
        if let Some(h) = hit {
            self.store(w, h, found as u64);
        }
        if let Some(r) = action_run {
            self.store(w, r, a as u64);
        }
        if let Some(slot) = w.tables.get_mut(ti) {
            *slot = Some(data);
        }
        match self.code.actions[a].run(self, w) {
            Flow::Exit => Flow::Exit,
            Flow::Reject(e) => Flow::Reject(e),
            _ => Flow::Next,
        }
    }

    /// The selector hash of a packet for table `ti`: the table's algorithm over its selector keys (each
    /// key's value as whole bytes, most significant first, in key order).
    #[inline(never)]
    fn selector_hash(&self, w: &mut Worker, ti: usize, key: &[u64; crate::tables::KEY_WORDS]) -> u64 {
        let Some((algo, sel)) = &self.selectors[ti] else { return 0 };
        let t = &self.prog.tables[ti];
        w.scratch.clear();
        for &k in sel {
            let (off, _) = self.key_layouts[ti][k];
            let nbytes = t.keys[k].width.div_ceil(8) as usize;
            for b in (0..nbytes).rev() {
                w.scratch.push((key[off + b / 8] >> ((b % 8) * 8)) as u8);
            }
        }
        hash::compute(*algo, &w.scratch, &mut w.rng)
    }

    #[inline(never)]
    fn builtin(&self, w: &mut Worker, b: &Builtin) -> Flow {
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
            Builtin::Hash { dst, algo, base, data, max } => {
                self.concat_data(w, data);
                let h = hash::compute(*algo, &w.scratch, &mut w.rng);
                let base = self.eval(w, base);
                let max = self.eval(w, max);
                let v = if max == 0 { base.wrapping_add(h) } else { base.wrapping_add(h % max) };
                if let Some(l) = self.resolve(w, dst) {
                    self.store(w, l, v);
                }
            }
            Builtin::VerifyChecksum { cond, data, field, algo, with_payload } => {
                if self.eval(w, cond) != 0 {
                    let h = self.checksum(w, data, *algo, *with_payload) & mask(field.width());
                    if h != self.eval(w, field) {
                        self.store(w, sm.checksum_error, 1);
                    }
                }
            }
            Builtin::UpdateChecksum { cond, data, dst, algo, with_payload } => {
                if self.eval(w, cond) != 0 {
                    let h = self.checksum(w, data, *algo, *with_payload);
                    if let Some(l) = self.resolve(w, dst) {
                        self.store(w, l, h);
                    }
                }
            }
            Builtin::RegisterRead { reg, dst, index } => {
                let i = self.eval(w, index) as usize;
                let r = &self.registers[*reg as usize];
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
                let r = &self.registers[*reg as usize];
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
                let c = &self.counters[*counter as usize];
                if let Some(cell) = c.get(i) {
                    cell.0.fetch_add(1, Ordering::Relaxed);
                    cell.1.fetch_add(w.pkt_len as u64, Ordering::Relaxed);
                }
            }
            Builtin::MeterExecute { meter, index, dst } => {
                let i = self.eval(w, index) as usize;
                let m = &self.meters[*meter as usize];
                let unit = self.prog.meters[*meter as usize].unit;
                let color = match m.get(i) {
                    Some(cell) => cell.execute(if unit == CounterUnit::Bytes { w.pkt_len as u64 } else { 1 }, w.pkt_len as u64),
                    None => crate::meters::GREEN,
                };
                if let Some(l) = self.resolve(w, dst) {
                    self.store(w, l, color);
                }
            }
            Builtin::DirectMeterRead { meter, dst } => {
                let unit = self.prog.direct_meters[*meter as usize].unit;
                let color = match w.cur_meter.clone() {
                    Some(cell) => cell.execute(if unit == CounterUnit::Bytes { w.pkt_len as u64 } else { 1 }, w.pkt_len as u64),
                    None => crate::meters::GREEN,
                };
                if let Some(l) = self.resolve(w, dst) {
                    self.store(w, l, color);
                }
            }
            Builtin::DirectCounterCount { .. } => {}
            Builtin::Clone { kind, session, field_list } => {
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
                    vals.push(Value { width, words: v[..words_for(width) as usize].to_vec() });
                }
                self.push_digest(*digest, vals);
            }
            Builtin::Random { dst, lo, hi } => {
                let lo = self.eval(w, lo);
                let hi = self.eval(w, hi);
                let r = hash::next_random(&mut w.rng);
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
            let Some(l) = self.resolve(w, d) else { continue };
            if pos % 8 == 0 && l.width % 8 == 0 {
                // whole bytes at a byte boundary: straight into the slot words (least significant first)
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

    /// Call extern method `method` of instance `inst`. `plans[i]`, when there, is argument i's layout
    /// computed at compile time ([`ArgLayout`]); arguments without one are packed and unpacked the general way.
    pub(crate) fn extern_call(&self, w: &mut Worker, inst: usize, method: u32, args: &[ExternArg], plans: &[Option<ArgLayout>], ret: Option<&LValue>) -> Flow {
        let mut bufs = std::mem::take(&mut w.bitbufs);
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
        let mut retbuf = std::mem::take(&mut w.retbuf);
        let ret_width = ret.map(|lv| match lv {
            LValue::Static(l) => l.width,
            LValue::Dynamic { base, .. } => base.width,
        });
        if let Some(width) = ret_width {
            retbuf.width = width;
            retbuf.bytes.clear();
            retbuf.bytes.resize(width.div_ceil(8) as usize, 0);
        }
        let r = self.invoke(w, inst, method, &mut bufs[..args.len()], ret_width.map(|_| &mut retbuf)).and_then(|()| {
            let outs = args.iter().zip(bufs.iter()).filter(|(a, _)| a.dir != Direction::In).map(|(a, b)| (a.width, b));
            check_lengths(outs, ret_width.map(|wd| (wd, &retbuf)))
        });
        if let Err(e) = r {
            w.bitbufs = bufs;
            w.retbuf = retbuf;
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
                self.store_bits(w, l, &retbuf.bytes, retbuf.bytes.len() * 8 - l.width as usize);
            }
        }
        w.bitbufs = bufs;
        w.retbuf = retbuf;
        Flow::Next
    }

    /// [`Engine::extern_call`] for a call site whose arguments are all planned: arguments marshalled straight
    /// into the worker's buffers (borrowed in place, not moved out and back), only `out`/`inout` arguments
    /// checked and written back.
    pub(crate) fn extern_call_planned(&self, w: &mut Worker, pc: &PlannedCall) -> Flow {
        let n = pc.args.len();
        if w.bitbufs.len() < n {
            w.bitbufs.resize_with(n, BitBuf::default);
        }
        for ((plan, dir), b) in pc.args.iter().zip(w.bitbufs.iter_mut()) {
            b.width = plan.width();
            plan.marshal(&w.slots, *dir != Direction::Out, &mut b.bytes);
        }
        if let Some(l) = pc.ret {
            w.retbuf.width = l.width;
            w.retbuf.bytes.clear();
            w.retbuf.bytes.resize(l.width.div_ceil(8) as usize, 0);
        }
        let r = self.invoke_in_place(w, pc.inst, pc.method, n, pc.ret.is_some()).and_then(|()| {
            let outs = pc.args.iter().zip(w.bitbufs.iter()).filter(|((_, d), _)| *d != Direction::In).map(|((p, _), b)| (p.width(), b));
            check_lengths(outs, pc.ret.map(|l| (l.width, &w.retbuf)))
        });
        if let Err(e) = r {
            return self.extern_fault(w, e);
        }
        for ((plan, dir), b) in pc.args.iter().zip(w.bitbufs.iter()) {
            if *dir != Direction::In {
                plan.write(&b.bytes, &mut w.slots);
            }
        }
        if let Some(l) = pc.ret {
            let bytes = std::mem::take(&mut w.retbuf.bytes);
            self.store_bits(w, l, &bytes, bytes.len() * 8 - l.width as usize);
            w.retbuf.bytes = bytes;
        }
        Flow::Next
    }

    /// A call site its extern compiled for itself ([`PlannedCall::bind`]): it reads and writes the slots.
    #[inline(always)]
    pub(crate) fn extern_call_bound(&self, w: &mut Worker, inst: usize, method: u32, b: &dyn BoundCall) -> Flow {
        let r = with_payload(&w.pkt, &mut w.payload_at, &mut w.payload, |p| b.call(&mut w.slots, p));
        self.trace_extern(w, inst, method);
        match r {
            Ok(()) => Flow::Next,
            Err(e) => self.extern_fault(w, e),
        }
    }

    /// [`Engine::extern_call_bound`] for a call site whose argument is a header no statement can have written
    /// before the call ([`crate::pristine`]): vouched for when the header is valid (so extracted in this pass,
    /// which also wrote its offset, or cleared it on the general path), the fast path recorded its offset, and
    /// the payload, still the received packet's bytes, starts right after it.
    #[inline(always)]
    pub(crate) fn extern_call_bound_pristine(&self, w: &mut Worker, inst: usize, method: u32, b: &dyn BoundCall, p: crate::pristine::PristineArg) -> Flow {
        let valid = w.slots.get(p.valid).is_some_and(|v| *v != 0);
        let off = w.hdr_off.get(p.header).copied().unwrap_or(crate::NO_OFFSET);
        let vouch = valid && off != crate::NO_OFFSET && off + p.len == w.payload_at;
        let r = with_payload(&w.pkt, &mut w.payload_at, &mut w.payload, |pl| {
            if vouch {
                pl.vouch_prefix(p.len);
            }
            b.call(&mut w.slots, pl)
        });
        self.trace_extern(w, inst, method);
        match r {
            Ok(()) => Flow::Next,
            Err(e) => self.extern_fault(w, e),
        }
    }

    /// Call extern method `method` of instance `inst` with the worker's argument buffers in place (the first
    /// `n`, and the return buffer when `with_ret`).
    #[inline]
    fn invoke_in_place(&self, w: &mut Worker, inst: usize, method: u32, n: usize, with_ret: bool) -> Result<(), ExternError> {
        let (bufs, retbuf) = (&mut w.bitbufs[..n], &mut w.retbuf);
        let r = call_with_payload(&*self.externs[inst], self.extern_methods[inst][method as usize], bufs, with_ret.then_some(retbuf), &w.pkt, &mut w.payload_at, &mut w.payload);
        self.trace_extern(w, inst, method);
        r
    }

    /// Call extern method `method` of instance `inst` with argument buffers held apart from the worker.
    fn invoke(&self, w: &mut Worker, inst: usize, method: u32, bufs: &mut [BitBuf], ret: Option<&mut BitBuf>) -> Result<(), ExternError> {
        let r = call_with_payload(&*self.externs[inst], self.extern_methods[inst][method as usize], bufs, ret, &w.pkt, &mut w.payload_at, &mut w.payload);
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
            t.push(format!("extern {}.{}", x.name, x.methods[method as usize].name));
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

    // ------------------------------------------------------------ parser

    /// Run the parser over `w.pkt`; on return the unparsed bytes start at `w.payload_at`.
    #[inline(always)]
    pub(crate) fn run_parser(&self, w: &mut Worker) {
        let start = self.prog.parser.start as usize;
        let err = if w.trace.is_none() { self.parse_lean(w, start) } else { self.parse_general(w, start, 0, false) };
        if err != 0 && err != u32::MAX {
            std::hint::cold_path();
            self.parser_error(w, err);
        }
        // the payload stays where it is in `pkt` until something needs it apart (`Worker::own_payload`)
        w.payload_at = w.cursor.div_ceil(8).min(w.pkt.len());
    }

    /// The parser's hot loop: states whose transition is a `Goto` or a select on one narrow key
    /// (`LeanNext`). At any other transition it hands over to [`Engine::parse_general`]. Returns the
    /// error (0: accepted, `u32::MAX`: rejected without an error).
    #[inline(always)]
    fn parse_lean(&self, w: &mut Worker, mut state: usize) -> u32 {
        let mut steps = 0u32;
        loop {
            steps += 1;
            if steps > self.max_parser_steps {
                return self.err_timeout;
            }
            let Some(block) = self.code.states.get(state) else { return self.err_no_match };
            match block.run(self, w) {
                Flow::Next | Flow::Break(_) => {}
                Flow::Reject(e) => return e,
                Flow::Exit => return 0,
            }
            let next = match self.code.lean_next.get(state) {
                Some(LeanNext::Goto(n)) => n,
                Some(LeanNext::SelectOne(k, cases)) => match self.select_one(w, k, cases) {
                    Some(n) => n,
                    None => return self.err_no_match,
                },
                _ => {
                    std::hint::cold_path();
                    return self.parse_general(w, state, steps, true);
                }
            };
            match next {
                Next::Accept => return 0,
                Next::Reject => return u32::MAX,
                Next::State(s) => state = *s as usize,
            }
        }
    }

    /// The case a select on one narrow key takes: the key once, then (mask, value) per case.
    #[inline(always)]
    fn select_one<'a>(&self, w: &mut Worker, k: &crate::compile::XF, cases: &'a [(u64, u64, Next)]) -> Option<&'a Next> {
        let v = k(self, w);
        cases.iter().find(|(m, x, _)| v & m == *x).map(|(_, _, n)| n)
    }

    #[cold]
    #[inline(never)]
    fn parser_error(&self, w: &mut Worker, err: u32) {
        self.store(w, self.prog.std_meta.parser_error, err as u64);
        if let Some(t) = w.trace.as_mut() {
            t.push(format!("parser error {}", self.prog.errors.get(err as usize).map(|s| s.as_str()).unwrap_or("?")));
        }
    }

    /// The parser from `state` (after `steps` steps) with every kind of transition, and traced; with `ran`, the
    /// state's statements have run already and its transition is next.
    #[inline(never)]
    fn parse_general(&self, w: &mut Worker, mut state: usize, mut steps: u32, mut ran: bool) -> u32 {
        let p = &self.prog.parser;
        loop {
            let Some(st) = p.states.get(state) else { break self.err_no_match };
            if !std::mem::take(&mut ran) {
                steps += 1;
                if steps > self.max_parser_steps {
                    break self.err_timeout;
                }
                if let Some(t) = w.trace.as_mut() {
                    t.push(format!("parser state {}", st.name));
                }
                match self.code.states[state].run(self, w) {
                    Flow::Next | Flow::Break(_) => {}
                    Flow::Reject(e) => break e,
                    Flow::Exit => break 0,
                }
            }
            let next = match &st.transition {
                Transition::Goto(n) => n,
                // one narrow key against exact or masked values: the key once, then (mask, value) pairs
                Transition::Select { .. } if let Some(LeanNext::SelectOne(k, cases)) = self.code.lean_next.get(state) => match self.select_one(w, k, cases) {
                    Some(n) => n,
                    None => break self.err_no_match,
                },
                Transition::Select { keys, cases } if self.code.select_keys[state].is_some() => {
                    // fast path: narrow keys as machine words
                    let mut kv = [0u64; 8];
                    for (i, k) in self.code.select_keys[state].iter().flatten().enumerate() {
                        kv[i] = k(self, w);
                    }
                    let _ = keys;
                    if w.perr != 0 {
                        let e = w.perr;
                        w.perr = 0;
                        break e;
                    }
                    if let Some(cs) = &self.code.select_cases[state] {
                        let hit = cs.iter().find(|(ms, _)| ms.iter().zip(&kv).all(|(&(m, v), k)| k & m == v));
                        match hit {
                            Some((_, n)) => match n {
                                Next::Accept => break 0,
                                Next::Reject => break u32::MAX,
                                Next::State(s) => {
                                    state = *s as usize;
                                    continue;
                                }
                            },
                            None => break self.err_no_match,
                        }
                    }
                    if w.perr != 0 {
                        let e = w.perr;
                        w.perr = 0;
                        break e;
                    }
                    let mut found = None;
                    'fast: for (ms, n) in cases {
                        for (i, m) in ms.iter().enumerate() {
                            let v = kv[i];
                            let ok = match m {
                                KeyMatch::Any => true,
                                KeyMatch::Exact(a) => a.as_u64() == v,
                                KeyMatch::Mask { value, mask } => (v & mask.as_u64()) == (value.as_u64() & mask.as_u64()),
                                KeyMatch::Range { lo, hi } => v >= lo.as_u64() && v <= hi.as_u64(),
                                KeyMatch::ValueSet(id) => {
                                    let mut wk = [bits::ZERO; 8];
                                    for (j, x) in kv[i..].iter().enumerate() {
                                        wk[j] = bits::from_u64(*x);
                                    }
                                    self.value_set_match(*id, &wk[..8 - i])
                                }
                            };
                            if !ok {
                                continue 'fast;
                            }
                        }
                        found = Some(n);
                        break;
                    }
                    match found {
                        Some(n) => n,
                        None => break self.err_no_match,
                    }
                }
                Transition::Select { keys, cases } => {
                    let mut found = None;
                    let mut kv = [bits::ZERO; 8];
                    for (i, k) in keys.iter().enumerate().take(8) {
                        kv[i] = self.eval_wide(w, k);
                    }
                    if w.perr != 0 {
                        let e = w.perr;
                        w.perr = 0;
                        break e;
                    }
                    'cases: for (ms, n) in cases {
                        for (i, m) in ms.iter().enumerate() {
                            let ok = match m {
                                KeyMatch::ValueSet(id) => self.value_set_match(*id, &kv[i.min(7)..]),
                                _ => self.key_match(&kv[i.min(7)], m),
                            };
                            if !ok {
                                continue 'cases;
                            }
                        }
                        found = Some(n);
                        break;
                    }
                    match found {
                        Some(n) => n,
                        None => break self.err_no_match,
                    }
                }
            };
            match next {
                Next::Accept => break 0,
                Next::Reject => break u32::MAX,
                Next::State(s) => state = *s as usize,
            }
        }
    }

    fn key_match(&self, v: &Wide, m: &KeyMatch) -> bool {
        let eqw = |a: &Value| a.words.iter().enumerate().all(|(i, x)| *x == v[i]) && v[a.words.len()..].iter().all(|x| *x == 0);
        match m {
            KeyMatch::Any => true,
            KeyMatch::Exact(a) => eqw(a),
            KeyMatch::Mask { value, mask } => mask.words.iter().enumerate().all(|(i, mw)| (v[i] & mw) == (value.words.get(i).copied().unwrap_or(0) & mw)),
            KeyMatch::Range { lo, hi } => {
                let mut l = bits::ZERO;
                let mut h = bits::ZERO;
                for (i, x) in lo.words.iter().enumerate() {
                    l[i] = *x;
                }
                for (i, x) in hi.words.iter().enumerate() {
                    h[i] = *x;
                }
                bits::cmp(v, &l).is_ge() && bits::cmp(v, &h).is_le()
            }
            KeyMatch::ValueSet(id) => self.value_set_match(*id, std::slice::from_ref(v)),
        }
    }

    /// Is the key tuple `keys` (from the select key the value set stands at) a member of value set `id`?
    /// Each element of a member matches the key at its position.
    fn value_set_match(&self, id: u32, keys: &[Wide]) -> bool {
        let Some(vs) = self.prog.value_sets.get(id as usize) else { return false };
        let set = self.value_sets[id as usize].load();
        set.iter().any(|member| {
            member.len() <= keys.len()
                && member.iter().zip(keys).zip(&vs.widths).all(|((m, k), w)| {
                    let words = (p4sec_ir::words_for(*w) as usize).clamp(1, k.len());
                    crate::tables::field_matches(m, &k[..words], *w)
                })
        })
    }
}
