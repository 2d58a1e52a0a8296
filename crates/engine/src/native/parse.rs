//! The whole parser as one native function: every state's statements (translated as any native
//! list), its step counted against `error.ParserTimeout`, and its transition (a `Goto`, or a
//! select on up to eight narrow keys with exact, masked or default cases) a compare chain jumping
//! to the next state's code. What the parser's hot loop (`pipeline/parser.rs`) would hand to the
//! general loop (other transitions) returns to Rust with the state and the steps taken. The
//! function's result is a `crate::engine::parse_end` word; the flows of the statements' encoding
//! (`helpers::encode`: exit, reject with an error, a panic) are words of it already.

use super::helpers;
use super::stmt::Fx;
use crate::engine::parse_end::{ACCEPT, ERROR, GENERAL, NO_MATCH, PANIC, TIMEOUT};
use crate::engine::LeanNext;
use crate::load::context::may_fail;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, Block, InstBuilder};
use p4sec_ir::{Next, Transition};

/// The most keys a select translated here may have (the general loop's fast path takes eight).
const MAX_KEYS: usize = 8;

/// `reject` without an error (the hot loop's `u32::MAX`), as an encoded `Flow::Reject`.
const REJECTED: u64 = ERROR | ((u32::MAX as u64) << 3);

// the flows the statements return are words of the parser's end already
const _: () =
    assert!(helpers::EXIT == ACCEPT && helpers::REJECT == ERROR && helpers::PANIC == PANIC);

impl Fx<'_, '_> {
    /// The parser from its start state. `lean`: each state's transition as the hot loop takes it.
    /// `select_cases`: per state, its select's (mask, value) per key and next state, when every
    /// case is exact, masked or default ([`crate::load::compile::Code::select_cases`]).
    pub(crate) fn parser(
        &mut self,
        lean: &[LeanNext],
        select_cases: &[Option<Vec<(Vec<(u64, u64)>, Next)>>],
        max_steps: u32,
    ) {
        let p = self.cx.prog;
        let n = p.parser.states.len().min(lean.len());
        let steps = self.b.declare_var(types::I64);
        let zero = self.konst(0);
        self.b.def_var(steps, zero);
        let states: Vec<Block> = (0..n).map(|_| self.b.create_block()).collect();
        let (accept, reject, no_match) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        let target = |nx: &Next| match nx {
            Next::Accept => accept,
            Next::Reject => reject,
            Next::State(s) => states.get(*s as usize).copied().unwrap_or(no_match),
        };
        self.b.ins().jump(target(&Next::State(p.parser.start)), &[]);
        for (i, &block) in states.iter().enumerate() {
            self.b.switch_to_block(block);
            let s = self.b.use_var(steps);
            let s = self.b.ins().iadd_imm_u(s, 1);
            self.b.def_var(steps, s);
            let over = self
                .b
                .ins()
                .icmp_imm_u(IntCC::UnsignedGreaterThan, s, max_steps as i64);
            let (timeout, run) = (self.b.create_block(), self.b.create_block());
            self.b.ins().brif(over, timeout, &[], run, &[]);
            self.b.switch_to_block(timeout);
            self.ret(TIMEOUT);
            self.b.switch_to_block(run);
            // a break leaving the state's statements ends them (the hot loop goes on to the
            // transition)
            let trans = self.b.create_block();
            let labels = std::mem::take(&mut self.labels);
            let escape = self.escape.replace(trans);
            let ft = self.list(&p.parser.states[i].body);
            self.labels = labels;
            self.escape = escape;
            if ft {
                self.b.ins().jump(trans, &[]);
            }
            self.b.switch_to_block(trans);
            let keys = match &p.parser.states[i].transition {
                Transition::Select { keys, .. } => &keys[..],
                Transition::Goto(_) => &[],
            };
            match &lean[i] {
                LeanNext::Goto(nx) => {
                    self.b.ins().jump(target(nx), &[]);
                }
                LeanNext::SelectOne(_, cases) if keys.len() == 1 => {
                    let k = self.expr(&keys[0]);
                    let cases: Vec<_> = cases
                        .iter()
                        .map(|(m, v, nx)| (vec![(*m, *v)], target(nx)))
                        .collect();
                    self.select(&[k], &cases, no_match);
                }
                LeanNext::SelectTwo(_, _, cases) if keys.len() == 2 => {
                    let k0 = self.expr(&keys[0]);
                    let k1 = self.expr(&keys[1]);
                    let cases: Vec<_> = cases
                        .iter()
                        .map(|([m0, v0, m1, v1], nx)| (vec![(*m0, *v0), (*m1, *v1)], target(nx)))
                        .collect();
                    self.select(&[k0, k1], &cases, no_match);
                }
                // more narrow keys (an IPv4 header's IHL, fragment offset and protocol), every
                // case exact, masked or default: the keys once, then the same compare chain
                LeanNext::General
                    if (3..=MAX_KEYS).contains(&keys.len())
                        && keys
                            .iter()
                            .all(|k| k.width() <= 64 && !may_fail(k) && self.covered(k))
                        && select_cases.get(i).is_some_and(|c| {
                            c.as_ref()
                                .is_some_and(|c| c.iter().all(|(ms, _)| ms.len() == keys.len()))
                        }) =>
                {
                    let ks: Vec<_> = keys.iter().map(|k| self.expr(k)).collect();
                    let cases: Vec<_> = select_cases[i]
                        .iter()
                        .flatten()
                        .map(|(ms, nx)| (ms.clone(), target(nx)))
                        .collect();
                    self.select(&ks, &cases, no_match);
                }
                _ => {
                    self.keep.general += 1;
                    let s = self.b.use_var(steps);
                    let s = self.b.ins().ishl_imm_u(s, 35);
                    let r = self
                        .b
                        .ins()
                        .bor_imm_u(s, (GENERAL | (i as u64) << 3) as i64);
                    self.b.ins().return_(&[r]);
                }
            }
        }
        for (b, code) in [(accept, ACCEPT), (reject, REJECTED), (no_match, NO_MATCH)] {
            self.b.switch_to_block(b);
            self.ret(code);
        }
    }

    /// The first case whose (mask, value) pairs (one per key) match `keys` jumps to its block;
    /// none: `miss`.
    fn select(
        &mut self,
        keys: &[cranelift_codegen::ir::Value],
        cases: &[(Vec<(u64, u64)>, Block)],
        miss: Block,
    ) {
        for (ms, to) in cases {
            let mut conds = vec![];
            for (&k, &(m, v)) in keys.iter().zip(ms) {
                if m == 0 && v == 0 {
                    continue;
                }
                let x = if m == u64::MAX {
                    k
                } else {
                    self.b.ins().band_imm_u(k, m as i64)
                };
                conds.push(self.b.ins().icmp_imm_u(IntCC::Equal, x, v as i64));
            }
            let Some(first) = conds.first().copied() else {
                // a default case: taken
                self.b.ins().jump(*to, &[]);
                return;
            };
            let c = conds[1..]
                .iter()
                .fold(first, |a, &c| self.b.ins().band(a, c));
            let next = self.b.create_block();
            self.b.ins().brif(c, *to, &[], next, &[]);
            self.b.switch_to_block(next);
        }
        self.b.ins().jump(miss, &[]);
    }
}
