//! Load-time compilation of the IR into closures.
//!
//! The interpreter (`exec.rs` and the stage files it calls) decides at every node what kind of node
//! it is, how wide it is and which path (narrow or wide) to take. Here those decisions are made
//! once, when the engine is built: each statement and each expression of at most 64 bits becomes a
//! closure specialised for its shape (for example "slot 7 = slot 3 - 1, masked to 8 bits").
//! Anything not covered here is wrapped in a closure that calls the interpreter, so semantics have
//! one definition and the compiled forms are checked against it by the whole STF corpus. The
//! compiled fast paths of `extract` and `emit` are in `headers.rs`.

use crate::code::Flow;
use crate::engine::{CBlock, Deferred, LeanNext, SF, XF};
use crate::pipeline::call::{plan_arg, PlannedCall};
use crate::pipeline::headers::{emit_static, extract_static};
use crate::{Engine, Worker};
use p4sec_externs::checksum;
use p4sec_externs::iface::ExternObject;
use p4sec_externs::layout::ArgLayout;
use p4sec_ir::*;

/// Can running `s` leave a parser error pending in `w.perr` (a `lookahead` past the end of the
/// packet in one of its own expressions)? Conservative: shapes not listed may.
pub(crate) fn stmt_may_fail(s: &Stmt) -> bool {
    match s {
        Stmt::Assign {
            dst: LValue::Static(_),
            src,
        } => may_fail(src),
        Stmt::If { cond, .. } => may_fail(cond),
        Stmt::Switch { expr, .. } => may_fail(expr),
        Stmt::Block { .. }
        | Stmt::Break(_)
        | Stmt::Exit
        | Stmt::ApplyTable { .. }
        | Stmt::SetValid {
            hdr: HeaderRef::Static(_),
            ..
        } => false,
        Stmt::Extract {
            hdr: HeaderRef::Static(_),
            varbit_bits: None,
        }
        | Stmt::Emit {
            hdr: HeaderRef::Static(_),
        } => false,
        Stmt::CallAction { args, .. } => args.iter().any(may_fail),
        Stmt::Builtin(Builtin::MarkToDrop) => false,
        // an extern method cannot raise a parser error (its faults drop the packet); its arguments'
        // expressions can
        Stmt::ExternCall { args, ret, .. } => {
            args.iter()
                .any(|a| a.parts.iter().any(may_fail) || a.dsts.iter().any(lvalue_may_fail))
                || ret.as_ref().is_some_and(lvalue_may_fail)
        }
        _ => true,
    }
}

/// What compiling needs: the program, and its extern instances, so that a call site can be bound by
/// its extern ([`ExternObject::bind`]).
pub(crate) struct Cx<'a> {
    pub prog: &'a Program,
    pub externs: &'a [Box<dyn ExternObject>],
    pub methods: &'a [Vec<u32>],
    /// Call sites whose header argument the engine may vouch for ([`crate::load::pristine`]).
    pub pristine: &'a crate::load::pristine::Pristine,
}

/// Per parser state: compiled select keys (see [`Code::select_keys`]).
type SelectKeys = Vec<Option<Vec<XF>>>;
/// Per parser state: select cases as (mask, value) per key (see [`Code::select_cases`]).
type SelectCases = Vec<Option<Vec<(Vec<(u64, u64)>, Next)>>>;

