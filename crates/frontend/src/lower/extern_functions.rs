//! The v1model extern functions (`mark_to_drop`, `hash`, checksums, `clone`/`resubmit`/
//! `recirculate` with their field lists, `digest`, `random`, `assert`/`assume`, ...) and the hash
//! algorithm and field-list arguments they take.

use super::env::*;
use super::lowerer::{err, std_meta_locs, Lowerer};
use crate::ast::ExprKind;
use crate::ast::{self, Span};
use crate::diag::{Diagnostic, PResult};
use crate::semantic_types::*;
use num_bigint::BigInt;
use num_traits::{ToPrimitive, Zero};
use p4sec_ir as ir;
use std::rc::Rc;

impl<'t> Lowerer<'t> {
    pub(super) fn hash_algo(&mut self, scope: &Rc<Scope>, e: &ast::Expr) -> PResult<ir::HashAlgo> {
        let name = match &e.kind {
            ExprKind::Member(_, m) => m.name.clone(),
            ExprKind::Name(n) => n.name.clone(),
            _ => {
                let _ = scope;
                return err(e.span, "expected a HashAlgorithm member");
            }
        };
        Ok(match name.as_str() {
            "crc32" => ir::HashAlgo::Crc32,
            "crc32_custom" => ir::HashAlgo::Crc32Custom,
            "crc16" => ir::HashAlgo::Crc16,
            "crc16_custom" => ir::HashAlgo::Crc16Custom,
            "random" => ir::HashAlgo::Random,
            "identity" => ir::HashAlgo::Identity,
            "csum16" => ir::HashAlgo::Csum16,
            "xor16" => ir::HashAlgo::Xor16,
            other => return err(e.span, format!("unknown hash algorithm `{other}`")),
        })
    }

    pub(super) fn field_list_arg(&mut self, scope: &Rc<Scope>, e: &ast::Expr) -> PResult<u32> {
        match self.expr(scope, e, Some(&Ty::Bit(8)))? {
            Val::Const(c, _) => c
                .to_u32()
                .ok_or_else(|| Diagnostic::new(e.span, "field list index out of range")),
            _ => err(e.span, "the field list index must be a constant"),
        }
    }

    /// Old-style `resubmit(data)`/`recirculate(data)`/`clone3(..., data)`: preserve the fields
    /// named in data.
    pub(super) fn synth_field_list(
        &mut self,
        scope: &Rc<Scope>,
        e: &ast::Expr,
    ) -> PResult<Option<u32>> {
        let v = self.expr(scope, e, None)?;
        let mut locs = vec![];
        let mut add = |p: &Place| locs.extend(p.scalar_locs());
        match &v {
            Val::Place(p) => add(p),
            Val::List(vs) => {
                for x in vs {
                    if let Val::Place(p) = x {
                        add(p);
                    }
                }
            }
            Val::Struct(fs, _) => {
                for (_, x) in fs {
                    if let Val::Place(p) = x {
                        add(p);
                    }
                }
            }
            _ => {}
        }
        if locs.is_empty() {
            return Ok(None);
        }
        let id = 1000 + self.field_lists.len() as u32;
        self.field_lists.insert(id, locs);
        Ok(Some(id))
    }

