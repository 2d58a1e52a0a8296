//! What generated code and Rust share: the context a native function runs on ([`Ctx`]), the
//! encoding of a [`Flow`] in one word, and the `extern "C"` functions generated code calls back
//! into (a statement or an expression the translator does not cover, run by its closure).

use crate::bits::BitWriter;
use crate::code::{Flow, PendingError};
use crate::engine::{SF, XF};
use crate::worker::Emit;
use crate::{Engine, Worker};
use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

pub(crate) mod select;
pub(crate) mod select_lpm;

/// The context of one call of a native function, on the caller's stack, with the parser's view of
/// the packet: generated code reads and writes its fields at their offsets ([`Ctx::OFF_SLOTS`],
/// ...). Every call back into Rust writes the cursor back to the worker first and reloads all of
/// them after.
#[repr(C)]
pub(crate) struct Ctx<'a> {
    pub(crate) slots: *mut u64,
    /// The bytes of the packet in this pass, and how many.
    pub(crate) pkt: *const u8,
    pub(crate) pkt_len: usize,
    /// The parser's cursor, in bits.
    pub(crate) cursor: usize,
    /// Per header: where the fast path extracted it ([`crate::NO_OFFSET`] otherwise).
    pub(crate) hdr_off: *mut usize,
    /// The deparser's output, for code that emits headers itself ([`Out`]; null otherwise).
    pub(crate) out: *mut Out,
    pub(crate) e: &'a Engine,
    pub(crate) w: *mut Worker,
    /// A panic raised by a closure called back, resumed once the native code has returned (never
    /// unwound through generated frames).
    pub(crate) panic: Option<Box<dyn Any + Send>>,
}

impl<'a> Ctx<'a> {
    pub(crate) const OFF_SLOTS: i32 = std::mem::offset_of!(Ctx, slots) as i32;
    pub(crate) const OFF_PKT: i32 = std::mem::offset_of!(Ctx, pkt) as i32;
    pub(crate) const OFF_PKT_LEN: i32 = std::mem::offset_of!(Ctx, pkt_len) as i32;
    pub(crate) const OFF_CURSOR: i32 = std::mem::offset_of!(Ctx, cursor) as i32;
    pub(crate) const OFF_HDR_OFF: i32 = std::mem::offset_of!(Ctx, hdr_off) as i32;
    pub(crate) const OFF_OUT: i32 = std::mem::offset_of!(Ctx, out) as i32;
    /// The context of a call (without the deparser's output: see [`Out::attach`]).
    #[inline(always)]
    pub(crate) fn new(e: &'a Engine, w: &mut Worker) -> Ctx<'a> {
        Ctx {
            slots: w.slots.as_mut_ptr(),
            pkt: w.packet.pkt.as_ptr(),
            pkt_len: w.packet.pkt.len(),
            cursor: w.packet.cursor,
            hdr_off: w.packet.hdr_off.as_mut_ptr(),
            out: std::ptr::null_mut(),
            e,
            w,
            panic: None,
        }
    }

    /// The worker's state as the generated code sees it (after Rust ran); `E`: the code emits
    /// (its [`Out`] reloaded too).
    #[inline(always)]
    pub(crate) fn load<const E: bool>(&mut self, w: &mut Worker) {
        self.slots = w.slots.as_mut_ptr();
        self.pkt = w.packet.pkt.as_ptr();
        self.pkt_len = w.packet.pkt.len();
        self.cursor = w.packet.cursor;
        self.hdr_off = w.packet.hdr_off.as_mut_ptr();
        if E {
            // SAFETY: code that emits runs with its `Out` attached (`Out::attach`)
            unsafe { (*self.out).load(w) };
        }
    }

    /// What the generated code changed, back into the worker (before Rust runs); `E` as in
    /// [`Ctx::load`].
    #[inline(always)]
    pub(crate) fn store<const E: bool>(&self, w: &mut Worker) {
        w.packet.cursor = self.cursor;
        if E {
            // SAFETY: as in `load`
            unsafe { (*self.out).store(w) };
        }
    }
}

/// The deparser's output as code that emits sees it: the output buffer's bytes, how many are
/// written and how many fit (generated code writes only below `cap` and moves `len` over what it
/// wrote), and the rest of the deparser's state (its pending bits and deferred checksums).
#[repr(C)]
pub(crate) struct Out {
    pub(crate) ptr: *mut u8,
    pub(crate) len: usize,
    pub(crate) cap: usize,
    pub(crate) emit: *mut Emit,
}

impl Out {
    pub(crate) const OFF_PTR: i32 = std::mem::offset_of!(Out, ptr) as i32;
    pub(crate) const OFF_LEN: i32 = std::mem::offset_of!(Out, len) as i32;
    pub(crate) const OFF_CAP: i32 = std::mem::offset_of!(Out, cap) as i32;
    pub(crate) const OFF_EMIT: i32 = std::mem::offset_of!(Out, emit) as i32;

