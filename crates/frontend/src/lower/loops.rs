//! `for` loops (P4_16 1.2.5). A loop whose iterations are known at compile time is unrolled: the
//! three-clause form whose loop variables are declared in the header with compile-time values,
//! advanced by compile-time updates and not written by the body, and the `for`-in form over a
//! range `a .. b` with compile-time ends (both included), a header stack or a list. Each unrolled
//! iteration is a labelled block (`continue` leaves it), the whole loop another (`break` leaves
//! it). Every other loop (a condition known only at run time, a variable declared before the loop,
//! assigned in the body or advanced by a run-time value, run-time range ends, more than
//! `MAX_ITERATIONS` iterations) becomes a run-time `ir::Stmt::Loop` (`runloops.rs`), which the
//! engine bounds per packet. Only when that fails too (a body that needs the variable as a
//! constant) is a loop with a run-time condition unrolled, the condition tested before each
//! iteration, until the loop variables repeat a state (a `bit<8>` counter: at most 256).

use super::env::*;
use super::lowerer::{err, Lowerer};
use crate::ast::{self, ExprKind, ForInColl, Span, StmtKind};
use crate::diag::PResult;
use crate::semantic_types::*;
use num_bigint::BigInt;
use num_traits::Zero;
use p4sec_ir as ir;
use std::rc::Rc;

/// The most iterations one loop may unroll to.
const MAX_ITERATIONS: u32 = 4096;

impl<'t> Lowerer<'t> {
    /// `for (init; cond; update) body`: unrolled when it can be, else a run-time loop.
    pub(super) fn for_loop(
        &mut self,
        scope: &Rc<Scope>,
        init: &[ast::Stmt],
        cond: Option<&ast::Expr>,
        update: &[ast::Stmt],
        body: &ast::Stmt,
        span: Span,
    ) -> PResult<()> {
        // a loop whose iterations are all known at compile time is unrolled; one whose condition
        // is known only at run time runs as a loop (unrolled, a `bit<8>` counter would copy the body
        // 256 times, and nested loops multiply); unrolled with run-time tests only when its body
        // needs the loop variable as a constant (`x[i:i]`)
        match self.capture(|l| l.unroll_for(scope, init, cond, update, body, span, true)) {
            Ok(((), stmts)) => {
                stmts.into_iter().for_each(|s| self.emit(s));
                Ok(())
            }
            Err(_) => match self.capture(|l| l.run_for(scope, init, cond, update, body)) {
                Ok(((), stmts)) => {
                    stmts.into_iter().for_each(|s| self.emit(s));
                    Ok(())
                }
                Err(e) => match self
                    .capture(|l| l.unroll_for(scope, init, cond, update, body, span, false))
                {
                    Ok(((), stmts)) => {
                        stmts.into_iter().for_each(|s| self.emit(s));
                        Ok(())
                    }
                    Err(_) => Err(e),
                },
            },
        }
    }

