//! A whole program ([`Program`]): header and stack layouts, standard metadata, field lists, its
//! rewriting into the engine's fast forms, and reading and writing it as JSON (with the nesting
//! limits that keep that safe).

use crate::blocks::*;
use crate::expr::*;
use crate::objects::*;
use crate::stmt::*;
use crate::tables::*;
use serde::{Deserialize, Serialize};

/// A header instance's layout in the slot array.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeaderLayout {
    /// Dotted path for traces, e.g. `hdr.ipv4` or `hdr.stack[2]`.
    pub name: String,
    /// Validity bit (width 1).
    pub valid: Loc,
    /// Fields in declaration (= wire) order. A varbit field has `varbit_max` set and its current
    /// length in `varbit_len` (a 32-bit location, bits); its value is stored right-aligned in
    /// `max`-bit storage.
    pub fields: Vec<FieldLayout>,
    /// Sum of the fixed field widths plus the varbit maximum.
    pub max_bits: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FieldLayout {
    pub name: String,
    pub loc: Loc,
    pub varbit_len: Option<Loc>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StackLayout {
    pub name: String,
    /// Header indices of the elements, in order (`Program::headers`); all have the same layout
    /// shape, and element i's slots are `elements[0]`'s slots + i * `stride`.
    pub elements: Vec<u32>,
    pub stride: u32,
    /// The 32-bit `nextIndex` location.
    pub next_index: Loc,
}

/// Locations of the `standard_metadata` fields the architecture reads and writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StdMeta {
    pub ingress_port: Loc,
    pub egress_spec: Loc,
    pub egress_port: Loc,
    pub instance_type: Loc,
    pub packet_length: Loc,
    pub enq_timestamp: Loc,
    pub enq_qdepth: Loc,
    pub deq_timedelta: Loc,
    pub deq_qdepth: Loc,
    pub ingress_global_timestamp: Loc,
    pub egress_global_timestamp: Loc,
    pub mcast_grp: Loc,
    pub egress_rid: Loc,
    pub checksum_error: Loc,
    pub parser_error: Loc,
    pub priority: Loc,
    /// The whole standard_metadata struct: `[first, first + words)`.
    pub first: u32,
    pub words: u32,
}

/// A `@field_list(n)` of user metadata fields preserved across clone/resubmit/recirculate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FieldList {
    pub id: u32,
    pub fields: Vec<Loc>,
}

/// A `@controller_header("packet_in"/"packet_out")` header for the CPU port.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ControllerHeader {
    pub name: String,
    pub id: u32,
    /// (name, id, width) of each field.
    pub fields: Vec<(String, u32, u32)>,
}

/// A whole compiled v1model program.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Program {
    /// Format version of this file.
    pub format: u32,
    pub source: String,
    /// Number of u64 words of per-packet state.
    pub slots: u32,
    /// Initial values of the slot array (all zero except constants the front end placed there);
    /// empty means all zero.
    pub initial: Vec<(u32, u64)>,
    pub headers: Vec<HeaderLayout>,
    pub stacks: Vec<StackLayout>,
    /// Names of `error` values; the value of an error is its index here (NoError = 0).
    pub errors: Vec<String>,
    pub std_meta: StdMeta,
    pub parser: Parser,
    pub verify_checksum: Control,
    pub ingress: Control,
    pub egress: Control,
    pub compute_checksum: Control,
    pub deparser: Control,
    pub actions: Vec<Action>,
    pub tables: Vec<Table>,
    pub action_profiles: Vec<ActionProfile>,
    pub registers: Vec<Register>,
    pub counters: Vec<Counter>,
    pub direct_counters: Vec<Counter>,
    pub meters: Vec<Meter>,
    pub direct_meters: Vec<Meter>,
    pub value_sets: Vec<ValueSet>,
    pub digests: Vec<Digest>,
    pub externs: Vec<ExternInstance>,
    pub field_lists: Vec<FieldList>,
    pub controller_headers: Vec<ControllerHeader>,
    /// What only the P4Info needs: annotations, documentation and type information.
    #[serde(default)]
    pub p4info: crate::p4info_meta::P4InfoMeta,
}

/// Error codes of the core `error` type, by name (their index in `Program::errors` is their value).
pub const CORE_ERRORS: [&str; 7] = [
    "NoError",
    "PacketTooShort",
    "NoMatch",
    "StackOutOfBounds",
    "HeaderTooShort",
    "ParserTimeout",
    "ParserInvalidArgument",
];

