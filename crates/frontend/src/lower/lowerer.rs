//! The lowering state (`Lowerer`): the program being built, storage allocation, P4Info ids and
//! names, and the final assembly of the IR program. The stages (blocks, parsers, tables,
//! statements, expressions) extend `Lowerer` in their own modules; this one names none of them.

use super::annotations::*;
use super::env::*;
use crate::ast::{self, Span};
use crate::diag::{Diagnostic, PResult};
use crate::types::*;
use num_traits::{ToPrimitive, Zero};
use p4sec_ir as ir;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

/// An error at `span`.
pub(super) use crate::diag::err;

/// The lowered v1model pipeline blocks.
pub struct Pipeline {
    pub parser: ir::Parser,
    pub blocks: Vec<ir::Control>,
}

pub(crate) struct Lowerer<'t> {
    pub text: &'t str,
    pub slots: u32,
    pub headers: Vec<ir::HeaderLayout>,
    pub stacks: Vec<ir::StackLayout>,
    pub errors: Vec<String>,
    pub actions: Vec<ir::Action>,
    pub tables: Vec<ir::Table>,
    pub action_profiles: Vec<ir::ActionProfile>,
    pub registers: Vec<ir::Register>,
    pub counters: Vec<ir::Counter>,
    pub direct_counters: Vec<ir::Counter>,
    pub meters: Vec<ir::Meter>,
    pub direct_meters: Vec<ir::Meter>,
    pub value_sets: Vec<ir::ValueSet>,
    pub digests: Vec<ir::Digest>,
    pub externs: Vec<ir::ExternInstance>,
    pub field_lists: BTreeMap<u32, Vec<ir::Loc>>,
    pub controller_headers: Vec<ir::ControllerHeader>,
    pub next_label: u32,
    pub global: Rc<Scope>,
    /// Statement buffers; statements are emitted into the last one.
    pub out: Vec<Vec<ir::Stmt>>,
    /// Enclosing functions/actions for `return`: (label, return place).
    pub returns: Vec<(u32, Option<Place>)>,
    /// Enclosing `for` loops: (label `break` leaves, label `continue` leaves, `returns.len()` at
    /// the loop, so a `break` in a function called from the body does not reach the loop).
    pub loops: Vec<(u32, u32, usize)>,
    /// Control-plane name prefix of the instance being elaborated.
    pub path: Vec<String>,
    /// Actions already lowered for a (declaration, scope) pair.
    pub action_cache: HashMap<(usize, usize), u32>,
    pub std_meta: Option<Place>,
    /// Parser states being built (when inside a parser).
    pub pstates: Vec<ir::ParserState>,
    pub used_ids: HashMap<u32, String>,
    pub inline_depth: u32,
    pub no_action: Option<u32>,
    pub pipeline: Option<Pipeline>,
    /// Directly called actions already given a P4Info entry.
    pub p4info_only: std::collections::HashSet<(usize, usize)>,
    /// Control instances of direct type invocations, by (enclosing instance path, call-site
    /// offset).
    pub direct_instances: HashMap<(String, u32), Rc<Instance>>,
    /// Annotations and type information for the P4Info.
    pub p4meta: ir::p4info::P4InfoMeta,
    /// Serializable enums by name (width, members); those a P4Info object uses go into `p4meta`.
    pub ser_enums: HashMap<String, (u32, Vec<(String, Vec<u8>)>)>,
    /// Depth of action bodies being lowered: an action called from another action is inlined by the
    /// reference compiler and gets no P4Info entry.
    pub in_action: u32,
    /// Tables applied somewhere (the others are left out of the P4Info).
    pub applied_tables: std::collections::HashSet<u32>,
    /// New types (`type bit<W> T`) by name: their width.
    pub newtypes: HashMap<String, (u32, Vec<String>)>,
    /// Variables declared with a new type, by their storage word.
    pub var_new_types: HashMap<u32, String>,
}

impl<'t> Lowerer<'t> {
    pub(super) fn new(text: &'t str) -> Self {
        Lowerer {
            text,
            direct_instances: HashMap::new(),
            p4meta: Default::default(),
            ser_enums: HashMap::new(),
            in_action: 0,
            applied_tables: Default::default(),
            newtypes: HashMap::new(),
            var_new_types: HashMap::new(),
            slots: 0,
            headers: vec![],
            stacks: vec![],
            errors: vec![],
            actions: vec![],
            tables: vec![],
            action_profiles: vec![],
            registers: vec![],
            counters: vec![],
            direct_counters: vec![],
            meters: vec![],
            direct_meters: vec![],
            value_sets: vec![],
            digests: vec![],
            externs: vec![],
            field_lists: BTreeMap::new(),
            controller_headers: vec![],
            next_label: 1,
            global: Scope::root(),
            out: vec![vec![]],
            returns: vec![],
            loops: vec![],
            path: vec![],
            action_cache: HashMap::new(),
            std_meta: None,
            pstates: vec![],
            used_ids: HashMap::new(),
            inline_depth: 0,
            no_action: None,
            pipeline: None,
            p4info_only: Default::default(),
        }
    }