    /// The unrolled form of a three-clause loop (an error when it cannot be unrolled).
    /// With `all_known`, a condition known only at run time is an error too.
    #[allow(clippy::too_many_arguments)]
    fn unroll_for(
        &mut self,
        scope: &Rc<Scope>,
        init: &[ast::Stmt],
        cond: Option<&ast::Expr>,
        update: &[ast::Stmt],
        body: &ast::Stmt,
        span: Span,
        all_known: bool,
    ) -> PResult<()> {
        // the loop variables and their current compile-time values
        let mut vars: Vec<(String, Ty, Val)> = vec![];
        let lscope = Scope::child(scope);
        for st in init {
            let StmtKind::Var(v) = &st.kind else {
                return err(st.span, "p4sec unrolls `for` loops at compile time: a loop initializer must declare the loop variable (`bit<8> i = 0`)");
            };
            let t = self.resolve_type(&lscope, &v.ty)?;
            let Some(e) = &v.init else {
                return err(st.span, "the loop variable needs an initial value");
            };
            let val = self.expr(&lscope, e, Some(&t))?;
            let val = self.convert(val, &t, e.span)?;
            if !matches!(val, Val::Const(..)) {
                return err(e.span, format!("p4sec unrolls `for` loops at compile time: the initial value of `{}` must be known at compile time", v.name.name));
            }
            lscope.define(&v.name.name, Binding::Value(Box::new(val.clone())));
            vars.push((v.name.name.clone(), t, val));
        }
        let Some(cond) = cond else {
            return err(span, "p4sec unrolls `for` loops at compile time: a loop without a condition cannot be unrolled");
        };
        let brk = self.label();
        let (_, stmts) = self.capture(|l| {
            let mut n = 0;
            let mut seen = std::collections::HashSet::new();
            loop {
                let iscope = Scope::child(scope);
                for (name, _, val) in &vars {
                    iscope.define(name, Binding::Value(Box::new(val.clone())));
                }
                let state: Vec<BigInt> = vars.iter().map(|(_, _, v)| if let Val::Const(c, _) = v { c.clone() } else { BigInt::zero() }).collect();
                if !seen.insert(state) {
                    // the loop variables came back to values they had: the loop never ends unless
                    // its run-time condition fails, which the test emitted for those values already
                    // covers
                    break;
                }
                match l.expr(&iscope, cond, Some(&Ty::Bool))? {
                    Val::Const(c, Ty::Bool) => {
                        if c.is_zero() {
                            break;
                        }
                    }
                    _ if all_known => {
                        return err(cond.span, "the loop condition is known only at run time");
                    }
                    v => {
                        // a run-time condition (`i < hdr.n`): tested before each unrolled iteration
                        let (x, t) = l.rvalue(v, Some(&Ty::Bool), cond.span)?;
                        if !matches!(t, Ty::Bool) {
                            return err(cond.span, format!("a loop condition must be a bool, not {t}"));
                        }
                        let not = ir::Expr::Unary { op: ir::UnOp::Not, width: 1, arg: Box::new(x) };
                        l.emit(ir::Stmt::If { cond: not, then: vec![ir::Stmt::Break(brk)], else_: vec![] });
                    }
                }
                n += 1;
                if n > MAX_ITERATIONS {
                    return err(span, format!("p4sec unrolls `for` loops at compile time: this loop runs more than {MAX_ITERATIONS} times"));
                }
                l.iteration(&iscope, body, brk)?;
                for u in update {
                    let (target, rhs) = match &u.kind {
                        StmtKind::Assign(ast::Expr { kind: ExprKind::Name(n), .. }, rhs) => (n, rhs.clone()),
                        StmtKind::OpAssign(op, lhs @ ast::Expr { kind: ExprKind::Name(n), .. }, rhs) => {
                            (n, ast::Expr { kind: ExprKind::Binary(*op, Box::new(lhs.clone()), Box::new(rhs.clone())), span: u.span })
                        }
                        _ => return err(u.span, "p4sec unrolls `for` loops at compile time: a loop update must assign a loop variable"),
                    };
                    let Some(k) = vars.iter().position(|(name, _, _)| *name == target.name) else {
                        return err(
                            target.span,
                            format!("p4sec unrolls `for` loops at compile time: `{}` is not a variable declared in the loop header", target.name),
                        );
                    };
                    let t = vars[k].1.clone();
                    let v = l.expr(&iscope, &rhs, Some(&t))?;
                    let v = l.convert(v, &t, rhs.span)?;
                    if !matches!(v, Val::Const(..)) {
                        return err(
                            rhs.span,
                            format!("p4sec unrolls `for` loops at compile time: the new value of `{}` must be known at compile time", target.name),
                        );
                    }
                    // later updates of the same header see the new value
                    iscope.define(&target.name, Binding::Value(Box::new(v.clone())));
                    vars[k].2 = v;
                }
            }
            Ok(())
        })?;
        self.emit(ir::Stmt::Block {
            label: brk,
            body: stmts,
        });
        Ok(())
    }

    /// `for (T x in coll) body`: unrolled when its collection is known at compile time (the loop
    /// variable a copy when the body writes it), else a run-time loop over the range.
    pub(super) fn for_in_loop(
        &mut self,
        scope: &Rc<Scope>,
        ty: Option<&ast::Type>,
        var: &ast::Ident,
        coll: &ForInColl,
        body: &ast::Stmt,
        span: Span,
    ) -> PResult<()> {
        let mut last = None;
        for copy in [false, true] {
            match self.capture(|l| l.unroll_for_in(scope, ty, var, coll, body, span, copy)) {
                Ok(((), stmts)) => {
                    stmts.into_iter().for_each(|s| self.emit(s));
                    return Ok(());
                }
                Err(e) => last = Some(e),
            }
        }
        match coll {
            ForInColl::Range(a, b) => self.run_for_range(scope, ty, var, (a, b), body),
            ForInColl::Expr(_) => Err(last.expect("an unrolling attempt ran")),
        }
    }