pub(crate) fn compile(cx: &Cx) -> Code {
    let p = cx.prog;
    let select_keys: SelectKeys = p
        .parser
        .states
        .iter()
        .map(|s| match &s.transition {
            Transition::Select { keys, .. }
                if keys.len() <= 8 && keys.iter().all(|k| k.width() <= 64) =>
            {
                Some(keys.iter().map(expr).collect())
            }
            _ => None,
        })
        .collect();
    let select_cases: SelectCases = p
        .parser
        .states
        .iter()
        .zip(&select_keys)
        .map(
            |(s, k): (&ParserState, &Option<Vec<XF>>)| match (&s.transition, k) {
                (Transition::Select { cases, .. }, Some(_)) => cases
                    .iter()
                    .map(|(ms, n)| {
                        let ms: Option<Vec<(u64, u64)>> = ms
                            .iter()
                            .map(|m| match m {
                                KeyMatch::Any => Some((0, 0)),
                                KeyMatch::Exact(v) if v.words.iter().skip(1).all(|x| *x == 0) => {
                                    Some((u64::MAX, v.as_u64()))
                                }
                                KeyMatch::Mask { value, mask } => {
                                    Some((mask.as_u64(), value.as_u64() & mask.as_u64()))
                                }
                                _ => None,
                            })
                            .collect();
                        ms.map(|ms| (ms, n.clone()))
                    })
                    .collect(),
                _ => None,
            },
        )
        .collect();
    let lean_next = p
        .parser
        .states
        .iter()
        .zip(&select_cases)
        .map(
            |(st, cs): (&ParserState, &Option<Vec<(Vec<(u64, u64)>, Next)>>)| match (
                &st.transition,
                cs,
            ) {
                (Transition::Goto(n), _) => LeanNext::Goto(n.clone()),
                (Transition::Select { keys, .. }, Some(cs))
                    if keys.len() == 1 && keys[0].width() <= 64 && !may_fail(&keys[0]) =>
                {
                    LeanNext::SelectOne(
                        expr(&keys[0]),
                        cs.iter()
                            .map(|(ms, n)| {
                                let (m, v) = ms.first().copied().unwrap_or((0, 0));
                                (m, v, n.clone())
                            })
                            .collect(),
                    )
                }
                (Transition::Select { keys, .. }, Some(cs))
                    if keys.len() == 2 && keys.iter().all(|k| k.width() <= 64 && !may_fail(k)) =>
                {
                    LeanNext::SelectTwo(
                        expr(&keys[0]),
                        expr(&keys[1]),
                        cs.iter()
                            .map(|(ms, n)| {
                                let (m0, v0) = ms.first().copied().unwrap_or((0, 0));
                                let (m1, v1) = ms.get(1).copied().unwrap_or((0, 0));
                                ([m0, v0, m1, v1], n.clone())
                            })
                            .collect(),
                    )
                }
                _ => LeanNext::General,
            },
        )
        .collect();
    // verify_checksum over a whole header that nothing but `extract` wrote: summed from the packet
    // bytes
    let mut tracked_headers = vec![];
    let verify = CBlock::new(
        p.verify_checksum
            .body
            .iter()
            .map(|s| match header_checksum(p, s) {
                Some((h, plan)) => {
                    if !tracked_headers.contains(&h) {
                        tracked_headers.push(h);
                    }
                    verify_from_bytes(cx, s, h, plan)
                }
                None => stmt(cx, s),
            })
            .collect(),
        p.verify_checksum.body.iter().any(stmt_may_fail),
    );
    // update_checksum over a whole header that nothing writes afterwards: summed from the emitted
    // bytes
    let mut deferred: Vec<Deferred> = vec![];
    let body = &p.compute_checksum.body;
    let compute = CBlock::new(
        body.iter()
            .enumerate()
            .map(
                |(i, s)| match header_checksum_update(p, s, &body[i + 1..]) {
                    Some((h, f_off, _))
                        if deferred.len() < 64 && !deferred.iter().any(|d| d.header == h) =>
                    {
                        let Stmt::Builtin(Builtin::UpdateChecksum {
                            cond,
                            data,
                            dst: LValue::Static(f),
                            ..
                        }) = s
                        else {
                            unreachable!()
                        };
                        let bit = 1u64 << deferred.len();
                        deferred.push(Deferred {
                            header: h,
                            f_off,
                            f_slot: f.slot as usize,
                            sum: csum16(data),
                            m: mask(f.width),
                        });
                        let c = expr(cond);
                        Box::new(move |e: &Engine, w: &mut Worker| {
                            if c(e, w) != 0 {
                                w.emit.csum_pending |= bit;
                            }
                            Flow::Next
                        }) as SF
                    }
                    _ => stmt(cx, s),
                },
            )
            .collect(),
        body.iter().any(stmt_may_fail),
    );
    Code {
        tracked_headers,
        lean_next,
        select_cases,
        states: p.parser.states.iter().map(|s| block(cx, &s.body)).collect(),
        select_keys,
        verify,
        ingress: block(cx, &p.ingress.body),
        egress: block(cx, &p.egress.body),
        compute,
        deferred,
        deparser: block(cx, &p.deparser.body),
        actions: p.actions.iter().map(|a| block(cx, &a.body)).collect(),
        table_keys: p
            .tables
            .iter()
            .map(|t| {
                t.keys
                    .iter()
                    .map(|k| (k.width <= 64).then(|| expr(&k.expr)))
                    .collect()
            })
            .collect(),
        native_parser: None,
    }
}

pub(crate) fn block(cx: &Cx, body: &[Stmt]) -> CBlock {
    // runs of simple assignments become one closure each (one call instead of one per statement)
    let mut out: Vec<SF> = vec![];
    let mut run: Vec<SimpleAssign> = vec![];
    for s in body {
        match simple_assign(s) {
            Some(a) => run.push(a),
            None => {
                flush_assigns(&mut run, &mut out);
                out.push(stmt(cx, s));
            }
        }
    }
    flush_assigns(&mut run, &mut out);
    CBlock::new(out, body.iter().any(stmt_may_fail))
}

/// An assignment to a field of at most 64 bits from a field, a constant, or a field plus or minus a
/// constant.
#[derive(Clone, Copy)]
enum SimpleAssign {
    Copy {
        d: usize,
        s: usize,
        m: u64,
    },
    Const {
        d: usize,
        v: u64,
    },
    Add {
        d: usize,
        s: usize,
        k: u64,
        m: u64,
    },
    /// `d = s[hi:lo]`: shifted right by `lo`, masked to the slice (and the destination) width.
    Shr {
        d: usize,
        s: usize,
        sh: u32,
        m: u64,
    },
}

