//! The lean frame of the native engine's common case: a new packet (nothing preserved, not
//! traced, no queueing) of a program whose whole pass is generated code (the front, the egress
//! control when it has code, compute and the deparser: [`Lane`]) runs here with only the checks
//! that case needs. Whatever is not that case — effects (drop, clone, resubmit, recirculate,
//! truncate), multicast, the drop port, a parser that did not accept, a panic of a callback,
//! checksums left to settle, bits left in the bit writer, a payload moved out of the input frame —
//! leaves the lane for the general frame of `pipeline/mod.rs` at the point it was reached, so
//! the packets, state and counters are those of the general path.

use crate::engine::{Lane, LaneFn};
use crate::native::helpers::{Ctx, Entry, Out};
use crate::native::stages::{NativeFn, Stages};
use crate::native::PassCx;
use crate::pipeline::stage_run::{Fused, StageRun};
use crate::pipeline::DROP_PORT;
use crate::{bump, Engine, Outputs, Worker, NOT_IN_PKT};
use std::sync::atomic::Ordering;

/// What a lane has for a stage without statements (never called).
unsafe extern "C" fn no_stage(_: *mut u8) -> u64 {
    0
}

/// The back's kinds (`Engine::lane`'s `B`).
const NO_BACK: u8 = 0;
const BACK: u8 = 1;
const BACK_EMITS: u8 = 2;

/// `Engine::lane` for a program whose front zeroes the slots (`Z`) or not, with egress code or
/// not, and a back of kind `b`.
fn pick<const Z: bool>(egress: bool, b: u8) -> LaneFn {
    match (egress, b) {
        (false, NO_BACK) => Engine::lane::<Z, false, NO_BACK>,
        (false, BACK) => Engine::lane::<Z, false, BACK>,
        (false, _) => Engine::lane::<Z, false, BACK_EMITS>,
        (true, NO_BACK) => Engine::lane::<Z, true, NO_BACK>,
        (true, BACK) => Engine::lane::<Z, true, BACK>,
        (true, _) => Engine::lane::<Z, true, BACK_EMITS>,
    }
}

impl Lane {
    /// The lane of the stages `st` (a worker has `nslots` slots), when the pass is fully
    /// generated: a front, and compute native with the deparser or without statements
    /// (`compute_empty`).
    pub(crate) fn of(st: &Stages, compute_empty: bool, nslots: usize) -> Option<Lane> {
        let p = st.pass?;
        let front = p.front?;
        if p.nslots != nslots {
            return None;
        }
        let back = match (p.back, p.compute) {
            (Some(b), _) => Some(b),
            (None, None) if compute_empty => p.deparser,
            _ => return None,
        };
        let kind = match back {
            None => NO_BACK,
            Some(_) if p.deparser_emits => BACK_EMITS,
            Some(_) => BACK,
        };
        let run = match front.zeroes {
            true => pick::<true>(p.egress.is_some(), kind),
            false => pick::<false>(p.egress.is_some(), kind),
        };
        Some(Lane {
            pass: p,
            front: front.f,
            egress: p.egress.unwrap_or(no_stage),
            back: back.unwrap_or(no_stage),
            run,
        })
    }

    /// Whether `w`, about to process a frame of `e` (this lane's engine), is in the lane's
    /// common state: the program's shape, its tables' current version, nothing left queued,
    /// every initial slot zero, no effects left from the last packet, not traced, not queueing.
    #[inline(always)]
    pub(crate) fn takes(&self, e: &Engine, w: &Worker) -> bool {
        w.slots.len() == self.pass.nslots
            && w.packet.hdr_off.len() >= self.pass.nheaders
            && e.match_action.version.load(Ordering::Acquire) == w.tables.version
            && w.jobs.queue.is_empty()
            && w.initial_zero
            && !w.fx.any()
            && w.trace.is_none()
            && !w.tm.queueing
    }
}