    pub fn emit(&mut self, s: ir::Stmt) {
        self.out.last_mut().expect("statement buffer").push(s);
    }

    /// Run `f` with a fresh statement buffer and return the statements it emitted.
    pub fn capture<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> PResult<T>,
    ) -> PResult<(T, Vec<ir::Stmt>)> {
        self.out.push(vec![]);
        let r = f(self);
        let stmts = self.out.pop().unwrap_or_default();
        r.map(|v| (v, stmts))
    }

    pub fn label(&mut self) -> u32 {
        self.next_label += 1;
        self.next_label
    }

    /// A P4Info id: `prefix << 24 | jenkins(name) & 0xffffff`, probing on collision (as p4c does).
    /// The P4Info id of an object: its `@id(N)` annotation if it has one, else the hash of its
    /// name.
    pub fn p4info_id_of(&mut self, annos: &ast::Annotations, prefix: u8, name: &str) -> u32 {
        match annotation_ints(annos, "id").and_then(|v| v.first().copied()) {
            Some(id) if id > 0 && id <= u32::MAX as i64 => {
                // an id without the type prefix gets it (as the reference compiler does)
                let id = if id >> 24 == 0 {
                    ((prefix as u32) << 24) | id as u32
                } else {
                    id as u32
                };
                self.used_ids.insert(id, name.to_string());
                id
            }
            _ => self.p4info_id(prefix, name),
        }
    }

    pub fn p4info_id(&mut self, prefix: u8, name: &str) -> u32 {
        let mut h = ir::p4info::jenkins_one_at_a_time(name.as_bytes()) & 0xff_ffff;
        loop {
            let id = ((prefix as u32) << 24) | h;
            match self.used_ids.get(&id) {
                None => {
                    self.used_ids.insert(id, name.to_string());
                    return id;
                }
                Some(n) if n == name => return id,
                Some(_) => h = (h + 1) & 0xff_ffff,
            }
        }
    }

    /// The control-plane name of a declaration: `@name` (absolute with a leading `.`, else relative
    /// to the enclosing instance path) or the declared name prefixed by the path.
    pub fn cp_name(&self, annos: &ast::Annotations, name: &str) -> String {
        if let Some(n) = annotation_str(annos, "name") {
            if let Some(abs) = n.strip_prefix('.') {
                return abs.to_string();
            }
            return self.qualify(&n);
        }
        self.qualify(name)
    }

    pub fn qualify(&self, name: &str) -> String {
        if self.path.is_empty() {
            name.to_string()
        } else {
            format!("{}.{}", self.path.join("."), name)
        }
    }

    // ---------------------------------------------------------------- storage allocation

    pub fn alloc_scalar(&mut self, width: u32) -> ir::Loc {
        let loc = ir::Loc {
            slot: self.slots,
            width,
        };
        self.slots += ir::words_for(width);
        loc
    }

    /// Allocate storage for a value of type `ty`, named `name` (for traces).
    pub fn alloc(&mut self, ty: &Ty, name: &str, span: Span) -> PResult<Place> {
        Ok(match ty {
            Ty::Agg(a) if a.kind == ast::AggregateKind::Header => {
                self.alloc_header(a, name, span)?
            }
            Ty::Agg(a) if a.kind == ast::AggregateKind::HeaderUnion => {
                let mut members = vec![];
                for f in &a.fields {
                    let Ty::Agg(h) = &f.ty else {
                        return Err(Diagnostic::new(
                            span,
                            format!("header_union member `{}` is not a header", f.name),
                        ));
                    };
                    members.push((
                        f.name.clone(),
                        self.alloc_header(h, &format!("{name}.{}", f.name), span)?,
                    ));
                }
                let valids: Vec<ir::LValue> = members
                    .iter()
                    .map(|(_, p)| p.header_valid().unwrap())
                    .collect();
                for (i, (_, m)) in members.iter_mut().enumerate() {
                    if let Place::Header { siblings, .. } = m {
                        *siblings = valids
                            .iter()
                            .enumerate()
                            .filter(|(j, _)| *j != i)
                            .map(|(_, v)| v.clone())
                            .collect();
                    }
                }
                Place::Union {
                    ty: a.clone(),
                    members,
                }
            }
            Ty::Agg(a) => {
                let mut fields = vec![];
                for f in &a.fields {
                    fields.push((
                        f.name.clone(),
                        self.alloc(&f.ty, &format!("{name}.{}", f.name), span)?,
                    ));
                }
                Place::Struct {
                    ty: a.clone(),
                    fields,
                }
            }
            Ty::Stack(elem, n) => {
                let mut elems = vec![];
                let mut stride = 0;
                for i in 0..*n {
                    let before = self.slots;
                    let p = self.alloc(elem, &format!("{name}[{i}]"), span)?;
                    stride = self.slots - before;
                    elems.push(p);
                }
                let next_index = self.alloc_scalar(32);
                let id = self.stacks.len() as u32;
                let hid = |p: &Place| match p {
                    Place::Header {
                        hdr: ir::HeaderRef::Static(h),
                        ..
                    } => *h,
                    _ => u32::MAX,
                };
                let elements = elems.iter().map(hid).collect();
                self.stacks.push(ir::StackLayout {
                    name: name.to_string(),
                    elements,
                    stride,
                    next_index,
                });
                // a stack of unions: one header stack per union member, sharing the next index
                let mut member_stacks = vec![];
                if let Some(Place::Union { members, .. }) = elems.first() {
                    for (k, (mname, _)) in members.iter().enumerate() {
                        let elements = elems
                            .iter()
                            .map(|e| match e {
                                Place::Union { members, .. } => hid(&members[k].1),
                                _ => u32::MAX,
                            })
                            .collect();
                        member_stacks.push(self.stacks.len() as u32);
                        self.stacks.push(ir::StackLayout {
                            name: format!("{name}.{mname}"),
                            elements,
                            stride,
                            next_index,
                        });
                    }
                }
                Place::Stack {
                    id,
                    elem: (**elem).clone(),
                    elems,
                    stride,
                    next_index,
                    member_stacks,
                }
            }
            Ty::Tuple(ts) => {
                let mut ps = vec![];
                for (i, t) in ts.iter().enumerate() {
                    ps.push(self.alloc(t, &format!("{name}.{i}"), span)?);
                }
                Place::Tuple(ps)
            }
            Ty::Varbit(max) => {
                let data = self.alloc_scalar(*max);
                let len = self.alloc_scalar(32);
                Place::Varbit {
                    data: ir::LValue::Static(data),
                    len: ir::LValue::Static(len),
                    max: *max,
                }
            }
            t => match t.scalar_width() {
                Some(w) => {
                    if w > ir::MAX_WIDTH {
                        return Err(Diagnostic::new(
                            span,
                            format!(
                                "type {t} is wider than the {} bits p4sec supports",
                                ir::MAX_WIDTH
                            ),
                        ));
                    }
                    Place::Scalar(ir::LValue::Static(self.alloc_scalar(w.max(1))), t.clone())
                }
                None => {
                    return Err(Diagnostic::new(
                        span,
                        format!("cannot declare a variable of type {t}"),
                    ))
                }
            },
        })
    }

    fn alloc_header(&mut self, a: &Rc<AggInfo>, name: &str, span: Span) -> PResult<Place> {
        let valid = self.alloc_scalar(1);
        let mut fields = vec![];
        let mut layout = vec![];
        let mut max_bits = 0;
        for f in &a.fields {
            let p = self.alloc_header_field(a, &f.name, &f.ty, span, &mut layout, &mut max_bits)?;
            fields.push((f.name.clone(), p));
        }
        let id = self.headers.len() as u32;
        self.headers.push(ir::HeaderLayout {
            name: name.to_string(),
            valid,
            fields: layout,
            max_bits,
        });
        Ok(Place::Header {
            hdr: ir::HeaderRef::Static(id),
            valid: ir::LValue::Static(valid),
            fields,
            ty: a.clone(),
            siblings: vec![],
        })
    }

    /// Storage of one header field named `path` (dotted inside a struct-typed field): a
    /// struct-typed field is flattened, its leaves laid out in declaration (= wire) order as the
    /// reference compiler does.
    fn alloc_header_field(
        &mut self,
        a: &Rc<AggInfo>,
        path: &str,
        t: &Ty,
        span: Span,
        layout: &mut Vec<ir::FieldLayout>,
        max_bits: &mut u32,
    ) -> PResult<Place> {
        Ok(match t {
            Ty::Varbit(max) => {
                let data = self.alloc_scalar(*max);
                let len = self.alloc_scalar(32);
                layout.push(ir::FieldLayout {
                    name: path.to_string(),
                    loc: data,
                    varbit_len: Some(len),
                });
                *max_bits += max;
                Place::Varbit {
                    data: ir::LValue::Static(data),
                    len: ir::LValue::Static(len),
                    max: *max,
                }
            }
            Ty::Agg(s) if s.kind == ast::AggregateKind::Struct => {
                let mut fields = vec![];
                for f in &s.fields {
                    if matches!(f.ty, Ty::Varbit(_)) {
                        return Err(Diagnostic::new(
                            span,
                            format!("header field `{}.{path}.{}` is a varbit inside a struct, which headers cannot hold", a.name, f.name),
                        ));
                    }
                    let p = self.alloc_header_field(
                        a,
                        &format!("{path}.{}", f.name),
                        &f.ty,
                        span,
                        layout,
                        max_bits,
                    )?;
                    fields.push((f.name.clone(), p));
                }
                Place::Struct {
                    ty: s.clone(),
                    fields,
                }
            }
            Ty::Stack(e, n) if !e.is_header() && !e.is_union() => {
                // a generic array in a header: its elements laid out one after the other, element 0
                // first
                let mut elems = vec![];
                let mut stride = 0;
                for i in 0..*n {
                    let before = self.slots;
                    elems.push(self.alloc_header_field(
                        a,
                        &format!("{path}[{i}]"),
                        e,
                        span,
                        layout,
                        max_bits,
                    )?);
                    stride = self.slots - before;
                }
                let next_index = self.alloc_scalar(32);
                let id = self.stacks.len() as u32;
                self.stacks.push(ir::StackLayout {
                    name: format!("{}.{path}", a.name),
                    elements: vec![u32::MAX; *n as usize],
                    stride,
                    next_index,
                });
                Place::Stack {
                    id,
                    elem: (**e).clone(),
                    elems,
                    stride,
                    next_index,
                    member_stacks: vec![],
                }
            }
            t => {
                let w = match t {
                    Ty::Bool => 1,
                    Ty::Bit(w) | Ty::Int(w) => *w,
                    Ty::Enum(e) if e.repr.is_some() => t.scalar_width().unwrap_or(0),
                    _ => {
                        return Err(Diagnostic::new(
                            span,
                            format!(
                                "header field `{}.{path}` has type {t}, which headers cannot hold",
                                a.name
                            ),
                        ))
                    }
                };
                if w > ir::MAX_WIDTH {
                    return Err(Diagnostic::new(
                        span,
                        format!("field `{path}` is wider than {} bits", ir::MAX_WIDTH),
                    ));
                }
                let loc = self.alloc_scalar(w);
                layout.push(ir::FieldLayout {
                    name: path.to_string(),
                    loc,
                    varbit_len: None,
                });
                *max_bits += w;
                Place::Scalar(ir::LValue::Static(loc), t.clone())
            }
        })
    }

    pub(super) fn finish(mut self) -> ir::Program {
        let std = self.std_meta.take();
        let std_meta = std_meta_locs(std.as_ref());
        let field_lists = self
            .field_lists
            .iter()
            .map(|(id, f)| ir::FieldList {
                id: *id,
                fields: f.clone(),
            })
            .collect();
        let pl = self.pipeline.take().expect("elaborated");
        let mut blocks = pl.blocks.into_iter();
        let mut next = || {
            blocks.next().unwrap_or(ir::Control {
                name: String::new(),
                body: vec![],
            })
        };
        let (verify_checksum, ingress, egress, compute_checksum, deparser) =
            (next(), next(), next(), next(), next());
        let mut p4meta = std::mem::take(&mut self.p4meta);
        for (i, t) in self.tables.iter().enumerate() {
            if !self.applied_tables.contains(&(i as u32)) {
                p4meta.unused_tables.insert(t.name.clone());
            }
        }
        ir::Program {
            format: 1,
            source: String::new(),
            slots: self.slots,
            initial: vec![],
            headers: self.headers,
            stacks: self.stacks,
            errors: self.errors,
            std_meta,
            parser: pl.parser,
            verify_checksum,
            ingress,
            egress,
            compute_checksum,
            deparser,
            actions: self.actions,
            tables: self.tables,
            action_profiles: self.action_profiles,
            registers: self.registers,
            counters: self.counters,
            direct_counters: self.direct_counters,
            meters: self.meters,
            direct_meters: self.direct_meters,
            value_sets: self.value_sets,
            digests: self.digests,
            externs: self.externs,
            field_lists,
            controller_headers: self.controller_headers,
            p4info: p4meta,
        }
    }
}

