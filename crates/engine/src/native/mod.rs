//! The native backend: each statement list of the program (a parser state, a control body, an
//! action body, the deparser) compiled to machine code with Cranelift when the engine is built.
//!
//! Hybrid with the closures of `load/compile.rs`: a statement the translator covers
//! (`stmt.rs`, `expr.rs`) becomes inline machine code over the worker's slots; any other statement
//! becomes a call, through a trampoline (`helpers.rs`), to the closure the closure backend would
//! run for it. So every program runs on this backend with the closure backend's semantics, and
//! coverage grows statement kind by statement kind. Each native list is wrapped back into a
//! one-statement [`crate::engine::CBlock`], so the pipeline keeps its shape; the whole parser and
//! the pipeline's stages are also kept as plain functions ([`stages`]) that the pipeline calls
//! directly ([`enter`]), all of a pass's stages on one context when each is native or empty
//! ([`PassCx`]). The code lives in a [`jit::Jit`] shared by those blocks and stages: freed
//! when the engine that owns them is dropped. Chosen
//! with [`crate::Backend`].

#[cfg(test)]
mod bytes_emit_tests;
pub(crate) mod checksum;
#[cfg(test)]
mod checksum_tests;
#[cfg(test)]
mod emit_tests;
pub(crate) mod expr;
pub(crate) mod front;
#[cfg(test)]
mod front_tests;
pub(crate) mod helpers;
pub(crate) mod jit;
pub(crate) mod packet;
pub(crate) mod parse;
#[cfg(test)]
mod pass_tests;
pub(crate) mod registers;
#[cfg(test)]
mod registers_tests;
pub(crate) mod stages;
pub(crate) mod stmt;
#[cfg(test)]
mod table_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod wide_key_tests;
#[cfg(test)]
mod wide_tests;

use crate::engine::{CBlock, SF};
use crate::load::compile::{Code, Cx};
use crate::{Engine, Worker};
use helpers::{decode, Ctx, Keep, Out};
use stages::Stage;
use std::sync::Arc;

/// How much of the program the translator covered, for tests and the load-time report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Coverage {
    /// Statement lists compiled to machine code.
    pub(crate) lists: usize,
    /// Statement lists left on closures (Cranelift refused them).
    pub(crate) failed: usize,
    /// Statements translated inline, and statements called through their closure.
    pub(crate) inline: usize,
    pub(crate) fallback: usize,
    /// Parser transitions the whole parser's function hands to the general loop.
    pub(crate) parser_general: usize,
}

