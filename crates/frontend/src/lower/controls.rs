//! Control blocks: a top-level control's locals and apply body, and `c.apply(args)` of a control
//! instance inlined into its caller (parameters copied in and out, `exit` included).

use super::annotations::*;
use super::env::*;
use super::lowerer::{err, Lowerer};
use crate::ast::{self, Span};
use crate::diag::PResult;
use crate::semantic_types::*;
use p4sec_ir as ir;
use std::rc::Rc;

impl<'t> Lowerer<'t> {
    /// Elaborate a top-level control bound directly to the global storage.
    pub(super) fn top_control(
        &mut self,
        inst: &Rc<Instance>,
        binds: Vec<Binding>,
        span: Span,
    ) -> PResult<()> {
        let Instance::Control { decl, scope, .. } = &**inst else {
            unreachable!()
        };
        if decl.sig.params.len() != binds.len() {
            return err(
                decl.sig.name.span,
                format!(
                    "control `{}` must have {} parameters for this V1Switch position",
                    decl.sig.name.name,
                    binds.len()
                ),
            );
        }
        let cscope = Scope::child(scope);
        for (p, b) in decl.sig.params.iter().zip(binds) {
            cscope.define(&p.name.name, b);
        }
        self.path = vec![decl.sig.name.name.clone()];
        if let Some(n) = annotation_str(&decl.sig.annos, "name") {
            self.path = vec![n.trim_start_matches('.').to_string()];
        }
        let r = self.control_locals_and_apply(decl, &cscope, span);
        self.path.clear();
        r
    }

    pub(super) fn control_locals_and_apply(
        &mut self,
        decl: &Rc<ast::ControlDecl>,
        cscope: &Rc<Scope>,
        span: Span,
    ) -> PResult<()> {
        let (_, init) = self.capture(|l| {
            for d in &decl.locals {
                l.control_local(cscope, d, decl)?;
            }
            Ok(())
        })?;
        for s in init {
            self.emit(s);
        }
        self.apply_body(decl, cscope, span)
    }

    pub(super) fn control_local(
        &mut self,
        cscope: &Rc<Scope>,
        d: &ast::Decl,
        decl: &ast::ControlDecl,
    ) -> PResult<()> {
        if let ast::Decl::Instantiation(i) = d {
            let _ = decl;
            let inst = self.instantiate(
                cscope,
                &i.ty,
                &i.args,
                &i.name.name,
                &i.annos,
                i.name.span,
                None,
            )?;
            cscope.define(&i.name.name, Binding::Instance(inst));
            return Ok(());
        }
        self.declare(cscope, d, false)
    }

    pub(super) fn apply_body(
        &mut self,
        decl: &ast::ControlDecl,
        cscope: &Rc<Scope>,
        _span: Span,
    ) -> PResult<()> {
        let label = self.label();
        self.returns.push((label, None));
        let r = self.capture(|l| l.block(cscope, &decl.apply));
        self.returns.pop();
        let (_, body) = r?;
        self.emit(ir::Stmt::Block { label, body });
        Ok(())
    }

