//! Calls: functions and actions inlined with copy-in/copy-out, argument order and binding,
//! overloads.

use super::env::*;
use super::lowerer::{err, Lowerer};
use super::stmt::exit_with;
use crate::ast::ExprKind;
use crate::ast::{self, Span};
use crate::diag::{Diagnostic, PResult};
use crate::semantic_types::*;
use num_bigint::BigInt;
use p4sec_ir as ir;
use std::rc::Rc;

const MAX_INLINE_DEPTH: u32 = 64;

/// Where an out/inout argument is copied back to.
#[derive(Clone)]
pub enum Target {
    Place(Place),
    Slice(Place, u32, u32),
}

impl Target {
    pub(super) fn ty(&self) -> Ty {
        match self {
            Target::Place(p) => p.ty(),
            Target::Slice(_, hi, lo) => Ty::Bit(hi - lo + 1),
        }
    }
}

impl<'t> Lowerer<'t> {
    pub fn call(
        &mut self,
        scope: &Rc<Scope>,
        callee: &ast::Expr,
        type_args: &[ast::Type],
        args: &[ast::Argument],
        hint: Option<&Ty>,
        span: Span,
    ) -> PResult<Val> {
        let cv = self.expr(scope, callee, None)?;
        let mut targs = vec![];
        for t in type_args {
            targs.push(self.resolve_type(scope, t)?);
        }
        match cv {
            Val::Method(recv, m) => self.method_call(scope, *recv, &m, &targs, args, hint, span),
            Val::Binding(Binding::Functions(fs)) => {
                let f = pick_overload(fs.iter().map(|f| (f.clone(), &f.proto.params)), args)
                    .ok_or_else(|| {
                        Diagnostic::new(
                            span,
                            format!(
                                "no overload of this function takes {} arguments",
                                args.len()
                            ),
                        )
                    })?;
                self.inline_function(scope, &f, &targs, args, span)
            }
            Val::Binding(Binding::Action(a, ascope)) => {
                self.inline_action(scope, &a, &ascope, args, span)?;
                Ok(Val::DontCare)
            }
            Val::Binding(Binding::ExternFunctions(fs)) => {
                let f = pick_overload(fs.iter().map(|f| (f.clone(), &f.params)), args).ok_or_else(
                    || {
                        Diagnostic::new(
                            span,
                            format!(
                                "no overload of this function takes {} arguments",
                                args.len()
                            ),
                        )
                    },
                )?;
                self.extern_function(scope, &f, &targs, args, hint, span)
            }
            Val::Type(t) => {
                // `T(x)`-style conversion is not P4; report clearly
                err(span, format!("{t} is a type, not a function"))
            }
            _ => err(callee.span, "this expression cannot be called"),
        }
    }

