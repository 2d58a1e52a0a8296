//! Top-level declarations, the v1model package, parser and control instances, tables and
//! instantiations.

use super::annotations::*;
use super::env::*;
use super::lowerer::{err, Lowerer, Pipeline};
use crate::ast::ExprKind;
use crate::ast::{self, Span};
use crate::diag::{Diagnostic, PResult};
use crate::types::*;
use num_bigint::BigInt;
use num_traits::ToPrimitive;
use p4sec_ir as ir;
use std::cell::RefCell;
use std::rc::Rc;

impl<'t> Lowerer<'t> {
    pub fn declare_globals(&mut self, prog: &ast::Program) -> PResult<()> {
        let g = self.global.clone();
        g.define("error", Binding::ErrorNs);
        for e in ir::CORE_ERRORS {
            if !self.errors.iter().any(|x| x == e) {
                self.errors.push(e.to_string());
            }
        }
        for d in &prog.decls {
            self.declare(&g, d, true)?;
        }
        Ok(())
    }

    /// The ids of a field's `@field_list(...)` annotations: integer literals, named constants and
    /// serializable enum members (`@field_list(FL_RESUBMIT)`); a name that is not declared, or not
    /// a constant, is an error at its place (never an empty list).
    fn field_list_ids(&mut self, scope: &Rc<Scope>, annos: &ast::Annotations) -> PResult<Vec<u32>> {
        let mut ids = vec![];
        for a in annos.iter().filter(|a| a.name.name == "field_list") {
            let ast::AnnotationBody::Exprs(es) = &a.body else {
                return err(
                    a.name.span,
                    "`@field_list` takes a comma-separated list of integer constants",
                );
            };
            for e in es {
                let (v, pre) = self.capture(|l| l.expr(scope, e, None))?;
                let c = match v {
                    Val::Const(c, _) if pre.is_empty() => c,
                    _ => return err(e.span, "a `@field_list` id must be an integer constant (a literal, a named constant or an enum member)"),
                };
                match c.to_u32() {
                    Some(x) => ids.push(x),
                    None => return err(e.span, format!("`@field_list` id {c} is out of range")),
                }
            }
        }
        Ok(ids)
    }

