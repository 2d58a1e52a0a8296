//! Actions as tables use them: an action lowered for a table (directional parameters bound by the
//! caller, the others control-plane data), action references in `actions = {...}` and the calls in
//! `default_action` and const entries.

use super::annotations::*;
use super::env::*;
use super::lowerer::{err, Lowerer};
use crate::ast::ExprKind;
use crate::ast::{self, Span};
use crate::diag::PResult;
use crate::semantic_types::*;
use p4sec_ir as ir;
use std::rc::Rc;

impl<'t> Lowerer<'t> {
    /// Lower an action for use by a table (params become control-plane data).
    pub fn table_action(
        &mut self,
        decl: &Rc<ast::ActionDecl>,
        ascope: &Rc<Scope>,
        span: Span,
    ) -> PResult<u32> {
        self.table_action_bound(decl, ascope, None, &[], span)
    }

    /// Lower an action for a table. Directional parameters are bound to `bound` (evaluated in
    /// `caller`) with copy-in/copy-out around the body; the remaining directionless parameters are
    /// control-plane data.
    pub fn table_action_bound(
        &mut self,
        decl: &Rc<ast::ActionDecl>,
        ascope: &Rc<Scope>,
        caller: Option<&Rc<Scope>>,
        bound: &[ast::Argument],
        span: Span,
    ) -> PResult<u32> {
        let key = (Rc::as_ptr(decl) as usize, ascope.id());
        if bound.is_empty() {
            if let Some(i) = self.action_cache.get(&key) {
                return Ok(*i);
            }
        }
        let is_global = ascope.parent.is_none();
        let name = if is_global {
            match annotation_str(&decl.annos, "name") {
                Some(n) => n.trim_start_matches('.').to_string(),
                None => decl.name.name.clone(),
            }
        } else {
            self.cp_name(&decl.annos, &decl.name.name)
        };
        let id = self.p4info_id_of(&decl.annos, 0x01, &name);
        self.note_annos(format!("action {name}"), &decl.annos)?;
        let inner = Scope::child(ascope);
        let mut params = vec![];
        let ndir = decl.params.iter().take_while(|p| p.dir.is_some()).count();
        if bound.len() != ndir {
            return err(span, format!("action `{}` needs {ndir} bound argument(s) for its directional parameters, {} given", decl.name.name, bound.len()));
        }
        let (copy_out, prologue) = if ndir > 0 {
            let caller = caller.cloned().unwrap_or_else(|| ascope.clone());
            self.capture(|l| l.bind_params_pub(&caller, &inner, &decl.params[..ndir], bound, span))?
        } else {
            (vec![], vec![])
        };
        for (i, p) in decl.params.iter().enumerate().skip(ndir) {
            if p.dir.is_some() {
                return err(
                    p.name.span,
                    format!(
                        "directional parameter `{}` must come before the directionless ones",
                        p.name.name
                    ),
                );
            }
            let t = self.resolve_type(ascope, &p.ty)?;
            let place = self.alloc(&t, &p.name.name, p.name.span)?;
            let Place::Scalar(ir::LValue::Static(loc), _) = &place else {
                return err(
                    p.name.span,
                    "action data parameters must be bit-strings, bools or serializable enums",
                );
            };
            let pid = annotation_ints(&p.annos, "id")
                .and_then(|v| v.first().copied())
                .map(|x| x as u32)
                .unwrap_or((i - ndir) as u32 + 1);
            self.note_annos(format!("param {name} {pid}"), &p.annos)?;
            self.note_type_name(format!("param {name} {pid}"), &p.ty);
            self.note_type(&t);
            params.push(ir::Param {
                name: p.name.name.clone(),
                id: pid,
                loc: *loc,
            });
            inner.define(&p.name.name, Binding::Var(place));
        }
        let label = self.label();
        self.returns.push((label, None));
        let saved = self.inline_depth;
        self.in_action += 1;
        let r = self.capture(|l| l.block(&inner, &decl.body));
        self.in_action -= 1;
        self.inline_depth = saved;
        self.returns.pop();
        let (_, mut body) = r?;
        let mut all = prologue;
        let (_, mut epilogue) = self.capture(|l| l.copy_out_pub(copy_out, span))?;
        super::stmt::exit_with(&mut body, &epilogue);
        all.push(ir::Stmt::Block { label, body });
        all.append(&mut epilogue);
        self.actions.push(ir::Action {
            name,
            id,
            params,
            body: all,
        });
        let idx = self.actions.len() as u32 - 1;
        if bound.is_empty() {
            self.action_cache.insert(key, idx);
        }
        Ok(idx)
    }

    pub(super) fn action_ref(
        &mut self,
        scope: &Rc<Scope>,
        e: &ast::Expr,
    ) -> PResult<(String, u32, Vec<ast::Argument>, Rc<ast::ActionDecl>)> {
        let (callee, args) = match &e.kind {
            ExprKind::Call { callee, args, .. } => (&**callee, args.clone()),
            _ => (e, vec![]),
        };
        let (name, b) = match &callee.kind {
            ExprKind::Name(n) => (n.name.clone(), scope.lookup(&n.name)),
            ExprKind::DotName(n) => (n.name.clone(), scope.root_of().lookup(&n.name)),
            _ => return err(e.span, "expected an action name"),
        };
        match b {
            Some(Binding::Action(decl, ascope)) => {
                let ndir = decl.params.iter().take_while(|p| p.dir.is_some()).count();
                let bound: Vec<ast::Argument> = args.iter().take(ndir).cloned().collect();
                let idx = self.table_action_bound(&decl, &ascope, Some(scope), &bound, e.span)?;
                Ok((name, idx, args, decl))
            }
            _ => err(callee.span, format!("`{name}` is not an action")),
        }
    }

    pub(super) fn action_call(
        &mut self,
        scope: &Rc<Scope>,
        e: &ast::Expr,
        table: &ir::Table,
        names: &[(String, u32)],
    ) -> PResult<ir::ActionCall> {
        let (callee, args) = match &e.kind {
            ExprKind::Call { callee, args, .. } => (&**callee, args.clone()),
            _ => (e, vec![]),
        };
        let name = match &callee.kind {
            ExprKind::Name(n) | ExprKind::DotName(n) => n.name.clone(),
            _ => return err(e.span, "expected an action name"),
        };
        let Some(&(_, idx)) = names.iter().find(|(n, _)| *n == name) else {
            return err(
                e.span,
                format!(
                    "action `{name}` is not in the actions of table `{}`",
                    table.name
                ),
            );
        };
        let decl = match scope
            .lookup(&name)
            .or_else(|| scope.root_of().lookup(&name))
        {
            Some(Binding::Action(d, _)) => d,
            _ => return err(callee.span, format!("`{name}` is not an action")),
        };
        let ndir = decl.params.iter().take_while(|p| p.dir.is_some()).count();
        let n = decl.params.len();
        if args.len() != n {
            return err(
                e.span,
                format!("action `{name}` takes {n} arguments, {} given", args.len()),
            );
        }
        let mut vals = vec![];
        for (k, (p, a)) in self.actions[idx as usize]
            .params
            .clone()
            .iter()
            .zip(args.iter().skip(ndir))
            .enumerate()
        {
            let t = self.resolve_type(scope, &decl.params[ndir + k].ty)?;
            match self.expr(scope, &a.value, Some(&t))? {
                Val::Const(c, _) => vals.push(to_value(&c, p.loc.width)),
                _ => {
                    return err(
                        a.value.span,
                        "action arguments in a table must be compile-time constants",
                    )
                }
            }
        }
        Ok(ir::ActionCall {
            action: idx,
            args: vals,
        })
    }
}
