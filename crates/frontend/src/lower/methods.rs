//! Method calls: on header, stack, union and value places (`setValid`, `push_front`, ...), `emit`,
//! and the dispatch of extern methods.

use super::env::*;
use super::lowerer::{err, Lowerer};
use crate::ast::ExprKind;
use crate::ast::{self, Span};
use crate::diag::{Diagnostic, PResult};
use crate::semantic_types::*;
use num_bigint::BigInt;
use num_traits::ToPrimitive;
use p4sec_ir as ir;
use std::rc::Rc;

impl<'t> Lowerer<'t> {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn method_call(
        &mut self,
        scope: &Rc<Scope>,
        recv: Val,
        m: &str,
        targs: &[Ty],
        args: &[ast::Argument],
        hint: Option<&Ty>,
        span: Span,
    ) -> PResult<Val> {
        let argv = |i: usize| -> PResult<&ast::Expr> {
            args.get(i).map(|a| &a.value).ok_or_else(|| {
                Diagnostic::new(span, format!("`{m}` needs at least {} argument(s)", i + 1))
            })
        };
        match recv {
            Val::Place(p) => self.place_method(scope, p, m, args, span),
            Val::Binding(Binding::PacketIn) => match m {
                "extract" => {
                    let target = if matches!(argv(0)?.kind, ExprKind::DontCare) {
                        let t = targs.first().cloned().ok_or_else(|| {
                            Diagnostic::new(span, "extract into `_` needs a type argument")
                        })?;
                        self.alloc(&t, "discard", span)?
                    } else {
                        self.place(scope, argv(0)?)?
                    };
                    let Place::Header { hdr, siblings, .. } = &target else {
                        return err(
                            argv(0)?.span,
                            format!("extract needs a header, found {}", target.ty()),
                        );
                    };
                    let varbit_bits = match args.get(1) {
                        Some(a) => {
                            let v = self.expr(scope, &a.value, Some(&Ty::Bit(32)))?;
                            let (x, t) = self.rvalue(v, Some(&Ty::Bit(32)), a.value.span)?;
                            Some(match t.scalar_width() {
                                Some(32) => x,
                                Some(_) => ir::Expr::Cast {
                                    arg: Box::new(x),
                                    width: 32,
                                    signed: false,
                                },
                                None => {
                                    return err(a.value.span, "the varbit length must be a bit<32>")
                                }
                            })
                        }
                        None => None,
                    };
                    self.emit(ir::Stmt::Extract {
                        hdr: hdr.clone(),
                        varbit_bits,
                    });
                    for s in siblings.clone() {
                        self.emit(ir::Stmt::Assign {
                            dst: s,
                            src: ir::Expr::konst(1, 0),
                        });
                    }
                    Ok(Val::DontCare)
                }
                "lookahead" => {
                    let t = targs
                        .first()
                        .cloned()
                        .or_else(|| hint.cloned())
                        .ok_or_else(|| Diagnostic::new(span, "lookahead needs a type argument"))?;
                    let w = t.bit_size();
                    if w == 0 || w > ir::MAX_WIDTH {
                        return err(span, format!("cannot look ahead {w} bits"));
                    }
                    if t.is_scalar() {
                        return Ok(Val::Rv(ir::Expr::Lookahead { width: w }, t));
                    }
                    let tmp_bits = self.alloc_scalar(w);
                    self.emit(ir::Stmt::Assign {
                        dst: ir::LValue::Static(tmp_bits),
                        src: ir::Expr::Lookahead { width: w },
                    });
                    let place = self.alloc(&t, "lookahead", span)?;
                    let mut lvs = vec![];
                    self.flatten_lvalues(&place, &mut lvs);
                    let mut hi = w;
                    for lv in lvs {
                        let fw = match &lv {
                            ir::LValue::Static(l) => l.width,
                            ir::LValue::Dynamic { base, .. } => base.width,
                        };
                        let src = ir::Expr::Slice {
                            arg: Box::new(ir::Expr::Load(ir::LValue::Static(tmp_bits))),
                            hi: hi - 1,
                            lo: hi - fw,
                        };
                        self.emit(ir::Stmt::Assign { dst: lv, src });
                        hi -= fw;
                    }
                    if let Some(v) = place.header_valid() {
                        self.emit(ir::Stmt::Assign {
                            dst: v,
                            src: ir::Expr::konst(1, 1),
                        });
                    }
                    Ok(Val::Place(place))
                }
                "advance" => {
                    let v = self.expr(scope, argv(0)?, Some(&Ty::Bit(32)))?;
                    let (x, t) = self.rvalue(v, Some(&Ty::Bit(32)), span)?;
                    let x = if t.scalar_width() == Some(32) {
                        x
                    } else {
                        ir::Expr::Cast {
                            arg: Box::new(x),
                            width: 32,
                            signed: false,
                        }
                    };
                    self.emit(ir::Stmt::Advance { bits: x });
                    Ok(Val::DontCare)
                }
                "length" => Ok(Val::Rv(ir::Expr::PacketLength, Ty::Bit(32))),
                _ => err(span, format!("packet_in has no method `{m}`")),
            },
            Val::Binding(Binding::PacketOut) => match m {
                "emit" => {
                    let v = self.expr(scope, argv(0)?, None)?;
                    let Val::Place(p) = v else {
                        return err(
                            argv(0)?.span,
                            "emit needs a header, stack, union or struct of headers",
                        );
                    };
                    self.emit_place(&p, argv(0)?.span)?;
                    Ok(Val::DontCare)
                }
                _ => err(span, format!("packet_out has no method `{m}`")),
            },
            Val::Binding(Binding::Table(t)) => match m {
                "apply" => {
                    self.applied_tables.insert(t.id);
                    let hit = self.alloc_scalar(1);
                    let run = self.alloc_scalar(32);
                    for s in t.key_prelude.clone() {
                        self.emit(s);
                    }
                    self.emit(ir::Stmt::ApplyTable {
                        table: t.id,
                        hit: Some(hit),
                        action_run: Some(run),
                    });
                    Ok(Val::TableResult(t, hit, run))
                }
                _ => err(span, format!("a table has no method `{m}`")),
            },
            // direct type invocation `C.apply(...)`: each call site (in each enclosing instance)
            // its own instance, named as the type (as the reference compiler names it)
            Val::Binding(Binding::ControlDecl(decl, dscope)) if m == "apply" => {
                if !decl.ctor_params.is_empty() {
                    return err(
                        span,
                        format!(
                            "control `{}` has constructor parameters: instantiate it to apply it",
                            decl.sig.name.name
                        ),
                    );
                }
                let key = (self.path.join("."), span.lo);
                let inst = match self.direct_instances.get(&key) {
                    Some(i) => i.clone(),
                    None => {
                        let name = decl.sig.name.name.clone();
                        let i = Rc::new(Instance::Control {
                            decl,
                            scope: Scope::child(&dscope),
                            name,
                            state: std::cell::RefCell::new(None),
                        });
                        self.direct_instances.insert(key, i.clone());
                        i
                    }
                };
                self.apply_control(scope, &inst, args, span)?;
                Ok(Val::DontCare)
            }
            Val::Binding(Binding::ParserDecl(..)) if m == "apply" => err(
                span,
                "a sub-parser can only be applied as a statement of a parser state",
            ),
            Val::Binding(Binding::Instance(inst)) => match &*inst {
                Instance::Control { .. } if m == "apply" => {
                    self.apply_control(scope, &inst, args, span)?;
                    Ok(Val::DontCare)
                }
                Instance::Parser { .. } => err(
                    span,
                    "a sub-parser can only be applied as a statement of a parser state",
                ),
                Instance::Extern {
                    kind,
                    id,
                    info,
                    name,
                    targs: itargs,
                } => self.extern_method(scope, *kind, *id, info, name, m, itargs, args, hint, span),
                _ => err(span, format!("no method `{m}` here")),
            },
            _ => err(span, format!("cannot call method `{m}` on this value")),
        }
    }