    /// `c.apply(args)` of a control instance declared inside another control.
    pub fn apply_control(
        &mut self,
        caller: &Rc<Scope>,
        inst: &Rc<Instance>,
        args: &[ast::Argument],
        span: Span,
    ) -> PResult<()> {
        let Instance::Control {
            decl,
            scope,
            name,
            state,
        } = &**inst
        else {
            unreachable!()
        };
        self.enter_inline_ctl(span)?;
        let ordered: Vec<Option<ast::Expr>> = self
            .order_args(&decl.sig.params, args, span)?
            .into_iter()
            .map(|o| o.cloned())
            .collect();
        let first = state.borrow().is_none();
        let saved_path = self.path.clone();
        self.path.push(name.clone());
        if first {
            // decide aliasing: a single static place per directional parameter
            let cscope = Scope::child(scope);
            let mut params = vec![];
            for (p, a) in decl.sig.params.iter().zip(ordered.iter()) {
                let t = self.resolve_type(&cscope, &p.ty)?;
                if p.dir.is_none() && matches!(t, Ty::Extern(..)) {
                    // a parameter of extern type names the caller's instance
                    let inst = self.extern_argument(caller, p, a.as_ref(), &t, span)?;
                    cscope.define(&p.name.name, Binding::Instance(inst));
                    continue;
                }
                let dir = p.dir.unwrap_or(ast::Direction::In);
                let place = self.alloc(&t, &format!("{name}.{}", p.name.name), p.name.span)?;
                let _ = a;
                cscope.define(&p.name.name, Binding::Var(place.clone()));
                params.push((dir, place));
            }
            // locals (tables, actions, instances) once per instance
            let (_, init) = self.capture(|l| {
                for d in &decl.locals {
                    l.control_local(&cscope, d, decl)?;
                }
                Ok(())
            })?;
            *state.borrow_mut() = Some(ControlState {
                scope: cscope.clone(),
                params,
                aliased: false,
            });
            self.copy_in_and_run(caller, decl, &cscope, &ordered, init, span)?;
        } else {
            let cscope = state.borrow().as_ref().unwrap().scope.clone();
            for (p, a) in decl.sig.params.iter().zip(ordered.iter()) {
                if let Some(Binding::Instance(first)) =
                    cscope.names.borrow().get(&p.name.name).cloned()
                {
                    let t = self.resolve_type(&cscope, &p.ty)?;
                    let inst = self.extern_argument(caller, p, a.as_ref(), &t, span)?;
                    if !Rc::ptr_eq(&first, &inst) {
                        return err(a.as_ref().map(|a| a.span).unwrap_or(span), format!("control instance `{name}` is applied with another extern instance for `{}` than at its first apply, which p4sec does not support", p.name.name));
                    }
                }
            }
            self.copy_in_and_run(caller, decl, &cscope, &ordered, vec![], span)?;
        }
        self.path = saved_path;
        self.inline_depth -= 1;
        Ok(())
    }

    /// The extern instance passed for the directionless parameter `p` of extern type `t`.
    fn extern_argument(
        &mut self,
        caller: &Rc<Scope>,
        p: &ast::Param,
        a: Option<&ast::Expr>,
        t: &Ty,
        span: Span,
    ) -> PResult<Rc<Instance>> {
        let Some(a) = a else {
            return err(span, format!("missing argument for `{}`", p.name.name));
        };
        match self.expr(caller, a, None)? {
            Val::Binding(Binding::Instance(i)) if matches!(&*i, Instance::Extern { .. }) => Ok(i),
            _ => err(
                a.span,
                format!(
                    "the argument for `{}` must be an extern instance of type {t}",
                    p.name.name
                ),
            ),
        }
    }

    pub(super) fn enter_inline_ctl(&mut self, span: Span) -> PResult<()> {
        self.inline_depth += 1;
        if self.inline_depth > 64 {
            return err(span, "control applications nest too deeply");
        }
        Ok(())
    }

    pub(super) fn copy_in_and_run(
        &mut self,
        caller: &Rc<Scope>,
        decl: &Rc<ast::ControlDecl>,
        cscope: &Rc<Scope>,
        ordered: &[Option<ast::Expr>],
        init: Vec<ir::Stmt>,
        span: Span,
    ) -> PResult<()> {
        let mut outs = vec![];
        for (p, a) in decl.sig.params.iter().zip(ordered.iter()) {
            let Some(Binding::Var(local)) = cscope.names.borrow().get(&p.name.name).cloned() else {
                continue;
            };
            let Some(a) = a else {
                return err(span, format!("missing argument for `{}`", p.name.name));
            };
            match p.dir {
                Some(ast::Direction::Out) | Some(ast::Direction::InOut) => {
                    let target = self.place(caller, a)?;
                    if p.dir == Some(ast::Direction::InOut) {
                        self.assign(&local, Val::Place(target.clone()), a.span)?;
                    } else {
                        self.uninit(&local);
                    }
                    outs.push((target, local));
                }
                _ => {
                    let v = self.expr(caller, a, Some(&local.ty()))?;
                    self.assign(&local, v, a.span)?;
                }
            }
        }
        for s in init {
            self.emit(s);
        }
        let (_, mut body) = self.capture(|l| l.apply_body(decl, cscope, span))?;
        let (_, epilogue) = self.capture(|l| {
            for (target, local) in outs {
                l.assign(&target, Val::Place(local), span)?;
            }
            Ok(())
        })?;
        // `exit` in the applied control still copies its out/inout parameters back
        super::stmt::exit_with(&mut body, &epilogue);
        for st in body.into_iter().chain(epilogue) {
            self.emit(st);
        }
        Ok(())
    }
}