pub(super) fn std_meta_locs(p: Option<&Place>) -> ir::StdMeta {
    let get = |name: &str| -> ir::Loc {
        if let Some(Place::Struct { fields, .. }) = p {
            for (n, f) in fields {
                if n == name {
                    if let Place::Scalar(ir::LValue::Static(l), _) = f {
                        return *l;
                    }
                }
            }
        }
        ir::Loc { slot: 0, width: 0 }
    };
    let (first, words) = match p {
        Some(p) => {
            let locs = p.scalar_locs();
            let lo = locs.iter().map(|l| l.slot).min().unwrap_or(0);
            let hi = locs
                .iter()
                .map(|l| l.slot + ir::words_for(l.width))
                .max()
                .unwrap_or(0);
            (lo, hi - lo)
        }
        None => (0, 0),
    };
    ir::StdMeta {
        ingress_port: get("ingress_port"),
        egress_spec: get("egress_spec"),
        egress_port: get("egress_port"),
        instance_type: get("instance_type"),
        packet_length: get("packet_length"),
        enq_timestamp: get("enq_timestamp"),
        enq_qdepth: get("enq_qdepth"),
        deq_timedelta: get("deq_timedelta"),
        deq_qdepth: get("deq_qdepth"),
        ingress_global_timestamp: get("ingress_global_timestamp"),
        egress_global_timestamp: get("egress_global_timestamp"),
        mcast_grp: get("mcast_grp"),
        egress_rid: get("egress_rid"),
        checksum_error: get("checksum_error"),
        parser_error: get("parser_error"),
        priority: get("priority"),
        first,
        words,
    }
}

