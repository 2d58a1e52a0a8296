//! Statements: blocks, declarations, assignment, `if`, `switch`, `return`, `exit` and calls as
//! statements.

use super::env::*;
use super::lowerer::{err, Lowerer};
use crate::ast::{self, Span};
use crate::ast::{ExprKind, StmtKind};
use crate::diag::PResult;
use crate::semantic_types::*;
use num_traits::Zero;
use p4sec_ir as ir;
use std::rc::Rc;

impl<'t> Lowerer<'t> {
    pub fn block(&mut self, scope: &Rc<Scope>, b: &ast::Block) -> PResult<()> {
        let inner = Scope::child(scope);
        for s in &b.stmts {
            self.stmt(&inner, s)?;
        }
        Ok(())
    }

    pub fn stmt(&mut self, scope: &Rc<Scope>, s: &ast::Stmt) -> PResult<()> {
        let span = s.span;
        match &s.kind {
            StmtKind::Empty => Ok(()),
            StmtKind::Block(b) => self.block(scope, b),
            StmtKind::Exit => {
                self.emit(ir::Stmt::Exit);
                Ok(())
            }
            StmtKind::Return(e) => {
                let Some((label, ret)) = self.returns.last().cloned() else {
                    return err(span, "`return` outside of a function, action or control");
                };
                match (e, ret) {
                    (Some(e), Some(place)) => {
                        let v = self.expr(scope, e, Some(&place.ty()))?;
                        self.assign(&place, v, e.span)?;
                    }
                    (Some(e), None) => return err(e.span, "this `return` cannot return a value"),
                    (None, Some(_)) => {
                        return err(
                            span,
                            "`return` needs a value in a function that returns one",
                        )
                    }
                    (None, None) => {}
                }
                self.emit(ir::Stmt::Break(label));
                Ok(())
            }
            StmtKind::Var(v) => self.declare_var(scope, v),
            StmtKind::Const(c) => {
                let t = self.resolve_type(scope, &c.ty)?;
                let v = self.expr(scope, &c.value, Some(&t))?;
                let v = self.convert(v, &t, c.value.span)?;
                scope.define(&c.name.name, Binding::Value(Box::new(v)));
                Ok(())
            }
            StmtKind::For {
                init,
                cond,
                update,
                body,
            } => self.for_loop(scope, init, cond.as_ref(), update, body, span),
            StmtKind::ForIn {
                ty,
                var,
                coll,
                body,
            } => self.for_in_loop(scope, ty.as_ref(), var, coll, body, span),
            StmtKind::Break | StmtKind::Continue => {
                let what = if matches!(s.kind, StmtKind::Break) {
                    "break"
                } else {
                    "continue"
                };
                match self.loops.last() {
                    Some(&(brk, cont, depth)) if depth == self.returns.len() => {
                        self.emit(ir::Stmt::Break(if what == "break" { brk } else { cont }));
                        Ok(())
                    }
                    _ => err(span, format!("`{what}` outside of a `for` loop")),
                }
            }
            StmtKind::Assign(lhs, rhs) => self.assign_stmt(scope, lhs, rhs, None),
            StmtKind::OpAssign(op, lhs, rhs) => self.assign_stmt(scope, lhs, rhs, Some(*op)),
            StmtKind::Call(e) => {
                let ExprKind::Call {
                    callee,
                    type_args,
                    args,
                } = &e.kind
                else {
                    return err(span, "expected a call");
                };
                let v = self.call(scope, callee, type_args, args, None, e.span)?;
                if let Val::TableResult(_, hit, run) = v {
                    // `t.apply();` as a statement: nothing reads whether it hit or which action
                    // ran, so the apply does not record them
                    if let Some(ir::Stmt::ApplyTable {
                        hit: h @ Some(_),
                        action_run: r @ Some(_),
                        ..
                    }) = self.out.last_mut().and_then(|b| b.last_mut())
                    {
                        if *h == Some(hit) && *r == Some(run) {
                            (*h, *r) = (None, None);
                        }
                    }
                }
                Ok(())
            }
            StmtKind::If(c, then, else_) => {
                let cv = self.expr(scope, c, Some(&Ty::Bool))?;
                if let Val::Const(k, _) = &cv {
                    // constant condition: lower only the taken branch
                    return if !k.is_zero() {
                        self.stmt(&Scope::child(scope), then)
                    } else if let Some(e) = else_ {
                        self.stmt(&Scope::child(scope), e)
                    } else {
                        Ok(())
                    };
                }
                let (cond, t) = self.rvalue(cv, None, c.span)?;
                if !matches!(t, Ty::Bool) {
                    return err(c.span, format!("condition must be a bool, found {t}"));
                }
                let (_, then_s) = self.capture(|l| l.stmt(&Scope::child(scope), then))?;
                let (_, else_s) = match else_ {
                    Some(e) => self.capture(|l| l.stmt(&Scope::child(scope), e))?,
                    None => ((), vec![]),
                };
                self.emit(ir::Stmt::If {
                    cond,
                    then: then_s,
                    else_: else_s,
                });
                Ok(())
            }
            StmtKind::Switch(e, cases) => self.switch(scope, e, cases, span),
            StmtKind::Decl(d) => match &**d {
                ast::Decl::Instantiation(_) => {
                    err(span, "instantiations are not allowed inside a block body")
                }
                _ => err(span, "this declaration is not allowed inside a block body"),
            },
        }
    }

