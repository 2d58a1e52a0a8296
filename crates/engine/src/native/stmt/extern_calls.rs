//! Translation of extern calls (`Stmt::ExternCall`, which also carries extern functions such as
//! the hashes) without their closures: a call site its extern binds for itself
//! ([`crate::pipeline::call::PlannedCall::bind`]) is called through [`helpers::np_extern_bound`];
//! any other whose arguments are each narrow (at most 64 bits, computed here) or planned (a layout,
//! marshalled by the engine) through [`helpers::np_extern`], the narrow arguments passed in a word
//! area on the stack and the narrow results stored from it into their slots here. A call with an
//! argument neither narrow nor planned, or a return value to a dynamic location, keeps its closure.

use super::Fx;
use crate::load::compile;
use crate::load::pristine::PristineArg;
use crate::native::helpers::{self, Ctx};
use crate::pipeline::call::{
    plan_arg, DirectArg, DirectBound, DirectCall, DirectRet, PlannedCall, Way,
};
use cranelift_codegen::ir::{
    types, InstBuilder, MemFlagsData, StackSlotData, StackSlotKind, Value,
};
use p4sec_ir::*;
use std::ops::Range;

/// How each argument of a call site would travel (true: as a word), and its return value.
struct Shape {
    words: Vec<bool>,
    ret: Option<DirectRet>,
}

impl Fx<'_, '_> {
    /// Would [`Fx::extern_call`] translate `s`?
    pub(crate) fn extern_inlinable(&self, s: &Stmt) -> bool {
        self.extern_shape(s).is_some()
    }

    /// Can argument `a` travel as a word: at most 64 bits, its parts (when it carries a value in)
    /// expressions of at most 64 bits native code computes, its destinations (when it carries one
    /// out) fixed narrow locations, both adding up to its width.
    fn word_arg(&self, a: &ExternArg) -> bool {
        if a.width > 64 {
            return false;
        }
        let ins = a.dir == Direction::Out
            || (a.parts.iter().map(|p| p.width()).sum::<u32>() == a.width
                && a.parts.iter().all(|p| p.width() <= 64 && self.covered(p)));
        let outs = a.dir == Direction::In || {
            let mut sum = 0;
            a.dsts.iter().all(|d| match d {
                LValue::Static(l) if l.width <= 64 && self.slot_ok(l.slot) => {
                    sum += l.width;
                    true
                }
                _ => false,
            }) && sum == a.width
        };
        ins && outs
    }

    /// The shape of extern call `s`, or `None` when it keeps its closure: an argument neither a
    /// word nor planned, a return value to a dynamic location, or results the engine writes
    /// (planned arguments, a wide return value) overlapping those the native code stores after
    /// it (which would change the order of the writes).
    fn extern_shape(&self, s: &Stmt) -> Option<Shape> {
        let Stmt::ExternCall { args, ret, .. } = s else {
            return None;
        };
        if compile::stmt_may_fail(s) {
            return None;
        }
        let ret = match ret {
            None => None,
            Some(LValue::Static(l)) if l.width <= 64 && self.slot_ok(l.slot) => {
                Some(DirectRet::Word(l.width))
            }
            Some(LValue::Static(l)) if l.width > 64 => Some(DirectRet::Wide(*l)),
            Some(_) => return None,
        };
        let mut words = Vec::with_capacity(args.len());
        // slots the engine writes, and slots the native code writes
        let (mut engine, mut native): (Vec<Range<u32>>, Vec<Range<u32>>) = (vec![], vec![]);
        let span = |l: &Loc| l.slot..l.slot + words_for(l.width).max(1);
        for a in args {
            let word = self.word_arg(a);
            if !word && plan_arg(a).is_none() {
                return None;
            }
            if a.dir != Direction::In {
                let to = if word { &mut native } else { &mut engine };
                for d in &a.dsts {
                    if let LValue::Static(l) = d {
                        to.push(span(l));
                    }
                }
            }
            words.push(word);
        }
        match (ret, s) {
            (
                Some(DirectRet::Word(_)),
                Stmt::ExternCall {
                    ret: Some(LValue::Static(l)),
                    ..
                },
            ) => native.push(span(l)),
            (Some(DirectRet::Wide(l)), _) => engine.push(span(&l)),
            _ => {}
        }
        let overlap = engine
            .iter()
            .any(|x| native.iter().any(|y| x.start < y.end && y.start < x.end));
        (!overlap).then_some(Shape { words, ret })
    }

