//! Statements and expressions: the interpreter (a `u64` fast path, a wide path up to `MAX_WIDTH`
//! bits) that every stage runs its statements with. Their compiled forms (`XF`, `SF`, `CBlock` in
//! `state.rs`) are built by `compile.rs`. The statements of one stage are in that stage's file:
//! `extract`/`emit` in `headers.rs`, table applies in `match_action.rs`, built-in and extern calls
//! in `call/`.

use crate::bits::{self, read_wide, Wide};
use crate::code::Flow;
use crate::{Engine, Worker};
use p4sec_externs::layout::read_bits;
use p4sec_ir::*;

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

impl Engine {
    // ------------------------------------------------------------ locations

    #[inline]
    pub(crate) fn resolve(&self, w: &mut Worker, lv: &LValue) -> Option<Loc> {
        match lv {
            LValue::Static(l) => Some(*l),
            LValue::Dynamic {
                base,
                stride,
                count,
                index,
            } => {
                let i = self.eval(w, index);
                if i < *count as u64 {
                    Some(Loc {
                        slot: base.slot + stride * i as u32,
                        width: base.width,
                    })
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

    pub(crate) fn load_wide(&self, w: &Worker, l: Loc) -> Wide {
        let mut v = bits::ZERO;
        let n = words_for(l.width) as usize;
        v[..n].copy_from_slice(&w.slots[l.slot as usize..l.slot as usize + n]);
        v
    }

    pub(crate) fn store_wide(&self, w: &mut Worker, l: Loc, v: &Wide) {
        let n = words_for(l.width) as usize;
        let mut v = *v;
        bits::truncate(&mut v, l.width);
        w.slots[l.slot as usize..l.slot as usize + n].copy_from_slice(&v[..n]);
    }

    #[allow(dead_code)]
    pub(crate) fn load_value(&self, w: &Worker, l: Loc) -> Value {
        let n = words_for(l.width) as usize;
        Value {
            width: l.width,
            words: w.slots[l.slot as usize..l.slot as usize + n].to_vec(),
        }
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
            Expr::Binary {
                op,
                width,
                signed,
                lhs,
                rhs,
            } => {
                match op {
                    BinOp::And => return (self.eval(w, lhs) != 0 && self.eval(w, rhs) != 0) as u64,
                    BinOp::Or => return (self.eval(w, lhs) != 0 || self.eval(w, rhs) != 0) as u64,
                    _ => {}
                }
                let is_cmp = matches!(
                    op,
                    BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
                );
                let ow = if is_cmp { lhs.width() } else { *width };
                if ow > 64 {
                    return self.eval_wide_cmp(w, *op, *signed, lhs, rhs);
                }
                let a = self.eval(w, lhs);
                // a shift amount may be wider than the value shifted
                let b = if matches!(op, BinOp::Shl | BinOp::Shr) && rhs.width() > 64 {
                    self.wide_shift_amount(w, rhs)
                } else {
                    self.eval(w, rhs)
                };
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
                            let r = if *op == BinOp::AddSat {
                                a as u128 + b as u128
                            } else {
                                (a as u128).saturating_sub(b as u128)
                            };
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
                        let ord = if *signed {
                            sext(a, ow).cmp(&sext(b, ow))
                        } else {
                            a.cmp(&b)
                        };
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
            Expr::Cond {
                cond, then, else_, ..
            } => {
                if self.eval(w, cond) != 0 {
                    self.eval(w, then)
                } else {
                    self.eval(w, else_)
                }
            }
            Expr::Lookahead { width } => {
                if w.packet.cursor + *width as usize > w.packet.pkt.len() * 8 {
                    w.perr = self.layout.errors.too_short;
                    0
                } else {
                    read_bits(&w.packet.pkt, w.packet.cursor, *width)
                }
            }
            Expr::PacketLength => w.packet.pkt.len() as u64,
        }
    }

    #[inline(never)]
    fn eval_wide_cmp(
        &self,
        w: &mut Worker,
        op: BinOp,
        signed: bool,
        lhs: &Expr,
        rhs: &Expr,
    ) -> u64 {
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
                // arithmetic with a narrow result from wide operands cannot occur (widths are
                // equal)
                let r = self.wide_arith(op, signed, ow, &a, &b);
                return r[0];
            }
        }) as u64
    }

    /// A shift amount wider than 64 bits, as a `u64` (`u64::MAX` when it does not fit: every such
    /// shift shifts everything out).
    #[cold]
    #[inline(never)]
    fn wide_shift_amount(&self, w: &mut Worker, e: &Expr) -> u64 {
        let v = self.eval_wide(w, e);
        if v[1..].iter().any(|x| *x != 0) {
            u64::MAX
        } else {
            v[0]
        }
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
            BinOp::Shl => bits::shl(
                a,
                if b[1..].iter().any(|x| *x != 0) {
                    u32::MAX
                } else {
                    b[0].min(u32::MAX as u64) as u32
                },
                width,
            ),
            BinOp::Shr => {
                let n = if b[1..].iter().any(|x| *x != 0) {
                    u32::MAX
                } else {
                    b[0].min(u32::MAX as u64) as u32
                };
                if signed && bits::bit(a, width - 1) {
                    if n >= width {
                        // a negative value shifted right by its width or more: all sign bits
                        return bits::not(&bits::ZERO, width);
                    }
                    let r = bits::shr(a, n);
                    bits::sign_extend(&r, width - n, width)
                } else {
                    bits::shr(a, n)
                }
            }
            BinOp::AddSat | BinOp::SubSat => {
                if signed {
                    // two's complement: the result overflowed when its sign differs from a's while
                    // b's sign is a's (addition) or the opposite of a's (subtraction); it then
                    // saturates towards a's sign
                    let s = if op == BinOp::AddSat {
                        bits::add(a, b, width)
                    } else {
                        bits::sub(a, b, width)
                    };
                    let (sa, sb, ss) = (
                        bits::bit(a, width - 1),
                        bits::bit(b, width - 1),
                        bits::bit(&s, width - 1),
                    );
                    let overflow = ss != sa && ((op == BinOp::AddSat) == (sa == sb));
                    if !overflow {
                        return s;
                    }
                    let min = bits::shl(&bits::from_u64(1), width - 1, width);
                    if sa {
                        min
                    } else {
                        bits::sub(&min, &bits::from_u64(1), width)
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
            Expr::Binary {
                op,
                width,
                signed,
                lhs,
                rhs,
            } => {
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
            Expr::Cond {
                cond, then, else_, ..
            } => {
                if self.eval(w, cond) != 0 {
                    self.eval_wide(w, then)
                } else {
                    self.eval_wide(w, else_)
                }
            }
            Expr::Lookahead { width } => {
                if w.packet.cursor + *width as usize > w.packet.pkt.len() * 8 {
                    w.perr = self.layout.errors.too_short;
                    bits::ZERO
                } else {
                    read_wide(&w.packet.pkt, w.packet.cursor, *width)
                }
            }
            Expr::PacketLength => bits::from_u64(w.packet.pkt.len() as u64),
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

    /// Counts one loop iteration of this pass. Past [`crate::MAX_LOOP_STEPS`] the pass is over: the
    /// packet is dropped, counted in `loop_limit` and traced, and the caller leaves with
    /// `Flow::Exit` (false).
    #[inline]
    pub(crate) fn loop_step(&self, w: &mut Worker) -> bool {
        w.loop_steps += 1;
        if w.loop_steps <= crate::MAX_LOOP_STEPS {
            return true;
        }
        self.loop_limit_hit(w);
        false
    }

    #[cold]
    fn loop_limit_hit(&self, w: &mut Worker) {
        crate::bump(&w.stats.loop_limit);
        if let Some(t) = w.trace.as_mut() {
            t.push(format!(
                "loop limit: more than {} loop iterations in one pass, packet dropped",
                crate::MAX_LOOP_STEPS
            ));
        }
        w.fx.drop();
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
            Stmt::Switch {
                expr,
                cases,
                default,
            } => {
                let v = if expr.width() <= 64 {
                    bits::from_u64(self.eval(w, expr))
                } else {
                    self.eval_wide(w, expr)
                };
                for (vals, body) in cases {
                    if vals
                        .iter()
                        .any(|c| c.words.iter().enumerate().all(|(i, x)| *x == v[i]))
                    {
                        return self.exec(w, body);
                    }
                }
                self.exec(w, default)
            }
            Stmt::Block { label, body } => match self.exec(w, body) {
                Flow::Break(l) if l == *label => Flow::Next,
                f => f,
            },
            Stmt::Loop { label, body } => loop {
                if !self.loop_step(w) {
                    break Flow::Exit;
                }
                match self.exec(w, body) {
                    Flow::Next => {}
                    Flow::Break(l) if l == *label => break Flow::Next,
                    f => break f,
                }
            },
            Stmt::Break(l) => Flow::Break(*l),
            Stmt::Exit => Flow::Exit,
            Stmt::ApplyTable {
                table,
                hit,
                action_run,
            } => self.apply_table(w, *table as usize, *hit, *action_run),
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
                if w.packet.cursor + n > w.packet.pkt.len() * 8 {
                    return Flow::Reject(self.layout.errors.too_short);
                }
                w.packet.cursor += n;
                Flow::Next
            }
            Stmt::Emit { hdr } => {
                self.emit(w, hdr);
                Flow::Next
            }
            Stmt::Builtin(b) => self.builtin(w, b),
            Stmt::ExternCall {
                inst,
                method,
                args,
                ret,
            } => self.extern_call(w, *inst as usize, *method, args, &[], ret.as_ref()),
        }
    }
}