impl<'t> Lowerer<'t> {
    /// Record the P4Info annotations of the object `key` (see [`ir::p4info::P4InfoMeta::annos`]).
    /// A P4Info object uses type `t`: a serializable enum goes into `type_info`.
    pub fn note_type(&mut self, t: &Ty) {
        if let Ty::Enum(e) = t {
            if let Some(v) = self.ser_enums.get(&e.name) {
                self.p4meta
                    .serializable_enums
                    .insert(e.name.clone(), v.clone());
            }
        }
    }

    /// The name of a declared type that is a new type (`type bit<W> T`).
    pub fn new_type_name(&self, ty: &ast::Type) -> Option<String> {
        match &ty.kind {
            ast::TypeKind::Named { name, .. } if self.newtypes.contains_key(&name.name) => {
                Some(name.name.clone())
            }
            _ => None,
        }
    }

    /// An object `key` of declared type `ty`: a new type gives it a P4Info `type_name`.
    pub fn note_type_name(&mut self, key: String, ty: &ast::Type) {
        if let Some(n) = self.new_type_name(ty) {
            self.note_new_type(key, &n);
        }
    }

    pub fn note_new_type(&mut self, key: String, n: &str) {
        if let Some(v) = self.newtypes.get(n) {
            self.p4meta.new_types.insert(n.to_string(), v.clone());
            self.p4meta.type_names.insert(key, n.to_string());
        }
    }

