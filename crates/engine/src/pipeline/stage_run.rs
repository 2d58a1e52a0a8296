//! How one pass runs its stages: each through its block or its own native entry ([`Blocks`]),
//! or, when every stage of the program is native (or empty) and the packet is not traced, all of
//! them on one native context ([`Fused`]), the front of a new packet's pass then one generated
//! function (`crate::native::front`). The pass's frame around them (`pipeline/mod.rs`) is the
//! same for both.

use crate::native::stages::{FrontFn, Pass};
use crate::native::PassCx;
use crate::{Engine, Outputs, Worker};

/// The stages of a pass, as the pass's frame runs them.
pub(crate) trait StageRun {
    fn parser(&mut self, e: &Engine, w: &mut Worker);
    /// Verify, then ingress (`port`, `itype`: for the trace).
    fn verify_ingress(&mut self, e: &Engine, w: &mut Worker, port: u32, itype: u32);
    /// The egress control; false when it has no code (nothing ran).
    fn egress(&mut self, e: &Engine, w: &mut Worker) -> bool;
    /// The compute-checksum control.
    fn compute(&mut self, e: &Engine, w: &mut Worker);
    fn deparser(&mut self, e: &Engine, w: &mut Worker);

    /// The parser, then verify and ingress.
    #[inline(always)]
    fn front(&mut self, e: &Engine, w: &mut Worker, port: u32, itype: u32) {
        self.parser(e, w);
        self.verify_ingress(e, w, port, itype);
    }

    /// The compute control, then the deparser appending to `out`'s buffer (which `w.emit.out`
    /// holds from then on: [`Engine::deparser_start`]): where the frame starts in it.
    #[inline(always)]
    fn back(&mut self, e: &Engine, w: &mut Worker, out: &mut Outputs) -> usize {
        self.compute(e, w);
        let start = e.deparser_start(w, out);
        self.deparser(e, w);
        start
    }
}

/// Each stage on its own: its native function entered directly when it has one and the worker
/// can take it, its block otherwise.
pub(crate) struct Blocks;

impl StageRun for Blocks {
    #[inline(always)]
    fn parser(&mut self, e: &Engine, w: &mut Worker) {
        e.run_parser(w);
    }

    #[inline(always)]
    fn verify_ingress(&mut self, e: &Engine, w: &mut Worker, port: u32, itype: u32) {
        let n = &e.controls.native;
        if n.verify_ingress
            .is_some_and(|(v, i)| crate::native::enter_two(v, i, e, w))
        {
            // verify and ingress with one native context
            w.perr = 0;
        } else {
            e.run_stage(w, &e.controls.verify, n.verify);
            if let Some(t) = w.trace.as_mut() {
                std::hint::cold_path();
                t.push(format!("ingress (port {port}, instance_type {itype})"));
            }
            e.run_stage(w, &e.controls.ingress, n.ingress);
        }
    }

    #[inline(always)]
    fn egress(&mut self, e: &Engine, w: &mut Worker) -> bool {
        if e.controls.egress.is_empty() && e.controls.native.egress.is_none() {
            return false;
        }
        e.run_stage(w, &e.controls.egress, e.controls.native.egress);
        true
    }

    #[inline(always)]
    fn compute(&mut self, e: &Engine, w: &mut Worker) {
        e.run_block(w, &e.controls.compute);
    }

    #[inline(always)]
    fn deparser(&mut self, e: &Engine, w: &mut Worker) {
        e.run_stage(w, &e.deparser.block, e.controls.native.deparser);
    }
}

/// Every stage on one native context ([`Pass`], [`PassCx`]): each stage's function called
/// directly, the parser error cleared after each control as [`Engine::run_stage`] does.
pub(crate) struct Fused<'a> {
    pub(crate) pass: &'a Pass,
    pub(crate) cx: PassCx<'a>,
    /// The pass's generated front ([`Pass::front`]), when the frame left the packet's resets to
    /// it (the context made by `PassCx::fresh`).
    pub(crate) fresh: Option<FrontFn>,
}

impl StageRun for Fused<'_> {
    #[inline(always)]
    fn front(&mut self, e: &Engine, w: &mut Worker, port: u32, itype: u32) {
        match self.fresh {
            Some(f) => self.cx.run_fresh(f, self.pass, e, w, (port, itype)),
            None => self.cx.run_front(self.pass, e, w),
        }
    }

    #[inline(always)]
    fn back(&mut self, e: &Engine, w: &mut Worker, out: &mut Outputs) -> usize {
        if let Some(f) = self.pass.back {
            // compute and deparser as one generated function, the output attached before it
            let start = e.deparser_start(w, out);
            if self.pass.deparser_emits {
                self.cx.run::<true>(f, w);
            } else {
                self.cx.run::<false>(f, w);
            }
            w.perr = 0;
            return start;
        }
        let (Some(c), Some(d)) = (self.pass.compute, self.pass.deparser) else {
            self.compute(e, w);
            let start = e.deparser_start(w, out);
            self.deparser(e, w);
            return start;
        };
        // both native: one context load (the output buffer taken before the compute control,
        // which does not emit)
        let start = e.deparser_start(w, out);
        if self.pass.deparser_emits {
            self.cx.run_back::<true>(c, d, w);
        } else {
            self.cx.run_back::<false>(c, d, w);
        }
        w.perr = 0;
        start
    }

    #[inline(always)]
    fn parser(&mut self, e: &Engine, w: &mut Worker) {
        let r = self.cx.run::<false>(self.pass.parser, w);
        e.native_parser_done(w, r);
    }

    #[inline(always)]
    fn verify_ingress(&mut self, _: &Engine, w: &mut Worker, _: u32, _: u32) {
        if let (Some(v), Some(i)) = (self.pass.verify, self.pass.ingress) {
            // back to back on the context, as `Blocks` enters them
            self.cx.run_two(v, i, w);
            w.perr = 0;
            return;
        }
        if let Some(f) = self.pass.verify {
            self.cx.run::<false>(f, w);
            w.perr = 0;
        }
        if let Some(f) = self.pass.ingress {
            self.cx.run::<false>(f, w);
            w.perr = 0;
        }
    }

    #[inline(always)]
    fn egress(&mut self, _: &Engine, w: &mut Worker) -> bool {
        let Some(f) = self.pass.egress else {
            return false;
        };
        self.cx.run::<false>(f, w);
        w.perr = 0;
        true
    }

    #[inline(always)]
    fn compute(&mut self, e: &Engine, w: &mut Worker) {
        match self.pass.compute {
            Some(f) => {
                self.cx.run::<false>(f, w);
                w.perr = 0;
            }
            None => e.run_block(w, &e.controls.compute),
        }
    }

    #[inline(always)]
    fn deparser(&mut self, _: &Engine, w: &mut Worker) {
        if let Some(f) = self.pass.deparser {
            if self.pass.deparser_emits {
                self.cx.run::<true>(f, w);
            } else {
                self.cx.run::<false>(f, w);
            }
            w.perr = 0;
        }
    }
}
