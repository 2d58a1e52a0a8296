//! Translation of the compute-checksum control: its `update_checksum`s that `load/compile.rs` left
//! to the deparser (`Deferred`: a whole header's checksum, computed from its emitted bytes) become
//! what their closures do, inline: the condition evaluated and, when it holds, the entry's bit set
//! in `Emit::csum_pending`. Its other statements translate as any control's (inline or called
//! back), so the control runs as a native stage of the pass.

use super::helpers::{Ctx, OFF_CSUM_PENDING};
use super::stmt::Fx;
use crate::load::checksums::header_checksum_update;
use crate::load::compile::Code;
use crate::Worker;
use cranelift_codegen::ir::{types, InstBuilder, MemFlagsData};
use p4sec_ir::*;

/// Per statement of the compute control `body`: its bit in `Emit::csum_pending` when
/// `load/compile.rs` deferred it to the deparser (the same choice, checked against
/// `code.deferred`), `None` for a statement that runs as it is. `None` as a whole when the choices
/// do not match `code.deferred` or a deferred condition is wider than a word (the control then
/// stays on its closures).
pub(crate) fn deferred_bits(p: &Program, code: &Code, body: &[Stmt]) -> Option<Vec<Option<u64>>> {
    let mut headers: Vec<usize> = vec![];
    let mut bits = Vec::with_capacity(body.len());
    for (i, s) in body.iter().enumerate() {
        let bit = match header_checksum_update(p, s, &body[i + 1..]) {
            Some((h, _, _)) if headers.len() < 64 && !headers.contains(&h) => {
                let Stmt::Builtin(Builtin::UpdateChecksum {
                    cond,
                    dst: LValue::Static(f),
                    ..
                }) = s
                else {
                    return None;
                };
                let d = code.deferred.get(headers.len())?;
                if d.header != h || d.f_slot != f.slot as usize || cond.width() > 64 {
                    return None;
                }
                headers.push(h);
                Some(1u64 << (headers.len() - 1))
            }
            _ => None,
        };
        bits.push(bit);
    }
    (headers.len() == code.deferred.len()).then_some(bits)
}

impl Fx<'_, '_> {
    /// The compute control's `body`, `bits` as [`deferred_bits`] gives them, then `return Next` if
    /// it falls through.
    pub(crate) fn compute_body(&mut self, body: &[Stmt], bits: &[Option<u64>]) {
        let mut i = 0;
        while i < body.len() {
            if let Some(bit) = bits[i] {
                self.defer_checksum(&body[i], bit);
                i += 1;
                continue;
            }
            // a run of statements that are not deferred: translated as any list
            let j = (i..body.len())
                .find(|&j| bits[j].is_some())
                .unwrap_or(body.len());
            if !self.list(&body[i..j]) {
                // the rest is unreachable (after an exit)
                return;
            }
            i = j;
        }
        self.ret(super::helpers::NEXT);
    }

    /// A deferred `update_checksum` (`s`, bit `bit`): `csum_pending |= bit` when its condition
    /// holds, as its closure does.
    fn defer_checksum(&mut self, s: &Stmt, bit: u64) {
        let Stmt::Builtin(Builtin::UpdateChecksum { cond, .. }) = s else {
            unreachable!("deferred_bits chose an update_checksum");
        };
        let c = self.expr(cond);
        let (set, done) = (self.b.create_block(), self.b.create_block());
        self.b.ins().brif(c, set, &[], done, &[]);
        self.b.switch_to_block(set);
        let flags = MemFlagsData::trusted();
        let w = self.b.ins().load(self.ptr, flags, self.ctx, OFF_W);
        let off = OFF_EMIT + OFF_CSUM_PENDING;
        let pending = self.b.ins().load(types::I64, flags, w, off);
        let pending = self.b.ins().bor_imm_u(pending, bit as i64);
        self.b.ins().store(flags, pending, w, off);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
        self.keep.inline += 1;
        self.keep.weight += 1;
    }
}

/// The context's worker pointer, and the worker's deparser state in it.
const OFF_W: i32 = std::mem::offset_of!(Ctx<'static>, w) as i32;
const OFF_EMIT: i32 = std::mem::offset_of!(Worker, emit) as i32;