    /// A local variable (in a block, or among a control's or parser's locals): its storage, its
    /// initializer or (none given) uninitialized storage, its new type's name kept for P4Info, its
    /// name bound in `scope`.
    pub fn declare_var(&mut self, scope: &Rc<Scope>, v: &ast::VarDecl) -> PResult<()> {
        let t = self.resolve_type(scope, &v.ty)?;
        let p = self.alloc(&t, &v.name.name, v.name.span)?;
        if let Some(init) = &v.init {
            let val = self.expr(scope, init, Some(&t))?;
            self.assign(&p, val, init.span)?;
        } else {
            self.uninit(&p);
        }
        if let (Some(n), Place::Scalar(ir::LValue::Static(l), _)) = (self.new_type_name(&v.ty), &p)
        {
            self.var_new_types.insert(l.slot, n);
        }
        scope.define(&v.name.name, Binding::Var(p));
        Ok(())
    }

    /// Uninitialized storage: headers become invalid (as in BMv2); scalars keep what the slot
    /// holds.
    pub fn uninit(&mut self, p: &Place) {
        match p {
            Place::Header { valid, .. } => self.emit(ir::Stmt::Assign {
                dst: valid.clone(),
                src: ir::Expr::konst(1, 0),
            }),
            Place::Struct { fields, .. }
            | Place::Union {
                members: fields, ..
            } => {
                for (_, f) in fields.clone() {
                    self.uninit(&f);
                }
            }
            Place::Stack {
                elems, next_index, ..
            } => {
                for e in elems.clone() {
                    self.uninit(&e);
                }
                self.emit(ir::Stmt::Assign {
                    dst: ir::LValue::Static(*next_index),
                    src: ir::Expr::konst(32, 0),
                });
            }
            Place::Tuple(ps) => {
                for e in ps.clone() {
                    self.uninit(&e);
                }
            }
            _ => {}
        }
    }

    pub(super) fn assign_stmt(
        &mut self,
        scope: &Rc<Scope>,
        lhs: &ast::Expr,
        rhs: &ast::Expr,
        op: Option<ast::BinOp>,
    ) -> PResult<()> {
        // slice targets: x[hi:lo] = v
        if let ExprKind::Slice(base, hi, lo) = &lhs.kind {
            let (p, hi, lo) = self.slice_place(scope, base, hi, lo)?;
            let Place::Scalar(_, t) = &p else {
                return err(lhs.span, "only a bit-string can be sliced");
            };
            let w = t.scalar_width().unwrap_or(0);
            if hi >= w || hi < lo {
                return err(
                    lhs.span,
                    format!("slice [{hi}:{lo}] is outside the {w} bits of {t}"),
                );
            }
            let sw = hi - lo + 1;
            let rv = match op {
                Some(op) => {
                    // the target's current value from the place lowered above: its l-value
                    // evaluated once
                    let cur = self.slice(Val::Place(p.clone()), hi, lo, lhs.span)?;
                    self.binary_with(scope, op, cur, lhs.span, rhs, Some(&Ty::Bit(sw)), rhs.span)?
                }
                None => self.expr(scope, rhs, Some(&Ty::Bit(sw)))?,
            };
            let (v, vt) = self.rvalue(rv, Some(&Ty::Bit(sw)), rhs.span)?;
            if vt.scalar_width() != Some(sw) {
                return err(rhs.span, format!("cannot assign {vt} to a {sw}-bit slice"));
            }
            self.assign_slice(&p, hi, lo, v, rhs.span)?;
            return Ok(());
        }
        let p = self.place(scope, lhs)?;
        let t = p.ty();
        let v = match op {
            // the target's current value from the place: its l-value (`a[f(x)].y`) evaluated once
            Some(op) => self.binary_with(
                scope,
                op,
                Val::Place(p.clone()),
                lhs.span,
                rhs,
                Some(&t),
                rhs.span,
            )?,
            None => self.expr(scope, rhs, Some(&t))?,
        };
        self.assign_whole(&p, v, rhs.span)
    }

