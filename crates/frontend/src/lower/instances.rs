//! Instantiation: an extern, parser or control instance created from its type and constructor
//! arguments (constructor parameters bound to constant values).

use super::env::*;
use super::lowerer::{err, Lowerer};
use crate::ast::ExprKind;
use crate::ast::{self, Span};
use crate::diag::{Diagnostic, PResult};
use crate::semantic_types::*;
use num_traits::ToPrimitive;
use p4sec_ir as ir;
use std::cell::RefCell;
use std::rc::Rc;

impl<'t> Lowerer<'t> {
    /// Create an instance of an extern, parser or control.
    #[allow(clippy::too_many_arguments)]
    pub fn instantiate(
        &mut self,
        scope: &Rc<Scope>,
        ty: &ast::Type,
        args: &[ast::Argument],
        name: &str,
        annos: &ast::Annotations,
        span: Span,
        applies: Option<usize>,
    ) -> PResult<Rc<Instance>> {
        let base = self
            .type_base(scope, ty)
            .ok_or_else(|| Diagnostic::new(ty.span, "unknown type in instantiation"))?;
        // `typedef register<T> R; R(N) r;`: a typedef of a specialised extern type
        let (base, alias_targs) = match base {
            Binding::Type(Ty::Extern(info, targs)) => (Binding::ExternType(info), Some(targs)),
            b => (b, None),
        };
        let targs: Vec<Ty> = match &ty.kind {
            _ if alias_targs.is_some() => alias_targs.unwrap_or_default(),
            ast::TypeKind::Specialized { args, .. } => {
                let mut v = vec![];
                for a in args {
                    v.push(self.resolve_type(scope, a)?);
                }
                v
            }
            _ => vec![],
        };
        let mut consts = vec![];
        for a in args {
            consts.push(self.ctor_arg(scope, &a.value)?);
        }
        let cint = |i: usize| -> PResult<u64> {
            match consts.get(i) {
                Some(Val::Const(c, _)) => c
                    .to_u64()
                    .ok_or_else(|| Diagnostic::new(span, "constructor argument out of range")),
                _ => err(
                    span,
                    format!("constructor argument {} must be a constant", i + 1),
                ),
            }
        };
        let cp = self.cp_name(annos, name);
        if let Binding::ExternType(info) = &base {
            let kind = match info.decl.name.name.as_str() {
                "register" => "register",
                "counter" => "counter",
                "meter" => "meter",
                "direct_counter" => "direct_counter",
                "direct_meter" => "direct_meter",
                "action_profile" | "action_selector" => "action_profile",
                _ => "extern",
            };
            self.note_annos(format!("{kind} {cp}"), annos)?;
        }
        Ok(Rc::new(match base {
            Binding::ExternType(info) => {
                let tname = info.decl.name.name.clone();
                let (kind, id) = match tname.as_str() {
                    "register" => {
                        let w =
                            targs.first().and_then(|t| t.scalar_width()).ok_or_else(|| {
                                let found = targs.first().map(|t| t.to_string()).unwrap_or_else(|| "none".into());
                                Diagnostic::new(ty.span, format!("the element type of a v1model register must be a bit-string (`bit<W>`, `int<W>`, or a typedef or `type` of one), as BMv2's register arrays hold and the reference compiler's BMv2 backend requires; found {found}"))
                            })?;
                        let id = self.p4info_id_of(annos, 0x16, &cp);
                        self.registers.push(ir::Register { name: cp.clone(), id, size: cint(0)? as u32, width: w });
                        (ExternKind::Register, self.registers.len() - 1)
                    }
                    "counter" | "meter" => {
                        let unit = match cint(1)? {
                            0 => ir::CounterUnit::Packets,
                            1 => ir::CounterUnit::Bytes,
                            _ => ir::CounterUnit::Both,
                        };
                        if tname == "counter" {
                            let id = self.p4info_id_of(annos, 0x12, &cp);
                            self.counters.push(ir::Counter { name: cp.clone(), id, size: cint(0)? as u32, unit, table: None });
                            (ExternKind::Counter, self.counters.len() - 1)
                        } else {
                            let id = self.p4info_id_of(annos, 0x14, &cp);
                            self.meters.push(ir::Meter { name: cp.clone(), id, size: cint(0)? as u32, unit, table: None });
                            (ExternKind::Meter, self.meters.len() - 1)
                        }
                    }
                    "direct_counter" => {
                        let unit = match cint(0)? {
                            0 => ir::CounterUnit::Packets,
                            1 => ir::CounterUnit::Bytes,
                            _ => ir::CounterUnit::Both,
                        };
                        let id = self.p4info_id_of(annos, 0x13, &cp);
                        self.direct_counters.push(ir::Counter { name: cp.clone(), id, size: 0, unit, table: None });
                        (ExternKind::DirectCounter, self.direct_counters.len() - 1)
                    }
                    "direct_meter" => {
                        let unit = if cint(0)? == 1 { ir::CounterUnit::Bytes } else { ir::CounterUnit::Packets };
                        let id = self.p4info_id_of(annos, 0x15, &cp);
                        self.direct_meters.push(ir::Meter { name: cp.clone(), id, size: 0, unit, table: None });
                        (ExternKind::DirectMeter, self.direct_meters.len() - 1)
                    }
                    "action_profile" | "action_selector" => {
                        let id = self.p4info_id_of(annos, 0x11, &cp);
                        let (size, selector) = if tname == "action_profile" {
                            (cint(0)? as u32, None)
                        } else {
                            let algo = match &args[0].value.kind {
                                ExprKind::Member(_, m) => match m.name.as_str() {
                                    "crc32" => ir::HashAlgo::Crc32,
                                    "identity" => ir::HashAlgo::Identity,
                                    "csum16" => ir::HashAlgo::Csum16,
                                    "xor16" => ir::HashAlgo::Xor16,
                                    "random" => ir::HashAlgo::Random,
                                    _ => ir::HashAlgo::Crc16,
                                },
                                _ => ir::HashAlgo::Crc16,
                            };
                            (cint(1)? as u32, Some(algo))
                        };
                        self.action_profiles.push(ir::ActionProfile { name: cp.clone(), id, size, selector, tables: vec![] });
                        (if selector.is_some() { ExternKind::ActionSelector } else { ExternKind::ActionProfile }, self.action_profiles.len() - 1)
                    }
                    _ => {
                        let mut ctor_args = vec![];
                        for (i, c) in consts.iter().enumerate() {
                            match c {
                                Val::Const(v, t) => {
                                    let w = t.scalar_width().unwrap_or_else(|| (v.bits() as u32).max(1));
                                    ctor_args.push(to_value(v, w.max(1)));
                                }
                                _ => return err(args[i].value.span, "extern constructor arguments must be constants"),
                            }
                        }
                        self.externs.push(ir::ExternInstance { name: cp.clone(), type_name: tname.clone(), ctor_args, methods: vec![] });
                        (ExternKind::Registered, self.externs.len() - 1)
                    }
                };
                Instance::Extern { kind, id: id as u32, info, targs, name: cp }
            }
            Binding::ControlDecl(decl, dscope) => {
                let cscope = Scope::child(&dscope);
                self.bind_ctor(&cscope, &decl.ctor_params, consts, span)?;
                let _ = applies;
                Instance::Control { decl, scope: cscope, name: name.to_string(), state: RefCell::new(None) }
            }
            Binding::ParserDecl(decl, dscope) => {
                let pscope = Scope::child(&dscope);
                self.bind_ctor(&pscope, &decl.ctor_params, consts, span)?;
                Instance::Parser { decl, scope: pscope, name: name.to_string() }
            }
            _ => return err(ty.span, "this type cannot be instantiated: only externs, parsers, controls and packages can"),
        }))
    }

