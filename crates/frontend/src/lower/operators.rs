//! Binary operators: arithmetic, bitwise, shifts, comparisons and concatenation with P4's typing
//! rules, constant folding, short-circuit logical operators and equality of aggregates (casts are
//! in `casts.rs`, unary operators in `expr.rs`).

use super::env::*;
use super::lowerer::{err, Lowerer};
use crate::ast::BinOp;
use crate::ast::{self, Span};
use crate::diag::{Diagnostic, PResult};
use crate::semantic_types::*;
use num_bigint::BigInt;
use num_traits::{One, Signed, ToPrimitive, Zero};
use p4sec_ir as ir;
use std::rc::Rc;

impl<'t> Lowerer<'t> {
    pub(super) fn binary(
        &mut self,
        scope: &Rc<Scope>,
        op: BinOp,
        a: &ast::Expr,
        b: &ast::Expr,
        hint: Option<&Ty>,
        span: Span,
    ) -> PResult<Val> {
        if matches!(op, BinOp::And | BinOp::Or) {
            return self.logical(scope, op, a, b, span);
        }
        let is_cmp = matches!(
            op,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
        );
        let sub_hint = if is_cmp || op == BinOp::Concat {
            None
        } else {
            hint
        };
        let av = self.expr(scope, a, sub_hint)?;
        self.binary_with(scope, op, av, a.span, b, hint, span)
    }

