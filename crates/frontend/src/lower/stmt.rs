//! Statements and calls (functions, actions, methods, built-in externs) with copy-in/copy-out inlining.

use super::*;
use crate::ast::{ExprKind, StmtKind};
use num_bigint::BigInt;
use num_traits::{ToPrimitive, Zero};

fn err<T>(span: Span, msg: impl Into<String>) -> PResult<T> {
    Err(Diagnostic::new(span, msg))
}

const MAX_INLINE_DEPTH: u32 = 64;

/// Where an out/inout argument is copied back to.
#[derive(Clone)]
pub enum Target {
    Place(Place),
    Slice(Place, u32, u32),
}

impl Target {
    fn ty(&self) -> Ty {
        match self {
            Target::Place(p) => p.ty(),
            Target::Slice(_, hi, lo) => Ty::Bit(hi - lo + 1),
        }
    }
}

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
                    (None, Some(_)) => return err(span, "`return` needs a value in a function that returns one"),
                    (None, None) => {}
                }
                self.emit(ir::Stmt::Break(label));
                Ok(())
            }
            StmtKind::Var(v) => {
                let t = self.resolve_type(scope, &v.ty)?;
                let p = self.alloc(&t, &v.name.name, v.name.span)?;
                if let Some(init) = &v.init {
                    let val = self.expr(scope, init, Some(&t))?;
                    self.assign(&p, val, init.span)?;
                } else {
                    self.uninit(&p);
                }
                if let (Some(n), Place::Scalar(ir::LValue::Static(l), _)) = (self.new_type_name(&v.ty), &p) {
                    self.var_new_types.insert(l.slot, n);
                }
                scope.define(&v.name.name, Binding::Var(p));
                Ok(())
            }
            StmtKind::Const(c) => {
                let t = self.resolve_type(scope, &c.ty)?;
                let v = self.expr(scope, &c.value, Some(&t))?;
                let v = self.convert(v, &t, c.value.span)?;
                scope.define(&c.name.name, Binding::Value(Box::new(v)));
                Ok(())
            }
            StmtKind::Assign(lhs, rhs) => self.assign_stmt(scope, lhs, rhs, None),
            StmtKind::OpAssign(op, lhs, rhs) => self.assign_stmt(scope, lhs, rhs, Some(*op)),
            StmtKind::Call(e) => {
                let ExprKind::Call { callee, type_args, args } = &e.kind else {
                    return err(span, "expected a call");
                };
                let v = self.call(scope, callee, type_args, args, None, e.span)?;
                if let Val::TableResult(_, hit, run) = v {
                    // `t.apply();` as a statement: nothing reads whether it hit or which action ran, so the
                    // apply does not record them
                    if let Some(ir::Stmt::ApplyTable { hit: h @ Some(_), action_run: r @ Some(_), .. }) = self.out.last_mut().and_then(|b| b.last_mut()) {
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
                self.emit(ir::Stmt::If { cond, then: then_s, else_: else_s });
                Ok(())
            }
            StmtKind::Switch(e, cases) => self.switch(scope, e, cases, span),
            StmtKind::Decl(d) => match &**d {
                ast::Decl::Instantiation(_) => err(span, "instantiations are not allowed inside a block body"),
                _ => err(span, "this declaration is not allowed inside a block body"),
            },
        }
    }

    /// Uninitialized storage: headers become invalid (as in BMv2); scalars keep what the slot holds.
    pub fn uninit(&mut self, p: &Place) {
        match p {
            Place::Header { valid, .. } => self.emit(ir::Stmt::Assign { dst: valid.clone(), src: ir::Expr::konst(1, 0) }),
            Place::Struct { fields, .. } | Place::Union { members: fields, .. } => {
                for (_, f) in fields.clone() {
                    self.uninit(&f);
                }
            }
            Place::Stack { elems, next_index, .. } => {
                for e in elems.clone() {
                    self.uninit(&e);
                }
                self.emit(ir::Stmt::Assign { dst: ir::LValue::Static(*next_index), src: ir::Expr::konst(32, 0) });
            }
            Place::Tuple(ps) => {
                for e in ps.clone() {
                    self.uninit(&e);
                }
            }
            _ => {}
        }
    }

    fn assign_stmt(&mut self, scope: &Rc<Scope>, lhs: &ast::Expr, rhs: &ast::Expr, op: Option<ast::BinOp>) -> PResult<()> {
        // slice targets: x[hi:lo] = v
        if let ExprKind::Slice(base, hi, lo) = &lhs.kind {
            let (p, hi, lo) = self.slice_place(scope, base, hi, lo)?;
            let Place::Scalar(_, t) = &p else {
                return err(lhs.span, "only a bit-string can be sliced");
            };
            let w = t.scalar_width().unwrap_or(0);
            if hi >= w || hi < lo {
                return err(lhs.span, format!("slice [{hi}:{lo}] is outside the {w} bits of {t}"));
            }
            let sw = hi - lo + 1;
            let rv = match op {
                Some(op) => {
                    // the target's current value from the place lowered above: its l-value evaluated once
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
            Some(op) => self.binary_with(scope, op, Val::Place(p.clone()), lhs.span, rhs, Some(&t), rhs.span)?,
            None => self.expr(scope, rhs, Some(&t))?,
        };
        self.assign(&p, v, rhs.span)
    }

    fn switch(&mut self, scope: &Rc<Scope>, e: &ast::Expr, cases: &[ast::SwitchCase], span: Span) -> PResult<()> {
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
                        (Some(t), ExprKind::Name(n)) => match t.actions.iter().find(|(a, _)| *a == n.name) {
                            Some((_, idx)) => ir::Value::new(32, *idx as u64),
                            None => return err(le.span, format!("`{}` is not an action of this table", n.name)),
                        },
                        (Some(_), _) => return err(le.span, "a switch on action_run needs action names as labels"),
                        (None, _) => match self.expr(scope, le, None)? {
                            Val::Const(c, _) => to_value(&c, kt),
                            _ => return err(le.span, "switch labels must be compile-time constants"),
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
        self.emit(ir::Stmt::Switch { expr: key, cases: out_cases, default: default.unwrap_or_default() });
        Ok(())
    }

    // ---------------------------------------------------------------- calls

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
                    .ok_or_else(|| Diagnostic::new(span, format!("no overload of this function takes {} arguments", args.len())))?;
                self.inline_function(scope, &f, &targs, args, span)
            }
            Val::Binding(Binding::Action(a, ascope)) => {
                self.inline_action(scope, &a, &ascope, args, span)?;
                Ok(Val::DontCare)
            }
            Val::Binding(Binding::ExternFunctions(fs)) => {
                let f = pick_overload(fs.iter().map(|f| (f.clone(), &f.params)), args)
                    .ok_or_else(|| Diagnostic::new(span, format!("no overload of this function takes {} arguments", args.len())))?;
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
    pub fn order_args<'a>(&self, params: &'a [ast::Param], args: &'a [ast::Argument], span: Span) -> PResult<Vec<Option<&'a ast::Expr>>> {
        let mut out: Vec<Option<&ast::Expr>> = vec![None; params.len()];
        if args.len() > params.len() {
            return err(span, format!("too many arguments: {} given, {} expected", args.len(), params.len()));
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
    fn bind_params(
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
                return err(span, format!("missing argument for parameter `{}`", p.name.name));
            };
            let t = if matches!(t, Ty::Var(_) | Ty::Any) {
                let v = self.expr(caller, a, None)?;
                let vt = v.ty().ok_or_else(|| Diagnostic::new(a.span, "cannot infer the type of this argument"))?;
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
                        return err(a.span, format!("argument has type {}, parameter `{}` has type {t}", target.ty(), p.name.name));
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
                    let v = self.expr(caller, a, Some(&t))?;
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

    fn enter_inline(&mut self, span: Span) -> PResult<()> {
        self.inline_depth += 1;
        if self.inline_depth > MAX_INLINE_DEPTH {
            return err(span, "calls nest too deeply (recursion is not allowed in P4)");
        }
        Ok(())
    }

    pub fn inline_function(&mut self, caller: &Rc<Scope>, f: &Rc<ast::FunctionDecl>, targs: &[Ty], args: &[ast::Argument], span: Span) -> PResult<Val> {
        self.enter_inline(span)?;
        let fscope = Scope::child(&caller.root_of());
        for (i, tp) in f.proto.type_params.iter().enumerate() {
            fscope.define(&tp.name, Binding::Type(targs.get(i).cloned().unwrap_or(Ty::Var(tp.name.clone()))));
        }
        let copy_out = self.bind_params(caller, &fscope, &f.proto.params, args, span)?;
        let rt = self.resolve_type(&fscope, &f.proto.ret)?;
        let ret = if matches!(rt, Ty::Void) { None } else { Some(self.alloc(&rt, "retval", span)?) };
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

    pub fn inline_action(&mut self, caller: &Rc<Scope>, a: &Rc<ast::ActionDecl>, ascope: &Rc<Scope>, args: &[ast::Argument], span: Span) -> PResult<()> {
        // directly called actions appear in the P4Info too (as the reference compiler lists them)
        let key = (Rc::as_ptr(a) as usize, ascope.id());
        if self.in_action == 0 && !self.action_cache.contains_key(&key) && !self.p4info_only.contains(&key) {
            self.p4info_only.insert(key);
            let ndir = a.params.iter().take_while(|p| p.dir.is_some()).count();
            let bound: Vec<ast::Argument> = args.iter().take(ndir).cloned().collect();
            let saved = self.inline_depth;
            let r = if bound.len() == ndir { self.table_action_bound(a, ascope, Some(caller), &bound, span).map(|_| ()) } else { Ok(()) };
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

    pub fn bind_params_pub(&mut self, caller: &Rc<Scope>, callee: &Rc<Scope>, params: &[ast::Param], args: &[ast::Argument], span: Span) -> PResult<Vec<(Target, Place)>> {
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
    pub fn assign_slice(&mut self, p: &Place, hi: u32, lo: u32, v: ir::Expr, span: Span) -> PResult<()> {
        let Place::Scalar(lv, t) = p else {
            return err(span, "only a bit-string can be sliced");
        };
        let w = t.scalar_width().unwrap_or(0);
        if hi >= w || hi < lo {
            return err(span, format!("slice [{hi}:{lo}] is outside the {w} bits of {t}"));
        }
        let sw = hi - lo + 1;
        let widen = |x: ir::Expr| if sw == w { x } else { ir::Expr::Cast { arg: Box::new(x), width: w, signed: false } };
        let mask: BigInt = ((BigInt::from(1) << sw) - BigInt::from(1)) << lo;
        let inv = crate::types::wrap_unsigned(&!mask, w);
        let kept = ir::Expr::Binary {
            op: ir::BinOp::BitAnd,
            width: w,
            signed: false,
            lhs: Box::new(ir::Expr::Load(lv.clone())),
            rhs: Box::new(ir::Expr::Const(to_value(&inv, w))),
        };
        let shifted = ir::Expr::Binary { op: ir::BinOp::Shl, width: w, signed: false, lhs: Box::new(widen(v)), rhs: Box::new(ir::Expr::konst(32, lo as u64)) };
        let src = ir::Expr::Binary { op: ir::BinOp::BitOr, width: w, signed: false, lhs: Box::new(kept), rhs: Box::new(shifted) };
        self.emit(ir::Stmt::Assign { dst: lv.clone(), src });
        Ok(())
    }

    // ---------------------------------------------------------------- methods

    #[allow(clippy::too_many_arguments)]
    fn method_call(
        &mut self,
        scope: &Rc<Scope>,
        recv: Val,
        m: &str,
        targs: &[Ty],
        args: &[ast::Argument],
        hint: Option<&Ty>,
        span: Span,
    ) -> PResult<Val> {
        let argv = |i: usize| -> PResult<&ast::Expr> {
            args.get(i).map(|a| &a.value).ok_or_else(|| Diagnostic::new(span, format!("`{m}` needs at least {} argument(s)", i + 1)))
        };
        match recv {
            Val::Place(p) => self.place_method(scope, p, m, args, span),
            Val::Binding(Binding::PacketIn) => match m {
                "extract" => {
                    let target = if matches!(argv(0)?.kind, ExprKind::DontCare) {
                        let t = targs.first().cloned().ok_or_else(|| Diagnostic::new(span, "extract into `_` needs a type argument"))?;
                        self.alloc(&t, "discard", span)?
                    } else {
                        self.place(scope, argv(0)?)?
                    };
                    let Place::Header { hdr, siblings, .. } = &target else {
                        return err(argv(0)?.span, format!("extract needs a header, found {}", target.ty()));
                    };
                    let varbit_bits = match args.get(1) {
                        Some(a) => {
                            let v = self.expr(scope, &a.value, Some(&Ty::Bit(32)))?;
                            let (x, t) = self.rvalue(v, Some(&Ty::Bit(32)), a.value.span)?;
                            Some(match t.scalar_width() {
                                Some(32) => x,
                                Some(_) => ir::Expr::Cast { arg: Box::new(x), width: 32, signed: false },
                                None => return err(a.value.span, "the varbit length must be a bit<32>"),
                            })
                        }
                        None => None,
                    };
                    self.emit(ir::Stmt::Extract { hdr: hdr.clone(), varbit_bits });
                    for s in siblings.clone() {
                        self.emit(ir::Stmt::Assign { dst: s, src: ir::Expr::konst(1, 0) });
                    }
                    Ok(Val::DontCare)
                }
                "lookahead" => {
                    let t = targs.first().cloned().or_else(|| hint.cloned()).ok_or_else(|| Diagnostic::new(span, "lookahead needs a type argument"))?;
                    let w = t.bit_size();
                    if w == 0 || w > ir::MAX_WIDTH {
                        return err(span, format!("cannot look ahead {w} bits"));
                    }
                    if t.is_scalar() {
                        return Ok(Val::Rv(ir::Expr::Lookahead { width: w }, t));
                    }
                    let tmp_bits = self.alloc_scalar(w);
                    self.emit(ir::Stmt::Assign { dst: ir::LValue::Static(tmp_bits), src: ir::Expr::Lookahead { width: w } });
                    let place = self.alloc(&t, "lookahead", span)?;
                    let mut lvs = vec![];
                    self.flatten_lvalues(&place, &mut lvs);
                    let mut hi = w;
                    for lv in lvs {
                        let fw = match &lv {
                            ir::LValue::Static(l) => l.width,
                            ir::LValue::Dynamic { base, .. } => base.width,
                        };
                        let src = ir::Expr::Slice { arg: Box::new(ir::Expr::Load(ir::LValue::Static(tmp_bits))), hi: hi - 1, lo: hi - fw };
                        self.emit(ir::Stmt::Assign { dst: lv, src });
                        hi -= fw;
                    }
                    if let Some(v) = place.header_valid() {
                        self.emit(ir::Stmt::Assign { dst: v, src: ir::Expr::konst(1, 1) });
                    }
                    Ok(Val::Place(place))
                }
                "advance" => {
                    let v = self.expr(scope, argv(0)?, Some(&Ty::Bit(32)))?;
                    let (x, t) = self.rvalue(v, Some(&Ty::Bit(32)), span)?;
                    let x = if t.scalar_width() == Some(32) { x } else { ir::Expr::Cast { arg: Box::new(x), width: 32, signed: false } };
                    self.emit(ir::Stmt::Advance { bits: x });
                    Ok(Val::DontCare)
                }
                "length" => Ok(Val::Rv(ir::Expr::PacketLength, Ty::Bit(32))),
                _ => err(span, format!("packet_in has no method `{m}`")),
            },
            Val::Binding(Binding::PacketOut) => match m {
                "emit" => {
                    let v = self.expr(scope, argv(0)?, None)?;
                    let Val::Place(p) = v else {
                        return err(argv(0)?.span, "emit needs a header, stack, union or struct of headers");
                    };
                    self.emit_place(&p, argv(0)?.span)?;
                    Ok(Val::DontCare)
                }
                _ => err(span, format!("packet_out has no method `{m}`")),
            },
            Val::Binding(Binding::Table(t)) => match m {
                "apply" => {
                    self.applied_tables.insert(t.id);
                    let hit = self.alloc_scalar(1);
                    let run = self.alloc_scalar(32);
                    self.emit(ir::Stmt::ApplyTable { table: t.id, hit: Some(hit), action_run: Some(run) });
                    Ok(Val::TableResult(t, hit, run))
                }
                _ => err(span, format!("a table has no method `{m}`")),
            },
            // direct type invocation `C.apply(...)`: each call site (in each enclosing instance) its own instance,
            // named as the type (as the reference compiler names it)
            Val::Binding(Binding::ControlDecl(decl, dscope)) if m == "apply" => {
                if !decl.ctor_params.is_empty() {
                    return err(span, format!("control `{}` has constructor parameters: instantiate it to apply it", decl.sig.name.name));
                }
                let key = (self.path.join("."), span.lo);
                let inst = match self.direct_instances.get(&key) {
                    Some(i) => i.clone(),
                    None => {
                        let name = decl.sig.name.name.clone();
                        let i = Rc::new(Instance::Control { decl, scope: Scope::child(&dscope), name, state: std::cell::RefCell::new(None) });
                        self.direct_instances.insert(key, i.clone());
                        i
                    }
                };
                self.apply_control(scope, &inst, args, span)?;
                Ok(Val::DontCare)
            }
            Val::Binding(Binding::ParserDecl(..)) if m == "apply" => err(span, "a sub-parser can only be applied as a statement of a parser state"),
            Val::Binding(Binding::Instance(inst)) => match &*inst {
                Instance::Control { .. } if m == "apply" => {
                    self.apply_control(scope, &inst, args, span)?;
                    Ok(Val::DontCare)
                }
                Instance::Parser { .. } => err(span, "a sub-parser can only be applied as a statement of a parser state"),
                Instance::Extern { kind, id, info, name, .. } => self.extern_method(scope, *kind, *id, info, name, m, targs, args, hint, span),
                _ => err(span, format!("no method `{m}` here")),
            },
            _ => err(span, format!("cannot call method `{m}` on this value")),
        }
    }

    fn place_method(&mut self, _scope: &Rc<Scope>, p: Place, m: &str, args: &[ast::Argument], span: Span) -> PResult<Val> {
        match (&p, m) {
            (Place::Header { valid, .. }, "isValid") => Ok(Val::Rv(ir::Expr::Load(valid.clone()), Ty::Bool)),
            (Place::Union { members, .. }, "isValid") => {
                let mut e = ir::Expr::konst(1, 0);
                for (_, mm) in members {
                    if let Some(v) = mm.header_valid() {
                        e = ir::Expr::Binary { op: ir::BinOp::Or, width: 1, signed: false, lhs: Box::new(e), rhs: Box::new(ir::Expr::Load(v)) };
                    }
                }
                Ok(Val::Rv(e, Ty::Bool))
            }
            (Place::Header { valid, siblings, .. }, "setValid") => {
                self.emit(ir::Stmt::Assign { dst: valid.clone(), src: ir::Expr::konst(1, 1) });
                for s in siblings {
                    self.emit(ir::Stmt::Assign { dst: s.clone(), src: ir::Expr::konst(1, 0) });
                }
                Ok(Val::DontCare)
            }
            (Place::Header { valid, .. }, "setInvalid") => {
                self.emit(ir::Stmt::Assign { dst: valid.clone(), src: ir::Expr::konst(1, 0) });
                Ok(Val::DontCare)
            }
            (_, "minSizeInBits" | "maxSizeInBits") => Ok(Val::Const(BigInt::from(p.ty().bit_size()), Ty::InfInt)),
            (_, "minSizeInBytes" | "maxSizeInBytes") => Ok(Val::Const(BigInt::from(p.ty().bit_size().div_ceil(8)), Ty::InfInt)),
            (Place::Stack { elems, next_index, .. }, "push_front" | "pop_front") => {
                let n = match args.first() {
                    Some(a) => match &a.value.kind {
                        ExprKind::Int(l) => l.value.to_usize().unwrap_or(usize::MAX),
                        _ => return err(a.value.span, "the count must be an integer constant"),
                    },
                    None => return err(span, format!("`{m}` needs a count")),
                };
                let size = elems.len();
                let ni = ir::LValue::Static(*next_index);
                let load = ir::Expr::Load(ni.clone());
                if m == "push_front" {
                    for i in (0..size).rev() {
                        if i >= n {
                            self.assign(&elems[i], Val::Place(elems[i - n].clone()), span)?;
                        } else {
                            self.uninit(&elems[i]);
                        }
                    }
                    let sum = ir::Expr::Binary { op: ir::BinOp::Add, width: 32, signed: false, lhs: Box::new(load.clone()), rhs: Box::new(ir::Expr::konst(32, n.min(size) as u64)) };
                    let over = ir::Expr::Binary { op: ir::BinOp::Gt, width: 1, signed: false, lhs: Box::new(sum.clone()), rhs: Box::new(ir::Expr::konst(32, size as u64)) };
                    let v = ir::Expr::Cond { cond: Box::new(over), then: Box::new(ir::Expr::konst(32, size as u64)), else_: Box::new(sum), width: 32 };
                    self.emit(ir::Stmt::Assign { dst: ni, src: v });
                } else {
                    for i in 0..size {
                        if i + n < size {
                            self.assign(&elems[i], Val::Place(elems[i + n].clone()), span)?;
                        } else {
                            self.uninit(&elems[i]);
                        }
                    }
                    let nn = ir::Expr::konst(32, n.min(u32::MAX as usize) as u64);
                    let ge = ir::Expr::Binary { op: ir::BinOp::Ge, width: 1, signed: false, lhs: Box::new(load.clone()), rhs: Box::new(nn.clone()) };
                    let sub = ir::Expr::Binary { op: ir::BinOp::Sub, width: 32, signed: false, lhs: Box::new(load), rhs: Box::new(nn) };
                    let v = ir::Expr::Cond { cond: Box::new(ge), then: Box::new(sub), else_: Box::new(ir::Expr::konst(32, 0)), width: 32 };
                    self.emit(ir::Stmt::Assign { dst: ni, src: v });
                }
                Ok(Val::DontCare)
            }
            _ => err(span, format!("a value of type {} has no method `{m}`", p.ty())),
        }
    }

    pub fn emit_place(&mut self, p: &Place, span: Span) -> PResult<()> {
        match p {
            Place::Header { hdr, .. } => {
                self.emit(ir::Stmt::Emit { hdr: hdr.clone() });
                Ok(())
            }
            Place::Struct { fields, .. } | Place::Union { members: fields, .. } => {
                for (_, f) in fields.clone() {
                    self.emit_place(&f, span)?;
                }
                Ok(())
            }
            Place::Stack { elems, .. } => {
                for e in elems.clone() {
                    self.emit_place(&e, span)?;
                }
                Ok(())
            }
            Place::Tuple(ps) => {
                for e in ps.clone() {
                    self.emit_place(&e, span)?;
                }
                Ok(())
            }
            _ => err(span, format!("cannot emit a value of type {}", p.ty())),
        }
    }

    fn scalar_arg(&mut self, scope: &Rc<Scope>, e: &ast::Expr, want: Option<&Ty>) -> PResult<(ir::Expr, Ty)> {
        let v = self.expr(scope, e, want)?;
        let v = match (&v, want) {
            (Val::Const(_, Ty::InfInt), None) => self.convert(v, &Ty::Bit(32), e.span)?,
            _ => v,
        };
        self.rvalue(v, want, e.span)
    }

    fn index32(&mut self, scope: &Rc<Scope>, e: &ast::Expr) -> PResult<ir::Expr> {
        let (x, t) = self.scalar_arg(scope, e, None)?;
        Ok(match t.scalar_width() {
            Some(32) => x,
            Some(_) => ir::Expr::Cast { arg: Box::new(x), width: 32, signed: false },
            None => return err(e.span, format!("an index must be a bit-string, found {t}")),
        })
    }

    fn scalar_place(&mut self, scope: &Rc<Scope>, e: &ast::Expr) -> PResult<(ir::LValue, Ty)> {
        match self.place(scope, e)? {
            Place::Scalar(lv, t) => Ok((lv, t)),
            p => err(e.span, format!("expected a bit-string location, found {}", p.ty())),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn extern_method(
        &mut self,
        scope: &Rc<Scope>,
        kind: ExternKind,
        id: u32,
        info: &Rc<ExternInfo>,
        name: &str,
        m: &str,
        _targs: &[Ty],
        args: &[ast::Argument],
        _hint: Option<&Ty>,
        span: Span,
    ) -> PResult<Val> {
        let a = |i: usize| -> PResult<&ast::Expr> {
            args.get(i).map(|a| &a.value).ok_or_else(|| Diagnostic::new(span, format!("`{m}` needs at least {} argument(s)", i + 1)))
        };
        match (kind, m) {
            (ExternKind::Register, "read") if args.len() == 1 => {
                let w = self.registers[id as usize].width;
                let loc = self.alloc_scalar(w);
                let index = self.index32(scope, a(0)?)?;
                self.emit(ir::Stmt::Builtin(ir::Builtin::RegisterRead { reg: id, dst: ir::LValue::Static(loc), index }));
                Ok(Val::Rv(ir::Expr::Load(ir::LValue::Static(loc)), Ty::Bit(w)))
            }
            (ExternKind::Register, "read") => {
                let (dst, t) = self.scalar_place(scope, a(0)?)?;
                let w = self.registers[id as usize].width;
                if t.scalar_width() != Some(w) {
                    return err(a(0)?.span, format!("register `{name}` holds bit<{w}>, the target has type {t}"));
                }
                let index = self.index32(scope, a(1)?)?;
                self.emit(ir::Stmt::Builtin(ir::Builtin::RegisterRead { reg: id, dst, index }));
                Ok(Val::DontCare)
            }
            (ExternKind::Register, "write") => {
                let index = self.index32(scope, a(0)?)?;
                let w = self.registers[id as usize].width;
                let (value, t) = self.scalar_arg(scope, a(1)?, Some(&Ty::Bit(w)))?;
                let value = if t.scalar_width() == Some(w) { value } else { return err(a(1)?.span, format!("register `{name}` holds bit<{w}>, the value has type {t}")) };
                self.emit(ir::Stmt::Builtin(ir::Builtin::RegisterWrite { reg: id, index, value }));
                Ok(Val::DontCare)
            }
            (ExternKind::Counter, "count") => {
                let index = self.index32(scope, a(0)?)?;
                self.emit(ir::Stmt::Builtin(ir::Builtin::CounterCount { counter: id, index }));
                Ok(Val::DontCare)
            }
            (ExternKind::DirectCounter, "count") => {
                self.emit(ir::Stmt::Builtin(ir::Builtin::DirectCounterCount { counter: id }));
                Ok(Val::DontCare)
            }
            (ExternKind::Meter, "execute_meter") => {
                let index = self.index32(scope, a(0)?)?;
                let (dst, _) = self.scalar_place(scope, a(1)?)?;
                self.emit(ir::Stmt::Builtin(ir::Builtin::MeterExecute { meter: id, index, dst }));
                Ok(Val::DontCare)
            }
            (ExternKind::DirectMeter, "read") => {
                let (dst, _) = self.scalar_place(scope, a(0)?)?;
                self.emit(ir::Stmt::Builtin(ir::Builtin::DirectMeterRead { meter: id, dst }));
                Ok(Val::DontCare)
            }
            (ExternKind::Registered, _) => {
                let decl = info.decl.clone();
                let protos: Vec<&ast::FunctionProto> = decl
                    .members
                    .iter()
                    .filter_map(|mm| match mm {
                        ast::ExternMember::Method { proto, .. } if proto.name.name == m => Some(proto),
                        _ => None,
                    })
                    .collect();
                let proto = protos
                    .iter()
                    .find(|p| p.params.len() == args.len())
                    .or(protos.first())
                    .copied()
                    .ok_or_else(|| Diagnostic::new(span, format!("extern `{}` has no method `{m}`", decl.name.name)))?
                    .clone();
                self.registered_call(scope, id, &proto, args, span)
            }
            _ => err(span, format!("`{name}` has no method `{m}`")),
        }
    }

    /// A call through the engine's extern registry.
    fn registered_call(&mut self, scope: &Rc<Scope>, inst: u32, proto: &ast::FunctionProto, args: &[ast::Argument], span: Span) -> PResult<Val> {
        let ordered = self.order_args(&proto.params, args, span)?;
        let tscope = Scope::child(scope);
        for tp in &proto.type_params {
            tscope.define(&tp.name, Binding::Type(Ty::Var(tp.name.clone())));
        }
        let mut irargs = vec![];
        let mut sig = vec![];
        for (p, a) in proto.params.iter().zip(ordered) {
            let Some(a) = a else {
                return err(span, format!("missing argument for `{}`", p.name.name));
            };
            let pt = self.resolve_type(&tscope, &p.ty)?;
            let dir = match p.dir {
                Some(ast::Direction::Out) => ir::Direction::Out,
                Some(ast::Direction::InOut) => ir::Direction::InOut,
                _ => ir::Direction::In,
            };
            let (parts, dsts) = if dir == ir::Direction::In {
                let want = if pt.is_scalar() { Some(&pt) } else { None };
                let v = self.expr(scope, a, want)?;
                let v = if let (Val::Const(_, Ty::InfInt), Some(t)) = (&v, want) { self.convert(v, t, a.span)? } else { v };
                (self.flatten(v, a.span)?, vec![])
            } else {
                let place = self.place(scope, a)?;
                let mut parts = vec![];
                self.flatten_place(&place, &mut parts);
                let mut dsts = vec![];
                self.flatten_lvalues(&place, &mut dsts);
                (parts, dsts)
            };
            let width: u32 = parts.iter().map(|e| e.width()).sum();
            sig.push((dir, width));
            irargs.push(ir::ExternArg { dir, width, parts, dsts });
        }
        let rt = self.resolve_type(&tscope, &proto.ret)?;
        let (ret, retval) = match rt.scalar_width() {
            Some(w) if !matches!(rt, Ty::Void) => {
                let loc = self.alloc_scalar(w);
                (Some(ir::LValue::Static(loc)), Val::Rv(ir::Expr::Load(ir::LValue::Static(loc)), rt.clone()))
            }
            _ => (None, Val::DontCare),
        };
        let method = ir::ExternMethod { name: proto.name.name.clone(), args: sig, ret: ret.as_ref().map(|_| rt.scalar_width().unwrap()) };
        let methods = &mut self.externs[inst as usize].methods;
        let midx = match methods.iter().position(|x| *x == method) {
            Some(i) => i,
            None => {
                methods.push(method);
                methods.len() - 1
            }
        } as u32;
        self.emit(ir::Stmt::ExternCall { inst, method: midx, args: irargs, ret });
        Ok(retval)
    }

    fn hash_algo(&mut self, scope: &Rc<Scope>, e: &ast::Expr) -> PResult<ir::HashAlgo> {
        let name = match &e.kind {
            ExprKind::Member(_, m) => m.name.clone(),
            ExprKind::Name(n) => n.name.clone(),
            _ => {
                let _ = scope;
                return err(e.span, "expected a HashAlgorithm member");
            }
        };
        Ok(match name.as_str() {
            "crc32" => ir::HashAlgo::Crc32,
            "crc32_custom" => ir::HashAlgo::Crc32Custom,
            "crc16" => ir::HashAlgo::Crc16,
            "crc16_custom" => ir::HashAlgo::Crc16Custom,
            "random" => ir::HashAlgo::Random,
            "identity" => ir::HashAlgo::Identity,
            "csum16" => ir::HashAlgo::Csum16,
            "xor16" => ir::HashAlgo::Xor16,
            other => return err(e.span, format!("unknown hash algorithm `{other}`")),
        })
    }

    fn field_list_arg(&mut self, scope: &Rc<Scope>, e: &ast::Expr) -> PResult<u32> {
        match self.expr(scope, e, Some(&Ty::Bit(8)))? {
            Val::Const(c, _) => c.to_u32().ok_or_else(|| Diagnostic::new(e.span, "field list index out of range")),
            _ => err(e.span, "the field list index must be a constant"),
        }
    }

    /// Old-style `resubmit(data)`/`recirculate(data)`/`clone3(..., data)`: preserve the fields named in data.
    fn synth_field_list(&mut self, scope: &Rc<Scope>, e: &ast::Expr) -> PResult<Option<u32>> {
        let v = self.expr(scope, e, None)?;
        let mut locs = vec![];
        let mut add = |p: &Place| locs.extend(p.scalar_locs());
        match &v {
            Val::Place(p) => add(p),
            Val::List(vs) => {
                for x in vs {
                    if let Val::Place(p) = x {
                        add(p);
                    }
                }
            }
            Val::Struct(fs, _) => {
                for (_, x) in fs {
                    if let Val::Place(p) = x {
                        add(p);
                    }
                }
            }
            _ => {}
        }
        if locs.is_empty() {
            return Ok(None);
        }
        let id = 1000 + self.field_lists.len() as u32;
        self.field_lists.insert(id, locs);
        Ok(Some(id))
    }

    fn extern_function(
        &mut self,
        scope: &Rc<Scope>,
        f: &Rc<ast::FunctionProto>,
        targs: &[Ty],
        args: &[ast::Argument],
        hint: Option<&Ty>,
        span: Span,
    ) -> PResult<Val> {
        let name = f.name.name.as_str();
        let ordered = self.order_args(&f.params, args, span)?;
        let a = |i: usize| -> PResult<&ast::Expr> {
            ordered.get(i).copied().flatten().ok_or_else(|| Diagnostic::new(span, format!("`{name}` needs argument {}", i + 1)))
        };
        let b = |x: ir::Builtin| ir::Stmt::Builtin(x);
        match name {
            "mark_to_drop" => {
                // The argument may be a copy of the standard metadata (an action's `inout` parameter, copied
                // back after the body): then its own fields are written, or the copy-out would undo the drop.
                let own = match ordered.first().copied().flatten() {
                    None => None,
                    Some(arg) => {
                        let field = |m: &str| ast::Expr {
                            kind: ast::ExprKind::Member(Box::new(arg.clone()), ast::Ident { name: m.to_string(), span: arg.span }),
                            span: arg.span,
                        };
                        let (spec, st) = self.scalar_place(scope, &field("egress_spec"))?;
                        let (grp, gt) = self.scalar_place(scope, &field("mcast_grp"))?;
                        let real = std_meta_locs(self.std_meta.as_ref()).egress_spec;
                        if matches!(&spec, ir::LValue::Static(l) if *l == real && real.width > 0) {
                            None
                        } else {
                            Some([(spec, st, 511u64), (grp, gt, 0)])
                        }
                    }
                };
                match own {
                    None => self.emit(b(ir::Builtin::MarkToDrop)),
                    Some(fields) => {
                        for (dst, t, v) in fields {
                            let w = t.scalar_width().unwrap_or(0);
                            self.emit(ir::Stmt::Assign { dst, src: ir::Expr::konst(w, v) });
                        }
                    }
                }
            }
            "verify" => {
                let cond = self.cond(scope, a(0)?)?;
                let error = match self.expr(scope, a(1)?, Some(&Ty::Error))? {
                    Val::Const(c, _) => c.to_u32().unwrap_or(0),
                    _ => return err(a(1)?.span, "verify needs an error constant"),
                };
                self.emit(b(ir::Builtin::Verify { cond, error }));
            }
            "hash" => {
                self.p4meta.type_specs = true;
                let (dst, dt) = self.scalar_place(scope, a(0)?)?;
                let algo = self.hash_algo(scope, a(1)?)?;
                let (base, _) = self.scalar_arg(scope, a(2)?, None)?;
                let dv = self.expr(scope, a(3)?, None)?;
                let data = self.flatten(dv, a(3)?.span)?;
                let (max, _) = self.scalar_arg(scope, a(4)?, None)?;
                let _ = dt;
                self.emit(b(ir::Builtin::Hash { dst, algo, base, data, max }));
            }
            "verify_checksum" | "verify_checksum_with_payload" | "update_checksum" | "update_checksum_with_payload" => {
                self.p4meta.type_specs = true;
                let cond = self.cond(scope, a(0)?)?;
                let dv = self.expr(scope, a(1)?, None)?;
                let data = self.flatten(dv, a(1)?.span)?;
                let algo = self.hash_algo(scope, a(3)?)?;
                let with_payload = name.ends_with("_with_payload");
                if name.starts_with("verify") {
                    let (field, _) = self.scalar_arg(scope, a(2)?, None)?;
                    self.emit(b(ir::Builtin::VerifyChecksum { cond, data, field, algo, with_payload }));
                } else {
                    let (dst, _) = self.scalar_place(scope, a(2)?)?;
                    self.emit(b(ir::Builtin::UpdateChecksum { cond, data, dst, algo, with_payload }));
                }
            }
            "resubmit" | "recirculate" | "resubmit_preserving_field_list" | "recirculate_preserving_field_list" => {
                let field_list = if name.ends_with("_field_list") {
                    Some(self.field_list_arg(scope, a(0)?)?)
                } else if let Some(Some(d)) = ordered.first() {
                    self.synth_field_list(scope, d)?
                } else {
                    None
                };
                self.emit(b(if name.starts_with("resubmit") {
                    ir::Builtin::Resubmit { field_list }
                } else {
                    ir::Builtin::Recirculate { field_list }
                }));
            }
            "clone" | "clone3" | "clone_preserving_field_list" => {
                let kind = match &a(0)?.kind {
                    ExprKind::Member(_, m) if m.name == "I2E" => ir::CloneKind::I2E,
                    ExprKind::Member(_, m) if m.name == "E2E" => ir::CloneKind::E2E,
                    _ => match self.expr(scope, a(0)?, None)? {
                        Val::Const(c, _) if c.is_zero() => ir::CloneKind::I2E,
                        Val::Const(..) => ir::CloneKind::E2E,
                        _ => return err(a(0)?.span, "clone type must be CloneType.I2E or CloneType.E2E"),
                    },
                };
                let session = self.index32(scope, a(1)?)?;
                let field_list = match name {
                    "clone_preserving_field_list" => Some(self.field_list_arg(scope, a(2)?)?),
                    "clone3" => self.synth_field_list(scope, a(2)?)?,
                    _ => None,
                };
                self.emit(b(ir::Builtin::Clone { kind, session, field_list }));
            }
            "truncate" => {
                let length = self.index32(scope, a(0)?)?;
                self.emit(b(ir::Builtin::Truncate { length }));
            }
            "digest" => {
                let dv = self.expr(scope, a(1)?, None)?;
                let t = match (&dv, targs.first()) {
                    (_, Some(t)) => t.clone(),
                    // `digest(5, { a, b })`: a tuple of the elements' types
                    (Val::List(items), None) => {
                        let mut ts = vec![];
                        for v in items {
                            match v.ty() {
                                Some(t) if !matches!(t, Ty::InfInt) => ts.push(t),
                                _ => return err(a(1)?.span, "the elements of a digested list need types (write them as bit<W> values)"),
                            }
                        }
                        Ty::Tuple(ts)
                    }
                    (v, None) => v.ty().unwrap_or(Ty::Any),
                };
                let dv = self.materialize(dv, &t, a(1)?.span)?;
                let data = self.flatten(dv, a(1)?.span)?;
                let tname = t.to_string();
                let idx = match self.digests.iter().position(|d| d.name == tname) {
                    Some(i) => i as u32,
                    None => {
                        let fields = match &t {
                            Ty::Agg(ag) => ag.fields.iter().map(|f| (f.name.clone(), f.ty.bit_size())).collect(),
                            other => vec![("value".to_string(), other.bit_size())],
                        };
                        let id = self.p4info_id(0x17, &tname);
                        self.digests.push(ir::Digest { name: tname, id, fields });
                        self.digests.len() as u32 - 1
                    }
                };
                self.emit(b(ir::Builtin::Digest { digest: idx, data }));
            }
            "random" => {
                let (dst, t) = self.scalar_place(scope, a(0)?)?;
                let (lo, _) = self.scalar_arg(scope, a(1)?, Some(&t))?;
                let (hi, _) = self.scalar_arg(scope, a(2)?, Some(&t))?;
                self.emit(b(ir::Builtin::Random { dst, lo, hi }));
            }
            "log_msg" => {
                let format = match self.expr(scope, a(0)?, None)? {
                    Val::Str(s) => s,
                    _ => return err(a(0)?.span, "log_msg needs a string"),
                };
                let args = match ordered.get(1).copied().flatten() {
                    Some(d) => {
                        let v = self.expr(scope, d, None)?;
                        self.flatten(v, d.span)?
                    }
                    None => vec![],
                };
                self.emit(b(ir::Builtin::LogMsg { format, args }));
            }
            "assert" | "assume" => {
                let cond = self.cond(scope, a(0)?)?;
                self.emit(b(ir::Builtin::Assert { cond }));
            }
            "static_assert" => {
                let v = self.expr(scope, a(0)?, Some(&Ty::Bool))?;
                return match v {
                    Val::Const(c, _) if !c.is_zero() => Ok(Val::Const(BigInt::from(1), Ty::Bool)),
                    Val::Const(..) => err(span, "static assertion failed"),
                    _ => err(span, "static_assert needs a compile-time condition"),
                };
            }
            _ => {
                // an extern function implemented by the registry
                let inst = match self.externs.iter().position(|e| e.name == name && e.type_name == name) {
                    Some(i) => i as u32,
                    None => {
                        self.externs.push(ir::ExternInstance { name: name.to_string(), type_name: name.to_string(), ctor_args: vec![], methods: vec![] });
                        self.externs.len() as u32 - 1
                    }
                };
                let _ = hint;
                return self.registered_call(scope, inst, f, args, span);
            }
        }
        Ok(Val::DontCare)
    }
}

/// Prefix every `exit` in `stmts` (recursively) with `epilogue`.
pub fn exit_with(stmts: &mut Vec<ir::Stmt>, epilogue: &[ir::Stmt]) {
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

/// Choose the overload whose parameter count fits the arguments (parameters with defaults may be omitted).
fn pick_overload<'a, T: Clone>(cands: impl Iterator<Item = (T, &'a Vec<ast::Param>)>, args: &[ast::Argument]) -> Option<T> {
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
