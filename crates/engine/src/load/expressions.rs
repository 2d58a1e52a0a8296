//! Expressions of at most 64 bits compiled into closures by shape (a field, a constant, a test of a
//! field, a chain of tests, arithmetic), the interpreter's `eval` for shapes not covered.

use super::context::{mask, may_fail};
use crate::engine::XF;
use p4sec_ir::*;

fn interp_expr(x: &Expr) -> XF {
    let x = x.clone();
    Box::new(move |e, w| e.eval(w, &x))
}

/// Compile an expression of at most 64 bits (callers check the width). A test of one field against
/// a constant (or of the field being non-zero), as part of an `&&`/`||` chain.
#[derive(Clone, Copy)]
enum Leaf {
    NonZero(usize),
    Zero(usize),
    Eq(usize, u64),
    Ne(usize, u64),
    Lt(usize, u64),
    Le(usize, u64),
    Gt(usize, u64),
    Ge(usize, u64),
}

fn leaf(x: &Expr) -> Option<Leaf> {
    match x {
        Expr::Load(LValue::Static(l)) if l.width <= 64 => Some(Leaf::NonZero(l.slot as usize)),
        Expr::Unary {
            op: UnOp::Not, arg, ..
        } => match &**arg {
            Expr::Load(LValue::Static(l)) if l.width <= 64 => Some(Leaf::Zero(l.slot as usize)),
            _ => None,
        },
        Expr::Binary {
            op,
            signed: false,
            lhs,
            rhs,
            ..
        } => match (&**lhs, &**rhs) {
            (Expr::Load(LValue::Static(l)), Expr::Small { value, .. }) if l.width <= 64 => {
                let (s, v) = (l.slot as usize, *value);
                match op {
                    BinOp::Eq => Some(Leaf::Eq(s, v)),
                    BinOp::Ne => Some(Leaf::Ne(s, v)),
                    BinOp::Lt => Some(Leaf::Lt(s, v)),
                    BinOp::Le => Some(Leaf::Le(s, v)),
                    BinOp::Gt => Some(Leaf::Gt(s, v)),
                    BinOp::Ge => Some(Leaf::Ge(s, v)),
                    _ => None,
                }
            }
            _ => None,
        },
        _ => None,
    }
}

/// The leaves of a chain of one operator (`&&` or `||`) whose operands are all [`Leaf`]s or such
/// chains.
fn chain(x: &Expr, want: BinOp, leaves: &mut Vec<Leaf>) -> bool {
    match x {
        Expr::Binary { op, lhs, rhs, .. } if *op == want => {
            chain(lhs, want, leaves) && chain(rhs, want, leaves)
        }
        _ => match leaf(x) {
            Some(l) => {
                leaves.push(l);
                true
            }
            None => false,
        },
    }
}

#[inline(always)]
fn test_leaf(slots: &[u64], l: Leaf) -> bool {
    match l {
        Leaf::NonZero(s) => slots[s] != 0,
        Leaf::Zero(s) => slots[s] == 0,
        Leaf::Eq(s, v) => slots[s] == v,
        Leaf::Ne(s, v) => slots[s] != v,
        Leaf::Lt(s, v) => slots[s] < v,
        Leaf::Le(s, v) => slots[s] <= v,
        Leaf::Gt(s, v) => slots[s] > v,
        Leaf::Ge(s, v) => slots[s] >= v,
    }
}

