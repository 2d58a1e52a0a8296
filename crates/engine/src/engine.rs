//! The engine: the program's shared state, composed of the stages that own it (see the fields of
//! [`Engine`]), its statistics, and the frames one call of [`Engine::process`] emits ([`Outputs`]).

use crate::code::{Block, Sf, Xf};
use crate::load::plans::{HeaderPlan, StdSlots};
use crate::meters::MeterCell;
use crate::tables::TableData;
use crate::worker::{Stats, Worker};
use arc_swap::ArcSwap;
use p4sec_externs::iface::ExternObject;
use p4sec_ir::*;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub struct TableRt {
    pub(crate) data: ArcSwap<TableData>,
    pub(crate) write: Mutex<()>,
    /// The version the last publication replaced, when no worker read it any more then (its
    /// entries let go): the next change is made in it, its arrays reused.
    pub(crate) spare: Mutex<Option<TableData>>,
    /// Changes made in the replaced version (`spare`) rather than in a new copy.
    pub(crate) recycled: AtomicU64,
    /// Changes made in a new copy of the current version (no replaced version to reuse).
    pub(crate) copied: AtomicU64,
}

pub struct RegisterRt {
    pub size: usize,
    pub width: u32,
    pub words: usize,
    pub cells: Vec<AtomicU64>,
}

/// Packet replication engine configuration.
#[derive(Clone, Debug, Default)]
pub struct Pre {
    /// Mirror session → egress port.
    pub mirror: BTreeMap<u32, u32>,
    /// Multicast group → node handles.
    pub groups: BTreeMap<u32, Vec<u32>>,
    /// Node handle → (rid, ports); `None` once deleted.
    pub nodes: Vec<Option<(u32, Vec<u32>)>>,
}

/// Adds one to a counter that only its own worker writes: a plain load and store, no locked
/// instruction.
#[inline]
pub(crate) fn bump(c: &AtomicU64) {
    c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// Packet statistics summed over all workers of an engine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    pub packets_in: u64,
    pub packets_out: u64,
    pub dropped: u64,
    pub pass_limit: u64,
    pub assert_failures: u64,
    pub extern_faults: u64,
    pub loop_limit: u64,
}

/// A digest message: the digest's index in `Program::digests` and the values of its fields.
pub type DigestMsg = (u32, Vec<Value>);

/// The engine: the program and the shared state of each stage a packet passes through. Each field
/// is a stage's own state; what the stage does is in its file under `pipeline/` (an `impl` of the
/// stage's type, or of [`Engine`] where a stage needs the others), how it is built in `load/`.
pub struct Engine {
    pub prog: Arc<Program>,
    /// Where the program's data lives in a worker's slots: header plans, standard metadata, errors.
    pub(crate) layout: Layout,
    /// The parser: compiled states and transitions, value sets (`pipeline/parser.rs`).
    pub(crate) parser: Parser,
    /// The v1model controls: verify and compute checksum, ingress and egress (`pipeline/mod.rs`).
    pub(crate) controls: Controls,
    /// Match-action: the tables, their compiled keys and actions (`pipeline/match_action.rs`,
    /// storage in `tables/`).
    pub(crate) match_action: MatchAction,
    /// Extern instances and the v1model stateful objects: registers, counters, meters
    /// (`pipeline/call/`).
    pub(crate) externs: Externs,
    /// The deparser and the checksums it computes from emitted bytes (`pipeline/headers.rs`).
    pub(crate) deparser: Deparser,
    /// The packet replication engine of the traffic manager: mirror sessions, multicast groups
    /// (`pipeline/mod.rs` replicates, `pipeline/tm.rs` queues).
    pub(crate) replication: Replication,
    /// Digests waiting for the control plane (`control.rs`).
    pub(crate) digests: Digests,
    /// Each worker's statistics (written only by that worker; summed by [`Engine::stats`]).
    pub(crate) worker_stats: Mutex<Vec<Arc<Stats>>>,
    /// The backend the engine runs (native only when machine code was generated).
    pub(crate) backend: crate::Backend,
}

/// Where the program's data lives in a worker's slots.
pub(crate) struct Layout {
    /// Per header: how to extract and emit it quickly (see [`HeaderPlan`]).
    pub(crate) headers: Vec<HeaderPlan>,
    /// Word ranges of header state (validity, fields, varbit lengths, stack indices), kept by E2E
    /// clones.
    pub(crate) header_ranges: Vec<(usize, usize)>,
    pub(crate) std: StdSlots,
    /// The codes of the standard errors in the program's `error` type.
    pub(crate) errors: ErrorCodes,
}

/// The codes of the core library's errors the engine raises.
pub(crate) struct ErrorCodes {
    pub(crate) too_short: u32,
    pub(crate) no_match: u32,
    pub(crate) stack_oob: u32,
    pub(crate) header_too_short: u32,
    pub(crate) timeout: u32,
    pub(crate) invalid_arg: u32,
}