    /// Declare one declaration in `scope`. At top level, instantiations other than `main` are
    /// created now.
    pub fn declare(&mut self, scope: &Rc<Scope>, d: &ast::Decl, top: bool) -> PResult<()> {
        match d {
            ast::Decl::Const(c) => {
                let t = self.resolve_type(scope, &c.ty)?;
                let v = self.expr(scope, &c.value, Some(&t))?;
                let v = self.convert(v, &t, c.value.span)?;
                let v = match v {
                    Val::List(_) | Val::Struct(..) => {
                        self.materialize_const(v, &t, c.value.span)?
                    }
                    other => other,
                };
                scope.define(&c.name.name, Binding::Value(Box::new(v)));
            }
            ast::Decl::Var(v) => self.declare_var(scope, v)?,
            ast::Decl::Aggregate(a) => {
                if !a.type_params.is_empty() {
                    scope.define(&a.name.name, Binding::GenericAgg(Rc::new(a.clone())));
                } else {
                    let mut fields = vec![];
                    for f in &a.fields {
                        let ty = self.resolve_type(scope, &f.ty)?;
                        if a.kind == ast::AggregateKind::Header {
                            if !ty.fits_in_header() {
                                return err(
                                    f.name.span,
                                    format!("header field `{}` cannot have type {ty}", f.name.name),
                                );
                            }
                        }
                        fields.push(FieldInfo {
                            name: f.name.name.clone(),
                            ty,
                            field_lists: self.field_list_ids(scope, &f.annos)?,
                            match_kind: annotation_ident(&f.annos, "match"),
                            cp_name: annotation_str(&f.annos, "name"),
                            new_type: self.new_type_name(&f.ty),
                        });
                    }
                    let info = AggInfo {
                        name: a.name.name.clone(),
                        kind: a.kind,
                        fields,
                    };
                    scope.define(&a.name.name, Binding::Type(Ty::Agg(Rc::new(info))));
                    if let Some(kind) = annotation_str(&a.annos, "controller_header") {
                        // the reference compiler hashes the header type's name, not the
                        // annotation's
                        let id = self.p4info_id_of(&a.annos, 0x04, &a.name.name);
                        if let Some(Binding::Type(Ty::Agg(ag))) = scope.lookup(&a.name.name) {
                            let fields = ag
                                .fields
                                .iter()
                                .enumerate()
                                .map(|(i, f)| (f.name.clone(), i as u32 + 1, f.ty.bit_size()))
                                .collect();
                            self.note_annos(format!("ctrl {kind}"), &a.annos)?;
                            for (i, f) in a.fields.iter().enumerate() {
                                self.note_annos(format!("ctrl_field {kind} {}", i + 1), &f.annos)?;
                                self.note_type_name(format!("ctrl_field {kind} {}", i + 1), &f.ty);
                            }
                            for f in ag.fields.iter() {
                                self.note_type(&f.ty);
                            }
                            self.controller_headers.push(ir::ControllerHeader {
                                name: kind,
                                id,
                                fields,
                            });
                        }
                    }
                }
            }
            ast::Decl::Enum(e) => {
                let repr = match &e.repr {
                    Some(t) => Some(self.resolve_type(scope, t)?),
                    None => None,
                };
                let mut members = vec![];
                for (i, (n, v)) in e.members.iter().enumerate() {
                    let val = match (v, &repr) {
                        (Some(v), Some(r)) => match self.expr(scope, v, Some(r))? {
                            Val::Const(c, _) => normalize(&c, r),
                            _ => return err(v.span, "enum member values must be constants"),
                        },
                        (None, Some(_)) => {
                            return err(n.span, "members of a serializable enum need values")
                        }
                        (_, None) => BigInt::from(i),
                    };
                    members.push((n.name.clone(), val));
                }
                if let Some(r) = &repr {
                    let w = r.scalar_width().unwrap_or(0);
                    let nbytes = w.div_ceil(8) as usize;
                    let enc = |v: &BigInt| {
                        let (_, mut b) = normalize(v, r).to_bytes_be();
                        if b.len() < nbytes {
                            let mut z = vec![0u8; nbytes - b.len()];
                            z.append(&mut b);
                            b = z;
                        }
                        b[b.len() - nbytes..].to_vec()
                    };
                    let ms = members.iter().map(|(n, v)| (n.clone(), enc(v))).collect();
                    self.ser_enums.insert(e.name.name.clone(), (w, ms));
                }
                let info = EnumInfo {
                    name: e.name.name.clone(),
                    repr,
                    members,
                };
                scope.define(&e.name.name, Binding::Type(Ty::Enum(Rc::new(info))));
            }
            ast::Decl::Error(ids) => {
                for i in ids {
                    if !self.errors.iter().any(|x| *x == i.name) {
                        self.errors.push(i.name.clone());
                    }
                }
            }
            ast::Decl::MatchKind(ids) => {
                for i in ids {
                    scope.define(&i.name, Binding::MatchKind(i.name.clone()));
                }
            }
            ast::Decl::Typedef(t) => {
                let ty = self.resolve_type(scope, &t.ty)?;
                if t.is_newtype {
                    if let Some(w) = ty.scalar_width() {
                        self.newtypes
                            .insert(t.name.name.clone(), (w, p4info_annos(&t.annos).annotations));
                    }
                }
                scope.define(&t.name.name, Binding::Type(ty));
            }
            ast::Decl::Extern(e) => match e.name.name.as_str() {
                "packet_in" => scope.define("packet_in", Binding::PacketIn),
                "packet_out" => scope.define("packet_out", Binding::PacketOut),
                _ => scope.define(
                    &e.name.name,
                    Binding::ExternType(Rc::new(ExternInfo {
                        decl: Rc::new(e.clone()),
                    })),
                ),
            },
            ast::Decl::ExternFunction(f) => {
                let mut list = match scope.names.borrow().get(&f.name.name) {
                    Some(Binding::ExternFunctions(v)) => v.clone(),
                    _ => vec![],
                };
                list.push(Rc::new(f.clone()));
                scope.define(&f.name.name, Binding::ExternFunctions(list));
            }
            ast::Decl::Function(f) => {
                let mut list = match scope.names.borrow().get(&f.proto.name.name) {
                    Some(Binding::Functions(v)) => v.clone(),
                    _ => vec![],
                };
                list.push(Rc::new(f.clone()));
                scope.define(&f.proto.name.name, Binding::Functions(list));
            }
            ast::Decl::Action(a) => scope.define(
                &a.name.name,
                Binding::Action(Rc::new(a.clone()), scope.clone()),
            ),
            ast::Decl::Parser(p) => scope.define(
                &p.sig.name.name,
                Binding::ParserDecl(Rc::new(p.clone()), scope.clone()),
            ),
            ast::Decl::Control(c) => scope.define(
                &c.sig.name.name,
                Binding::ControlDecl(Rc::new(c.clone()), scope.clone()),
            ),
            ast::Decl::BlockType(b) => {
                scope.define(&b.name.name, Binding::BlockType(Rc::new(b.clone())))
            }
            ast::Decl::Instantiation(i) => {
                if top && i.name.name == "main" {
                    return Ok(());
                }
                if top {
                    // a package instantiation other than main is ignored; externs are created
                    if let Some(Binding::BlockType(b)) = self.type_base(scope, &i.ty) {
                        if b.kind == ast::BlockKind::Package {
                            return Ok(());
                        }
                    }
                }
                let inst = self.instantiate(
                    scope,
                    &i.ty,
                    &i.args,
                    &i.name.name,
                    &i.annos,
                    i.name.span,
                    None,
                )?;
                scope.define(&i.name.name, Binding::Instance(inst));
            }
            ast::Decl::Table(t) => {
                let info = self.lower_table(scope, t)?;
                scope.define(&t.name.name, Binding::Table(info));
            }
            ast::Decl::ValueSet(v) => {
                let t = self.resolve_type(scope, &v.elem)?;
                let size = self.const_width(scope, &v.size)?;
                let name = self.cp_name(&v.annos, &v.name.name);
                let id = self.p4info_id_of(&v.annos, 0x03, &name);
                let scalar = |t: &Ty| {
                    matches!(t, Ty::Bit(_) | Ty::Int(_) | Ty::Bool)
                        || matches!(t, Ty::Enum(e) if e.repr.is_some())
                };
                let (widths, names, kinds) = match &t {
                    Ty::Agg(a) if a.kind == ast::AggregateKind::Struct => {
                        // the leaves of the struct, nested structs flattened in order (`inner.a`):
                        // one element (and P4Info match field) each
                        let mut leaves: Vec<(String, Ty, Option<String>)> = vec![];
                        fn flatten(a: &AggInfo, prefix: &str, out: &mut Vec<(String, Ty, Option<String>)>) -> Result<(), String> {
                            for f in &a.fields {
                                let name = format!("{prefix}{}", f.cp_name.clone().unwrap_or_else(|| f.name.clone()));
                                match &f.ty {
                                    Ty::Agg(inner) if inner.kind == ast::AggregateKind::Struct => flatten(inner, &format!("{name}."), out)?,
                                    t if matches!(t, Ty::Bit(_) | Ty::Int(_) | Ty::Bool) || matches!(t, Ty::Enum(e) if e.repr.is_some()) => {
                                        out.push((name, t.clone(), f.match_kind.clone()))
                                    }
                                    t => {
                                        return Err(format!(
                                            "struct field `{name}` must be bit<W>, int<W>, bool, a serializable enum or a struct of those, not {t}"
                                        ))
                                    }
                                }
                            }
                            Ok(())
                        }
                        if let Err(m) = flatten(a, "", &mut leaves) {
                            return err(v.name.span, format!("value set `{}`: {m}", v.name.name));
                        }
                        let mut kinds = vec![];
                        for (fname, _, mk) in &leaves {
                            kinds.push(match mk.as_deref() {
                                None | Some("exact") => ir::MatchKind::Exact,
                                Some("ternary") => ir::MatchKind::Ternary,
                                Some("lpm") => ir::MatchKind::Lpm,
                                Some("range") => ir::MatchKind::Range,
                                Some("optional") => ir::MatchKind::Optional,
                                Some(k) => return err(v.name.span, format!("value set `{}`: field `{fname}` has an unknown match kind `{k}`", v.name.name)),
                            });
                        }
                        let names = leaves.iter().map(|l| l.0.clone()).collect();
                        (leaves.iter().map(|l| l.1.bit_size()).collect::<Vec<u32>>(), names, kinds)
                    }
                    Ty::Tuple(ts) => {
                        if let Some(bad) = ts.iter().find(|t| !scalar(t)) {
                            return err(
                                v.name.span,
                                format!("value set `{}`: tuple elements must be bit<W>, int<W>, bool or a serializable enum, not {bad}", v.name.name),
                            );
                        }
                        (ts.iter().map(|t| t.bit_size()).collect(), vec![], vec![])
                    }
                    t if scalar(t) => (vec![t.bit_size()], vec![], vec![]),
                    t => {
                        return err(
                            v.name.span,
                            format!(
                                "value set `{}`: type {t} cannot be a value set's element (bit<W>, int<W>, a serializable enum, or a struct or tuple of those)",
                                v.name.name
                            ),
                        )
                    }
                };
                if widths.is_empty() {
                    return err(
                        v.name.span,
                        format!("value set `{}` has no elements", v.name.name),
                    );
                }
                self.value_sets.push(ir::ValueSet {
                    name,
                    id,
                    size,
                    widths,
                    names,
                    kinds,
                });
                scope.define(
                    &v.name.name,
                    Binding::ValueSet(self.value_sets.len() as u32 - 1, t),
                );
            }
        }
        Ok(())
    }

