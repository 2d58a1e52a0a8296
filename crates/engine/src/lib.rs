//! The p4sec engine: executes a compiled program (`p4sec_ir::Program`) for the v1model architecture with
//! the semantics of BMv2 simple_switch.
//!
//! * [`Engine`] holds the program and all shared state (tables, registers, counters, meters, the packet
//!   replication engine, extern instances). It is `Sync`: workers share it; table writes publish new
//!   versions atomically (RCU) so packet processing never waits for the control plane.
//! * [`Worker`] holds per-thread, per-packet state that is reset, not reallocated, between packets.
//! * [`Engine::process`] runs one input packet to quiescence and appends the frames it emits to [`Outputs`].
//!
//! The packet's path, stage by stage: `pipeline.rs` (the v1model passes) runs `parser.rs` (parser states and
//! selects), `headers.rs` (extract, emit, the deparser's checksums), `match_action.rs` (table applies) and
//! `call.rs` (built-ins and extern calls) over the statements and expressions of `exec.rs`, compiled into
//! closures at load time by `compile.rs`. `control.rs` is the control-plane API.

pub mod bits;
mod call;
pub mod chunkvec;
mod compile;
mod control;
mod effects;
mod exec;
pub mod hash;
mod headers;
mod match_action;
pub mod meters;
mod parser;
mod pipeline;
mod pristine;
pub mod tables;
/// Externs for tests and the STF runner only (one breaks the extern interface on purpose): never in a
/// production switch. Enabled by `cfg(test)` or the `test-externs` feature.
#[cfg(any(test, feature = "test-externs"))]
pub mod test_externs;
pub mod tm;
mod tss;

use arc_swap::ArcSwap;
use effects::Effects;
use meters::MeterCell;
use p4sec_externs::iface::{BitBuf, ExternObject, ExternType, MethodSig};
use p4sec_ir::*;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tables::TableData;

/// The drop port of v1model.
pub const DROP_PORT: u64 = 511;
/// Bound on resubmit/recirculate/clone passes caused by one input packet: a guard against programs that
/// never stop recirculating, high enough for programs that recirculate once per payload byte (DeeP4R-style
/// scanning of a 1500-byte packet with the original waiting alongside takes about 3000 passes).
pub const MAX_PASSES: u32 = 8192;

pub struct TableRt {
    pub data: ArcSwap<TableData>,
    write: Mutex<()>,
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

#[derive(Default, Debug)]
pub struct Stats {
    pub packets_in: AtomicU64,
    pub packets_out: AtomicU64,
    pub dropped: AtomicU64,
    pub pass_limit: AtomicU64,
    pub assert_failures: AtomicU64,
    pub extern_faults: AtomicU64,
    /// Per table: (hits, misses).
    pub tables: Vec<(AtomicU64, AtomicU64)>,
}

/// Adds one to a counter that only its own worker writes: a plain load and store, no locked instruction.
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
}

/// A digest message: the digest's index in `Program::digests` and the values of its fields.
pub type DigestMsg = (u32, Vec<Value>);

/// A coarse monotonic clock in milliseconds (CLOCK_MONOTONIC_COARSE: a few nanoseconds to read, a few
/// milliseconds of resolution), for the last hits of entries with idle timeouts.
#[inline]
pub fn coarse_ms() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