    /// Record an object's P4Info annotations; a structured annotation's expressions are evaluated
    /// as compile-time constants (top-level constants, arithmetic, comparisons), as the reference
    /// compiler does.
    pub fn note_annos(&mut self, key: String, annos: &ast::Annotations) -> PResult<()> {
        let global = self.global.clone();
        let a = p4info_annos_with(annos, &mut |e| self.annotation_value(&global, e))?;
        if a != ir::p4info::Annos::default() {
            self.p4meta.annos.insert(key, a);
        }
        Ok(())
    }

    /// The value of an expression in a structured annotation: an integer, a boolean or a string
    /// constant.
    fn annotation_value(
        &mut self,
        scope: &Rc<Scope>,
        e: &ast::Expr,
    ) -> PResult<ir::p4info::AnnoValue> {
        use ir::p4info::AnnoValue;
        if let Some(v) = literal_value(e) {
            return Ok(v);
        }
        let not_const = |why: &str| {
            err(e.span, format!("an expression in a structured annotation must be a compile-time integer, boolean or string constant ({why})"))
        };
        match self.expr(scope, e, None) {
            Ok(Val::Const(v, Ty::Bool)) => Ok(AnnoValue::Bool(!v.is_zero())),
            Ok(Val::Const(v, Ty::Bit(_) | Ty::Int(_) | Ty::InfInt)) => match v.to_i64() {
                Some(i) => Ok(AnnoValue::Int(i)),
                None => not_const(&format!("{v} does not fit in 64 bits")),
            },
            Ok(Val::Str(s)) => Ok(AnnoValue::Str(s)),
            Ok(_) => not_const("this one is not"),
            Err(d) => not_const(&d.message),
        }
    }
}
