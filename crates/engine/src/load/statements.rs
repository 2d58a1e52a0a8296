//! Statements compiled into closures: a statement list ([`block`]: runs of simple assignments
//! merged into one closure each) and each statement by its shape ([`stmt`]), the interpreter's
//! `exec_one` for shapes not covered.

use super::assigns::{flush_assigns, simple_assign, SimpleAssign};
use super::checksums::csum16;
use super::context::{mask, stmt_may_fail, Cx};
use super::expressions::expr;
use crate::code::Flow;
use crate::engine::{CBlock, SF};
use crate::pipeline::call::{plan_arg, PlannedCall};
use crate::pipeline::headers::{emit_static, extract_static};
use p4sec_externs::layout::ArgLayout;
use p4sec_ir::*;

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
