//! Translation of a statement list into one Cranelift function (see [`Fx`]): assignments of
//! expressions of at most 64 bits to fields, `if`, `switch`, labelled blocks and their breaks,
//! `exit`, `setValid`/`setInvalid` and `mark_to_drop` inline; any other statement a call back to
//! its closure, whose flow is followed (a break to an enclosing native block jumps there, any
//! other flow returns).

use super::helpers::{self, Keep, EXIT, NEXT};
use crate::code::Flow;
use crate::load::compile::{self, Cx};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    types, AbiParam, Block, InstBuilder, MemFlagsData, SigRef, Type, Value,
};
use cranelift_codegen::isa::TargetFrontendConfig;
use cranelift_frontend::{FunctionBuilder, Variable};
use p4sec_ir::*;

/// The state of translating one statement list.
pub(crate) struct Fx<'a, 'b> {
    pub(crate) b: FunctionBuilder<'b>,
    pub(crate) cx: &'a Cx<'a>,
    pub(crate) ptr: Type,
    /// The function's `*mut Ctx` argument.
    pub(crate) ctx: Value,
    /// The slots' base address (reloaded from the context after every call back).
    pub(crate) slots: Variable,
    /// Slots the code may touch: indices below this (the program's slots and the sink).
    pub(crate) nslots: usize,
    pub(crate) keep: Keep,
    /// Enclosing labelled blocks translated inline: (label, the block after it, jumped to).
    labels: Vec<(u32, Block, bool)>,
    stmt_sig: SigRef,
    pub(crate) expr_sig: SigRef,
}

impl<'a, 'b> Fx<'a, 'b> {
    pub(crate) fn new(
        mut b: FunctionBuilder<'b>,
        cx: &'a Cx<'a>,
        ptr: Type,
        nslots: usize,
    ) -> Self {
        let cc = b.func.signature.call_conv;
        let mut s = cranelift_codegen::ir::Signature::new(cc);
        s.params = vec![
            AbiParam::new(ptr),
            AbiParam::new(ptr),
            AbiParam::new(types::I64),
        ];
        s.returns = vec![AbiParam::new(types::I64)];
        let stmt_sig = b.import_signature(s);
        let mut s = cranelift_codegen::ir::Signature::new(cc);
        s.params = vec![AbiParam::new(ptr), AbiParam::new(ptr)];
        s.returns = vec![AbiParam::new(types::I64)];
        let expr_sig = b.import_signature(s);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let ctx = b.block_params(entry)[0];
        let slots = b.declare_var(ptr);
        let mut fx = Fx {
            b,
            cx,
            ptr,
            ctx,
            slots,
            nslots,
            keep: Keep::default(),
            labels: vec![],
            stmt_sig,
            expr_sig,
        };
        fx.reload_slots();
        fx
    }

    pub(crate) fn reload_slots(&mut self) {
        let p = self
            .b
            .ins()
            .load(self.ptr, MemFlagsData::trusted(), self.ctx, 0);
        self.b.def_var(self.slots, p);
    }

    /// The whole list, then `return Next` if it falls through.
    pub(crate) fn body(&mut self, body: &[Stmt]) {
        if self.list(body) {
            let z = self.b.ins().iconst(types::I64, NEXT as i64);
            self.b.ins().return_(&[z]);
        }
    }

    pub(crate) fn finish(mut self, config: TargetFrontendConfig) -> Keep {
        self.b.seal_all_blocks();
        self.b.finalize(config);
        self.keep
    }

    /// A statement list; true when control falls through its end.
    fn list(&mut self, body: &[Stmt]) -> bool {
        for s in body {
            if !self.stmt(s) {
                // the rest is unreachable (after an exit or a break)
                return false;
            }
        }
        true
    }

    pub(crate) fn slot_ok(&self, slot: u32) -> bool {
        (slot as usize) < self.nslots
    }

    pub(crate) fn store_slot(&mut self, slot: u32, v: Value) {
        let base = self.b.use_var(self.slots);
        self.b
            .ins()
            .store(MemFlagsData::trusted(), v, base, (slot as i32) * 8);
    }

    pub(crate) fn load_slot(&mut self, slot: u32) -> Value {
        let base = self.b.use_var(self.slots);
        self.b
            .ins()
            .load(types::I64, MemFlagsData::trusted(), base, (slot as i32) * 8)
    }

    fn ret(&mut self, v: u64) {
        let r = self.b.ins().iconst(types::I64, v as i64);
        self.b.ins().return_(&[r]);
    }

    /// One statement; true when control falls through it.
    fn stmt(&mut self, s: &Stmt) -> bool {
        if let Some(ft) = self.inline(s) {
            self.keep.inline += 1;
            return ft;
        }
        self.fallback(s)
    }