    /// Extern call `s` translated (see the module's documentation), or `None` (nothing emitted)
    /// when it keeps its closure.
    pub(crate) fn extern_call(&mut self, s: &Stmt) -> Option<bool> {
        let shape = self.extern_shape(s)?;
        let Stmt::ExternCall {
            inst,
            method,
            args,
            ret,
        } = s
        else {
            return None;
        };
        let (inst, method) = (*inst as usize, *method);
        let plans: Vec<_> = args.iter().map(plan_arg).collect();
        if let Some(pc) = PlannedCall::new(inst, method, args, &plans, ret.as_ref()) {
            let pristine = self.cx.pristine.of(s);
            if let Some(call) = pc.bind(self.cx.externs, self.cx.methods, pristine.map(|p| p.arg)) {
                // the extern compiled the call site: it reads and writes the slots itself
                // a header argument the engine may vouch for: the per-packet half of the check
                // made here (its indices settled now), the offsets compared by the helper
                let pristine = pristine.filter(|p| {
                    self.slot_ok(p.valid as u32) && p.header < self.cx.prog.headers.len()
                });
                let site = Box::new(DirectBound {
                    inst,
                    method,
                    call,
                    vouch_len: pristine.map_or(0, |p| p.len),
                });
                let p = &*site as *const DirectBound as i64;
                self.keep.externs.push(site);
                let a = self.b.ins().iconst(self.ptr, p);
                let call = match pristine {
                    Some(pa) => {
                        let off = self.header_off(pa);
                        let f = self
                            .b
                            .ins()
                            .iconst(self.ptr, helpers::np_extern_bound_vouch as *const () as i64);
                        self.b
                            .ins()
                            .call_indirect(self.stmt_sig, f, &[self.ctx, a, off])
                    }
                    None => {
                        let f = self
                            .b
                            .ins()
                            .iconst(self.ptr, helpers::np_extern_bound as *const () as i64);
                        self.b.ins().call_indirect(self.expr_sig, f, &[self.ctx, a])
                    }
                };
                let r = self.b.inst_results(call)[0];
                self.reload_slots();
                self.follow(r);
                return Some(true);
            }
        }
        let dc = DirectCall::new(
            inst,
            method,
            args.iter()
                .zip(&shape.words)
                .zip(plans)
                .map(|((a, &word), plan)| DirectArg {
                    width: a.width,
                    nbytes: a.width.div_ceil(8) as usize,
                    dir: a.dir,
                    way: match plan {
                        Some(p) if !word => Way::Layout(p),
                        _ => Way::Word,
                    },
                })
                .collect(),
            shape.ret,
        );
        let nwords = dc.words();
        let ss = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            (nwords * 8) as u32,
            3,
        ));
        // the narrow values going in
        for (i, (a, &word)) in args.iter().zip(&shape.words).enumerate() {
            if word && a.dir != Direction::Out {
                let v = self.word_value(&a.parts);
                self.b.ins().stack_store(self.ptr, v, ss, (i * 8) as i32);
            }
        }
        let site = Box::new(dc);
        let p = &*site as *const DirectCall as i64;
        self.keep.externs.push(site);
        let f = self
            .b
            .ins()
            .iconst(self.ptr, helpers::np_extern as *const () as i64);
        let a = self.b.ins().iconst(self.ptr, p);
        let area = self.b.ins().stack_addr(self.ptr, ss, 0);
        let call = self
            .b
            .ins()
            .call_indirect(self.stmt_sig, f, &[self.ctx, a, area]);
        let r = self.b.inst_results(call)[0];
        self.reload_slots();
        self.follow(r);
        // the narrow values coming out, in argument order, then the return value
        for (i, (a, &word)) in args.iter().zip(&shape.words).enumerate() {
            if word && a.dir != Direction::In {
                let v = self
                    .b
                    .ins()
                    .stack_load(self.ptr, types::I64, ss, (i * 8) as i32);
                self.split_word(v, a.width, &a.dsts);
            }
        }
        if let (Some(DirectRet::Word(width)), Some(LValue::Static(l))) = (shape.ret, ret) {
            let v = self
                .b
                .ins()
                .stack_load(self.ptr, types::I64, ss, (args.len() * 8) as i32);
            let v = self.mask(v, width);
            self.store_slot(l.slot, v);
        }
        Some(true)
    }

    /// Where header `p.header` starts in the packet, as far as this pass can vouch for it: its
    /// offset (recorded by the parser's fast path) when it is valid, else [`crate::NO_OFFSET`]
    /// (as for a header without an offset; the helper compares it with the payload's offset
    /// less the header's length, which it never equals). The indices were checked against the
    /// program when the site was translated; generated code runs only on workers with at least
    /// the program's slots and header offsets.
    fn header_off(&mut self, p: PristineArg) -> Value {
        let flags = MemFlagsData::trusted();
        let valid = self.load_slot(p.valid as u32);
        let offs = self
            .b
            .ins()
            .load(self.ptr, flags, self.ctx, Ctx::OFF_HDR_OFF);
        let off = self
            .b
            .ins()
            .load(types::I64, flags, offs, (p.header * 8) as i32);
        let none = self.b.ins().iconst(types::I64, crate::NO_OFFSET as i64);
        self.b.ins().select(valid, off, none)
    }

    /// The value of a narrow argument: its parts concatenated, most significant first, each
    /// masked to its width.
    fn word_value(&mut self, parts: &[Expr]) -> Value {
        let mut acc: Option<Value> = None;
        for x in parts {
            let w = x.width();
            if w == 0 {
                continue;
            }
            let v = self.expr(x);
            let v = self.mask(v, w);
            acc = Some(match acc {
                None => v,
                Some(hi) => {
                    let hi = self.b.ins().ishl_imm_u(hi, w as i64);
                    self.b.ins().bor(hi, v)
                }
            });
        }
        acc.unwrap_or_else(|| self.konst(0))
    }

    /// A narrow result of `width` bits split into its destinations (most significant first, fixed
    /// narrow locations: see [`Fx::word_arg`]).
    fn split_word(&mut self, v: Value, width: u32, dsts: &[LValue]) {
        let mut left = width;
        for d in dsts {
            let LValue::Static(l) = d else {
                continue;
            };
            left -= l.width;
            let x = if l.width == 0 {
                self.konst(0)
            } else {
                let x = if left > 0 {
                    self.b.ins().ushr_imm_u(v, left as i64)
                } else {
                    v
                };
                self.mask(x, l.width)
            };
            self.store_slot(l.slot, x);
        }
    }
}