    pub(super) fn place_method(
        &mut self,
        _scope: &Rc<Scope>,
        p: Place,
        m: &str,
        args: &[ast::Argument],
        span: Span,
    ) -> PResult<Val> {
        match (&p, m) {
            (Place::Header { valid, .. }, "isValid") => {
                Ok(Val::Rv(ir::Expr::Load(valid.clone()), Ty::Bool))
            }
            (Place::Union { members, .. }, "isValid") => {
                let mut e = ir::Expr::konst(1, 0);
                for (_, mm) in members {
                    if let Some(v) = mm.header_valid() {
                        e = ir::Expr::Binary {
                            op: ir::BinOp::Or,
                            width: 1,
                            signed: false,
                            lhs: Box::new(e),
                            rhs: Box::new(ir::Expr::Load(v)),
                        };
                    }
                }
                Ok(Val::Rv(e, Ty::Bool))
            }
            (
                Place::Header {
                    valid, siblings, ..
                },
                "setValid",
            ) => {
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
                Ok(Val::DontCare)
            }
            (Place::Header { valid, .. }, "setInvalid") => {
                self.emit(ir::Stmt::Assign {
                    dst: valid.clone(),
                    src: ir::Expr::konst(1, 0),
                });
                Ok(Val::DontCare)
            }
            (_, "minSizeInBits" | "maxSizeInBits") => {
                Ok(Val::Const(BigInt::from(p.ty().bit_size()), Ty::InfInt))
            }
            (_, "minSizeInBytes" | "maxSizeInBytes") => Ok(Val::Const(
                BigInt::from(p.ty().bit_size().div_ceil(8)),
                Ty::InfInt,
            )),
            (
                Place::Stack {
                    elems, next_index, ..
                },
                "push_front" | "pop_front",
            ) => {
                let n = match args.first() {
                    Some(a) => match &a.value.kind {
                        ExprKind::Int(l) => l.value.to_usize().unwrap_or(usize::MAX),
                        _ => return err(a.value.span, "the count must be an integer constant"),
                    },
                    None => return err(span, format!("`{m}` needs a count")),
                };
                let size = elems.len();
                let ni = ir::LValue::Static(*next_index);
                let load = ir::Expr::Load(ni.clone());
                if m == "push_front" {
                    for i in (0..size).rev() {
                        if i >= n {
                            self.assign(&elems[i], Val::Place(elems[i - n].clone()), span)?;
                        } else {
                            self.uninit(&elems[i]);
                        }
                    }
                    let sum = ir::Expr::Binary {
                        op: ir::BinOp::Add,
                        width: 32,
                        signed: false,
                        lhs: Box::new(load.clone()),
                        rhs: Box::new(ir::Expr::konst(32, n.min(size) as u64)),
                    };
                    let over = ir::Expr::Binary {
                        op: ir::BinOp::Gt,
                        width: 1,
                        signed: false,
                        lhs: Box::new(sum.clone()),
                        rhs: Box::new(ir::Expr::konst(32, size as u64)),
                    };
                    let v = ir::Expr::Cond {
                        cond: Box::new(over),
                        then: Box::new(ir::Expr::konst(32, size as u64)),
                        else_: Box::new(sum),
                        width: 32,
                    };
                    self.emit(ir::Stmt::Assign { dst: ni, src: v });
                } else {
                    for i in 0..size {
                        if i + n < size {
                            self.assign(&elems[i], Val::Place(elems[i + n].clone()), span)?;
                        } else {
                            self.uninit(&elems[i]);
                        }
                    }
                    let nn = ir::Expr::konst(32, n.min(u32::MAX as usize) as u64);
                    let ge = ir::Expr::Binary {
                        op: ir::BinOp::Ge,
                        width: 1,
                        signed: false,
                        lhs: Box::new(load.clone()),
                        rhs: Box::new(nn.clone()),
                    };
                    let sub = ir::Expr::Binary {
                        op: ir::BinOp::Sub,
                        width: 32,
                        signed: false,
                        lhs: Box::new(load),
                        rhs: Box::new(nn),
                    };
                    let v = ir::Expr::Cond {
                        cond: Box::new(ge),
                        then: Box::new(sub),
                        else_: Box::new(ir::Expr::konst(32, 0)),
                        width: 32,
                    };
                    self.emit(ir::Stmt::Assign { dst: ni, src: v });
                }
                Ok(Val::DontCare)
            }
            _ => err(
                span,
                format!("a value of type {} has no method `{m}`", p.ty()),
            ),
        }
    }

