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
    /// The clock and the queue hand-over (see [`crate::pipeline::tm`]).
    pub(crate) tm: crate::pipeline::tm::WorkerTm,
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
            initial,
            pkt: PktView::EMPTY,
            pkt_len: 0,
            cursor: 0,
            payload: Vec::with_capacity(2048),
            payload_at: NOT_IN_PKT,
            payload_skip: 0,
            hdr_off: vec![NO_OFFSET; headers],
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
            tables: vec![None; tables],
            tables_version: u64::MAX,
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
        std::mem::take(&mut self.perr)
    }
}