    /// [`Self::binary`] with the left operand lowered already (once: the current value of a
    /// compound assignment's target).
    #[allow(clippy::too_many_arguments)]
    pub fn binary_with(
        &mut self,
        scope: &Rc<Scope>,
        op: BinOp,
        mut av: Val,
        a_span: Span,
        b: &ast::Expr,
        hint: Option<&Ty>,
        span: Span,
    ) -> PResult<Val> {
        let is_shift = matches!(op, BinOp::Shl | BinOp::Shr);
        let is_cmp = matches!(
            op,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
        );
        let sub_hint = if is_cmp || op == BinOp::Concat {
            None
        } else {
            hint
        };
        let (mut bv, side_effects) =
            self.capture(|l| l.expr(scope, b, if is_shift { None } else { sub_hint }))?;
        if !side_effects.is_empty() {
            // the right operand has side effects (a call): evaluate the left operand first, as P4
            // requires
            av = self.snapshot(av, a_span)?;
            for st in side_effects {
                self.emit(st);
            }
        }
        // aggregate equality
        if matches!(op, BinOp::Eq | BinOp::Ne) {
            let agg = |v: &Val| {
                matches!(v, Val::Place(p) if !matches!(p, Place::Scalar(..)))
                    || matches!(v, Val::List(_) | Val::Struct(..) | Val::Invalid)
            };
            if agg(&av) || agg(&bv) {
                let eq = self.agg_equal(av, bv, span)?;
                return Ok(if op == BinOp::Ne {
                    Val::Rv(
                        ir::Expr::Unary {
                            op: ir::UnOp::Not,
                            width: 1,
                            arg: Box::new(eq),
                        },
                        Ty::Bool,
                    )
                } else {
                    Val::Rv(eq, Ty::Bool)
                });
            }
        }
        let (ta, tb) = match (av.ty(), bv.ty()) {
            (Some(x), Some(y)) => (x, y),
            _ => return err(span, format!("operator {op:?} needs values on both sides")),
        };
        // constant folding
        if let (Val::Const(x, _), Val::Const(y, _)) = (&av, &bv) {
            if !is_shift && !matches!(op, BinOp::Concat) {
                let t = match (&ta, &tb) {
                    (Ty::InfInt, t) | (t, Ty::InfInt) => t.clone(),
                    (t, u) => {
                        if !t.same(u) {
                            return err(
                                span,
                                format!("operands have different types: {t} and {u}"),
                            );
                        }
                        t.clone()
                    }
                };
                // an integer literal next to a fixed-width operand takes its type first (modulo
                // 2^W): `8w255 == -1` holds
                let (x, y) = (normalize(x, &t), normalize(y, &t));
                return self.fold(op, &x, &y, &t, span);
            }
            if is_shift {
                if let (Ty::Bit(w) | Ty::Int(w), false) = (&ta, y.is_negative()) {
                    if *y >= BigInt::from(*w) {
                        // shifted by the width or more: everything shifted out (sign bits for `>>`
                        // of a negative value)
                        let v = if op == BinOp::Shr && x.is_negative() {
                            -BigInt::one()
                        } else {
                            BigInt::zero()
                        };
                        return Ok(Val::Const(normalize(&v, &ta), ta));
                    }
                }
                let n = y
                    .to_u32()
                    .ok_or_else(|| Diagnostic::new(b.span, "shift amount out of range"))?;
                let v = if op == BinOp::Shl { x << n } else { x >> n };
                return Ok(Val::Const(normalize(&v, &ta), ta));
            }
            if let (Some(wa), Some(wb)) = (ta.scalar_width(), tb.scalar_width()) {
                if !matches!(ta, Ty::InfInt) && !matches!(tb, Ty::InfInt) {
                    let v = (wrap_unsigned(x, wa) << wb) | wrap_unsigned(y, wb);
                    let t = if ta.is_signed() {
                        Ty::Int(wa + wb)
                    } else {
                        Ty::Bit(wa + wb)
                    };
                    return Ok(Val::Const(normalize(&v, &t), t));
                }
            }
        }
        if op == BinOp::Concat {
            let (ax, ta) = self.rvalue(av, None, a_span)?;
            let (bx, tb) = self.rvalue(bv, None, b.span)?;
            let (wa, wb) = match (&ta, &tb) {
                (Ty::Bit(x) | Ty::Int(x), Ty::Bit(y) | Ty::Int(y)) => (*x, *y),
                _ => {
                    return err(
                        span,
                        format!("`++` needs bit-string operands, found {ta} and {tb}"),
                    )
                }
            };
            let t = if ta.is_signed() {
                Ty::Int(wa + wb)
            } else {
                Ty::Bit(wa + wb)
            };
            if wa + wb > ir::MAX_WIDTH {
                return err(span, "concatenation result is too wide");
            }
            return Ok(Val::Rv(
                ir::Expr::Concat {
                    hi: Box::new(ax),
                    lo: Box::new(bx),
                },
                t,
            ));
        }
        if is_shift {
            if matches!(ta, Ty::InfInt) {
                // `1 << n` with a run-time n: use the hint's type
                match hint {
                    Some(h @ (Ty::Bit(_) | Ty::Int(_))) => av = self.convert(av, h, a_span)?,
                    _ => return err(a_span, "the left operand of a shift by a run-time amount needs a width; add a cast"),
                }
            }
            let (ax, ta) = self.rvalue(av, None, a_span)?;
            let bvv = match bv {
                Val::Const(c, Ty::InfInt) => {
                    if c.is_negative() {
                        return err(b.span, "negative shift amount");
                    }
                    let w = (c.bits() as u32).clamp(1, 32);
                    let c = if c.bits() > 32 {
                        BigInt::from(u32::MAX)
                    } else {
                        c
                    };
                    Val::Const(c, Ty::Bit(w.max(8)))
                }
                other => other,
            };
            let (bx, tb) = self.rvalue(bvv, None, b.span)?;
            if tb.is_signed() {
                return err(b.span, "a shift amount must be unsigned");
            }
            let w = match ta {
                Ty::Bit(w) | Ty::Int(w) => w,
                _ => return err(span, format!("cannot shift a value of type {ta}")),
            };
            let iop = if op == BinOp::Shl {
                ir::BinOp::Shl
            } else {
                ir::BinOp::Shr
            };
            return Ok(Val::Rv(
                ir::Expr::Binary {
                    op: iop,
                    width: w,
                    signed: ta.is_signed(),
                    lhs: Box::new(ax),
                    rhs: Box::new(bx),
                },
                ta,
            ));
        }
        // unify operand types
        let t = match (&ta, &tb) {
            (Ty::InfInt, Ty::InfInt) => unreachable!("folded above"),
            (Ty::InfInt, t) => {
                av = self.convert(av, t, a_span)?;
                t.clone()
            }
            (t, Ty::InfInt) => {
                bv = self.convert(bv, t, b.span)?;
                t.clone()
            }
            (t, u) => {
                if !t.same(u) {
                    // serializable enum vs its representation
                    let ok = match (t, u) {
                        (Ty::Enum(e), x) | (x, Ty::Enum(e)) => {
                            e.repr.as_ref().map(|r| r.same(x)).unwrap_or(false)
                        }
                        _ => false,
                    };
                    if !ok {
                        return err(
                            span,
                            format!("operands of {op:?} have different types: {t} and {u}"),
                        );
                    }
                }
                t.clone()
            }
        };
        let (ax, _) = self.rvalue(av, None, a_span)?;
        let (bx, _) = self.rvalue(bv, None, b.span)?;
        let w = t.scalar_width().ok_or_else(|| {
            Diagnostic::new(span, format!("operator {op:?} cannot be applied to {t}"))
        })?;
        let signed = t.is_signed();
        let (iop, result) = match op {
            BinOp::Add => (ir::BinOp::Add, t.clone()),
            BinOp::Sub => (ir::BinOp::Sub, t.clone()),
            BinOp::Mul => (ir::BinOp::Mul, t.clone()),
            BinOp::Div | BinOp::Mod => {
                if signed {
                    return err(
                        span,
                        "division and modulo of signed values are only allowed on constants",
                    );
                }
                (
                    if op == BinOp::Div {
                        ir::BinOp::Div
                    } else {
                        ir::BinOp::Mod
                    },
                    t.clone(),
                )
            }
            BinOp::AddSat => (ir::BinOp::AddSat, t.clone()),
            BinOp::SubSat => (ir::BinOp::SubSat, t.clone()),
            BinOp::BitAnd => (ir::BinOp::BitAnd, t.clone()),
            BinOp::BitOr => (ir::BinOp::BitOr, t.clone()),
            BinOp::BitXor => (ir::BinOp::BitXor, t.clone()),
            BinOp::Eq => (ir::BinOp::Eq, Ty::Bool),
            BinOp::Ne => (ir::BinOp::Ne, Ty::Bool),
            BinOp::Lt => (ir::BinOp::Lt, Ty::Bool),
            BinOp::Le => (ir::BinOp::Le, Ty::Bool),
            BinOp::Gt => (ir::BinOp::Gt, Ty::Bool),
            BinOp::Ge => (ir::BinOp::Ge, Ty::Bool),
            _ => unreachable!(),
        };
        if matches!(t, Ty::Bool | Ty::Error | Ty::Enum(_))
            && !matches!(iop, ir::BinOp::Eq | ir::BinOp::Ne)
        {
            let ser_enum = matches!(&t, Ty::Enum(e) if e.repr.is_some());
            if !(ser_enum
                || (matches!(t, Ty::Bool)
                    && matches!(
                        iop,
                        ir::BinOp::BitAnd | ir::BinOp::BitOr | ir::BinOp::BitXor
                    )))
            {
                return err(span, format!("operator {op:?} cannot be applied to {t}"));
            }
        }
        let rw = if matches!(result, Ty::Bool) { 1 } else { w };
        Ok(Val::Rv(
            ir::Expr::Binary {
                op: iop,
                width: rw,
                signed,
                lhs: Box::new(ax),
                rhs: Box::new(bx),
            },
            result,
        ))
    }

