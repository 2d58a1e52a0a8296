//! Assignment with P4 copy semantics, and flattening values and places into their scalar parts.

use super::env::*;
use super::lowerer::{err, Lowerer};
use crate::ast::Span;
use crate::diag::PResult;
use crate::semantic_types::*;
use p4sec_ir as ir;

impl<'t> Lowerer<'t> {
    // ---------------------------------------------------------------- assignment

    /// `dst = v` with P4 copy semantics for aggregates.
    pub fn assign(&mut self, dst: &Place, v: Val, span: Span) -> PResult<()> {
        match dst {
            Place::Scalar(lv, t) => {
                if let Val::DontCare = v {
                    return Ok(());
                }
                let (x, vt) = self.rvalue(v, Some(t), span)?;
                if !vt.same(t) {
                    return err(
                        span,
                        format!("cannot assign a value of type {vt} to a location of type {t}"),
                    );
                }
                self.emit(ir::Stmt::Assign {
                    dst: lv.clone(),
                    src: x,
                });
                Ok(())
            }
            Place::Varbit { data, len, .. } => match v {
                Val::Place(Place::Varbit {
                    data: d2, len: l2, ..
                }) => {
                    self.emit(ir::Stmt::Assign {
                        dst: data.clone(),
                        src: ir::Expr::Load(d2),
                    });
                    self.emit(ir::Stmt::Assign {
                        dst: len.clone(),
                        src: ir::Expr::Load(l2),
                    });
                    Ok(())
                }
                _ => err(
                    span,
                    "only a varbit value can be assigned to a varbit field",
                ),
            },
            Place::Header {
                valid,
                fields,
                siblings,
                ..
            } => match v {
                Val::Invalid => {
                    self.emit(ir::Stmt::Assign {
                        dst: valid.clone(),
                        src: ir::Expr::konst(1, 0),
                    });
                    Ok(())
                }
                Val::Place(src @ Place::Header { .. }) => {
                    let Place::Header {
                        valid: sv,
                        fields: sf,
                        ..
                    } = &src
                    else {
                        unreachable!()
                    };
                    if fields.len() != sf.len() {
                        return err(
                            span,
                            format!("cannot assign a {} to a {}", src.ty(), dst.ty()),
                        );
                    }
                    for ((_, d), (_, s)) in fields.iter().zip(sf.iter()) {
                        self.assign(d, Val::Place(s.clone()), span)?;
                    }
                    self.emit(ir::Stmt::Assign {
                        dst: valid.clone(),
                        src: ir::Expr::Load(sv.clone()),
                    });
                    if !siblings.is_empty() {
                        let then = siblings
                            .iter()
                            .map(|s| ir::Stmt::Assign {
                                dst: s.clone(),
                                src: ir::Expr::konst(1, 0),
                            })
                            .collect();
                        self.emit(ir::Stmt::If {
                            cond: ir::Expr::Load(sv.clone()),
                            then,
                            else_: vec![],
                        });
                    }
                    Ok(())
                }
                Val::List(_) | Val::Struct(..) => {
                    self.assign_fields(fields, v, span)?;
                    self.emit(ir::Stmt::Assign {
                        dst: valid.clone(),
                        src: ir::Expr::konst(1, 1),
                    });
                    for s in siblings {
                        self.emit(ir::Stmt::Assign {
                            dst: s.clone(),
                            src: ir::Expr::konst(1, 0),
                        });
                    }
                    Ok(())
                }
                Val::DontCare => Ok(()),
                _ => err(
                    span,
                    format!("cannot assign this value to a header of type {}", dst.ty()),
                ),
            },
            Place::Struct { fields, .. } => match v {
                Val::Place(Place::Struct { fields: sf, .. }) => {
                    if fields.len() != sf.len() {
                        return err(span, "struct types differ");
                    }
                    for ((_, d), (_, s)) in fields.iter().zip(sf.iter()) {
                        self.assign(d, Val::Place(s.clone()), span)?;
                    }
                    Ok(())
                }
                Val::List(_) | Val::Struct(..) => self.assign_fields(fields, v, span),
                Val::DontCare => Ok(()),
                _ => err(
                    span,
                    format!("cannot assign this value to a struct of type {}", dst.ty()),
                ),
            },
            Place::Union { members, .. } => match v {
                Val::Place(Place::Union { members: sm, .. }) => {
                    for ((_, d), (_, s)) in members.iter().zip(sm.iter()) {
                        // copy each member without touching siblings (validity copied member by
                        // member)
                        let (
                            Place::Header {
                                valid: dv,
                                fields: df,
                                ..
                            },
                            Place::Header {
                                valid: sv,
                                fields: sf,
                                ..
                            },
                        ) = (d, s)
                        else {
                            return err(span, "malformed union");
                        };
                        for ((_, x), (_, y)) in df.iter().zip(sf.iter()) {
                            self.assign(x, Val::Place(y.clone()), span)?;
                        }
                        self.emit(ir::Stmt::Assign {
                            dst: dv.clone(),
                            src: ir::Expr::Load(sv.clone()),
                        });
                    }
                    Ok(())
                }
                Val::Invalid => {
                    for (_, m) in members {
                        if let Some(v) = m.header_valid() {
                            self.emit(ir::Stmt::Assign {
                                dst: v,
                                src: ir::Expr::konst(1, 0),
                            });
                        }
                    }
                    Ok(())
                }
                _ => err(span, "cannot assign this value to a header union"),
            },
            Place::Stack {
                elems, next_index, ..
            } => match v {
                Val::Place(Place::Stack {
                    elems: se,
                    next_index: sn,
                    ..
                }) if se.len() == elems.len() => {
                    for (d, s) in elems.iter().zip(se.iter()) {
                        self.assign(d, Val::Place(s.clone()), span)?;
                    }
                    self.emit(ir::Stmt::Assign {
                        dst: ir::LValue::Static(*next_index),
                        src: ir::Expr::Load(ir::LValue::Static(sn)),
                    });
                    Ok(())
                }
                Val::List(vs) if vs.len() == elems.len() => {
                    for (d, s) in elems.iter().zip(vs) {
                        self.assign(d, s, span)?;
                    }
                    Ok(())
                }
                _ => err(span, "cannot assign this value to a header stack"),
            },
            Place::Tuple(ps) => match v {
                Val::List(vs) if vs.len() == ps.len() => {
                    for (d, s) in ps.iter().zip(vs) {
                        self.assign(d, s, span)?;
                    }
                    Ok(())
                }
                Val::Place(Place::Tuple(sp)) if sp.len() == ps.len() => {
                    for (d, s) in ps.iter().zip(sp) {
                        self.assign(d, Val::Place(s), span)?;
                    }
                    Ok(())
                }
                _ => err(span, "cannot assign this value to a tuple"),
            },
        }
    }

