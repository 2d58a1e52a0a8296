//! Translation of expressions of at most 64 bits into Cranelift values, with the interpreter's
//! semantics (`pipeline/exec.rs`, `Engine::eval`): loads are the slot's word as stored, arithmetic
//! is masked to the result width, shifts by the width or more give 0 (an arithmetic right shift the
//! sign), division by zero gives 0, comparisons of signed values compare their sign-extensions. A
//! sub-expression not covered here (a wide operand, a header-stack index, saturating signed
//! arithmetic, the packet length) is evaluated by its closure, called back.

use super::helpers;
use super::stmt::Fx;
use crate::bits::mask64;
use crate::load::compile;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, Value};
use p4sec_ir::*;

impl Fx<'_, '_> {
    /// Can `x` be translated (inline or by calling its closure back)? Not when evaluating it can
    /// raise a parser error (`lookahead`): its statement then runs by its closure, which checks.
    pub(crate) fn covered(&self, x: &Expr) -> bool {
        !compile::may_fail(x)
    }

    pub(crate) fn konst(&mut self, v: u64) -> Value {
        self.b.ins().iconst(types::I64, v as i64)
    }

    /// `v` masked to `w` bits (nothing emitted for 64).
    pub(crate) fn mask(&mut self, v: Value, w: u32) -> Value {
        if w >= 64 {
            v
        } else {
            self.b.ins().band_imm_u(v, mask64(w) as i64)
        }
    }

    /// `v` of `w` bits sign-extended to 64.
    fn sext(&mut self, v: Value, w: u32) -> Value {
        if w >= 64 || w == 0 {
            return v;
        }
        let s = self.b.ins().ishl_imm_u(v, (64 - w) as i64);
        self.b.ins().sshr_imm_u(s, (64 - w) as i64)
    }

    fn bool(&mut self, c: Value) -> Value {
        self.b.ins().uextend(types::I64, c)
    }

    /// An expression of at most 64 bits (the caller checked the width and [`Fx::covered`]).
    pub(crate) fn expr(&mut self, x: &Expr) -> Value {
        match self.inline_expr(x) {
            Some(v) => v,
            None => self.expr_fallback(x),
        }
    }

    fn expr_fallback(&mut self, x: &Expr) -> Value {
        let xf = Box::new(compile::expr(x));
        let p = &*xf as *const crate::engine::XF as i64;
        self.keep.exprs.push(xf);
        let f = self.helper(
            helpers::np_expr::<true> as *const (),
            helpers::np_expr::<false> as *const (),
        );
        let a = self.b.ins().iconst(self.ptr, p);
        let call = self.b.ins().call_indirect(self.expr_sig, f, &[self.ctx, a]);
        self.b.inst_results(call)[0]
    }

    fn inline_expr(&mut self, x: &Expr) -> Option<Value> {
        Some(match x {
            Expr::Load(LValue::Static(l)) if l.width <= 64 && self.slot_ok(l.slot) => {
                self.load_slot(l.slot)
            }
            Expr::Small { value, .. } => self.konst(*value),
            Expr::Const(v) => self.konst(v.as_u64()),
            Expr::Unary { op, width, arg } if *width <= 64 && arg.width() <= 64 => {
                let a = self.expr(arg);
                match op {
                    UnOp::Not => {
                        let c = self.b.ins().icmp_imm_u(IntCC::Equal, a, 0);
                        self.bool(c)
                    }
                    UnOp::BitNot => {
                        let n = self.b.ins().bnot(a);
                        self.mask(n, *width)
                    }
                    UnOp::Neg => {
                        let n = self.b.ins().ineg(a);
                        self.mask(n, *width)
                    }
                }
            }
            Expr::Binary {
                op,
                width,
                signed,
                lhs,
                rhs,
            } if *width <= 64 && lhs.width() <= 64 && rhs.width() <= 64 => {
                self.binary(*op, *width, *signed, lhs, rhs)?
            }
            Expr::Slice { arg, hi, lo } if arg.width() <= 64 && *lo < 64 && hi >= lo => {
                let a = self.expr(arg);
                let s = if *lo > 0 {
                    self.b.ins().ushr_imm_u(a, *lo as i64)
                } else {
                    a
                };
                self.mask(s, hi - lo + 1)
            }
            Expr::Concat { hi, lo } if hi.width() + lo.width() <= 64 => {
                let lw = lo.width();
                let h = self.expr(hi);
                let l = self.expr(lo);
                if lw >= 64 {
                    l
                } else {
                    let s = if lw > 0 {
                        self.b.ins().ishl_imm_u(h, lw as i64)
                    } else {
                        h
                    };
                    self.b.ins().bor(s, l)
                }
            }
            Expr::Cast { arg, width, signed } if *width <= 64 && arg.width() <= 64 => {
                let aw = arg.width();
                let a = self.expr(arg);
                let a = if *signed && *width > aw {
                    self.sext(a, aw)
                } else {
                    a
                };
                self.mask(a, *width)
            }
            Expr::Cond {
                cond,
                then,
                else_,
                width,
            } if *width <= 64
                && cond.width() <= 64
                && then.width() <= 64
                && else_.width() <= 64 =>
            {
                // only the chosen side is evaluated (a side may call back)
                let c = self.expr(cond);
                let (tb, eb, merge) = (
                    self.b.create_block(),
                    self.b.create_block(),
                    self.b.create_block(),
                );
                let r = self.b.append_block_param(merge, types::I64);
                self.b.ins().brif(c, tb, &[], eb, &[]);
                self.b.switch_to_block(tb);
                let t = self.expr(then);
                self.b.ins().jump(merge, &[t.into()]);
                self.b.switch_to_block(eb);
                let f = self.expr(else_);
                self.b.ins().jump(merge, &[f.into()]);
                self.b.switch_to_block(merge);
                r
            }
            _ => return None,
        })
    }