/// How a parser run by generated code ended, in one word: the low 3 bits say how, the rest is
/// the error, or the state and steps.
pub(crate) mod parse_end {
    /// The worker cannot run the generated code.
    pub(crate) const NOT_RUN: u64 = 0;
    /// Accepted (or `exit`).
    pub(crate) const ACCEPT: u64 = 1;
    /// Ended with error `r >> 3` (`u32::MAX`: `reject` without an error).
    pub(crate) const ERROR: u64 = 3;
    /// A panic of a closure called back (resumed by the caller before the word is read).
    pub(crate) const PANIC: u64 = 4;
    pub(crate) const TIMEOUT: u64 = 5;
    /// A transition went to no state (no case matched, or a state index out of range).
    pub(crate) const NO_MATCH: u64 = 6;
    /// The general loop takes the transition of state `r >> 3 & 0xffff_ffff` after `r >> 35`
    /// steps.
    pub(crate) const GENERAL: u64 = 7;
}

/// Parser states one pass may visit before `error.ParserTimeout`.
pub(crate) const MAX_PARSER_STEPS: u32 = 10_000;

/// The parser stage's state.
pub(crate) struct Parser {
    pub(crate) states: Vec<CBlock>,
    /// Per parser state: compiled select keys when all are at most 64 bits.
    pub(crate) select_keys: Vec<Option<Vec<XF>>>,
    /// Per parser state: the select cases as (mask, value) per key when they are all exact, masked
    /// or default (ranges and value sets take the interpreter's path).
    pub(crate) select_cases: Vec<Option<Vec<(Vec<(u64, u64)>, Next)>>>,
    /// Per parser state: its transition when the parser's hot loop takes it itself.
    pub(crate) lean_next: Vec<LeanNext>,
    /// Members of each value set: one match per element.
    pub(crate) value_sets: Vec<ArcSwap<Vec<Vec<FieldMatch>>>>,
    /// Parser states one pass may visit before `error.ParserTimeout`.
    pub(crate) max_steps: u32,
}

/// The controls' compiled bodies.
pub(crate) struct Controls {
    pub(crate) verify: CBlock,
    /// Headers whose extraction offset `verify` reads (reset at the start of every ingress pass).
    pub(crate) tracked_headers: Vec<usize>,
    pub(crate) ingress: CBlock,
    pub(crate) egress: CBlock,
    pub(crate) compute: CBlock,
    /// The whole parser (run instead of the hot loop), verify, ingress, egress and the deparser
    /// as native functions the pipeline calls directly (native backend; all `None` on closures).
    pub(crate) native: crate::native::stages::Stages,
    /// The lean frame of a fully generated pass (`pipeline/lane.rs`).
    pub(crate) lane: Option<Lane>,
}

/// What the lean frame of the native engine's common case (`pipeline/lane.rs`) runs of a
/// program, fixed when the program is loaded.
#[derive(Clone, Copy)]
pub(crate) struct Lane {
    /// The program's fused pass (its front, egress, compute and deparser are those below).
    pub(crate) pass: crate::native::stages::Pass,
    /// The pass's generated front (`crate::native::front`).
    pub(crate) front: crate::native::stages::FrontFn,
    /// The egress control (`pipeline::lane::no_stage` when it has no statements).
    pub(crate) egress: crate::native::stages::NativeFn,
    /// Compute and the deparser as one function, or the deparser alone when the compute control
    /// has no statements (`pipeline::lane::no_stage` when neither has any).
    pub(crate) back: crate::native::stages::NativeFn,
    /// `Engine::lane` for this program's shape: whether the front zeroes the slots, the egress
    /// control has code, the back's kind (none, not emitting, emitting).
    pub(crate) run: LaneFn,
}

/// `Engine::lane` for one program shape.
pub(crate) type LaneFn = fn(&Engine, &mut Worker, u32, &[u8], &mut Outputs);

/// The match-action stage's state: the tables and what applying them needs.
pub(crate) struct MatchAction {
    pub(crate) tables: Vec<TableRt>,
    pub(crate) key_layouts: Vec<Vec<(usize, usize)>>,
    /// Per table, per key: the compiled key expression when it is at most 64 bits.
    pub(crate) table_keys: Vec<Vec<Option<XF>>>,
    /// Tables implemented by an action selector: its hash algorithm and the indices of the selector
    /// keys.
    pub(crate) selectors: Vec<Option<(HashAlgo, Vec<usize>)>>,
    /// Per table: its key is one field of at most 64 bits (packed into the first key word).
    pub(crate) one_word_key: Vec<bool>,
    /// Per table: entries carry state a hit updates (direct counter or meter, idle timeout).
    pub(crate) entry_state: Vec<bool>,
    /// The actions' compiled bodies.
    pub(crate) actions: Vec<CBlock>,
    /// Per action: each word of each parameter, (slot, mask, parameter, word), low words first and
    /// the top word masked to the width (arguments go word by word into them, inline or not); every
    /// slot is the program's or the worker's sink slot after them.
    pub(crate) param_words: Vec<Vec<(u32, u64, u32, u32)>>,
    /// Per action: the write plan of a hit's inline arguments (built from `param_words`).
    pub(crate) arg_plans: Vec<crate::pipeline::match_action::arg_plan::ArgPlan>,
    /// Sequence number of table publications (odd while one is in progress); workers refresh their
    /// table snapshots when it moves.
    pub(crate) version: AtomicU64,
    pub(crate) publish_lock: Mutex<()>,
    /// Action profile members and groups (taken before any table's write lock).
    pub(crate) profiles: Mutex<crate::tables::profiles::ProfileStore>,
}