    pub(super) fn ctor_arg(&mut self, scope: &Rc<Scope>, e: &ast::Expr) -> PResult<Val> {
        self.ctor_arg_annos(scope, e, &vec![])
    }

    /// A constructor argument or table property value; an instantiation in it gets the annotations
    /// `annos`.
    pub(super) fn ctor_arg_annos(
        &mut self,
        scope: &Rc<Scope>,
        e: &ast::Expr,
        annos: &ast::Annotations,
    ) -> PResult<Val> {
        match &e.kind {
            // nested instantiation `Type(args)` as a constructor argument
            ExprKind::Call {
                callee,
                type_args,
                args,
            } => {
                if let ExprKind::Name(n) = &callee.kind {
                    if matches!(
                        scope.lookup(&n.name),
                        Some(Binding::ExternType(_))
                            | Some(Binding::ControlDecl(..))
                            | Some(Binding::ParserDecl(..))
                    ) {
                        let ty = if type_args.is_empty() {
                            ast::Type {
                                kind: ast::TypeKind::Named {
                                    name: n.clone(),
                                    dot: false,
                                },
                                span: callee.span,
                            }
                        } else {
                            ast::Type {
                                kind: ast::TypeKind::Specialized {
                                    base: n.clone(),
                                    args: type_args.clone(),
                                },
                                span: callee.span,
                            }
                        };
                        let inst =
                            self.instantiate(scope, &ty, args, &n.name, annos, e.span, None)?;
                        return Ok(Val::Binding(Binding::Instance(inst)));
                    }
                }
                self.expr(scope, e, None)
            }
            ExprKind::Construct { ty, args } => {
                let name = match &ty.kind {
                    ast::TypeKind::Specialized { base, .. } => base.name.clone(),
                    ast::TypeKind::Named { name, .. } => name.name.clone(),
                    _ => "anon".into(),
                };
                let inst = self.instantiate(scope, ty, args, &name, annos, e.span, None)?;
                Ok(Val::Binding(Binding::Instance(inst)))
            }
            _ => self.expr(scope, e, None),
        }
    }

    pub(super) fn bind_ctor(
        &mut self,
        scope: &Rc<Scope>,
        params: &[ast::Param],
        vals: Vec<Val>,
        span: Span,
    ) -> PResult<()> {
        if vals.len() > params.len() {
            return err(
                span,
                format!(
                    "{} constructor arguments given, {} expected",
                    vals.len(),
                    params.len()
                ),
            );
        }
        let mut vals = vals.into_iter();
        for p in params {
            let v = match vals.next() {
                Some(v) => v,
                None => match &p.default {
                    Some(d) => self.expr(scope, d, None)?,
                    None => {
                        return err(
                            span,
                            format!("missing constructor argument `{}`", p.name.name),
                        )
                    }
                },
            };
            let t = self.resolve_type(scope, &p.ty)?;
            let v = match v {
                Val::Binding(b) => {
                    scope.define(&p.name.name, b);
                    continue;
                }
                v => self.convert(v, &t, span)?,
            };
            scope.define(&p.name.name, Binding::Value(Box::new(v)));
        }
        Ok(())
    }
}
