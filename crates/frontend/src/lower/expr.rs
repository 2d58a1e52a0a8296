//! Types and expressions: resolution, typing, constant folding and lowering to IR expressions.

use super::*;
use crate::ast::{BinOp, ExprKind, TypeKind, UnOp};
use num_bigint::BigInt;
use num_traits::{One, Signed, ToPrimitive, Zero};

fn err<T>(span: Span, msg: impl Into<String>) -> PResult<T> {
    Err(Diagnostic::new(span, msg))
}

impl<'t> Lowerer<'t> {
    // ---------------------------------------------------------------- types

    pub fn resolve_type(&mut self, scope: &Rc<Scope>, t: &ast::Type) -> PResult<Ty> {
        Ok(match &t.kind {
            TypeKind::Bool => Ty::Bool,
            TypeKind::Error => Ty::Error,
            TypeKind::String => Ty::Str,
            TypeKind::MatchKind => Ty::MatchKind,
            TypeKind::Void => Ty::Void,
            TypeKind::Int => Ty::InfInt,
            TypeKind::DontCare => Ty::Any,
            TypeKind::Bit(w) => Ty::Bit(self.const_width(scope, w)?),
            TypeKind::SignedInt(w) => {
                let w = self.const_width(scope, w)?;
                if w == 0 {
                    return err(t.span, "int<0> is not a valid type");
                }
                Ty::Int(w)
            }
            TypeKind::Varbit(w) => Ty::Varbit(self.const_width(scope, w)?),
            TypeKind::Named { name, dot } => {
                let s = if *dot { scope.root_of() } else { scope.clone() };
                match s.lookup(&name.name) {
                    Some(Binding::Type(t)) => t,
                    Some(Binding::ExternType(e)) => Ty::Extern(e, vec![]),
                    Some(Binding::PacketIn) => Ty::PacketIn,
                    Some(Binding::PacketOut) => Ty::PacketOut,
                    Some(Binding::BlockType(_)) | Some(Binding::ParserDecl(..)) | Some(Binding::ControlDecl(..)) => Ty::Any,
                    Some(Binding::GenericAgg(d)) => return err(t.span, format!("generic type `{}` needs type arguments", d.name.name)),
                    _ => return err(name.span, format!("unknown type `{}`", name.name)),
                }
            }
            TypeKind::Specialized { base, args } => {
                let mut targs = vec![];
                for a in args {
                    targs.push(self.resolve_type(scope, a)?);
                }
                match scope.lookup(&base.name) {
                    Some(Binding::GenericAgg(d)) => self.instantiate_generic_agg(scope, &d, targs, t.span)?,
                    Some(Binding::ExternType(e)) => Ty::Extern(e, targs),
                    Some(Binding::BlockType(_)) | Some(Binding::ParserDecl(..)) | Some(Binding::ControlDecl(..)) => Ty::Any,
                    _ => return err(base.span, format!("unknown generic type `{}`", base.name)),
                }
            }
            TypeKind::Stack { elem, size } => {
                let e = self.resolve_type(scope, elem)?;
                let n = self.const_width(scope, size)?;
                if !(e.is_header() || e.is_union()) {
                    return err(t.span, format!("a header stack needs header elements, not {e}"));
                }
                if n == 0 || n > 4096 {
                    return err(size.span, format!("header stack size {n} is out of range (1..4096)"));
                }
                Ty::Stack(Box::new(e), n)
            }
            TypeKind::Tuple(ts) => {
                let mut v = vec![];
                for x in ts {
                    v.push(self.resolve_type(scope, x)?);
                }
                Ty::Tuple(v)
            }
            TypeKind::List(_) => Ty::Any,
        })
    }

