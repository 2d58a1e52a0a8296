//! What generated code and Rust share: the context a native function runs on ([`Ctx`]), the
//! encoding of a [`Flow`] in one word, and the `extern "C"` functions generated code calls back
//! into (a statement or an expression the translator does not cover, run by its closure).

use crate::code::{Flow, PendingError};
use crate::engine::{SF, XF};
use crate::{Engine, Worker};
use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The context of one call of a native function, on the caller's stack. `slots` is first: the
/// generated code loads it at offset 0 (after every call back into Rust, which refreshes it).
#[repr(C)]
pub(crate) struct Ctx<'a> {
    pub(crate) slots: *mut u64,
    pub(crate) e: &'a Engine,
    pub(crate) w: *mut Worker,
    /// A panic raised by a closure called back, resumed once the native code has returned (never
    /// unwound through generated frames).
    pub(crate) panic: Option<Box<dyn Any + Send>>,
}

/// A native statement list.
pub(crate) type Entry = unsafe extern "C" fn(*mut Ctx) -> u64;

/// What a native function's code points at, kept alive with it: the closures of the statements and
/// expressions it calls back, and how many statements it translated inline.
#[derive(Default)]
pub(crate) struct Keep {
    pub(crate) stmts: Vec<Box<SF>>,
    pub(crate) exprs: Vec<Box<XF>>,
    pub(crate) inline: usize,
}

// Flow in one word: the low 3 bits say which, the rest is the label or error code.
pub(crate) const NEXT: u64 = 0;
pub(crate) const EXIT: u64 = 1;
const BREAK: u64 = 2;
const REJECT: u64 = 3;
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
/// # Safety
/// `ctx` is the live context of the calling native function; `sf` points into its [`Keep`].
pub(crate) unsafe extern "C" fn np_stmt(ctx: *mut Ctx, sf: *const SF, check: u64) -> u64 {
    let ctx = &mut *ctx;
    let (e, w) = (ctx.e, &mut *ctx.w);
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
    ctx.slots = w.slots.as_mut_ptr();
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
pub(crate) unsafe extern "C" fn np_expr(ctx: *mut Ctx, xf: *const XF) -> u64 {
    let ctx = &mut *ctx;
    let (e, w) = (ctx.e, &mut *ctx.w);
    match catch_unwind(AssertUnwindSafe(|| (*xf)(e, w))) {
        Ok(v) => v,
        Err(p) => {
            ctx.panic.get_or_insert(p);
            0
        }
    }
}