/// Stage function `f` of the lane's pass on its context `cx` (`E`: it emits, the deparser's
/// output attached), as `PassCx::run` calls it but for what Rust cannot have changed since the
/// front: the slots' buffer (the lane writes it only through the context's pointer), the packet's
/// bytes and the header offsets (the lane does not touch them) stay as the context has them; the
/// worker's pointer is taken anew from `w`.
#[inline(always)]
fn stage<const E: bool>(cx: &mut PassCx, f: NativeFn, w: &mut Worker) {
    // SAFETY: a stage's function pointer of the `Entry` ABI (as `crate::native::enter` turns it)
    let f = unsafe { std::mem::transmute::<NativeFn, Entry>(f) };
    let mut o = Out {
        ptr: std::ptr::null_mut(),
        len: 0,
        cap: 0,
        emit: std::ptr::null_mut(),
    };
    if E {
        o = Out {
            ptr: w.emit.out.as_mut_ptr(),
            len: w.emit.out.len(),
            cap: w.emit.out.capacity(),
            emit: &raw mut w.emit,
        };
        cx.ctx.out = &raw mut o;
    }
    cx.ctx.w = w;
    // SAFETY: the context points at the live engine and worker, whose shape `Lane::takes`
    // checked, at the worker's slots and header offsets and at the frame (see above), and, when
    // `E`, at the worker's output (`o`, on this frame)
    unsafe { f(&mut cx.ctx) };
    // (the cursor stays: a control moves none, and a callback of the code wrote its own back)
    debug_assert_eq!(w.packet.cursor, cx.ctx.cursor);
    if E {
        debug_assert!(o.len <= w.emit.out.capacity());
        // SAFETY: `o.len` is the output's length as taken, or moved by the code over the bytes
        // it wrote below the capacity (as `Out::store` relies on)
        unsafe { w.emit.out.set_len(o.len) };
        // (the context's output left pointing at `o`: a stage that emits is the lane's last)
    }
    if cx.ctx.panic.is_some() {
        std::hint::cold_path();
        resume(cx);
    }
}

/// The panic of a callback the context kept, resumed.
#[cold]
#[inline(never)]
fn resume(cx: &mut PassCx) -> ! {
    match cx.ctx.panic.take() {
        Some(p) => std::panic::resume_unwind(p),
        None => unreachable!("resume is called with a panic kept"),
    }
}

/// The standard metadata's fields the egress pass starts with (as `Engine::egress_pass` writes
/// them): the egress port, and the egress spec, replication id and instance type cleared.
#[inline(always)]
fn egress_std(ss: &crate::load::plans::StdSlots, slots: *mut u64, port: u32) {
    // SAFETY: the standard metadata's slots are below the worker's slots' count (`Lane::takes`
    // checked it is the program's), `slots` the worker's slots' buffer (see `Engine::lane`)
    let put = |(s, m): (usize, u64), v: u64| unsafe { *slots.add(s) = v & m };
    put(ss.egress_port, port as u64);
    put(ss.egress_spec, 0);
    put(ss.egress_rid, 0);
    put(ss.instance_type, 0);
}

/// `src` (the payload left in the input frame) appended to `out`: a payload of at most 64 bytes
/// that fits the buffer's spare room is copied as two overlapping copies of a constant length
/// (moves of registers, no call to `memcpy`), any other through `Vec::extend_from_slice`.
#[inline(always)]
fn append_payload(out: &mut Vec<u8>, src: &[u8]) {
    let n = src.len();
    let len = out.len();
    if !(8..=64).contains(&n) || out.capacity() - len < n {
        out.extend_from_slice(src);
        return;
    }
    // SAFETY: `dst` has room for `n` bytes (checked above) and does not overlap `src` (a borrow
    // of another buffer); each pair of copies of `k` bytes (`k <= n <= 2k`) covers `0..n`, both
    // within `src` and `dst`'s `n` bytes
    unsafe {
        let (s, d) = (src.as_ptr(), out.as_mut_ptr().add(len));
        let two = |k: usize| {
            std::ptr::copy_nonoverlapping(s, d, k);
            std::ptr::copy_nonoverlapping(s.add(n - k), d.add(n - k), k);
        };
        if n >= 32 {
            two(32)
        } else if n >= 16 {
            two(16)
        } else {
            two(8)
        }
        out.set_len(len + n);
    }
}

