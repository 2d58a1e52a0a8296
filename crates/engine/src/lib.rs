//! The p4sec engine: executes a compiled program (`p4sec_ir::Program`) for the v1model architecture with
//! the semantics of BMv2 simple_switch.
//!
//! * [`Engine`] holds the program and all shared state (tables, registers, counters, meters, the packet
//!   replication engine, extern instances). It is `Sync`: workers share it; table writes publish new
//!   versions atomically (RCU) so packet processing never waits for the control plane.
//! * [`Worker`] holds per-thread, per-packet state that is reset, not reallocated, between packets.
//! * [`Engine::process`] runs one input packet to quiescence and appends the frames it emits to [`Outputs`].

pub mod bits;
pub mod chunkvec;
mod compile;
mod effects;
mod exec;
mod pristine;
pub mod hash;
pub mod meters;
pub mod tables;
mod tss;
/// Externs for tests and the STF runner only (one breaks the extern interface on purpose): never in a
/// production switch. Enabled by `cfg(test)` or the `test-externs` feature.
#[cfg(any(test, feature = "test-externs"))]
pub mod test_externs;

use arc_swap::ArcSwap;
use effects::Effects;
use exec::Flow;
use meters::{MeterCell, MeterRates};
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

impl Pre {
    /// A new node in the first free handle (handles of deleted nodes are reused).
    fn add_node(&mut self, rid: u32, ports: Vec<u32>) -> u32 {
        match self.nodes.iter().position(Option::is_none) {
            Some(h) => {
                self.nodes[h] = Some((rid, ports));
                h as u32
            }
            None => {
                self.nodes.push(Some((rid, ports)));
                self.nodes.len() as u32 - 1
            }
        }
    }
    /// Delete the nodes no group refers to any more (after a group lost them).
    fn release_nodes(&mut self, handles: &[u32]) {
        for &h in handles {
            if !self.groups.values().any(|g| g.contains(&h)) {
                if let Some(n) = self.nodes.get_mut(h as usize) {
                    *n = None;
                }
            }
        }
        while matches!(self.nodes.last(), Some(None)) {
            self.nodes.pop();
        }
    }
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
    /// Per header: how to extract and emit it quickly (see [`exec::HeaderPlan`]).
    pub(crate) hplans: Vec<exec::HeaderPlan>,
    std_slots: StdSlots,
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


/// A packet instance waiting to be processed.
enum Job {
    /// Enter the parser with these bytes.
    Ingress { bytes: Vec<u8>, port: u32, itype: u32, preserved: Vec<(u32, u64)> },
    /// Enter egress with this state (multicast copies, I2E/E2E clones).
    Egress { slots: Vec<u64>, payload: Vec<u8>, pkt_len: usize, port: u32, rid: u32, itype: u32 },
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
    pub(crate) bw: exec::BitWriter,
    pub(crate) scratch: Vec<u8>,
    pub(crate) bitbufs: Vec<BitBuf>,
    /// An extern method's return value (reused across calls).
    pub(crate) retbuf: BitBuf,
    pub(crate) fx: Effects,
    jobs: VecDeque<Job>,
    pub(crate) rng: u64,
    pub(crate) perr: u32,
    pub(crate) cur_meter: Option<Arc<MeterCell>>,
    pub(crate) stats: Arc<Stats>,
    /// Snapshots of the tables this worker reads, and the engine's table version they belong to.
    pub(crate) tables: Vec<Option<Arc<TableData>>>,
    tables_version: u64,
    /// When `Some`, every packet's path is recorded here (parser states, tables, externs, decisions).
    pub trace: Option<Vec<String>>,
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
            bw: exec::BitWriter::default(),
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

/// The slot words a call of its default action writes (`TableData::default_writes`): only slots of the program,
/// which `Engine::process` checks the worker has, so they are written unchecked. Padded to a multiple of four
/// with writes of zero into the worker's sink slot (the one after the program's), so that they are written
/// four at a time.
fn param_writes(p: &Program, call: &ActionCall) -> Vec<(u32, u64)> {
    let mut v: Vec<(u32, u64)> = p.actions.get(call.action as usize).map(|a| arg_words(a, &call.args).filter(|(s, _)| *s < p.slots).collect()).unwrap_or_default();
    while v.len() % 4 != 0 {
        v.push((p.slots, 0));
    }
    v
}

/// The words of `args` for the parameters of `a`: (slot, word), each parameter's top word masked to its width.
pub(crate) fn arg_words<'a>(a: &'a Action, args: &'a [Value]) -> impl Iterator<Item = (u32, u64)> + 'a {
    param_word_layout(a).filter_map(|(s, m, p, k)| arg_word(args, p, k, m).map(|v| (s, v)))
}

/// Word `k` of argument `p` (0 past the argument's words) under the mask `m`; `None` if there is no such
/// argument.
#[inline(always)]
pub(crate) fn arg_word(args: &[Value], p: u32, k: u32, m: u64) -> Option<u64> {
    args.get(p as usize).map(|v| v.words.get(k as usize).copied().unwrap_or(0) & m)
}

/// Each word of each parameter of `a`: (slot, mask, parameter, word), low words first, the top word's mask the
/// parameter's width.
fn param_word_layout(a: &Action) -> impl Iterator<Item = (u32, u64, u32, u32)> + '_ {
    a.params.iter().enumerate().flat_map(|(pi, prm)| {
        let n = words_for(prm.loc.width);
        (0..n).map(move |k| (prm.loc.slot + k, if k + 1 == n { bits::mask64(prm.loc.width - 64 * k) } else { u64::MAX }, pi as u32, k))
    })
}

/// Where the standard metadata fields the pipeline frame sets and reads per packet live: (slot, mask of the
/// width). A field the program's standard_metadata_t does not have maps to the worker's sink slot (the one
/// after the program's slots) with mask 0.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StdSlots {
    ingress_port: (usize, u64),
    instance_type: (usize, u64),
    packet_length: (usize, u64),
    egress_port: (usize, u64),
    egress_spec: (usize, u64),
    egress_rid: (usize, u64),
    mcast_grp: (usize, u64),
}

