//! The lean frame of the native engine's common case: a new packet (nothing preserved, not
//! traced, no queueing) of a program whose whole pass is generated code (the front, the egress
//! control when it has code, compute and the deparser: [`Lane`]) runs here with only the checks
//! that case needs. Whatever is not that case — effects (drop, clone, resubmit, recirculate,
//! truncate), multicast, the drop port, a parser that did not accept, a panic of a callback,
//! checksums left to settle, bits left in the bit writer, a payload moved out of the input frame —
//! leaves the lane for the general frame of `pipeline/mod.rs` at the point it was reached, so
//! the packets, state and counters are those of the general path.

use crate::native::helpers::Ctx;
use crate::native::stages::{FrontFn, NativeFn, Pass, Stages};
use crate::native::PassCx;
use crate::pipeline::stage_run::{Fused, StageRun};
use crate::pipeline::{get, put, DROP_PORT};
use crate::{bump, Engine, Outputs, Worker, NOT_IN_PKT};
use std::sync::atomic::Ordering;

/// What the lane runs of a program, fixed when the program is loaded.
#[derive(Clone, Copy)]
pub(crate) struct Lane {
    /// The program's fused pass (its front, egress, compute and deparser are those below).
    pass: Pass,
    /// The pass's generated front (`crate::native::front`) and whether it zeroes the slots.
    front: FrontFn,
    zeroes: bool,
    /// The egress control (`None`: no statements).
    egress: Option<NativeFn>,
    /// Compute and the deparser as one function, or the deparser alone when the compute control
    /// has no statements (`None`: neither has any); `emits`: it carries the output.
    back: Option<NativeFn>,
    emits: bool,
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
        Some(Lane {
            pass: p,
            front: front.f,
            zeroes: front.zeroes,
            egress: p.egress,
            back,
            emits: p.deparser_emits,
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
    /// state; the same arguments, so that `process` ends in a jump here).
    #[inline(never)]
    pub(crate) fn lane(&self, w: &mut Worker, port: u32, frame: &[u8], out: &mut Outputs) {
        let Some(l) = &self.controls.native.lane else {
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
        if !l.zeroes {
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
        let spec = get(&w.slots, ss.egress_spec);
        if w.fx.any() || get(&w.slots, ss.mcast_grp) != 0 || spec == DROP_PORT {
            std::hint::cold_path();
            self.lane_off_ingress(l, w, port, out, cx);
            return;
        }
        // the egress pass (as `Engine::egress_pass` starts it)
        let port = spec as u32;
        let slots = w.slots.as_mut_slice();
        put(slots, ss.egress_port, port as u64);
        put(slots, ss.egress_spec, 0);
        put(slots, ss.egress_rid, 0);
        put(slots, ss.instance_type, 0);
        if let Some(f) = l.egress {
            cx.run::<false>(f, w);
            w.perr = 0;
            if w.fx.any() || get(&w.slots, ss.egress_spec) == DROP_PORT {
                std::hint::cold_path();
                self.lane_off_egress(l, w, port, out, cx);
                return;
            }
        }
        w.emit.csum_pending = 0;
        let start = self.deparser_start(w, out);
        if let Some(b) = l.back {
            if l.emits {
                cx.run::<true>(b, w);
            } else {
                cx.run::<false>(b, w);
            }
            w.perr = 0;
        }
        if w.emit.csum_pending != 0 || w.emit.bw.n != 0 || w.packet.payload_at == NOT_IN_PKT {
            std::hint::cold_path();
            self.lane_off_deparser(w, port, start, out);
            return;
        }
        // the payload, still in the input frame
        let pkt = &w.packet.pkt;
        w.emit
            .out
            .extend_from_slice(&pkt[w.packet.payload_at.min(pkt.len())..]);
        std::mem::swap(&mut w.emit.out, &mut out.data);
        bump(&w.stats.packets_out);
        out.frames.push((port, start..out.data.len()));
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
impl Lane {
    pub(crate) fn has_no_egress(&self) -> bool {
        self.egress.is_none()
    }
}

#[cfg(test)]
#[path = "lane_tests.rs"]
mod tests;
