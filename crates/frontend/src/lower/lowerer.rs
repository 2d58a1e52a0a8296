//! The lowering state (`Lowerer`): the program being built, statements captured and emitted,
//! P4Info ids and names, and the final assembly of the IR program. Storage allocation
//! (`storage.rs`), the P4Info notes (`p4info_notes.rs`) and the stages (declarations, controls,
//! parsers, tables, statements, expressions) extend `Lowerer` in their own modules; this one names
//! none of them.

use super::annotations::*;
use super::env::*;
use crate::ast::{self};
use crate::diag::PResult;
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
