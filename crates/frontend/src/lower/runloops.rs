//! `for` loops run at run time (`ir::Stmt::Loop`), for the loops `loops.rs` cannot unroll.
//!
//! `for (init; cond; updates) body` becomes the initializers, then a loop whose body tests the
//! condition (leaving the loop when it is false), runs the loop body in a block `continue` leaves,
//! then runs the updates. The initializers and updates are ordinary statements (declarations,
//! assignments, calls), so a loop variable may be declared before the loop and assigned anywhere.
//!
//! `for (T x in a .. b)` with ends known only at run time evaluates `a` then `b` once, and walks a
//! hidden counter from `a` to `b` (both included, no step past `b`, so `0 .. 255` of a `bit<8>`
//! ends); `x` is assigned the counter at the start of each iteration, so the body may write `x`
//! without changing which iterations run.

use super::env::*;
use super::lowerer::Lowerer;
use crate::ast::{self, BinOp, ExprKind, Span};
use crate::diag::PResult;
use crate::semantic_types::*;
use num_bigint::BigInt;
use num_traits::Zero;
use p4sec_ir as ir;
use std::rc::Rc;

/// A name no P4 program can write (it holds a space), bound in a scope of its own.
fn hidden(name: &str, span: Span) -> ast::Expr {
    ast::Expr {
        kind: ExprKind::Name(ast::Ident {
            name: format!(" {name}"),
            span,
        }),
        span,
    }
}

fn binary(op: BinOp, a: ast::Expr, b: ast::Expr) -> ast::Expr {
    let span = a.span;
    ast::Expr {
        kind: ExprKind::Binary(op, Box::new(a), Box::new(b)),
        span,
    }
}

impl<'t> Lowerer<'t> {
    /// `if (!cond) break` at the top of a run-time loop labelled `label` (nothing for a condition
    /// that is always true).
    fn loop_test(&mut self, scope: &Rc<Scope>, cond: &ast::Expr, label: u32) -> PResult<()> {
        match self.expr(scope, cond, Some(&Ty::Bool))? {
            Val::Const(c, Ty::Bool) => {
                if c.is_zero() {
                    self.emit(ir::Stmt::Break(label));
                }
            }
            v => {
                let (x, t) = self.rvalue(v, Some(&Ty::Bool), cond.span)?;
                if !matches!(t, Ty::Bool) {
                    return Err(crate::diag::Diagnostic::new(
                        cond.span,
                        format!("a loop condition must be a bool, not {t}"),
                    ));
                }
                let not = ir::Expr::Unary {
                    op: ir::UnOp::Not,
                    width: 1,
                    arg: Box::new(x),
                };
                self.emit(ir::Stmt::If {
                    cond: not,
                    then: vec![ir::Stmt::Break(label)],
                    else_: vec![],
                });
            }
        }
        Ok(())
    }

    /// `for (init; cond; update) body` as a run-time loop.
    pub(super) fn run_for(
        &mut self,
        scope: &Rc<Scope>,
        init: &[ast::Stmt],
        cond: Option<&ast::Expr>,
        update: &[ast::Stmt],
        body: &ast::Stmt,
    ) -> PResult<()> {
        let lscope = Scope::child(scope);
        for st in init {
            self.stmt(&lscope, st)?;
        }
        let label = self.label();
        let (_, stmts) = self.capture(|l| {
            if let Some(c) = cond {
                l.loop_test(&lscope, c, label)?;
            }
            l.iteration(&Scope::child(&lscope), body, label)?;
            for u in update {
                l.stmt(&lscope, u)?;
            }
            Ok(())
        })?;
        self.emit(ir::Stmt::Loop { label, body: stmts });
        Ok(())
    }

    /// `for (T x in a .. b) body` as a run-time loop.
    pub(super) fn run_for_range(
        &mut self,
        scope: &Rc<Scope>,
        ty: Option<&ast::Type>,
        var: &ast::Ident,
        (a, b): (&ast::Expr, &ast::Expr),
        body: &ast::Stmt,
    ) -> PResult<()> {
        let declared = match ty {
            Some(t) => Some(self.resolve_type(scope, t)?),
            None => None,
        };
        let known = |t: Option<Ty>| t.filter(|t| !matches!(t, Ty::InfInt));
        let lo = self.expr(scope, a, declared.as_ref())?;
        let hint = declared.clone().or_else(|| known(lo.ty()));
        let hi = self.expr(scope, b, hint.as_ref())?;
        let Some(t) = hint.or_else(|| known(hi.ty())) else {
            return Err(crate::diag::Diagnostic::new(
                var.span,
                format!("give `{}` a type: the range's ends have none", var.name),
            ));
        };
        let lscope = Scope::child(scope);
        // the counter starts at `a`; `b` is evaluated once, after `a`
        let (i, end) = (
            self.alloc(&t, " i", var.span)?,
            self.alloc(&t, " end", var.span)?,
        );
        let lo = self.convert(lo, &t, a.span)?;
        self.assign(&i, lo, a.span)?;
        let hi = self.convert(hi, &t, b.span)?;
        self.assign(&end, hi, b.span)?;
        lscope.define(" i", Binding::Var(i.clone()));
        lscope.define(" end", Binding::Var(end));
        lscope.define(
            " one",
            Binding::Value(Box::new(Val::Const(BigInt::from(1), t.clone()))),
        );
        let x = self.alloc(&t, &var.name, var.span)?;
        let sp = var.span;
        let label = self.label();
        let (_, stmts) = self.capture(|l| {
            l.loop_test(
                &lscope,
                &binary(BinOp::Le, hidden("i", sp), hidden("end", sp)),
                label,
            )?;
            let cur = l.expr(&lscope, &hidden("i", sp), Some(&t))?;
            l.assign(&x, cur, sp)?;
            let iscope = Scope::child(scope);
            iscope.define(&var.name, Binding::Var(x.clone()));
            l.iteration(&iscope, body, label)?;
            // leave at the last value rather than step past it (which could wrap around)
            let last = binary(BinOp::Ne, hidden("i", sp), hidden("end", sp));
            l.loop_test(&lscope, &last, label)?;
            let next = binary(BinOp::Add, hidden("i", sp), hidden("one", sp));
            let v = l.expr(&lscope, &next, Some(&t))?;
            l.assign(&i, v, sp)
        })?;
        self.emit(ir::Stmt::Loop { label, body: stmts });
        Ok(())
    }
}
