//! Lowering parser instances: states, extractions, sub-parser calls and transitions.

use super::env::*;
use super::lowerer::{err, Lowerer};
use crate::ast::ExprKind;
use crate::ast::{self, Span};
use crate::diag::{Diagnostic, PResult};
use crate::semantic_types::*;
use p4sec_ir as ir;
use std::collections::HashMap;
use std::rc::Rc;

impl<'t> Lowerer<'t> {
    // ---------------------------------------------------------------- parsers

    /// Lower a parser instance into `self.pstates`; returns its entry state. `binds` are the
    /// parameter bindings.
    pub(super) fn lower_parser_instance(
        &mut self,
        inst: &Rc<Instance>,
        binds: Vec<Binding>,
        accept: ir::Next,
        init: Vec<ir::Stmt>,
        span: Span,
    ) -> PResult<u32> {
        let Instance::Parser { decl, scope, name } = &**inst else {
            return err(span, "expected a parser instance");
        };
        self.enter_inline_ctl(span)?;
        let pscope = Scope::child(scope);
        if decl.sig.params.len() != binds.len() {
            return err(
                span,
                format!(
                    "parser `{}` takes {} arguments, {} given",
                    decl.sig.name.name,
                    decl.sig.params.len(),
                    binds.len()
                ),
            );
        }
        for (p, b) in decl.sig.params.iter().zip(binds) {
            pscope.define(&p.name.name, b);
        }
        // reserve states
        let mut index = HashMap::new();
        for s in &decl.states {
            let i = self.pstates.len() as u32;
            self.pstates.push(ir::ParserState {
                name: format!("{name}.{}", s.name.name),
                body: vec![],
                transition: ir::Transition::Goto(ir::Next::Reject),
            });
            if index.insert(s.name.name.clone(), i).is_some() {
                return err(
                    s.name.span,
                    format!("state `{}` is declared twice", s.name.name),
                );
            }
        }
        let Some(&start) = index.get("start") else {
            return err(
                decl.sig.name.span,
                format!("parser `{}` has no `start` state", decl.sig.name.name),
            );
        };
        let entry = self.pstates.len() as u32;
        self.pstates.push(ir::ParserState {
            name: format!("{name}.$entry"),
            body: vec![],
            transition: ir::Transition::Goto(ir::Next::State(start)),
        });
        // the parser's local objects are named after it in the P4Info (`P.vs`), as the reference
        // compiler names them
        let saved_path = std::mem::replace(&mut self.path, vec![name.clone()]);
        let locals = self.capture(|l| {
            for d in &decl.locals {
                if let ast::Decl::Instantiation(i) = d {
                    let inst = l.instantiate(
                        &pscope,
                        &i.ty,
                        &i.args,
                        &i.name.name,
                        &i.annos,
                        i.name.span,
                        None,
                    )?;
                    pscope.define(&i.name.name, Binding::Instance(inst));
                } else {
                    l.declare(&pscope, d, false)?;
                }
            }
            Ok(())
        });
        self.path = saved_path;
        let (_, mut locals) = locals?;
        let mut body = init;
        body.append(&mut locals);
        self.pstates[entry as usize].body = body;
        for s in &decl.states {
            self.lower_state(&pscope, s, &index, &accept)?;
        }
        self.inline_depth -= 1;
        Ok(entry)
    }