    /// The worker's output, for `ctx` (which must not outlive the returned value's place: the
    /// caller keeps it on its stack for the call).
    #[inline(always)]
    pub(crate) fn attach(w: &mut Worker) -> Out {
        let mut o = Out {
            ptr: std::ptr::null_mut(),
            len: 0,
            cap: 0,
            emit: std::ptr::null_mut(),
        };
        o.load(w);
        o
    }

    #[inline(always)]
    fn load(&mut self, w: &mut Worker) {
        self.ptr = w.emit.out.as_mut_ptr();
        self.len = w.emit.out.len();
        self.cap = w.emit.out.capacity();
        self.emit = &mut w.emit;
    }

    #[inline(always)]
    fn store(&self, w: &mut Worker) {
        debug_assert!(self.len <= w.emit.out.capacity());
        // SAFETY: `len` is the buffer's length as loaded, or moved by generated code over the bytes
        // it wrote below the capacity (`Fx::emit` checks the room first)
        unsafe { w.emit.out.set_len(self.len) };
    }
}

/// In [`Emit`]: the bits the output holds past its last whole byte (a u32), and the deferred
/// checksums due (a u64).
pub(crate) const OFF_BW_N: i32 =
    (std::mem::offset_of!(Emit, bw) + std::mem::offset_of!(BitWriter, n)) as i32;
pub(crate) const OFF_CSUM_PENDING: i32 = std::mem::offset_of!(Emit, csum_pending) as i32;

/// A native statement list.
pub(crate) type Entry = unsafe extern "C" fn(*mut Ctx) -> u64;

/// What a native function's code points at, kept alive with it: the closures of the statements and
/// expressions it calls back, and how many statements it translated inline.
// each closure boxed on its own: the code holds its address, which must not move when the vector
// grows while the function is built
#[allow(clippy::vec_box)]
#[derive(Default)]
pub(crate) struct Keep {
    pub(crate) stmts: Vec<Box<SF>>,
    pub(crate) exprs: Vec<Box<XF>>,
    pub(crate) sites: Vec<Box<ApplySite>>,
    /// The extern call sites it makes itself ([`np_extern`], [`np_extern_bound`]).
    pub(crate) externs: Vec<Box<dyn Any + Send + Sync>>,
    pub(crate) inline: usize,
    /// The code emits headers itself: its context carries the output buffer.
    pub(crate) emits: bool,
    /// What the inline statements save over their closures, roughly: 1 per statement, 3 per
    /// table apply or checksum (a list worth less than [`Keep::WORTH`] stays on closures).
    pub(crate) weight: usize,
    /// The whole parser's function: transitions it hands to the general loop.
    pub(crate) general: usize,
}

impl Keep {
    /// Entering native code costs about as much as one closure call saves (measured with
    /// callgrind: a parser state of one `extract` ran faster on its closure).
    pub(crate) const WORTH: usize = 2;
}

// Flow in one word: the low 3 bits say which, the rest is the label or error code.
pub(crate) const NEXT: u64 = 0;
pub(crate) const EXIT: u64 = 1;
pub(crate) const BREAK: u64 = 2;
pub(crate) const REJECT: u64 = 3;
/// A closure called back panicked (the payload is in [`Ctx::panic`]): return at once.
pub(crate) const PANIC: u64 = 4;

pub(crate) fn encode(f: Flow) -> u64 {
    match f {
        Flow::Next => NEXT,
        Flow::Exit => EXIT,
        Flow::Break(l) => BREAK | (l as u64) << 3,
        Flow::Reject(c) => REJECT | (c as u64) << 3,
    }
}

pub(crate) fn decode(v: u64) -> Flow {
    match v & 7 {
        NEXT => Flow::Next,
        BREAK => Flow::Break((v >> 3) as u32),
        REJECT => Flow::Reject((v >> 3) as u32),
        // EXIT, and PANIC (resumed by the caller before the flow matters)
        _ => Flow::Exit,
    }
}

/// Runs a statement's closure for native code. `check`: the statement may leave a parser error
/// pending (a `lookahead`), taken here as the closure block would after it.
///
/// `E`: the calling code emits (see [`Ctx::load`]).
///
/// # Safety
/// `ctx` is the live context of the calling native function; `sf` points into its [`Keep`].
pub(crate) unsafe extern "C" fn np_stmt<const E: bool>(
    ctx: *mut Ctx,
    sf: *const SF,
    check: u64,
) -> u64 {
    let ctx = &mut *ctx;
    let (e, w) = (ctx.e, &mut *ctx.w);
    ctx.store::<E>(w);
    let r = catch_unwind(AssertUnwindSafe(|| {
        let f = (*sf)(e, w);
        if check != 0 && f == Flow::Next {
            let err = w.take_error();
            if err != 0 {
                return Flow::Reject(err);
            }
        }
        f
    }));
    ctx.load::<E>(w);
    match r {
        Ok(f) => encode(f),
        Err(p) => {
            ctx.panic = Some(p);
            PANIC
        }
    }
}

/// Evaluates an expression's closure for native code (expressions that cannot raise a parser
/// error: the translator calls back only those). A panic is kept in the context and 0 returned;
/// the statement's caller returns at its next call back, and the wrapper resumes it.
///
/// # Safety
/// As [`np_stmt`].
pub(crate) unsafe extern "C" fn np_expr<const E: bool>(ctx: *mut Ctx, xf: *const XF) -> u64 {
    let ctx = &mut *ctx;
    let (e, w) = (ctx.e, &mut *ctx.w);
    ctx.store::<E>(w);
    let r = catch_unwind(AssertUnwindSafe(|| (*xf)(e, w)));
    ctx.load::<E>(w);
    match r {
        Ok(v) => v,
        Err(p) => {
            ctx.panic.get_or_insert(p);
            0
        }
    }
}

/// A table apply the native code makes: the table, and where its `hit` and `action_run` go.
pub(crate) struct ApplySite {
    pub(crate) table: usize,
    pub(crate) hit: Option<p4sec_ir::Loc>,
    pub(crate) action_run: Option<p4sec_ir::Loc>,
}

/// Set in [`np_select`]'s result when the general path ran the whole apply: the rest is its flow.
pub(crate) const RAN: u64 = 1 << 63;

/// The lookup of a one-key table apply ([`Engine::select_native`]): the action to run (its
/// arguments in its parameters), or [`RAN`] with the flow of an apply the general path made.
///
/// # Safety
/// As [`np_stmt`]; `site` points into the calling function's [`Keep`].
pub(crate) unsafe extern "C" fn np_select<const E: bool>(
    ctx: *mut Ctx,
    site: *const ApplySite,
    k: u64,
) -> u64 {
    let c = &mut *ctx;
    let (e, w, s) = (c.e, &mut *c.w, &*site);
    // the lean shape writes only slots, table counters and the meter of the last entry, reads
    // none of the context's fields and cannot panic: neither the context stored nor unwinds caught
    if let Some(a) = e.select_lean(w, s.table, k, &s.hit, &s.action_run) {
        return a as u64;
    }
    np_select_general::<E>(ctx, site, k)
}

/// [`np_select`] of a table whose key is exact and narrow enough to be indexed directly (an
/// ingress port): such a table's lookup and the common cases of its apply, calling nothing (the
/// frame saves no registers), the rest handed on by a tail call: a hit whose arguments are not
/// inline to [`np_direct_args`], anything else to [`np_select`]. `M`: the site sets `hit` or
/// `action_run` (without, their checks are left out).
///
/// # Safety
/// As [`np_select`].
pub(crate) unsafe extern "C" fn np_select_direct<const E: bool, const M: bool>(
    ctx: *mut Ctx,
    site: *const ApplySite,
    k: u64,
) -> u64 {
    let c = &mut *ctx;
    let (e, w, s) = (c.e, &mut *c.w, &*site);
    debug_assert!(M || (s.hit.is_none() && s.action_run.is_none()));
    let r = if M {
        e.select_direct(w, s.table, k, &s.hit, &s.action_run)
    } else {
        e.select_direct(w, s.table, k, &None, &None)
    };
    match r {
        Ok(a) => a as u64,
        Err(Some(i)) => np_direct_args::<E>(ctx, site, k, i),
        Err(None) => np_select::<E>(ctx, site, k),
    }
}

/// [`np_select_direct`]'s hit on entry `i` whose arguments its action's plan does not write
/// ([`Engine::direct_hit_args`]), by a tail call; [`np_select`] if that does not take it.
///
/// # Safety
/// As [`np_select`].
#[inline(never)]
unsafe extern "C" fn np_direct_args<const E: bool>(
    ctx: *mut Ctx,
    site: *const ApplySite,
    k: u64,
    i: usize,
) -> u64 {
    let c = &mut *ctx;
    let (e, w, s) = (c.e, &mut *c.w, &*site);
    if let Some(a) = e.direct_hit_args(w, s.table, i, &s.hit, &s.action_run) {
        return a as u64;
    }
    np_select::<E>(ctx, site, k)
}

/// [`np_select`] past the lean shape (kept out of line, so that the lean path's frame stays
/// small).
///
/// # Safety
/// As [`np_select`].
#[cold]
#[inline(never)]
unsafe fn np_select_general<const E: bool>(ctx: *mut Ctx, site: *const ApplySite, k: u64) -> u64 {
    let ctx = &mut *ctx;
    let (e, w, s) = (ctx.e, &mut *ctx.w, &*site);
    ctx.store::<E>(w);
    let r = catch_unwind(AssertUnwindSafe(|| {
        e.select_native(w, s.table, k, s.hit, s.action_run)
    }));
    match r {
        // an action chosen: only slot values were written (no buffer moved, the packet and the
        // output untouched), so the context stands as it is
        Ok(Ok(a)) => a as u64,
        Ok(Err(f)) => {
            ctx.load::<E>(w);
            RAN | encode(f)
        }
        Err(p) => {
            ctx.load::<E>(w);
            ctx.panic = Some(p);
            RAN | PANIC
        }
    }
}

/// The lookup of a table apply of several keys, or of one wider than 64 bits
/// ([`Engine::select_native_key`]): `key` holds the table's packed key (each key's words in key
/// order, [`Engine::key_words`] in all). The result as [`np_select`]'s.
///
/// # Safety
/// As [`np_select`]; `key` points at [`Engine::key_words`] words.
pub(crate) unsafe extern "C" fn np_select_key<const E: bool>(
    ctx: *mut Ctx,
    site: *const ApplySite,
    key: *const u64,
) -> u64 {
    let c = &mut *ctx;
    let (e, w, s) = (c.e, &mut *c.w, &*site);
    // as in `np_select`: the lean shape reads none of the context's fields (a panic in it, with
    // nothing of the context moved, is handed on as the general path's would be)
    let lean = catch_unwind(AssertUnwindSafe(|| {
        let key = std::slice::from_raw_parts(key, e.key_words(s.table));
        e.select_key_lean(w, s.table, key, &s.hit, &s.action_run)
    }));
    match lean {
        Ok(Some(a)) => return a as u64,
        Ok(None) => {}
        Err(p) => {
            c.panic = Some(p);
            return RAN | PANIC;
        }
    }
    np_select_key_general::<E>(ctx, site, key)
}

/// [`np_select_key`] past the lean shape (out of line, as [`np_select_general`]).
///
/// # Safety
/// As [`np_select_key`].
#[cold]
#[inline(never)]
unsafe fn np_select_key_general<const E: bool>(
    ctx: *mut Ctx,
    site: *const ApplySite,
    key: *const u64,
) -> u64 {
    let ctx = &mut *ctx;
    let (e, w, s) = (ctx.e, &mut *ctx.w, &*site);
    ctx.store::<E>(w);
    let r = catch_unwind(AssertUnwindSafe(|| {
        let key = std::slice::from_raw_parts(key, e.key_words(s.table));
        e.select_native_key(w, s.table, key, s.hit, s.action_run)
    }));
    match r {
        Ok(Ok(a)) => a as u64,
        Ok(Err(f)) => {
            ctx.load::<E>(w);
            RAN | encode(f)
        }
        Err(p) => {
            ctx.load::<E>(w);
            ctx.panic = Some(p);
            RAN | PANIC
        }
    }
}

/// Runs action `a` as a table's action ([`Engine::run_action`]), for actions the native code does
/// not inline.
///
/// # Safety
/// As [`np_stmt`].
pub(crate) unsafe extern "C" fn np_action<const E: bool>(ctx: *mut Ctx, a: u64) -> u64 {
    let ctx = &mut *ctx;
    let (e, w) = (ctx.e, &mut *ctx.w);
    ctx.store::<E>(w);
    let r = catch_unwind(AssertUnwindSafe(|| e.run_action(w, a as usize)));
    ctx.load::<E>(w);
    match r {
        Ok(f) => encode(f),
        Err(p) => {
            ctx.panic = Some(p);
            PANIC
        }
    }
}

/// Runs an extern call native code makes with its narrow arguments in the word area `words`
/// ([`Engine::extern_call_site`]): the flow (a fault drops the packet), or [`PANIC`] with the
/// extern's panic kept in the context. The context is neither stored nor reloaded: an extern call
/// changes slot values and the worker's payload, argument buffers, counters and effects, none of
/// which the context mirrors.
///
/// # Safety
/// As [`np_stmt`]; `site` points into the calling function's [`Keep`] and `words` at
/// [`crate::pipeline::call::DirectCall::words`] words.
pub(crate) unsafe extern "C" fn np_extern(
    ctx: *mut Ctx,
    site: *const crate::pipeline::call::DirectCall,
    words: *mut u64,
) -> u64 {
    let ctx = &mut *ctx;
    let (e, w, dc) = (ctx.e, &mut *ctx.w, &*site);
    let words = std::slice::from_raw_parts_mut(words, dc.words());
    match catch_unwind(AssertUnwindSafe(|| e.extern_call_site(w, dc, words))) {
        Ok(f) => encode(f),
        Err(p) => {
            ctx.panic = Some(p);
            PANIC
        }
    }
}

/// Runs a call site its extern bound for itself, for native code
/// ([`crate::pipeline::call::call_bound`]); the result and the context as in [`np_extern`].
///
/// # Safety
/// As [`np_stmt`]; `site` points into the calling function's [`Keep`].
pub(crate) unsafe extern "C" fn np_extern_bound(
    ctx: *mut Ctx,
    site: *const crate::pipeline::call::DirectBound,
) -> u64 {
    bound(ctx, site, None)
}

/// [`np_extern_bound`] for a site with a header argument the engine may vouch for
/// ([`crate::pipeline::call::DirectBound::vouch_len`]): `off` is where the generated code found the
/// header to start in the packet ([`crate::NO_OFFSET`]: not valid, or not extracted by the fast
/// path).
///
/// # Safety
/// As [`np_extern_bound`].
pub(crate) unsafe extern "C" fn np_extern_bound_vouch(
    ctx: *mut Ctx,
    site: *const crate::pipeline::call::DirectBound,
    off: usize,
) -> u64 {
    bound(ctx, site, Some(off))
}

/// The body of [`np_extern_bound`] and [`np_extern_bound_vouch`]. The engine and the worker are
/// read from the context again only on a failure, so that few values are kept across the
/// extern's call.
///
/// # Safety
/// As [`np_extern_bound`].
#[inline(always)]
unsafe fn bound(
    ctx: *mut Ctx,
    site: *const crate::pipeline::call::DirectBound,
    off: Option<usize>,
) -> u64 {
    let r = catch_unwind(AssertUnwindSafe(
        || match crate::pipeline::call::call_bound(&mut *(*ctx).w, &*site, off) {
            Ok(()) => NEXT,
            Err(x) => bound_failed(ctx, site, x),
        },
    ));
    match r {
        Ok(v) => v,
        Err(p) => keep_panic(ctx, p),
    }
}

/// A panic caught by a helper, kept in the context ([`PANIC`] returned); out of line, so that the
/// helper's frame does not keep registers for dropping an earlier one.
///
/// # Safety
/// As [`np_stmt`].
#[cold]
#[inline(never)]
unsafe fn keep_panic(ctx: *mut Ctx, p: Box<dyn Any + Send>) -> u64 {
    (*ctx).panic = Some(p);
    PANIC
}

/// [`bound`]'s call that failed: its fault counted ([`Engine::bound_fault`]), the flow encoded.
///
/// # Safety
/// As [`np_extern_bound`].
#[cold]
#[inline(never)]
unsafe fn bound_failed(
    ctx: *mut Ctx,
    site: *const crate::pipeline::call::DirectBound,
    x: p4sec_externs::iface::ExternError,
) -> u64 {
    let c = &mut *ctx;
    encode(c.e.bound_fault(&mut *c.w, &*site, x))
}