/// `Engine::deparser_start` on the lane: an output still empty (one frame per call, the common
/// case) is not swapped in, the deparser writes to the worker's buffer, emptied, which the swap
/// after the payload hands over as it would hand back the output's own (the two buffers' roles
/// exchanged; the same bytes, the frame starting at 0 either way). `frame_out` works on either.
#[inline(always)]
fn deparser_start(e: &Engine, w: &mut Worker, out: &mut Outputs) -> usize {
    if out.data.is_empty() {
        w.emit.out.clear();
        // no bits pending: those of the accumulator above its count are never read (`BitWriter`
        // takes and flushes only its low `n` bits), so the count alone is reset
        w.emit.bw.n = 0;
        0
    } else {
        e.deparser_start(w, out)
    }
}

/// A fused pass whose front already ran (`Engine::ingress_stages` goes on from there).
struct FrontRan<'a>(Fused<'a>);

impl StageRun for FrontRan<'_> {
    #[inline(always)]
    fn front(&mut self, _: &Engine, _: &mut Worker, _: u32, _: u32) {}
    #[inline(always)]
    fn parser(&mut self, _: &Engine, _: &mut Worker) {}
    #[inline(always)]
    fn verify_ingress(&mut self, _: &Engine, _: &mut Worker, _: u32, _: u32) {}
    #[inline(always)]
    fn egress(&mut self, e: &Engine, w: &mut Worker) -> bool {
        self.0.egress(e, w)
    }
    #[inline(always)]
    fn compute(&mut self, e: &Engine, w: &mut Worker) {
        self.0.compute(e, w)
    }
    #[inline(always)]
    fn deparser(&mut self, e: &Engine, w: &mut Worker) {
        self.0.deparser(e, w)
    }
    #[inline(always)]
    fn back(&mut self, e: &Engine, w: &mut Worker, out: &mut Outputs) -> usize {
        self.0.back(e, w, out)
    }
}

