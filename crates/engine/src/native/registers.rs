//! Registers and indexed counters from native code: `read`, `write` and `count` with an index and
//! a value the generated code computes, the storage reached through one small helper call each
//! (no closure, no interpreter, no context written back: the helpers touch neither the slots nor
//! the packet). The helpers never panic: an id or index out of range reads 0 and writes nothing.

use super::helpers::Ctx;
use super::stmt::Fx;
use cranelift_codegen::ir::{types, InstBuilder, Value};
use p4sec_ir::*;
use std::sync::atomic::Ordering;

/// Register or counter `id` and an index in one word: the id in the high half, the index in the
/// low half, saturated (every register and counter has fewer than `u32::MAX` cells, so a
/// saturated index is out of range, as the index it stands for).
fn unpack(packed: u64) -> (usize, usize) {
    ((packed >> 32) as usize, (packed & 0xffff_ffff) as usize)
}

/// `reg.read(dst, index)` of a register of at most 64 bits: cell `index`, or 0 out of range.
///
/// # Safety
/// `ctx` is the context of a running native call.
pub(crate) unsafe extern "C" fn np_reg_read(ctx: *mut Ctx, packed: u64, _: u64) -> u64 {
    let (reg, i) = unpack(packed);
    let e = (&*ctx).e;
    match e
        .externs
        .registers
        .get(reg)
        .and_then(|r| r.cells.get(i).filter(|_| i < r.size))
    {
        Some(c) => c.load(Ordering::Relaxed),
        None => 0,
    }
}

/// `reg.write(index, value)` of a register of at most 64 bits: the value masked to the register's
/// width; nothing out of range.
///
/// # Safety
/// As [`np_reg_read`].
pub(crate) unsafe extern "C" fn np_reg_write(ctx: *mut Ctx, packed: u64, v: u64) -> u64 {
    let (reg, i) = unpack(packed);
    let e = (&*ctx).e;
    if let Some(r) = e.externs.registers.get(reg) {
        if let Some(c) = r.cells.get(i).filter(|_| i < r.size) {
            c.store(v & crate::bits::mask64(r.width), Ordering::Relaxed);
        }
    }
    0
}

/// `counter.count(index)`: one packet and the packet's bytes; nothing out of range.
///
/// # Safety
/// As [`np_reg_read`].
pub(crate) unsafe extern "C" fn np_count(ctx: *mut Ctx, packed: u64, _: u64) -> u64 {
    let (c, i) = unpack(packed);
    let ctx = &*ctx;
    if let Some(cell) = ctx.e.externs.counters.get(c).and_then(|c| c.get(i)) {
        let len = (*ctx.w).packet.len as u64;
        cell.0.fetch_add(1, Ordering::Relaxed);
        cell.1.fetch_add(len, Ordering::Relaxed);
    }
    0
}

impl Fx<'_, '_> {
    /// Does [`Fx::registers`] translate `b`: a register of 1 to 64 bits read into a narrow field
    /// or written, an indexed counter counted, with narrow indexes and values native code computes.
    pub(crate) fn registers_ok(&self, b: &Builtin) -> bool {
        let p = self.cx.prog;
        let narrow = |x: &Expr| x.width() <= 64 && self.covered(x);
        let reg = |r: u32| {
            p.registers
                .get(r as usize)
                .is_some_and(|r| (1..=64).contains(&r.width))
        };
        match b {
            Builtin::RegisterRead {
                reg: r,
                dst: LValue::Static(l),
                index,
            } => reg(*r) && l.width > 0 && l.width <= 64 && self.slot_ok(l.slot) && narrow(index),
            Builtin::RegisterWrite {
                reg: r,
                index,
                value,
            } => reg(*r) && narrow(index) && narrow(value),
            Builtin::CounterCount { counter, index } => {
                (*counter as usize) < p.counters.len() && narrow(index)
            }
            _ => false,
        }
    }

    /// The builtin `b` (one [`Fx::registers_ok`] accepts): the index and the value computed here,
    /// the storage through its helper.
    pub(crate) fn registers(&mut self, b: &Builtin) -> Option<bool> {
        if !self.registers_ok(b) {
            return None;
        }
        match b {
            Builtin::RegisterRead {
                reg,
                dst: LValue::Static(l),
                index,
            } => {
                let v = self.state_call(np_reg_read as *const (), *reg, index, None);
                let v = self.mask(v, l.width);
                self.store_slot(l.slot, v);
            }
            Builtin::RegisterWrite { reg, index, value } => {
                let v = self.expr(value);
                self.state_call(np_reg_write as *const (), *reg, index, Some(v));
            }
            Builtin::CounterCount { counter, index } => {
                self.state_call(np_count as *const (), *counter, index, None);
            }
            _ => return None,
        }
        Some(true)
    }

    /// A call of helper `f` with object `id` and `index` packed ([`unpack`]) and `arg`.
    fn state_call(&mut self, f: *const (), id: u32, index: &Expr, arg: Option<Value>) -> Value {
        let i = self.expr(index);
        let cap = self.b.ins().iconst(types::I64, 0xffff_ffff);
        let i = self.b.ins().umin(i, cap);
        let hi = self.b.ins().iconst(types::I64, ((id as u64) << 32) as i64);
        let packed = self.b.ins().bor(hi, i);
        let arg = arg.unwrap_or_else(|| self.b.ins().iconst(types::I64, 0));
        let fp = self.helper(f, f);
        let call = self
            .b
            .ins()
            .call_indirect(self.stmt_sig, fp, &[self.ctx, packed, arg]);
        self.b.inst_results(call)[0]
    }
}
