//! Top-level declarations, the v1model package, parser and control instances, tables and instantiations.

use super::*;
use crate::ast::ExprKind;
use num_bigint::BigInt;
use num_traits::ToPrimitive;
use std::cell::RefCell;

fn err<T>(span: Span, msg: impl Into<String>) -> PResult<T> {
    Err(Diagnostic::new(span, msg))
}

/// The lowered v1model pipeline blocks.
pub struct Pipeline {
    pub parser: ir::Parser,
    pub blocks: Vec<ir::Control>,
}

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

    /// Declare one declaration in `scope`. At top level, instantiations other than `main` are created now.
    pub fn declare(&mut self, scope: &Rc<Scope>, d: &ast::Decl, top: bool) -> PResult<()> {
        match d {
            ast::Decl::Const(c) => {
                let t = self.resolve_type(scope, &c.ty)?;
                let v = self.expr(scope, &c.value, Some(&t))?;
                let v = self.convert(v, &t, c.value.span)?;
                let v = match v {
                    Val::List(_) | Val::Struct(..) => self.materialize_const(v, &t, c.value.span)?,
                    other => other,
                };
                scope.define(&c.name.name, Binding::Value(Box::new(v)));
            }
            ast::Decl::Var(v) => {
                let t = self.resolve_type(scope, &v.ty)?;
                let p = self.alloc(&t, &v.name.name, v.name.span)?;
                if let Some(init) = &v.init {
                    let val = self.expr(scope, init, Some(&t))?;
                    self.assign(&p, val, init.span)?;
                } else {
                    self.uninit(&p);
                }
                scope.define(&v.name.name, Binding::Var(p));
            }
            ast::Decl::Aggregate(a) => {
                if !a.type_params.is_empty() {
                    scope.define(&a.name.name, Binding::GenericAgg(Rc::new(a.clone())));
                } else {
                    let mut fields = vec![];
                    for f in &a.fields {
                        let ty = self.resolve_type(scope, &f.ty)?;
                        if a.kind == ast::AggregateKind::Header {
                            let ok = matches!(ty, Ty::Bit(_) | Ty::Int(_) | Ty::Varbit(_) | Ty::Bool) || matches!(&ty, Ty::Enum(e) if e.repr.is_some());
                            if !ok {
                                return err(f.name.span, format!("header field `{}` cannot have type {ty}", f.name.name));
                            }
                        }
                        fields.push(FieldInfo {
                            name: f.name.name.clone(),
                            ty,
                            field_lists: annotation_ints(&f.annos, "field_list").unwrap_or_default().into_iter().map(|x| x as u32).collect(),
                            match_kind: super::annotation_ident(&f.annos, "match"),
                            cp_name: annotation_str(&f.annos, "name"),
                        });
                    }
                    let info = AggInfo { name: a.name.name.clone(), kind: a.kind, fields };
                    scope.define(&a.name.name, Binding::Type(Ty::Agg(Rc::new(info))));
                    if let Some(kind) = annotation_str(&a.annos, "controller_header") {
                        let id = self.p4info_id(0x04, &kind);
                        if let Some(Binding::Type(Ty::Agg(ag))) = scope.lookup(&a.name.name) {
                            let fields = ag.fields.iter().enumerate().map(|(i, f)| (f.name.clone(), i as u32 + 1, f.ty.bit_size())).collect();
                            self.controller_headers.push(ir::ControllerHeader { name: kind, id, fields });
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
                        (None, Some(_)) => return err(n.span, "members of a serializable enum need values"),
                        (_, None) => BigInt::from(i),
                    };
                    members.push((n.name.clone(), val));
                }
                let info = EnumInfo { name: e.name.name.clone(), repr, members };
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
                scope.define(&t.name.name, Binding::Type(ty));
            }
            ast::Decl::Extern(e) => match e.name.name.as_str() {
                "packet_in" => scope.define("packet_in", Binding::PacketIn),
                "packet_out" => scope.define("packet_out", Binding::PacketOut),
                _ => scope.define(&e.name.name, Binding::ExternType(Rc::new(ExternInfo { decl: Rc::new(e.clone()) }))),
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
            ast::Decl::Action(a) => scope.define(&a.name.name, Binding::Action(Rc::new(a.clone()), scope.clone())),
            ast::Decl::Parser(p) => scope.define(&p.sig.name.name, Binding::ParserDecl(Rc::new(p.clone()), scope.clone())),
            ast::Decl::Control(c) => scope.define(&c.sig.name.name, Binding::ControlDecl(Rc::new(c.clone()), scope.clone())),
            ast::Decl::BlockType(b) => scope.define(&b.name.name, Binding::BlockType(Rc::new(b.clone()))),
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
                let inst = self.instantiate(scope, &i.ty, &i.args, &i.name.name, &i.annos, i.name.span, None)?;
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
                let id = self.p4info_id(0x03, &name);
                let scalar = |t: &Ty| matches!(t, Ty::Bit(_) | Ty::Int(_) | Ty::Bool) || matches!(t, Ty::Enum(e) if e.repr.is_some());
                let (widths, names, kinds) = match &t {
                    Ty::Agg(a) if a.kind == ast::AggregateKind::Struct => {
                        let mut kinds = vec![];
                        for f in &a.fields {
                            if !scalar(&f.ty) {
                                return err(
                                    v.name.span,
                                    format!(
                                        "value set `{}`: struct field `{}` must be bit<W>, int<W>, bool or a serializable enum, not {}",
                                        v.name.name, f.name, f.ty
                                    ),
                                );
                            }
                            kinds.push(match f.match_kind.as_deref() {
                                None | Some("exact") => ir::MatchKind::Exact,
                                Some("ternary") => ir::MatchKind::Ternary,
                                Some("lpm") => ir::MatchKind::Lpm,
                                Some("range") => ir::MatchKind::Range,
                                Some("optional") => ir::MatchKind::Optional,
                                Some(k) => return err(v.name.span, format!("value set `{}`: field `{}` has an unknown match kind `{k}`", v.name.name, f.name)),
                            });
                        }
                        let names = a.fields.iter().map(|f| f.cp_name.clone().unwrap_or_else(|| f.name.clone())).collect();
                        (a.fields.iter().map(|f| f.ty.bit_size()).collect::<Vec<u32>>(), names, kinds)
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
                    return err(v.name.span, format!("value set `{}` has no elements", v.name.name));
                }
                self.value_sets.push(ir::ValueSet { name, id, size, widths, names, kinds });
                scope.define(&v.name.name, Binding::ValueSet(self.value_sets.len() as u32 - 1, t));
            }
        }
        Ok(())
    }

    fn materialize_const(&mut self, v: Val, t: &Ty, span: Span) -> PResult<Val> {
        // aggregate constants live in slots initialized at the start of each block that uses them; since
        // the value never changes, initializing them once in the global statement buffer is enough
        let p = self.alloc(t, "const", span)?;
        self.assign(&p, v, span)?;
        Ok(Val::Place(p))
    }

    fn type_base(&self, scope: &Rc<Scope>, t: &ast::Type) -> Option<Binding> {
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
        let base = self.type_base(scope, ty).ok_or_else(|| Diagnostic::new(ty.span, "unknown type in instantiation"))?;
        let targs: Vec<Ty> = match &ty.kind {
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
                Some(Val::Const(c, _)) => c.to_u64().ok_or_else(|| Diagnostic::new(span, "constructor argument out of range")),
                _ => err(span, format!("constructor argument {} must be a constant", i + 1)),
            }
        };
        let cp = self.cp_name(annos, name);
        Ok(Rc::new(match base {
            Binding::ExternType(info) => {
                let tname = info.decl.name.name.clone();
                let (kind, id) = match tname.as_str() {
                    "register" => {
                        let w =
                            targs.first().and_then(|t| t.scalar_width()).ok_or_else(|| Diagnostic::new(ty.span, "register needs a bit-string element type"))?;
                        let id = self.p4info_id(0x16, &cp);
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
                            let id = self.p4info_id(0x12, &cp);
                            self.counters.push(ir::Counter { name: cp.clone(), id, size: cint(0)? as u32, unit, table: None });
                            (ExternKind::Counter, self.counters.len() - 1)
                        } else {
                            let id = self.p4info_id(0x14, &cp);
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
                        let id = self.p4info_id(0x13, &cp);
                        self.direct_counters.push(ir::Counter { name: cp.clone(), id, size: 0, unit, table: None });
                        (ExternKind::DirectCounter, self.direct_counters.len() - 1)
                    }
                    "direct_meter" => {
                        let unit = if cint(0)? == 1 { ir::CounterUnit::Bytes } else { ir::CounterUnit::Packets };
                        let id = self.p4info_id(0x15, &cp);
                        self.direct_meters.push(ir::Meter { name: cp.clone(), id, size: 0, unit, table: None });
                        (ExternKind::DirectMeter, self.direct_meters.len() - 1)
                    }
                    "action_profile" | "action_selector" => {
                        let id = self.p4info_id(0x11, &cp);
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
            _ => return err(ty.span, "this type cannot be instantiated"),
        }))
    }

    fn ctor_arg(&mut self, scope: &Rc<Scope>, e: &ast::Expr) -> PResult<Val> {
        match &e.kind {
            // nested instantiation `Type(args)` as a constructor argument
            ExprKind::Call { callee, type_args, args } => {
                if let ExprKind::Name(n) = &callee.kind {
                    if matches!(scope.lookup(&n.name), Some(Binding::ExternType(_)) | Some(Binding::ControlDecl(..)) | Some(Binding::ParserDecl(..))) {
                        let ty = if type_args.is_empty() {
                            ast::Type { kind: ast::TypeKind::Named { name: n.clone(), dot: false }, span: callee.span }
                        } else {
                            ast::Type { kind: ast::TypeKind::Specialized { base: n.clone(), args: type_args.clone() }, span: callee.span }
                        };
                        let inst = self.instantiate(scope, &ty, args, &n.name, &vec![], e.span, None)?;
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
                let inst = self.instantiate(scope, ty, args, &name, &vec![], e.span, None)?;
                Ok(Val::Binding(Binding::Instance(inst)))
            }
            _ => self.expr(scope, e, None),
        }
    }

    fn bind_ctor(&mut self, scope: &Rc<Scope>, params: &[ast::Param], vals: Vec<Val>, span: Span) -> PResult<()> {
        if vals.len() > params.len() {
            return err(span, format!("{} constructor arguments given, {} expected", vals.len(), params.len()));
        }
        let mut vals = vals.into_iter();
        for p in params {
            let v = match vals.next() {
                Some(v) => v,
                None => match &p.default {
                    Some(d) => self.expr(scope, d, None)?,
                    None => return err(span, format!("missing constructor argument `{}`", p.name.name)),
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
            .ok_or_else(|| Diagnostic::new(Span::default(), "the program has no `main` package instantiation"))?;
        let g = self.global.clone();
        let pkg = match self.type_base(&g, &main.ty) {
            Some(Binding::BlockType(b)) if b.kind == ast::BlockKind::Package => b,
            _ => return err(main.ty.span, "`main` must instantiate a package (V1Switch)"),
        };
        if pkg.name.name != "V1Switch" {
            return err(main.ty.span, format!("p4sec runs the v1model architecture (V1Switch); `{}` is not supported", pkg.name.name));
        }
        if main.args.len() != 6 {
            return err(main.name.span, format!("V1Switch takes 6 blocks, {} given", main.args.len()));
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
            return err(main.args[0].value.span, "the first V1Switch argument must be a parser");
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
        let binds = vec![Binding::PacketIn, Binding::Var(hdr.clone()), Binding::Var(meta.clone()), Binding::Var(std.clone())];
        let entry = self.lower_parser_instance(&insts[0], binds, pnext, global_init, main.args[0].value.span)?;
        let parser = ir::Parser { name: pdecl.sig.name.name.clone(), states: std::mem::take(&mut self.pstates), start: entry };

        let sigs: [(usize, Vec<Binding>); 5] = [
            (1, vec![Binding::Var(hdr.clone()), Binding::Var(meta.clone())]),
            (2, vec![Binding::Var(hdr.clone()), Binding::Var(meta.clone()), Binding::Var(std.clone())]),
            (3, vec![Binding::Var(hdr.clone()), Binding::Var(meta.clone()), Binding::Var(std.clone())]),
            (4, vec![Binding::Var(hdr.clone()), Binding::Var(meta.clone())]),
            (5, vec![Binding::PacketOut, Binding::Var(hdr.clone())]),
        ];
        let mut blocks = vec![];
        for (i, binds) in sigs {
            let Instance::Control { decl, .. } = &*insts[i] else {
                return err(main.args[i].value.span, "expected a control");
            };
            let name = decl.sig.name.name.clone();
            let (_, body) = self.capture(|l| l.top_control(&insts[i], binds, main.args[i].value.span))?;
            blocks.push(ir::Control { name, body });
        }
        self.pipeline = Some(Pipeline { parser, blocks });
        Ok(())
    }

    fn collect_field_lists(&mut self, t: &Ty, p: &Place) {
        if let (Ty::Agg(a), Place::Struct { fields, .. }) = (t, p) {
            for (f, (_, fp)) in a.fields.iter().zip(fields.iter()) {
                for id in &f.field_lists {
                    self.field_lists.entry(*id).or_default().extend(fp.scalar_locs());
                }
                self.collect_field_lists(&f.ty, fp);
            }
        }
    }

    /// Elaborate a top-level control bound directly to the global storage.
    fn top_control(&mut self, inst: &Rc<Instance>, binds: Vec<Binding>, span: Span) -> PResult<()> {
        let Instance::Control { decl, scope, .. } = &**inst else { unreachable!() };
        if decl.sig.params.len() != binds.len() {
            return err(decl.sig.name.span, format!("control `{}` must have {} parameters for this V1Switch position", decl.sig.name.name, binds.len()));
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

    fn control_locals_and_apply(&mut self, decl: &Rc<ast::ControlDecl>, cscope: &Rc<Scope>, span: Span) -> PResult<()> {
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

    fn control_local(&mut self, cscope: &Rc<Scope>, d: &ast::Decl, decl: &ast::ControlDecl) -> PResult<()> {
        if let ast::Decl::Instantiation(i) = d {
            let _ = decl;
            let inst = self.instantiate(cscope, &i.ty, &i.args, &i.name.name, &i.annos, i.name.span, None)?;
            cscope.define(&i.name.name, Binding::Instance(inst));
            return Ok(());
        }
        self.declare(cscope, d, false)
    }

    fn apply_body(&mut self, decl: &ast::ControlDecl, cscope: &Rc<Scope>, _span: Span) -> PResult<()> {
        let label = self.label();
        self.returns.push((label, None));
        let r = self.capture(|l| l.block(cscope, &decl.apply));
        self.returns.pop();
        let (_, body) = r?;
        self.emit(ir::Stmt::Block { label, body });
        Ok(())
    }

    /// `c.apply(args)` of a control instance declared inside another control.
    pub fn apply_control(&mut self, caller: &Rc<Scope>, inst: &Rc<Instance>, args: &[ast::Argument], span: Span) -> PResult<()> {
        let Instance::Control { decl, scope, name, state } = &**inst else { unreachable!() };
        self.enter_inline_ctl(span)?;
        let ordered: Vec<Option<ast::Expr>> = self.order_args(&decl.sig.params, args, span)?.into_iter().map(|o| o.cloned()).collect();
        let first = state.borrow().is_none();
        let saved_path = self.path.clone();
        self.path.push(name.clone());
        if first {
            // decide aliasing: a single static place per directional parameter
            let cscope = Scope::child(scope);
            let mut params = vec![];
            for (p, a) in decl.sig.params.iter().zip(ordered.iter()) {
                let t = self.resolve_type(&cscope, &p.ty)?;
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
            *state.borrow_mut() = Some(ControlState { scope: cscope.clone(), params, aliased: false });
            self.copy_in_and_run(caller, decl, &cscope, &ordered, init, span)?;
        } else {
            let cscope = state.borrow().as_ref().unwrap().scope.clone();
            self.copy_in_and_run(caller, decl, &cscope, &ordered, vec![], span)?;
        }
        self.path = saved_path;
        self.inline_depth -= 1;
        Ok(())
    }

    fn enter_inline_ctl(&mut self, span: Span) -> PResult<()> {
        self.inline_depth += 1;
        if self.inline_depth > 64 {
            return err(span, "control applications nest too deeply");
        }
        Ok(())
    }

    fn copy_in_and_run(
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
            let Some(Binding::Var(local)) = cscope.names.borrow().get(&p.name.name).cloned() else { continue };
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

    // ---------------------------------------------------------------- parsers

    /// Lower a parser instance into `self.pstates`; returns its entry state. `binds` are the parameter bindings.
    fn lower_parser_instance(&mut self, inst: &Rc<Instance>, binds: Vec<Binding>, accept: ir::Next, init: Vec<ir::Stmt>, span: Span) -> PResult<u32> {
        let Instance::Parser { decl, scope, name } = &**inst else {
            return err(span, "expected a parser instance");
        };
        self.enter_inline_ctl(span)?;
        let pscope = Scope::child(scope);
        if decl.sig.params.len() != binds.len() {
            return err(span, format!("parser `{}` takes {} arguments, {} given", decl.sig.name.name, decl.sig.params.len(), binds.len()));
        }
        for (p, b) in decl.sig.params.iter().zip(binds) {
            pscope.define(&p.name.name, b);
        }
        // reserve states
        let mut index = HashMap::new();
        for s in &decl.states {
            let i = self.pstates.len() as u32;
            self.pstates.push(ir::ParserState { name: format!("{name}.{}", s.name.name), body: vec![], transition: ir::Transition::Goto(ir::Next::Reject) });
            if index.insert(s.name.name.clone(), i).is_some() {
                return err(s.name.span, format!("state `{}` is declared twice", s.name.name));
            }
        }
        let Some(&start) = index.get("start") else {
            return err(decl.sig.name.span, format!("parser `{}` has no `start` state", decl.sig.name.name));
        };
        let entry = self.pstates.len() as u32;
        self.pstates.push(ir::ParserState { name: format!("{name}.$entry"), body: vec![], transition: ir::Transition::Goto(ir::Next::State(start)) });
        let (_, mut locals) = self.capture(|l| {
            for d in &decl.locals {
                if let ast::Decl::Instantiation(i) = d {
                    let inst = l.instantiate(&pscope, &i.ty, &i.args, &i.name.name, &i.annos, i.name.span, None)?;
                    pscope.define(&i.name.name, Binding::Instance(inst));
                } else {
                    l.declare(&pscope, d, false)?;
                }
            }
            Ok(())
        })?;
        let mut body = init;
        body.append(&mut locals);
        self.pstates[entry as usize].body = body;
        for s in &decl.states {
            self.lower_state(&pscope, s, &index, &accept)?;
        }
        self.inline_depth -= 1;
        Ok(entry)
    }

    fn lower_state(&mut self, pscope: &Rc<Scope>, s: &ast::ParserState, index: &HashMap<String, u32>, accept: &ir::Next) -> PResult<()> {
        let sscope = Scope::child(pscope);
        let mut cur = index[&s.name.name];
        self.out.push(vec![]);
        let mut k = 0;
        for st in &s.body {
            if let Some((inst, args)) = self.subparser_call(&sscope, st) {
                // split the state around the sub-parser
                k += 1;
                let cont = self.pstates.len() as u32;
                self.pstates.push(ir::ParserState {
                    name: format!("{}.$cont{k}", self.pstates[cur as usize].name),
                    body: vec![],
                    transition: ir::Transition::Goto(ir::Next::Reject),
                });
                let Instance::Parser { decl, .. } = &*inst else { unreachable!() };
                let ordered: Vec<Option<ast::Expr>> = self.order_args(&decl.sig.params, &args, st.span)?.into_iter().map(|o| o.cloned()).collect();
                let mut binds = vec![];
                let mut outs = vec![];
                let mut init = vec![];
                for (p, a) in decl.sig.params.iter().zip(ordered.iter()) {
                    let a = a.as_ref().ok_or_else(|| Diagnostic::new(st.span, format!("missing argument for `{}`", p.name.name)))?;
                    match self.expr(&sscope, a, None)? {
                        Val::Binding(b @ (Binding::PacketIn | Binding::PacketOut)) => binds.push(b),
                        Val::Place(place) if place.is_static() => {
                            if p.dir == Some(ast::Direction::Out) {
                                let (_, mut s) = self.capture(|l| {
                                    l.uninit(&place);
                                    Ok(())
                                })?;
                                init.append(&mut s);
                            }
                            binds.push(Binding::Var(place));
                        }
                        v => {
                            let t = v.ty().ok_or_else(|| Diagnostic::new(a.span, "unsupported sub-parser argument"))?;
                            let local = self.alloc(&t, &p.name.name, a.span)?;
                            let (_, mut s) = self.capture(|l| l.assign(&local, v, a.span))?;
                            init.append(&mut s);
                            if let Val::Place(target) = self.expr(&sscope, a, None)? {
                                outs.push((target, local.clone()));
                            }
                            binds.push(Binding::Var(local));
                        }
                    }
                }
                let sub_entry = self.lower_parser_instance(&inst, binds, ir::Next::State(cont), init, st.span)?;
                let body = self.out.pop().unwrap_or_default();
                self.pstates[cur as usize].body = body;
                self.pstates[cur as usize].transition = ir::Transition::Goto(ir::Next::State(sub_entry));
                cur = cont;
                self.out.push(vec![]);
                for (target, local) in outs {
                    self.assign(&target, Val::Place(local), st.span)?;
                }
                continue;
            }
            if let ast::StmtKind::Exit = st.kind {
                self.out.pop();
                return err(st.span, "`exit` is not allowed in a parser");
            }
            if let Err(e) = self.stmt(&sscope, st) {
                self.out.pop();
                return Err(e);
            }
        }
        let tr = match &s.transition {
            None => Ok(ir::Transition::Goto(ir::Next::Reject)),
            Some(t) => self.transition(&sscope, t, index, accept),
        };
        let body = self.out.pop().unwrap_or_default();
        let tr = tr?;
        self.pstates[cur as usize].body = body;
        self.pstates[cur as usize].transition = tr;
        Ok(())
    }

    fn subparser_call(&mut self, scope: &Rc<Scope>, st: &ast::Stmt) -> Option<(Rc<Instance>, Vec<ast::Argument>)> {
        let ast::StmtKind::Call(e) = &st.kind else { return None };
        let ExprKind::Call { callee, args, .. } = &e.kind else { return None };
        let ExprKind::Member(base, m) = &callee.kind else { return None };
        if m.name != "apply" {
            return None;
        }
        let ExprKind::Name(n) = &base.kind else { return None };
        match scope.lookup(&n.name) {
            Some(Binding::Instance(i)) if matches!(&*i, Instance::Parser { .. }) => Some((i, args.clone())),
            _ => None,
        }
    }

    fn next_of(&self, id: &ast::Ident, index: &HashMap<String, u32>, accept: &ir::Next) -> PResult<ir::Next> {
        match id.name.as_str() {
            "accept" => Ok(accept.clone()),
            "reject" => Ok(ir::Next::Reject),
            n => index.get(n).map(|i| ir::Next::State(*i)).ok_or_else(|| Diagnostic::new(id.span, format!("no state named `{n}`"))),
        }
    }

    fn transition(&mut self, scope: &Rc<Scope>, t: &ast::Transition, index: &HashMap<String, u32>, accept: &ir::Next) -> PResult<ir::Transition> {
        match t {
            ast::Transition::Direct(id) => Ok(ir::Transition::Goto(self.next_of(id, index, accept)?)),
            ast::Transition::Select { exprs, cases, .. } => {
                let mut keys = vec![];
                let mut ktys = vec![];
                for e in exprs {
                    let v = self.expr(scope, e, None)?;
                    // a struct/tuple key expands into its fields
                    match v {
                        Val::Place(p) if !matches!(p, Place::Scalar(..)) => {
                            let mut parts = vec![];
                            self.flatten_place(&p, &mut parts);
                            for x in parts {
                                ktys.push(Ty::Bit(x.width()));
                                keys.push(x);
                            }
                        }
                        Val::List(vs) => {
                            for v in vs {
                                let (x, t) = self.rvalue(v, None, e.span)?;
                                keys.push(x);
                                ktys.push(t);
                            }
                        }
                        v => {
                            let (x, t) = self.rvalue(v, None, e.span)?;
                            keys.push(x);
                            ktys.push(t);
                        }
                    }
                }
                let mut out = vec![];
                for c in cases {
                    let next = self.next_of(&c.next, index, accept)?;
                    // a value set of a struct or tuple type is the whole keyset of a select with as many keys
                    if let ExprKind::Name(n) = &c.keyset.kind {
                        if let Some(Binding::ValueSet(id, _)) = scope.lookup(&n.name) {
                            let vs = &self.value_sets[id as usize];
                            if vs.widths.len() > 1 || keys.len() > 1 {
                                if vs.widths.len() != keys.len() {
                                    return err(
                                        c.keyset.span,
                                        format!("value set `{}` has {} elements, select has {} keys", n.name, vs.widths.len(), keys.len()),
                                    );
                                }
                                for (i, (w, t)) in vs.widths.iter().zip(ktys.iter()).enumerate() {
                                    if t.bit_size() != *w {
                                        return err(
                                            c.keyset.span,
                                            format!("value set `{}`: element {} has {w} bits, select key {} has {}", n.name, i + 1, i + 1, t.bit_size()),
                                        );
                                    }
                                }
                                let mut ms = vec![ir::KeyMatch::ValueSet(id)];
                                ms.resize(keys.len(), ir::KeyMatch::Any);
                                out.push((ms, next));
                                continue;
                            }
                        }
                    }
                    let elems: Vec<&ast::Expr> = match &c.keyset.kind {
                        ExprKind::List(items) if keys.len() > 1 || items.len() > 1 => items.iter().collect(),
                        ExprKind::Default | ExprKind::DontCare => {
                            out.push((vec![ir::KeyMatch::Any; keys.len()], next));
                            continue;
                        }
                        _ => vec![&c.keyset],
                    };
                    if elems.len() != keys.len() {
                        return err(c.keyset.span, format!("keyset has {} elements, select has {} keys", elems.len(), keys.len()));
                    }
                    let mut ms = vec![];
                    for (k, (e, t)) in elems.iter().zip(ktys.iter()).enumerate() {
                        let _ = k;
                        ms.push(self.key_match(scope, e, t)?);
                    }
                    out.push((ms, next));
                }
                Ok(ir::Transition::Select { keys, cases: out })
            }
        }
    }

    fn const_of(&mut self, scope: &Rc<Scope>, e: &ast::Expr, t: &Ty) -> PResult<ir::Value> {
        let w = t.scalar_width().unwrap_or(32);
        match self.expr(scope, e, Some(t))? {
            Val::Const(c, _) => Ok(to_value(&c, w)),
            _ => err(e.span, "keyset elements must be compile-time constants"),
        }
    }

    fn key_match(&mut self, scope: &Rc<Scope>, e: &ast::Expr, t: &Ty) -> PResult<ir::KeyMatch> {
        Ok(match &e.kind {
            ExprKind::Default | ExprKind::DontCare => ir::KeyMatch::Any,
            ExprKind::Mask(v, m) => ir::KeyMatch::Mask { value: self.const_of(scope, v, t)?, mask: self.const_of(scope, m, t)? },
            ExprKind::Range(lo, hi) => ir::KeyMatch::Range { lo: self.const_of(scope, lo, t)?, hi: self.const_of(scope, hi, t)? },
            ExprKind::Name(n) if matches!(scope.lookup(&n.name), Some(Binding::ValueSet(..))) => {
                let Some(Binding::ValueSet(id, _)) = scope.lookup(&n.name) else { unreachable!() };
                let vs = &self.value_sets[id as usize];
                if vs.widths.len() != 1 {
                    return err(
                        e.span,
                        format!("value set `{}` has {} elements: it must be the whole keyset of a select with as many keys", n.name, vs.widths.len()),
                    );
                }
                ir::KeyMatch::ValueSet(id)
            }
            _ => ir::KeyMatch::Exact(self.const_of(scope, e, t)?),
        })
    }

    // ---------------------------------------------------------------- tables and actions

    /// Lower an action for use by a table (params become control-plane data).
    pub fn table_action(&mut self, decl: &Rc<ast::ActionDecl>, ascope: &Rc<Scope>, span: Span) -> PResult<u32> {
        self.table_action_bound(decl, ascope, None, &[], span)
    }

    /// Lower an action for a table. Directional parameters are bound to `bound` (evaluated in `caller`) with
    /// copy-in/copy-out around the body; the remaining directionless parameters are control-plane data.
    pub fn table_action_bound(
        &mut self,
        decl: &Rc<ast::ActionDecl>,
        ascope: &Rc<Scope>,
        caller: Option<&Rc<Scope>>,
        bound: &[ast::Argument],
        span: Span,
    ) -> PResult<u32> {
        let key = (Rc::as_ptr(decl) as usize, ascope.id());
        if bound.is_empty() {
            if let Some(i) = self.action_cache.get(&key) {
                return Ok(*i);
            }
        }
        let is_global = ascope.parent.is_none();
        let name = if is_global {
            match annotation_str(&decl.annos, "name") {
                Some(n) => n.trim_start_matches('.').to_string(),
                None => decl.name.name.clone(),
            }
        } else {
            self.cp_name(&decl.annos, &decl.name.name)
        };
        let id = self.p4info_id(0x01, &name);
        let inner = Scope::child(ascope);
        let mut params = vec![];
        let ndir = decl.params.iter().take_while(|p| p.dir.is_some()).count();
        if bound.len() != ndir {
            return err(span, format!("action `{}` needs {ndir} bound argument(s) for its directional parameters, {} given", decl.name.name, bound.len()));
        }
        let (copy_out, prologue) = if ndir > 0 {
            let caller = caller.cloned().unwrap_or_else(|| ascope.clone());
            self.capture(|l| l.bind_params_pub(&caller, &inner, &decl.params[..ndir], bound, span))?
        } else {
            (vec![], vec![])
        };
        for (i, p) in decl.params.iter().enumerate().skip(ndir) {
            if p.dir.is_some() {
                return err(p.name.span, format!("directional parameter `{}` must come before the directionless ones", p.name.name));
            }
            let t = self.resolve_type(ascope, &p.ty)?;
            let place = self.alloc(&t, &p.name.name, p.name.span)?;
            let Place::Scalar(ir::LValue::Static(loc), _) = &place else {
                return err(p.name.span, "action data parameters must be bit-strings, bools or serializable enums");
            };
            params.push(ir::Param { name: p.name.name.clone(), id: (i - ndir) as u32 + 1, loc: *loc });
            inner.define(&p.name.name, Binding::Var(place));
        }
        let label = self.label();
        self.returns.push((label, None));
        let saved = self.inline_depth;
        let r = self.capture(|l| l.block(&inner, &decl.body));
        self.inline_depth = saved;
        self.returns.pop();
        let (_, mut body) = r?;
        let mut all = prologue;
        let (_, mut epilogue) = self.capture(|l| l.copy_out_pub(copy_out, span))?;
        super::stmt::exit_with(&mut body, &epilogue);
        all.push(ir::Stmt::Block { label, body });
        all.append(&mut epilogue);
        self.actions.push(ir::Action { name, id, params, body: all });
        let idx = self.actions.len() as u32 - 1;
        if bound.is_empty() {
            self.action_cache.insert(key, idx);
        }
        Ok(idx)
    }

    fn action_ref(&mut self, scope: &Rc<Scope>, e: &ast::Expr) -> PResult<(String, u32, Vec<ast::Argument>, Rc<ast::ActionDecl>)> {
        let (callee, args) = match &e.kind {
            ExprKind::Call { callee, args, .. } => (&**callee, args.clone()),
            _ => (e, vec![]),
        };
        let (name, b) = match &callee.kind {
            ExprKind::Name(n) => (n.name.clone(), scope.lookup(&n.name)),
            ExprKind::DotName(n) => (n.name.clone(), scope.root_of().lookup(&n.name)),
            _ => return err(e.span, "expected an action name"),
        };
        match b {
            Some(Binding::Action(decl, ascope)) => {
                let ndir = decl.params.iter().take_while(|p| p.dir.is_some()).count();
                let bound: Vec<ast::Argument> = args.iter().take(ndir).cloned().collect();
                let idx = self.table_action_bound(&decl, &ascope, Some(scope), &bound, e.span)?;
                Ok((name, idx, args, decl))
            }
            _ => err(callee.span, format!("`{name}` is not an action")),
        }
    }

    fn action_call(&mut self, scope: &Rc<Scope>, e: &ast::Expr, table: &ir::Table, names: &[(String, u32)]) -> PResult<ir::ActionCall> {
        let (callee, args) = match &e.kind {
            ExprKind::Call { callee, args, .. } => (&**callee, args.clone()),
            _ => (e, vec![]),
        };
        let name = match &callee.kind {
            ExprKind::Name(n) | ExprKind::DotName(n) => n.name.clone(),
            _ => return err(e.span, "expected an action name"),
        };
        let Some(&(_, idx)) = names.iter().find(|(n, _)| *n == name) else {
            return err(e.span, format!("action `{name}` is not in the actions of table `{}`", table.name));
        };
        let decl = match scope.lookup(&name).or_else(|| scope.root_of().lookup(&name)) {
            Some(Binding::Action(d, _)) => d,
            _ => return err(callee.span, format!("`{name}` is not an action")),
        };
        let ndir = decl.params.iter().take_while(|p| p.dir.is_some()).count();
        let n = decl.params.len();
        if args.len() != n {
            return err(e.span, format!("action `{name}` takes {n} arguments, {} given", args.len()));
        }
        let mut vals = vec![];
        for (p, a) in self.actions[idx as usize].params.clone().iter().zip(args.iter().skip(ndir)) {
            let t = self.resolve_type(scope, &decl.params[ndir + (p.id - 1) as usize].ty)?;
            match self.expr(scope, &a.value, Some(&t))? {
                Val::Const(c, _) => vals.push(to_value(&c, p.loc.width)),
                _ => return err(a.value.span, "action arguments in a table must be compile-time constants"),
            }
        }
        Ok(ir::ActionCall { action: idx, args: vals })
    }

    pub fn lower_table(&mut self, scope: &Rc<Scope>, t: &ast::TableDecl) -> PResult<Rc<TableInfo>> {
        let name = self.cp_name(&t.annos, &t.name.name);
        let id = self.p4info_id(0x02, &name);
        let mut table = ir::Table {
            name: name.clone(),
            id,
            keys: vec![],
            actions: vec![],
            default_action: ir::ActionCall { action: 0, args: vec![] },
            default_is_const: false,
            entries: vec![],
            entries_are_const: false,
            size: 1024,
            implementation: ir::Implementation::None,
            direct_counter: None,
            direct_meter: None,
            support_timeout: false,
        };
        let mut names = vec![];
        let mut default_expr = None;
        let mut entries = None;
        for p in &t.props {
            match p {
                ast::TableProp::Key { elements, .. } => {
                    for (i, k) in elements.iter().enumerate() {
                        let (v, pre) = self.capture(|l| l.expr(scope, &k.expr, None))?;
                        if !pre.is_empty() {
                            return err(k.expr.span, "table keys cannot have side effects");
                        }
                        let (x, kt) = self.rvalue(v, None, k.expr.span)?;
                        let kind = match k.match_kind.name.as_str() {
                            "exact" => ir::MatchKind::Exact,
                            "ternary" => ir::MatchKind::Ternary,
                            "lpm" => ir::MatchKind::Lpm,
                            "range" => ir::MatchKind::Range,
                            "optional" => ir::MatchKind::Optional,
                            "selector" => ir::MatchKind::Selector,
                            other => return err(k.match_kind.span, format!("unknown match kind `{other}`")),
                        };
                        let kname = annotation_str(&k.annos, "name").unwrap_or_else(|| self.source_text(k.expr.span));
                        let width = x.width();
                        let _ = kt;
                        table.keys.push(ir::TableKey { name: kname, id: i as u32 + 1, expr: x, kind, width });
                    }
                }
                ast::TableProp::Actions { actions, .. } => {
                    for a in actions {
                        let (aname, idx, args, decl) = self.action_ref(scope, &a.expr)?;
                        let ndir = decl.params.iter().take_while(|p| p.dir.is_some()).count();
                        if args.len() > ndir {
                            return err(a.expr.span, "binding control-plane parameters in the actions list is not supported");
                        }
                        table.actions.push(ir::TableAction {
                            action: idx,
                            default_only: has_annotation(&a.annos, "defaultonly"),
                            table_only: has_annotation(&a.annos, "tableonly"),
                        });
                        names.push((aname, idx));
                    }
                }
                ast::TableProp::DefaultAction { is_const, action, .. } => {
                    default_expr = Some(action.clone());
                    table.default_is_const = *is_const;
                }
                ast::TableProp::Entries { is_const, entries: es, .. } => {
                    entries = Some(es.clone());
                    table.entries_are_const = *is_const;
                }
                ast::TableProp::Other { name: pn, value, .. } => match pn.name.as_str() {
                    "size" => table.size = self.const_width(scope, value)?,
                    "support_timeout" => {
                        table.support_timeout = match &value.kind {
                            ExprKind::Bool(b) => *b,
                            _ => return err(value.span, "support_timeout must be true or false"),
                        }
                    }
                    "implementation" => {
                        let inst = self.table_extern(scope, value)?;
                        match &*inst {
                            Instance::Extern { kind: ExternKind::ActionProfile, id, .. } => table.implementation = ir::Implementation::ActionProfile(*id),
                            Instance::Extern { kind: ExternKind::ActionSelector, id, .. } => table.implementation = ir::Implementation::ActionSelector(*id),
                            _ => return err(value.span, "implementation must be an action_profile or action_selector"),
                        }
                    }
                    "counters" => match &*self.table_extern(scope, value)? {
                        Instance::Extern { kind: ExternKind::DirectCounter, id, .. } => table.direct_counter = Some(*id),
                        _ => return err(value.span, "counters must be a direct_counter"),
                    },
                    "meters" => match &*self.table_extern(scope, value)? {
                        Instance::Extern { kind: ExternKind::DirectMeter, id, .. } => table.direct_meter = Some(*id),
                        _ => return err(value.span, "meters must be a direct_meter"),
                    },
                    _ => {}
                },
            }
        }
        let tidx = self.tables.len() as u32;
        // default action
        table.default_action = match &default_expr {
            Some(e) => self.action_call(scope, e, &table, &names)?,
            None => {
                let na = self.no_action_index(t.name.span)?;
                if !table.actions.iter().any(|a| a.action == na) {
                    // the reference compiler adds the implicit default NoAction as a default-only action
                    table.actions.push(ir::TableAction { action: na, default_only: true, table_only: false });
                    names.push(("NoAction".to_string(), na));
                }
                ir::ActionCall { action: na, args: vec![] }
            }
        };
        if let Some(es) = entries {
            let n = es.len() as i32;
            for (i, e) in es.iter().enumerate() {
                let keys: Vec<&ast::Expr> = match &e.keyset.kind {
                    ExprKind::List(items) if table.keys.len() != 1 || items.len() != 1 => items.iter().collect(),
                    _ => vec![&e.keyset],
                };
                if keys.len() != table.keys.len() {
                    return err(e.keyset.span, format!("entry has {} keys, table `{name}` has {}", keys.len(), table.keys.len()));
                }
                let mut matches = vec![];
                for (k, ke) in table.keys.clone().iter().zip(keys) {
                    matches.push(self.entry_match(scope, ke, k)?);
                }
                let action = self.action_call(scope, &e.action, &table, &names)?;
                let priority = if let Some(p) = annotation_ints(&e.annos, "priority").and_then(|v| v.first().copied()) {
                    -(p as i32)
                } else if let Some(p) = &e.priority {
                    self.const_int(scope, p)?.to_i32().unwrap_or(0)
                } else {
                    -(i as i32 + 1).min(n)
                };
                table.entries.push(ir::TableEntry { matches, action, priority });
            }
        }
        if let Some(c) = table.direct_counter {
            self.direct_counters[c as usize].table = Some(tidx);
        }
        if let Some(m) = table.direct_meter {
            self.direct_meters[m as usize].table = Some(tidx);
        }
        if let ir::Implementation::ActionProfile(p) | ir::Implementation::ActionSelector(p) = table.implementation {
            self.action_profiles[p as usize].tables.push(tidx);
        }
        self.tables.push(table);
        Ok(Rc::new(TableInfo { id: tidx, actions: names }))
    }

    fn no_action_index(&mut self, span: Span) -> PResult<u32> {
        if let Some(i) = self.no_action {
            return Ok(i);
        }
        let g = self.global.clone();
        match g.lookup("NoAction") {
            Some(Binding::Action(decl, s)) => {
                let saved = std::mem::take(&mut self.path);
                let r = self.table_action(&decl, &s, span);
                self.path = saved;
                let i = r?;
                self.no_action = Some(i);
                Ok(i)
            }
            _ => err(span, "the table has no default_action and NoAction is not declared (include core.p4)"),
        }
    }

    fn table_extern(&mut self, scope: &Rc<Scope>, value: &ast::Expr) -> PResult<Rc<Instance>> {
        match &value.kind {
            ExprKind::Name(n) => match scope.lookup(&n.name) {
                Some(Binding::Instance(i)) => Ok(i),
                _ => err(value.span, format!("`{}` is not an extern instance", n.name)),
            },
            _ => match self.ctor_arg(scope, value)? {
                Val::Binding(Binding::Instance(i)) => Ok(i),
                _ => err(value.span, "expected an extern instantiation"),
            },
        }
    }

    fn entry_match(&mut self, scope: &Rc<Scope>, e: &ast::Expr, k: &ir::TableKey) -> PResult<ir::FieldMatch> {
        let t = Ty::Bit(k.width);
        let w = k.width;
        let full = || to_value(&((BigInt::from(1) << w) - 1), w);
        Ok(match (&e.kind, k.kind) {
            (ExprKind::Default | ExprKind::DontCare, ir::MatchKind::Exact) => return err(e.span, "an exact key cannot be a wildcard"),
            (ExprKind::Default | ExprKind::DontCare, _) => ir::FieldMatch::Any,
            (ExprKind::Mask(v, m), ir::MatchKind::Ternary) => {
                let value = self.const_of(scope, v, &t)?;
                let mask = self.const_of(scope, m, &t)?;
                let value = ir::Value { width: w, words: value.words.iter().zip(mask.words.iter()).map(|(a, b)| a & b).collect() };
                ir::FieldMatch::Ternary { value, mask }
            }
            (ExprKind::Mask(v, m), ir::MatchKind::Lpm) => {
                let value = self.const_of(scope, v, &t)?;
                let mask = self.const_of(scope, m, &t)?;
                let ones: u32 = mask.words.iter().map(|x| x.count_ones()).sum();
                ir::FieldMatch::Lpm { value, prefix_len: ones }
            }
            (ExprKind::Range(lo, hi), ir::MatchKind::Range) => ir::FieldMatch::Range { lo: self.const_of(scope, lo, &t)?, hi: self.const_of(scope, hi, &t)? },
            (_, ir::MatchKind::Exact | ir::MatchKind::Selector) => ir::FieldMatch::Exact(self.const_of(scope, e, &t)?),
            (_, ir::MatchKind::Ternary) => ir::FieldMatch::Ternary { value: self.const_of(scope, e, &t)?, mask: full() },
            (_, ir::MatchKind::Lpm) => ir::FieldMatch::Lpm { value: self.const_of(scope, e, &t)?, prefix_len: w },
            (_, ir::MatchKind::Range) => {
                let v = self.const_of(scope, e, &t)?;
                ir::FieldMatch::Range { lo: v.clone(), hi: v }
            }
            (_, ir::MatchKind::Optional) => ir::FieldMatch::Optional(Some(self.const_of(scope, e, &t)?)),
        })
    }

    /// The source text of a span with whitespace removed (p4c's key names).
    pub fn source_text(&self, span: Span) -> String {
        let s: String = self.text.get(span.lo as usize..span.hi as usize).unwrap_or("").chars().filter(|c| !c.is_whitespace()).collect();
        // the reference compiler names validity keys `x.$valid$`
        s.replace(".isValid()", ".$valid$")
    }
}
