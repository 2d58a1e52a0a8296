//! Access into values and places: `.member` (of structs, headers, unions, stacks, enums and
//! errors), `[index]` of stacks and arrays (constant or run-time), and `[hi:lo]` bit slices.

use super::env::*;
use super::lowerer::{err, Lowerer};
use crate::ast::ExprKind;
use crate::ast::{self, Span};
use crate::diag::PResult;
use crate::semantic_types::*;
use num_bigint::BigInt;
use num_traits::{One, ToPrimitive};
use p4sec_ir as ir;
use std::rc::Rc;

impl<'t> Lowerer<'t> {
    pub(super) fn member(
        &mut self,
        scope: &Rc<Scope>,
        base: &ast::Expr,
        m: &ast::Ident,
        span: Span,
    ) -> PResult<Val> {
        let b = self.expr(scope, base, None)?;
        let name = m.name.as_str();
        match b {
            Val::Binding(Binding::ErrorNs) | Val::Type(Ty::Error) => {
                match self.errors.iter().position(|e| e == name) {
                    Some(i) => Ok(Val::Const(BigInt::from(i), Ty::Error)),
                    None => err(m.span, format!("`error.{name}` is not declared")),
                }
            }
            Val::Type(Ty::Enum(en)) => match en.members.iter().find(|(n, _)| n == name) {
                Some((_, v)) => Ok(Val::Const(v.clone(), Ty::Enum(en.clone()))),
                None => err(m.span, format!("enum `{}` has no member `{name}`", en.name)),
            },
            Val::Type(t) => match name {
                "minSizeInBits" | "maxSizeInBits" => {
                    Ok(Val::Const(BigInt::from(t.bit_size()), Ty::InfInt))
                }
                "minSizeInBytes" | "maxSizeInBytes" => Ok(Val::Const(
                    BigInt::from(t.bit_size().div_ceil(8)),
                    Ty::InfInt,
                )),
                _ => err(m.span, format!("type {t} has no member `{name}`")),
            },
            Val::Place(p) => self.place_member(p, name, m.span),
            Val::TableResult(t, hit, run) => match name {
                "hit" => Ok(Val::Rv(ir::Expr::Load(ir::LValue::Static(hit)), Ty::Bool)),
                "miss" => Ok(Val::Rv(
                    ir::Expr::Unary {
                        op: ir::UnOp::Not,
                        width: 1,
                        arg: Box::new(ir::Expr::Load(ir::LValue::Static(hit))),
                    },
                    Ty::Bool,
                )),
                "action_run" => Ok(Val::TableResult(t, hit, run)),
                _ => err(
                    m.span,
                    format!(
                        "a table apply result has no member `{name}` (use hit, miss or action_run)"
                    ),
                ),
            },
            Val::Binding(b) => Ok(Val::Method(Box::new(Val::Binding(b)), name.to_string())),
            Val::Struct(fields, _) => match fields.into_iter().find(|(n, _)| n == name) {
                Some((_, v)) => Ok(v),
                None => err(m.span, format!("no field `{name}`")),
            },
            other => {
                let _ = other;
                err(
                    span,
                    format!("cannot take member `{name}` of this expression"),
                )
            }
        }
    }

    pub(super) fn place_member(&mut self, p: Place, name: &str, span: Span) -> PResult<Val> {
        match &p {
            Place::Header { .. } | Place::Struct { .. } | Place::Union { .. } => {
                if let Some(f) = p.field(name) {
                    return Ok(Val::Place(f.clone()));
                }
                match (name, &p) {
                    ("isValid" | "setValid" | "setInvalid" | "minSizeInBits" | "minSizeInBytes" | "maxSizeInBits" | "maxSizeInBytes", _) => {
                        Ok(Val::Method(Box::new(Val::Place(p)), name.to_string()))
                    }
                    _ => err(span, format!("type {} has no field `{name}`", p.ty())),
                }
            }
            Place::Stack { elem, elems, .. } if !(elem.is_header() || elem.is_union()) => match name {
                "size" => Ok(Val::Const(BigInt::from(elems.len()), Ty::Bit(32))),
                _ => err(span, format!("`{name}` is a member of header stacks only; an array of {elem} has only `size`")),
            },
            Place::Stack { id, elem, elems, stride, next_index, .. } => match name {
                "size" => Ok(Val::Const(BigInt::from(elems.len()), Ty::Bit(32))),
                "nextIndex" => Ok(Val::Place(Place::Scalar(ir::LValue::Static(*next_index), Ty::Bit(32)))),
                "lastIndex" => Ok(Val::Rv(
                    ir::Expr::Binary {
                        op: ir::BinOp::Sub,
                        width: 32,
                        signed: false,
                        lhs: Box::new(ir::Expr::Load(ir::LValue::Static(*next_index))),
                        rhs: Box::new(ir::Expr::konst(32, 1)),
                    },
                    Ty::Bit(32),
                )),
                "next" => {
                    let _ = (elem, id, stride);
                    let idx = ir::Expr::Load(ir::LValue::Static(*next_index));
                    Ok(Val::Place(p.stack_element(&idx, true).expect("stack")))
                }
                "last" => {
                    let idx = ir::Expr::Binary {
                        op: ir::BinOp::Sub,
                        width: 32,
                        signed: false,
                        lhs: Box::new(ir::Expr::Load(ir::LValue::Static(*next_index))),
                        rhs: Box::new(ir::Expr::konst(32, 1)),
                    };
                    Ok(Val::Place(p.stack_element(&idx, false).expect("stack")))
                }
                "push_front" | "pop_front" => Ok(Val::Method(Box::new(Val::Place(p)), name.to_string())),
                _ => err(span, format!("a header stack has no member `{name}`")),
            },
            _ => err(span, format!("a value of type {} has no member `{name}`", p.ty())),
        }
    }