fn simple_assign(s: &Stmt) -> Option<SimpleAssign> {
    let Stmt::Assign {
        dst: LValue::Static(l),
        src,
    } = s
    else {
        return None;
    };
    if l.width == 0 || l.width > 64 || src.width() > 64 {
        return None;
    }
    let (d, m) = (l.slot as usize, mask(l.width));
    match src {
        Expr::Load(LValue::Static(sl)) if sl.width <= 64 => Some(SimpleAssign::Copy {
            d,
            s: sl.slot as usize,
            m,
        }),
        Expr::Small { value, .. } => Some(SimpleAssign::Const { d, v: value & m }),
        Expr::Slice { arg, hi, lo } if *lo < 64 && *hi < 64 && *hi >= *lo => match &**arg {
            Expr::Load(LValue::Static(sl)) if sl.width <= 64 => Some(SimpleAssign::Shr {
                d,
                s: sl.slot as usize,
                sh: *lo,
                m: m & mask(hi - lo + 1),
            }),
            _ => None,
        },
        Expr::Binary {
            op: op @ (BinOp::Add | BinOp::Sub),
            lhs,
            rhs,
            width,
            ..
        } if *width <= 64 => match (&**lhs, &**rhs) {
            (Expr::Load(LValue::Static(sl)), Expr::Small { value, .. }) if sl.width <= 64 => {
                // x - k == x + (2^64 - k) modulo 2^64, then masked
                let k = if *op == BinOp::Add {
                    *value
                } else {
                    value.wrapping_neg()
                };
                Some(SimpleAssign::Add {
                    d,
                    s: sl.slot as usize,
                    k,
                    m: m & mask(*width),
                })
            }
            _ => None,
        },
        _ => None,
    }
}

fn flush_assigns(run: &mut Vec<SimpleAssign>, out: &mut Vec<SF>) {
    match run.len() {
        0 => {}
        // one assignment: its kind settled here, so the closure does not dispatch on it (no jump
        // table, one less indirect branch per packet)
        1 => out.push(match run[0] {
            SimpleAssign::Copy { d, s, m } => Box::new(move |_, w| {
                w.slots[d] = w.slots[s] & m;
                Flow::Next
            }),
            SimpleAssign::Const { d, v } => Box::new(move |_, w| {
                w.slots[d] = v;
                Flow::Next
            }),
            SimpleAssign::Add { d, s, k, m } => Box::new(move |_, w| {
                w.slots[d] = w.slots[s].wrapping_add(k) & m;
                Flow::Next
            }),
            SimpleAssign::Shr { d, s, sh, m } => Box::new(move |_, w| {
                w.slots[d] = (w.slots[s] >> sh) & m;
                Flow::Next
            }),
        }),
        _ => {
            let ops = std::mem::take(run);
            out.push(Box::new(move |_, w| {
                for &a in &ops {
                    run_assign(&mut w.slots, a);
                }
                Flow::Next
            }));
        }
    }
    run.clear();
}

#[inline(always)]
fn run_assign(slots: &mut [u64], a: SimpleAssign) {
    match a {
        SimpleAssign::Copy { d, s, m } => slots[d] = slots[s] & m,
        SimpleAssign::Const { d, v } => slots[d] = v,
        SimpleAssign::Add { d, s, k, m } => slots[d] = slots[s].wrapping_add(k) & m,
        SimpleAssign::Shr { d, s, sh, m } => slots[d] = (slots[s] >> sh) & m,
    }
}

#[inline]
fn mask(w: u32) -> u64 {
    crate::bits::mask64(w)
}

/// Can writing to `l` fail? Only through a header-stack index that can.
fn lvalue_may_fail(l: &LValue) -> bool {
    match l {
        LValue::Dynamic { index, .. } => may_fail(index),
        _ => false,
    }
}

/// Can evaluating `e` fail (set a parser error)? Only `lookahead` can.
pub(crate) fn may_fail(e: &Expr) -> bool {
    match e {
        Expr::Lookahead { .. } => true,
        Expr::Load(LValue::Dynamic { index, .. }) => may_fail(index),
        Expr::Unary { arg, .. } | Expr::Slice { arg, .. } | Expr::Cast { arg, .. } => may_fail(arg),
        Expr::Binary { lhs, rhs, .. } => may_fail(lhs) || may_fail(rhs),
        Expr::Concat { hi, lo } => may_fail(hi) || may_fail(lo),
        Expr::Cond {
            cond, then, else_, ..
        } => may_fail(cond) || may_fail(then) || may_fail(else_),
        _ => false,
    }
}

fn interp_stmt(s: &Stmt) -> SF {
    let s = s.clone();
    Box::new(move |e, w| e.exec_one(w, &s))
}