    pub(super) fn assign_fields(
        &mut self,
        fields: &[(String, Place)],
        v: Val,
        span: Span,
    ) -> PResult<()> {
        match v {
            Val::List(vs) => {
                if vs.len() != fields.len() {
                    return err(
                        span,
                        format!(
                            "initializer has {} elements, the type has {} fields",
                            vs.len(),
                            fields.len()
                        ),
                    );
                }
                for ((_, d), s) in fields.iter().zip(vs) {
                    self.assign(d, s, span)?;
                }
                Ok(())
            }
            Val::Struct(fs, _) => {
                for (n, s) in fs {
                    match fields.iter().find(|(f, _)| *f == n) {
                        Some((_, d)) => self.assign(d, s, span)?,
                        None => return err(span, format!("no field named `{n}`")),
                    }
                }
                Ok(())
            }
            _ => err(span, "expected an initializer"),
        }
    }

    /// Scalar parts of a value (for hashing, digests, extern arguments): MSB-first order.
    pub fn flatten(&mut self, v: Val, span: Span) -> PResult<Vec<ir::Expr>> {
        let mut out = vec![];
        self.flatten_into(v, &mut out, span)?;
        Ok(out)
    }

    pub(super) fn flatten_into(
        &mut self,
        v: Val,
        out: &mut Vec<ir::Expr>,
        span: Span,
    ) -> PResult<()> {
        match v {
            Val::List(vs) => {
                for x in vs {
                    self.flatten_into(x, out, span)?;
                }
                Ok(())
            }
            Val::Struct(fs, _) => {
                for (_, x) in fs {
                    self.flatten_into(x, out, span)?;
                }
                Ok(())
            }
            Val::Place(p) => {
                self.flatten_place(&p, out);
                Ok(())
            }
            Val::Const(_, Ty::InfInt) => err(
                span,
                "an integer constant in a list needs a width; add a cast",
            ),
            other => {
                let (x, _) = self.rvalue(other, None, span)?;
                out.push(x);
                Ok(())
            }
        }
    }

    pub fn flatten_place(&self, p: &Place, out: &mut Vec<ir::Expr>) {
        match p {
            Place::Scalar(lv, _) => out.push(ir::Expr::Load(lv.clone())),
            Place::Varbit { data, .. } => out.push(ir::Expr::Load(data.clone())),
            Place::Header { fields, .. }
            | Place::Struct { fields, .. }
            | Place::Union {
                members: fields, ..
            } => {
                for (_, f) in fields {
                    self.flatten_place(f, out);
                }
            }
            Place::Stack { elems, .. } => elems.iter().for_each(|e| self.flatten_place(e, out)),
            Place::Tuple(ps) => ps.iter().for_each(|e| self.flatten_place(e, out)),
        }
    }

    /// Scalar locations of a place (for out arguments of externs), aligned with `flatten_place`.
    pub fn flatten_lvalues(&self, p: &Place, out: &mut Vec<ir::LValue>) {
        match p {
            Place::Scalar(lv, _) => out.push(lv.clone()),
            Place::Varbit { data, .. } => out.push(data.clone()),
            Place::Header { fields, .. }
            | Place::Struct { fields, .. }
            | Place::Union {
                members: fields, ..
            } => {
                for (_, f) in fields {
                    self.flatten_lvalues(f, out);
                }
            }
            Place::Stack { elems, .. } => elems.iter().for_each(|e| self.flatten_lvalues(e, out)),
            Place::Tuple(ps) => ps.iter().for_each(|e| self.flatten_lvalues(e, out)),
        }
    }
}