impl Program {
    pub fn error_code(&self, name: &str) -> Option<u32> {
        self.errors.iter().position(|e| e == name).map(|i| i as u32)
    }
    /// Rewrite the program into the engine's fast forms (constants of ≤ 64 bits as `Expr::Small`).
    pub fn optimize(&mut self) {
        fn ex(e: &mut Expr) {
            match e {
                Expr::Const(v) if v.width <= 64 => {
                    *e = Expr::Small {
                        value: v.as_u64(),
                        width: v.width,
                    }
                }
                Expr::Load(LValue::Dynamic { index, .. }) => ex(index),
                Expr::Unary { arg, .. } | Expr::Slice { arg, .. } | Expr::Cast { arg, .. } => {
                    ex(arg)
                }
                Expr::Binary { lhs, rhs, .. } => {
                    ex(lhs);
                    ex(rhs);
                }
                Expr::Concat { hi, lo } => {
                    ex(hi);
                    ex(lo);
                }
                Expr::Cond {
                    cond, then, else_, ..
                } => {
                    ex(cond);
                    ex(then);
                    ex(else_);
                }
                _ => {}
            }
        }
        fn lv(l: &mut LValue) {
            if let LValue::Dynamic { index, .. } = l {
                ex(index);
            }
        }
        fn hr(h: &mut HeaderRef) {
            if let HeaderRef::Dynamic { index, .. } = h {
                ex(index);
            }
        }
        fn st(s: &mut Stmt) {
            match s {
                Stmt::Assign { dst, src } => {
                    lv(dst);
                    ex(src);
                }
                Stmt::SetValid { hdr, .. } => hr(hdr),
                Stmt::CopyHeader { dst, src } => {
                    hr(dst);
                    hr(src);
                }
                Stmt::If { cond, then, else_ } => {
                    ex(cond);
                    then.iter_mut().for_each(st);
                    else_.iter_mut().for_each(st);
                }
                Stmt::Switch {
                    expr,
                    cases,
                    default,
                } => {
                    ex(expr);
                    cases
                        .iter_mut()
                        .for_each(|(_, b)| b.iter_mut().for_each(st));
                    default.iter_mut().for_each(st);
                }
                Stmt::Block { body, .. } | Stmt::Loop { body, .. } => body.iter_mut().for_each(st),
                Stmt::CallAction { args, .. } => args.iter_mut().for_each(ex),
                Stmt::Extract { hdr, varbit_bits } => {
                    hr(hdr);
                    if let Some(e) = varbit_bits {
                        ex(e);
                    }
                }
                Stmt::Advance { bits } => ex(bits),
                Stmt::Emit { hdr } => hr(hdr),
                Stmt::Builtin(b) => match b {
                    Builtin::Verify { cond, .. } | Builtin::Assert { cond } => ex(cond),
                    Builtin::Hash {
                        dst,
                        base,
                        data,
                        max,
                        ..
                    } => {
                        lv(dst);
                        ex(base);
                        ex(max);
                        data.iter_mut().for_each(ex);
                    }
                    Builtin::VerifyChecksum {
                        cond, data, field, ..
                    } => {
                        ex(cond);
                        ex(field);
                        data.iter_mut().for_each(ex);
                    }
                    Builtin::UpdateChecksum {
                        cond, data, dst, ..
                    } => {
                        ex(cond);
                        lv(dst);
                        data.iter_mut().for_each(ex);
                    }
                    Builtin::RegisterRead { dst, index, .. } => {
                        lv(dst);
                        ex(index);
                    }
                    Builtin::RegisterWrite { index, value, .. } => {
                        ex(index);
                        ex(value);
                    }
                    Builtin::CounterCount { index, .. } => ex(index),
                    Builtin::MeterExecute { index, dst, .. } => {
                        ex(index);
                        lv(dst);
                    }
                    Builtin::Clone { session, .. } => ex(session),
                    Builtin::Truncate { length } => ex(length),
                    Builtin::Random { dst, lo, hi } => {
                        lv(dst);
                        ex(lo);
                        ex(hi);
                    }
                    _ => {}
                },
                Stmt::ExternCall { args, .. } => args.iter_mut().for_each(|a| {
                    a.parts.iter_mut().for_each(ex);
                    a.dsts.iter_mut().for_each(lv);
                }),
                _ => {}
            }
        }
        /// Does `label` appear as a `Break` target anywhere in `body`?
        fn breaks_to(body: &[Stmt], label: u32) -> bool {
            body.iter().any(|s| match s {
                Stmt::Break(l) => *l == label,
                Stmt::If { then, else_, .. } => breaks_to(then, label) || breaks_to(else_, label),
                Stmt::Switch { cases, default, .. } => {
                    cases.iter().any(|(_, b)| breaks_to(b, label)) || breaks_to(default, label)
                }
                Stmt::Block { body, .. } | Stmt::Loop { body, .. } => breaks_to(body, label),
                _ => false,
            })
        }
        /// Splice labelled blocks that nothing breaks out of into the enclosing list.
        fn flatten(body: &mut Vec<Stmt>) {
            let mut out = Vec::with_capacity(body.len());
            for mut s in body.drain(..) {
                match &mut s {
                    Stmt::If { then, else_, .. } => {
                        flatten(then);
                        flatten(else_);
                    }
                    Stmt::Switch { cases, default, .. } => {
                        cases.iter_mut().for_each(|(_, b)| flatten(b));
                        flatten(default);
                    }
                    Stmt::Loop { body, .. } => flatten(body),
                    Stmt::Block { label, body } => {
                        flatten(body);
                        if !breaks_to(body, *label) {
                            out.append(body);
                            continue;
                        }
                    }
                    _ => {}
                }
                out.push(s);
            }
            *body = out;
        }
        for s in self.parser.states.iter_mut() {
            flatten(&mut s.body);
        }
        // start directly in the first state that does something (the entry state is often a bare
        // goto)
        let mut hops = 0;
        while let Some(ParserState {
            body,
            transition: Transition::Goto(Next::State(n)),
            ..
        }) = self.parser.states.get(self.parser.start as usize)
        {
            if !body.is_empty() || hops > self.parser.states.len() {
                break;
            }
            self.parser.start = *n;
            hops += 1;
        }
        for c in [
            &mut self.verify_checksum,
            &mut self.ingress,
            &mut self.egress,
            &mut self.compute_checksum,
            &mut self.deparser,
        ] {
            flatten(&mut c.body);
        }
        for a in self.actions.iter_mut() {
            flatten(&mut a.body);
        }
        for s in self.parser.states.iter_mut() {
            s.body.iter_mut().for_each(st);
            if let Transition::Select { keys, .. } = &mut s.transition {
                keys.iter_mut().for_each(ex);
            }
        }
        for c in [
            &mut self.verify_checksum,
            &mut self.ingress,
            &mut self.egress,
            &mut self.compute_checksum,
            &mut self.deparser,
        ] {
            c.body.iter_mut().for_each(st);
        }
        for a in self.actions.iter_mut() {
            a.body.iter_mut().for_each(st);
        }
        for t in self.tables.iter_mut() {
            t.keys.iter_mut().for_each(|k| ex(&mut k.expr));
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("IR serializes")
    }
    /// Read a program file (the JSON `to_json` writes), whatever its nesting depth up to
    /// [`MAX_JSON_DEPTH`]: serde_json's default recursion limit (128 levels, about 60 nested
    /// expressions) is lifted, and the recursive descent runs on a thread with a stack sized for
    /// that depth ([`LOAD_STACK`]). A deeper file is refused before it is parsed, with the byte
    /// offset where it gets too deep.
    pub fn from_json(s: &str) -> Result<Program, String> {
        if let Some(at) = json_too_deep(s.as_bytes(), MAX_JSON_DEPTH) {
            return Err(format!("not a p4sec program file: nested more than {MAX_JSON_DEPTH} levels deep at byte {at}"));
        }
        let parse = || {
            let mut de = serde_json::Deserializer::from_str(s);
            de.disable_recursion_limit();
            let p = <Program as serde::Deserialize>::deserialize(&mut de)
                .and_then(|p| de.end().map(|_| p));
            p.map_err(|e| format!("not a p4sec program file: {e}"))
        };
        std::thread::scope(|sc| {
            match std::thread::Builder::new()
                .name("p4sec-load".into())
                .stack_size(LOAD_STACK)
                .spawn_scoped(sc, parse)
            {
                Ok(h) => h
                    .join()
                    .unwrap_or_else(|_| Err("not a p4sec program file: the reader failed".into())),
                // no thread to be had: read on this one (the depth check still bounds the
                // recursion)
                Err(_) => parse(),
            }
        })
    }
}

/// The deepest JSON nesting (objects and arrays) a program file may have: room for expressions and
/// statements nested [`MAX_NESTING`] levels deep (an expression level is two JSON levels,
/// `{"Binary": {"lhs": ...`).
pub const MAX_JSON_DEPTH: usize = 4 * MAX_NESTING + 256;

/// The deepest nesting of expressions (and of statements) the front end compiles; the engine and
/// the loader handle programs up to it on an ordinary thread's stack.
pub const MAX_NESTING: usize = 512;

/// The stack of the thread that reads a program file: enough for [`MAX_JSON_DEPTH`] levels of
/// recursive descent.
pub const LOAD_STACK: usize = 256 << 20;

/// The byte offset where `text` first nests deeper than `limit` (objects and arrays, outside
/// strings), if it does. A single pass without recursion, so any input is checked in constant stack
/// space.
pub fn json_too_deep(text: &[u8], limit: usize) -> Option<usize> {
    let (mut depth, mut in_str, mut esc) = (0usize, false, false);
    for (i, &b) in text.iter().enumerate() {
        if in_str {
            if esc {
                esc = false;
            } else if b == b'\\' {
                esc = true;
            } else if b == b'"' {
                in_str = false;
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > limit {
                    return Some(i);
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// Which of the traffic manager's `standard_metadata` fields a program refers to (reads, or writes:
/// a write is counted as a use, which errs on the safe side).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TmFieldUse {
    /// `ingress_global_timestamp`, `egress_global_timestamp`, `enq_timestamp` or `deq_timedelta`:
    /// the clock must be read for every packet.
    pub clock: bool,
    /// `enq_qdepth`, `deq_qdepth`, `enq_timestamp` or `deq_timedelta`: the queue's state is looked
    /// at.
    pub queue: bool,
}

impl Program {
    /// Which traffic-manager fields of `standard_metadata` the program's code (parser, controls,
    /// actions, tables, extern arguments, digests, field lists) refers to. Every location in the
    /// program other than the `std_meta` table itself is looked at, so a field passed whole to an
    /// extern or copied as part of a struct counts too.
    pub fn tm_field_use(&self) -> TmFieldUse {
        let sm = &self.std_meta;
        let slot_of = |l: Loc| (l.width > 0).then_some(l.slot as u64);
        let clock_fields: Vec<u64> = [
            sm.ingress_global_timestamp,
            sm.egress_global_timestamp,
            sm.enq_timestamp,
            sm.deq_timedelta,
        ]
        .into_iter()
        .filter_map(slot_of)
        .collect();
        let queue_fields: Vec<u64> = [
            sm.enq_qdepth,
            sm.deq_qdepth,
            sm.enq_timestamp,
            sm.deq_timedelta,
        ]
        .into_iter()
        .filter_map(slot_of)
        .collect();
        let mut used = TmFieldUse::default();
        if clock_fields.is_empty() && queue_fields.is_empty() {
            return used;
        }
        let Ok(serde_json::Value::Object(mut all)) = serde_json::to_value(self) else {
            // (cannot happen: the program is plain data) every field counts as used
            return TmFieldUse {
                clock: true,
                queue: true,
            };
        };
        for k in [
            "std_meta", "initial", "headers", "stacks", "p4info", "source", "errors",
        ] {
            all.remove(k);
        }
        fn walk(v: &serde_json::Value, f: &mut impl FnMut(u64, u64)) {
            match v {
                serde_json::Value::Object(m) => {
                    if m.len() == 2 {
                        if let (Some(s), Some(w)) = (
                            m.get("slot").and_then(|x| x.as_u64()),
                            m.get("width").and_then(|x| x.as_u64()),
                        ) {
                            f(s, w);
                            return;
                        }
                    }
                    m.values().for_each(|x| walk(x, f));
                }
                serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, f)),
                _ => {}
            }
        }
        walk(&serde_json::Value::Object(all), &mut |slot, width| {
            let end = slot + words_for(width as u32) as u64;
            let hit = |fields: &[u64]| fields.iter().any(|&s| s >= slot && s < end);
            used.clock |= hit(&clock_fields);
            used.queue |= hit(&queue_fields);
        });
        used
    }
}
