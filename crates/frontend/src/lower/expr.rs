//! Expressions: the lowering of each kind of expression to a value (constants, names, operators,
//! calls, lists, casts, conditionals), with the default value of each type and unary operators
//! and `?:` in full.

use super::env::*;
use super::lowerer::{err, Lowerer};
use crate::ast::{self, Span};
use crate::ast::{ExprKind, UnOp};
use crate::diag::PResult;
use crate::semantic_types::*;
use num_bigint::BigInt;
use num_traits::{One, Zero};
use p4sec_ir as ir;
use std::rc::Rc;

impl<'t> Lowerer<'t> {
    pub fn expr(&mut self, scope: &Rc<Scope>, e: &ast::Expr, hint: Option<&Ty>) -> PResult<Val> {
        let span = e.span;
        match &e.kind {
            ExprKind::Bool(b) => Ok(Val::Const(
                if *b { BigInt::one() } else { BigInt::zero() },
                Ty::Bool,
            )),
            ExprKind::Int(lit) => Ok(match lit.width {
                Some((w, signed)) => {
                    let t = if signed { Ty::Int(w) } else { Ty::Bit(w) };
                    if w == 0 && !signed {
                        Val::Const(BigInt::zero(), Ty::Bit(0))
                    } else {
                        Val::Const(normalize(&lit.value, &t), t)
                    }
                }
                None => Val::Const(lit.value.clone(), Ty::InfInt),
            }),
            ExprKind::Str(s) => Ok(Val::Str(s.clone())),
            ExprKind::Name(id) => self.name(scope, id),
            ExprKind::DotName(id) => self.name(&scope.root_of(), id),
            ExprKind::DontCare => Ok(Val::DontCare),
            ExprKind::Default => Ok(Val::DontCare),
            ExprKind::Invalid => Ok(Val::Invalid),
            ExprKind::Type(t) => Ok(Val::Type(self.resolve_type(scope, t)?)),
            ExprKind::Member(base, m) => self.member(scope, base, m, span),
            ExprKind::Index(base, idx) => self.index(scope, base, idx, span),
            ExprKind::Slice(base, hi, lo) => {
                let b = self.expr(scope, base, None)?;
                let hi = self.const_width(scope, hi)?;
                let lo = self.const_width(scope, lo)?;
                self.slice(b, hi, lo, span)
            }
            ExprKind::Unary(op, a) => self.unary(scope, *op, a, hint, span),
            ExprKind::Binary(op, a, b) => self.binary(scope, *op, a, b, hint, span),
            ExprKind::Ternary(c, a, b) => self.ternary(scope, c, a, b, hint, span),
            ExprKind::Cast(t, a) => {
                // `(list<T>) {a, b}`: the elements converted to `T`
                if let (ast::TypeKind::List(et), ExprKind::List(items)) = (&t.kind, &a.kind) {
                    let et = self.resolve_type(scope, et)?;
                    let vs = self.ordered_elements(items.len(), span, |l, i| {
                        let v = l.expr(scope, &items[i], Some(&et))?;
                        Ok(((), l.convert(v, &et, items[i].span)?))
                    })?;
                    return Ok(Val::List(vs.into_iter().map(|(_, v)| v).collect()));
                }
                let t = self.resolve_type(scope, t)?;
                let v = self.expr(scope, a, Some(&t))?;
                self.cast(v, &t, span)
            }
            ExprKind::List(items) => {
                // with an aggregate hint, give each element its field type
                let hints: Vec<Option<Ty>> = match hint {
                    Some(Ty::Agg(a)) => a.fields.iter().map(|f| Some(f.ty.clone())).collect(),
                    Some(Ty::Tuple(ts)) => ts.iter().map(|t| Some(t.clone())).collect(),
                    _ => vec![],
                };
                let vs = self.ordered_elements(items.len(), span, |l, i| {
                    let h = hints.get(i).cloned().flatten();
                    Ok(((), l.expr(scope, &items[i], h.as_ref())?))
                })?;
                Ok(Val::List(vs.into_iter().map(|(_, v)| v).collect()))
            }
            ExprKind::ListRest(items) => {
                // `{a, b, ...}`: the fields after the given ones take their default values
                let tys: Vec<Ty> = match hint {
                    Some(Ty::Agg(a)) if a.kind != ast::AggregateKind::HeaderUnion => a.fields.iter().map(|f| f.ty.clone()).collect(),
                    Some(Ty::Tuple(ts)) => ts.clone(),
                    _ => return err(span, "a `...` initializer needs a struct, header or tuple type from its context (a declaration or assignment)"),
                };
                if items.len() > tys.len() {
                    return err(
                        span,
                        format!(
                            "initializer has {} elements, the type has {} fields",
                            items.len(),
                            tys.len()
                        ),
                    );
                }
                let mut vs: Vec<Val> = self
                    .ordered_elements(items.len(), span, |l, i| {
                        Ok(((), l.expr(scope, &items[i], Some(&tys[i]))?))
                    })?
                    .into_iter()
                    .map(|(_, v)| v)
                    .collect();
                for t in &tys[items.len()..] {
                    vs.push(self.default_value(t, span)?);
                }
                Ok(Val::List(vs))
            }
            ExprKind::StructInit { fields, has_rest } => {
                let mut vs = self.ordered_elements(fields.len(), span, |l, i| {
                    let (n, x) = &fields[i];
                    let h = match hint {
                        Some(Ty::Agg(a)) => a
                            .fields
                            .iter()
                            .find(|f| f.name == n.name)
                            .map(|f| f.ty.clone()),
                        _ => None,
                    };
                    Ok((n.name.clone(), l.expr(scope, x, h.as_ref())?))
                })?;
                if *has_rest {
                    let Some(Ty::Agg(a)) = hint.filter(
                        |t| matches!(t, Ty::Agg(a) if a.kind != ast::AggregateKind::HeaderUnion),
                    ) else {
                        return err(span, "a `...` initializer needs a struct or header type from its context (a declaration or assignment)");
                    };
                    for f in &a.fields {
                        if !vs.iter().any(|(n, _)| *n == f.name) {
                            let d = self.default_value(&f.ty, span)?;
                            vs.push((f.name.clone(), d));
                        }
                    }
                }
                Ok(Val::Struct(
                    vs,
                    hint.filter(|t| matches!(t, Ty::Agg(_))).cloned(),
                ))
            }
            ExprKind::TypedInit { ty, fields } => {
                let t = self.resolve_type(scope, ty)?;
                let inner = ast::Expr {
                    kind: ExprKind::StructInit {
                        fields: fields.clone(),
                        has_rest: false,
                    },
                    span,
                };
                let v = self.expr(scope, &inner, Some(&t))?;
                self.materialize(v, &t, span)
            }
            ExprKind::Call {
                callee,
                type_args,
                args,
            } => self.call(scope, callee, type_args, args, hint, span),
            ExprKind::Construct { .. } => err(
                span,
                "an instantiation is not allowed in an expression here",
            ),
            ExprKind::Mask(..) | ExprKind::Range(..) => {
                err(span, "`&&&` and `..` may only appear in keysets")
            }
        }
    }