    pub(super) fn materialize_const(&mut self, v: Val, t: &Ty, span: Span) -> PResult<Val> {
        // aggregate constants live in slots initialized at the start of each block that uses them;
        // since the value never changes, initializing them once in the global statement buffer is
        // enough
        let p = self.alloc(t, "const", span)?;
        self.assign(&p, v, span)?;
        Ok(Val::Place(p))
    }

    pub(super) fn type_base(&self, scope: &Rc<Scope>, t: &ast::Type) -> Option<Binding> {
        match &t.kind {
            ast::TypeKind::Named { name, .. } => scope.lookup(&name.name),
            ast::TypeKind::Specialized { base, .. } => scope.lookup(&base.name),
            _ => None,
        }
    }

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

    // ---------------------------------------------------------------- the v1model package

    pub fn elaborate_main(&mut self, prog: &ast::Program) -> PResult<()> {
        let main = prog
            .decls
            .iter()
            .rev()
            .find_map(|d| match d {
                ast::Decl::Instantiation(i) if i.name.name == "main" => Some(i.clone()),
                _ => None,
            })
            .ok_or_else(|| {
                Diagnostic::new(
                    Span::default(),
                    "the program has no `main` package instantiation",
                )
            })?;
        let g = self.global.clone();
        let pkg = match self.type_base(&g, &main.ty) {
            Some(Binding::BlockType(b)) if b.kind == ast::BlockKind::Package => b,
            _ => return err(main.ty.span, "`main` must instantiate a package (V1Switch)"),
        };
        if pkg.name.name != "V1Switch" {
            return err(
                main.ty.span,
                format!(
                    "p4sec runs the v1model architecture (V1Switch); `{}` is not supported",
                    pkg.name.name
                ),
            );
        }
        // `V1Switch(p = P(), ig = I(), ...)`: named arguments in any order
        let mut main = main;
        if main.args.iter().any(|a| a.name.is_some()) {
            let ordered = self.order_args(&pkg.params, &main.args, main.name.span)?;
            let mut args = vec![];
            for (p, a) in pkg.params.iter().zip(ordered) {
                let Some(v) = a else {
                    return err(
                        main.name.span,
                        format!("V1Switch argument `{}` is missing", p.name.name),
                    );
                };
                args.push(ast::Argument {
                    name: None,
                    value: v.clone(),
                });
            }
            main.args = args;
        }
        for a in main.annos.iter().filter(|a| a.name.name == "pkginfo") {
            match &a.body {
                ast::AnnotationBody::KeyValues(kvs) => {
                    for (k, v) in kvs {
                        if let ExprKind::Str(s) = &v.kind {
                            self.p4meta.pkg_info.push((k.name.clone(), s.clone()));
                        }
                    }
                }
                // `@pkginfo(name="x", version="1")`: tokens `name = "x" , version = "1"`
                _ => {
                    let toks: Vec<&str> = a.text.split(' ').collect();
                    for w in toks.windows(3) {
                        if w[1] == "="
                            && w[2].len() >= 2
                            && w[2].starts_with('"')
                            && w[2].ends_with('"')
                        {
                            self.p4meta
                                .pkg_info
                                .push((w[0].to_string(), w[2][1..w[2].len() - 1].to_string()));
                        }
                    }
                }
            }
        }
        if main.args.len() != 6 {
            return err(
                main.name.span,
                format!("V1Switch takes 6 blocks, {} given", main.args.len()),
            );
        }
        let mut insts = vec![];
        for a in &main.args {
            let v = self.ctor_arg(&g, &a.value)?;
            match v {
                Val::Binding(Binding::Instance(i)) => insts.push(i),
                _ => return err(a.value.span, "expected a parser or control instantiation"),
            }
        }
        // global storage from the parser's signature
        let Instance::Parser { decl: pdecl, .. } = &*insts[0] else {
            return err(
                main.args[0].value.span,
                "the first V1Switch argument must be a parser",
            );
        };
        if pdecl.sig.params.len() != 4 {
            return err(pdecl.sig.name.span, "the v1model parser must have 4 parameters (packet_in, out H, inout M, inout standard_metadata_t)");
        }
        let h_ty = self.resolve_type(&g, &pdecl.sig.params[1].ty)?;
        let m_ty = self.resolve_type(&g, &pdecl.sig.params[2].ty)?;
        let s_ty = self.resolve_type(&g, &pdecl.sig.params[3].ty)?;
        let hdr = self.alloc(&h_ty, "hdr", pdecl.sig.params[1].name.span)?;
        let meta = self.alloc(&m_ty, "meta", pdecl.sig.params[2].name.span)?;
        let std = self.alloc(&s_ty, "standard_metadata", pdecl.sig.params[3].name.span)?;
        self.std_meta = Some(std.clone());
        self.collect_field_lists(&m_ty, &meta);
        // global initializers (aggregate constants) run at the start of the parser
        let global_init = std::mem::take(&mut self.out[0]);

        // parser
        let pnext = ir::Next::Accept;
        let binds = vec![
            Binding::PacketIn,
            Binding::Var(hdr.clone()),
            Binding::Var(meta.clone()),
            Binding::Var(std.clone()),
        ];
        let entry = self.lower_parser_instance(
            &insts[0],
            binds,
            pnext,
            global_init,
            main.args[0].value.span,
        )?;
        let parser = ir::Parser {
            name: pdecl.sig.name.name.clone(),
            states: std::mem::take(&mut self.pstates),
            start: entry,
        };

        let sigs: [(usize, Vec<Binding>); 5] = [
            (
                1,
                vec![Binding::Var(hdr.clone()), Binding::Var(meta.clone())],
            ),
            (
                2,
                vec![
                    Binding::Var(hdr.clone()),
                    Binding::Var(meta.clone()),
                    Binding::Var(std.clone()),
                ],
            ),
            (
                3,
                vec![
                    Binding::Var(hdr.clone()),
                    Binding::Var(meta.clone()),
                    Binding::Var(std.clone()),
                ],
            ),
            (
                4,
                vec![Binding::Var(hdr.clone()), Binding::Var(meta.clone())],
            ),
            (5, vec![Binding::PacketOut, Binding::Var(hdr.clone())]),
        ];
        let mut blocks = vec![];
        for (i, binds) in sigs {
            let Instance::Control { decl, .. } = &*insts[i] else {
                return err(main.args[i].value.span, "expected a control");
            };
            let name = decl.sig.name.name.clone();
            let (_, body) =
                self.capture(|l| l.top_control(&insts[i], binds, main.args[i].value.span))?;
            blocks.push(ir::Control { name, body });
        }
        self.pipeline = Some(Pipeline { parser, blocks });
        Ok(())
    }

