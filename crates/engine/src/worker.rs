//! A worker: the per-thread state one packet at a time runs on ([`Worker`]), reused across
//! packets, with the view of the bytes being parsed ([`PktView`]), the jobs a packet leaves
//! (clones, resubmissions, recirculations, multicast copies: [`Job`]) and the buffers kept for them.

use crate::bits;
use crate::code::PendingError;
use crate::meters::MeterCell;
use crate::pipeline::effects::Effects;
use crate::tables::TableData;
use p4sec_externs::iface::BitBuf;
use std::collections::VecDeque;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// Per-thread packet state, reused across packets. Each part belongs to the stage that uses it:
/// the slots to every stage (the packet's headers and metadata), `packet` to the parser (and the
/// deparser, which copies the payload), `emit` to the deparser, `calls` to the extern calls,
/// `fx` to the v1model passes, `jobs` to replication (clones, resubmissions, recirculations,
/// multicast), `tables` to match-action, `tm` to the traffic manager.
pub struct Worker {
    /// The packet's headers and metadata, one word per slot (the program's slots and a sink).
    pub(crate) slots: Vec<u64>,
    /// The slots' values at the start of every packet.
    pub(crate) initial: Vec<u64>,
    /// Every initial value is zero: a pass starts from zeroed slots (a fill instead of a copy).
    pub(crate) initial_zero: bool,
    /// The bytes of the packet in the current pass.
    pub(crate) packet: Packet,
    /// What the deparser writes.
    pub(crate) emit: Emit,
    /// The extern calls' argument buffers and state.
    pub(crate) calls: Calls,
    /// What the v1model built-ins asked of this pass (drop, clone, resubmit, ...).
    pub(crate) fx: Effects,
    /// A parser error raised by a statement (`lookahead`), taken by the block that runs it.
    pub(crate) perr: u32,
    /// Loop iterations run in this pass (bounded by [`crate::MAX_LOOP_STEPS`]).
    pub(crate) loop_steps: u32,
    /// Packet instances waiting to be processed, and the buffers of finished ones.
    pub(crate) jobs: Jobs,
    /// Snapshots of the tables this worker reads.
    pub(crate) tables: TableSnapshots,
    pub(crate) stats: Arc<Stats>,
    /// When `Some`, every packet's path is recorded here (parser states, tables, externs,
    /// decisions).
    pub trace: Option<Vec<String>>,
    /// The clock and the queue hand-over (see [`crate::pipeline::tm`]).
    pub(crate) tm: crate::pipeline::tm::WorkerTm,
}

/// The bytes of the packet in the current pass: where the parser reads, and the payload the
/// deparser appends.
pub(crate) struct Packet {
    /// The received bytes of the packet in the current pass, read where the caller (or a job) holds
    /// them.
    pub(crate) pkt: PktView,
    /// The packet's length as the pipeline sees it (`standard_metadata.packet_length`).
    pub(crate) len: usize,
    /// Where the parser is in `pkt`.
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
    /// [`NO_OFFSET`] (kept up to date for the headers `Controls::tracked_headers` lists).
    pub(crate) hdr_off: Vec<usize>,
}

/// The deparser's output and scratch.
pub(crate) struct Emit {
    /// The frame being emitted.
    pub(crate) out: Vec<u8>,
    pub(crate) bw: bits::BitWriter,
    pub(crate) scratch: Vec<u8>,
    /// Deferred `update_checksum`s due in this egress pass (bits of `Deparser::deferred`).
    pub(crate) csum_pending: u64,
}

/// The extern calls' buffers and state.
pub(crate) struct Calls {
    /// The arguments of the call being made (reused across calls).
    pub(crate) bitbufs: Vec<BitBuf>,
    /// An extern method's return value (reused across calls).
    pub(crate) retbuf: BitBuf,
    /// The meter cell an `execute_meter` of this action reads.
    pub(crate) cur_meter: Option<Arc<MeterCell>>,
    /// The state of `random()`.
    pub(crate) rng: u64,
}

/// Packet instances waiting to be processed (clones, resubmissions, recirculations, multicast
/// copies) and the buffers of finished ones.
pub(crate) struct Jobs {
    pub(crate) queue: VecDeque<Job>,
    /// The buffers of finished jobs, for the next ones.
    pub(crate) spare: Spare,
}