    /// Order arguments by parameter (named or positional); missing ones use defaults or stay None.
    pub fn order_args<'a>(
        &self,
        params: &'a [ast::Param],
        args: &'a [ast::Argument],
        span: Span,
    ) -> PResult<Vec<Option<&'a ast::Expr>>> {
        let mut out: Vec<Option<&ast::Expr>> = vec![None; params.len()];
        if args.len() > params.len() {
            return err(
                span,
                format!(
                    "too many arguments: {} given, {} expected",
                    args.len(),
                    params.len()
                ),
            );
        }
        for (i, a) in args.iter().enumerate() {
            match &a.name {
                Some(n) => match params.iter().position(|p| p.name.name == n.name) {
                    Some(k) => out[k] = Some(&a.value),
                    None => return err(n.span, format!("no parameter named `{}`", n.name)),
                },
                None => out[i] = Some(&a.value),
            }
        }
        for (i, p) in params.iter().enumerate() {
            if out[i].is_none() {
                out[i] = p.default.as_ref();
            }
        }
        Ok(out)
    }

    /// Bind parameters with copy-in; returns the copy-out list.
    #[allow(clippy::type_complexity)]
    pub(super) fn bind_params(
        &mut self,
        caller: &Rc<Scope>,
        callee: &Rc<Scope>,
        params: &[ast::Param],
        args: &[ast::Argument],
        span: Span,
    ) -> PResult<Vec<(Target, Place)>> {
        let ordered = self.order_args(params, args, span)?;
        let mut copy_out = vec![];
        for (p, a) in params.iter().zip(ordered) {
            let t = self.resolve_type(callee, &p.ty)?;
            let Some(a) = a else {
                return err(
                    span,
                    format!("missing argument for parameter `{}`", p.name.name),
                );
            };
            let t = if matches!(t, Ty::Var(_) | Ty::Any) {
                let v = self.expr(caller, a, None)?;
                let vt = v.ty().ok_or_else(|| {
                    Diagnostic::new(a.span, "cannot infer the type of this argument")
                })?;
                if let ast::TypeKind::Named { name, .. } = &p.ty.kind {
                    callee.define(&name.name, Binding::Type(vt.clone()));
                }
                vt
            } else {
                t
            };
            match p.dir {
                Some(ast::Direction::Out) | Some(ast::Direction::InOut) => {
                    if matches!(a.kind, ExprKind::DontCare) {
                        let local = self.alloc(&t, &p.name.name, p.name.span)?;
                        callee.define(&p.name.name, Binding::Var(local));
                        continue;
                    }
                    let target = self.target(caller, a)?;
                    if !target.ty().same(&t) {
                        return err(
                            a.span,
                            format!(
                                "argument has type {}, parameter `{}` has type {t}",
                                target.ty(),
                                p.name.name
                            ),
                        );
                    }
                    let local = self.alloc(&t, &p.name.name, p.name.span)?;
                    if p.dir == Some(ast::Direction::InOut) {
                        let v = self.target_value(&target, a.span)?;
                        self.assign(&local, v, a.span)?;
                    } else {
                        self.uninit(&local);
                    }
                    callee.define(&p.name.name, Binding::Var(local.clone()));
                    copy_out.push((target, local));
                }
                _ => {
                    // a default value is evaluated where the callee is declared, not at the call
                    // site
                    let escope = if is_default(p, a) { callee } else { caller };
                    let v = self.expr(escope, a, Some(&t))?;
                    if let (Val::Const(..), true) = (&v, t.is_scalar()) {
                        let v = self.convert(v, &t, a.span)?;
                        callee.define(&p.name.name, Binding::Value(Box::new(v)));
                        continue;
                    }
                    let local = self.alloc(&t, &p.name.name, p.name.span)?;
                    self.assign(&local, v, a.span)?;
                    callee.define(&p.name.name, Binding::Var(local));
                }
            }
        }
        Ok(copy_out)
    }

    pub(super) fn enter_inline(&mut self, span: Span) -> PResult<()> {
        self.inline_depth += 1;
        if self.inline_depth > MAX_INLINE_DEPTH {
            return err(
                span,
                "calls nest too deeply (recursion is not allowed in P4)",
            );
        }
        Ok(())
    }

    pub fn inline_function(
        &mut self,
        caller: &Rc<Scope>,
        f: &Rc<ast::FunctionDecl>,
        targs: &[Ty],
        args: &[ast::Argument],
        span: Span,
    ) -> PResult<Val> {
        self.enter_inline(span)?;
        let fscope = Scope::child(&caller.root_of());
        for (i, tp) in f.proto.type_params.iter().enumerate() {
            fscope.define(
                &tp.name,
                Binding::Type(targs.get(i).cloned().unwrap_or(Ty::Var(tp.name.clone()))),
            );
        }
        let copy_out = self.bind_params(caller, &fscope, &f.proto.params, args, span)?;
        let rt = self.resolve_type(&fscope, &f.proto.ret)?;
        let ret = if matches!(rt, Ty::Void) {
            None
        } else {
            Some(self.alloc(&rt, "retval", span)?)
        };
        let label = self.label();
        self.returns.push((label, ret.clone()));
        let body = self.capture(|l| l.block(&fscope, &f.body));
        self.returns.pop();
        let (_, body) = body?;
        self.emit(ir::Stmt::Block { label, body });
        self.copy_out_pub(copy_out, span)?;
        self.inline_depth -= 1;
        Ok(match ret {
            Some(p) => Val::Place(p),
            None => Val::DontCare,
        })
    }

    pub fn inline_action(
        &mut self,
        caller: &Rc<Scope>,
        a: &Rc<ast::ActionDecl>,
        ascope: &Rc<Scope>,
        args: &[ast::Argument],
        span: Span,
    ) -> PResult<()> {
        // directly called actions appear in the P4Info too (as the reference compiler lists them)
        let key = (Rc::as_ptr(a) as usize, ascope.id());
        if self.in_action == 0
            && !self.action_cache.contains_key(&key)
            && !self.p4info_only.contains(&key)
        {
            self.p4info_only.insert(key);
            let ndir = a.params.iter().take_while(|p| p.dir.is_some()).count();
            let bound: Vec<ast::Argument> = args.iter().take(ndir).cloned().collect();
            let saved = self.inline_depth;
            let r = if bound.len() == ndir {
                self.table_action_bound(a, ascope, Some(caller), &bound, span)
                    .map(|_| ())
            } else {
                Ok(())
            };
            self.inline_depth = saved;
            r?;
        }
        self.enter_inline(span)?;
        let inner = Scope::child(ascope);
        let copy_out = self.bind_params(caller, &inner, &a.params, args, span)?;
        let label = self.label();
        self.returns.push((label, None));
        self.in_action += 1;
        let body = self.capture(|l| l.block(&inner, &a.body));
        self.in_action -= 1;
        self.returns.pop();
        let (_, mut body) = body?;
        let (_, epilogue) = self.capture(|l| l.copy_out_pub(copy_out, span))?;
        // `exit` inside the action still copies out/inout parameters back (as BMv2 does)
        exit_with(&mut body, &epilogue);
        self.emit(ir::Stmt::Block { label, body });
        for st in epilogue {
            self.emit(st);
        }
        self.inline_depth -= 1;
        Ok(())
    }

    pub fn bind_params_pub(
        &mut self,
        caller: &Rc<Scope>,
        callee: &Rc<Scope>,
        params: &[ast::Param],
        args: &[ast::Argument],
        span: Span,
    ) -> PResult<Vec<(Target, Place)>> {
        self.bind_params(caller, callee, params, args, span)
    }

    pub fn copy_out_pub(&mut self, copy_out: Vec<(Target, Place)>, span: Span) -> PResult<()> {
        for (target, local) in copy_out {
            match target {
                Target::Place(p) => self.assign(&p, Val::Place(local), span)?,
                Target::Slice(p, hi, lo) => {
                    let (x, _) = self.rvalue(Val::Place(local), None, span)?;
                    self.assign_slice(&p, hi, lo, x, span)?;
                }
            }
        }
        Ok(())
    }

    /// An out/inout argument: a place, or a slice of a bit-string place.
    pub fn target(&mut self, scope: &Rc<Scope>, e: &ast::Expr) -> PResult<Target> {
        if let ExprKind::Slice(base, hi, lo) = &e.kind {
            let (p, hi, lo) = self.slice_place(scope, base, hi, lo)?;
            return Ok(Target::Slice(p, hi, lo));
        }
        Ok(Target::Place(self.place(scope, e)?))
    }

    pub fn target_value(&mut self, t: &Target, span: Span) -> PResult<Val> {
        match t {
            Target::Place(p) => Ok(Val::Place(p.clone())),
            Target::Slice(p, hi, lo) => self.slice(Val::Place(p.clone()), *hi, *lo, span),
        }
    }

    /// `p[hi:lo] = x` (x has width hi-lo+1).
    pub fn assign_slice(
        &mut self,
        p: &Place,
        hi: u32,
        lo: u32,
        v: ir::Expr,
        span: Span,
    ) -> PResult<()> {
        let Place::Scalar(lv, t) = p else {
            return err(span, "only a bit-string can be sliced");
        };
        let w = t.scalar_width().unwrap_or(0);
        if hi >= w || hi < lo {
            return err(
                span,
                format!("slice [{hi}:{lo}] is outside the {w} bits of {t}"),
            );
        }
        let sw = hi - lo + 1;
        let widen = |x: ir::Expr| {
            if sw == w {
                x
            } else {
                ir::Expr::Cast {
                    arg: Box::new(x),
                    width: w,
                    signed: false,
                }
            }
        };
        let mask: BigInt = ((BigInt::from(1) << sw) - BigInt::from(1)) << lo;
        let inv = crate::semantic_types::wrap_unsigned(&!mask, w);
        let kept = ir::Expr::Binary {
            op: ir::BinOp::BitAnd,
            width: w,
            signed: false,
            lhs: Box::new(ir::Expr::Load(lv.clone())),
            rhs: Box::new(ir::Expr::Const(to_value(&inv, w))),
        };
        let shifted = ir::Expr::Binary {
            op: ir::BinOp::Shl,
            width: w,
            signed: false,
            lhs: Box::new(widen(v)),
            rhs: Box::new(ir::Expr::konst(32, lo as u64)),
        };
        let src = ir::Expr::Binary {
            op: ir::BinOp::BitOr,
            width: w,
            signed: false,
            lhs: Box::new(kept),
            rhs: Box::new(shifted),
        };
        self.emit(ir::Stmt::Assign {
            dst: lv.clone(),
            src,
        });
        Ok(())
    }
}

/// True if `a` is `p`'s default value (filled in by [`Lowerer::order_args`] for an omitted
/// argument).
pub(super) fn is_default(p: &ast::Param, a: &ast::Expr) -> bool {
    p.default.as_ref().is_some_and(|d| std::ptr::eq(d, a))
}

/// Choose the overload whose parameter count fits the arguments (parameters with defaults may be
/// omitted).
fn pick_overload<'a, T: Clone>(
    cands: impl Iterator<Item = (T, &'a Vec<ast::Param>)>,
    args: &[ast::Argument],
) -> Option<T> {
    let mut best = None;
    for (c, params) in cands {
        let required = params.iter().filter(|p| p.default.is_none()).count();
        if args.len() >= required && args.len() <= params.len() {
            if args.len() == params.len() {
                return Some(c);
            }
            best.get_or_insert(c);
        }
    }
    best
}