/// Compiles the parser states, the verify, ingress, egress, compute and deparser bodies and the
/// action bodies of `code` to machine code, replacing each list that compiled by its native form. `None` when no
/// code generator is available for this machine (the engine then runs on closures).
pub(crate) fn compile(cx: &Cx, code: &mut Code) -> Option<Coverage> {
    let mut jit = jit::Jit::new().ok()?;
    jit.deferred = code
        .deferred
        .iter()
        .map(|d| (d.header, d.f_off, d.f_slot as u32))
        .collect();
    let p = cx.prog;
    let nslots = p.slots as usize + 1;
    let mut stats = Coverage::default();
    // (which list, its function and what it keeps alive)
    let mut built: Vec<(Target, cranelift_module::FuncId, Keep)> = vec![];
    let mut lists: Vec<(Target, &[p4sec_ir::Stmt])> = vec![];
    for (i, s) in p.parser.states.iter().enumerate() {
        lists.push((Target::State(i), &s.body));
    }
    lists.push((Target::Verify, &p.verify_checksum.body));
    lists.push((Target::Ingress, &p.ingress.body));
    lists.push((Target::Egress, &p.egress.body));
    lists.push((Target::Deparser, &p.deparser.body));
    // the compute control's deferred checksums as `load/compile.rs` chose them (kept on its
    // closures when that choice cannot be followed)
    let compute_bits = checksum::deferred_bits(p, code, &p.compute_checksum.body);
    if compute_bits.is_some() {
        lists.push((Target::Compute, &p.compute_checksum.body));
    }
    for (i, a) in p.actions.iter().enumerate() {
        lists.push((Target::Action(i), &a.body));
    }
    // stage lists worth less than entering native code, kept when they let the pass run on one
    // context (see below)
    let mut light: Vec<(Target, cranelift_module::FuncId, Keep)> = vec![];
    for (t, body) in lists {
        if body.is_empty() {
            continue;
        }
        let f = match (&t, &compute_bits) {
            (Target::Compute, Some(bits)) => {
                jit.build(cx, nslots, |fx| fx.compute_body(body, bits))
            }
            _ => jit.function(cx, body, nslots, matches!(t, Target::Verify)),
        };
        match f {
            Ok((id, keep)) if keep.weight < Keep::WORTH && keep.weight > 0 && t.is_stage() => {
                light.push((t, id, keep));
            }
            // a list with (almost) nothing inline would only add a call around its closures:
            // kept on them
            Ok((_, keep)) if keep.weight < Keep::WORTH => stats.fallback += keep.stmts.len(),
            Ok((id, keep)) => {
                stats.inline += keep.inline;
                stats.fallback += keep.stmts.len();
                built.push((t, id, keep));
            }
            Err(_) => stats.failed += 1,
        }
    }
    // the whole parser as one function (the hot loop's transitions; the state lists above stay
    // for the general loop)
    let parser = if p.parser.states.is_empty() {
        None
    } else {
        jit.build(cx, nslots, |fx| {
            fx.parser(
                &code.lean_next,
                &code.select_cases,
                crate::engine::MAX_PARSER_STEPS,
            )
        })
        .ok()
    };
    // a light stage list (a deparser of one `emit`, say) costs about what it saves when entered on
    // its own, but once every stage of the pass is native the pass enters them all on one
    // context ([`pass_of`]): kept then, left on closures otherwise
    let stage_ok = |t: &Target| {
        let body: &[p4sec_ir::Stmt] = match t {
            Target::Verify => &p.verify_checksum.body,
            Target::Ingress => &p.ingress.body,
            Target::Egress => &p.egress.body,
            Target::Compute => &p.compute_checksum.body,
            _ => &p.deparser.body,
        };
        let native = |(x, _, k): &(Target, cranelift_module::FuncId, Keep)| {
            x == t && (matches!(t, Target::Deparser) || !k.emits)
        };
        body.is_empty() || built.iter().any(native) || light.iter().any(native)
    };
    let fuses = parser.is_some()
        && [
            Target::Verify,
            Target::Ingress,
            Target::Egress,
            Target::Deparser,
        ]
        .iter()
        .all(stage_ok);
    for (t, id, keep) in light {
        if fuses {
            stats.inline += keep.inline;
            stats.fallback += keep.stmts.len();
            built.push((t, id, keep));
        } else {
            stats.fallback += keep.stmts.len();
        }
    }
    // the front of the fused pass (the packet's resets, parser, verify, ingress) as one function
    let front = match &parser {
        Some((pid, pkeep)) if fuses => {
            let find = |t: Target| built.iter().find(|(x, _, k)| *x == t && !k.emits);
            let (v, i) = (find(Target::Verify), find(Target::Ingress));
            let ss = crate::load::plans::StdSlots::new(p);
            let plan = front::Plan {
                nslots,
                tracked: code.tracked_headers.clone(),
                ingress_port: ss.ingress_port,
                instance_type: ss.instance_type,
                packet_length: ss.packet_length,
                parser_may_hide_panic: !pkeep.exprs.is_empty(),
                verify_may_hide_panic: v.is_some_and(|(_, _, k)| !k.exprs.is_empty()),
            };
            // (a program using the traffic manager's fields has them written by Rust first)
            let fits = !ss.tm_any
                && plan.tracked.iter().all(|&h| h < p.headers.len())
                && [plan.ingress_port, plan.instance_type, plan.packet_length]
                    .iter()
                    .all(|&(s, _)| s < nslots);
            fits.then(|| {
                jit.build_front(&plan, *pid, v.map(|x| x.1), i.map(|x| x.1))
                    .ok()
                    .map(|id| (id, plan.zeroes()))
            })
            .flatten()
        }
        _ => None,
    };
    // the back of the fused pass (compute, deparser) as one function
    let back = if fuses {
        let find = |t: Target| built.iter().find(|(x, _, _)| *x == t);
        match (find(Target::Compute), find(Target::Deparser)) {
            (Some((_, c, ck)), Some((_, d, _))) if !ck.emits => {
                jit.build_back(*c, *d, !ck.exprs.is_empty()).ok()
            }
            _ => None,
        }
    } else {
        None
    };
    if jit.finalize().is_err() {
        return None;
    }
    let jit = Arc::new(jit);
    let mut parser_keep = None;
    if let Some((id, keep)) = parser {
        // SAFETY: as for the lists below
        let f = unsafe { jit.entry(id) };
        code.native_stages.parser = stage(f, false, nslots, p.headers.len());
        stats.parser_general = keep.general;
        // what the parser's code points at lives as long as the code
        parser_keep = Some(keep);
    }
    code.native_stages.alive = Some(Box::new((jit.clone(), parser_keep)));
    for (t, id, keep) in built {
        let slot = match t {
            Target::State(i) => &mut code.states[i],
            Target::Verify => &mut code.verify,
            Target::Ingress => &mut code.ingress,
            Target::Egress => &mut code.egress,
            Target::Compute => &mut code.compute,
            Target::Deparser => &mut code.deparser,
            Target::Action(i) => &mut code.actions[i],
        };
        let closures = std::mem::replace(slot, CBlock::new(vec![], false));
        // SAFETY: the function was compiled with the `extern "C" fn(*mut Ctx) -> u64` signature
        // and lives in `jit`, which every block calling it holds
        let f = unsafe { jit.entry(id) };
        let st = stage(f, keep.emits, nslots, p.headers.len());
        match t {
            Target::Verify => code.native_stages.verify = st,
            Target::Ingress => code.native_stages.ingress = st,
            Target::Egress => code.native_stages.egress = st,
            Target::Compute => code.native_stages.compute = st,
            Target::Deparser => code.native_stages.deparser = st,
            Target::State(_) | Target::Action(_) => {}
        }
        *slot = CBlock::new(
            vec![wrap(
                f,
                jit.clone(),
                keep,
                closures,
                (nslots, p.headers.len()),
            )],
            false,
        );
        stats.lists += 1;
    }
    let st = &mut code.native_stages;
    st.verify_ingress = match (st.verify, st.ingress) {
        (Some(v), Some(i)) if !v.emits && !i.emits => Some((v, i)),
        _ => None,
    };
    code.native_stages.pass = pass_of(&code.native_stages, code);
    if let (Some(pass), Some((id, zeroes))) = (code.native_stages.pass.as_mut(), front) {
        pass.front = Some(stages::Front {
            // SAFETY: the function was compiled with `front::signature` (a thin pointer and two
            // u64 arguments, a u64 result) and lives in `jit`, which `alive` holds
            f: unsafe { std::mem::transmute::<*const u8, stages::FrontFn>(jit.address(id)) },
            zeroes,
        });
    }
    if let (Some(pass), Some(id)) = (code.native_stages.pass.as_mut(), back) {
        if pass.compute.is_some() && pass.deparser.is_some() {
            // SAFETY: as for the lists above (the stages' signature)
            pass.back = Some(unsafe {
                std::mem::transmute::<*const u8, stages::NativeFn>(jit.address(id))
            });
        }
    }
    Some(stats)
}