    /// The default value of a type (P4_16 1.2.5 "default values"): 0 for bit-strings, integers and
    /// serializable enums, `false`, the first member of a plain enum, `error.NoError`, an invalid
    /// header or union, and a struct, tuple or stack of the defaults of its parts.
    pub(super) fn default_value(&mut self, t: &Ty, span: Span) -> PResult<Val> {
        Ok(match t {
            Ty::Bit(_) | Ty::Int(_) | Ty::Bool | Ty::Enum(_) | Ty::Error => {
                Val::Const(num_bigint::BigInt::from(0), t.clone())
            }
            Ty::Agg(a) if a.kind == ast::AggregateKind::Struct => {
                let mut vs = vec![];
                for f in &a.fields {
                    vs.push(self.default_value(&f.ty, span)?);
                }
                Val::List(vs)
            }
            Ty::Agg(_) => Val::Invalid,
            Ty::Stack(e, n) if e.is_header() || e.is_union() => {
                Val::List((0..*n).map(|_| Val::Invalid).collect())
            }
            Ty::Stack(e, n) => {
                let d = self.default_value(e, span)?;
                Val::List((0..*n).map(|_| d.clone()).collect())
            }
            Ty::Tuple(ts) => {
                let mut vs = vec![];
                for t in ts {
                    vs.push(self.default_value(t, span)?);
                }
                Val::List(vs)
            }
            other => {
                return err(
                    span,
                    format!("p4sec has no default value for type {other} in a `...` initializer"),
                )
            }
        })
    }

    pub(super) fn name(&mut self, scope: &Rc<Scope>, id: &ast::Ident) -> PResult<Val> {
        match scope.lookup(&id.name) {
            Some(Binding::Var(p)) => Ok(Val::Place(p)),
            Some(Binding::Value(v)) => Ok(*v),
            Some(Binding::Type(t)) => Ok(Val::Type(t)),
            Some(b) => Ok(Val::Binding(b)),
            None => err(id.span, format!("`{}` is not declared", id.name)),
        }
    }