    pub(super) fn index(
        &mut self,
        scope: &Rc<Scope>,
        base: &ast::Expr,
        idx: &ast::Expr,
        span: Span,
    ) -> PResult<Val> {
        let b = self.expr(scope, base, None)?;
        let i = self.expr(scope, idx, None)?;
        match b {
            Val::Place(stack @ Place::Stack { .. }) => {
                let Place::Stack { elems, .. } = &stack else {
                    unreachable!()
                };
                match i {
                    Val::Const(c, _) => match c.to_usize() {
                        Some(k) if k < elems.len() => Ok(Val::Place(elems[k].clone())),
                        _ => err(
                            idx.span,
                            format!(
                                "index {c} is out of bounds for a stack of size {}",
                                elems.len()
                            ),
                        ),
                    },
                    other => {
                        let Place::Stack { elem, .. } = &stack else {
                            unreachable!()
                        };
                        if !elems[0].is_static() && (elem.is_header() || elem.is_union()) {
                            return err(
                                idx.span,
                                "p4sec supports a run-time index into a header stack only when the element that holds it is chosen with a constant index",
                            );
                        }
                        if !(elem.is_header() || elem.is_union()) && elem.holds_header() {
                            return err(idx.span, format!("p4sec indexes an array of {elem} (its elements hold headers) only with constant indices"));
                        }
                        let (x, t) = self.rvalue(other, None, idx.span)?;
                        let x = match t {
                            Ty::Bit(w) | Ty::Int(w) if w != 32 => ir::Expr::Cast {
                                arg: Box::new(x),
                                width: 32,
                                signed: false,
                            },
                            _ => x,
                        };
                        Ok(Val::Place(stack.stack_element(&x, false).expect("stack")))
                    }
                }
            }
            Val::Place(Place::Tuple(ps)) => match i {
                Val::Const(c, _) => match c.to_usize() {
                    Some(k) if k < ps.len() => Ok(Val::Place(ps[k].clone())),
                    _ => err(idx.span, "tuple index out of range"),
                },
                _ => err(idx.span, "a tuple index must be a constant"),
            },
            Val::List(vs) => match i {
                Val::Const(c, _) => match c.to_usize() {
                    Some(k) if k < vs.len() => Ok(vs[k].clone()),
                    _ => err(idx.span, "tuple index out of range"),
                },
                _ => err(idx.span, "a tuple index must be a constant"),
            },
            _ => err(span, "only header stacks and tuples can be indexed"),
        }
    }

    pub fn slice(&mut self, b: Val, hi: u32, lo: u32, span: Span) -> PResult<Val> {
        if hi < lo {
            return err(
                span,
                format!("slice [{hi}:{lo}] has its high bound below its low bound"),
            );
        }
        let w = hi - lo + 1;
        match b {
            Val::Const(c, t) => {
                if let Some(tw) = t.scalar_width() {
                    if hi >= tw {
                        return err(
                            span,
                            format!("slice [{hi}:{lo}] is outside the {tw} bits of {t}"),
                        );
                    }
                }
                let u = if matches!(t, Ty::InfInt) {
                    c
                } else {
                    wrap_unsigned(&c, t.scalar_width().unwrap_or(0))
                };
                let v = (u >> lo) & ((BigInt::one() << w) - 1);
                Ok(Val::Const(v, Ty::Bit(w)))
            }
            other => {
                let (x, t) = self.rvalue(other, None, span)?;
                let tw = match t {
                    Ty::Bit(w) | Ty::Int(w) => w,
                    _ => return err(span, format!("cannot slice a value of type {t}")),
                };
                if hi >= tw {
                    return err(
                        span,
                        format!("slice [{hi}:{lo}] is outside the {tw} bits of {t}"),
                    );
                }
                Ok(Val::Rv(
                    ir::Expr::Slice {
                        arg: Box::new(x),
                        hi,
                        lo,
                    },
                    Ty::Bit(w),
                ))
            }
        }
    }

    /// Slices used as assignment targets: `x[7:0] = v` becomes `x = (x & ~mask) | (v << lo)`.
    pub fn slice_place(
        &mut self,
        scope: &Rc<Scope>,
        base: &ast::Expr,
        hi: &ast::Expr,
        lo: &ast::Expr,
    ) -> PResult<(Place, u32, u32)> {
        let hi = self.const_width(scope, hi)?;
        let lo = self.const_width(scope, lo)?;
        if let ExprKind::Slice(inner, ihi, ilo) = &base.kind {
            // a slice of a slice (`x[15:0][7:4]`): bits [lo, hi] of the inner slice, counted from
            // its low bit
            let (p, ihi, ilo) = self.slice_place(scope, inner, ihi, ilo)?;
            if ihi < ilo || hi < lo || hi > ihi - ilo {
                return err(
                    base.span,
                    format!("slice [{hi}:{lo}] is outside the slice [{ihi}:{ilo}]"),
                );
            }
            return Ok((p, ilo + hi, ilo + lo));
        }
        let p = self.place(scope, base)?;
        if let Place::Scalar(_, t) = &p {
            let w = t.scalar_width().unwrap_or(0);
            if hi >= w || hi < lo {
                return err(
                    base.span,
                    format!("slice [{hi}:{lo}] is outside the {w} bits of {t}"),
                );
            }
        }
        Ok((p, hi, lo))
    }
}