    pub(super) fn fold(
        &mut self,
        op: BinOp,
        x: &BigInt,
        y: &BigInt,
        t: &Ty,
        span: Span,
    ) -> PResult<Val> {
        let b = |v: bool| Val::Const(if v { BigInt::one() } else { BigInt::zero() }, Ty::Bool);
        let r = match op {
            BinOp::Add => x + y,
            BinOp::Sub => x - y,
            BinOp::Mul => x * y,
            BinOp::Div | BinOp::Mod => {
                if y.is_zero() {
                    return err(span, "division by zero");
                }
                if x.is_negative() || y.is_negative() {
                    return err(
                        span,
                        "division and modulo are only defined on non-negative values",
                    );
                }
                if op == BinOp::Div {
                    x / y
                } else {
                    x % y
                }
            }
            BinOp::AddSat | BinOp::SubSat => {
                let r = if op == BinOp::AddSat { x + y } else { x - y };
                match t {
                    Ty::Bit(w) => {
                        let max = (BigInt::one() << *w) - 1;
                        if r.is_negative() {
                            BigInt::zero()
                        } else if r > max {
                            max
                        } else {
                            r
                        }
                    }
                    Ty::Int(w) => {
                        let max = (BigInt::one() << (*w - 1)) - 1;
                        let min = -(BigInt::one() << (*w - 1));
                        r.clamp(min, max)
                    }
                    _ => r,
                }
            }
            BinOp::BitAnd => x & y,
            BinOp::BitOr => x | y,
            BinOp::BitXor => x ^ y,
            BinOp::Eq => return Ok(b(x == y)),
            BinOp::Ne => return Ok(b(x != y)),
            BinOp::Lt => return Ok(b(x < y)),
            BinOp::Le => return Ok(b(x <= y)),
            BinOp::Gt => return Ok(b(x > y)),
            BinOp::Ge => return Ok(b(x >= y)),
            other => {
                return err(
                    span,
                    format!(
                    "operator {other:?} cannot be applied to the constants {x} and {y} of type {t}"
                ),
                )
            }
        };
        if matches!(t, Ty::Bool) {
            return Ok(Val::Const(normalize(&r, t), Ty::Bool));
        }
        Ok(Val::Const(normalize(&r, t), t.clone()))
    }

