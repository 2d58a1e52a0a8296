//! Casts: `(T) e` between bit strings, signed integers, booleans and serializable enums, and of a
//! list or struct expression to a struct or tuple type; a constant is cast at compile time.

use super::env::*;
use super::lowerer::{err, Lowerer};
use crate::ast::Span;
use crate::diag::PResult;
use crate::semantic_types::*;
use p4sec_ir as ir;

impl<'t> Lowerer<'t> {
    pub fn cast(&mut self, v: Val, t: &Ty, span: Span) -> PResult<Val> {
        if let (Val::List(_) | Val::Struct(..), Ty::Agg(_) | Ty::Tuple(_)) = (&v, t) {
            return self.materialize(v, t, span);
        }
        let from = match v.ty() {
            Some(f) => f,
            None => return err(span, format!("cannot cast this expression to {t}")),
        };
        if let Val::Const(c, _) = &v {
            let c = match (&from, t) {
                (Ty::Bool, Ty::Bit(1)) | (Ty::Bit(1), Ty::Bool) => c.clone(),
                (Ty::Bool, _) => return err(span, format!("cannot cast bool to {t}")),
                (_, Ty::Bool) if !matches!(from, Ty::Bit(1) | Ty::InfInt) => {
                    return err(span, format!("only bit<1> can be cast to bool, not {from}"))
                }
                (Ty::Bit(w), Ty::Int(_)) | (Ty::Bit(w), Ty::Enum(_)) => wrap_unsigned(c, *w),
                _ => c.clone(),
            };
            let c = if let (Ty::Int(w), Ty::Bit(_)) = (&from, t) {
                wrap_unsigned(&c, *w)
            } else {
                c
            };
            return match t {
                Ty::Bit(_) | Ty::Int(_) | Ty::Bool | Ty::InfInt | Ty::Enum(_) | Ty::Error => {
                    Ok(Val::Const(normalize(&c, t), t.clone()))
                }
                _ => err(span, format!("cannot cast a constant to {t}")),
            };
        }
        let (x, from) = self.rvalue(v, None, span)?;
        let fw = from.scalar_width().unwrap_or(0);
        match t {
            Ty::Bit(w) | Ty::Int(w) => {
                if matches!(from, Ty::Bool) && *w != 1 {
                    return err(span, format!("cannot cast bool to {t}"));
                }
                if !from.is_scalar() {
                    return err(span, format!("cannot cast {from} to {t}"));
                }
                if fw == *w {
                    Ok(Val::Rv(x, t.clone()))
                } else {
                    Ok(Val::Rv(
                        ir::Expr::Cast {
                            arg: Box::new(x),
                            width: *w,
                            signed: from.is_signed(),
                        },
                        t.clone(),
                    ))
                }
            }
            Ty::Bool => {
                if fw != 1 {
                    return err(span, format!("only bit<1> can be cast to bool, not {from}"));
                }
                Ok(Val::Rv(x, Ty::Bool))
            }
            Ty::Enum(e) if e.repr.is_some() => {
                let w = t.scalar_width().unwrap();
                let x = if fw == w {
                    x
                } else {
                    ir::Expr::Cast {
                        arg: Box::new(x),
                        width: w,
                        signed: from.is_signed(),
                    }
                };
                Ok(Val::Rv(x, t.clone()))
            }
            Ty::Any => Ok(Val::Rv(x, from)),
            Ty::InfInt if matches!(from, Ty::Bit(_) | Ty::Int(_)) => {
                // `(int)x` of a run-time `bit<W>`/`int<W>` (the reference compiler accepts it where
                // unrolling makes x known): the value, exact, in a signed type wide enough that the
                // `+`/`-` that usually follow cannot overflow it before the cast back to a fixed
                // width
                let w = (fw + 1).clamp(64, ir::MAX_WIDTH);
                if w <= fw && !from.is_signed() {
                    return err(
                        span,
                        format!(
                            "cannot cast {from} to int: the value needs more than {} bits",
                            ir::MAX_WIDTH
                        ),
                    );
                }
                Ok(Val::Rv(
                    ir::Expr::Cast {
                        arg: Box::new(x),
                        width: w,
                        signed: from.is_signed(),
                    },
                    Ty::Int(w),
                ))
            }
            _ => {
                if from.same(t) {
                    Ok(Val::Rv(x, t.clone()))
                } else {
                    err(span, format!("cannot cast {from} to {t}"))
                }
            }
        }
    }
}