    pub(super) fn lower_state(
        &mut self,
        pscope: &Rc<Scope>,
        s: &ast::ParserState,
        index: &HashMap<String, u32>,
        accept: &ir::Next,
    ) -> PResult<()> {
        let sscope = Scope::child(pscope);
        let mut cur = index[&s.name.name];
        self.out.push(vec![]);
        let mut k = 0;
        for st in &s.body {
            if let Some((inst, args)) = self.subparser_call(&sscope, st) {
                // split the state around the sub-parser
                k += 1;
                let cont = self.pstates.len() as u32;
                self.pstates.push(ir::ParserState {
                    name: format!("{}.$cont{k}", self.pstates[cur as usize].name),
                    body: vec![],
                    transition: ir::Transition::Goto(ir::Next::Reject),
                });
                let Instance::Parser {
                    decl,
                    scope: pdecl_scope,
                    ..
                } = &*inst
                else {
                    unreachable!()
                };
                let ordered: Vec<Option<ast::Expr>> = self
                    .order_args(&decl.sig.params, &args, st.span)?
                    .into_iter()
                    .map(|o| o.cloned())
                    .collect();
                let mut binds = vec![];
                let mut outs = vec![];
                let mut init = vec![];
                for (p, a) in decl.sig.params.iter().zip(ordered.iter()) {
                    let a = a.as_ref().ok_or_else(|| {
                        Diagnostic::new(st.span, format!("missing argument for `{}`", p.name.name))
                    })?;
                    match self.expr(&sscope, a, None)? {
                        Val::Binding(b @ (Binding::PacketIn | Binding::PacketOut)) => binds.push(b),
                        Val::Place(place) if place.is_static() => {
                            if p.dir == Some(ast::Direction::Out) {
                                let (_, mut s) = self.capture(|l| {
                                    l.uninit(&place);
                                    Ok(())
                                })?;
                                init.append(&mut s);
                            }
                            binds.push(Binding::Var(place));
                        }
                        v => {
                            let t = match v.ty() {
                                // an untyped constant (`in bit<8> y = 5`) takes the parameter's
                                // type
                                Some(Ty::InfInt) => self.resolve_type(pdecl_scope, &p.ty)?,
                                Some(t) => t,
                                None => return err(a.span, format!("the argument for parameter `{}` of the sub-parser has no value type (a type, an instance or a method cannot be passed here)", p.name.name)),
                            };
                            let local = self.alloc(&t, &p.name.name, a.span)?;
                            let (_, mut s) = self.capture(|l| l.assign(&local, v, a.span))?;
                            init.append(&mut s);
                            if let Val::Place(target) = self.expr(&sscope, a, None)? {
                                outs.push((target, local.clone()));
                            }
                            binds.push(Binding::Var(local));
                        }
                    }
                }
                let sub_entry =
                    self.lower_parser_instance(&inst, binds, ir::Next::State(cont), init, st.span)?;
                let body = self.out.pop().unwrap_or_default();
                self.pstates[cur as usize].body = body;
                self.pstates[cur as usize].transition =
                    ir::Transition::Goto(ir::Next::State(sub_entry));
                cur = cont;
                self.out.push(vec![]);
                for (target, local) in outs {
                    self.assign(&target, Val::Place(local), st.span)?;
                }
                continue;
            }
            if let ast::StmtKind::Exit = st.kind {
                self.out.pop();
                return err(st.span, "`exit` is not allowed in a parser");
            }
            if let Err(e) = self.stmt(&sscope, st) {
                self.out.pop();
                return Err(e);
            }
        }
        let tr = match &s.transition {
            None => Ok(ir::Transition::Goto(ir::Next::Reject)),
            Some(t) => self.transition(&sscope, t, index, accept),
        };
        let body = self.out.pop().unwrap_or_default();
        let tr = tr?;
        self.pstates[cur as usize].body = body;
        self.pstates[cur as usize].transition = tr;
        Ok(())
    }

    pub(super) fn subparser_call(
        &mut self,
        scope: &Rc<Scope>,
        st: &ast::Stmt,
    ) -> Option<(Rc<Instance>, Vec<ast::Argument>)> {
        let ast::StmtKind::Call(e) = &st.kind else {
            return None;
        };
        let ExprKind::Call { callee, args, .. } = &e.kind else {
            return None;
        };
        let ExprKind::Member(base, m) = &callee.kind else {
            return None;
        };
        if m.name != "apply" {
            return None;
        }
        let ExprKind::Name(n) = &base.kind else {
            return None;
        };
        match scope.lookup(&n.name) {
            Some(Binding::Instance(i)) if matches!(&*i, Instance::Parser { .. }) => {
                Some((i, args.clone()))
            }
            // direct type invocation `P.apply(...)`: an instance of its own for this call site
            // (named as the type)
            Some(Binding::ParserDecl(decl, dscope)) if decl.ctor_params.is_empty() => {
                let name = decl.sig.name.name.clone();
                Some((
                    Rc::new(Instance::Parser {
                        decl,
                        scope: Scope::child(&dscope),
                        name,
                    }),
                    args.clone(),
                ))
            }
            _ => None,
        }
    }

