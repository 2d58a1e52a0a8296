//! Translation of a statement list into one Cranelift function (see [`Fx`]): assignments of
//! expressions of at most 64 bits to fields (and word copies of wider values, see `wide`), `if`,
//! `switch`, labelled blocks and their breaks, `exit`, `setValid`/`setInvalid` and `mark_to_drop`
//! inline; any other statement a call back to its closure, whose flow is followed (a break to an
//! enclosing native block jumps there, any other flow returns).

use super::helpers::{self, Ctx, Keep, EXIT, NEXT};
use crate::code::Flow;
use crate::load::compile::{self, Cx};
use crate::load::plans::HeaderPlan;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    types, AbiParam, Block, InstBuilder, MemFlagsData, SigRef, StackSlotData, StackSlotKind, Type,
    Value,
};
use cranelift_codegen::isa::TargetFrontendConfig;
use cranelift_frontend::{FunctionBuilder, Variable};
use p4sec_ir::*;

mod extern_calls;
mod wide;

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
    pub(crate) labels: Vec<(u32, Block, bool)>,
    /// Inside an action inlined at a table apply: where a break that leaves the action goes (the
    /// apply ends; labels outside the action are not visible in it).
    pub(crate) escape: Option<Block>,
    /// Translating the verify-checksum control (see [`Fx::verify_bytes`]).
    pub(crate) verify: bool,
    /// The deparser's deferred checksums, in `Deparser::deferred`'s order: (header, the checksum
    /// field's byte offset, its slot).
    pub(crate) deferred: Vec<(usize, usize, u32)>,
    /// The list emits headers (set before translating it, see [`emits`]): its context carries
    /// the deparser's output and its calls back keep that in step.
    pub(crate) emits: bool,
    pub(crate) stmt_sig: SigRef,
    action_sig: SigRef,
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
        let mut s = cranelift_codegen::ir::Signature::new(cc);
        s.params = vec![AbiParam::new(ptr), AbiParam::new(types::I64)];
        s.returns = vec![AbiParam::new(types::I64)];
        let action_sig = b.import_signature(s);
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
            escape: None,
            verify: false,
            deferred: vec![],
            emits: false,
            stmt_sig,
            action_sig,
            expr_sig,
        };
        fx.reload_slots();
        fx
    }

    pub(crate) fn reload_slots(&mut self) {
        let p = self
            .b
            .ins()
            .load(self.ptr, MemFlagsData::trusted(), self.ctx, Ctx::OFF_SLOTS);
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
        self.keep.emits = self.emits;
        self.b.seal_all_blocks();
        self.b.finalize(config);
        self.keep
    }

    /// A statement list; true when control falls through its end.
    pub(crate) fn list(&mut self, body: &[Stmt]) -> bool {
        let mut i = 0;
        while i < body.len() {
            if self.inlinable(&body[i]) {
                if !self.stmt(&body[i]) {
                    // the rest is unreachable (after an exit or a break)
                    return false;
                }
                i += 1;
                continue;
            }
            // a run of statements not covered: one call back for all of them
            let j = (i..body.len())
                .find(|&j| self.inlinable(&body[j]))
                .unwrap_or(body.len());
            if j == i + 1 {
                self.fallback(&body[i]);
            } else {
                let b = compile::block(self.cx, &body[i..j]);
                let sf: crate::engine::SF = Box::new(move |e, w| b.run(e, w));
                self.call_back(sf, false);
            }
            i = j;
        }
        true
    }

    /// Would [`Fx::inline`] translate `s`? (A statement it then refuses is called back alone.)
    fn inlinable(&self, s: &Stmt) -> bool {
        let p = self.cx.prog;
        if self.verify && compile::header_checksum(p, s).is_some() {
            return true;
        }
        match s {
            Stmt::Assign {
                dst: LValue::Static(l),
                src,
            } => {
                l.width > 0
                    && l.width <= 64
                    && src.width() <= 64
                    && self.slot_ok(l.slot)
                    && self.covered(src)
                    || self.wide_assignable(l, src)
            }
            Stmt::If { cond, .. } => cond.width() <= 64 && self.covered(cond),
            Stmt::Switch { expr: x, cases, .. } => {
                x.width() <= 64
                    && self.covered(x)
                    && cases.iter().all(|(vs, _)| vs.iter().all(|v| v.width <= 64))
            }
            Stmt::Block { .. } | Stmt::Break(_) | Stmt::Exit => true,
            Stmt::SetValid {
                hdr: HeaderRef::Static(h),
                ..
            } => p
                .headers
                .get(*h as usize)
                .is_some_and(|x| self.slot_ok(x.valid.slot)),
            Stmt::Builtin(Builtin::MarkToDrop) => true,
            Stmt::Builtin(b) if self.registers_ok(b) => true,
            Stmt::ExternCall { .. } => self.extern_inlinable(s),
            Stmt::ApplyTable { table, .. } => p
                .tables
                .get(*table as usize)
                .is_some_and(|tb| self.lean_table(tb)),
            Stmt::Extract {
                hdr: HeaderRef::Static(h),
                varbit_bits: None,
            } => p.headers.get(*h as usize).is_some_and(|x| {
                let hp = HeaderPlan::new(x);
                hp.narrow
                    && hp
                        .fields
                        .iter()
                        .all(|f| f.1 as usize + 8 <= hp.fixed.div_ceil(8) + 8)
            }),
            Stmt::Emit {
                hdr: HeaderRef::Static(h),
            } => p.headers.get(*h as usize).is_some_and(|x| {
                let hp = HeaderPlan::new(x);
                hp.narrow && !hp.emit_ops.is_empty() && hp.fixed.is_multiple_of(8)
            }),
            _ => false,
        }
    }

    /// The address of a call-back helper: its instance for code that emits, or the other.
    pub(crate) fn helper(&mut self, emits: *const (), not: *const ()) -> Value {
        let f = if self.emits { emits } else { not };
        self.b.ins().iconst(self.ptr, f as usize as i64)
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

    pub(crate) fn ret(&mut self, v: u64) {
        let r = self.b.ins().iconst(types::I64, v as i64);
        self.b.ins().return_(&[r]);
    }

    /// One statement; true when control falls through it.
    fn stmt(&mut self, s: &Stmt) -> bool {
        if let Some(ft) = self.inline(s) {
            self.keep.inline += 1;
            self.keep.weight += match s {
                Stmt::ApplyTable { .. }
                | Stmt::Builtin(Builtin::VerifyChecksum { .. })
                | Stmt::ExternCall { .. } => 3,
                _ => 1,
            };
            return ft;
        }
        self.fallback(s)
    }

    /// The statement translated inline, or `None` (nothing emitted) when it is not covered.
    fn inline(&mut self, s: &Stmt) -> Option<bool> {
        if self.verify {
            if let Some((h, (f_off, len))) = compile::header_checksum(self.cx.prog, s) {
                return self.verify_bytes(s, h, f_off, len);
            }
        }
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
            Stmt::Assign {
                dst: LValue::Static(l),
                src,
            } if self.wide_assignable(l, src) => {
                self.wide_assign(*l, src);
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
                    None => match self.escape {
                        Some(out) => {
                            self.b.ins().jump(out, &[]);
                        }
                        None => self.ret(helpers::encode(Flow::Break(*l))),
                    },
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
            Stmt::ApplyTable {
                table,
                hit,
                action_run,
            } => self.apply(*table as usize, *hit, *action_run),
            Stmt::Extract {
                hdr: HeaderRef::Static(h),
                varbit_bits: None,
            } => self.extract(*h as usize, s),
            Stmt::Emit {
                hdr: HeaderRef::Static(h),
            } => self.emit(*h as usize, s),
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
            Stmt::Builtin(b) => self.registers(b),
            Stmt::ExternCall { .. } => self.extern_call(s),
            _ => None,
        }
    }

    /// A statement run by its closure: called back, its flow followed.
    pub(crate) fn fallback(&mut self, s: &Stmt) -> bool {
        self.call_back(compile::stmt(self.cx, s), compile::stmt_may_fail(s));
        true
    }

    /// A call back to `sf` (taking a pending parser error after it when `check`), its flow
    /// followed.
    fn call_back(&mut self, sf: crate::engine::SF, check: bool) {
        let sf = Box::new(sf);
        let p = &*sf as *const crate::engine::SF as i64;
        self.keep.stmts.push(sf);
        let check = check as i64;
        let f = self.helper(
            helpers::np_stmt::<true> as *const (),
            helpers::np_stmt::<false> as *const (),
        );
        let a = self.b.ins().iconst(self.ptr, p);
        let c = self.b.ins().iconst(types::I64, check);
        let call = self
            .b
            .ins()
            .call_indirect(self.stmt_sig, f, &[self.ctx, a, c]);
        let r = self.b.inst_results(call)[0];
        self.reload_slots();
        self.follow(r);
    }

    /// After a call back that returned flow `r`: on `Next` carry on (in a new block), on a break to
    /// an enclosing inline block jump to its end, (inside an inlined action) on any other break end
    /// the action, else return `r`.
    fn follow(&mut self, r: Value) {
        let (cont, other) = (self.b.create_block(), self.b.create_block());
        self.b.ins().brif(r, other, &[], cont, &[]);
        self.b.switch_to_block(other);
        for i in (0..self.labels.len()).rev() {
            let (l, after, _) = self.labels[i];
            let code = helpers::encode(Flow::Break(l));
            let c = self.b.ins().icmp_imm_u(IntCC::Equal, r, code as i64);
            let next = self.b.create_block();
            self.labels[i].2 = true;
            self.b.ins().brif(c, after, &[], next, &[]);
            self.b.switch_to_block(next);
        }
        if let Some(out) = self.escape {
            let kind = self.b.ins().band_imm_u(r, 7);
            let c = self
                .b
                .ins()
                .icmp_imm_u(IntCC::Equal, kind, helpers::BREAK as i64);
            let next = self.b.create_block();
            self.b.ins().brif(c, out, &[], next, &[]);
            self.b.switch_to_block(next);
        }
        self.b.ins().return_(&[r]);
        self.b.switch_to_block(cont);
    }

    /// A table apply of one narrow key (the closure backend's lean shape): the key computed here,
    /// the lookup and the arguments by [`helpers::np_select`], then the action chosen by a switch
    /// over the table's actions, each inlined (a break leaving it, or any flow but exit and parser
    /// errors, ends the apply, as `Engine::run_action` does).
    fn apply(&mut self, t: usize, hit: Option<Loc>, action_run: Option<Loc>) -> Option<bool> {
        let prog = self.cx.prog;
        let tb = prog.tables.get(t)?;
        if !self.lean_table(tb) {
            return None;
        }
        let keys: Vec<Value> = tb.keys.iter().flat_map(|k| self.key_words(k)).collect();
        let (k, f) = if let ([_], [k]) = (&tb.keys[..], &keys[..]) {
            let k = *k;
            let marks = hit.is_some() || action_run.is_some();
            let (emits, not) = helpers::select::select_helpers(tb, marks);
            let f = self.helper(emits, not);
            (k, f)
        } else {
            // several keys, or a wide one: their words in a stack slot, in key order (the table's
            // packed key), its address passed
            let size = (keys.len() * 8) as u32;
            let ss = self.b.create_sized_stack_slot(StackSlotData::new(
                StackSlotKind::ExplicitSlot,
                size,
                3,
            ));
            for (i, &v) in keys.iter().enumerate() {
                self.b.ins().stack_store(self.ptr, v, ss, (i * 8) as i32);
            }
            let addr = self.b.ins().stack_addr(self.ptr, ss, 0);
            let marks = hit.is_some() || action_run.is_some();
            let (emits, not) = helpers::select_lpm::parts_helpers(tb, marks).unwrap_or((
                helpers::np_select_key::<true> as *const (),
                helpers::np_select_key::<false> as *const (),
            ));
            let f = self.helper(emits, not);
            (addr, f)
        };
        let site = Box::new(helpers::ApplySite {
            table: t,
            hit,
            action_run,
        });
        let sp = &*site as *const helpers::ApplySite as i64;
        self.keep.sites.push(site);
        let a = self.b.ins().iconst(self.ptr, sp);
        let call = self
            .b
            .ins()
            .call_indirect(self.stmt_sig, f, &[self.ctx, a, k]);
        let r = self.b.inst_results(call)[0];
        self.reload_slots();
        let after = self.b.create_block();
        let (ran, chosen) = (self.b.create_block(), self.b.create_block());
        let is_ran =
            self.b
                .ins()
                .icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, r, helpers::RAN as i64);
        self.b.ins().brif(is_ran, ran, &[], chosen, &[]);
        // the general path ran the apply: its flow
        self.b.switch_to_block(ran);
        let flow = self.b.ins().band_imm_u(r, !helpers::RAN as i64);
        self.follow(flow);
        self.b.ins().jump(after, &[]);
        // the action chosen: inline when the table has few of them and they are short
        self.b.switch_to_block(chosen);
        let mut actions: Vec<usize> = tb.actions.iter().map(|a| a.action as usize).collect();
        actions.push(tb.default_action.action as usize);
        actions.sort_unstable();
        actions.dedup();
        let inline = actions.len() <= 16
            && actions
                .iter()
                .all(|&a| prog.actions.get(a).is_some_and(|x| x.body.len() <= 64));
        if inline {
            for &act in &actions {
                let (body_b, next) = (self.b.create_block(), self.b.create_block());
                let c = self.b.ins().icmp_imm_u(IntCC::Equal, r, act as i64);
                self.b.ins().brif(c, body_b, &[], next, &[]);
                self.b.switch_to_block(body_b);
                let labels = std::mem::take(&mut self.labels);
                let escape = self.escape.replace(after);
                let ft = self.list(&prog.actions[act].body);
                self.labels = labels;
                self.escape = escape;
                if ft {
                    self.b.ins().jump(after, &[]);
                }
                self.b.switch_to_block(next);
            }
        }
        // any other action (or all of them when not inlined): run by the engine
        let f = self.helper(
            helpers::np_action::<true> as *const (),
            helpers::np_action::<false> as *const (),
        );
        let call = self
            .b
            .ins()
            .call_indirect(self.action_sig, f, &[self.ctx, r]);
        let r = self.b.inst_results(call)[0];
        self.reload_slots();
        self.follow(r);
        self.b.ins().jump(after, &[]);
        self.b.switch_to_block(after);
        Some(true)
    }
}