    pub(super) fn logical(
        &mut self,
        scope: &Rc<Scope>,
        op: BinOp,
        a: &ast::Expr,
        b: &ast::Expr,
        span: Span,
    ) -> PResult<Val> {
        let av = self.expr(scope, a, Some(&Ty::Bool))?;
        if let Val::Const(c, _) = &av {
            let t = !c.is_zero();
            return match (op, t) {
                (BinOp::And, false) => Ok(Val::Const(BigInt::zero(), Ty::Bool)),
                (BinOp::Or, true) => Ok(Val::Const(BigInt::one(), Ty::Bool)),
                _ => {
                    let v = self.expr(scope, b, Some(&Ty::Bool))?;
                    let (x, _) = self.rvalue(v, Some(&Ty::Bool), b.span)?;
                    Ok(Val::Rv(x, Ty::Bool))
                }
            };
        }
        let (ax, _) = self.rvalue(av, Some(&Ty::Bool), a.span)?;
        let (bv, sb) = self.capture(|s| s.expr(scope, b, Some(&Ty::Bool)))?;
        let (bx, tb) = self.rvalue(bv, Some(&Ty::Bool), b.span)?;
        if !matches!(tb, Ty::Bool) {
            return err(b.span, format!("`&&`/`||` need bool operands, found {tb}"));
        }
        let iop = if op == BinOp::And {
            ir::BinOp::And
        } else {
            ir::BinOp::Or
        };
        if sb.is_empty() {
            return Ok(Val::Rv(
                ir::Expr::Binary {
                    op: iop,
                    width: 1,
                    signed: false,
                    lhs: Box::new(ax),
                    rhs: Box::new(bx),
                },
                Ty::Bool,
            ));
        }
        // the right side has side effects: evaluate it only when needed
        let tmp = self.alloc_scalar(1);
        let lv = ir::LValue::Static(tmp);
        self.emit(ir::Stmt::Assign {
            dst: lv.clone(),
            src: ax,
        });
        let mut then = sb;
        then.push(ir::Stmt::Assign {
            dst: lv.clone(),
            src: bx,
        });
        let cond = ir::Expr::Load(lv.clone());
        let cond = if op == BinOp::And {
            cond
        } else {
            ir::Expr::Unary {
                op: ir::UnOp::Not,
                width: 1,
                arg: Box::new(cond),
            }
        };
        self.emit(ir::Stmt::If {
            cond,
            then,
            else_: vec![],
        });
        let _ = span;
        Ok(Val::Rv(ir::Expr::Load(lv), Ty::Bool))
    }

    /// Equality of headers, structs, unions, stacks and lists.
    pub(super) fn agg_equal(&mut self, a: Val, b: Val, span: Span) -> PResult<ir::Expr> {
        let t = a.ty().or_else(|| b.ty()).ok_or_else(|| {
            Diagnostic::new(
                span,
                "cannot compare these values: neither side has a known type (add a cast)",
            )
        })?;
        let a = self.materialize(a, &t, span)?;
        let b = self.materialize(b, &t, span)?;
        let (Val::Place(pa), Val::Place(pb)) = (a, b) else {
            return err(
                span,
                format!("cannot compare these values of type {t} with `==`/`!=`"),
            );
        };
        self.place_equal(&pa, &pb, span)
    }