    pub fn emit_place(&mut self, p: &Place, span: Span) -> PResult<()> {
        match p {
            Place::Header { hdr, .. } => {
                self.emit(ir::Stmt::Emit { hdr: hdr.clone() });
                Ok(())
            }
            Place::Struct { fields, .. }
            | Place::Union {
                members: fields, ..
            } => {
                for (_, f) in fields.clone() {
                    self.emit_place(&f, span)?;
                }
                Ok(())
            }
            Place::Stack { elems, .. } => {
                for e in elems.clone() {
                    self.emit_place(&e, span)?;
                }
                Ok(())
            }
            Place::Tuple(ps) => {
                for e in ps.clone() {
                    self.emit_place(&e, span)?;
                }
                Ok(())
            }
            _ => err(span, format!("cannot emit a value of type {}", p.ty())),
        }
    }

    pub(super) fn scalar_arg(
        &mut self,
        scope: &Rc<Scope>,
        e: &ast::Expr,
        want: Option<&Ty>,
    ) -> PResult<(ir::Expr, Ty)> {
        let v = self.expr(scope, e, want)?;
        let v = match (&v, want) {
            (Val::Const(_, Ty::InfInt), None) => self.convert(v, &Ty::Bit(32), e.span)?,
            _ => v,
        };
        self.rvalue(v, want, e.span)
    }

    pub(super) fn index32(&mut self, scope: &Rc<Scope>, e: &ast::Expr) -> PResult<ir::Expr> {
        let (x, t) = self.scalar_arg(scope, e, None)?;
        Ok(match t.scalar_width() {
            Some(32) => x,
            Some(_) => ir::Expr::Cast {
                arg: Box::new(x),
                width: 32,
                signed: false,
            },
            None => return err(e.span, format!("an index must be a bit-string, found {t}")),
        })
    }

    pub(super) fn scalar_place(
        &mut self,
        scope: &Rc<Scope>,
        e: &ast::Expr,
    ) -> PResult<(ir::LValue, Ty)> {
        match self.place(scope, e)? {
            Place::Scalar(lv, t) => Ok((lv, t)),
            p => err(
                e.span,
                format!("expected a bit-string location, found {}", p.ty()),
            ),
        }
    }
}
