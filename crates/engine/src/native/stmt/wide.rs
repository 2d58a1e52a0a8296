//! Assignments to locations wider than 64 bits (128-bit keys, IPv6 addresses) translated inline as
//! word copies, with the closure engine's semantics (`Engine::assign`: the source evaluated as a
//! wide value, truncated to the destination's width, its `words_for(width)` words stored). Covered
//! sources: a static field, metadata or action parameter of any width, a constant, any expression
//! of at most 64 bits native code computes, and a cast that does not sign-extend one of those. Any
//! other source (slices, arithmetic on wide values) leaves the statement to its closure.

use super::Fx;
use crate::bits::{mask64, WORDS};
use cranelift_codegen::ir::{types, InstBuilder, Value};
use p4sec_ir::*;

/// A source's words, least significant first; missing words are zero.
type Words = Vec<Value>;

impl Fx<'_, '_> {
    /// Can `dst = src` (a destination wider than 64 bits) be translated by [`Fx::wide_assign`]?
    pub(crate) fn wide_assignable(&self, dst: &Loc, src: &Expr) -> bool {
        dst.width > 64
            && dst.width <= MAX_WIDTH
            && self.slot_ok(dst.slot + words_for(dst.width) - 1)
            && self.wide_source(src)
    }

    fn wide_source(&self, x: &Expr) -> bool {
        if x.width() <= 64 {
            return self.covered(x);
        }
        match x {
            Expr::Load(LValue::Static(l)) => {
                l.width <= MAX_WIDTH && self.slot_ok(l.slot + words_for(l.width) - 1)
            }
            Expr::Small { .. } | Expr::Const(_) => true,
            Expr::Cast { arg, width, signed } => {
                !(*signed && *width > arg.width()) && self.wide_source(arg)
            }
            _ => false,
        }
    }

    /// `dst = src`, every source word read before any is stored (the caller checked
    /// [`Fx::wide_assignable`]).
    pub(crate) fn wide_assign(&mut self, dst: Loc, src: &Expr) {
        let mut v = self.wide_words(src);
        self.truncate_words(&mut v, dst.width);
        let n = words_for(dst.width) as usize;
        for i in 0..n {
            let w = match v.get(i) {
                Some(&w) => w,
                None => self.konst(0),
            };
            self.store_slot(dst.slot + i as u32, w);
        }
    }

    /// Keeps the words below `width` bits, the top one masked (`bits::truncate`).
    fn truncate_words(&mut self, v: &mut Words, width: u32) {
        v.truncate(words_for(width) as usize);
        let top = width % 64;
        if top != 0 && v.len() == words_for(width) as usize {
            let last = v.len() - 1;
            v[last] = self.b.ins().band_imm_u(v[last], mask64(top) as i64);
        }
    }

    /// The words of a source [`Fx::wide_source`] accepts, as `Engine::eval_wide` computes them.
    fn wide_words(&mut self, x: &Expr) -> Words {
        if x.width() <= 64 {
            return vec![self.expr(x)];
        }
        match x {
            Expr::Load(LValue::Static(l)) => (0..words_for(l.width))
                .map(|i| self.load_slot(l.slot + i))
                .collect(),
            Expr::Small { value, .. } => vec![self.konst(*value)],
            Expr::Const(c) => c
                .words
                .iter()
                .take(WORDS)
                .map(|&w| self.b.ins().iconst(types::I64, w as i64))
                .collect(),
            Expr::Cast { arg, width, .. } => {
                let mut v = self.wide_words(arg);
                self.truncate_words(&mut v, *width);
                v
            }
            _ => unreachable!("wide_source accepted {x:?}"),
        }
    }
}