    pub(super) fn collect_field_lists(&mut self, t: &Ty, p: &Place) {
        if let (Ty::Agg(a), Place::Struct { fields, .. }) = (t, p) {
            for (f, (_, fp)) in a.fields.iter().zip(fields.iter()) {
                for id in &f.field_lists {
                    self.field_lists
                        .entry(*id)
                        .or_default()
                        .extend(fp.scalar_locs());
                }
                self.collect_field_lists(&f.ty, fp);
            }
        }
    }

    /// Elaborate a top-level control bound directly to the global storage.
    pub(super) fn top_control(
        &mut self,
        inst: &Rc<Instance>,
        binds: Vec<Binding>,
        span: Span,
    ) -> PResult<()> {
        let Instance::Control { decl, scope, .. } = &**inst else {
            unreachable!()
        };
        if decl.sig.params.len() != binds.len() {
            return err(
                decl.sig.name.span,
                format!(
                    "control `{}` must have {} parameters for this V1Switch position",
                    decl.sig.name.name,
                    binds.len()
                ),
            );
        }
        let cscope = Scope::child(scope);
        for (p, b) in decl.sig.params.iter().zip(binds) {
            cscope.define(&p.name.name, b);
        }
        self.path = vec![decl.sig.name.name.clone()];
        if let Some(n) = annotation_str(&decl.sig.annos, "name") {
            self.path = vec![n.trim_start_matches('.').to_string()];
        }
        let r = self.control_locals_and_apply(decl, &cscope, span);
        self.path.clear();
        r
    }