impl StdSlots {
    fn new(p: &Program) -> StdSlots {
        let sink = p.slots as usize;
        let at = |l: Loc| if l.width == 0 { (sink, 0) } else { (l.slot as usize, bits::mask64(l.width)) };
        let sm = &p.std_meta;
        StdSlots {
            ingress_port: at(sm.ingress_port),
            instance_type: at(sm.instance_type),
            packet_length: at(sm.packet_length),
            egress_port: at(sm.egress_port),
            egress_spec: at(sm.egress_spec),
            egress_rid: at(sm.egress_rid),
            mcast_grp: at(sm.mcast_grp),
        }
    }
}

// `put` and `get` run only inside `Engine::process`, which checks on entry that the worker's slots are
// `Program::slots + 1` words: every `StdSlots` index is below that.
#[inline(always)]
fn put(slots: &mut [u64], (s, m): (usize, u64), v: u64) {
    debug_assert!(s < slots.len());
    // SAFETY: see above
    unsafe { *slots.get_unchecked_mut(s) = v & m }
}

#[inline(always)]
fn get(slots: &[u64], (s, m): (usize, u64)) -> u64 {
    debug_assert!(s < slots.len());
    // SAFETY: see above
    unsafe { *slots.get_unchecked(s) & m }
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
            d.default_writes = param_writes(&prog, &d.default);
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
                let sig = MethodSig {
                    name: m.name.clone(),
                    args: m
                        .args
                        .iter()
                        .map(|(d, w)| (exec::dir_of(*d), *w))
                        .collect(),
                    ret: m.ret,
                };
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
        let hplans = prog.headers.iter().map(exec::HeaderPlan::new).collect();
        let pristine = pristine::Pristine::analyse(&prog);
        let code = compile::compile(&compile::Cx { prog: &prog, externs: &objs, methods: &methods, pristine: &pristine });
        let one_word_key = prog.tables.iter().map(|t| matches!(&t.keys[..], [k] if k.width <= 64)).collect();
        let entry_state = prog.tables.iter().map(|t| t.direct_counter.is_some() || t.direct_meter.is_some() || t.support_timeout).collect();
        // a slot beyond the program's (a malformed program) becomes the worker's sink slot: parameter words are
        // written unchecked
        let param_words = prog.actions.iter().map(|a| param_word_layout(a).map(|(s, m, p, k)| (s.min(prog.slots), m, p, k)).collect()).collect();
        Ok(Engine {
            param_words,
            hplans,
            std_slots: StdSlots::new(&prog),
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

    /// Packet statistics summed over every worker created for this engine.
    pub fn stats(&self) -> StatsSnapshot {
        let mut t = StatsSnapshot::default();
        for s in self.worker_stats.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            t.packets_in += s.packets_in.load(Ordering::Relaxed);
            t.packets_out += s.packets_out.load(Ordering::Relaxed);
            t.dropped += s.dropped.load(Ordering::Relaxed);
            t.pass_limit += s.pass_limit.load(Ordering::Relaxed);
            t.assert_failures += s.assert_failures.load(Ordering::Relaxed);
            t.extern_faults += s.extern_faults.load(Ordering::Relaxed);
        }
        t
    }

    /// (hits, misses) of table `ti`, summed over every worker.
    pub fn table_stats(&self, ti: usize) -> (u64, u64) {
        let mut t = (0, 0);
        for s in self.worker_stats.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            if let Some((h, m)) = s.tables.get(ti) {
                t.0 += h.load(Ordering::Relaxed);
                t.1 += m.load(Ordering::Relaxed);
            }
        }
        t
    }

    pub fn program(&self) -> &Program {
        &self.prog
    }

    fn push_digest(&self, id: u32, vals: Vec<Value>) {
        let mut q = self.digests.lock().unwrap_or_else(|p| p.into_inner());
        if q.len() < 65536 {
            q.push_back((id, vals));
            self.digests_pending.store(true, Ordering::Release);
        }
    }

    /// Are digest messages waiting? (One atomic load: cheap to ask after every packet.)
    pub fn has_digests(&self) -> bool {
        self.digests_pending.load(Ordering::Acquire)
    }

    /// Take the digest messages produced so far.
    pub fn drain_digests(&self) -> Vec<DigestMsg> {
        let mut q = self.digests.lock().unwrap_or_else(|p| p.into_inner());
        self.digests_pending.store(false, Ordering::Release);
        q.drain(..).collect()
    }

    // ------------------------------------------------------------ the v1model pipeline

    /// Process one frame received on `in_port`, with every copy, resubmission and recirculation it causes.
    pub fn process(&self, w: &mut Worker, in_port: u32, frame: &[u8], out: &mut Outputs) {
        // the standard metadata slots (`StdSlots`) are read and written unchecked below this point
        assert_eq!(w.slots.len(), self.prog.slots as usize + 1, "a worker of another engine");
        if self.tables_version.load(Ordering::Acquire) != w.tables_version {
            std::hint::cold_path();
            self.refresh_tables(w);
        }
        bump(&w.stats.packets_in);
        if !w.jobs.is_empty() {
            std::hint::cold_path();
            w.jobs.clear();
        }
        self.ingress_pass(w, frame, in_port, 0, &[], out);
        if !w.jobs.is_empty() {
            std::hint::cold_path();
            self.run_jobs(w, out);
        }
        // `frame` ends here
        w.pkt.reset();
    }

    /// The copies, resubmissions and recirculations a frame caused, in order.
    #[cold]
    #[inline(never)]
    fn run_jobs(&self, w: &mut Worker, out: &mut Outputs) {
        let mut passes = 0u32;
        while let Some(job) = w.jobs.pop_front() {
            passes += 1;
            if passes > MAX_PASSES {
                bump(&w.stats.pass_limit);
                w.jobs.clear();
                break;
            }
            match job {
                Job::Ingress { bytes, port, itype, preserved } => {
                    self.ingress_pass(w, &bytes, port, itype, &preserved, out);
                    // the job's bytes end here
                    w.pkt.reset();
                }
                Job::Egress { slots, payload, pkt_len, port, rid, itype } => {
                    w.slots.copy_from_slice(&slots);
                    w.payload.clear();
                    w.payload.extend_from_slice(&payload);
                    w.payload_at = NOT_IN_PKT;
                    w.pkt_len = pkt_len;
                    self.egress_pass(w, port, rid, itype, out);
                }
            }
        }
    }

    fn set(&self, w: &mut Worker, l: Loc, v: u64) {
        if l.width > 0 {
            self.store(w, l, v);
        }
    }
    fn get(&self, w: &Worker, l: Loc) -> u64 {
        if l.width > 0 {
            self.load(w, l)
        } else {
            0
        }
    }

    fn preserved(&self, w: &Worker, field_list: Option<u32>) -> Vec<(u32, u64)> {
        let mut v = vec![];
        if let Some(id) = field_list {
            if let Some(fl) = self.prog.field_lists.iter().find(|f| f.id == id) {
                for l in &fl.fields {
                    for k in 0..words_for(l.width) {
                        v.push((l.slot + k, w.slots[(l.slot + k) as usize]));
                    }
                }
            }
        }
        v
    }

    #[inline(always)]
    fn ingress_pass(&self, w: &mut Worker, bytes: &[u8], port: u32, itype: u32, preserved: &[(u32, u64)], out: &mut Outputs) {
        w.slots.copy_from_slice(&w.initial);
        // SAFETY: `bytes` outlives the pass, and `Engine::process` resets the view before it returns
        unsafe { w.pkt.set(bytes) };
        w.pkt_len = bytes.len();
        w.cursor = 0;
        w.perr = 0;
        if w.fx.any() {
            w.fx = Effects::default();
        }
        for &h in &self.code.tracked_headers {
            w.hdr_off[h] = NO_OFFSET;
        }
        let ss = self.std_slots;
        put(&mut w.slots, ss.ingress_port, port as u64);
        put(&mut w.slots, ss.instance_type, itype as u64);
        put(&mut w.slots, ss.packet_length, bytes.len() as u64);
        for (s, v) in preserved {
            w.slots[*s as usize] = *v;
        }
        self.run_parser(w);
        self.run_block(w, &self.code.verify);
        if let Some(t) = w.trace.as_mut() {
            std::hint::cold_path();
            t.push(format!("ingress (port {port}, instance_type {itype})"));
        }
        self.run_block(w, &self.code.ingress);
        if w.fx.any() {
            if w.fx.dropped() {
                self.drop_packet(w, "dropped in ingress");
                return;
            }
            // 1. ingress-to-egress clone, 3. resubmit (nothing else is sent)
            if (w.fx.i2e_clone().is_some() || w.fx.resubmission().is_some()) && self.ingress_effects(w, port) {
                return;
            }
        }
        // 4. multicast
        let grp = get(&w.slots, ss.mcast_grp) as u32;
        if grp != 0 {
            self.multicast(w, grp);
            return;
        }
        // 5. drop or unicast
        let spec = get(&w.slots, ss.egress_spec);
        if spec == DROP_PORT {
            self.drop_packet(w, "egress_spec is the drop port");
            return;
        }
        self.egress_pass(w, spec as u32, 0, itype, out);
    }

    /// An ingress-to-egress clone (the original bytes, parsed again, metadata reset except the field list)
    /// and a resubmission the ingress asked for; true when the packet was resubmitted (nothing else is sent).
    #[cold]
    #[inline(never)]
    fn ingress_effects(&self, w: &mut Worker, port: u32) -> bool {
        let sm = &self.prog.std_meta;
        let fx = w.fx;
        if let Some((session, fl)) = fx.i2e_clone() {
            if let Some(&cport) = self.pre.load().mirror.get(&session) {
                let keep = self.preserved(w, fl);
                w.own_payload();
                let saved = (std::mem::take(&mut w.slots), std::mem::take(&mut w.payload), w.pkt_len);
                w.slots = saved.0.clone();
                // re-parse the original input in a scratch pass to build the clone's state
                let original_len = w.pkt.len();
                w.slots.copy_from_slice(&w.initial);
                w.cursor = 0;
                self.set(w, sm.ingress_port, port as u64);
                self.set(w, sm.packet_length, original_len as u64);
                for (s, v) in &keep {
                    w.slots[*s as usize] = *v;
                }
                self.run_parser(w);
                self.set(w, sm.parser_error, 0);
                w.own_payload();
                let clone_slots = w.slots.clone();
                let clone_payload = w.payload.clone();
                w.jobs.push_back(Job::Egress { slots: clone_slots, payload: clone_payload, pkt_len: original_len, port: cport, rid: 0, itype: 1 });
                w.slots = saved.0;
                w.payload = saved.1;
                w.payload_at = NOT_IN_PKT;
                w.pkt_len = saved.2;
            }
        }
        if let Some(fl) = fx.resubmission() {
            let keep = self.preserved(w, fl);
            w.jobs.push_back(Job::Ingress { bytes: w.pkt.to_vec(), port, itype: 6, preserved: keep });
            return true;
        }
        false
    }

    /// One copy of the packet per port of multicast group `grp`, each to its egress pass.
    #[cold]
    #[inline(never)]
    fn multicast(&self, w: &mut Worker, grp: u32) {
        w.own_payload();
        let pre = self.pre.load();
        if let Some(nodes) = pre.groups.get(&grp) {
            for h in nodes {
                if let Some(Some((rid, ports))) = pre.nodes.get(*h as usize) {
                    for p in ports {
                        w.jobs.push_back(Job::Egress { slots: w.slots.clone(), payload: w.payload.clone(), pkt_len: w.pkt_len, port: *p, rid: *rid, itype: 5 });
                    }
                }
            }
        }
    }

    #[inline]
    fn run_block(&self, w: &mut Worker, b: &compile::CBlock) {
        if b.is_empty() {
            return;
        }
        match b.run(self, w) {
            Flow::Reject(_) | Flow::Next | Flow::Exit | Flow::Break(_) => {}
        }
        w.perr = 0;
    }

    #[cold]
    #[inline(never)]
    fn drop_packet(&self, w: &mut Worker, why: &str) {
        bump(&w.stats.dropped);
        if let Some(t) = w.trace.as_mut() {
            std::hint::cold_path();
            t.push(format!("drop: {why}"));
        }
    }

    #[inline(always)]
    fn egress_pass(&self, w: &mut Worker, port: u32, rid: u32, itype: u32, out: &mut Outputs) {
        let ss = self.std_slots;
        put(&mut w.slots, ss.egress_port, port as u64);
        put(&mut w.slots, ss.egress_spec, 0);
        put(&mut w.slots, ss.egress_rid, rid as u64);
        put(&mut w.slots, ss.instance_type, itype as u64);
        if w.fx.any() {
            w.fx = w.fx.for_egress();
        }
        if let Some(t) = w.trace.as_mut() {
            std::hint::cold_path();
            t.push(format!("egress (port {port}, instance_type {itype})"));
        }
        self.run_block(w, &self.code.egress);
        let (mut truncate, mut recirculate) = (None, None);
        if w.fx.any() {
            if w.fx.dropped() {
                self.drop_packet(w, "dropped in egress");
                return;
            }
            (truncate, recirculate) = (w.fx.truncation(), w.fx.recirculation());
            if let Some((session, fl)) = w.fx.e2e_clone() {
                self.clone_e2e(w, session, fl);
            }
        }
        if get(&w.slots, ss.egress_spec) == DROP_PORT {
            self.drop_packet(w, "marked to drop in egress");
            return;
        }
        w.csum_pending = 0;
        self.run_block(w, &self.code.compute);
        // deparser: headers and payload are appended straight to the output buffer
        std::mem::swap(&mut w.out, &mut out.data);
        let start = w.out.len();
        w.bw = exec::BitWriter::default();
        self.run_block(w, &self.code.deparser);
        if w.csum_pending != 0 {
            compile::settle_checksums(self, w);
        }
        let mut bw = w.bw;
        bw.finish(&mut w.out);
        let payload = if w.payload_at != NOT_IN_PKT { &w.pkt[w.payload_at.min(w.pkt.len())..] } else { &w.payload[..] };
        w.out.extend_from_slice(payload);
        if let Some(n) = truncate {
            w.out.truncate(start + n);
        }
        if let Some(fl) = recirculate {
            self.recirculate(w, start, fl, out);
            return;
        }
        std::mem::swap(&mut w.out, &mut out.data);
        bump(&w.stats.packets_out);
        if let Some(t) = w.trace.as_mut() {
            std::hint::cold_path();
            t.push(format!("emit {} bytes on port {port}", out.data.len() - start));
        }
        out.frames.push((port, start..out.data.len()));
    }

    /// An egress-to-egress clone: the headers as they are now, metadata reset except the field list.
    #[cold]
    #[inline(never)]
    fn clone_e2e(&self, w: &mut Worker, session: u32, fl: Option<u32>) {
        let Some(&cport) = self.pre.load().mirror.get(&session) else { return };
        w.own_payload();
        let keep = self.preserved(w, fl);
        let mut slots = w.initial.clone();
        for &(s, n) in &self.header_ranges {
            slots[s..s + n].copy_from_slice(&w.slots[s..s + n]);
        }
        for (s, v) in keep {
            slots[s as usize] = v;
        }
        let ip = self.prog.std_meta.ingress_port;
        if ip.width > 0 {
            slots[ip.slot as usize] = w.slots[ip.slot as usize];
        }
        w.jobs.push_back(Job::Egress { slots, payload: w.payload.clone(), pkt_len: w.pkt_len, port: cport, rid: 0, itype: 2 });
    }

    /// The deparsed packet (in `w.out` from `start`, while `w.out` holds the output buffer) goes back to the
    /// parser instead of out.
    #[cold]
    #[inline(never)]
    fn recirculate(&self, w: &mut Worker, start: usize, fl: Option<u32>, out: &mut Outputs) {
        let bytes = w.out[start..].to_vec();
        w.out.truncate(start);
        std::mem::swap(&mut w.out, &mut out.data);
        let keep = self.preserved(w, fl);
        let ip = self.get(w, self.prog.std_meta.ingress_port) as u32;
        w.jobs.push_back(Job::Ingress { bytes, port: ip, itype: 4, preserved: keep });
    }

    // ------------------------------------------------------------ control plane

    pub fn table_index(&self, name: &str) -> Option<usize> {
        self.prog.tables.iter().position(|t| t.name == name)
    }

    fn table(&self, ti: usize) -> Result<(&Table, &TableRt), String> {
        match (self.prog.tables.get(ti), self.tables.get(ti)) {
            (Some(t), Some(rt)) => Ok((t, rt)),
            _ => Err(format!("no table with index {ti}")),
        }
    }

    /// Take one consistent view of every table (a sequence lock: the version is odd while a publication is
    /// in progress, and a view is kept only if the version did not move while it was taken).
    #[cold]
    fn refresh_tables(&self, w: &mut Worker) {
        loop {
            let v = self.tables_version.load(Ordering::Acquire);
            if v & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            for (snap, rt) in w.tables.iter_mut().zip(&self.tables) {
                *snap = Some(rt.data.load_full());
            }
            if self.tables_version.load(Ordering::Acquire) == v {
                w.tables_version = v;
                return;
            }
        }
    }

    /// Publish new versions of several tables so that no packet sees some of them without the others.
    fn publish(&self, versions: Vec<(usize, TableData)>) {
        let versions: Vec<(usize, TableData)> = versions
            .into_iter()
            .map(|(ti, mut d)| {
                d.default_writes = param_writes(&self.prog, &d.default);
                (ti, d)
            })
            .collect();
        let _g = self.publish_lock.lock().unwrap_or_else(|p| p.into_inner());
        self.tables_version.fetch_add(1, Ordering::AcqRel);
        for (ti, d) in versions {
            self.tables[ti].data.store(Arc::new(d));
        }
        self.tables_version.fetch_add(1, Ordering::Release);
    }

    /// Apply a batch of changes to one table and publish them as one new version.
    pub fn table_update(&self, ti: usize, f: impl FnOnce(&Table, &mut TableData) -> Result<(), String>) -> Result<(), String> {
        let (t, rt) = self.table(ti)?;
        let _g = rt.write.lock().unwrap_or_else(|p| p.into_inner());
        let mut d = (**rt.data.load()).clone();
        f(t, &mut d)?;
        self.publish(vec![(ti, d)]);
        Ok(())
    }

    /// Apply changes to several tables all or nothing: `f` is called once per table (in the order given) on
    /// a copy of its current contents; if every call succeeds, all the new versions are published together
    /// (a packet sees either none or all of them), otherwise nothing changes.
    pub fn tables_update_atomic(&self, tables: &[usize], mut f: impl FnMut(usize, &Table, &mut TableData) -> Result<(), String>) -> Result<(), String> {
        let mut order: Vec<usize> = tables.to_vec();
        order.sort_unstable();
        order.dedup();
        for &ti in &order {
            self.table(ti)?;
        }
        // the write locks in index order (no deadlock with other writers)
        let guards: Vec<_> = order.iter().map(|&ti| self.tables[ti].write.lock().unwrap_or_else(|p| p.into_inner())).collect();
        let mut versions = vec![];
        for &ti in tables {
            let t = &self.prog.tables[ti];
            let mut d = match versions.iter().position(|(x, _)| *x == ti) {
                Some(p) => versions.remove(p).1,
                None => (**self.tables[ti].data.load()).clone(),
            };
            f(ti, t, &mut d)?;
            versions.push((ti, d));
        }
        self.publish(versions);
        drop(guards);
        Ok(())
    }

    pub fn table_insert(&self, ti: usize, e: TableEntry) -> Result<(), String> {
        let (t, _) = self.table(ti)?;
        if t.entries_are_const {
            return Err(format!("table `{}` has const entries and cannot be changed", t.name));
        }
        tables::validate_entry(&self.prog, t, &e)?;
        self.table_update(ti, |t, d| d.insert(t, e))
    }

    pub fn table_modify(&self, ti: usize, e: TableEntry) -> Result<(), String> {
        let (t, _) = self.table(ti)?;
        if t.entries_are_const {
            return Err(format!("table `{}` has const entries and cannot be changed", t.name));
        }
        tables::validate_entry(&self.prog, t, &e)?;
        self.table_update(ti, |t, d| d.modify(t, e))
    }

    pub fn table_delete(&self, ti: usize, e: &TableEntry) -> Result<(), String> {
        let (t, _) = self.table(ti)?;
        if t.entries_are_const {
            return Err(format!("table `{}` has const entries and cannot be changed", t.name));
        }
        self.table_update(ti, |t, d| d.delete(t, e).map(|_| ()))
    }

    pub fn table_set_default(&self, ti: usize, a: ActionCall) -> Result<(), String> {
        let (t, _) = self.table(ti)?;
        if t.default_is_const && a != t.default_action {
            return Err(format!("table `{}` has a const default action", t.name));
        }
        tables::validate_action(&self.prog, t, &a, true)?;
        self.table_update(ti, |_, d| {
            d.default = a;
            Ok(())
        })
    }

    pub fn table_default(&self, ti: usize) -> Result<ActionCall, String> {
        let (_, rt) = self.table(ti)?;
        Ok(rt.data.load().default.clone())
    }

    /// Installed entries with their direct counter values (packets, bytes).
    pub fn table_entries(&self, ti: usize) -> Result<Vec<(TableEntry, u64, u64)>, String> {
        let (_, rt) = self.table(ti)?;
        Ok(rt.data.load().entries.iter().map(|e| (e.entry.clone(), e.packets.load(Ordering::Relaxed), e.bytes.load(Ordering::Relaxed))).collect())
    }

    /// The current contents of table `ti` (installed entries with their counters, meters and action
    /// profile references).
    pub fn table_snapshot(&self, ti: usize) -> Result<Arc<TableData>, String> {
        let (_, rt) = self.table(ti)?;
        Ok(rt.data.load_full())
    }

    /// Set the direct counter of one installed entry (no new table version: the counters are shared cells).
    pub fn table_entry_counters_set(&self, ti: usize, e: &TableEntry, packets: u64, bytes: u64) -> Result<(), String> {
        let (t, rt) = self.table(ti)?;
        if t.direct_counter.is_none() {
            return Err(format!("table `{}` has no direct counter", t.name));
        }
        let d = rt.data.load();
        let i = d.find(t, e).ok_or_else(|| format!("table `{}`: no entry with this match", t.name))?;
        d.entries[i].packets.store(packets, Ordering::Relaxed);
        d.entries[i].bytes.store(bytes, Ordering::Relaxed);
        Ok(())
    }

    pub fn table_clear(&self, ti: usize) -> Result<(), String> {
        self.table_update(ti, |t, d| {
            d.clear(t);
            Ok(())
        })
    }

    pub fn mirroring_add(&self, session: u32, port: u32) {
        let _g = self.pre_write.lock().unwrap_or_else(|p| p.into_inner());
        let mut p = (**self.pre.load()).clone();
        p.mirror.insert(session, port);
        self.pre.store(Arc::new(p));
    }

    pub fn mirroring_delete(&self, session: u32) -> Result<(), String> {
        let _g = self.pre_write.lock().unwrap_or_else(|p| p.into_inner());
        let mut p = (**self.pre.load()).clone();
        p.mirror.remove(&session).ok_or_else(|| format!("no mirror session {session}"))?;
        self.pre.store(Arc::new(p));
        Ok(())
    }

    pub fn pre(&self) -> Arc<Pre> {
        self.pre.load_full()
    }

    pub fn mc_group_create(&self, grp: u32) -> Result<(), String> {
        let _g = self.pre_write.lock().unwrap_or_else(|p| p.into_inner());
        let mut p = (**self.pre.load()).clone();
        if p.groups.contains_key(&grp) {
            return Err(format!("multicast group {grp} already exists"));
        }
        p.groups.insert(grp, vec![]);
        self.pre.store(Arc::new(p));
        Ok(())
    }

    pub fn mc_group_delete(&self, grp: u32) -> Result<(), String> {
        let _g = self.pre_write.lock().unwrap_or_else(|p| p.into_inner());
        let mut p = (**self.pre.load()).clone();
        let old = p.groups.remove(&grp).ok_or_else(|| format!("no multicast group {grp}"))?;
        p.release_nodes(&old);
        self.pre.store(Arc::new(p));
        Ok(())
    }

    /// Create a replication node; returns its handle (0, 1, 2, ... in creation order).
    pub fn mc_node_create(&self, rid: u32, ports: Vec<u32>) -> u32 {
        let _g = self.pre_write.lock().unwrap_or_else(|p| p.into_inner());
        let mut p = (**self.pre.load()).clone();
        let h = p.add_node(rid, ports);
        self.pre.store(Arc::new(p));
        h
    }

    pub fn mc_node_associate(&self, grp: u32, node: u32) -> Result<(), String> {
        let _g = self.pre_write.lock().unwrap_or_else(|p| p.into_inner());
        let mut p = (**self.pre.load()).clone();
        if !matches!(p.nodes.get(node as usize), Some(Some(_))) {
            return Err(format!("no replication node {node}"));
        }
        p.groups.get_mut(&grp).ok_or_else(|| format!("no multicast group {grp}"))?.push(node);
        self.pre.store(Arc::new(p));
        Ok(())
    }

    /// Replace a multicast group's replicas with `(rid, port)` pairs (the P4Runtime view of the PRE).
    pub fn mc_group_set(&self, grp: u32, replicas: &[(u32, u32)]) {
        let _g = self.pre_write.lock().unwrap_or_else(|p| p.into_inner());
        let mut p = (**self.pre.load()).clone();
        let old = p.groups.remove(&grp).unwrap_or_default();
        p.release_nodes(&old);
        let handles = replicas.iter().map(|(rid, port)| p.add_node(*rid, vec![*port])).collect();
        p.groups.insert(grp, handles);
        self.pre.store(Arc::new(p));
    }

    pub fn register_read(&self, reg: usize, index: usize) -> Result<Value, String> {
        let r = self.registers.get(reg).ok_or_else(|| format!("no register {reg}"))?;
        if index >= r.size {
            return Err(format!("register index {index} is out of range (size {})", r.size));
        }
        let words = (0..r.words).map(|k| r.cells[index * r.words + k].load(Ordering::Relaxed)).collect();
        Ok(Value { width: r.width, words })
    }

    pub fn register_write(&self, reg: usize, index: usize, v: &Value) -> Result<(), String> {
        let r = self.registers.get(reg).ok_or_else(|| format!("no register {reg}"))?;
        if index >= r.size {
            return Err(format!("register index {index} is out of range (size {})", r.size));
        }
        for k in 0..r.words {
            let mut x = v.words.get(k).copied().unwrap_or(0);
            let lo = k as u32 * 64;
            if r.width - lo < 64 {
                x &= bits::mask64(r.width - lo);
            }
            r.cells[index * r.words + k].store(x, Ordering::Relaxed);
        }
        Ok(())
    }

    pub fn register_size(&self, reg: usize) -> Option<usize> {
        self.registers.get(reg).map(|r| r.size)
    }

    /// (packets, bytes) of an indexed counter cell.
    pub fn counter_read(&self, counter: usize, index: usize) -> Result<(u64, u64), String> {
        let c = self.counters.get(counter).ok_or_else(|| format!("no counter {counter}"))?;
        let cell = c.get(index).ok_or_else(|| format!("counter index {index} is out of range (size {})", c.len()))?;
        Ok((cell.0.load(Ordering::Relaxed), cell.1.load(Ordering::Relaxed)))
    }

    pub fn counter_write(&self, counter: usize, index: usize, packets: u64, bytes: u64) -> Result<(), String> {
        let c = self.counters.get(counter).ok_or_else(|| format!("no counter {counter}"))?;
        let cell = c.get(index).ok_or_else(|| format!("counter index {index} is out of range (size {})", c.len()))?;
        cell.0.store(packets, Ordering::Relaxed);
        cell.1.store(bytes, Ordering::Relaxed);
        Ok(())
    }

    pub fn meter_set_rates(&self, meter: usize, index: usize, rates: Option<MeterRates>) -> Result<(), String> {
        let m = self.meters.get(meter).ok_or_else(|| format!("no meter {meter}"))?;
        m.get(index).ok_or_else(|| format!("meter index {index} is out of range"))?.configure(rates);
        Ok(())
    }

    pub fn meter_rates(&self, meter: usize, index: usize) -> Result<Option<MeterRates>, String> {
        let m = self.meters.get(meter).ok_or_else(|| format!("no meter {meter}"))?;
        Ok(m.get(index).ok_or_else(|| format!("meter index {index} is out of range"))?.rates())
    }

    /// Per-colour counters of an indexed meter cell: (packets, bytes) green, yellow, red.
    pub fn meter_counts(&self, meter: usize, index: usize) -> Result<[(u64, u64); 3], String> {
        let m = self.meters.get(meter).ok_or_else(|| format!("no meter {meter}"))?;
        Ok(m.get(index).ok_or_else(|| format!("meter index {index} is out of range"))?.counts())
    }

    pub fn meter_set_counts(&self, meter: usize, index: usize, c: [(u64, u64); 3]) -> Result<(), String> {
        let m = self.meters.get(meter).ok_or_else(|| format!("no meter {meter}"))?;
        m.get(index).ok_or_else(|| format!("meter index {index} is out of range"))?.set_counts(c);
        Ok(())
    }

    /// Configure the direct meter of one table entry (`rates`: `None` leaves the configuration, `Some(None)`
    /// marks everything green); its per-colour counters are kept, or set to `counts` when given.
    pub fn direct_meter_set(&self, ti: usize, e: &TableEntry, rates: Option<Option<MeterRates>>, counts: Option<[(u64, u64); 3]>) -> Result<(), String> {
        let cell = {
            let d = self.table_snapshot(ti)?;
            let t = &self.prog.tables[ti];
            let i = d.find(t, e).ok_or_else(|| format!("table `{}`: no entry with this match", t.name))?;
            d.entries[i].meter.clone()
        };
        if let Some(cell) = cell {
            if let Some(r) = rates {
                cell.configure(r);
            }
            if let Some(c) = counts {
                cell.set_counts(c);
            }
            return Ok(());
        }
        self.table_update(ti, |t, d| {
            let i = d.find(t, e).ok_or_else(|| format!("table `{}`: no entry with this match", t.name))?;
            let old = &d.entries[i];
            let cell = Arc::new(MeterCell::default());
            cell.configure(rates.flatten());
            if let Some(c) = counts {
                cell.set_counts(c);
            }
            let mut n = (**old).clone();
            n.meter = Some(cell);
            d.replace(i, n);
            Ok(())
        })
    }

    /// Replace the members of a value set: one match per element of the set (exact, ternary, lpm, range,
    /// optional or any), each fitting the element's width.
    pub fn value_set_set(&self, vs: usize, members: Vec<Vec<FieldMatch>>) -> Result<(), String> {
        let s = self.value_sets.get(vs).ok_or_else(|| format!("no value set {vs}"))?;
        let v = &self.prog.value_sets[vs];
        if members.len() > v.size as usize {
            return Err(format!("value set `{}` holds at most {} members, {} given", v.name, v.size, members.len()));
        }
        for m in &members {
            if m.len() != v.widths.len() {
                return Err(format!("value set `{}` has {} elements, a member gives {}", v.name, v.widths.len(), m.len()));
            }
        }
        s.store(Arc::new(members));
        Ok(())
    }

    pub fn value_set_get(&self, vs: usize) -> Result<Vec<Vec<FieldMatch>>, String> {
        Ok((**self.value_sets.get(vs).ok_or_else(|| format!("no value set {vs}"))?.load()).clone())
    }

    /// Control-plane access to a registered extern instance (e.g. installing an SA).
    pub fn extern_control(&self, inst: &str, op: &str, args: &[u8]) -> Result<Vec<u8>, String> {
        let i = self.prog.externs.iter().position(|e| e.name == inst).ok_or_else(|| format!("no extern instance `{inst}`"))?;
        self.externs[i].control(op, args)
    }

    pub fn extern_events(&self) -> Vec<(String, String)> {
        let mut v = vec![];
        for (i, e) in self.externs.iter().enumerate() {
            for ev in e.drain_events() {
                v.push((self.prog.externs[i].name.clone(), ev));
            }
        }
        v
    }
}

#[cfg(test)]
mod tests;