pub(crate) fn expr(x: &Expr) -> XF {
    if may_fail(x) {
        return interp_expr(x);
    }
    // `a || b || c` and `a && b && c` over field tests: one closure, short-circuit order kept
    if let Expr::Binary {
        op: op @ (BinOp::Or | BinOp::And),
        ..
    } = x
    {
        let mut leaves = vec![];
        if chain(x, *op, &mut leaves) {
            return if *op == BinOp::Or {
                Box::new(move |_, w| leaves.iter().any(|&l| test_leaf(&w.slots, l)) as u64)
            } else {
                Box::new(move |_, w| leaves.iter().all(|&l| test_leaf(&w.slots, l)) as u64)
            };
        }
    }
    match x {
        Expr::Load(LValue::Static(l)) if l.width <= 64 => {
            let s = l.slot as usize;
            Box::new(move |_, w| w.slots[s])
        }
        Expr::Small { value, .. } => {
            let v = *value;
            Box::new(move |_, _| v)
        }
        Expr::Unary {
            op: UnOp::Not, arg, ..
        } if matches!(&**arg, Expr::Load(LValue::Static(l)) if l.width <= 64) => {
            let Expr::Load(LValue::Static(l)) = &**arg else {
                unreachable!()
            };
            let s = l.slot as usize;
            Box::new(move |_, w| (w.slots[s] == 0) as u64)
        }
        Expr::Unary { op, width, arg } if *width <= 64 && arg.width() <= 64 => {
            let (a, m) = (expr(arg), mask(*width));
            match op {
                UnOp::Not => Box::new(move |e, w| (a(e, w) == 0) as u64),
                UnOp::BitNot => Box::new(move |e, w| !a(e, w) & m),
                UnOp::Neg => Box::new(move |e, w| a(e, w).wrapping_neg() & m),
            }
        }
        Expr::Binary {
            op,
            width,
            signed,
            lhs,
            rhs,
        } if lhs.width() <= 64 && rhs.width() <= 64 && *width <= 64 => {
            let m = mask(*width);
            // the most common shape: a field compared with a constant
            if let (
                BinOp::Eq | BinOp::Ne,
                Expr::Load(LValue::Static(l)),
                Expr::Small { value, .. },
            ) = (op, &**lhs, &**rhs)
            {
                let (s, v, eq) = (l.slot as usize, *value, *op == BinOp::Eq);
                return Box::new(move |_, w| ((w.slots[s] == v) == eq) as u64);
            }
            // a field and a constant: no closure calls for the operands
            if let (Expr::Load(LValue::Static(l)), Expr::Small { value, .. }) = (&**lhs, &**rhs) {
                let (s, v) = (l.slot as usize, *value);
                let f: Option<XF> = match (op, signed) {
                    (BinOp::Lt, false) => Some(Box::new(move |_, w| (w.slots[s] < v) as u64)),
                    (BinOp::Le, false) => Some(Box::new(move |_, w| (w.slots[s] <= v) as u64)),
                    (BinOp::Gt, false) => Some(Box::new(move |_, w| (w.slots[s] > v) as u64)),
                    (BinOp::Ge, false) => Some(Box::new(move |_, w| (w.slots[s] >= v) as u64)),
                    (BinOp::Add, _) => Some(Box::new(move |_, w| w.slots[s].wrapping_add(v) & m)),
                    (BinOp::Sub, _) => Some(Box::new(move |_, w| w.slots[s].wrapping_sub(v) & m)),
                    (BinOp::BitAnd, _) => Some(Box::new(move |_, w| w.slots[s] & v)),
                    _ => None,
                };
                if let Some(f) = f {
                    return f;
                }
            }
            let (a, b) = (expr(lhs), expr(rhs));
            match (op, signed) {
                (BinOp::And, _) => Box::new(move |e, w| (a(e, w) != 0 && b(e, w) != 0) as u64),
                (BinOp::Or, _) => Box::new(move |e, w| (a(e, w) != 0 || b(e, w) != 0) as u64),
                (BinOp::Add, _) => Box::new(move |e, w| a(e, w).wrapping_add(b(e, w)) & m),
                (BinOp::Sub, _) => Box::new(move |e, w| a(e, w).wrapping_sub(b(e, w)) & m),
                (BinOp::Mul, _) => Box::new(move |e, w| a(e, w).wrapping_mul(b(e, w)) & m),
                (BinOp::BitAnd, _) => Box::new(move |e, w| a(e, w) & b(e, w)),
                (BinOp::BitOr, _) => Box::new(move |e, w| a(e, w) | b(e, w)),
                (BinOp::BitXor, _) => Box::new(move |e, w| a(e, w) ^ b(e, w)),
                (BinOp::Eq, _) => Box::new(move |e, w| (a(e, w) == b(e, w)) as u64),
                (BinOp::Ne, _) => Box::new(move |e, w| (a(e, w) != b(e, w)) as u64),
                (BinOp::Lt, false) => Box::new(move |e, w| (a(e, w) < b(e, w)) as u64),
                (BinOp::Le, false) => Box::new(move |e, w| (a(e, w) <= b(e, w)) as u64),
                (BinOp::Gt, false) => Box::new(move |e, w| (a(e, w) > b(e, w)) as u64),
                (BinOp::Ge, false) => Box::new(move |e, w| (a(e, w) >= b(e, w)) as u64),
                _ => interp_expr(x),
            }
        }
        Expr::Slice { arg, hi, lo } if arg.width() <= 64 => {
            let (a, lo, m) = (expr(arg), *lo, mask(hi - lo + 1));
            Box::new(move |e, w| (a(e, w) >> lo) & m)
        }
        // truncation, or widening of an unsigned value
        Expr::Cast { arg, width, signed }
            if *width <= 64 && arg.width() <= 64 && (!*signed || *width <= arg.width()) =>
        {
            let (a, m) = (expr(arg), mask(*width));
            Box::new(move |e, w| a(e, w) & m)
        }
        Expr::Cond {
            cond,
            then,
            else_,
            width,
        } if *width <= 64 && cond.width() <= 64 => {
            let (c, t, f) = (expr(cond), expr(then), expr(else_));
            Box::new(move |e, w| if c(e, w) != 0 { t(e, w) } else { f(e, w) })
        }
        _ => interp_expr(x),
    }
}