pub(crate) fn stmt(cx: &Cx, s: &Stmt) -> SF {
    match s {
        Stmt::Assign {
            dst: LValue::Static(l),
            src,
        } if l.width <= 64 && l.width > 0 && src.width() <= 64 => {
            let (d, m) = (l.slot as usize, mask(l.width));
            match src {
                Expr::Load(LValue::Static(sl)) => {
                    let s = sl.slot as usize;
                    Box::new(move |_, w| {
                        w.slots[d] = w.slots[s] & m;
                        Flow::Next
                    })
                }
                Expr::Small { value, .. } => {
                    let v = value & m;
                    Box::new(move |_, w| {
                        w.slots[d] = v;
                        Flow::Next
                    })
                }
                _ => {
                    let f = expr(src);
                    Box::new(move |e, w| {
                        w.slots[d] = f(e, w) & m;
                        Flow::Next
                    })
                }
            }
        }
        Stmt::If { cond, then, else_ } if cond.width() <= 64 => {
            let (c, t, f) = (expr(cond), block(cx, then), block(cx, else_));
            Box::new(move |e, w| {
                if c(e, w) != 0 {
                    t.run(e, w)
                } else {
                    f.run(e, w)
                }
            })
        }
        Stmt::Block { label, body } => {
            let (l, b) = (*label, block(cx, body));
            Box::new(move |e, w| match b.run(e, w) {
                Flow::Break(x) if x == l => Flow::Next,
                f => f,
            })
        }
        Stmt::Loop { label, body } => {
            let (l, b) = (*label, block(cx, body));
            Box::new(move |e, w| loop {
                if !e.loop_step(w) {
                    break Flow::Exit;
                }
                match b.run(e, w) {
                    Flow::Next => {}
                    Flow::Break(x) if x == l => break Flow::Next,
                    f => break f,
                }
            })
        }
        Stmt::Break(l) => {
            let l = *l;
            Box::new(move |_, _| Flow::Break(l))
        }
        Stmt::Exit => Box::new(|_, _| Flow::Exit),
        Stmt::SetValid {
            hdr: HeaderRef::Static(h),
            valid,
        } => {
            let (h, v) = (*h, *valid as u64);
            Box::new(move |e, w| {
                let l = e.prog.headers[h as usize].valid;
                w.slots[l.slot as usize] = v;
                Flow::Next
            })
        }
        Stmt::ApplyTable {
            table,
            hit,
            action_run,
        } => {
            let (t, h, a) = (*table as usize, *hit, *action_run);
            match cx.prog.tables.get(t) {
                // one narrow key, no action selector: the key computed here, the lean apply
                Some(tb)
                    if tb.keys.len() == 1
                        && tb.keys[0].width <= 64
                        && tb.keys[0].kind != MatchKind::Selector
                        && !matches!(tb.implementation, Implementation::ActionSelector(_)) =>
                {
                    if let Expr::Load(LValue::Static(l)) = &tb.keys[0].expr {
                        // the key is a field: read straight from its slot
                        let (ks, km) = (l.slot as usize, mask(l.width));
                        return Box::new(move |e, w| {
                            let k = w.slots[ks] & km;
                            e.apply_one_key(w, t, k, h, a)
                        });
                    }
                    let key = expr(&tb.keys[0].expr);
                    Box::new(move |e, w| {
                        let k = key(e, w);
                        e.apply_one_key(w, t, k, h, a)
                    })
                }
                _ => Box::new(move |e, w| e.apply_table(w, t, h, a)),
            }
        }
        Stmt::CallAction { action, args } => {
            // an action called directly: its arguments into its parameters, then its compiled body
            // (the parameters are known here only through the program, so the assignments are built
            // at run time once and kept)
            let a = *action as usize;
            let args = args.clone();
            let assigns: std::sync::OnceLock<CBlock> = std::sync::OnceLock::new();
            Box::new(move |e, w| {
                let set = assigns.get_or_init(|| {
                    let assigns: Vec<Stmt> = e.prog.actions[a]
                        .params
                        .iter()
                        .zip(&args)
                        .map(|(p, x)| Stmt::Assign {
                            dst: LValue::Static(p.loc),
                            src: x.clone(),
                        })
                        .collect();
                    block(
                        &Cx {
                            prog: &e.prog,
                            externs: &e.externs.instances,
                            methods: &e.externs.methods,
                            pristine: &Default::default(),
                        },
                        &assigns,
                    )
                });
                match set.run(e, w) {
                    Flow::Next => e.match_action.actions[a].run(e, w),
                    f => f,
                }
            })
        }
        Stmt::Switch {
            expr: x,
            cases,
            default,
        } if x.width() <= 64 && cases.iter().all(|(vs, _)| vs.iter().all(|v| v.width <= 64)) => {
            let f = expr(x);
            let cases: Vec<(Vec<u64>, CBlock)> = cases
                .iter()
                .map(|(vs, body)| (vs.iter().map(|v| v.as_u64()).collect(), block(cx, body)))
                .collect();
            let default = block(cx, default);
            Box::new(move |e, w| {
                let v = f(e, w);
                match cases.iter().find(|(vs, _)| vs.contains(&v)) {
                    Some((_, body)) => body.run(e, w),
                    None => default.run(e, w),
                }
            })
        }
        Stmt::Builtin(Builtin::MarkToDrop) => Box::new(|e, w| {
            let sm = &e.prog.std_meta;
            for (l, v) in [(sm.egress_spec, 511u64), (sm.mcast_grp, 0)] {
                if l.width > 0 {
                    w.slots[l.slot as usize] = v & mask(l.width);
                }
            }
            Flow::Next
        }),
        Stmt::Builtin(Builtin::CounterCount { counter, index }) if index.width() <= 64 => {
            let (c, i) = (*counter as usize, expr(index));
            Box::new(move |e, w| {
                let idx = i(e, w) as usize;
                if let Some(cell) = e.externs.counters[c].get(idx) {
                    cell.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    cell.1
                        .fetch_add(w.packet.len as u64, std::sync::atomic::Ordering::Relaxed);
                }
                Flow::Next
            })
        }
        Stmt::ExternCall {
            inst,
            method,
            args,
            ret,
        } => {
            // argument layouts resolved here once (fields moved straight between slots and argument
            // bytes)
            let plans: Vec<Option<ArgLayout>> = args.iter().map(plan_arg).collect();
            let (i, m) = (*inst as usize, *method);
            if let Some(pc) = PlannedCall::new(i, m, args, &plans, ret.as_ref()) {
                let pristine = cx.pristine.of(s);
                if let Some(b) = pc.bind(cx.externs, cx.methods, pristine.map(|p| p.arg)) {
                    // the extern compiled the call site: it reads and writes the slots itself
                    return match pristine {
                        // a header argument the engine vouches for, packet by packet, when it can
                        Some(p) => {
                            Box::new(move |e, w| e.extern_call_bound_pristine(w, i, m, &*b, p))
                        }
                        None => Box::new(move |e, w| e.extern_call_bound(w, i, m, &*b)),
                    };
                }
                // every argument planned, no return value or a fixed one: the lean path
                return Box::new(move |e, w| e.extern_call_planned(w, &pc));
            }
            let (args, ret) = (args.clone(), ret.clone());
            Box::new(move |e, w| e.extern_call(w, i, m, &args, &plans, ret.as_ref()))
        }
        Stmt::Extract {
            hdr: HeaderRef::Static(h),
            varbit_bits: None,
        } => extract_static(*h),
        Stmt::Extract {
            hdr,
            varbit_bits: None,
        } => {
            let h = hdr.clone();
            Box::new(move |e, w| e.extract(w, &h, None))
        }
        Stmt::Emit {
            hdr: HeaderRef::Static(h),
        } => emit_static(*h),
        Stmt::Emit { hdr } => {
            let h = hdr.clone();
            Box::new(move |e, w| {
                e.emit(w, &h);
                Flow::Next
            })
        }
        Stmt::Builtin(Builtin::VerifyChecksum {
            cond,
            data,
            field,
            algo: HashAlgo::Csum16,
            with_payload: false,
        }) if cond.width() <= 64 && field.width() <= 64 && data.iter().all(|d| d.width() <= 64) => {
            let (c, sum, f, m) = (expr(cond), csum16(data), expr(field), mask(field.width()));
            Box::new(move |e, w| {
                if c(e, w) != 0 && (sum(e, w) & m) != f(e, w) {
                    let l = e.prog.std_meta.checksum_error;
                    if l.width > 0 {
                        w.slots[l.slot as usize] = 1;
                    }
                }
                Flow::Next
            })
        }
        Stmt::Builtin(Builtin::UpdateChecksum {
            cond,
            data,
            dst: LValue::Static(l),
            algo: HashAlgo::Csum16,
            with_payload: false,
        }) if cond.width() <= 64 && l.width <= 64 && data.iter().all(|d| d.width() <= 64) => {
            let (c, sum, d, m) = (expr(cond), csum16(data), l.slot as usize, mask(l.width));
            Box::new(move |e, w| {
                if c(e, w) != 0 {
                    w.slots[d] = sum(e, w) & m;
                }
                Flow::Next
            })
        }
        _ => interp_stmt(s),
    }
}