/// The pass's stages entered with one context ([`stages::Pass`]): when the parser is native and
/// each control and the deparser is native (the controls not emitting) or has no statements.
fn pass_of(st: &stages::Stages, code: &Code) -> Option<stages::Pass> {
    // a stage's function, `Some(None)` when it has no statements, `None` when it runs closures
    let of = |s: Option<Stage>, b: &CBlock, may_emit: bool| match s {
        Some(s) if may_emit || !s.emits => Some(Some(s)),
        Some(_) => None,
        None if b.is_empty() => Some(None),
        None => None,
    };
    let parser = st.parser?;
    let verify = of(st.verify, &code.verify, false)?;
    let ingress = of(st.ingress, &code.ingress, false)?;
    let egress = of(st.egress, &code.egress, false)?;
    let deparser = of(st.deparser, &code.deparser, true)?;
    // the compute control runs its block when it is not native
    let compute = st.compute.filter(|s| !s.emits);
    let all = [Some(parser), verify, ingress, egress, compute, deparser];
    let all = all.iter().flatten();
    Some(stages::Pass {
        parser: parser.f,
        verify: verify.map(|s| s.f),
        ingress: ingress.map(|s| s.f),
        egress: egress.map(|s| s.f),
        compute: compute.map(|s| s.f),
        deparser: deparser.map(|s| s.f),
        deparser_emits: deparser.is_some_and(|s| s.emits),
        nslots: all.clone().map(|s| s.nslots).max().unwrap_or(0),
        nheaders: all.map(|s| s.nheaders).max().unwrap_or(0),
        front: None,
        back: None,
    })
}

