//! The engine's and a worker's state, and the compiled form of the program the engine holds.
//!
//! [`Engine`] holds the compiled program ([`Code`]), whose closures ([`XF`], [`SF`]) take the
//! engine and a [`Worker`]: these types refer to each other, so they are defined together here,
//! apart from any stage. What they do is in the stage modules (`pipeline.rs`, `parser.rs`,
//! `headers.rs`, `match_action.rs`, `call.rs`, `exec.rs`), how they are built in `load.rs` and
//! `compile.rs`.

use crate::bits;
use crate::effects::Effects;
use crate::meters::MeterCell;
use crate::plans::{HeaderPlan, StdSlots};
use crate::tables::TableData;
use arc_swap::ArcSwap;
use p4sec_externs::iface::{BitBuf, ExternObject};
use p4sec_ir::*;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub struct TableRt {
    pub data: ArcSwap<TableData>,
    pub(crate) write: Mutex<()>,
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
    /// Passes whose loops ran more than [`crate::MAX_LOOP_STEPS`] iterations (the packet dropped).
    pub loop_limit: AtomicU64,
    /// Per table: (hits, misses).
    pub tables: Vec<(AtomicU64, AtomicU64)>,
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

pub struct Engine {
    pub prog: Arc<Program>,
    pub tables: Vec<TableRt>,
    pub(crate) key_layouts: Vec<Vec<(usize, usize)>>,
    /// Tables implemented by an action selector: its hash algorithm and the indices of the selector
    /// keys.
    pub(crate) selectors: Vec<Option<(HashAlgo, Vec<usize>)>>,
    /// Per table: its key is one field of at most 64 bits (packed into the first key word).
    pub(crate) one_word_key: Vec<bool>,
    /// Per table: entries carry state a hit updates (direct counter or meter, idle timeout).
    pub(crate) entry_state: Vec<bool>,
    /// Per action: each word of each parameter, (slot, mask, parameter, word), low words first and
    /// the top word masked to the width (arguments go word by word into them, inline or not); every
    /// slot is the program's or the worker's sink slot after them.
    pub(crate) param_words: Vec<Vec<(u32, u64, u32, u32)>>,
    pub(crate) registers: Vec<RegisterRt>,
    pub(crate) counters: Vec<Vec<(AtomicU64, AtomicU64)>>,
    pub(crate) meters: Vec<Vec<MeterCell>>,
    /// Members of each value set: one match per element.
    pub(crate) value_sets: Vec<ArcSwap<Vec<Vec<FieldMatch>>>>,
    pub(crate) pre: ArcSwap<Pre>,
    pub(crate) pre_write: Mutex<()>,
    pub(crate) externs: Vec<Box<dyn ExternObject>>,
    pub(crate) extern_methods: Vec<Vec<u32>>,
    pub(crate) digests: Mutex<VecDeque<DigestMsg>>,
    pub(crate) digests_pending: std::sync::atomic::AtomicBool,
    /// Sequence number of table publications (odd while one is in progress); workers refresh their
    /// table snapshots when it moves.
    pub(crate) tables_version: AtomicU64,
    pub(crate) publish_lock: Mutex<()>,
    /// Each worker's statistics (written only by that worker; summed by [`Engine::stats`]).
    pub(crate) worker_stats: Mutex<Vec<Arc<Stats>>>,
    /// Word ranges of header state (validity, fields, varbit lengths, stack indices), kept by E2E
    /// clones.
    pub(crate) header_ranges: Vec<(usize, usize)>,
    /// Per header: how to extract and emit it quickly (see [`HeaderPlan`]).
    pub(crate) hplans: Vec<HeaderPlan>,
    pub(crate) std_slots: StdSlots,
    /// The program's blocks compiled into closures (see `compile.rs`).
    pub(crate) code: Code,
    pub(crate) err_too_short: u32,
    pub(crate) err_no_match: u32,
    pub(crate) err_stack_oob: u32,
    pub(crate) err_header_too_short: u32,
    pub(crate) err_timeout: u32,
    pub(crate) err_invalid_arg: u32,
    pub(crate) max_parser_steps: u32,
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

/// Per-thread packet state, reused across packets.
pub struct Worker {
    pub(crate) slots: Vec<u64>,
    pub(crate) initial: Vec<u64>,
    /// The received bytes of the packet in the current pass, read where the caller (or a job) holds
    /// them.
    pub(crate) pkt: PktView,
    pub(crate) pkt_len: usize,
    pub(crate) cursor: usize,
    /// The unparsed bytes, when they are not still in place in `pkt` (see `payload_at`).
    pub(crate) payload: Vec<u8>,
    /// Where the payload starts in `pkt` while it was not copied out ([`NOT_IN_PKT`] once it lives
    /// in `payload`): most packets leave the pipeline with their payload untouched, so it is copied
    /// to the output straight from the input bytes.
    pub(crate) payload_at: usize,
    /// Where the payload starts in `payload` while it lives there (an extern may hand over a buffer
    /// whose first bytes are not payload: `Payload::swap_in_from`); 0 otherwise.
    pub(crate) payload_skip: usize,
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
    pub(crate) jobs: VecDeque<Job>,
    /// The buffers of finished jobs, for the next ones.
    pub(crate) spare: Spare,
    pub(crate) rng: u64,
    pub(crate) perr: u32,
    /// Loop iterations run in this pass (bounded by [`crate::MAX_LOOP_STEPS`]).
    pub(crate) loop_steps: u32,
    pub(crate) cur_meter: Option<Arc<MeterCell>>,
    pub(crate) stats: Arc<Stats>,
    /// Snapshots of the tables this worker reads, and the engine's table version they belong to.
    pub(crate) tables: Vec<Option<Arc<TableData>>>,
    pub(crate) tables_version: u64,
    /// When `Some`, every packet's path is recorded here (parser states, tables, externs,
    /// decisions).
    pub trace: Option<Vec<String>>,
    /// The clock and the queue hand-over (see [`crate::tm`]).
    pub(crate) tm: crate::tm::WorkerTm,
}

/// A view of the bytes the current pass parses: the frame `Engine::process` was given, or a job's
/// bytes (a resubmitted or recirculated packet), read where they lie instead of copied into the
/// worker. Outside a pass it is empty.
pub(crate) struct PktView {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: a view only ever points at bytes borrowed for one `Engine::process` call on the thread
// that runs it (see `set`); a worker moved to another thread between calls holds the empty view.
unsafe impl Send for PktView {}

impl PktView {
    pub(crate) const EMPTY: PktView = PktView {
        ptr: std::ptr::NonNull::dangling(),
        len: 0,
    };

    /// View `bytes`.
    ///
    /// # Safety
    /// `bytes` must stay alive and unchanged until the view is [`reset`](PktView::reset) or set
    /// again.
    #[inline(always)]
    pub(crate) unsafe fn set(&mut self, bytes: &[u8]) {
        // a slice's pointer is never null
        self.ptr = std::ptr::NonNull::new(bytes.as_ptr() as *mut u8)
            .unwrap_or(std::ptr::NonNull::dangling());
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
        // SAFETY: `ptr` and `len` come from a slice that is alive (see `set`), or are the empty
        // view
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

/// `Worker::payload_at` when the payload lives in `Worker::payload`.
pub(crate) const NOT_IN_PKT: usize = usize::MAX;
/// `Worker::hdr_off` of a header not extracted (by the fast path) in this pass.
pub(crate) const NO_OFFSET: usize = usize::MAX;

impl Worker {
    /// Move the payload out of `pkt` into `payload` (before anything may change or keep it), at the
    /// front of that buffer.
    #[inline]
    pub(crate) fn own_payload(&mut self) {
        if self.payload_at != NOT_IN_PKT {
            self.payload.clear();
            let at = self.payload_at.min(self.pkt.len());
            self.payload.extend_from_slice(&self.pkt[at..]);
            self.payload_at = NOT_IN_PKT;
        } else if self.payload_skip > 0 {
            std::hint::cold_path();
            self.payload
                .drain(..self.payload_skip.min(self.payload.len()));
        }
        self.payload_skip = 0;
    }

    /// The payload bytes, wherever they are.
    #[inline(always)]
    pub(crate) fn payload_bytes(&self) -> &[u8] {
        if self.payload_at != NOT_IN_PKT {
            &self.pkt[self.payload_at.min(self.pkt.len())..]
        } else {
            &self.payload[self.payload_skip.min(self.payload.len())..]
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
        Worker {
            slots: initial.clone(),
            initial,
            pkt: PktView::EMPTY,
            pkt_len: 0,
            cursor: 0,
            payload: Vec::with_capacity(2048),
            payload_at: NOT_IN_PKT,
            payload_skip: 0,
            hdr_off: vec![NO_OFFSET; engine.prog.headers.len()],
            csum_pending: 0,
            out: Vec::with_capacity(2048),
            bw: bits::BitWriter::default(),
            scratch: Vec::with_capacity(256),
            bitbufs: vec![],
            retbuf: BitBuf::default(),
            fx: Effects::default(),
            jobs: VecDeque::new(),
            spare: Spare::default(),
            rng: 0x1234_5678_9abc_def1,
            perr: 0,
            loop_steps: 0,
            cur_meter: None,
            stats,
            tables: vec![None; engine.tables.len()],
            tables_version: u64::MAX,
            trace: None,
            tm: crate::tm::WorkerTm::default(),
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

/// The buffers of jobs that were run ([`Job`]: bytes, slots, preserved fields), kept for the jobs
/// to come, so that clones, resubmissions, recirculations and multicast copies allocate nothing
/// once a worker has seen a few.
#[derive(Default)]
pub(crate) struct Spare {
    pub(crate) bytes: Pool<u8>,
    pub(crate) words: Pool<u64>,
    pub(crate) fields: Pool<(u32, u64)>,
}

/// Spare buffers of one kind: at most [`Pool::MAX`] are kept.
pub(crate) struct Pool<T>(Vec<Vec<T>>);

impl<T> Default for Pool<T> {
    fn default() -> Self {
        Pool(Vec::new())
    }
}

impl<T: Copy> Pool<T> {
    const MAX: usize = 64;

    /// An empty buffer.
    #[inline]
    pub(crate) fn take(&mut self) -> Vec<T> {
        let mut v = self.0.pop().unwrap_or_default();
        v.clear();
        v
    }

    /// A buffer holding a copy of `src`.
    #[inline]
    pub(crate) fn copy_of(&mut self, src: &[T]) -> Vec<T> {
        let mut v = self.take();
        v.extend_from_slice(src);
        v
    }

    /// Keep `v` for later (unless enough are kept, or it never held anything).
    #[inline]
    pub(crate) fn give(&mut self, v: Vec<T>) {
        if self.0.len() < Self::MAX && v.capacity() > 0 {
            self.0.push(v);
        }
    }
}

/// A packet instance waiting to be processed.
pub(crate) enum Job {
    /// Enter the parser with these bytes.
    Ingress {
        bytes: Vec<u8>,
        port: u32,
        itype: u32,
        preserved: Vec<(u32, u64)>,
    },
    /// Enter egress with this state (multicast copies, I2E/E2E clones).
    Egress {
        slots: Vec<u64>,
        payload: Vec<u8>,
        pkt_len: usize,
        port: u32,
        rid: u32,
        itype: u32,
    },
}

// ------------------------------------------------------------ the compiled program

/// How a statement list finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Next,
    Break(u32),
    Exit,
    /// Parser error (error code); the parser stops.
    Reject(u32),
}

/// A compiled expression of at most 64 bits.
pub(crate) type XF = Box<dyn Fn(&Engine, &mut Worker) -> u64 + Send + Sync>;
/// A compiled statement.
pub(crate) type SF = Box<dyn Fn(&Engine, &mut Worker) -> Flow + Send + Sync>;

/// A compiled statement list. `checks` is false when no statement of the list can leave a parser
/// error pending (only `lookahead` sets one, and nested blocks report theirs as `Flow::Reject`), so
/// the list runs without testing for one after every statement.
pub(crate) struct CBlock {
    stmts: Vec<SF>,
    checks: bool,
}

impl CBlock {
    pub(crate) fn new(stmts: Vec<SF>, checks: bool) -> CBlock {
        CBlock { stmts, checks }
    }
    #[inline(always)]
    pub fn run(&self, e: &Engine, w: &mut Worker) -> Flow {
        if !self.checks {
            // blocks of up to three statements call each from its own call site: a site with a
            // single target is an indirect call the branch predictor gets right without history
            match &self.stmts[..] {
                [a] => return a(e, w),
                [a, b] => {
                    let f = a(e, w);
                    return if matches!(f, Flow::Next) { b(e, w) } else { f };
                }
                [a, b, c] => {
                    let f = a(e, w);
                    if !matches!(f, Flow::Next) {
                        return f;
                    }
                    let f = b(e, w);
                    return if matches!(f, Flow::Next) { c(e, w) } else { f };
                }
                _ => {}
            }
            for s in &self.stmts {
                let f = s(e, w);
                if !matches!(f, Flow::Next) {
                    return f;
                }
            }
            return Flow::Next;
        }
        for s in &self.stmts {
            let f = s(e, w);
            if !matches!(f, Flow::Next) {
                return f;
            }
            if w.perr != 0 {
                let err = w.perr;
                w.perr = 0;
                return Flow::Reject(err);
            }
        }
        Flow::Next
    }
    pub fn is_empty(&self) -> bool {
        self.stmts.is_empty()
    }
}

/// Everything the pipeline runs, compiled.
pub(crate) struct Code {
    pub states: Vec<CBlock>,
    /// Per parser state: compiled select keys when all are at most 64 bits.
    pub select_keys: Vec<Option<Vec<XF>>>,
    /// Per parser state: the select cases as (mask, value) per key when they are all exact, masked
    /// or default (ranges and value sets take the interpreter's path).
    pub select_cases: Vec<Option<Vec<(Vec<(u64, u64)>, Next)>>>,
    /// Per parser state: its transition when the parser's hot loop takes it itself.
    pub lean_next: Vec<LeanNext>,
    pub verify: CBlock,
    /// Headers whose extraction offset `verify` reads (reset at the start of every ingress pass).
    pub tracked_headers: Vec<usize>,
    /// `update_checksum`s over a whole header left to the deparser (see [`Deferred`]); bit i of
    /// `Worker::csum_pending` says entry i is due.
    pub deferred: Vec<Deferred>,
    pub ingress: CBlock,
    pub egress: CBlock,
    pub compute: CBlock,
    pub deparser: CBlock,
    pub actions: Vec<CBlock>,
    /// Per table, per key: the compiled key expression when it is at most 64 bits.
    pub table_keys: Vec<Vec<Option<XF>>>,
}

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