    pub(super) fn control_locals_and_apply(
        &mut self,
        decl: &Rc<ast::ControlDecl>,
        cscope: &Rc<Scope>,
        span: Span,
    ) -> PResult<()> {
        let (_, init) = self.capture(|l| {
            for d in &decl.locals {
                l.control_local(cscope, d, decl)?;
            }
            Ok(())
        })?;
        for s in init {
            self.emit(s);
        }
        self.apply_body(decl, cscope, span)
    }

    pub(super) fn control_local(
        &mut self,
        cscope: &Rc<Scope>,
        d: &ast::Decl,
        decl: &ast::ControlDecl,
    ) -> PResult<()> {
        if let ast::Decl::Instantiation(i) = d {
            let _ = decl;
            let inst = self.instantiate(
                cscope,
                &i.ty,
                &i.args,
                &i.name.name,
                &i.annos,
                i.name.span,
                None,
            )?;
            cscope.define(&i.name.name, Binding::Instance(inst));
            return Ok(());
        }
        self.declare(cscope, d, false)
    }

    pub(super) fn apply_body(
        &mut self,
        decl: &ast::ControlDecl,
        cscope: &Rc<Scope>,
        _span: Span,
    ) -> PResult<()> {
        let label = self.label();
        self.returns.push((label, None));
        let r = self.capture(|l| l.block(cscope, &decl.apply));
        self.returns.pop();
        let (_, body) = r?;
        self.emit(ir::Stmt::Block { label, body });
        Ok(())
    }