/// The `update_checksum` counterpart of [`header_checksum`]: `rest` (the statements after it in the
/// compute control) must not write the header. Returns H, F's byte offset and H's length.
fn header_checksum_update(p: &Program, s: &Stmt, rest: &[Stmt]) -> Option<(usize, usize, usize)> {
    let Stmt::Builtin(Builtin::UpdateChecksum {
        data,
        dst: LValue::Static(f),
        algo: HashAlgo::Csum16,
        with_payload: false,
        cond,
    }) = s
    else {
        return None;
    };
    if may_fail(cond) {
        return None;
    }
    let (h, f_off, len) = whole_header_checksum(p, data, f)?;
    let slots: Vec<u32> = p.headers[h].fields.iter().map(|x| x.loc.slot).collect();
    rest.iter()
        .all(|s| writes_only_outside(s, &slots))
        .then_some((h, f_off, len))
}

/// Is `data` all fields of one fixed header in order except `f`, a 16-bit field on a 16-bit
/// boundary of a header of whole 16-bit words? Returns the header, F's byte offset and the header's
/// length in bytes.
fn whole_header_checksum(p: &Program, data: &[Expr], f: &Loc) -> Option<(usize, usize, usize)> {
    if f.width != 16 {
        return None;
    }
    let h = p.headers.iter().position(|h| {
        h.fields
            .iter()
            .any(|x| x.loc == *f && x.varbit_len.is_none())
    })?;
    let layout = &p.headers[h];
    if layout
        .fields
        .iter()
        .any(|x| x.varbit_len.is_some() || x.loc.width > 64)
    {
        return None;
    }
    let rest: Vec<Loc> = layout
        .fields
        .iter()
        .map(|x| x.loc)
        .filter(|l| l != f)
        .collect();
    let given: Option<Vec<Loc>> = data
        .iter()
        .map(|d| {
            if let Expr::Load(LValue::Static(l)) = d {
                Some(*l)
            } else {
                None
            }
        })
        .collect();
    if given? != rest {
        return None;
    }
    let bits: u32 = layout.fields.iter().map(|x| x.loc.width).sum();
    let f_bit: u32 = layout
        .fields
        .iter()
        .take_while(|x| x.loc != *f)
        .map(|x| x.loc.width)
        .sum();
    (bits % 16 == 0 && f_bit % 16 == 0).then_some((h, (f_bit / 8) as usize, (bits / 8) as usize))
}

