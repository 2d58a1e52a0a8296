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
use crate::{bump, Engine, Outputs, Worker};
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
    // (controls and the deparser do not move the cursor: the worker has it from the front)
    debug_assert_eq!(w.packet.cursor, cx.ctx.cursor);
    if E {
        debug_assert!(o.len <= w.emit.out.capacity());
        // SAFETY: `o.len` is the output's length as taken, or moved by the code over the bytes
        // it wrote below the capacity (as `Out::store` relies on)
        unsafe { w.emit.out.set_len(o.len) };
        cx.ctx.out = std::ptr::null_mut();
    }
    if cx.ctx.panic.is_some() {
        std::hint::cold_path();
        if let Some(p) = cx.ctx.panic.take() {
            std::panic::resume_unwind(p);
        }
    }
}

/// Appends `src` to `v`, a tail of 8 to 32 bytes (a minimum-size frame's payload) as two
/// overlapping copies of 8 or 16 bytes rather than a call to `memcpy`.
#[inline(always)]
fn append(v: &mut Vec<u8>, src: &[u8]) {
    let n = src.len();
    v.reserve(n);
    let len = v.len();
    // SAFETY: `v` has room for `n` bytes past `len` (reserved above), and `src` is not in `v`'s
    // buffer (a shared slice while `v` is borrowed mutably); each copy below reads and writes
    // `src.len()` bytes in total (two copies of `k` bytes at 0 and `n - k`, `k <= n <= 2k`)
    unsafe {
        let d = v.as_mut_ptr().add(len);
        let s = src.as_ptr();
        if n.wrapping_sub(16) <= 16 {
            type W = [u8; 16];
            let (a, b) = (
                s.cast::<W>().read_unaligned(),
                s.add(n - 16).cast::<W>().read_unaligned(),
            );
            d.cast::<W>().write_unaligned(a);
            d.add(n - 16).cast::<W>().write_unaligned(b);
        } else if n.wrapping_sub(8) < 8 {
            type W = [u8; 8];
            let (a, b) = (
                s.cast::<W>().read_unaligned(),
                s.add(n - 8).cast::<W>().read_unaligned(),
            );
            d.cast::<W>().write_unaligned(a);
            d.add(n - 8).cast::<W>().write_unaligned(b);
        } else {
            std::ptr::copy_nonoverlapping(s, d, n);
        }
        v.set_len(len + n);
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
        // SAFETY: as for `get`
        let put = |(s, m): (usize, u64), v: u64| unsafe { *slots.add(s) = v & m };
        let spec = get(ss.egress_spec);
        if w.fx.any() || get(ss.mcast_grp) != 0 || spec == DROP_PORT {
            std::hint::cold_path();
            self.lane_off_ingress(l, w, port, out, cx);
            return;
        }
        // the egress pass (as `Engine::egress_pass` starts it)
        let port = spec as u32;
        put(ss.egress_port, port as u64);
        put(ss.egress_spec, 0);
        put(ss.egress_rid, 0);
        put(ss.instance_type, 0);
        if EG {
            stage::<false>(&mut cx, l.egress, w);
            w.perr = 0;
            if w.fx.any() || get(ss.egress_spec) == DROP_PORT {
                std::hint::cold_path();
                self.lane_off_egress(l, w, port, out, cx);
                return;
            }
        }
        w.emit.csum_pending = 0;
        let start = self.deparser_start(w, out);
        if B == BACK_EMITS {
            stage::<true>(&mut cx, l.back, w);
            w.perr = 0;
        } else if B == BACK {
            stage::<false>(&mut cx, l.back, w);
            w.perr = 0;
        }
        // (a payload not in the input frame is at `NOT_IN_PKT`, past any frame's end; an offset
        // past the frame's end, which the lane would copy as nothing, leaves the lane too and the
        // general path copies nothing either)
        let at = w.packet.payload_at;
        if (w.emit.csum_pending | w.emit.bw.n as u64) != 0 || at > frame.len() {
            std::hint::cold_path();
            self.lane_off_deparser(w, port, start, out);
            return;
        }
        // the payload, still in the input frame
        // SAFETY: `at` is at most the frame's length (checked above)
        append(&mut w.emit.out, unsafe { frame.get_unchecked(at..) });
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