    /// A binary operation on operands of at most 64 bits; `None` for saturating signed arithmetic.
    fn binary(
        &mut self,
        op: BinOp,
        width: u32,
        signed: bool,
        lhs: &Expr,
        rhs: &Expr,
    ) -> Option<Value> {
        if matches!(op, BinOp::AddSat | BinOp::SubSat) && signed {
            return None;
        }
        if matches!(op, BinOp::And | BinOp::Or) {
            // short-circuit: the right side only when it decides
            let a = self.expr(lhs);
            let (rb, merge) = (self.b.create_block(), self.b.create_block());
            let r = self.b.append_block_param(merge, types::I64);
            let short = self.konst((op == BinOp::Or) as u64);
            if op == BinOp::And {
                self.b.ins().brif(a, rb, &[], merge, &[short.into()]);
            } else {
                self.b.ins().brif(a, merge, &[short.into()], rb, &[]);
            }
            self.b.switch_to_block(rb);
            let v = self.expr(rhs);
            let c = self.b.ins().icmp_imm_u(IntCC::NotEqual, v, 0);
            let v = self.bool(c);
            self.b.ins().jump(merge, &[v.into()]);
            self.b.switch_to_block(merge);
            return Some(r);
        }
        let a = self.expr(lhs);
        let b = self.expr(rhs);
        let m = width;
        Some(match op {
            BinOp::Add => {
                let v = self.b.ins().iadd(a, b);
                self.mask(v, m)
            }
            BinOp::Sub => {
                let v = self.b.ins().isub(a, b);
                self.mask(v, m)
            }
            BinOp::Mul => {
                let v = self.b.ins().imul(a, b);
                self.mask(v, m)
            }
            BinOp::Div | BinOp::Mod => {
                // x / 0 and x % 0 are 0
                let zero = self.b.ins().icmp_imm_u(IntCC::Equal, b, 0);
                let one = self.konst(1);
                let d = self.b.ins().select(zero, one, b);
                let q = if op == BinOp::Div {
                    self.b.ins().udiv(a, d)
                } else {
                    self.b.ins().urem(a, d)
                };
                let z = self.konst(0);
                let v = self.b.ins().select(zero, z, q);
                self.mask(v, m)
            }
            BinOp::AddSat => {
                // unsigned: min(a + b, max of the width), a + b computed without overflow
                let (s, of) = self.b.ins().uadd_overflow(a, b);
                let max = self.konst(mask64(m));
                let over = self.b.ins().icmp(IntCC::UnsignedGreaterThan, s, max);
                let over = self.b.ins().bor(over, of);
                self.b.ins().select(over, max, s)
            }
            BinOp::SubSat => {
                let under = self.b.ins().icmp(IntCC::UnsignedLessThan, a, b);
                let d = self.b.ins().isub(a, b);
                let z = self.konst(0);
                self.b.ins().select(under, z, d)
            }
            BinOp::Shl => {
                let big = self
                    .b
                    .ins()
                    .icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, b, m as i64);
                let s = self.b.ins().ishl(a, b);
                let s = self.mask(s, m);
                let z = self.konst(0);
                self.b.ins().select(big, z, s)
            }
            BinOp::Shr if signed => {
                let s = self.sext(a, m);
                let k = self.konst(63);
                let amt = self.b.ins().umin(b, k);
                let v = self.b.ins().sshr(s, amt);
                self.mask(v, m)
            }
            BinOp::Shr => {
                let big = self
                    .b
                    .ins()
                    .icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, b, 64);
                let s = self.b.ins().ushr(a, b);
                let z = self.konst(0);
                self.b.ins().select(big, z, s)
            }
            BinOp::BitAnd => self.b.ins().band(a, b),
            BinOp::BitOr => self.b.ins().bor(a, b),
            BinOp::BitXor => self.b.ins().bxor(a, b),
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                let ow = lhs.width();
                let (a, b) = if signed && !matches!(op, BinOp::Eq | BinOp::Ne) {
                    (self.sext(a, ow), self.sext(b, ow))
                } else {
                    (a, b)
                };
                let cc = match (op, signed) {
                    (BinOp::Eq, _) => IntCC::Equal,
                    (BinOp::Ne, _) => IntCC::NotEqual,
                    (BinOp::Lt, false) => IntCC::UnsignedLessThan,
                    (BinOp::Le, false) => IntCC::UnsignedLessThanOrEqual,
                    (BinOp::Gt, false) => IntCC::UnsignedGreaterThan,
                    (BinOp::Ge, false) => IntCC::UnsignedGreaterThanOrEqual,
                    (BinOp::Lt, true) => IntCC::SignedLessThan,
                    (BinOp::Le, true) => IntCC::SignedLessThanOrEqual,
                    (BinOp::Gt, true) => IntCC::SignedGreaterThan,
                    _ => IntCC::SignedGreaterThanOrEqual,
                };
                let c = self.b.ins().icmp(cc, a, b);
                self.bool(c)
            }
            BinOp::And | BinOp::Or => unreachable!(),
        })
    }
}
