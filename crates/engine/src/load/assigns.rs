//! Runs of simple assignments (a field from a field, a constant, or a field plus a constant) merged
//! into one closure: one call instead of one per statement.

use super::context::mask;
use crate::code::Flow;
use crate::engine::SF;
use p4sec_ir::*;

/// An assignment to a field of at most 64 bits from a field, a constant, or a field plus or minus a
/// constant.
#[derive(Clone, Copy)]
pub(crate) enum SimpleAssign {
    Copy {
        d: usize,
        s: usize,
        m: u64,
    },
    Const {
        d: usize,
        v: u64,
    },
    Add {
        d: usize,
        s: usize,
        k: u64,
        m: u64,
    },
    /// `d = s[hi:lo]`: shifted right by `lo`, masked to the slice (and the destination) width.
    Shr {
        d: usize,
        s: usize,
        sh: u32,
        m: u64,
    },
}

pub(crate) fn simple_assign(s: &Stmt) -> Option<SimpleAssign> {
    let Stmt::Assign {
        dst: LValue::Static(l),
        src,
    } = s
    else {
        return None;
    };
    if l.width == 0 || l.width > 64 || src.width() > 64 {
        return None;
    }
    let (d, m) = (l.slot as usize, mask(l.width));
    match src {
        Expr::Load(LValue::Static(sl)) if sl.width <= 64 => Some(SimpleAssign::Copy {
            d,
            s: sl.slot as usize,
            m,
        }),
        Expr::Small { value, .. } => Some(SimpleAssign::Const { d, v: value & m }),
        Expr::Slice { arg, hi, lo } if *lo < 64 && *hi < 64 && *hi >= *lo => match &**arg {
            Expr::Load(LValue::Static(sl)) if sl.width <= 64 => Some(SimpleAssign::Shr {
                d,
                s: sl.slot as usize,
                sh: *lo,
                m: m & mask(hi - lo + 1),
            }),
            _ => None,
        },
        Expr::Binary {
            op: op @ (BinOp::Add | BinOp::Sub),
            lhs,
            rhs,
            width,
            ..
        } if *width <= 64 => match (&**lhs, &**rhs) {
            (Expr::Load(LValue::Static(sl)), Expr::Small { value, .. }) if sl.width <= 64 => {
                // x - k == x + (2^64 - k) modulo 2^64, then masked
                let k = if *op == BinOp::Add {
                    *value
                } else {
                    value.wrapping_neg()
                };
                Some(SimpleAssign::Add {
                    d,
                    s: sl.slot as usize,
                    k,
                    m: m & mask(*width),
                })
            }
            _ => None,
        },
        _ => None,
    }
}

pub(crate) fn flush_assigns(run: &mut Vec<SimpleAssign>, out: &mut Vec<SF>) {
    match run.len() {
        0 => {}
        // one assignment: its kind settled here, so the closure does not dispatch on it (no jump
        // table, one less indirect branch per packet)
        1 => out.push(match run[0] {
            SimpleAssign::Copy { d, s, m } => Box::new(move |_, w| {
                w.slots[d] = w.slots[s] & m;
                Flow::Next
            }),
            SimpleAssign::Const { d, v } => Box::new(move |_, w| {
                w.slots[d] = v;
                Flow::Next
            }),
            SimpleAssign::Add { d, s, k, m } => Box::new(move |_, w| {
                w.slots[d] = w.slots[s].wrapping_add(k) & m;
                Flow::Next
            }),
            SimpleAssign::Shr { d, s, sh, m } => Box::new(move |_, w| {
                w.slots[d] = (w.slots[s] >> sh) & m;
                Flow::Next
            }),
        }),
        _ => {
            let ops = std::mem::take(run);
            out.push(Box::new(move |_, w| {
                for &a in &ops {
                    run_assign(&mut w.slots, a);
                }
                Flow::Next
            }));
        }
    }
    run.clear();
}

#[inline(always)]
fn run_assign(slots: &mut [u64], a: SimpleAssign) {
    match a {
        SimpleAssign::Copy { d, s, m } => slots[d] = slots[s] & m,
        SimpleAssign::Const { d, v } => slots[d] = v,
        SimpleAssign::Add { d, s, k, m } => slots[d] = slots[s].wrapping_add(k) & m,
        SimpleAssign::Shr { d, s, sh, m } => slots[d] = (slots[s] >> sh) & m,
    }
}