pub struct Engine {
    pub prog: Arc<Program>,
    pub tables: Vec<TableRt>,
    key_layouts: Vec<Vec<(usize, usize)>>,
    /// Tables implemented by an action selector: its hash algorithm and the indices of the selector keys.
    selectors: Vec<Option<(HashAlgo, Vec<usize>)>>,
    /// Per table: its key is one field of at most 64 bits (packed into the first key word).
    pub(crate) one_word_key: Vec<bool>,
    /// Per table: entries carry state a hit updates (direct counter or meter, idle timeout).
    pub(crate) entry_state: Vec<bool>,
    /// Per action: each word of each parameter, (slot, mask, parameter, word), low words first and the top
    /// word masked to the width (arguments go word by word into them, inline or not); every slot is the
    /// program's or the worker's sink slot after them.
    pub(crate) param_words: Vec<Vec<(u32, u64, u32, u32)>>,
    registers: Vec<RegisterRt>,
    counters: Vec<Vec<(AtomicU64, AtomicU64)>>,
    meters: Vec<Vec<MeterCell>>,
    /// Members of each value set: one match per element.
    value_sets: Vec<ArcSwap<Vec<Vec<FieldMatch>>>>,
    pre: ArcSwap<Pre>,
    pre_write: Mutex<()>,
    externs: Vec<Box<dyn ExternObject>>,
    extern_methods: Vec<Vec<u32>>,
    digests: Mutex<VecDeque<DigestMsg>>,
    digests_pending: std::sync::atomic::AtomicBool,
    /// Sequence number of table publications (odd while one is in progress); workers refresh their table
    /// snapshots when it moves.
    tables_version: AtomicU64,
    publish_lock: Mutex<()>,
    /// Each worker's statistics (written only by that worker; summed by [`Engine::stats`]).
    worker_stats: Mutex<Vec<Arc<Stats>>>,
    /// Word ranges of header state (validity, fields, varbit lengths, stack indices), kept by E2E clones.
    header_ranges: Vec<(usize, usize)>,
    /// Per header: how to extract and emit it quickly (see [`headers::HeaderPlan`]).
    pub(crate) hplans: Vec<headers::HeaderPlan>,
    std_slots: pipeline::StdSlots,
    /// The program's blocks compiled into closures (see `compile.rs`).
    pub(crate) code: compile::Code,
    err_too_short: u32,
    err_no_match: u32,
    err_stack_oob: u32,
    err_header_too_short: u32,
    err_timeout: u32,
    err_invalid_arg: u32,
    max_parser_steps: u32,
}

/// Frames emitted by one call of [`Engine::process`]: `(port, bytes)`, stored in one reusable buffer.
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

/// Per-thread packet state, reused across packets.
pub struct Worker {
    pub(crate) slots: Vec<u64>,
    pub(crate) initial: Vec<u64>,
    /// The received bytes of the packet in the current pass, read where the caller (or a job) holds them.
    pub(crate) pkt: PktView,
    pub(crate) pkt_len: usize,
    pub(crate) cursor: usize,
    /// The unparsed bytes, when they are not still in place in `pkt` (see `payload_at`).
    pub(crate) payload: Vec<u8>,
    /// Where the payload starts in `pkt` while it was not copied out ([`NOT_IN_PKT`] once it lives in
    /// `payload`): most packets leave the pipeline with their payload untouched, so it is copied to the
    /// output straight from the input bytes.
    pub(crate) payload_at: usize,
    /// Per header: the byte offset in `pkt` it was extracted from by the fast path in this pass, or
    /// [`NO_OFFSET`] (kept up to date for the headers `Code::tracked_headers` lists).
    pub(crate) hdr_off: Vec<usize>,
    /// Deferred `update_checksum`s due in this egress pass (bits of `Code::deferred`).
    pub(crate) csum_pending: u64,
    pub(crate) out: Vec<u8>,
    pub(crate) bw: bits::BitWriter,
    pub(crate) scratch: Vec<u8>,
    pub(crate) bitbufs: Vec<BitBuf>,
    /// An extern method's return value (reused across calls).
    pub(crate) retbuf: BitBuf,
    pub(crate) fx: Effects,
    jobs: VecDeque<pipeline::Job>,
    pub(crate) rng: u64,
    pub(crate) perr: u32,
    pub(crate) cur_meter: Option<Arc<MeterCell>>,
    pub(crate) stats: Arc<Stats>,
    /// Snapshots of the tables this worker reads, and the engine's table version they belong to.
    pub(crate) tables: Vec<Option<Arc<TableData>>>,
    tables_version: u64,
    /// When `Some`, every packet's path is recorded here (parser states, tables, externs, decisions).
    pub trace: Option<Vec<String>>,
    /// The clock and the queue hand-over (see [`tm`]).
    pub(crate) tm: tm::WorkerTm,
}

/// A view of the bytes the current pass parses: the frame `Engine::process` was given, or a job's bytes (a
/// resubmitted or recirculated packet), read where they lie instead of copied into the worker. Outside a pass it
/// is empty.
pub(crate) struct PktView {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: a view only ever points at bytes borrowed for one `Engine::process` call on the thread that runs it
// (see `set`); a worker moved to another thread between calls holds the empty view.
unsafe impl Send for PktView {}

impl PktView {
    pub(crate) const EMPTY: PktView = PktView { ptr: std::ptr::NonNull::dangling(), len: 0 };

    /// View `bytes`.
    ///
    /// # Safety
    /// `bytes` must stay alive and unchanged until the view is [`reset`](PktView::reset) or set again.
    #[inline(always)]
    pub(crate) unsafe fn set(&mut self, bytes: &[u8]) {
        // a slice's pointer is never null
        self.ptr = std::ptr::NonNull::new(bytes.as_ptr() as *mut u8).unwrap_or(std::ptr::NonNull::dangling());
        self.len = bytes.len();
    }

