//! Lowering declarations: each top-level or local declaration (constants, types, errors, match
//! kinds, actions, functions, extern, parser and control types, instantiations, value sets) entered
//! in its scope, and the globals every program starts with.

use super::annotations::*;
use super::env::*;
use super::lowerer::{err, Lowerer};
use crate::ast::{self, Span};
use crate::diag::PResult;
use crate::semantic_types::*;
use num_bigint::BigInt;
use num_traits::ToPrimitive;
use p4sec_ir as ir;
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
                        if a.kind == ast::AggregateKind::Header && !ty.fits_in_header() {
                            return err(
                                f.name.span,
                                format!("header field `{}` cannot have type {ty}", f.name.name),
                            );
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
                    if !self.errors.contains(&i.name) {
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
}