    pub fn instantiate_generic_agg(&mut self, scope: &Rc<Scope>, d: &ast::AggregateDecl, targs: Vec<Ty>, span: Span) -> PResult<Ty> {
        if targs.len() != d.type_params.len() {
            return err(span, format!("`{}` takes {} type arguments, {} given", d.name.name, d.type_params.len(), targs.len()));
        }
        let inner = Scope::child(scope);
        for (p, a) in d.type_params.iter().zip(targs.iter()) {
            inner.define(&p.name, Binding::Type(a.clone()));
        }
        let mut fields = vec![];
        for f in &d.fields {
            fields.push(FieldInfo {
                name: f.name.name.clone(),
                ty: self.resolve_type(&inner, &f.ty)?,
                field_lists: annotation_ints(&f.annos, "field_list").unwrap_or_default().into_iter().map(|x| x as u32).collect(),
                match_kind: super::annotation_ident(&f.annos, "match"),
                cp_name: annotation_str(&f.annos, "name"),
                new_type: self.new_type_name(&f.ty),
            });
        }
        let name = format!("{}<{}>", d.name.name, targs.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", "));
        Ok(Ty::Agg(Rc::new(AggInfo { name, kind: d.kind, fields })))
    }

    /// A compile-time non-negative integer (widths, sizes, slice bounds).
    pub fn const_width(&mut self, scope: &Rc<Scope>, e: &ast::Expr) -> PResult<u32> {
        let v = self.const_int(scope, e)?;
        match v.to_u32() {
            Some(w) if w <= 1 << 20 => Ok(w),
            _ => err(e.span, format!("expected a small non-negative constant, found {v}")),
        }
    }

    pub fn const_int(&mut self, scope: &Rc<Scope>, e: &ast::Expr) -> PResult<BigInt> {
        match self.expr(scope, e, None)? {
            Val::Const(v, _) => Ok(v),
            _ => err(e.span, "expected a compile-time constant"),
        }
    }

    // ---------------------------------------------------------------- conversions

    /// Convert a value to a scalar IR expression of type `want` (or its own type when `want` is None).
    pub fn rvalue(&mut self, v: Val, want: Option<&Ty>, span: Span) -> PResult<(ir::Expr, Ty)> {
        let v = match want {
            Some(t) => self.convert(v, t, span)?,
            None => v,
        };
        match v {
            Val::Const(c, t) => {
                let t = if matches!(t, Ty::InfInt) {
                    return err(span, format!("cannot infer a width for the integer constant {c}; cast it, e.g. (bit<32>){c}"));
                } else {
                    t
                };
                let w = t.scalar_width().unwrap_or(32);
                Ok((ir::Expr::Const(to_value(&c, w)), t))
            }
            Val::Rv(e, t) => Ok((e, t)),
            Val::Place(Place::Scalar(lv, t)) => Ok((ir::Expr::Load(lv), t)),
            Val::Place(Place::Varbit { data, max, .. }) => Ok((ir::Expr::Load(data), Ty::Varbit(max))),
            Val::TableResult(..) => err(span, "a table apply result must be used as `.hit`, `.miss` or `.action_run`"),
            Val::Place(p) => err(span, format!("expected a scalar value, found a value of type {}", p.ty())),
            _ => err(span, "expected a value"),
        }
    }

    /// Implicit conversion of `v` to type `t` (integer constants get the width; same types pass).
    pub fn convert(&mut self, v: Val, t: &Ty, span: Span) -> PResult<Val> {
        match (&v, t) {
            (_, Ty::Any) | (_, Ty::Var(_)) => Ok(v),
            (Val::Const(c, Ty::InfInt), Ty::Bit(_) | Ty::Int(_)) => Ok(Val::Const(normalize(c, t), t.clone())),
            (Val::Const(c, Ty::InfInt), Ty::Enum(e)) if e.repr.is_some() => Ok(Val::Const(normalize(c, t), t.clone())),
            (Val::Const(_, Ty::InfInt), Ty::InfInt) => Ok(v),
            (Val::Const(c, Ty::InfInt), Ty::Bool) => err(span, format!("cannot use the integer {c} as a bool")),
            _ => {
                if let Some(vt) = v.ty() {
                    if matches!(t, Ty::Bit(_) | Ty::Int(_) | Ty::Bool) && !vt.same(t) {
                        // a serializable enum converts to its underlying type implicitly
                        if let Ty::Enum(e) = &vt {
                            if let Some(r) = &e.repr {
                                if r.same(t) {
                                    return Ok(match v {
                                        Val::Const(c, _) => Val::Const(c, t.clone()),
                                        other => {
                                            let (x, _) = self.rvalue(other, None, span)?;
                                            Val::Rv(x, t.clone())
                                        }
                                    });
                                }
                            }
                        }
                        return err(span, format!("type mismatch: expected {t}, found {vt}"));
                    }
                }
                Ok(v)
            }
        }
    }

    /// A boolean condition.
    pub fn cond(&mut self, scope: &Rc<Scope>, e: &ast::Expr) -> PResult<ir::Expr> {
        let v = self.expr(scope, e, Some(&Ty::Bool))?;
        let (x, t) = self.rvalue(v, None, e.span)?;
        if !matches!(t, Ty::Bool) {
            return err(e.span, format!("condition must be a bool, found {t}"));
        }
        Ok(x)
    }

    /// Lower an expression that must denote a storage location.
    pub fn place(&mut self, scope: &Rc<Scope>, e: &ast::Expr) -> PResult<Place> {
        match self.expr(scope, e, None)? {
            Val::Place(p) => Ok(p),
            _ => err(e.span, "this expression cannot be assigned to (not an l-value)"),
        }
    }

    // ---------------------------------------------------------------- expressions

    pub fn expr(&mut self, scope: &Rc<Scope>, e: &ast::Expr, hint: Option<&Ty>) -> PResult<Val> {
        let span = e.span;
        match &e.kind {
            ExprKind::Bool(b) => Ok(Val::Const(if *b { BigInt::one() } else { BigInt::zero() }, Ty::Bool)),
            ExprKind::Int(lit) => Ok(match lit.width {
                Some((w, signed)) => {
                    let t = if signed { Ty::Int(w) } else { Ty::Bit(w) };
                    if w == 0 && !signed {
                        Val::Const(BigInt::zero(), Ty::Bit(0))
                    } else {
                        Val::Const(normalize(&lit.value, &t), t)
                    }
                }
                None => Val::Const(lit.value.clone(), Ty::InfInt),
            }),
            ExprKind::Str(s) => Ok(Val::Str(s.clone())),
            ExprKind::Name(id) => self.name(scope, id),
            ExprKind::DotName(id) => self.name(&scope.root_of(), id),
            ExprKind::DontCare => Ok(Val::DontCare),
            ExprKind::Default => Ok(Val::DontCare),
            ExprKind::Invalid => Ok(Val::Invalid),
            ExprKind::Type(t) => Ok(Val::Type(self.resolve_type(scope, t)?)),
            ExprKind::Member(base, m) => self.member(scope, base, m, span),
            ExprKind::Index(base, idx) => self.index(scope, base, idx, span),
            ExprKind::Slice(base, hi, lo) => {
                let b = self.expr(scope, base, None)?;
                let hi = self.const_width(scope, hi)?;
                let lo = self.const_width(scope, lo)?;
                self.slice(b, hi, lo, span)
            }
            ExprKind::Unary(op, a) => self.unary(scope, *op, a, hint, span),
            ExprKind::Binary(op, a, b) => self.binary(scope, *op, a, b, hint, span),
            ExprKind::Ternary(c, a, b) => self.ternary(scope, c, a, b, hint, span),
            ExprKind::Cast(t, a) => {
                let t = self.resolve_type(scope, t)?;
                let v = self.expr(scope, a, Some(&t))?;
                self.cast(v, &t, span)
            }
            ExprKind::List(items) => {
                // with an aggregate hint, give each element its field type
                let hints: Vec<Option<Ty>> = match hint {
                    Some(Ty::Agg(a)) => a.fields.iter().map(|f| Some(f.ty.clone())).collect(),
                    Some(Ty::Tuple(ts)) => ts.iter().map(|t| Some(t.clone())).collect(),
                    _ => vec![],
                };
                let mut vs = vec![];
                for (i, it) in items.iter().enumerate() {
                    let h = hints.get(i).cloned().flatten();
                    vs.push(self.expr(scope, it, h.as_ref())?);
                }
                Ok(Val::List(vs))
            }
            ExprKind::StructInit { fields, .. } => {
                let mut vs = vec![];
                for (n, x) in fields {
                    let h = match hint {
                        Some(Ty::Agg(a)) => a.fields.iter().find(|f| f.name == n.name).map(|f| f.ty.clone()),
                        _ => None,
                    };
                    vs.push((n.name.clone(), self.expr(scope, x, h.as_ref())?));
                }
                Ok(Val::Struct(vs, hint.filter(|t| matches!(t, Ty::Agg(_))).cloned()))
            }
            ExprKind::TypedInit { ty, fields } => {
                let t = self.resolve_type(scope, ty)?;
                let inner = ast::Expr { kind: ExprKind::StructInit { fields: fields.clone(), has_rest: false }, span };
                let v = self.expr(scope, &inner, Some(&t))?;
                self.materialize(v, &t, span)
            }
            ExprKind::Call { callee, type_args, args } => self.call(scope, callee, type_args, args, hint, span),
            ExprKind::Construct { .. } => err(span, "an instantiation is not allowed in an expression here"),
            ExprKind::Mask(..) | ExprKind::Range(..) => err(span, "`&&&` and `..` may only appear in keysets"),
        }
    }

    fn name(&mut self, scope: &Rc<Scope>, id: &ast::Ident) -> PResult<Val> {
        match scope.lookup(&id.name) {
            Some(Binding::Var(p)) => Ok(Val::Place(p)),
            Some(Binding::Value(v)) => Ok(*v),
            Some(Binding::Type(t)) => Ok(Val::Type(t)),
            Some(b) => Ok(Val::Binding(b)),
            None => err(id.span, format!("`{}` is not declared", id.name)),
        }
    }

    fn member(&mut self, scope: &Rc<Scope>, base: &ast::Expr, m: &ast::Ident, span: Span) -> PResult<Val> {
        let b = self.expr(scope, base, None)?;
        let name = m.name.as_str();
        match b {
            Val::Binding(Binding::ErrorNs) | Val::Type(Ty::Error) => match self.errors.iter().position(|e| e == name) {
                Some(i) => Ok(Val::Const(BigInt::from(i), Ty::Error)),
                None => err(m.span, format!("`error.{name}` is not declared")),
            },
            Val::Type(Ty::Enum(en)) => match en.members.iter().find(|(n, _)| n == name) {
                Some((_, v)) => Ok(Val::Const(v.clone(), Ty::Enum(en.clone()))),
                None => err(m.span, format!("enum `{}` has no member `{name}`", en.name)),
            },
            Val::Type(t) => match name {
                "minSizeInBits" | "maxSizeInBits" => Ok(Val::Const(BigInt::from(t.bit_size()), Ty::InfInt)),
                "minSizeInBytes" | "maxSizeInBytes" => Ok(Val::Const(BigInt::from(t.bit_size().div_ceil(8)), Ty::InfInt)),
                _ => err(m.span, format!("type {t} has no member `{name}`")),
            },
            Val::Place(p) => self.place_member(p, name, m.span),
            Val::TableResult(t, hit, run) => match name {
                "hit" => Ok(Val::Rv(ir::Expr::Load(ir::LValue::Static(hit)), Ty::Bool)),
                "miss" => Ok(Val::Rv(ir::Expr::Unary { op: ir::UnOp::Not, width: 1, arg: Box::new(ir::Expr::Load(ir::LValue::Static(hit))) }, Ty::Bool)),
                "action_run" => Ok(Val::TableResult(t, hit, run)),
                _ => err(m.span, format!("a table apply result has no member `{name}` (use hit, miss or action_run)")),
            },
            Val::Binding(b) => Ok(Val::Method(Box::new(Val::Binding(b)), name.to_string())),
            Val::Struct(fields, _) => match fields.into_iter().find(|(n, _)| n == name) {
                Some((_, v)) => Ok(v),
                None => err(m.span, format!("no field `{name}`")),
            },
            other => {
                let _ = other;
                err(span, format!("cannot take member `{name}` of this expression"))
            }
        }
    }

    fn place_member(&mut self, p: Place, name: &str, span: Span) -> PResult<Val> {
        match &p {
            Place::Header { .. } | Place::Struct { .. } | Place::Union { .. } => {
                if let Some(f) = p.field(name) {
                    return Ok(Val::Place(f.clone()));
                }
                match (name, &p) {
                    ("isValid" | "setValid" | "setInvalid" | "minSizeInBits" | "minSizeInBytes" | "maxSizeInBits" | "maxSizeInBytes", _) => {
                        Ok(Val::Method(Box::new(Val::Place(p)), name.to_string()))
                    }
                    _ => err(span, format!("type {} has no field `{name}`", p.ty())),
                }
            }
            Place::Stack { id, elem, elems, stride, next_index, .. } => match name {
                "size" => Ok(Val::Const(BigInt::from(elems.len()), Ty::Bit(32))),
                "nextIndex" => Ok(Val::Place(Place::Scalar(ir::LValue::Static(*next_index), Ty::Bit(32)))),
                "lastIndex" => Ok(Val::Rv(
                    ir::Expr::Binary {
                        op: ir::BinOp::Sub,
                        width: 32,
                        signed: false,
                        lhs: Box::new(ir::Expr::Load(ir::LValue::Static(*next_index))),
                        rhs: Box::new(ir::Expr::konst(32, 1)),
                    },
                    Ty::Bit(32),
                )),
                "next" => {
                    let _ = (elem, id, stride);
                    let idx = ir::Expr::Load(ir::LValue::Static(*next_index));
                    Ok(Val::Place(p.stack_element(&idx, true).expect("stack")))
                }
                "last" => {
                    let idx = ir::Expr::Binary {
                        op: ir::BinOp::Sub,
                        width: 32,
                        signed: false,
                        lhs: Box::new(ir::Expr::Load(ir::LValue::Static(*next_index))),
                        rhs: Box::new(ir::Expr::konst(32, 1)),
                    };
                    Ok(Val::Place(p.stack_element(&idx, false).expect("stack")))
                }
                "push_front" | "pop_front" => Ok(Val::Method(Box::new(Val::Place(p)), name.to_string())),
                _ => err(span, format!("a header stack has no member `{name}`")),
            },
            _ => err(span, format!("a value of type {} has no member `{name}`", p.ty())),
        }
    }

    fn index(&mut self, scope: &Rc<Scope>, base: &ast::Expr, idx: &ast::Expr, span: Span) -> PResult<Val> {
        let b = self.expr(scope, base, None)?;
        let i = self.expr(scope, idx, None)?;
        match b {
            Val::Place(stack @ Place::Stack { .. }) => {
                let Place::Stack { elems, .. } = &stack else { unreachable!() };
                match i {
                    Val::Const(c, _) => match c.to_usize() {
                        Some(k) if k < elems.len() => Ok(Val::Place(elems[k].clone())),
                        _ => err(idx.span, format!("index {c} is out of bounds for a stack of size {}", elems.len())),
                    },
                    other => {
                        let (x, t) = self.rvalue(other, None, idx.span)?;
                        let x = match t {
                            Ty::Bit(w) | Ty::Int(w) if w != 32 => ir::Expr::Cast { arg: Box::new(x), width: 32, signed: false },
                            _ => x,
                        };
                        Ok(Val::Place(stack.stack_element(&x, false).expect("stack")))
                    }
                }
            }
            Val::Place(Place::Tuple(ps)) => match i {
                Val::Const(c, _) => match c.to_usize() {
                    Some(k) if k < ps.len() => Ok(Val::Place(ps[k].clone())),
                    _ => err(idx.span, "tuple index out of range"),
                },
                _ => err(idx.span, "a tuple index must be a constant"),
            },
            Val::List(vs) => match i {
                Val::Const(c, _) => match c.to_usize() {
                    Some(k) if k < vs.len() => Ok(vs[k].clone()),
                    _ => err(idx.span, "tuple index out of range"),
                },
                _ => err(idx.span, "a tuple index must be a constant"),
            },
            _ => err(span, "only header stacks and tuples can be indexed"),
        }
    }

    pub fn slice(&mut self, b: Val, hi: u32, lo: u32, span: Span) -> PResult<Val> {
        if hi < lo {
            return err(span, format!("slice [{hi}:{lo}] has its high bound below its low bound"));
        }
        let w = hi - lo + 1;
        match b {
            Val::Const(c, t) => {
                if let Some(tw) = t.scalar_width() {
                    if hi >= tw {
                        return err(span, format!("slice [{hi}:{lo}] is outside the {tw} bits of {t}"));
                    }
                }
                let u = if matches!(t, Ty::InfInt) { c } else { wrap_unsigned(&c, t.scalar_width().unwrap_or(0)) };
                let v = (u >> lo) & ((BigInt::one() << w) - 1);
                Ok(Val::Const(v, Ty::Bit(w)))
            }
            other => {
                let (x, t) = self.rvalue(other, None, span)?;
                let tw = match t {
                    Ty::Bit(w) | Ty::Int(w) => w,
                    _ => return err(span, format!("cannot slice a value of type {t}")),
                };
                if hi >= tw {
                    return err(span, format!("slice [{hi}:{lo}] is outside the {tw} bits of {t}"));
                }
                Ok(Val::Rv(ir::Expr::Slice { arg: Box::new(x), hi, lo }, Ty::Bit(w)))
            }
        }
    }

    /// Slices used as assignment targets: `x[7:0] = v` becomes `x = (x & ~mask) | (v << lo)`.
    pub fn slice_place(&mut self, scope: &Rc<Scope>, base: &ast::Expr, hi: &ast::Expr, lo: &ast::Expr) -> PResult<(Place, u32, u32)> {
        let hi = self.const_width(scope, hi)?;
        let lo = self.const_width(scope, lo)?;
        if let ExprKind::Slice(inner, ihi, ilo) = &base.kind {
            // a slice of a slice (`x[15:0][7:4]`): bits [lo, hi] of the inner slice, counted from its low bit
            let (p, ihi, ilo) = self.slice_place(scope, inner, ihi, ilo)?;
            if ihi < ilo || hi < lo || hi > ihi - ilo {
                return err(base.span, format!("slice [{hi}:{lo}] is outside the slice [{ihi}:{ilo}]"));
            }
            return Ok((p, ilo + hi, ilo + lo));
        }
        let p = self.place(scope, base)?;
        Ok((p, hi, lo))
    }

    fn unary(&mut self, scope: &Rc<Scope>, op: UnOp, a: &ast::Expr, hint: Option<&Ty>, span: Span) -> PResult<Val> {
        let v = self.expr(scope, a, if op == UnOp::Not { Some(&Ty::Bool) } else { hint })?;
        match (op, v) {
            (UnOp::Plus, v) => Ok(v),
            (UnOp::Not, Val::Const(c, Ty::Bool)) => Ok(Val::Const(if c.is_zero() { BigInt::one() } else { BigInt::zero() }, Ty::Bool)),
            (UnOp::Neg, Val::Const(c, t)) => {
                if matches!(t, Ty::Bit(_) | Ty::Int(_) | Ty::InfInt) {
                    Ok(Val::Const(normalize(&(-c), &t), t))
                } else {
                    err(span, format!("cannot negate a value of type {t}"))
                }
            }
            (UnOp::BitNot, Val::Const(c, t)) => match t {
                Ty::Bit(w) => Ok(Val::Const(wrap_unsigned(&!c, w), t)),
                Ty::Int(w) => Ok(Val::Const(wrap_signed(&!c, w), t)),
                _ => err(span, format!("`~` needs a fixed-width operand, found {t}")),
            },
            (op, v) => {
                let (x, t) = self.rvalue(v, None, span)?;
                match (op, &t) {
                    (UnOp::Not, Ty::Bool) => Ok(Val::Rv(ir::Expr::Unary { op: ir::UnOp::Not, width: 1, arg: Box::new(x) }, t)),
                    (UnOp::BitNot, Ty::Bit(w) | Ty::Int(w)) => Ok(Val::Rv(ir::Expr::Unary { op: ir::UnOp::BitNot, width: *w, arg: Box::new(x) }, t.clone())),
                    (UnOp::Neg, Ty::Bit(w) | Ty::Int(w)) => Ok(Val::Rv(ir::Expr::Unary { op: ir::UnOp::Neg, width: *w, arg: Box::new(x) }, t.clone())),
                    _ => err(span, format!("operator {op:?} cannot be applied to {t}")),
                }
            }
        }
    }

    fn ternary(&mut self, scope: &Rc<Scope>, c: &ast::Expr, a: &ast::Expr, b: &ast::Expr, hint: Option<&Ty>, span: Span) -> PResult<Val> {
        let cv = self.expr(scope, c, Some(&Ty::Bool))?;
        if let Val::Const(k, _) = &cv {
            return if k.is_zero() { self.expr(scope, b, hint) } else { self.expr(scope, a, hint) };
        }
        let (cx, _) = self.rvalue(cv, Some(&Ty::Bool), c.span)?;
        let (av, sa) = self.capture(|s| s.expr(scope, a, hint))?;
        let (bv, sb) = self.capture(|s| s.expr(scope, b, hint))?;
        let t = match (av.ty(), bv.ty()) {
            (Some(Ty::InfInt), Some(Ty::InfInt)) | (None, None) => match hint {
                Some(h) => h.clone(),
                None => return err(span, "cannot infer the type of this conditional expression; add a cast"),
            },
            (Some(Ty::InfInt), Some(t)) | (Some(t), Some(Ty::InfInt)) | (Some(t), _) | (_, Some(t)) => t,
        };
        if t.is_scalar() {
            let (ax, _) = self.rvalue(av, Some(&t), a.span)?;
            let (bx, _) = self.rvalue(bv, Some(&t), b.span)?;
            if sa.is_empty() && sb.is_empty() {
                let w = t.scalar_width().unwrap();
                return Ok(Val::Rv(ir::Expr::Cond { cond: Box::new(cx), then: Box::new(ax), else_: Box::new(bx), width: w }, t));
            }
            let tmp = self.alloc(&t, "tmp", span)?;
            let Place::Scalar(lv, _) = &tmp else { unreachable!() };
            let mut then = sa;
            then.push(ir::Stmt::Assign { dst: lv.clone(), src: ax });
            let mut else_ = sb;
            else_.push(ir::Stmt::Assign { dst: lv.clone(), src: bx });
            self.emit(ir::Stmt::If { cond: cx, then, else_ });
            return Ok(Val::Place(tmp));
        }
        // aggregates: materialize into a temporary
        let tmp = self.alloc(&t, "tmp", span)?;
        let (_, mut then) = self.capture(|s| s.assign(&tmp, av, a.span))?;
        let mut t1 = sa;
        t1.append(&mut then);
        let (_, mut else_) = self.capture(|s| s.assign(&tmp, bv, b.span))?;
        let mut e1 = sb;
        e1.append(&mut else_);
        self.emit(ir::Stmt::If { cond: cx, then: t1, else_: e1 });
        Ok(Val::Place(tmp))
    }

    /// Copy a run-time value into a fresh temporary so later side effects cannot change it.
    pub fn snapshot(&mut self, v: Val, span: Span) -> PResult<Val> {
        match &v {
            Val::Rv(..) | Val::Place(_) => {
                let Some(t) = v.ty() else { return Ok(v) };
                if matches!(t, Ty::Varbit(_)) {
                    return Ok(v);
                }
                let tmp = self.alloc(&t, "tmp", span)?;
                self.assign(&tmp, v, span)?;
                Ok(Val::Place(tmp))
            }
            _ => Ok(v),
        }
    }

    /// Turn a list/struct initializer into a temporary of type `t`.
    pub fn materialize(&mut self, v: Val, t: &Ty, span: Span) -> PResult<Val> {
        match v {
            Val::List(_) | Val::Struct(..) | Val::Invalid => {
                let tmp = self.alloc(t, "tmp", span)?;
                self.assign(&tmp, v, span)?;
                Ok(Val::Place(tmp))
            }
            other => Ok(other),
        }
    }

    pub fn cast(&mut self, v: Val, t: &Ty, span: Span) -> PResult<Val> {
        if let (Val::List(_) | Val::Struct(..), Ty::Agg(_) | Ty::Tuple(_)) = (&v, t) {
            return self.materialize(v, t, span);
        }
        let from = match v.ty() {
            Some(f) => f,
            None => return err(span, format!("cannot cast this expression to {t}")),
        };
        if let Val::Const(c, _) = &v {
            let c = match (&from, t) {
                (Ty::Bool, Ty::Bit(1)) | (Ty::Bit(1), Ty::Bool) => c.clone(),
                (Ty::Bool, _) => return err(span, format!("cannot cast bool to {t}")),
                (_, Ty::Bool) if !matches!(from, Ty::Bit(1) | Ty::InfInt) => return err(span, format!("only bit<1> can be cast to bool, not {from}")),
                (Ty::Bit(w), Ty::Int(_)) | (Ty::Bit(w), Ty::Enum(_)) => wrap_unsigned(c, *w),
                _ => c.clone(),
            };
            let c = if let (Ty::Int(w), Ty::Bit(_)) = (&from, t) { wrap_unsigned(&c, *w) } else { c };
            return match t {
                Ty::Bit(_) | Ty::Int(_) | Ty::Bool | Ty::InfInt | Ty::Enum(_) | Ty::Error => Ok(Val::Const(normalize(&c, t), t.clone())),
                _ => err(span, format!("cannot cast a constant to {t}")),
            };
        }
        let (x, from) = self.rvalue(v, None, span)?;
        let fw = from.scalar_width().unwrap_or(0);
        match t {
            Ty::Bit(w) | Ty::Int(w) => {
                if matches!(from, Ty::Bool) && *w != 1 {
                    return err(span, format!("cannot cast bool to {t}"));
                }
                if !from.is_scalar() {
                    return err(span, format!("cannot cast {from} to {t}"));
                }
                if fw == *w {
                    Ok(Val::Rv(x, t.clone()))
                } else {
                    Ok(Val::Rv(ir::Expr::Cast { arg: Box::new(x), width: *w, signed: from.is_signed() }, t.clone()))
                }
            }
            Ty::Bool => {
                if fw != 1 {
                    return err(span, format!("only bit<1> can be cast to bool, not {from}"));
                }
                Ok(Val::Rv(x, Ty::Bool))
            }
            Ty::Enum(e) if e.repr.is_some() => {
                let w = t.scalar_width().unwrap();
                let x = if fw == w { x } else { ir::Expr::Cast { arg: Box::new(x), width: w, signed: from.is_signed() } };
                Ok(Val::Rv(x, t.clone()))
            }
            Ty::Any => Ok(Val::Rv(x, from)),
            _ => {
                if from.same(t) {
                    Ok(Val::Rv(x, t.clone()))
                } else {
                    err(span, format!("cannot cast {from} to {t}"))
                }
            }
        }
    }

    fn binary(&mut self, scope: &Rc<Scope>, op: BinOp, a: &ast::Expr, b: &ast::Expr, hint: Option<&Ty>, span: Span) -> PResult<Val> {
        if matches!(op, BinOp::And | BinOp::Or) {
            return self.logical(scope, op, a, b, span);
        }
        let is_cmp = matches!(op, BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge);
        let sub_hint = if is_cmp || op == BinOp::Concat { None } else { hint };
        let av = self.expr(scope, a, sub_hint)?;
        self.binary_with(scope, op, av, a.span, b, hint, span)
    }

    /// [`Self::binary`] with the left operand lowered already (once: the current value of a compound
    /// assignment's target).
    #[allow(clippy::too_many_arguments)]
    pub fn binary_with(&mut self, scope: &Rc<Scope>, op: BinOp, mut av: Val, a_span: Span, b: &ast::Expr, hint: Option<&Ty>, span: Span) -> PResult<Val> {
        let is_shift = matches!(op, BinOp::Shl | BinOp::Shr);
        let is_cmp = matches!(op, BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge);
        let sub_hint = if is_cmp || op == BinOp::Concat { None } else { hint };
        let (mut bv, side_effects) = self.capture(|l| l.expr(scope, b, if is_shift { None } else { sub_hint }))?;
        if !side_effects.is_empty() {
            // the right operand has side effects (a call): evaluate the left operand first, as P4 requires
            av = self.snapshot(av, a_span)?;
            for st in side_effects {
                self.emit(st);
            }
        }
        // aggregate equality
        if matches!(op, BinOp::Eq | BinOp::Ne) {
            let agg = |v: &Val| matches!(v, Val::Place(p) if !matches!(p, Place::Scalar(..))) || matches!(v, Val::List(_) | Val::Struct(..) | Val::Invalid);
            if agg(&av) || agg(&bv) {
                let eq = self.agg_equal(av, bv, span)?;
                return Ok(if op == BinOp::Ne {
                    Val::Rv(ir::Expr::Unary { op: ir::UnOp::Not, width: 1, arg: Box::new(eq) }, Ty::Bool)
                } else {
                    Val::Rv(eq, Ty::Bool)
                });
            }
        }
        let (ta, tb) = match (av.ty(), bv.ty()) {
            (Some(x), Some(y)) => (x, y),
            _ => return err(span, format!("operator {op:?} needs values on both sides")),
        };
        // constant folding
        if let (Val::Const(x, _), Val::Const(y, _)) = (&av, &bv) {
            if !is_shift && !matches!(op, BinOp::Concat) {
                let t = match (&ta, &tb) {
                    (Ty::InfInt, t) | (t, Ty::InfInt) => t.clone(),
                    (t, u) => {
                        if !t.same(u) {
                            return err(span, format!("operands have different types: {t} and {u}"));
                        }
                        t.clone()
                    }
                };
                // an integer literal next to a fixed-width operand takes its type first (modulo 2^W):
                // `8w255 == -1` holds
                let (x, y) = (normalize(x, &t), normalize(y, &t));
                return self.fold(op, &x, &y, &t, span);
            }
            if is_shift {
                if let (Ty::Bit(w) | Ty::Int(w), false) = (&ta, y.is_negative()) {
                    if *y >= BigInt::from(*w) {
                        // shifted by the width or more: everything shifted out (sign bits for `>>` of a
                        // negative value)
                        let v = if op == BinOp::Shr && x.is_negative() { -BigInt::one() } else { BigInt::zero() };
                        return Ok(Val::Const(normalize(&v, &ta), ta));
                    }
                }
                let n = y.to_u32().ok_or_else(|| Diagnostic::new(b.span, "shift amount out of range"))?;
                let v = if op == BinOp::Shl { x << n } else { x >> n };
                return Ok(Val::Const(normalize(&v, &ta), ta));
            }
            if let (Some(wa), Some(wb)) = (ta.scalar_width(), tb.scalar_width()) {
                if !matches!(ta, Ty::InfInt) && !matches!(tb, Ty::InfInt) {
                    let v = (wrap_unsigned(x, wa) << wb) | wrap_unsigned(y, wb);
                    let t = if ta.is_signed() { Ty::Int(wa + wb) } else { Ty::Bit(wa + wb) };
                    return Ok(Val::Const(normalize(&v, &t), t));
                }
            }
        }
        if op == BinOp::Concat {
            let (ax, ta) = self.rvalue(av, None, a_span)?;
            let (bx, tb) = self.rvalue(bv, None, b.span)?;
            let (wa, wb) = match (&ta, &tb) {
                (Ty::Bit(x) | Ty::Int(x), Ty::Bit(y) | Ty::Int(y)) => (*x, *y),
                _ => return err(span, format!("`++` needs bit-string operands, found {ta} and {tb}")),
            };
            let t = if ta.is_signed() { Ty::Int(wa + wb) } else { Ty::Bit(wa + wb) };
            if wa + wb > ir::MAX_WIDTH {
                return err(span, "concatenation result is too wide");
            }
            return Ok(Val::Rv(ir::Expr::Concat { hi: Box::new(ax), lo: Box::new(bx) }, t));
        }
        if is_shift {
            if matches!(ta, Ty::InfInt) {
                // `1 << n` with a run-time n: use the hint's type
                match hint {
                    Some(h @ (Ty::Bit(_) | Ty::Int(_))) => av = self.convert(av, h, a_span)?,
                    _ => return err(a_span, "the left operand of a shift by a run-time amount needs a width; add a cast"),
                }
            }
            let (ax, ta) = self.rvalue(av, None, a_span)?;
            let bvv = match bv {
                Val::Const(c, Ty::InfInt) => {
                    if c.is_negative() {
                        return err(b.span, "negative shift amount");
                    }
                    let w = (c.bits() as u32).max(1).min(32);
                    let c = if c.bits() > 32 { BigInt::from(u32::MAX) } else { c };
                    Val::Const(c, Ty::Bit(w.max(8)))
                }
                other => other,
            };
            let (bx, tb) = self.rvalue(bvv, None, b.span)?;
            if tb.is_signed() {
                return err(b.span, "a shift amount must be unsigned");
            }
            let w = match ta {
                Ty::Bit(w) | Ty::Int(w) => w,
                _ => return err(span, format!("cannot shift a value of type {ta}")),
            };
            let iop = if op == BinOp::Shl { ir::BinOp::Shl } else { ir::BinOp::Shr };
            return Ok(Val::Rv(ir::Expr::Binary { op: iop, width: w, signed: ta.is_signed(), lhs: Box::new(ax), rhs: Box::new(bx) }, ta));
        }
        // unify operand types
        let t = match (&ta, &tb) {
            (Ty::InfInt, Ty::InfInt) => unreachable!("folded above"),
            (Ty::InfInt, t) => {
                av = self.convert(av, t, a_span)?;
                t.clone()
            }
            (t, Ty::InfInt) => {
                bv = self.convert(bv, t, b.span)?;
                t.clone()
            }
            (t, u) => {
                if !t.same(u) {
                    // serializable enum vs its representation
                    let ok = match (t, u) {
                        (Ty::Enum(e), x) | (x, Ty::Enum(e)) => e.repr.as_ref().map(|r| r.same(x)).unwrap_or(false),
                        _ => false,
                    };
                    if !ok {
                        return err(span, format!("operands of {op:?} have different types: {t} and {u}"));
                    }
                }
                t.clone()
            }
        };
        let (ax, _) = self.rvalue(av, None, a_span)?;
        let (bx, _) = self.rvalue(bv, None, b.span)?;
        let w = t.scalar_width().ok_or_else(|| Diagnostic::new(span, format!("operator {op:?} cannot be applied to {t}")))?;
        let signed = t.is_signed();
        let (iop, result) = match op {
            BinOp::Add => (ir::BinOp::Add, t.clone()),
            BinOp::Sub => (ir::BinOp::Sub, t.clone()),
            BinOp::Mul => (ir::BinOp::Mul, t.clone()),
            BinOp::Div | BinOp::Mod => {
                if signed {
                    return err(span, "division and modulo of signed values are only allowed on constants");
                }
                (if op == BinOp::Div { ir::BinOp::Div } else { ir::BinOp::Mod }, t.clone())
            }
            BinOp::AddSat => (ir::BinOp::AddSat, t.clone()),
            BinOp::SubSat => (ir::BinOp::SubSat, t.clone()),
            BinOp::BitAnd => (ir::BinOp::BitAnd, t.clone()),
            BinOp::BitOr => (ir::BinOp::BitOr, t.clone()),
            BinOp::BitXor => (ir::BinOp::BitXor, t.clone()),
            BinOp::Eq => (ir::BinOp::Eq, Ty::Bool),
            BinOp::Ne => (ir::BinOp::Ne, Ty::Bool),
            BinOp::Lt => (ir::BinOp::Lt, Ty::Bool),
            BinOp::Le => (ir::BinOp::Le, Ty::Bool),
            BinOp::Gt => (ir::BinOp::Gt, Ty::Bool),
            BinOp::Ge => (ir::BinOp::Ge, Ty::Bool),
            _ => unreachable!(),
        };
        if matches!(t, Ty::Bool | Ty::Error | Ty::Enum(_)) && !matches!(iop, ir::BinOp::Eq | ir::BinOp::Ne) {
            let ser_enum = matches!(&t, Ty::Enum(e) if e.repr.is_some());
            if !(ser_enum || (matches!(t, Ty::Bool) && matches!(iop, ir::BinOp::BitAnd | ir::BinOp::BitOr | ir::BinOp::BitXor))) {
                return err(span, format!("operator {op:?} cannot be applied to {t}"));
            }
        }
        let rw = if matches!(result, Ty::Bool) { 1 } else { w };
        Ok(Val::Rv(ir::Expr::Binary { op: iop, width: rw, signed, lhs: Box::new(ax), rhs: Box::new(bx) }, result))
    }

    fn fold(&mut self, op: BinOp, x: &BigInt, y: &BigInt, t: &Ty, span: Span) -> PResult<Val> {
        let b = |v: bool| Val::Const(if v { BigInt::one() } else { BigInt::zero() }, Ty::Bool);
        let r = match op {
            BinOp::Add => x + y,
            BinOp::Sub => x - y,
            BinOp::Mul => x * y,
            BinOp::Div | BinOp::Mod => {
                if y.is_zero() {
                    return err(span, "division by zero");
                }
                if x.is_negative() || y.is_negative() {
                    return err(span, "division and modulo are only defined on non-negative values");
                }
                if op == BinOp::Div {
                    x / y
                } else {
                    x % y
                }
            }
            BinOp::AddSat | BinOp::SubSat => {
                let r = if op == BinOp::AddSat { x + y } else { x - y };
                match t {
                    Ty::Bit(w) => {
                        let max = (BigInt::one() << *w) - 1;
                        if r.is_negative() {
                            BigInt::zero()
                        } else if r > max {
                            max
                        } else {
                            r
                        }
                    }
                    Ty::Int(w) => {
                        let max = (BigInt::one() << (*w - 1)) - 1;
                        let min = -(BigInt::one() << (*w - 1));
                        r.clamp(min, max)
                    }
                    _ => r,
                }
            }
            BinOp::BitAnd => x & y,
            BinOp::BitOr => x | y,
            BinOp::BitXor => x ^ y,
            BinOp::Eq => return Ok(b(x == y)),
            BinOp::Ne => return Ok(b(x != y)),
            BinOp::Lt => return Ok(b(x < y)),
            BinOp::Le => return Ok(b(x <= y)),
            BinOp::Gt => return Ok(b(x > y)),
            BinOp::Ge => return Ok(b(x >= y)),
            _ => return err(span, "unsupported constant operation"),
        };
        if matches!(t, Ty::Bool) {
            return Ok(Val::Const(normalize(&r, t), Ty::Bool));
        }
        Ok(Val::Const(normalize(&r, t), t.clone()))
    }

    fn logical(&mut self, scope: &Rc<Scope>, op: BinOp, a: &ast::Expr, b: &ast::Expr, span: Span) -> PResult<Val> {
        let av = self.expr(scope, a, Some(&Ty::Bool))?;
        if let Val::Const(c, _) = &av {
            let t = !c.is_zero();
            return match (op, t) {
                (BinOp::And, false) => Ok(Val::Const(BigInt::zero(), Ty::Bool)),
                (BinOp::Or, true) => Ok(Val::Const(BigInt::one(), Ty::Bool)),
                _ => {
                    let v = self.expr(scope, b, Some(&Ty::Bool))?;
                    let (x, _) = self.rvalue(v, Some(&Ty::Bool), b.span)?;
                    Ok(Val::Rv(x, Ty::Bool))
                }
            };
        }
        let (ax, _) = self.rvalue(av, Some(&Ty::Bool), a.span)?;
        let (bv, sb) = self.capture(|s| s.expr(scope, b, Some(&Ty::Bool)))?;
        let (bx, tb) = self.rvalue(bv, Some(&Ty::Bool), b.span)?;
        if !matches!(tb, Ty::Bool) {
            return err(b.span, format!("`&&`/`||` need bool operands, found {tb}"));
        }
        let iop = if op == BinOp::And { ir::BinOp::And } else { ir::BinOp::Or };
        if sb.is_empty() {
            return Ok(Val::Rv(ir::Expr::Binary { op: iop, width: 1, signed: false, lhs: Box::new(ax), rhs: Box::new(bx) }, Ty::Bool));
        }
        // the right side has side effects: evaluate it only when needed
        let tmp = self.alloc_scalar(1);
        let lv = ir::LValue::Static(tmp);
        self.emit(ir::Stmt::Assign { dst: lv.clone(), src: ax });
        let mut then = sb;
        then.push(ir::Stmt::Assign { dst: lv.clone(), src: bx });
        let cond = ir::Expr::Load(lv.clone());
        let cond = if op == BinOp::And { cond } else { ir::Expr::Unary { op: ir::UnOp::Not, width: 1, arg: Box::new(cond) } };
        self.emit(ir::Stmt::If { cond, then, else_: vec![] });
        let _ = span;
        Ok(Val::Rv(ir::Expr::Load(lv), Ty::Bool))
    }

    /// Equality of headers, structs, unions, stacks and lists.
    fn agg_equal(&mut self, a: Val, b: Val, span: Span) -> PResult<ir::Expr> {
        let t = a.ty().or_else(|| b.ty()).ok_or_else(|| Diagnostic::new(span, "cannot compare these values"))?;
        let a = self.materialize(a, &t, span)?;
        let b = self.materialize(b, &t, span)?;
        let (Val::Place(pa), Val::Place(pb)) = (a, b) else {
            return err(span, "cannot compare these values");
        };
        self.place_equal(&pa, &pb, span)
    }

    fn place_equal(&mut self, a: &Place, b: &Place, span: Span) -> PResult<ir::Expr> {
        let and = |x: ir::Expr, y: ir::Expr| ir::Expr::Binary { op: ir::BinOp::And, width: 1, signed: false, lhs: Box::new(x), rhs: Box::new(y) };
        let or = |x: ir::Expr, y: ir::Expr| ir::Expr::Binary { op: ir::BinOp::Or, width: 1, signed: false, lhs: Box::new(x), rhs: Box::new(y) };
        let not = |x: ir::Expr| ir::Expr::Unary { op: ir::UnOp::Not, width: 1, arg: Box::new(x) };
        match (a, b) {
            (Place::Scalar(x, t), Place::Scalar(y, _)) => Ok(ir::Expr::Binary {
                op: ir::BinOp::Eq,
                width: 1,
                signed: false,
                lhs: Box::new(ir::Expr::Load(x.clone())),
                rhs: Box::new(ir::Expr::Load(y.clone())),
            })
            .map(|e| {
                let _ = t;
                e
            }),
            (Place::Varbit { data: d1, len: l1, .. }, Place::Varbit { data: d2, len: l2, .. }) => {
                let e1 = ir::Expr::Binary {
                    op: ir::BinOp::Eq,
                    width: 1,
                    signed: false,
                    lhs: Box::new(ir::Expr::Load(d1.clone())),
                    rhs: Box::new(ir::Expr::Load(d2.clone())),
                };
                let e2 = ir::Expr::Binary {
                    op: ir::BinOp::Eq,
                    width: 1,
                    signed: false,
                    lhs: Box::new(ir::Expr::Load(l1.clone())),
                    rhs: Box::new(ir::Expr::Load(l2.clone())),
                };
                Ok(and(e1, e2))
            }
            (Place::Header { valid: v1, fields: f1, .. }, Place::Header { valid: v2, fields: f2, .. }) => {
                let va = ir::Expr::Load(v1.clone());
                let vb = ir::Expr::Load(v2.clone());
                let mut fe = ir::Expr::konst(1, 1);
                for ((_, x), (_, y)) in f1.iter().zip(f2.iter()) {
                    let e = self.place_equal(x, y, span)?;
                    fe = and(fe, e);
                }
                // both invalid, or both valid with equal fields
                Ok(or(and(not(va.clone()), not(vb.clone())), and(and(va, vb), fe)))
            }
            (Place::Struct { fields: f1, .. }, Place::Struct { fields: f2, .. }) | (Place::Union { members: f1, .. }, Place::Union { members: f2, .. }) => {
                let mut e = ir::Expr::konst(1, 1);
                for ((_, x), (_, y)) in f1.iter().zip(f2.iter()) {
                    let fe = self.place_equal(x, y, span)?;
                    e = and(e, fe);
                }
                Ok(e)
            }
            (Place::Stack { elems: e1, .. }, Place::Stack { elems: e2, .. }) => {
                let mut e = ir::Expr::konst(1, 1);
                for (x, y) in e1.iter().zip(e2.iter()) {
                    let fe = self.place_equal(x, y, span)?;
                    e = and(e, fe);
                }
                Ok(e)
            }
            (Place::Tuple(p1), Place::Tuple(p2)) => {
                let mut e = ir::Expr::konst(1, 1);
                for (x, y) in p1.iter().zip(p2.iter()) {
                    let fe = self.place_equal(x, y, span)?;
                    e = and(e, fe);
                }
                Ok(e)
            }
            _ => err(span, format!("cannot compare {} with {}", a.ty(), b.ty())),
        }
    }

    // ---------------------------------------------------------------- assignment

    /// `dst = v` with P4 copy semantics for aggregates.
    pub fn assign(&mut self, dst: &Place, v: Val, span: Span) -> PResult<()> {
        match dst {
            Place::Scalar(lv, t) => {
                if let Val::DontCare = v {
                    return Ok(());
                }
                let (x, vt) = self.rvalue(v, Some(t), span)?;
                if !vt.same(t) {
                    return err(span, format!("cannot assign a value of type {vt} to a location of type {t}"));
                }
                self.emit(ir::Stmt::Assign { dst: lv.clone(), src: x });
                Ok(())
            }
            Place::Varbit { data, len, .. } => match v {
                Val::Place(Place::Varbit { data: d2, len: l2, .. }) => {
                    self.emit(ir::Stmt::Assign { dst: data.clone(), src: ir::Expr::Load(d2) });
                    self.emit(ir::Stmt::Assign { dst: len.clone(), src: ir::Expr::Load(l2) });
                    Ok(())
                }
                _ => err(span, "only a varbit value can be assigned to a varbit field"),
            },
            Place::Header { valid, fields, siblings, .. } => match v {
                Val::Invalid => {
                    self.emit(ir::Stmt::Assign { dst: valid.clone(), src: ir::Expr::konst(1, 0) });
                    Ok(())
                }
                Val::Place(src @ Place::Header { .. }) => {
                    let Place::Header { valid: sv, fields: sf, .. } = &src else { unreachable!() };
                    if fields.len() != sf.len() {
                        return err(span, format!("cannot assign a {} to a {}", src.ty(), dst.ty()));
                    }
                    for ((_, d), (_, s)) in fields.iter().zip(sf.iter()) {
                        self.assign(d, Val::Place(s.clone()), span)?;
                    }
                    self.emit(ir::Stmt::Assign { dst: valid.clone(), src: ir::Expr::Load(sv.clone()) });
                    if !siblings.is_empty() {
                        let then = siblings.iter().map(|s| ir::Stmt::Assign { dst: s.clone(), src: ir::Expr::konst(1, 0) }).collect();
                        self.emit(ir::Stmt::If { cond: ir::Expr::Load(sv.clone()), then, else_: vec![] });
                    }
                    Ok(())
                }
                Val::List(_) | Val::Struct(..) => {
                    self.assign_fields(fields, v, span)?;
                    self.emit(ir::Stmt::Assign { dst: valid.clone(), src: ir::Expr::konst(1, 1) });
                    for s in siblings {
                        self.emit(ir::Stmt::Assign { dst: s.clone(), src: ir::Expr::konst(1, 0) });
                    }
                    Ok(())
                }
                Val::DontCare => Ok(()),
                _ => err(span, format!("cannot assign this value to a header of type {}", dst.ty())),
            },
            Place::Struct { fields, .. } => match v {
                Val::Place(Place::Struct { fields: sf, .. }) => {
                    if fields.len() != sf.len() {
                        return err(span, "struct types differ");
                    }
                    for ((_, d), (_, s)) in fields.iter().zip(sf.iter()) {
                        self.assign(d, Val::Place(s.clone()), span)?;
                    }
                    Ok(())
                }
                Val::List(_) | Val::Struct(..) => self.assign_fields(fields, v, span),
                Val::DontCare => Ok(()),
                _ => err(span, format!("cannot assign this value to a struct of type {}", dst.ty())),
            },
            Place::Union { members, .. } => match v {
                Val::Place(Place::Union { members: sm, .. }) => {
                    for ((_, d), (_, s)) in members.iter().zip(sm.iter()) {
                        // copy each member without touching siblings (validity copied member by member)
                        let (Place::Header { valid: dv, fields: df, .. }, Place::Header { valid: sv, fields: sf, .. }) = (d, s) else {
                            return err(span, "malformed union");
                        };
                        for ((_, x), (_, y)) in df.iter().zip(sf.iter()) {
                            self.assign(x, Val::Place(y.clone()), span)?;
                        }
                        self.emit(ir::Stmt::Assign { dst: dv.clone(), src: ir::Expr::Load(sv.clone()) });
                    }
                    Ok(())
                }
                Val::Invalid => {
                    for (_, m) in members {
                        if let Some(v) = m.header_valid() {
                            self.emit(ir::Stmt::Assign { dst: v, src: ir::Expr::konst(1, 0) });
                        }
                    }
                    Ok(())
                }
                _ => err(span, "cannot assign this value to a header union"),
            },
            Place::Stack { elems, next_index, .. } => match v {
                Val::Place(Place::Stack { elems: se, next_index: sn, .. }) if se.len() == elems.len() => {
                    for (d, s) in elems.iter().zip(se.iter()) {
                        self.assign(d, Val::Place(s.clone()), span)?;
                    }
                    self.emit(ir::Stmt::Assign { dst: ir::LValue::Static(*next_index), src: ir::Expr::Load(ir::LValue::Static(sn)) });
                    Ok(())
                }
                Val::List(vs) if vs.len() == elems.len() => {
                    for (d, s) in elems.iter().zip(vs) {
                        self.assign(d, s, span)?;
                    }
                    Ok(())
                }
                _ => err(span, "cannot assign this value to a header stack"),
            },
            Place::Tuple(ps) => match v {
                Val::List(vs) if vs.len() == ps.len() => {
                    for (d, s) in ps.iter().zip(vs) {
                        self.assign(d, s, span)?;
                    }
                    Ok(())
                }
                Val::Place(Place::Tuple(sp)) if sp.len() == ps.len() => {
                    for (d, s) in ps.iter().zip(sp) {
                        self.assign(d, Val::Place(s), span)?;
                    }
                    Ok(())
                }
                _ => err(span, "cannot assign this value to a tuple"),
            },
        }
    }

    fn assign_fields(&mut self, fields: &[(String, Place)], v: Val, span: Span) -> PResult<()> {
        match v {
            Val::List(vs) => {
                if vs.len() != fields.len() {
                    return err(span, format!("initializer has {} elements, the type has {} fields", vs.len(), fields.len()));
                }
                for ((_, d), s) in fields.iter().zip(vs) {
                    self.assign(d, s, span)?;
                }
                Ok(())
            }
            Val::Struct(fs, _) => {
                for (n, s) in fs {
                    match fields.iter().find(|(f, _)| *f == n) {
                        Some((_, d)) => self.assign(d, s, span)?,
                        None => return err(span, format!("no field named `{n}`")),
                    }
                }
                Ok(())
            }
            _ => err(span, "expected an initializer"),
        }
    }

    /// Scalar parts of a value (for hashing, digests, extern arguments): MSB-first order.
    pub fn flatten(&mut self, v: Val, span: Span) -> PResult<Vec<ir::Expr>> {
        let mut out = vec![];
        self.flatten_into(v, &mut out, span)?;
        Ok(out)
    }

    fn flatten_into(&mut self, v: Val, out: &mut Vec<ir::Expr>, span: Span) -> PResult<()> {
        match v {
            Val::List(vs) => {
                for x in vs {
                    self.flatten_into(x, out, span)?;
                }
                Ok(())
            }
            Val::Struct(fs, _) => {
                for (_, x) in fs {
                    self.flatten_into(x, out, span)?;
                }
                Ok(())
            }
            Val::Place(p) => {
                self.flatten_place(&p, out);
                Ok(())
            }
            Val::Const(_, Ty::InfInt) => err(span, "an integer constant in a list needs a width; add a cast"),
            other => {
                let (x, _) = self.rvalue(other, None, span)?;
                out.push(x);
                Ok(())
            }
        }
    }

    pub fn flatten_place(&self, p: &Place, out: &mut Vec<ir::Expr>) {
        match p {
            Place::Scalar(lv, _) => out.push(ir::Expr::Load(lv.clone())),
            Place::Varbit { data, .. } => out.push(ir::Expr::Load(data.clone())),
            Place::Header { fields, .. } | Place::Struct { fields, .. } | Place::Union { members: fields, .. } => {
                for (_, f) in fields {
                    self.flatten_place(f, out);
                }
            }
            Place::Stack { elems, .. } => elems.iter().for_each(|e| self.flatten_place(e, out)),
            Place::Tuple(ps) => ps.iter().for_each(|e| self.flatten_place(e, out)),
        }
    }

    /// Scalar locations of a place (for out arguments of externs), aligned with `flatten_place`.
    pub fn flatten_lvalues(&self, p: &Place, out: &mut Vec<ir::LValue>) {
        match p {
            Place::Scalar(lv, _) => out.push(lv.clone()),
            Place::Varbit { data, .. } => out.push(data.clone()),
            Place::Header { fields, .. } | Place::Struct { fields, .. } | Place::Union { members: fields, .. } => {
                for (_, f) in fields {
                    self.flatten_lvalues(f, out);
                }
            }
            Place::Stack { elems, .. } => elems.iter().for_each(|e| self.flatten_lvalues(e, out)),
            Place::Tuple(ps) => ps.iter().for_each(|e| self.flatten_lvalues(e, out)),
        }
    }
}