/// `verify_checksum(cond, {all fields of header H but F}, F, csum16)` where F is a 16-bit field on
/// a 16-bit boundary of H, and neither the parser nor the verify control writes H's fields other
/// than by `extract`: then H's fields are the bytes it was extracted from, and the checksum is the
/// Internet checksum of those bytes with F's word left out. Returns H and (F's byte offset, H's
/// length in bytes).
pub(crate) fn header_checksum(p: &Program, s: &Stmt) -> Option<(usize, (usize, usize))> {
    let Stmt::Builtin(Builtin::VerifyChecksum {
        data,
        field: Expr::Load(LValue::Static(f)),
        algo: HashAlgo::Csum16,
        with_payload: false,
        ..
    }) = s
    else {
        return None;
    };
    let (h, f_off, len) = whole_header_checksum(p, data, f)?;
    // nothing in the parser or the verify control writes the header except extract
    let slots: Vec<u32> = p.headers[h].fields.iter().map(|x| x.loc.slot).collect();
    let safe = p
        .parser
        .states
        .iter()
        .all(|st| st.body.iter().all(|s| writes_only_outside(s, &slots)))
        && p.verify_checksum
            .body
            .iter()
            .all(|s| writes_only_outside(s, &slots));
    safe.then_some((h, (f_off, len)))
}

/// Does `s` leave the given slots alone (other than by extracting a header)? Conservative.
fn writes_only_outside(s: &Stmt, slots: &[u32]) -> bool {
    match s {
        Stmt::Assign {
            dst: LValue::Static(l),
            ..
        } => !slots.contains(&l.slot),
        Stmt::If { then, else_, .. } => then
            .iter()
            .chain(else_)
            .all(|s| writes_only_outside(s, slots)),
        Stmt::Block { body, .. } | Stmt::Loop { body, .. } => {
            body.iter().all(|s| writes_only_outside(s, slots))
        }
        Stmt::Switch { cases, default, .. } => cases
            .iter()
            .flat_map(|(_, b)| b)
            .chain(default)
            .all(|s| writes_only_outside(s, slots)),
        Stmt::Extract { .. }
        | Stmt::Advance { .. }
        | Stmt::Break(_)
        | Stmt::Exit
        | Stmt::SetValid { .. } => true,
        Stmt::Builtin(Builtin::Verify { .. } | Builtin::VerifyChecksum { .. }) => true,
        _ => false,
    }
}

/// The compiled `verify_checksum` of [`header_checksum`]: from the packet bytes when the header was
/// extracted by the fast path in this pass (its offset recorded), from the fields otherwise.
fn verify_from_bytes(cx: &Cx, s: &Stmt, h: usize, (f_off, len): (usize, usize)) -> SF {
    let slow = stmt(cx, s);
    let Stmt::Builtin(Builtin::VerifyChecksum { cond, field, .. }) = s else {
        return slow;
    };
    let (c, f) = (expr(cond), expr(field));
    Box::new(move |e, w| {
        let at = w.packet.hdr_off.get(h).copied().unwrap_or(crate::NO_OFFSET);
        if at == crate::NO_OFFSET {
            return slow(e, w);
        }
        let Some(bytes) = w.packet.pkt.get(at..at + len) else {
            return slow(e, w);
        };
        let csum = checksum::csum16_without(bytes, f_off) as u64;
        if c(e, w) != 0 && csum != f(e, w) {
            let l = e.prog.std_meta.checksum_error;
            if l.width > 0 {
                w.slots[l.slot as usize] = 1;
            }
        }
        Flow::Next
    })
}

/// The Internet checksum of the concatenated fields without assembling them: a message read as
/// 16-bit words is congruent, modulo 0xffff, to the sum of its fields each multiplied by 2^(bit
/// distance of its end from the end of the zero-padded message, mod 16), since 2^16 = 1 (mod
/// 0xffff). Folding that sum with end-around carries gives exactly the one's complement sum of the
/// words (zero only when every bit is zero).
fn csum16(data: &[Expr]) -> XF {
    let total: u32 = data.iter().map(|d| d.width()).sum();
    let padded = total.div_ceil(16) * 16;
    let mut end = 0u32;
    let mut konst = 0u64;
    // fields read straight from their slots, split by whether `value << shift` stays below 2^48
    // (then up to 2^16 of them add up without overflowing 64 bits, and no per-field folding is
    // needed)
    let mut short: Vec<(usize, u32, u64)> = vec![];
    let mut long: Vec<(usize, u32, u64)> = vec![];
    let mut computed: Vec<(u32, u64, XF)> = vec![];
    for d in data {
        let wd = d.width();
        end += wd;
        let shift = (padded - end) % 16;
        match d {
            Expr::Small { value, .. } => {
                konst += (checksum::fold(*value & mask(wd)) as u64) << shift
            }
            Expr::Load(LValue::Static(l)) if wd + shift <= 48 => {
                short.push((l.slot as usize, shift, mask(wd)))
            }
            Expr::Load(LValue::Static(l)) => long.push((l.slot as usize, shift, mask(wd))),
            _ => computed.push((shift, mask(wd), expr(d))),
        }
    }
    if short.len() + long.len() + computed.len() >= 1 << 14 {
        // too many fields to add without folding each: fold every one
        long.append(&mut short);
    }
    let end = short
        .iter()
        .chain(&long)
        .map(|f| f.0 + 1)
        .max()
        .unwrap_or(0);
    Box::new(move |e, w| {
        let mut sum = konst;
        let slots = &w.slots[..];
        if end <= slots.len() {
            for &(slot, shift, m) in &short {
                // SAFETY: slot < end <= slots.len()
                sum += (unsafe { *slots.get_unchecked(slot) } & m) << shift;
            }
        } else {
            for &(slot, shift, m) in &short {
                sum += (slots[slot] & m) << shift;
            }
        }
        for &(slot, shift, m) in &long {
            sum += (checksum::fold(slots[slot] & m) as u64) << shift;
        }
        for (shift, m, f) in &computed {
            sum += (checksum::fold(f(e, w) & m) as u64) << shift;
        }
        !checksum::fold(sum) as u64
    })
}