/// The tables this worker reads, as of one publication of the engine's tables.
pub(crate) struct TableSnapshots {
    pub(crate) snapshots: Vec<Option<Arc<TableData>>>,
    /// The engine's table version they belong to.
    pub(crate) version: u64,
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
        if self.packet.payload_at != NOT_IN_PKT {
            self.packet.payload.clear();
            let at = self.packet.payload_at.min(self.packet.pkt.len());
            self.packet
                .payload
                .extend_from_slice(&self.packet.pkt[at..]);
            self.packet.payload_at = NOT_IN_PKT;
        } else if self.packet.payload_skip > 0 {
            std::hint::cold_path();
            self.packet
                .payload
                .drain(..self.packet.payload_skip.min(self.packet.payload.len()));
        }
        self.packet.payload_skip = 0;
    }

    /// The payload bytes, wherever they are.
    #[inline(always)]
    pub(crate) fn payload_bytes(&self) -> &[u8] {
        if self.packet.payload_at != NOT_IN_PKT {
            &self.packet.pkt[self.packet.payload_at.min(self.packet.pkt.len())..]
        } else {
            &self.packet.payload[self.packet.payload_skip.min(self.packet.payload.len())..]
        }
    }

    /// A worker with the program's initial slot values, for a program of `headers` headers and
    /// `tables` tables, counting into `stats` (see `Worker::new`, which takes them from an engine).
    pub(crate) fn build(
        initial: Vec<u64>,
        headers: usize,
        tables: usize,
        stats: Arc<Stats>,
    ) -> Worker {
        Worker {
            slots: initial.clone(),
            initial_zero: initial.iter().all(|&v| v == 0),
            initial,
            packet: Packet {
                pkt: PktView::EMPTY,
                len: 0,
                cursor: 0,
                payload: Vec::with_capacity(2048),
                payload_at: NOT_IN_PKT,
                payload_skip: 0,
                hdr_off: vec![NO_OFFSET; headers],
            },
            emit: Emit {
                out: Vec::with_capacity(2048),
                bw: bits::BitWriter::default(),
                scratch: Vec::with_capacity(256),
                csum_pending: 0,
            },
            calls: Calls {
                bitbufs: vec![],
                retbuf: BitBuf::default(),
                cur_meter: None,
                rng: 0x1234_5678_9abc_def1,
            },
            fx: Effects::default(),
            perr: 0,
            loop_steps: 0,
            jobs: Jobs {
                queue: VecDeque::new(),
                spare: Spare::default(),
            },
            tables: TableSnapshots {
                snapshots: vec![None; tables],
                version: u64::MAX,
            },
            stats,
            trace: None,
            tm: crate::pipeline::tm::WorkerTm::default(),
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

/// The traffic manager's side of a worker (see `pipeline/tm.rs`): queueing mode and the clock.
impl Worker {
    /// Queueing mode on: from now on packets stop after ingress and wait in [`Self::take_queued`]
    /// for the caller's traffic manager; off: egress runs right after ingress (the default).
    pub fn set_queueing(&mut self, on: bool) {
        self.tm.queueing = on;
    }
    /// Is the worker in queueing mode?
    pub fn queueing(&self) -> bool {
        self.tm.queueing
    }
    /// The packets bound for egress that the last calls left (queueing mode), in the order they
    /// were made.
    pub fn take_queued(&mut self) -> std::vec::Drain<'_, crate::pipeline::tm::Queued> {
        self.tm.queued.drain(..)
    }
    /// A virtual clock for this worker: the time fields read `start` µs for the first frame and
    /// move `step` µs after every frame [`crate::Engine::process`] takes (deterministic runs, such
    /// as the STF runner's).
    pub fn set_virtual_clock(&mut self, start: u64, step: u64) {
        self.tm.clock = crate::pipeline::tm::Clock::Virtual { now: start, step };
    }
    /// The time the worker's clock reads now (µs).
    pub fn now_us(&self) -> u64 {
        self.tm.now()
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

impl PendingError for Worker {
    #[inline(always)]
    fn take_error(&mut self) -> u32 {
        // read, and written only when an error is pending (the common case stores nothing)
        if self.perr == 0 {
            0
        } else {
            std::mem::take(&mut self.perr)
        }
    }
}