    pub(super) fn unary(
        &mut self,
        scope: &Rc<Scope>,
        op: UnOp,
        a: &ast::Expr,
        hint: Option<&Ty>,
        span: Span,
    ) -> PResult<Val> {
        let v = self.expr(
            scope,
            a,
            if op == UnOp::Not {
                Some(&Ty::Bool)
            } else {
                hint
            },
        )?;
        match (op, v) {
            (UnOp::Plus, v) => Ok(v),
            (UnOp::Not, Val::Const(c, Ty::Bool)) => Ok(Val::Const(
                if c.is_zero() {
                    BigInt::one()
                } else {
                    BigInt::zero()
                },
                Ty::Bool,
            )),
            (UnOp::Neg, Val::Const(c, t)) => {
                if matches!(t, Ty::Bit(_) | Ty::Int(_) | Ty::InfInt) {
                    Ok(Val::Const(normalize(&(-c), &t), t))
                } else {
                    err(span, format!("cannot negate a value of type {t}"))
                }
            }
            (UnOp::BitNot, Val::Const(c, t)) => match t {
                Ty::Bit(w) => Ok(Val::Const(wrap_unsigned(&!c, w), t)),
                Ty::Int(w) => Ok(Val::Const(wrap_signed(&!c, w), t)),
                _ => err(span, format!("`~` needs a fixed-width operand, found {t}")),
            },
            (op, v) => {
                let (x, t) = self.rvalue(v, None, span)?;
                match (op, &t) {
                    (UnOp::Not, Ty::Bool) => Ok(Val::Rv(
                        ir::Expr::Unary {
                            op: ir::UnOp::Not,
                            width: 1,
                            arg: Box::new(x),
                        },
                        t,
                    )),
                    (UnOp::BitNot, Ty::Bit(w) | Ty::Int(w)) => Ok(Val::Rv(
                        ir::Expr::Unary {
                            op: ir::UnOp::BitNot,
                            width: *w,
                            arg: Box::new(x),
                        },
                        t.clone(),
                    )),
                    (UnOp::Neg, Ty::Bit(w) | Ty::Int(w)) => Ok(Val::Rv(
                        ir::Expr::Unary {
                            op: ir::UnOp::Neg,
                            width: *w,
                            arg: Box::new(x),
                        },
                        t.clone(),
                    )),
                    _ => err(span, format!("operator {op:?} cannot be applied to {t}")),
                }
            }
        }
    }

    pub(super) fn ternary(
        &mut self,
        scope: &Rc<Scope>,
        c: &ast::Expr,
        a: &ast::Expr,
        b: &ast::Expr,
        hint: Option<&Ty>,
        span: Span,
    ) -> PResult<Val> {
        let cv = self.expr(scope, c, Some(&Ty::Bool))?;
        if let Val::Const(k, _) = &cv {
            return if k.is_zero() {
                self.expr(scope, b, hint)
            } else {
                self.expr(scope, a, hint)
            };
        }
        let (cx, _) = self.rvalue(cv, Some(&Ty::Bool), c.span)?;
        let (av, sa) = self.capture(|s| s.expr(scope, a, hint))?;
        let (bv, sb) = self.capture(|s| s.expr(scope, b, hint))?;
        let t = match (av.ty(), bv.ty()) {
            (Some(Ty::InfInt), Some(Ty::InfInt)) | (None, None) => match hint {
                Some(h) => h.clone(),
                None => {
                    return err(
                        span,
                        "cannot infer the type of this conditional expression; add a cast",
                    )
                }
            },
            (Some(Ty::InfInt), Some(t))
            | (Some(t), Some(Ty::InfInt))
            | (Some(t), _)
            | (_, Some(t)) => t,
        };
        if t.is_scalar() {
            let (ax, _) = self.rvalue(av, Some(&t), a.span)?;
            let (bx, _) = self.rvalue(bv, Some(&t), b.span)?;
            if sa.is_empty() && sb.is_empty() {
                let w = t.scalar_width().unwrap();
                return Ok(Val::Rv(
                    ir::Expr::Cond {
                        cond: Box::new(cx),
                        then: Box::new(ax),
                        else_: Box::new(bx),
                        width: w,
                    },
                    t,
                ));
            }
            let tmp = self.alloc(&t, "tmp", span)?;
            let Place::Scalar(lv, _) = &tmp else {
                unreachable!()
            };
            let mut then = sa;
            then.push(ir::Stmt::Assign {
                dst: lv.clone(),
                src: ax,
            });
            let mut else_ = sb;
            else_.push(ir::Stmt::Assign {
                dst: lv.clone(),
                src: bx,
            });
            self.emit(ir::Stmt::If {
                cond: cx,
                then,
                else_,
            });
            return Ok(Val::Place(tmp));
        }
        // aggregates: materialize into a temporary
        let tmp = self.alloc(&t, "tmp", span)?;
        let (_, mut then) = self.capture(|s| s.assign(&tmp, av, a.span))?;
        let mut t1 = sa;
        t1.append(&mut then);
        let (_, mut else_) = self.capture(|s| s.assign(&tmp, bv, b.span))?;
        let mut e1 = sb;
        e1.append(&mut else_);
        self.emit(ir::Stmt::If {
            cond: cx,
            then: t1,
            else_: e1,
        });
        Ok(Val::Place(tmp))
    }
}