fn interp_expr(x: &Expr) -> XF {
    let x = x.clone();
    Box::new(move |e, w| e.eval(w, &x))
}

/// Compile an expression of at most 64 bits (callers check the width). A test of one field against
/// a constant (or of the field being non-zero), as part of an `&&`/`||` chain.
#[derive(Clone, Copy)]
enum Leaf {
    NonZero(usize),
    Zero(usize),
    Eq(usize, u64),
    Ne(usize, u64),
    Lt(usize, u64),
    Le(usize, u64),
    Gt(usize, u64),
    Ge(usize, u64),
}

fn leaf(x: &Expr) -> Option<Leaf> {
    match x {
        Expr::Load(LValue::Static(l)) if l.width <= 64 => Some(Leaf::NonZero(l.slot as usize)),
        Expr::Unary {
            op: UnOp::Not, arg, ..
        } => match &**arg {
            Expr::Load(LValue::Static(l)) if l.width <= 64 => Some(Leaf::Zero(l.slot as usize)),
            _ => None,
        },
        Expr::Binary {
            op,
            signed: false,
            lhs,
            rhs,
            ..
        } => match (&**lhs, &**rhs) {
            (Expr::Load(LValue::Static(l)), Expr::Small { value, .. }) if l.width <= 64 => {
                let (s, v) = (l.slot as usize, *value);
                match op {
                    BinOp::Eq => Some(Leaf::Eq(s, v)),
                    BinOp::Ne => Some(Leaf::Ne(s, v)),
                    BinOp::Lt => Some(Leaf::Lt(s, v)),
                    BinOp::Le => Some(Leaf::Le(s, v)),
                    BinOp::Gt => Some(Leaf::Gt(s, v)),
                    BinOp::Ge => Some(Leaf::Ge(s, v)),
                    _ => None,
                }
            }
            _ => None,
        },
        _ => None,
    }
}

/// The leaves of a chain of one operator (`&&` or `||`) whose operands are all [`Leaf`]s or such
/// chains.
fn chain(x: &Expr, want: BinOp, leaves: &mut Vec<Leaf>) -> bool {
    match x {
        Expr::Binary { op, lhs, rhs, .. } if *op == want => {
            chain(lhs, want, leaves) && chain(rhs, want, leaves)
        }
        _ => match leaf(x) {
            Some(l) => {
                leaves.push(l);
                true
            }
            None => false,
        },
    }
}

#[inline(always)]
fn test_leaf(slots: &[u64], l: Leaf) -> bool {
    match l {
        Leaf::NonZero(s) => slots[s] != 0,
        Leaf::Zero(s) => slots[s] == 0,
        Leaf::Eq(s, v) => slots[s] == v,
        Leaf::Ne(s, v) => slots[s] != v,
        Leaf::Lt(s, v) => slots[s] < v,
        Leaf::Le(s, v) => slots[s] <= v,
        Leaf::Gt(s, v) => slots[s] > v,
        Leaf::Ge(s, v) => slots[s] >= v,
    }
}

