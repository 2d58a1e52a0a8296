//! Extern methods (registers, counters, meters, hashes, checksums, ...) and calls of registered
//! (security) externs; the v1model extern functions are in `extern_functions.rs`.

use super::env::*;
use super::lowerer::{err, Lowerer};
use crate::ast::{self, Span};
use crate::diag::{Diagnostic, PResult};
use crate::semantic_types::*;
use p4sec_ir as ir;
use std::rc::Rc;

impl<'t> Lowerer<'t> {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn extern_method(
        &mut self,
        scope: &Rc<Scope>,
        kind: ExternKind,
        id: u32,
        info: &Rc<ExternInfo>,
        name: &str,
        m: &str,
        // the instance's type arguments (a register's element type)
        itargs: &[Ty],
        args: &[ast::Argument],
        _hint: Option<&Ty>,
        span: Span,
    ) -> PResult<Val> {
        let a = |i: usize| -> PResult<&ast::Expr> {
            args.get(i).map(|a| &a.value).ok_or_else(|| {
                Diagnostic::new(span, format!("`{m}` needs at least {} argument(s)", i + 1))
            })
        };
        match (kind, m) {
            (ExternKind::Register, "read") if args.len() == 1 => {
                let w = self.registers[id as usize].width;
                let loc = self.alloc_scalar(w);
                let index = self.index32(scope, a(0)?)?;
                self.emit(ir::Stmt::Builtin(ir::Builtin::RegisterRead {
                    reg: id,
                    dst: ir::LValue::Static(loc),
                    index,
                }));
                let et = itargs.first().cloned().unwrap_or(Ty::Bit(w));
                Ok(Val::Rv(ir::Expr::Load(ir::LValue::Static(loc)), et))
            }
            (ExternKind::Register, "read") => {
                let (dst, t) = self.scalar_place(scope, a(0)?)?;
                let w = self.registers[id as usize].width;
                if t.scalar_width() != Some(w) {
                    return err(
                        a(0)?.span,
                        format!("register `{name}` holds bit<{w}>, the target has type {t}"),
                    );
                }
                let index = self.index32(scope, a(1)?)?;
                self.emit(ir::Stmt::Builtin(ir::Builtin::RegisterRead {
                    reg: id,
                    dst,
                    index,
                }));
                Ok(Val::DontCare)
            }
            (ExternKind::Register, "write") => {
                let index = self.index32(scope, a(0)?)?;
                let w = self.registers[id as usize].width;
                // the element type (a typedef's or a new type's underlying bit-string, or `int<W>`)
                // types the value
                let et = itargs.first().cloned().unwrap_or(Ty::Bit(w));
                let at = self.out_len();
                let (value, t) = self.scalar_arg(scope, a(1)?, Some(&et))?;
                // the index is read before the value's effects (`r.write(c, f(c))`)
                let index = self.snapshot_at(at, index);
                let value = if t.scalar_width() == Some(w) {
                    value
                } else {
                    return err(
                        a(1)?.span,
                        format!("register `{name}` holds bit<{w}>, the value has type {t}"),
                    );
                };
                self.emit(ir::Stmt::Builtin(ir::Builtin::RegisterWrite {
                    reg: id,
                    index,
                    value,
                }));
                Ok(Val::DontCare)
            }
            (ExternKind::Counter, "count") => {
                let index = self.index32(scope, a(0)?)?;
                self.emit(ir::Stmt::Builtin(ir::Builtin::CounterCount {
                    counter: id,
                    index,
                }));
                Ok(Val::DontCare)
            }
            (ExternKind::DirectCounter, "count") => {
                self.emit(ir::Stmt::Builtin(ir::Builtin::DirectCounterCount {
                    counter: id,
                }));
                Ok(Val::DontCare)
            }
            (ExternKind::Meter, "execute_meter") => {
                let index = self.index32(scope, a(0)?)?;
                let (dst, _) = self.scalar_place(scope, a(1)?)?;
                self.emit(ir::Stmt::Builtin(ir::Builtin::MeterExecute {
                    meter: id,
                    index,
                    dst,
                }));
                Ok(Val::DontCare)
            }
            (ExternKind::DirectMeter, "read") => {
                let (dst, _) = self.scalar_place(scope, a(0)?)?;
                self.emit(ir::Stmt::Builtin(ir::Builtin::DirectMeterRead {
                    meter: id,
                    dst,
                }));
                Ok(Val::DontCare)
            }
            (ExternKind::Registered, _) => {
                let decl = info.decl.clone();
                let protos: Vec<&ast::FunctionProto> = decl
                    .members
                    .iter()
                    .filter_map(|mm| match mm {
                        ast::ExternMember::Method { proto, .. } if proto.name.name == m => {
                            Some(proto)
                        }
                        _ => None,
                    })
                    .collect();
                let proto = protos
                    .iter()
                    .find(|p| p.params.len() == args.len())
                    .or(protos.first())
                    .copied()
                    .ok_or_else(|| {
                        Diagnostic::new(
                            span,
                            format!("extern `{}` has no method `{m}`", decl.name.name),
                        )
                    })?
                    .clone();
                self.registered_call(scope, id, &proto, args, span)
            }
            _ => err(span, format!("`{name}` has no method `{m}`")),
        }
    }