impl Fx<'_, '_> {
    /// Can a table's applies be native: a packed key of up to [`crate::tables::KEY_WORDS`] words,
    /// none a selector's, no action selector, every key of at most 64 bits an expression native
    /// code computes, every wider one a field of its width in its slots ([`Fx::wide_key`]).
    fn lean_table(&self, tb: &Table) -> bool {
        let words: u32 = tb.keys.iter().map(|k| words_for(k.width)).sum();
        !tb.keys.is_empty()
            && (1..=crate::tables::KEY_WORDS).contains(&(words as usize))
            && tb.keys.iter().all(|k| {
                k.kind != MatchKind::Selector
                    && if k.width <= 64 {
                        self.covered(&k.expr)
                    } else {
                        self.wide_key(k).is_some()
                    }
            })
            && !matches!(tb.implementation, Implementation::ActionSelector(_))
    }

    /// A key wider than 64 bits native code builds: a field, metadata or parameter of the key's
    /// width in its slots (an IPv6 address). Its first slot.
    fn wide_key(&self, k: &TableKey) -> Option<u32> {
        match &k.expr {
            Expr::Load(LValue::Static(l))
                if l.width == k.width
                    && k.width <= MAX_WIDTH
                    && self.slot_ok(l.slot + words_for(k.width) - 1) =>
            {
                Some(l.slot)
            }
            _ => None,
        }
    }