    /// The unrolled form of a `for`-in loop; with `copy`, the loop variable is a local assigned
    /// each element even when the element is a compile-time value (so the body may write it).
    #[allow(clippy::too_many_arguments)]
    fn unroll_for_in(
        &mut self,
        scope: &Rc<Scope>,
        ty: Option<&ast::Type>,
        var: &ast::Ident,
        coll: &ForInColl,
        body: &ast::Stmt,
        span: Span,
        copy: bool,
    ) -> PResult<()> {
        let declared = match ty {
            Some(t) => Some(self.resolve_type(scope, t)?),
            None => None,
        };
        // the values the loop variable takes, each a compile-time constant or a place to copy from
        let items: Vec<Val> = match coll {
            ForInColl::Range(a, b) => {
                let lo = self.expr(scope, a, declared.as_ref())?;
                let t = declared
                    .clone()
                    .or_else(|| lo.ty().filter(|t| !matches!(t, Ty::InfInt)))
                    .unwrap_or(Ty::InfInt);
                let hi = self.expr(scope, b, Some(&t))?;
                let (Val::Const(lo, _), Val::Const(hi, _)) =
                    (self.convert(lo, &t, a.span)?, self.convert(hi, &t, b.span)?)
                else {
                    return err(span, "p4sec unrolls `for` loops at compile time: the ends of the range must be known at compile time");
                };
                if hi.clone() - lo.clone() >= BigInt::from(MAX_ITERATIONS) {
                    return err(span, format!("p4sec unrolls `for` loops at compile time: this loop runs more than {MAX_ITERATIONS} times"));
                }
                let mut v = vec![];
                let mut i = lo;
                while i <= hi {
                    v.push(Val::Const(i.clone(), t.clone()));
                    i += 1;
                }
                v
            }
            ForInColl::Expr(e) => match self.expr(scope, e, None)? {
                Val::Place(Place::Stack { elems, .. }) => {
                    elems.into_iter().map(Val::Place).collect()
                }
                Val::List(vs) => vs,
                _ => {
                    return err(
                        e.span,
                        "a `for`-in loop runs over a range `a .. b`, a header stack or a list",
                    )
                }
            },
        };
        let brk = self.label();
        // a loop variable that holds a run-time value: one local, the element copied in each
        // iteration
        let mut local: Option<Place> = None;
        let (_, stmts) = self.capture(|l| {
            for item in items {
                let iscope = Scope::child(scope);
                match item {
                    Val::Const(c, t) if !copy => {
                        let t = declared.clone().unwrap_or(t);
                        let v = l.convert(Val::Const(c, Ty::InfInt), &t, var.span)?;
                        iscope.define(&var.name, Binding::Value(Box::new(v)));
                    }
                    other => {
                        let other = match other {
                            Val::Const(c, t) => {
                                let t = declared.clone().unwrap_or(t);
                                l.convert(Val::Const(c, Ty::InfInt), &t, var.span)?
                            }
                            v => v,
                        };
                        let t = match (&declared, other.ty()) {
                            (Some(t), _) => t.clone(),
                            (None, Some(t)) => t,
                            (None, None) => {
                                return err(
                                    var.span,
                                    format!("give `{}` a type: the elements have none", var.name),
                                )
                            }
                        };
                        let p = match &local {
                            Some(p) => p.clone(),
                            None => {
                                let p = l.alloc(&t, &var.name, var.span)?;
                                local = Some(p.clone());
                                p
                            }
                        };
                        l.assign(&p, other, var.span)?;
                        iscope.define(&var.name, Binding::Var(p));
                    }
                }
                l.iteration(&iscope, body, brk)?;
            }
            Ok(())
        })?;
        self.emit(ir::Stmt::Block {
            label: brk,
            body: stmts,
        });
        Ok(())
    }

    /// One unrolled iteration: the body in a block `continue` leaves, `break` leaving `brk`.
    pub(super) fn iteration(
        &mut self,
        scope: &Rc<Scope>,
        body: &ast::Stmt,
        brk: u32,
    ) -> PResult<()> {
        let cont = self.label();
        self.loops.push((brk, cont, self.returns.len()));
        let r = self.capture(|l| l.stmt(scope, body));
        self.loops.pop();
        let (_, b) = r?;
        self.emit(ir::Stmt::Block {
            label: cont,
            body: b,
        });
        Ok(())
    }
}