    /// `c.apply(args)` of a control instance declared inside another control.
    pub fn apply_control(
        &mut self,
        caller: &Rc<Scope>,
        inst: &Rc<Instance>,
        args: &[ast::Argument],
        span: Span,
    ) -> PResult<()> {
        let Instance::Control {
            decl,
            scope,
            name,
            state,
        } = &**inst
        else {
            unreachable!()
        };
        self.enter_inline_ctl(span)?;
        let ordered: Vec<Option<ast::Expr>> = self
            .order_args(&decl.sig.params, args, span)?
            .into_iter()
            .map(|o| o.cloned())
            .collect();
        let first = state.borrow().is_none();
        let saved_path = self.path.clone();
        self.path.push(name.clone());
        if first {
            // decide aliasing: a single static place per directional parameter
            let cscope = Scope::child(scope);
            let mut params = vec![];
            for (p, a) in decl.sig.params.iter().zip(ordered.iter()) {
                let t = self.resolve_type(&cscope, &p.ty)?;
                if p.dir.is_none() && matches!(t, Ty::Extern(..)) {
                    // a parameter of extern type names the caller's instance
                    let inst = self.extern_argument(caller, p, a.as_ref(), &t, span)?;
                    cscope.define(&p.name.name, Binding::Instance(inst));
                    continue;
                }
                let dir = p.dir.unwrap_or(ast::Direction::In);
                let place = self.alloc(&t, &format!("{name}.{}", p.name.name), p.name.span)?;
                let _ = a;
                cscope.define(&p.name.name, Binding::Var(place.clone()));
                params.push((dir, place));
            }
            // locals (tables, actions, instances) once per instance
            let (_, init) = self.capture(|l| {
                for d in &decl.locals {
                    l.control_local(&cscope, d, decl)?;
                }
                Ok(())
            })?;
            *state.borrow_mut() = Some(ControlState {
                scope: cscope.clone(),
                params,
                aliased: false,
            });
            self.copy_in_and_run(caller, decl, &cscope, &ordered, init, span)?;
        } else {
            let cscope = state.borrow().as_ref().unwrap().scope.clone();
            for (p, a) in decl.sig.params.iter().zip(ordered.iter()) {
                if let Some(Binding::Instance(first)) =
                    cscope.names.borrow().get(&p.name.name).cloned()
                {
                    let t = self.resolve_type(&cscope, &p.ty)?;
                    let inst = self.extern_argument(caller, p, a.as_ref(), &t, span)?;
                    if !Rc::ptr_eq(&first, &inst) {
                        return err(a.as_ref().map(|a| a.span).unwrap_or(span), format!("control instance `{name}` is applied with another extern instance for `{}` than at its first apply, which p4sec does not support", p.name.name));
                    }
                }
            }
            self.copy_in_and_run(caller, decl, &cscope, &ordered, vec![], span)?;
        }
        self.path = saved_path;
        self.inline_depth -= 1;
        Ok(())
    }