    /// The statement translated inline, or `None` (nothing emitted) when it is not covered.
    fn inline(&mut self, s: &Stmt) -> Option<bool> {
        match s {
            Stmt::Assign {
                dst: LValue::Static(l),
                src,
            } if l.width > 0
                && l.width <= 64
                && src.width() <= 64
                && self.slot_ok(l.slot)
                && self.covered(src) =>
            {
                let v = self.expr(src);
                let v = self.mask(v, l.width);
                self.store_slot(l.slot, v);
                Some(true)
            }
            Stmt::If { cond, then, else_ } if cond.width() <= 64 && self.covered(cond) => {
                let c = self.expr(cond);
                let (tb, eb) = (self.b.create_block(), self.b.create_block());
                self.b.ins().brif(c, tb, &[], eb, &[]);
                let merge = self.b.create_block();
                self.b.switch_to_block(tb);
                let t = self.list(then);
                if t {
                    self.b.ins().jump(merge, &[]);
                }
                self.b.switch_to_block(eb);
                let f = self.list(else_);
                if f {
                    self.b.ins().jump(merge, &[]);
                }
                if t || f {
                    self.b.switch_to_block(merge);
                }
                Some(t || f)
            }
            Stmt::Switch {
                expr: x,
                cases,
                default,
            } if x.width() <= 64
                && self.covered(x)
                && cases.iter().all(|(vs, _)| vs.iter().all(|v| v.width <= 64)) =>
            {
                let v = self.expr(x);
                let merge = self.b.create_block();
                let mut any = false;
                for (vs, body) in cases {
                    let (hit, next) = (self.b.create_block(), self.b.create_block());
                    if vs.is_empty() {
                        self.b.ins().jump(next, &[]);
                    }
                    for (i, k) in vs.iter().enumerate() {
                        let c = self.b.ins().icmp_imm_u(IntCC::Equal, v, k.as_u64() as i64);
                        let miss = if i + 1 == vs.len() {
                            next
                        } else {
                            self.b.create_block()
                        };
                        self.b.ins().brif(c, hit, &[], miss, &[]);
                        if miss != next {
                            self.b.switch_to_block(miss);
                        }
                    }
                    self.b.switch_to_block(hit);
                    if self.list(body) {
                        any = true;
                        self.b.ins().jump(merge, &[]);
                    }
                    self.b.switch_to_block(next);
                }
                if self.list(default) {
                    any = true;
                    self.b.ins().jump(merge, &[]);
                }
                if any {
                    self.b.switch_to_block(merge);
                }
                Some(any)
            }
            Stmt::Block { label, body } => {
                let after = self.b.create_block();
                self.labels.push((*label, after, false));
                let ft = self.list(body);
                let (_, _, used) = self.labels.pop().expect("pushed above");
                if ft {
                    self.b.ins().jump(after, &[]);
                }
                if ft || used {
                    self.b.switch_to_block(after);
                }
                Some(ft || used)
            }
            Stmt::Break(l) => {
                match self.labels.iter_mut().rev().find(|(x, _, _)| x == l) {
                    Some((_, after, used)) => {
                        *used = true;
                        let after = *after;
                        self.b.ins().jump(after, &[]);
                    }
                    None => self.ret(helpers::encode(Flow::Break(*l))),
                }
                Some(false)
            }
            Stmt::Exit => {
                self.ret(EXIT);
                Some(false)
            }
            Stmt::SetValid {
                hdr: HeaderRef::Static(h),
                valid,
            } => {
                let l = self.cx.prog.headers.get(*h as usize)?.valid;
                if !self.slot_ok(l.slot) {
                    return None;
                }
                let v = self.b.ins().iconst(types::I64, *valid as i64);
                self.store_slot(l.slot, v);
                Some(true)
            }
            Stmt::Builtin(Builtin::MarkToDrop) => {
                let sm = &self.cx.prog.std_meta;
                let (a, b) = (sm.egress_spec, sm.mcast_grp);
                if [a, b].iter().any(|l| l.width > 0 && !self.slot_ok(l.slot)) {
                    return None;
                }
                for (l, v) in [(a, 511u64), (b, 0)] {
                    if l.width > 0 {
                        let v = self
                            .b
                            .ins()
                            .iconst(types::I64, (v & crate::bits::mask64(l.width)) as i64);
                        self.store_slot(l.slot, v);
                    }
                }
                Some(true)
            }
            _ => None,
        }
    }

    /// A statement run by its closure: called back, its flow followed.
    fn fallback(&mut self, s: &Stmt) -> bool {
        let sf = Box::new(compile::stmt(self.cx, s));
        let p = &*sf as *const crate::engine::SF as i64;
        self.keep.stmts.push(sf);
        let check = compile::stmt_may_fail(s) as i64;
        let f = self
            .b
            .ins()
            .iconst(self.ptr, helpers::np_stmt as *const () as usize as i64);
        let a = self.b.ins().iconst(self.ptr, p);
        let c = self.b.ins().iconst(types::I64, check);
        let call = self
            .b
            .ins()
            .call_indirect(self.stmt_sig, f, &[self.ctx, a, c]);
        let r = self.b.inst_results(call)[0];
        self.reload_slots();
        let (cont, other) = (self.b.create_block(), self.b.create_block());
        self.b.ins().brif(r, other, &[], cont, &[]);
        self.b.switch_to_block(other);
        // a break to an enclosing inline block jumps to its end; anything else returns
        for i in (0..self.labels.len()).rev() {
            let (l, after, _) = self.labels[i];
            let code = helpers::encode(Flow::Break(l));
            let c = self.b.ins().icmp_imm_u(IntCC::Equal, r, code as i64);
            let next = self.b.create_block();
            self.labels[i].2 = true;
            self.b.ins().brif(c, after, &[], next, &[]);
            self.b.switch_to_block(next);
        }
        self.b.ins().return_(&[r]);
        self.b.switch_to_block(cont);
        true
    }
}