    pub(super) fn switch(
        &mut self,
        scope: &Rc<Scope>,
        e: &ast::Expr,
        cases: &[ast::SwitchCase],
        span: Span,
    ) -> PResult<()> {
        let v = self.expr(scope, e, None)?;
        let (key, table): (ir::Expr, Option<Rc<TableInfo>>) = match v {
            Val::TableResult(t, _, run) => (ir::Expr::Load(ir::LValue::Static(run)), Some(t)),
            other => {
                let (x, t) = self.rvalue(other, None, e.span)?;
                if !(matches!(t, Ty::Bit(_) | Ty::Int(_) | Ty::Enum(_) | Ty::Error)) {
                    return err(e.span, format!("cannot switch on a value of type {t}"));
                }
                (x, None)
            }
        };
        let kt = key.width();
        let mut out_cases: Vec<(Vec<ir::Value>, Vec<ir::Stmt>)> = vec![];
        let mut default = None;
        let mut pending: Vec<ir::Value> = vec![];
        let mut pending_default = false;
        for c in cases {
            match &c.label {
                ast::SwitchLabel::Default => pending_default = true,
                ast::SwitchLabel::Expr(le) => {
                    let val = match (&table, &le.kind) {
                        (Some(t), ExprKind::Name(n)) => {
                            match t.actions.iter().find(|(a, _)| *a == n.name) {
                                Some((_, idx)) => ir::Value::new(32, *idx as u64),
                                None => {
                                    return err(
                                        le.span,
                                        format!("`{}` is not an action of this table", n.name),
                                    )
                                }
                            }
                        }
                        (Some(_), _) => {
                            return err(
                                le.span,
                                "a switch on action_run needs action names as labels",
                            )
                        }
                        (None, _) => match self.expr(scope, le, None)? {
                            Val::Const(c, _) => to_value(&c, kt),
                            _ => {
                                return err(le.span, "switch labels must be compile-time constants")
                            }
                        },
                    };
                    pending.push(val);
                }
            }
            if let Some(b) = &c.body {
                let (_, body) = self.capture(|l| l.block(scope, b))?;
                if pending_default {
                    default = Some(body.clone());
                }
                if !pending.is_empty() {
                    out_cases.push((std::mem::take(&mut pending), body));
                }
                pending_default = false;
            }
        }
        if !pending.is_empty() || pending_default {
            // trailing labels without a body: they do nothing
            if !pending.is_empty() {
                out_cases.push((pending, vec![]));
            }
            if pending_default && default.is_none() {
                default = Some(vec![]);
            }
        }
        let _ = span;
        self.emit(ir::Stmt::Switch {
            expr: key,
            cases: out_cases,
            default: default.unwrap_or_default(),
        });
        Ok(())
    }
}

/// Prefix every `exit` in `stmts` (recursively) with `epilogue`.
pub fn exit_with(stmts: &mut [ir::Stmt], epilogue: &[ir::Stmt]) {
    if epilogue.is_empty() {
        return;
    }
    for s in stmts.iter_mut() {
        match s {
            ir::Stmt::Exit => {
                let mut b = epilogue.to_vec();
                b.push(ir::Stmt::Exit);
                *s = ir::Stmt::Block { label: 0, body: b };
            }
            ir::Stmt::If { then, else_, .. } => {
                exit_with(then, epilogue);
                exit_with(else_, epilogue);
            }
            ir::Stmt::Switch { cases, default, .. } => {
                for (_, b) in cases.iter_mut() {
                    exit_with(b, epilogue);
                }
                exit_with(default, epilogue);
            }
            ir::Stmt::Block { body, .. } => exit_with(body, epilogue),
            _ => {}
        }
    }
}
