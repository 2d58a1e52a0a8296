//! Left-to-right evaluation of initializers and copy semantics of aggregate assignment.
//!
//! A list, struct or tuple initializer (`{a, f(a)}`, `{x = a, y = f(a)}`, `T {..}`, `{a, ...}`)
//! is lowered to a value whose elements may still be places (`a`) or run-time expressions
//! reading them, evaluated only when the value is stored. When a later element has effects (a
//! call with an `inout` argument emits statements), the elements before it are copied into
//! temporaries at the point where that element's statements begin, so they hold what they held
//! before, as P4_16 requires (expressions are evaluated left to right).
//!
//! An assignment `dst = {...}` whose elements read `dst` itself (`p = {p.y, p.x}`) first builds
//! the whole value in a temporary, then copies it, so every element is read before any field of
//! `dst` is written.

use super::env::*;
use super::lowerer::Lowerer;
use crate::ast::Span;
use crate::diag::PResult;
use p4sec_ir as ir;

/// Word ranges `[lo, hi)` of storage; `None` when a location is chosen at run time.
type Ranges = Option<Vec<(u32, u32)>>;

fn lv_range(l: &ir::LValue, out: &mut Ranges) {
    match (l, out.as_mut()) {
        (ir::LValue::Static(l), Some(v)) => v.push((l.slot, l.slot + ir::words_for(l.width))),
        (ir::LValue::Dynamic { .. }, _) => *out = None,
        _ => {}
    }
}

/// The storage a place occupies (validity bits and stack indices included).
fn place_ranges(p: &Place, out: &mut Ranges) {
    match p {
        Place::Scalar(l, _) => lv_range(l, out),
        Place::Varbit { data, len, .. } => {
            lv_range(data, out);
            lv_range(len, out);
        }
        Place::Header {
            valid,
            fields,
            siblings,
            ..
        } => {
            lv_range(valid, out);
            siblings.iter().for_each(|s| lv_range(s, out));
            fields.iter().for_each(|(_, f)| place_ranges(f, out));
        }
        Place::Struct { fields, .. }
        | Place::Union {
            members: fields, ..
        } => fields.iter().for_each(|(_, f)| place_ranges(f, out)),
        Place::Stack {
            elems, next_index, ..
        } => {
            lv_range(&ir::LValue::Static(*next_index), out);
            elems.iter().for_each(|e| place_ranges(e, out));
        }
        Place::Tuple(ps) => ps.iter().for_each(|e| place_ranges(e, out)),
    }
}

/// The storage an expression reads.
fn expr_ranges(e: &ir::Expr, out: &mut Ranges) {
    match e {
        ir::Expr::Load(l) => lv_range(l, out),
        ir::Expr::Unary { arg, .. } | ir::Expr::Slice { arg, .. } | ir::Expr::Cast { arg, .. } => {
            expr_ranges(arg, out)
        }
        ir::Expr::Binary { lhs, rhs, .. } => {
            expr_ranges(lhs, out);
            expr_ranges(rhs, out);
        }
        ir::Expr::Concat { hi, lo } => {
            expr_ranges(hi, out);
            expr_ranges(lo, out);
        }
        ir::Expr::Cond {
            cond, then, else_, ..
        } => {
            expr_ranges(cond, out);
            expr_ranges(then, out);
            expr_ranges(else_, out);
        }
        _ => {}
    }
}

/// The storage a value reads when it is stored.
fn val_ranges(v: &Val, out: &mut Ranges) {
    match v {
        Val::Place(p) => place_ranges(p, out),
        Val::Rv(e, _) => expr_ranges(e, out),
        Val::List(vs) => vs.iter().for_each(|v| val_ranges(v, out)),
        Val::Struct(fs, _) => fs.iter().for_each(|(_, v)| val_ranges(v, out)),
        _ => {}
    }
}

fn overlap(a: &[(u32, u32)], b: &[(u32, u32)]) -> bool {
    a.iter()
        .any(|&(x0, x1)| b.iter().any(|&(y0, y1)| x0 < y1 && y0 < x1))
}