impl Engine {
    /// [`Engine::process`] on the program's lane (`Lane::takes` said the worker is in its
    /// state; the same arguments, so that `process` ends in a jump here), for a program whose
    /// front zeroes the slots (`Z`), with egress code (`EG`) and a back of kind `B`.
    #[inline(never)]
    fn lane<const Z: bool, const EG: bool, const B: u8>(
        &self,
        w: &mut Worker,
        port: u32,
        frame: &[u8],
        out: &mut Outputs,
    ) {
        let Some(l) = &self.controls.lane else {
            std::hint::cold_path();
            self.general_frame(w, port, frame, out);
            return;
        };
        bump(&w.stats.packets_in);
        // SAFETY: `frame` outlives the pass, and the view is reset before this returns
        unsafe { w.packet.pkt.set(frame) };
        w.packet.len = frame.len();
        w.packet.cursor = 0;
        w.perr = 0;
        w.loop_steps = 0;
        if !Z {
            w.slots.fill(0);
        }
        let mut cx = PassCx {
            ctx: Ctx {
                slots: w.slots.as_mut_ptr(),
                pkt: frame.as_ptr(),
                pkt_len: frame.len(),
                cursor: 0,
                hdr_off: w.packet.hdr_off.as_mut_ptr(),
                out: std::ptr::null_mut(),
                e: self,
                w: &raw mut *w,
                panic: None,
            },
        };
        cx.run_fresh(l.front, &l.pass, self, w, (port, 0));
        let ss = &self.layout.std;
        // from here on the slots are read and written through the context's pointer (taken from
        // the worker's buffer, which nothing reallocates on the lane), never through a reference
        // to the buffer: the pointer stays valid for the stages' code, which is not handed a new
        // one (see `stage`)
        let slots = cx.ctx.slots;
        // SAFETY: the standard metadata's slots are below the worker's slots' count (`Lane::takes`
        // checked it is the program's)
        let get = |(s, m): (usize, u64)| unsafe { *slots.add(s) & m };
        let spec = get(ss.egress_spec);
        if w.fx.any() || get(ss.mcast_grp) != 0 || spec == DROP_PORT {
            std::hint::cold_path();
            self.lane_off_ingress(l, w, port, out, cx);
            return;
        }
        // the egress pass (as `Engine::egress_pass` starts it); without egress code nothing on
        // the lane reads these four (v1model's compute and deparser do not see the standard
        // metadata, and the next front sets them anew): a frame that leaves the lane after the
        // deparser gets them there (`Engine::lane_off_deparser`)
        let port = spec as u32;
        if EG {
            egress_std(ss, slots, port);
            stage::<false>(&mut cx, l.egress, w);
            w.perr = 0;
            if w.fx.any() || get(ss.egress_spec) == DROP_PORT {
                std::hint::cold_path();
                self.lane_off_egress(l, w, port, out, cx);
                return;
            }
        }
        w.emit.csum_pending = 0;
        let start = deparser_start(self, w, out);
        if B == BACK_EMITS {
            stage::<true>(&mut cx, l.back, w);
            w.perr = 0;
        } else if B == BACK {
            stage::<false>(&mut cx, l.back, w);
            w.perr = 0;
        }
        if (w.emit.csum_pending | w.emit.bw.n as u64) != 0 || w.packet.payload_at == NOT_IN_PKT {
            std::hint::cold_path();
            if !EG {
                egress_std(ss, slots, port);
            }
            self.lane_off_deparser(w, port, start, out);
            return;
        }
        // the payload, still in the input frame
        let pkt = &w.packet.pkt;
        append_payload(&mut w.emit.out, &pkt[w.packet.payload_at.min(pkt.len())..]);
        let end = w.emit.out.len();
        std::mem::swap(&mut w.emit.out, &mut out.data);
        out.frames.push((port, start..end));
        bump(&w.stats.packets_out);
        // `frame` ends here
        w.packet.pkt.reset();
        // (no panic pending in the context: nothing to drop)
        std::mem::forget(cx);
    }

    /// The end of a frame that left the lane: the jobs it caused, as `Engine::process` runs
    /// them, and the frame's view reset.
    #[inline(always)]
    fn lane_end(&self, w: &mut Worker, out: &mut Outputs) {
        if !w.jobs.queue.is_empty() {
            self.run_jobs(w, out);
        }
        w.packet.pkt.reset();
    }

    /// Off the lane after ingress: the rest of the pass as `Engine::ingress_stages` runs it.
    #[cold]
    #[inline(never)]
    fn lane_off_ingress(&self, l: &Lane, w: &mut Worker, port: u32, out: &mut Outputs, cx: PassCx) {
        let r = &mut FrontRan(Fused {
            pass: &l.pass,
            cx,
            fresh: None,
        });
        self.ingress_stages(w, port, 0, out, r);
        self.lane_end(w, out);
    }

    /// Off the lane after the egress control: the rest as `Engine::after_egress` runs it.
    #[cold]
    #[inline(never)]
    fn lane_off_egress(&self, l: &Lane, w: &mut Worker, port: u32, out: &mut Outputs, cx: PassCx) {
        let r = &mut FrontRan(Fused {
            pass: &l.pass,
            cx,
            fresh: None,
        });
        self.after_egress(w, port, true, out, r);
        self.lane_end(w, out);
    }

    /// Off the lane after the deparser: the rest as `Engine::frame_out` runs it (no truncation,
    /// no recirculation: the lane has no effects).
    #[cold]
    #[inline(never)]
    fn lane_off_deparser(&self, w: &mut Worker, port: u32, start: usize, out: &mut Outputs) {
        self.frame_out(w, port, start, (None, None), out);
        self.lane_end(w, out);
    }
}

#[cfg(test)]
#[path = "lane_tests.rs"]
mod tests;
