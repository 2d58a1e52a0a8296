//! Values converted: to a scalar IR expression of a wanted type, implicitly to another type
//! (integer literals to a width, a serializable enum to its underlying type), to a `bool`
//! condition or to an l-value; run-time values snapshotted into temporaries and list or struct
//! initializers materialized.

use super::env::*;
use super::lowerer::{err, Lowerer};
use crate::ast::{self, Span};
use crate::diag::PResult;
use crate::semantic_types::*;
use p4sec_ir as ir;
use std::rc::Rc;

impl<'t> Lowerer<'t> {
    /// Convert a value to a scalar IR expression of type `want` (or its own type when `want` is
    /// None).
    pub fn rvalue(&mut self, v: Val, want: Option<&Ty>, span: Span) -> PResult<(ir::Expr, Ty)> {
        let v = match want {
            Some(t) => self.convert(v, t, span)?,
            None => v,
        };
        match v {
            Val::Const(c, t) => {
                let t = if matches!(t, Ty::InfInt) {
                    return err(span, format!("cannot infer a width for the integer constant {c}; cast it, e.g. (bit<32>){c}"));
                } else {
                    t
                };
                let w = t.scalar_width().unwrap_or(32);
                Ok((ir::Expr::Const(to_value(&c, w)), t))
            }
            Val::Rv(e, t) => Ok((e, t)),
            Val::Place(Place::Scalar(lv, t)) => Ok((ir::Expr::Load(lv), t)),
            Val::Place(Place::Varbit { data, max, .. }) => {
                Ok((ir::Expr::Load(data), Ty::Varbit(max)))
            }
            Val::TableResult(..) => err(
                span,
                "a table apply result must be used as `.hit`, `.miss` or `.action_run`",
            ),
            Val::Place(p) => err(
                span,
                format!("expected a scalar value, found a value of type {}", p.ty()),
            ),
            _ => err(span, "expected a value"),
        }
    }

    /// Implicit conversion of `v` to type `t` (integer constants get the width; same types pass).
    pub fn convert(&mut self, v: Val, t: &Ty, span: Span) -> PResult<Val> {
        match (&v, t) {
            (_, Ty::Any) | (_, Ty::Var(_)) => Ok(v),
            (Val::Const(c, Ty::InfInt), Ty::Bit(_) | Ty::Int(_)) => {
                Ok(Val::Const(normalize(c, t), t.clone()))
            }
            (Val::Const(c, Ty::InfInt), Ty::Enum(e)) if e.repr.is_some() => {
                Ok(Val::Const(normalize(c, t), t.clone()))
            }
            (Val::Const(_, Ty::InfInt), Ty::InfInt) => Ok(v),
            (Val::Const(c, Ty::InfInt), Ty::Bool) => {
                err(span, format!("cannot use the integer {c} as a bool"))
            }
            _ => {
                if let Some(vt) = v.ty() {
                    if matches!(t, Ty::Bit(_) | Ty::Int(_) | Ty::Bool) && !vt.same(t) {
                        // a serializable enum converts to its underlying type implicitly
                        if let Ty::Enum(e) = &vt {
                            if let Some(r) = &e.repr {
                                if r.same(t) {
                                    return Ok(match v {
                                        Val::Const(c, _) => Val::Const(c, t.clone()),
                                        other => {
                                            let (x, _) = self.rvalue(other, None, span)?;
                                            Val::Rv(x, t.clone())
                                        }
                                    });
                                }
                            }
                        }
                        return err(span, format!("type mismatch: expected {t}, found {vt}"));
                    }
                }
                Ok(v)
            }
        }
    }

    /// A boolean condition.
    pub fn cond(&mut self, scope: &Rc<Scope>, e: &ast::Expr) -> PResult<ir::Expr> {
        let v = self.expr(scope, e, Some(&Ty::Bool))?;
        let (x, t) = self.rvalue(v, None, e.span)?;
        if !matches!(t, Ty::Bool) {
            return err(e.span, format!("condition must be a bool, found {t}"));
        }
        Ok(x)
    }

    /// Lower an expression that must denote a storage location.
    pub fn place(&mut self, scope: &Rc<Scope>, e: &ast::Expr) -> PResult<Place> {
        match self.expr(scope, e, None)? {
            Val::Place(p) => Ok(p),
            _ => err(
                e.span,
                "this expression cannot be assigned to (not an l-value)",
            ),
        }
    }

    /// Copy a run-time value into a fresh temporary so later side effects cannot change it.
    pub fn snapshot(&mut self, v: Val, span: Span) -> PResult<Val> {
        match &v {
            Val::Rv(..) | Val::Place(_) => {
                let Some(t) = v.ty() else { return Ok(v) };
                if matches!(t, Ty::Varbit(_)) {
                    return Ok(v);
                }
                let tmp = self.alloc(&t, "tmp", span)?;
                self.assign(&tmp, v, span)?;
                Ok(Val::Place(tmp))
            }
            _ => Ok(v),
        }
    }

    /// Turn a list/struct initializer into a temporary of type `t`.
    pub fn materialize(&mut self, v: Val, t: &Ty, span: Span) -> PResult<Val> {
        match v {
            Val::List(_) | Val::Struct(..) | Val::Invalid => {
                let tmp = self.alloc(t, "tmp", span)?;
                self.assign(&tmp, v, span)?;
                Ok(Val::Place(tmp))
            }
            other => Ok(other),
        }
    }
}