    /// A key's words as the table's packed key holds them (least significant first): one for a
    /// key of at most 64 bits, the slots' words of a wide one, the last masked to the width.
    fn key_words(&mut self, k: &TableKey) -> Vec<Value> {
        if k.width <= 64 {
            return vec![self.key_word(&k.expr)];
        }
        let Some(slot) = self.wide_key(k) else {
            // (`lean_table` admits no other wide key)
            return vec![];
        };
        let n = words_for(k.width);
        (0..n)
            .map(|j| {
                let v = self.load_slot(slot + j);
                if j + 1 == n {
                    self.mask(v, k.width - 64 * j)
                } else {
                    v
                }
            })
            .collect()
    }

    /// A key's word: the key's value masked to its width.
    fn key_word(&mut self, x: &Expr) -> Value {
        match x {
            Expr::Load(LValue::Static(l)) if l.width <= 64 && self.slot_ok(l.slot) => {
                let v = self.load_slot(l.slot);
                self.mask(v, l.width)
            }
            x => self.expr(x),
        }
    }
}

/// Does the list (or a list nested in it) hold an `emit`?
pub(crate) fn emits(body: &[Stmt]) -> bool {
    body.iter().any(|s| match s {
        Stmt::Emit { .. } => true,
        Stmt::If { then, else_, .. } => emits(then) || emits(else_),
        Stmt::Block { body, .. } | Stmt::Loop { body, .. } => emits(body),
        Stmt::Switch { cases, default, .. } => {
            cases.iter().any(|(_, b)| emits(b)) || emits(default)
        }
        _ => false,
    })
}