    pub(super) fn extern_function(
        &mut self,
        scope: &Rc<Scope>,
        f: &Rc<ast::FunctionProto>,
        targs: &[Ty],
        args: &[ast::Argument],
        hint: Option<&Ty>,
        span: Span,
    ) -> PResult<Val> {
        let name = f.name.name.as_str();
        let ordered = self.order_args(&f.params, args, span)?;
        let a =
            |i: usize| -> PResult<&ast::Expr> {
                ordered.get(i).copied().flatten().ok_or_else(|| {
                    Diagnostic::new(span, format!("`{name}` needs argument {}", i + 1))
                })
            };
        let b = |x: ir::Builtin| ir::Stmt::Builtin(x);
        match name {
            "mark_to_drop" => {
                // The argument may be a copy of the standard metadata (an action's `inout`
                // parameter, copied back after the body): then its own fields are written, or the
                // copy-out would undo the drop.
                let own = match ordered.first().copied().flatten() {
                    None => None,
                    Some(arg) => {
                        let field = |m: &str| ast::Expr {
                            kind: ast::ExprKind::Member(
                                Box::new(arg.clone()),
                                ast::Ident {
                                    name: m.to_string(),
                                    span: arg.span,
                                },
                            ),
                            span: arg.span,
                        };
                        let (spec, st) = self.scalar_place(scope, &field("egress_spec"))?;
                        let (grp, gt) = self.scalar_place(scope, &field("mcast_grp"))?;
                        let real = std_meta_locs(self.std_meta.as_ref()).egress_spec;
                        if matches!(&spec, ir::LValue::Static(l) if *l == real && real.width > 0) {
                            None
                        } else {
                            Some([(spec, st, 511u64), (grp, gt, 0)])
                        }
                    }
                };
                match own {
                    None => self.emit(b(ir::Builtin::MarkToDrop)),
                    Some(fields) => {
                        for (dst, t, v) in fields {
                            let w = t.scalar_width().unwrap_or(0);
                            self.emit(ir::Stmt::Assign {
                                dst,
                                src: ir::Expr::konst(w, v),
                            });
                        }
                    }
                }
            }
            "verify" => {
                let cond = self.cond(scope, a(0)?)?;
                match self.expr(scope, a(1)?, Some(&Ty::Error))? {
                    Val::Const(c, _) => {
                        let error = c.to_u32().unwrap_or(0);
                        self.emit(b(ir::Builtin::Verify { cond, error }));
                    }
                    v => {
                        // an error known at run time (a variable, a parameter): one case per
                        // declared error
                        let (x, t) = self.rvalue(v, Some(&Ty::Error), a(1)?.span)?;
                        if !matches!(t, Ty::Error) {
                            return err(
                                a(1)?.span,
                                format!("verify needs an error value, not {t}"),
                            );
                        }
                        let w = Ty::Error.scalar_width().unwrap_or(32);
                        let cases = (0..self.errors.len() as u32)
                            .map(|k| {
                                (
                                    vec![ir::Value::new(w, k as u64)],
                                    vec![b(ir::Builtin::Verify {
                                        cond: cond.clone(),
                                        error: k,
                                    })],
                                )
                            })
                            .collect();
                        self.emit(ir::Stmt::Switch {
                            expr: x,
                            cases,
                            default: vec![],
                        });
                    }
                }
            }
            "hash" => {
                self.p4meta.type_specs = true;
                let (dst, dt) = self.scalar_place(scope, a(0)?)?;
                let algo = self.hash_algo(scope, a(1)?)?;
                let (base, _) = self.scalar_arg(scope, a(2)?, None)?;
                let dv = self.expr(scope, a(3)?, None)?;
                let data = self.flatten(dv, a(3)?.span)?;
                let (max, _) = self.scalar_arg(scope, a(4)?, None)?;
                let _ = dt;
                self.emit(b(ir::Builtin::Hash {
                    dst,
                    algo,
                    base,
                    data,
                    max,
                }));
            }
            "verify_checksum"
            | "verify_checksum_with_payload"
            | "update_checksum"
            | "update_checksum_with_payload" => {
                self.p4meta.type_specs = true;
                let cond = self.cond(scope, a(0)?)?;
                let dv = self.expr(scope, a(1)?, None)?;
                let data = self.flatten(dv, a(1)?.span)?;
                let algo = self.hash_algo(scope, a(3)?)?;
                let with_payload = name.ends_with("_with_payload");
                if name.starts_with("verify") {
                    let (field, _) = self.scalar_arg(scope, a(2)?, None)?;
                    self.emit(b(ir::Builtin::VerifyChecksum {
                        cond,
                        data,
                        field,
                        algo,
                        with_payload,
                    }));
                } else {
                    let (dst, _) = self.scalar_place(scope, a(2)?)?;
                    self.emit(b(ir::Builtin::UpdateChecksum {
                        cond,
                        data,
                        dst,
                        algo,
                        with_payload,
                    }));
                }
            }
            "resubmit"
            | "recirculate"
            | "resubmit_preserving_field_list"
            | "recirculate_preserving_field_list" => {
                let field_list = if name.ends_with("_field_list") {
                    Some(self.field_list_arg(scope, a(0)?)?)
                } else if let Some(Some(d)) = ordered.first() {
                    self.synth_field_list(scope, d)?
                } else {
                    None
                };
                self.emit(b(if name.starts_with("resubmit") {
                    ir::Builtin::Resubmit { field_list }
                } else {
                    ir::Builtin::Recirculate { field_list }
                }));
            }
            "clone" | "clone3" | "clone_preserving_field_list" => {
                let kind = match &a(0)?.kind {
                    ExprKind::Member(_, m) if m.name == "I2E" => ir::CloneKind::I2E,
                    ExprKind::Member(_, m) if m.name == "E2E" => ir::CloneKind::E2E,
                    _ => match self.expr(scope, a(0)?, None)? {
                        Val::Const(c, _) if c.is_zero() => ir::CloneKind::I2E,
                        Val::Const(..) => ir::CloneKind::E2E,
                        _ => {
                            return err(
                                a(0)?.span,
                                "clone type must be CloneType.I2E or CloneType.E2E",
                            )
                        }
                    },
                };
                let session = self.index32(scope, a(1)?)?;
                let field_list = match name {
                    "clone_preserving_field_list" => Some(self.field_list_arg(scope, a(2)?)?),
                    "clone3" => self.synth_field_list(scope, a(2)?)?,
                    _ => None,
                };
                self.emit(b(ir::Builtin::Clone {
                    kind,
                    session,
                    field_list,
                }));
            }
            "truncate" => {
                let length = self.index32(scope, a(0)?)?;
                self.emit(b(ir::Builtin::Truncate { length }));
            }
            "digest" => {
                let dv = self.expr(scope, a(1)?, None)?;
                let t = match (&dv, targs.first()) {
                    (_, Some(t)) => t.clone(),
                    // `digest(5, { a, b })`: a tuple of the elements' types
                    (Val::List(items), None) => {
                        let mut ts = vec![];
                        for v in items {
                            match v.ty() {
                                Some(t) if !matches!(t, Ty::InfInt) => ts.push(t),
                                _ => return err(a(1)?.span, "the elements of a digested list need types (write them as bit<W> values)"),
                            }
                        }
                        Ty::Tuple(ts)
                    }
                    (v, None) => v.ty().unwrap_or(Ty::Any),
                };
                let dv = self.materialize(dv, &t, a(1)?.span)?;
                let data = self.flatten(dv, a(1)?.span)?;
                let tname = t.to_string();
                let idx = match self.digests.iter().position(|d| d.name == tname) {
                    Some(i) => i as u32,
                    None => {
                        let fields = match &t {
                            Ty::Agg(ag) => ag
                                .fields
                                .iter()
                                .map(|f| (f.name.clone(), f.ty.bit_size()))
                                .collect(),
                            other => vec![("value".to_string(), other.bit_size())],
                        };
                        let id = self.p4info_id(0x17, &tname);
                        self.digests.push(ir::Digest {
                            name: tname,
                            id,
                            fields,
                        });
                        self.digests.len() as u32 - 1
                    }
                };
                self.emit(b(ir::Builtin::Digest { digest: idx, data }));
            }
            "random" => {
                let (dst, t) = self.scalar_place(scope, a(0)?)?;
                let (lo, _) = self.scalar_arg(scope, a(1)?, Some(&t))?;
                let (hi, _) = self.scalar_arg(scope, a(2)?, Some(&t))?;
                self.emit(b(ir::Builtin::Random { dst, lo, hi }));
            }
            "log_msg" => {
                let format = match self.expr(scope, a(0)?, None)? {
                    Val::Str(s) => s,
                    _ => return err(a(0)?.span, "log_msg needs a string"),
                };
                let args = match ordered.get(1).copied().flatten() {
                    Some(d) => {
                        let v = self.expr(scope, d, None)?;
                        self.flatten(v, d.span)?
                    }
                    None => vec![],
                };
                self.emit(b(ir::Builtin::LogMsg { format, args }));
            }
            "assert" | "assume" => {
                let cond = self.cond(scope, a(0)?)?;
                self.emit(b(ir::Builtin::Assert { cond }));
            }
            "static_assert" => {
                let v = self.expr(scope, a(0)?, Some(&Ty::Bool))?;
                return match v {
                    Val::Const(c, _) if !c.is_zero() => Ok(Val::Const(BigInt::from(1), Ty::Bool)),
                    Val::Const(..) => err(span, "static assertion failed"),
                    _ => err(span, "static_assert needs a compile-time condition"),
                };
            }
            _ => {
                // an extern function implemented by the registry
                let inst = match self
                    .externs
                    .iter()
                    .position(|e| e.name == name && e.type_name == name)
                {
                    Some(i) => i as u32,
                    None => {
                        self.externs.push(ir::ExternInstance {
                            name: name.to_string(),
                            type_name: name.to_string(),
                            ctor_args: vec![],
                            methods: vec![],
                        });
                        self.externs.len() as u32 - 1
                    }
                };
                let _ = hint;
                return self.registered_call(scope, inst, f, args, span);
            }
        }
        Ok(Val::DontCare)
    }
}