    #[inline(always)]
    pub(crate) fn reset(&mut self) {
        *self = PktView::EMPTY;
    }
}

impl std::ops::Deref for PktView {
    type Target = [u8];
    #[inline(always)]
    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` and `len` come from a slice that is alive (see `set`), or are the empty view
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

/// `Worker::payload_at` when the payload lives in `Worker::payload`.
pub(crate) const NOT_IN_PKT: usize = usize::MAX;
/// `Worker::hdr_off` of a header not extracted (by the fast path) in this pass.
pub(crate) const NO_OFFSET: usize = usize::MAX;

impl Worker {
    /// Move the payload out of `pkt` into `payload` (before anything may change or keep it).
    #[inline]
    pub(crate) fn own_payload(&mut self) {
        if self.payload_at != NOT_IN_PKT {
            self.payload.clear();
            let at = self.payload_at.min(self.pkt.len());
            self.payload.extend_from_slice(&self.pkt[at..]);
            self.payload_at = NOT_IN_PKT;
        }
    }

    pub fn new(engine: &Engine) -> Worker {
        // the program's slots and one sink slot (see `StdSlots`)
        let n = engine.prog.slots as usize + 1;
        let mut initial = vec![0u64; n];
        for (s, v) in &engine.prog.initial {
            if let Some(x) = initial.get_mut(*s as usize) {
                *x = *v;
            }
        }
        let stats = Arc::new(Stats { tables: (0..engine.prog.tables.len()).map(|_| Default::default()).collect(), ..Stats::default() });
        engine.worker_stats.lock().unwrap_or_else(|p| p.into_inner()).push(stats.clone());
        Worker {
            slots: initial.clone(),
            initial,
            pkt: PktView::EMPTY,
            pkt_len: 0,
            cursor: 0,
            payload: Vec::with_capacity(2048),
            payload_at: NOT_IN_PKT,
            hdr_off: vec![NO_OFFSET; engine.prog.headers.len()],
            csum_pending: 0,
            out: Vec::with_capacity(2048),
            bw: bits::BitWriter::default(),
            scratch: Vec::with_capacity(256),
            bitbufs: vec![],
            retbuf: BitBuf::default(),
            fx: Effects::default(),
            jobs: VecDeque::new(),
            rng: 0x1234_5678_9abc_def1,
            perr: 0,
            cur_meter: None,
            stats,
            tables: vec![None; engine.tables.len()],
            tables_version: u64::MAX,
            trace: None,
            tm: tm::WorkerTm::default(),
        }
    }
    /// Enable or disable tracing of packet paths.
    pub fn set_trace(&mut self, on: bool) {
        self.trace = if on { Some(vec![]) } else { None };
    }
    pub fn take_trace(&mut self) -> Vec<String> {
        self.trace.as_mut().map(std::mem::take).unwrap_or_default()
    }
}

fn err_code(p: &Program, name: &str) -> u32 {
    p.error_code(name).unwrap_or(0)
}

impl Engine {
    /// Build the runtime for `prog`; extern instances are created from `externs` by type name.
    pub fn new(prog: Arc<Program>, externs: &[Box<dyn ExternType>]) -> Result<Engine, String> {
        let mut fast = (*prog).clone();
        fast.optimize();
        let prog = Arc::new(fast);
        let mut tables = vec![];
        let mut key_layouts = vec![];
        for t in &prog.tables {
            for e in &t.entries {
                tables::validate_entry(&prog, t, e)?;
            }
            let mut d = TableData::new(t)?;
            d.default_writes = match_action::param_writes(&prog, &d.default);
            tables.push(TableRt { data: ArcSwap::from_pointee(d), write: Mutex::new(()) });
            let mut off = 0;
            let mut l = vec![];
            for k in &t.keys {
                let w = words_for(k.width) as usize;
                l.push((off, w));
                off += w;
            }
            key_layouts.push(l);
        }
        let selectors = prog
            .tables
            .iter()
            .map(|t| match t.implementation {
                Implementation::ActionSelector(p) => {
                    let algo = prog.action_profiles.get(p as usize).and_then(|p| p.selector).unwrap_or(HashAlgo::Crc16);
                    Some((algo, t.keys.iter().enumerate().filter(|(_, k)| k.kind == MatchKind::Selector).map(|(i, _)| i).collect()))
                }
                _ => None,
            })
            .collect();
        let registers = prog
            .registers
            .iter()
            .map(|r| {
                let words = words_for(r.width) as usize;
                RegisterRt { size: r.size as usize, width: r.width, words, cells: (0..r.size as usize * words).map(|_| AtomicU64::new(0)).collect() }
            })
            .collect();
        let counters = prog.counters.iter().map(|c| (0..c.size).map(|_| (AtomicU64::new(0), AtomicU64::new(0))).collect()).collect();
        let meters = prog.meters.iter().map(|m| (0..m.size).map(|_| MeterCell::default()).collect()).collect();
        let value_sets = prog.value_sets.iter().map(|_| ArcSwap::from_pointee(vec![])).collect();
        let mut objs = vec![];
        let mut methods = vec![];
        for inst in &prog.externs {
            let ty = externs
                .iter()
                .find(|t| t.name() == inst.type_name)
                .ok_or_else(|| format!("extern `{}` (type `{}`) is not implemented by this switch", inst.name, inst.type_name))?;
            let args: Vec<BitBuf> = inst
                .ctor_args
                .iter()
                .map(|v| {
                    let mut b = BitBuf::zero(v.width);
                    let bytes: Vec<u8> = v.words.iter().rev().flat_map(|w| w.to_be_bytes()).collect();
                    b.set_bytes(&bytes);
                    b
                })
                .collect();
            let obj = ty.instantiate(&inst.name, &args)?;
            let mut ms = vec![];
            for m in &inst.methods {
                let sig = MethodSig { name: m.name.clone(), args: m.args.iter().map(|(d, w)| (call::dir_of(*d), *w)).collect(), ret: m.ret };
                ms.push(obj.resolve(&sig).map_err(|e| format!("extern `{}`: method `{}`: {e}", inst.name, m.name))?);
            }
            objs.push(obj);
            methods.push(ms);
        }
        let mut header_ranges = vec![];
        for h in &prog.headers {
            header_ranges.push((h.valid.slot as usize, 1));
            for f in &h.fields {
                header_ranges.push((f.loc.slot as usize, words_for(f.loc.width) as usize));
                if let Some(l) = f.varbit_len {
                    header_ranges.push((l.slot as usize, 1));
                }
            }
        }
        for s in &prog.stacks {
            header_ranges.push((s.next_index.slot as usize, 1));
        }
        let hplans = prog.headers.iter().map(headers::HeaderPlan::new).collect();
        let pristine = pristine::Pristine::analyse(&prog);
        let code = compile::compile(&compile::Cx { prog: &prog, externs: &objs, methods: &methods, pristine: &pristine });
        let one_word_key = prog.tables.iter().map(|t| matches!(&t.keys[..], [k] if k.width <= 64)).collect();
        let entry_state = prog.tables.iter().map(|t| t.direct_counter.is_some() || t.direct_meter.is_some() || t.support_timeout).collect();
        // a slot beyond the program's (a malformed program) becomes the worker's sink slot: parameter words are
        // written unchecked
        let param_words = prog.actions.iter().map(|a| match_action::param_word_layout(a).map(|(s, m, p, k)| (s.min(prog.slots), m, p, k)).collect()).collect();
        Ok(Engine {
            param_words,
            hplans,
            std_slots: pipeline::StdSlots::new(&prog),
            code,
            err_too_short: err_code(&prog, "PacketTooShort"),
            err_no_match: err_code(&prog, "NoMatch"),
            err_stack_oob: err_code(&prog, "StackOutOfBounds"),
            err_header_too_short: err_code(&prog, "HeaderTooShort"),
            err_timeout: err_code(&prog, "ParserTimeout"),
            err_invalid_arg: err_code(&prog, "ParserInvalidArgument"),
            max_parser_steps: 10_000,
            prog,
            tables,
            key_layouts,
            one_word_key,
            entry_state,
            selectors,
            registers,
            counters,
            meters,
            value_sets,
            pre: ArcSwap::from_pointee(Pre::default()),
            pre_write: Mutex::new(()),
            externs: objs,
            extern_methods: methods,
            digests: Mutex::new(VecDeque::new()),
            digests_pending: std::sync::atomic::AtomicBool::new(false),
            worker_stats: Mutex::new(vec![]),
            tables_version: AtomicU64::new(0),
            publish_lock: Mutex::new(()),
            header_ranges,
        })
    }
}

#[cfg(test)]
mod tests;