    pub(super) fn place_equal(&mut self, a: &Place, b: &Place, span: Span) -> PResult<ir::Expr> {
        let and = |x: ir::Expr, y: ir::Expr| ir::Expr::Binary {
            op: ir::BinOp::And,
            width: 1,
            signed: false,
            lhs: Box::new(x),
            rhs: Box::new(y),
        };
        let or = |x: ir::Expr, y: ir::Expr| ir::Expr::Binary {
            op: ir::BinOp::Or,
            width: 1,
            signed: false,
            lhs: Box::new(x),
            rhs: Box::new(y),
        };
        let not = |x: ir::Expr| ir::Expr::Unary {
            op: ir::UnOp::Not,
            width: 1,
            arg: Box::new(x),
        };
        match (a, b) {
            (Place::Scalar(x, t), Place::Scalar(y, _)) => Ok(ir::Expr::Binary {
                op: ir::BinOp::Eq,
                width: 1,
                signed: false,
                lhs: Box::new(ir::Expr::Load(x.clone())),
                rhs: Box::new(ir::Expr::Load(y.clone())),
            })
            .inspect(|_e| {
                let _ = t;
            }),
            (
                Place::Varbit {
                    data: d1, len: l1, ..
                },
                Place::Varbit {
                    data: d2, len: l2, ..
                },
            ) => {
                let e1 = ir::Expr::Binary {
                    op: ir::BinOp::Eq,
                    width: 1,
                    signed: false,
                    lhs: Box::new(ir::Expr::Load(d1.clone())),
                    rhs: Box::new(ir::Expr::Load(d2.clone())),
                };
                let e2 = ir::Expr::Binary {
                    op: ir::BinOp::Eq,
                    width: 1,
                    signed: false,
                    lhs: Box::new(ir::Expr::Load(l1.clone())),
                    rhs: Box::new(ir::Expr::Load(l2.clone())),
                };
                Ok(and(e1, e2))
            }
            (
                Place::Header {
                    valid: v1,
                    fields: f1,
                    ..
                },
                Place::Header {
                    valid: v2,
                    fields: f2,
                    ..
                },
            ) => {
                let va = ir::Expr::Load(v1.clone());
                let vb = ir::Expr::Load(v2.clone());
                let mut fe = ir::Expr::konst(1, 1);
                for ((_, x), (_, y)) in f1.iter().zip(f2.iter()) {
                    let e = self.place_equal(x, y, span)?;
                    fe = and(fe, e);
                }
                // both invalid, or both valid with equal fields
                Ok(or(
                    and(not(va.clone()), not(vb.clone())),
                    and(and(va, vb), fe),
                ))
            }
            (Place::Struct { fields: f1, .. }, Place::Struct { fields: f2, .. })
            | (Place::Union { members: f1, .. }, Place::Union { members: f2, .. }) => {
                let mut e = ir::Expr::konst(1, 1);
                for ((_, x), (_, y)) in f1.iter().zip(f2.iter()) {
                    let fe = self.place_equal(x, y, span)?;
                    e = and(e, fe);
                }
                Ok(e)
            }
            (Place::Stack { elems: e1, .. }, Place::Stack { elems: e2, .. }) => {
                let mut e = ir::Expr::konst(1, 1);
                for (x, y) in e1.iter().zip(e2.iter()) {
                    let fe = self.place_equal(x, y, span)?;
                    e = and(e, fe);
                }
                Ok(e)
            }
            (Place::Tuple(p1), Place::Tuple(p2)) => {
                let mut e = ir::Expr::konst(1, 1);
                for (x, y) in p1.iter().zip(p2.iter()) {
                    let fe = self.place_equal(x, y, span)?;
                    e = and(e, fe);
                }
                Ok(e)
            }
            _ => err(span, format!("cannot compare {} with {}", a.ty(), b.ty())),
        }
    }
}