impl<'t> Lowerer<'t> {
    /// The elements of an initializer, evaluated left to right by `eval(self, i)`: when element
    /// `i` emits statements, the run-time elements before it are first copied into temporaries
    /// (the copies placed where `i`'s statements begin).
    pub(super) fn ordered_elements<T>(
        &mut self,
        n: usize,
        span: Span,
        mut eval: impl FnMut(&mut Self, usize) -> PResult<(T, Val)>,
    ) -> PResult<Vec<(T, Val)>> {
        let mut vs: Vec<(T, Val)> = Vec::with_capacity(n);
        // the elements before `frozen` are constants or temporaries nothing else writes
        let mut frozen = 0;
        for i in 0..n {
            let at = self.out.last().map_or(0, |b| b.len());
            let v = eval(self, i)?;
            let emitted = self.out.last().map_or(0, |b| b.len()) > at;
            if emitted && frozen < vs.len() {
                let earlier: Vec<Val> = vs[frozen..]
                    .iter_mut()
                    .map(|(_, v)| std::mem::replace(v, Val::DontCare))
                    .collect();
                let (copies, stmts) = self.capture(|l| {
                    earlier
                        .into_iter()
                        .map(|v| l.freeze(v, span))
                        .collect::<PResult<Vec<_>>>()
                })?;
                for ((_, slot), c) in vs[frozen..].iter_mut().zip(copies) {
                    *slot = c;
                }
                if let Some(b) = self.out.last_mut() {
                    let tail = b.split_off(at);
                    b.extend(stmts);
                    b.extend(tail);
                }
            }
            if emitted {
                frozen = vs.len();
            }
            vs.push(v);
        }
        Ok(vs)
    }

    /// Where the next statement goes in the current buffer (for [`Lowerer::snapshot_at`]).
    pub(super) fn out_len(&self) -> usize {
        self.out.last().map_or(0, |b| b.len())
    }

    /// `x`, an argument evaluated before the statements emitted since `at` (a later argument's
    /// effects): copied into a temporary at `at` when there are such statements, so it keeps the
    /// value it had when it was evaluated.
    pub(super) fn snapshot_at(&mut self, at: usize, x: ir::Expr) -> ir::Expr {
        if self.out_len() <= at || matches!(x, ir::Expr::Const(_) | ir::Expr::Small { .. }) {
            return x;
        }
        let tmp = self.alloc_scalar(x.width());
        if let Some(b) = self.out.last_mut() {
            b.insert(
                at,
                ir::Stmt::Assign {
                    dst: ir::LValue::Static(tmp),
                    src: x,
                },
            );
        }
        ir::Expr::Load(ir::LValue::Static(tmp))
    }

    /// `v` with every part that reads storage copied into a temporary now.
    fn freeze(&mut self, v: Val, span: Span) -> PResult<Val> {
        Ok(match v {
            Val::List(vs) => Val::List(
                vs.into_iter()
                    .map(|v| self.freeze(v, span))
                    .collect::<PResult<_>>()?,
            ),
            Val::Struct(fs, t) => Val::Struct(
                fs.into_iter()
                    .map(|(n, v)| Ok((n, self.freeze(v, span)?)))
                    .collect::<PResult<_>>()?,
                t,
            ),
            Val::Place(p) => {
                let tmp = self.alloc(&p.ty(), "tmp", span)?;
                self.assign(&tmp, Val::Place(p), span)?;
                Val::Place(tmp)
            }
            Val::Rv(e, t) => {
                let tmp = self.alloc(&t, "tmp", span)?;
                self.assign(&tmp, Val::Rv(e, t), span)?;
                Val::Place(tmp)
            }
            other => other,
        })
    }

    /// `dst = v` reading all of `v` before writing any of `dst` (`p = {p.y, p.x}` swaps).
    pub(super) fn assign_whole(&mut self, dst: &Place, v: Val, span: Span) -> PResult<()> {
        if matches!(v, Val::List(_) | Val::Struct(..)) {
            let (mut d, mut r) = (Some(vec![]), Some(vec![]));
            place_ranges(dst, &mut d);
            val_ranges(&v, &mut r);
            let aliased = match (d, r) {
                (Some(d), Some(r)) => overlap(&d, &r),
                _ => true,
            };
            if aliased {
                let tmp = self.alloc(&dst.ty(), "tmp", span)?;
                self.assign(&tmp, v, span)?;
                return self.assign(dst, Val::Place(tmp), span);
            }
        }
        self.assign(dst, v, span)
    }
}