    /// A call through the engine's extern registry.
    pub(super) fn registered_call(
        &mut self,
        scope: &Rc<Scope>,
        inst: u32,
        proto: &ast::FunctionProto,
        args: &[ast::Argument],
        span: Span,
    ) -> PResult<Val> {
        let ordered = self.order_args(&proto.params, args, span)?;
        let tscope = Scope::child(scope);
        for tp in &proto.type_params {
            tscope.define(&tp.name, Binding::Type(Ty::Var(tp.name.clone())));
        }
        let mut irargs = vec![];
        let mut sig = vec![];
        for (p, a) in proto.params.iter().zip(ordered) {
            let Some(a) = a else {
                return err(span, format!("missing argument for `{}`", p.name.name));
            };
            let pt = self.resolve_type(&tscope, &p.ty)?;
            let dir = match p.dir {
                Some(ast::Direction::Out) => ir::Direction::Out,
                Some(ast::Direction::InOut) => ir::Direction::InOut,
                _ => ir::Direction::In,
            };
            let at = self.out_len();
            let (parts, dsts) = if dir == ir::Direction::In {
                let want = if pt.is_scalar() { Some(&pt) } else { None };
                // a default value is evaluated where the extern is declared (at top level), not at
                // the call site
                let v = if super::calls::is_default(p, a) {
                    self.expr(&scope.root_of(), a, want)?
                } else {
                    self.expr(scope, a, want)?
                };
                let v = if let (Val::Const(_, Ty::InfInt), Some(t)) = (&v, want) {
                    self.convert(v, t, a.span)?
                } else {
                    v
                };
                (self.flatten(v, a.span)?, vec![])
            } else {
                let place = self.place(scope, a)?;
                let mut parts = vec![];
                self.flatten_place(&place, &mut parts);
                let mut dsts = vec![];
                self.flatten_lvalues(&place, &mut dsts);
                (parts, dsts)
            };
            // this argument's effects (a call with an `inout` argument) come after the values of
            // the arguments before it, which keep what they read (left-to-right evaluation)
            if self.out_len() > at {
                for earlier in irargs.iter_mut() {
                    let ir::ExternArg { parts, .. } = earlier;
                    for x in parts.iter_mut() {
                        *x = self.snapshot_at(at, x.clone());
                    }
                }
            }
            let width: u32 = parts.iter().map(|e| e.width()).sum();
            sig.push((dir, width));
            irargs.push(ir::ExternArg {
                dir,
                width,
                parts,
                dsts,
            });
        }
        let rt = self.resolve_type(&tscope, &proto.ret)?;
        let (ret, retval) = match rt.scalar_width() {
            Some(w) if !matches!(rt, Ty::Void) => {
                let loc = self.alloc_scalar(w);
                (
                    Some(ir::LValue::Static(loc)),
                    Val::Rv(ir::Expr::Load(ir::LValue::Static(loc)), rt.clone()),
                )
            }
            _ => (None, Val::DontCare),
        };
        let method = ir::ExternMethod {
            name: proto.name.name.clone(),
            args: sig,
            ret: ret.as_ref().map(|_| rt.scalar_width().unwrap()),
        };
        let methods = &mut self.externs[inst as usize].methods;
        let midx = match methods.iter().position(|x| *x == method) {
            Some(i) => i,
            None => {
                methods.push(method);
                methods.len() - 1
            }
        } as u32;
        self.emit(ir::Stmt::ExternCall {
            inst,
            method: midx,
            args: irargs,
            ret,
        });
        Ok(retval)
    }
}