/// Extern instances and the v1model stateful objects.
pub(crate) struct Externs {
    pub(crate) instances: Vec<Box<dyn ExternObject>>,
    /// Per instance: the resolved method ids of the program's methods.
    pub(crate) methods: Vec<Vec<u32>>,
    pub(crate) registers: Vec<RegisterRt>,
    pub(crate) counters: Vec<Vec<(AtomicU64, AtomicU64)>>,
    pub(crate) meters: Vec<Vec<MeterCell>>,
}

/// The deparser stage's state.
pub(crate) struct Deparser {
    pub(crate) block: CBlock,
    /// `update_checksum`s over a whole header left to the deparser (see [`Deferred`]); bit i of
    /// `Worker::csum_pending` says entry i is due.
    pub(crate) deferred: Vec<Deferred>,
}

/// The packet replication engine's configuration, replaced whole by the control plane (RCU).
pub(crate) struct Replication {
    pub(crate) config: ArcSwap<Pre>,
    pub(crate) write: Mutex<()>,
}

/// Digests waiting for the control plane.
pub(crate) struct Digests {
    pub(crate) queue: Mutex<VecDeque<DigestMsg>>,
    pub(crate) pending: std::sync::atomic::AtomicBool,
}

/// Frames emitted by one call of [`Engine::process`]: `(port, bytes)`, stored in one reusable
/// buffer.
#[derive(Default, Debug)]
pub struct Outputs {
    pub data: Vec<u8>,
    pub frames: Vec<(u32, std::ops::Range<usize>)>,
}

impl Outputs {
    pub fn clear(&mut self) {
        self.data.clear();
        self.frames.clear();
    }
    pub fn push(&mut self, port: u32, bytes: &[u8]) {
        let s = self.data.len();
        self.data.extend_from_slice(bytes);
        self.frames.push((port, s..self.data.len()));
    }
    pub fn iter(&self) -> impl Iterator<Item = (u32, &[u8])> {
        self.frames.iter().map(|(p, r)| (*p, &self.data[r.clone()]))
    }
    pub fn len(&self) -> usize {
        self.frames.len()
    }
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }
}

/// A compiled expression of at most 64 bits.
pub(crate) type XF = Xf<Engine, Worker>;
/// A compiled statement.
pub(crate) type SF = Sf<Engine, Worker>;
/// A compiled statement list.
pub(crate) type CBlock = Block<Engine, Worker>;

/// A parser state's transition as the parser's hot loop takes it.
pub(crate) enum LeanNext {
    Goto(Next),
    /// A select on one narrow key (that cannot fail) with exact, masked or default cases: the key
    /// and (mask, value, next state) per case.
    SelectOne(XF, Vec<(u64, u64, Next)>),
    /// The same on two narrow keys (an instance type and an EtherType, a fragment offset and a
    /// protocol): both keys, then ([mask 0, value 0, mask 1, value 1], next state) per case.
    SelectTwo(XF, XF, Vec<([u64; 4], Next)>),
    /// Anything else: the general loop takes it.
    General,
}

/// An `update_checksum(cond, {all fields of header H but F}, F, csum16)` whose result nothing reads
/// before the deparser: when `cond` holds, the deparser computes it from H's emitted bytes and
/// writes it into the bytes and into F; whatever the deparser did not emit is computed from the
/// fields afterwards.
pub(crate) struct Deferred {
    pub header: usize,
    /// F's byte offset in H.
    pub f_off: usize,
    pub f_slot: usize,
    /// The checksum from the fields, and F's width mask.
    pub sum: XF,
    pub m: u64,
}

impl Engine {
    /// The backend this engine runs: [`crate::Backend::Native`] only when machine code was
    /// generated (it falls back to the closures where no code generator is available).
    pub fn backend(&self) -> crate::Backend {
        self.backend
    }
}

impl Worker {
    /// A worker for `engine`: its slots at the program's initial values, its statistics registered
    /// with the engine.
    pub fn new(engine: &Engine) -> Worker {
        // the program's slots and one sink slot (see `StdSlots`)
        let n = engine.prog.slots as usize + 1;
        let mut initial = vec![0u64; n];
        for (s, v) in &engine.prog.initial {
            if let Some(x) = initial.get_mut(*s as usize) {
                *x = *v;
            }
        }
        let stats = Arc::new(Stats {
            tables: (0..engine.prog.tables.len())
                .map(|_| Default::default())
                .collect(),
            ..Stats::default()
        });
        engine
            .worker_stats
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(stats.clone());
        Worker::build(
            initial,
            engine.prog.headers.len(),
            engine.match_action.tables.len(),
            stats,
        )
    }
}