    pub(super) fn next_of(
        &self,
        id: &ast::Ident,
        index: &HashMap<String, u32>,
        accept: &ir::Next,
    ) -> PResult<ir::Next> {
        match id.name.as_str() {
            "accept" => Ok(accept.clone()),
            "reject" => Ok(ir::Next::Reject),
            n => index
                .get(n)
                .map(|i| ir::Next::State(*i))
                .ok_or_else(|| Diagnostic::new(id.span, format!("no state named `{n}`"))),
        }
    }

    pub(super) fn transition(
        &mut self,
        scope: &Rc<Scope>,
        t: &ast::Transition,
        index: &HashMap<String, u32>,
        accept: &ir::Next,
    ) -> PResult<ir::Transition> {
        match t {
            ast::Transition::Direct(id) => {
                Ok(ir::Transition::Goto(self.next_of(id, index, accept)?))
            }
            ast::Transition::Select { exprs, cases, .. } => {
                let mut keys = vec![];
                let mut ktys = vec![];
                for e in exprs {
                    let v = self.expr(scope, e, None)?;
                    // a struct/tuple key expands into its fields
                    match v {
                        Val::Place(p) if !matches!(p, Place::Scalar(..)) => {
                            let mut parts = vec![];
                            self.flatten_place(&p, &mut parts);
                            for x in parts {
                                ktys.push(Ty::Bit(x.width()));
                                keys.push(x);
                            }
                        }
                        Val::List(vs) => {
                            for v in vs {
                                let (x, t) = self.rvalue(v, None, e.span)?;
                                keys.push(x);
                                ktys.push(t);
                            }
                        }
                        v => {
                            let (x, t) = self.rvalue(v, None, e.span)?;
                            keys.push(x);
                            ktys.push(t);
                        }
                    }
                }
                let mut out = vec![];
                for c in cases {
                    let next = self.next_of(&c.next, index, accept)?;
                    // a value set of a struct or tuple type is the whole keyset of a select with as
                    // many keys
                    if let ExprKind::Name(n) = &c.keyset.kind {
                        if let Some(Binding::ValueSet(id, _)) = scope.lookup(&n.name) {
                            let vs = &self.value_sets[id as usize];
                            if vs.widths.len() > 1 || keys.len() > 1 {
                                if vs.widths.len() != keys.len() {
                                    return err(
                                        c.keyset.span,
                                        format!(
                                            "value set `{}` has {} elements, select has {} keys",
                                            n.name,
                                            vs.widths.len(),
                                            keys.len()
                                        ),
                                    );
                                }
                                for (i, (w, t)) in vs.widths.iter().zip(ktys.iter()).enumerate() {
                                    if t.bit_size() != *w {
                                        return err(
                                            c.keyset.span,
                                            format!("value set `{}`: element {} has {w} bits, select key {} has {}", n.name, i + 1, i + 1, t.bit_size()),
                                        );
                                    }
                                }
                                let mut ms = vec![ir::KeyMatch::ValueSet(id)];
                                ms.resize(keys.len(), ir::KeyMatch::Any);
                                out.push((ms, next));
                                continue;
                            }
                        }
                    }
                    let elems: Vec<&ast::Expr> = match &c.keyset.kind {
                        ExprKind::List(items) if keys.len() > 1 || items.len() > 1 => {
                            items.iter().collect()
                        }
                        ExprKind::Default | ExprKind::DontCare => {
                            out.push((vec![ir::KeyMatch::Any; keys.len()], next));
                            continue;
                        }
                        _ => vec![&c.keyset],
                    };
                    if elems.len() != keys.len() {
                        return err(
                            c.keyset.span,
                            format!(
                                "keyset has {} elements, select has {} keys",
                                elems.len(),
                                keys.len()
                            ),
                        );
                    }
                    let mut ms = vec![];
                    for (k, (e, t)) in elems.iter().zip(ktys.iter()).enumerate() {
                        let _ = k;
                        ms.push(self.key_match(scope, e, t)?);
                    }
                    out.push((ms, next));
                }
                Ok(ir::Transition::Select { keys, cases: out })
            }
        }
    }
}