/// One native context for a whole pass ([`stages::Pass`]): the worker's shape and tracing checked
/// once, the context built once, each stage's function called on it. Rust code that runs between
/// the stages may move the worker's cursor and, on its cold paths, its slot buffer: the context's
/// pointers are taken from the worker again before each call.
pub(crate) struct PassCx<'a> {
    pub(crate) ctx: Ctx<'a>,
}

impl<'a> PassCx<'a> {
    /// The context, or `None` when the worker cannot take the pass's code (fewer slots or header
    /// offsets than the program, or a traced packet): the stages then run one by one.
    #[inline(always)]
    pub(crate) fn new(p: &stages::Pass, e: &'a Engine, w: &mut Worker) -> Option<PassCx<'a>> {
        if w.slots.len() < p.nslots || w.packet.hdr_off.len() < p.nheaders || w.trace.is_some() {
            std::hint::cold_path();
            return None;
        }
        Some(PassCx {
            ctx: Ctx::new(e, w),
        })
    }

    /// The context for a pass whose front is generated ([`front`]): `None` as [`PassCx::new`]
    /// says, or when the worker's slots are not exactly the pass's (the front zeroes them all).
    #[inline(always)]
    pub(crate) fn fresh(p: &stages::Pass, e: &'a Engine, w: &mut Worker) -> Option<PassCx<'a>> {
        if w.slots.len() != p.nslots || w.packet.hdr_off.len() < p.nheaders || w.trace.is_some() {
            std::hint::cold_path();
            return None;
        }
        // a new pass: the cursor at the packet's start
        debug_assert_eq!(w.packet.cursor, 0);
        Some(PassCx {
            ctx: Ctx {
                cursor: 0,
                ..Ctx::new(e, w)
            },
        })
    }

    /// The generated front `f` of pass `p` on a context [`PassCx::fresh`] made, nothing of the
    /// new packet reset yet but what `Engine::ingress_pass` resets before it (`f` resets the rest,
    /// writes `ingress_port` and `instance_type` from `port` and `itype`, and runs the parser,
    /// verify and ingress). A parser that did not accept: the rest as [`PassCx::run_front`] does
    /// it.
    #[inline(always)]
    pub(crate) fn run_fresh(
        &mut self,
        f: stages::FrontFn,
        p: &stages::Pass,
        e: &Engine,
        w: &mut Worker,
        (port, itype): (u32, u32),
    ) {
        // the worker's pointer re-derived from `w` (as in `run`); its buffers are those the
        // context took, untouched since
        self.ctx.w = w;
        // SAFETY: `f` is a front (`front::signature`) whose code reads and writes the slots below
        // `p.nslots` (the worker's, checked by `fresh`) and header offsets below `p.nheaders`,
        // and calls the pass's stages, as `run` does
        let r = unsafe {
            f(
                (&mut self.ctx as *mut Ctx).cast(),
                port as u64,
                itype as u64,
            )
        };
        // (a front that ran to its end wrote the cursor itself, after the parser: controls do
        // not move it)
        if r != front::DONE {
            self.front_after_parser(p, e, w, r);
            return;
        }
        debug_assert_eq!(w.packet.cursor, self.ctx.cursor);
        self.resume_panic();
    }

    /// Runs stage function `f` of the pass on `w`: the word it returned (a panic of a callback
    /// resumed); `E`: the function emits (the context carries the output while it runs).
    #[inline(always)]
    pub(crate) fn run<const E: bool>(&mut self, f: stages::NativeFn, w: &mut Worker) -> u64 {
        // SAFETY: as in `enter`
        let f = unsafe { std::mem::transmute::<stages::NativeFn, helpers::Entry>(f) };
        // the pointers re-derived from `w`, which the pass's Rust code used since the last stage:
        // the generated code never writes through a pointer older than the worker's last use
        // (sound under Rust's aliasing rules, not only under what the compiler does today)
        self.ctx.load::<false>(w);
        self.ctx.w = w;
        let mut out = if E { Some(Out::attach(w)) } else { None };
        if let Some(o) = out.as_mut() {
            self.ctx.out = o;
        }
        // SAFETY: as in `call`: the context points at the live engine and worker, whose shape
        // `new` checked and whose buffers are those the context just took from it
        let r = unsafe { f(&mut self.ctx) };
        self.ctx.store::<E>(w);
        if E {
            self.ctx.out = std::ptr::null_mut();
        }
        self.resume_panic();
        r
    }

    /// Runs stage functions `a` then `b` of the pass, neither emitting, with nothing between them
    /// but the parser error cleared (verify, then ingress), as [`enter_two`] does.
    #[inline(always)]
    pub(crate) fn run_two(&mut self, a: stages::NativeFn, b: stages::NativeFn, w: &mut Worker) {
        // SAFETY: as in `enter`
        let (fa, fb) = unsafe {
            (
                std::mem::transmute::<stages::NativeFn, helpers::Entry>(a),
                std::mem::transmute::<stages::NativeFn, helpers::Entry>(b),
            )
        };
        self.ctx.load::<false>(w);
        self.ctx.w = w;
        // SAFETY: as in `run`, and as in `enter_two` for the context `a` left
        unsafe {
            fa(&mut self.ctx);
            if self.ctx.panic.is_none() {
                (*self.ctx.w).perr = 0;
                fb(&mut self.ctx);
            }
        }
        self.ctx.store::<false>(w);
        self.resume_panic();
    }

    /// The parser (`p.parser`), then, when it accepted, verify and ingress, on one context load:
    /// the parser's end (`Engine::native_parser_done` for an accepted packet: the cursor and where
    /// the payload starts) written through the context's worker, the parser error cleared after
    /// each control. A parser that did not accept (or a panic) ends the native run: the rest as
    /// [`PassCx::run`] and [`PassCx::run_two`] do it.
    #[inline(always)]
    pub(crate) fn run_front(&mut self, p: &stages::Pass, e: &Engine, w: &mut Worker) {
        // SAFETY: as in `enter`
        let fp = unsafe { std::mem::transmute::<stages::NativeFn, helpers::Entry>(p.parser) };
        self.ctx.load::<false>(w);
        self.ctx.w = w;
        // SAFETY: as in `run`
        let r = unsafe { fp(&mut self.ctx) };
        if r != crate::engine::parse_end::ACCEPT || self.ctx.panic.is_some() {
            self.front_after_parser(p, e, w, r);
            return;
        }
        // SAFETY: the context's worker is `w`, not used since; the generated code and its
        // helpers keep the context in step with it (as `enter_two` relies on)
        unsafe {
            let wp = self.ctx.w;
            (*wp).packet.cursor = self.ctx.cursor;
            (*wp).packet.payload_at = (self.ctx.cursor / 8).min(self.ctx.pkt_len);
            if let Some(f) = p.verify {
                // SAFETY: as in `enter`
                let f = std::mem::transmute::<stages::NativeFn, helpers::Entry>(f);
                f(&mut self.ctx);
                (*self.ctx.w).perr = 0;
            }
            if let Some(f) = p.ingress {
                if self.ctx.panic.is_none() {
                    // SAFETY: as in `enter`
                    let f = std::mem::transmute::<stages::NativeFn, helpers::Entry>(f);
                    f(&mut self.ctx);
                    (*self.ctx.w).perr = 0;
                }
            }
        }
        self.ctx.store::<false>(w);
        self.resume_panic();
    }

    /// The compute control's function `c` (not emitting), then the deparser's `d` (`E`: it
    /// emits), with nothing between them but the parser error cleared, on one context load; the
    /// deparser's output attached after `c` ran.
    #[inline(always)]
    pub(crate) fn run_back<const E: bool>(
        &mut self,
        c: stages::NativeFn,
        d: stages::NativeFn,
        w: &mut Worker,
    ) {
        // SAFETY: as in `enter`
        let (fc, fd) = unsafe {
            (
                std::mem::transmute::<stages::NativeFn, helpers::Entry>(c),
                std::mem::transmute::<stages::NativeFn, helpers::Entry>(d),
            )
        };
        self.ctx.load::<false>(w);
        self.ctx.w = w;
        let mut out: Option<Out> = None;
        // SAFETY: as in `run`, and for the worker written between them as in `run_front`
        unsafe {
            fc(&mut self.ctx);
            if self.ctx.panic.is_none() {
                let wp = self.ctx.w;
                (*wp).perr = 0;
                if E {
                    let o = out.insert(Out::attach(&mut *wp));
                    self.ctx.out = o;
                }
                fd(&mut self.ctx);
            }
        }
        if out.is_some() {
            self.ctx.store::<true>(w);
        } else {
            self.ctx.store::<false>(w);
        }
        self.ctx.out = std::ptr::null_mut();
        self.resume_panic();
    }

    /// The front after a parser that did not accept (its end word `r`) or a panic of a callback:
    /// the context written back (the panic resumed), the parser's end recorded, then verify and
    /// ingress one by one, each clearing the parser error.
    #[cold]
    #[inline(never)]
    fn front_after_parser(&mut self, p: &stages::Pass, e: &Engine, w: &mut Worker, r: u64) {
        self.ctx.store::<false>(w);
        self.resume_panic();
        e.native_parser_done(w, r);
        if let Some(f) = p.verify {
            self.run::<false>(f, w);
            w.perr = 0;
        }
        if let Some(f) = p.ingress {
            self.run::<false>(f, w);
            w.perr = 0;
        }
    }

    /// A panic a callback raised, resumed (the context as it was before it).
    #[inline(always)]
    fn resume_panic(&mut self) {
        if self.ctx.panic.is_some() {
            std::hint::cold_path();
            if let Some(p) = self.ctx.panic.take() {
                std::panic::resume_unwind(p);
            }
        }
    }
}

/// Runs stage `s`'s code on `w`: the word it returned (a flow, or the parser's end), or `None`
/// (nothing run) when the worker cannot take it (fewer slots or header offsets than the program,
/// or a traced packet): the caller runs the stage's block (the parser's loop) instead, as [`wrap`]
/// would.
#[inline(always)]
pub(crate) fn enter(s: Stage, e: &Engine, w: &mut Worker) -> Option<u64> {
    if w.slots.len() < s.nslots || w.packet.hdr_off.len() < s.nheaders || w.trace.is_some() {
        std::hint::cold_path();
        return None;
    }
    // SAFETY: `s.f` is an `Entry` (see `stage`), only its argument's pointee type forgotten
    let f = unsafe { std::mem::transmute::<stages::NativeFn, helpers::Entry>(s.f) };
    Some(if s.emits {
        call::<true>(f, e, w)
    } else {
        call::<false>(f, e, w)
    })
}

/// Stages `a` then `b`, neither emitting (`Stages::verify_ingress`), with nothing between them
/// but the parser error cleared (verify, then ingress), entered with one context; false (nothing
/// run) as [`enter`] says.
#[inline(always)]
pub(crate) fn enter_two(a: Stage, b: Stage, e: &Engine, w: &mut Worker) -> bool {
    let (nslots, nheaders) = (a.nslots.max(b.nslots), a.nheaders.max(b.nheaders));
    debug_assert!(!a.emits && !b.emits);
    if w.slots.len() < nslots || w.packet.hdr_off.len() < nheaders || w.trace.is_some() {
        std::hint::cold_path();
        return false;
    }
    // SAFETY: as in `enter`
    let (fa, fb) = unsafe {
        (
            std::mem::transmute::<stages::NativeFn, helpers::Entry>(a.f),
            std::mem::transmute::<stages::NativeFn, helpers::Entry>(b.f),
        )
    };
    let mut ctx = Ctx::new(e, w);
    // SAFETY: as in `call` (the context, as `a` left it, is what a new one would be: the code and
    // the helpers it calls keep it in step with the worker)
    unsafe {
        fa(&mut ctx);
        if ctx.panic.is_none() {
            (*ctx.w).perr = 0;
            fb(&mut ctx);
        }
    }
    ctx.store::<false>(w);
    if let Some(p) = ctx.panic.take() {
        std::panic::resume_unwind(p);
    }
    true
}

/// Stage `f` as the pipeline keeps it (`emits`: its context carries the output).
fn stage(f: helpers::Entry, emits: bool, nslots: usize, nheaders: usize) -> Option<Stage> {
    Some(Stage {
        // SAFETY: a function pointer to a function pointer of the same ABI (a thin pointer
        // argument, a u64 result); `enter` turns it back before calling it
        f: unsafe { std::mem::transmute::<helpers::Entry, stages::NativeFn>(f) },
        emits,
        nslots,
        nheaders,
    })
}

/// Which statement list of [`Code`] a native function replaces.
#[derive(Clone, Copy, PartialEq)]
enum Target {
    State(usize),
    Verify,
    Ingress,
    Egress,
    Compute,
    Deparser,
    Action(usize),
}

impl Target {
    /// A stage the pass calls (not a parser state's or an action's list).
    fn is_stage(&self) -> bool {
        matches!(
            self,
            Target::Verify | Target::Ingress | Target::Egress | Target::Compute | Target::Deparser
        )
    }
}

/// A native statement list as a statement: a context on the stack, the function called on it, its
/// flow decoded. A worker with fewer slots or header offsets than the program (never one built by
/// [`Worker::new`]) runs the closures instead, so generated code never indexes past them; so does
/// a traced packet (the closures record its path).
fn wrap(
    f: helpers::Entry,
    jit: Arc<jit::Jit>,
    keep: Keep,
    closures: CBlock,
    (nslots, nheaders): (usize, usize),
) -> SF {
    if keep.emits {
        Box::new(move |e: &Engine, w: &mut Worker| {
            // the code and what it points at live as long as this closure
            let _alive = (&jit, &keep);
            run_list::<true>(f, &closures, (nslots, nheaders), e, w)
        })
    } else {
        Box::new(move |e: &Engine, w: &mut Worker| {
            let _alive = (&jit, &keep);
            run_list::<false>(f, &closures, (nslots, nheaders), e, w)
        })
    }
}

/// One call of a native statement list (`E`: it emits, its context carries the output).
#[inline(always)]
fn run_list<const E: bool>(
    f: helpers::Entry,
    closures: &CBlock,
    (nslots, nheaders): (usize, usize),
    e: &Engine,
    w: &mut Worker,
) -> crate::code::Flow {
    if w.slots.len() < nslots || w.packet.hdr_off.len() < nheaders || w.trace.is_some() {
        std::hint::cold_path();
        return closures.run(e, w);
    }
    decode(call::<E>(f, e, w))
}

/// The call itself, on a worker whose slots and header offsets are the program's (checked by the
/// caller): its raw flow.
#[inline(always)]
fn call<const E: bool>(f: helpers::Entry, e: &Engine, w: &mut Worker) -> u64 {
    let mut ctx = Ctx::new(e, w);
    let mut out = if E { Some(Out::attach(w)) } else { None };
    if let Some(o) = out.as_mut() {
        ctx.out = o;
    }
    // SAFETY: `ctx` points at the live engine and worker (and `out`, on this frame, at its
    // output); the code reads and writes slots only below `nslots` and header offsets below
    // `nheaders` (checked when it was generated), packet bytes only below `pkt_len`, output
    // bytes only below the output's capacity, and calls back only through `helpers`
    let r = unsafe { f(&mut ctx) };
    ctx.store::<E>(w);
    if let Some(p) = ctx.panic.take() {
        std::panic::resume_unwind(p);
    }
    r
}