    /// The extern instance passed for the directionless parameter `p` of extern type `t`.
    fn extern_argument(
        &mut self,
        caller: &Rc<Scope>,
        p: &ast::Param,
        a: Option<&ast::Expr>,
        t: &Ty,
        span: Span,
    ) -> PResult<Rc<Instance>> {
        let Some(a) = a else {
            return err(span, format!("missing argument for `{}`", p.name.name));
        };
        match self.expr(caller, a, None)? {
            Val::Binding(Binding::Instance(i)) if matches!(&*i, Instance::Extern { .. }) => Ok(i),
            _ => err(
                a.span,
                format!(
                    "the argument for `{}` must be an extern instance of type {t}",
                    p.name.name
                ),
            ),
        }
    }

    pub(super) fn enter_inline_ctl(&mut self, span: Span) -> PResult<()> {
        self.inline_depth += 1;
        if self.inline_depth > 64 {
            return err(span, "control applications nest too deeply");
        }
        Ok(())
    }

    pub(super) fn copy_in_and_run(
        &mut self,
        caller: &Rc<Scope>,
        decl: &Rc<ast::ControlDecl>,
        cscope: &Rc<Scope>,
        ordered: &[Option<ast::Expr>],
        init: Vec<ir::Stmt>,
        span: Span,
    ) -> PResult<()> {
        let mut outs = vec![];
        for (p, a) in decl.sig.params.iter().zip(ordered.iter()) {
            let Some(Binding::Var(local)) = cscope.names.borrow().get(&p.name.name).cloned() else {
                continue;
            };
            let Some(a) = a else {
                return err(span, format!("missing argument for `{}`", p.name.name));
            };
            match p.dir {
                Some(ast::Direction::Out) | Some(ast::Direction::InOut) => {
                    let target = self.place(caller, a)?;
                    if p.dir == Some(ast::Direction::InOut) {
                        self.assign(&local, Val::Place(target.clone()), a.span)?;
                    } else {
                        self.uninit(&local);
                    }
                    outs.push((target, local));
                }
                _ => {
                    let v = self.expr(caller, a, Some(&local.ty()))?;
                    self.assign(&local, v, a.span)?;
                }
            }
        }
        for s in init {
            self.emit(s);
        }
        let (_, mut body) = self.capture(|l| l.apply_body(decl, cscope, span))?;
        let (_, epilogue) = self.capture(|l| {
            for (target, local) in outs {
                l.assign(&target, Val::Place(local), span)?;
            }
            Ok(())
        })?;
        // `exit` in the applied control still copies its out/inout parameters back
        super::stmt::exit_with(&mut body, &epilogue);
        for st in body.into_iter().chain(epilogue) {
            self.emit(st);
        }
        Ok(())
    }
}