pub(crate) fn expr(x: &Expr) -> XF {
    if may_fail(x) {
        return interp_expr(x);
    }
    // `a || b || c` and `a && b && c` over field tests: one closure, short-circuit order kept
    if let Expr::Binary {
        op: op @ (BinOp::Or | BinOp::And),
        ..
    } = x
    {
        let mut leaves = vec![];
        if chain(x, *op, &mut leaves) {
            return if *op == BinOp::Or {
                Box::new(move |_, w| leaves.iter().any(|&l| test_leaf(&w.slots, l)) as u64)
            } else {
                Box::new(move |_, w| leaves.iter().all(|&l| test_leaf(&w.slots, l)) as u64)
            };
        }
    }
    match x {
        Expr::Load(LValue::Static(l)) if l.width <= 64 => {
            let s = l.slot as usize;
            Box::new(move |_, w| w.slots[s])
        }
        Expr::Small { value, .. } => {
            let v = *value;
            Box::new(move |_, _| v)
        }
        Expr::Unary {
            op: UnOp::Not, arg, ..
        } if matches!(&**arg, Expr::Load(LValue::Static(l)) if l.width <= 64) => {
            let Expr::Load(LValue::Static(l)) = &**arg else {
                unreachable!()
            };
            let s = l.slot as usize;
            Box::new(move |_, w| (w.slots[s] == 0) as u64)
        }
        Expr::Unary { op, width, arg } if *width <= 64 && arg.width() <= 64 => {
            let (a, m) = (expr(arg), mask(*width));
            match op {
                UnOp::Not => Box::new(move |e, w| (a(e, w) == 0) as u64),
                UnOp::BitNot => Box::new(move |e, w| !a(e, w) & m),
                UnOp::Neg => Box::new(move |e, w| a(e, w).wrapping_neg() & m),
            }
        }
        Expr::Binary {
            op,
            width,
            signed,
            lhs,
            rhs,
        } if lhs.width() <= 64 && rhs.width() <= 64 && *width <= 64 => {
            let m = mask(*width);
            // the most common shape: a field compared with a constant
            if let (
                BinOp::Eq | BinOp::Ne,
                Expr::Load(LValue::Static(l)),
                Expr::Small { value, .. },
            ) = (op, &**lhs, &**rhs)
            {
                let (s, v, eq) = (l.slot as usize, *value, *op == BinOp::Eq);
                return Box::new(move |_, w| ((w.slots[s] == v) == eq) as u64);
            }
            // a field and a constant: no closure calls for the operands
            if let (Expr::Load(LValue::Static(l)), Expr::Small { value, .. }) = (&**lhs, &**rhs) {
                let (s, v) = (l.slot as usize, *value);
                let f: Option<XF> = match (op, signed) {
                    (BinOp::Lt, false) => Some(Box::new(move |_, w| (w.slots[s] < v) as u64)),
                    (BinOp::Le, false) => Some(Box::new(move |_, w| (w.slots[s] <= v) as u64)),
                    (BinOp::Gt, false) => Some(Box::new(move |_, w| (w.slots[s] > v) as u64)),
                    (BinOp::Ge, false) => Some(Box::new(move |_, w| (w.slots[s] >= v) as u64)),
                    (BinOp::Add, _) => Some(Box::new(move |_, w| w.slots[s].wrapping_add(v) & m)),
                    (BinOp::Sub, _) => Some(Box::new(move |_, w| w.slots[s].wrapping_sub(v) & m)),
                    (BinOp::BitAnd, _) => Some(Box::new(move |_, w| w.slots[s] & v)),
                    _ => None,
                };
                if let Some(f) = f {
                    return f;
                }
            }
            let (a, b) = (expr(lhs), expr(rhs));
            match (op, signed) {
                (BinOp::And, _) => Box::new(move |e, w| (a(e, w) != 0 && b(e, w) != 0) as u64),
                (BinOp::Or, _) => Box::new(move |e, w| (a(e, w) != 0 || b(e, w) != 0) as u64),
                (BinOp::Add, _) => Box::new(move |e, w| a(e, w).wrapping_add(b(e, w)) & m),
                (BinOp::Sub, _) => Box::new(move |e, w| a(e, w).wrapping_sub(b(e, w)) & m),
                (BinOp::Mul, _) => Box::new(move |e, w| a(e, w).wrapping_mul(b(e, w)) & m),
                (BinOp::BitAnd, _) => Box::new(move |e, w| a(e, w) & b(e, w)),
                (BinOp::BitOr, _) => Box::new(move |e, w| a(e, w) | b(e, w)),
                (BinOp::BitXor, _) => Box::new(move |e, w| a(e, w) ^ b(e, w)),
                (BinOp::Eq, _) => Box::new(move |e, w| (a(e, w) == b(e, w)) as u64),
                (BinOp::Ne, _) => Box::new(move |e, w| (a(e, w) != b(e, w)) as u64),
                (BinOp::Lt, false) => Box::new(move |e, w| (a(e, w) < b(e, w)) as u64),
                (BinOp::Le, false) => Box::new(move |e, w| (a(e, w) <= b(e, w)) as u64),
                (BinOp::Gt, false) => Box::new(move |e, w| (a(e, w) > b(e, w)) as u64),
                (BinOp::Ge, false) => Box::new(move |e, w| (a(e, w) >= b(e, w)) as u64),
                _ => interp_expr(x),
            }
        }
        Expr::Slice { arg, hi, lo } if arg.width() <= 64 => {
            let (a, lo, m) = (expr(arg), *lo, mask(hi - lo + 1));
            Box::new(move |e, w| (a(e, w) >> lo) & m)
        }
        // truncation, or widening of an unsigned value
        Expr::Cast { arg, width, signed }
            if *width <= 64 && arg.width() <= 64 && (!*signed || *width <= arg.width()) =>
        {
            let (a, m) = (expr(arg), mask(*width));
            Box::new(move |e, w| a(e, w) & m)
        }
        Expr::Cond {
            cond,
            then,
            else_,
            width,
        } if *width <= 64 && cond.width() <= 64 => {
            let (c, t, f) = (expr(cond), expr(then), expr(else_));
            Box::new(move |e, w| if c(e, w) != 0 { t(e, w) } else { f(e, w) })
        }
        _ => interp_expr(x),
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
    /// The whole parser as one native function (set by the native backend).
    pub native_parser: Option<crate::engine::NativeParse>,
}
