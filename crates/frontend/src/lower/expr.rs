//! Types and expressions: type resolution, constants, conversions, names, members, indexing, slices
//! and conditionals lowered to IR expressions.

use super::annotations::*;
use super::env::*;
use super::lowerer::{err, Lowerer};
use crate::ast::{self, Span};
use crate::ast::{ExprKind, TypeKind, UnOp};
use crate::diag::PResult;
use crate::types::*;
use num_bigint::BigInt;
use num_traits::{One, ToPrimitive, Zero};
use p4sec_ir as ir;
use std::rc::Rc;

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
                    Some(Binding::BlockType(_))
                    | Some(Binding::ParserDecl(..))
                    | Some(Binding::ControlDecl(..)) => Ty::Any,
                    Some(Binding::GenericAgg(d)) => {
                        return err(
                            t.span,
                            format!("generic type `{}` needs type arguments", d.name.name),
                        )
                    }
                    _ => return err(name.span, format!("unknown type `{}`", name.name)),
                }
            }
            TypeKind::Specialized { base, args } => {
                let mut targs = vec![];
                for a in args {
                    targs.push(self.resolve_type(scope, a)?);
                }
                match scope.lookup(&base.name) {
                    Some(Binding::GenericAgg(d)) => {
                        self.instantiate_generic_agg(scope, &d, targs, t.span)?
                    }
                    Some(Binding::ExternType(e)) => Ty::Extern(e, targs),
                    Some(Binding::BlockType(_))
                    | Some(Binding::ParserDecl(..))
                    | Some(Binding::ControlDecl(..)) => Ty::Any,
                    _ => return err(base.span, format!("unknown generic type `{}`", base.name)),
                }
            }
            TypeKind::Stack { elem, size } => {
                let e = self.resolve_type(scope, elem)?;
                let n = self.const_width(scope, size)?;
                if !(e.is_header() || e.is_union() || e.is_array_element()) {
                    return err(
                        t.span,
                        format!("an array needs elements of a header, header union, bit-string, integer, bool, enum, struct or array type, not {e}"),
                    );
                }
                if n == 0 || n > 4096 {
                    return err(
                        size.span,
                        format!("array size {n} is out of range (1..4096)"),
                    );
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

    pub fn instantiate_generic_agg(
        &mut self,
        scope: &Rc<Scope>,
        d: &ast::AggregateDecl,
        targs: Vec<Ty>,
        span: Span,
    ) -> PResult<Ty> {
        if targs.len() != d.type_params.len() {
            return err(
                span,
                format!(
                    "`{}` takes {} type arguments, {} given",
                    d.name.name,
                    d.type_params.len(),
                    targs.len()
                ),
            );
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
                field_lists: annotation_ints(&f.annos, "field_list")
                    .unwrap_or_default()
                    .into_iter()
                    .map(|x| x as u32)
                    .collect(),
                match_kind: annotation_ident(&f.annos, "match"),
                cp_name: annotation_str(&f.annos, "name"),
                new_type: self.new_type_name(&f.ty),
            });
        }
        let name = format!(
            "{}<{}>",
            d.name.name,
            targs
                .iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        Ok(Ty::Agg(Rc::new(AggInfo {
            name,
            kind: d.kind,
            fields,
        })))
    }

    /// A compile-time non-negative integer (widths, sizes, slice bounds).
    pub fn const_width(&mut self, scope: &Rc<Scope>, e: &ast::Expr) -> PResult<u32> {
        let v = self.const_int(scope, e)?;
        match v.to_u32() {
            Some(w) if w <= 1 << 20 => Ok(w),
            _ => err(
                e.span,
                format!("expected a small non-negative constant, found {v}"),
            ),
        }
    }

    pub fn const_int(&mut self, scope: &Rc<Scope>, e: &ast::Expr) -> PResult<BigInt> {
        match self.expr(scope, e, None)? {
            Val::Const(v, _) => Ok(v),
            _ => err(e.span, "expected a compile-time constant"),
        }
    }

    // ---------------------------------------------------------------- conversions

    /// Convert a value to a scalar IR expression of type `want` (or its own type when `want` is
    /// None).
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
            Val::Place(Place::Varbit { data, max, .. }) => {
                Ok((ir::Expr::Load(data), Ty::Varbit(max)))
            }
            Val::TableResult(..) => err(
                span,
                "a table apply result must be used as `.hit`, `.miss` or `.action_run`",
            ),
            Val::Place(p) => err(
                span,
                format!("expected a scalar value, found a value of type {}", p.ty()),
            ),
            _ => err(span, "expected a value"),
        }
    }

    /// Implicit conversion of `v` to type `t` (integer constants get the width; same types pass).
    pub fn convert(&mut self, v: Val, t: &Ty, span: Span) -> PResult<Val> {
        match (&v, t) {
            (_, Ty::Any) | (_, Ty::Var(_)) => Ok(v),
            (Val::Const(c, Ty::InfInt), Ty::Bit(_) | Ty::Int(_)) => {
                Ok(Val::Const(normalize(c, t), t.clone()))
            }
            (Val::Const(c, Ty::InfInt), Ty::Enum(e)) if e.repr.is_some() => {
                Ok(Val::Const(normalize(c, t), t.clone()))
            }
            (Val::Const(_, Ty::InfInt), Ty::InfInt) => Ok(v),
            (Val::Const(c, Ty::InfInt), Ty::Bool) => {
                err(span, format!("cannot use the integer {c} as a bool"))
            }
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
            _ => err(
                e.span,
                "this expression cannot be assigned to (not an l-value)",
            ),
        }
    }

    // ---------------------------------------------------------------- expressions

    pub fn expr(&mut self, scope: &Rc<Scope>, e: &ast::Expr, hint: Option<&Ty>) -> PResult<Val> {
        let span = e.span;
        match &e.kind {
            ExprKind::Bool(b) => Ok(Val::Const(
                if *b { BigInt::one() } else { BigInt::zero() },
                Ty::Bool,
            )),
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
                // `(list<T>) {a, b}`: the elements converted to `T`
                if let (ast::TypeKind::List(et), ExprKind::List(items)) = (&t.kind, &a.kind) {
                    let et = self.resolve_type(scope, et)?;
                    let vs = self.ordered_elements(items.len(), span, |l, i| {
                        let v = l.expr(scope, &items[i], Some(&et))?;
                        Ok(((), l.convert(v, &et, items[i].span)?))
                    })?;
                    return Ok(Val::List(vs.into_iter().map(|(_, v)| v).collect()));
                }
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
                let vs = self.ordered_elements(items.len(), span, |l, i| {
                    let h = hints.get(i).cloned().flatten();
                    Ok(((), l.expr(scope, &items[i], h.as_ref())?))
                })?;
                Ok(Val::List(vs.into_iter().map(|(_, v)| v).collect()))
            }
            ExprKind::ListRest(items) => {
                // `{a, b, ...}`: the fields after the given ones take their default values
                let tys: Vec<Ty> = match hint {
                    Some(Ty::Agg(a)) if a.kind != ast::AggregateKind::HeaderUnion => a.fields.iter().map(|f| f.ty.clone()).collect(),
                    Some(Ty::Tuple(ts)) => ts.clone(),
                    _ => return err(span, "a `...` initializer needs a struct, header or tuple type from its context (a declaration or assignment)"),
                };
                if items.len() > tys.len() {
                    return err(
                        span,
                        format!(
                            "initializer has {} elements, the type has {} fields",
                            items.len(),
                            tys.len()
                        ),
                    );
                }
                let mut vs: Vec<Val> = self
                    .ordered_elements(items.len(), span, |l, i| {
                        Ok(((), l.expr(scope, &items[i], Some(&tys[i]))?))
                    })?
                    .into_iter()
                    .map(|(_, v)| v)
                    .collect();
                for t in &tys[items.len()..] {
                    vs.push(self.default_value(t, span)?);
                }
                Ok(Val::List(vs))
            }
            ExprKind::StructInit { fields, has_rest } => {
                let mut vs = self.ordered_elements(fields.len(), span, |l, i| {
                    let (n, x) = &fields[i];
                    let h = match hint {
                        Some(Ty::Agg(a)) => a
                            .fields
                            .iter()
                            .find(|f| f.name == n.name)
                            .map(|f| f.ty.clone()),
                        _ => None,
                    };
                    Ok((n.name.clone(), l.expr(scope, x, h.as_ref())?))
                })?;
                if *has_rest {
                    let Some(Ty::Agg(a)) = hint.filter(
                        |t| matches!(t, Ty::Agg(a) if a.kind != ast::AggregateKind::HeaderUnion),
                    ) else {
                        return err(span, "a `...` initializer needs a struct or header type from its context (a declaration or assignment)");
                    };
                    for f in &a.fields {
                        if !vs.iter().any(|(n, _)| *n == f.name) {
                            let d = self.default_value(&f.ty, span)?;
                            vs.push((f.name.clone(), d));
                        }
                    }
                }
                Ok(Val::Struct(
                    vs,
                    hint.filter(|t| matches!(t, Ty::Agg(_))).cloned(),
                ))
            }
            ExprKind::TypedInit { ty, fields } => {
                let t = self.resolve_type(scope, ty)?;
                let inner = ast::Expr {
                    kind: ExprKind::StructInit {
                        fields: fields.clone(),
                        has_rest: false,
                    },
                    span,
                };
                let v = self.expr(scope, &inner, Some(&t))?;
                self.materialize(v, &t, span)
            }
            ExprKind::Call {
                callee,
                type_args,
                args,
            } => self.call(scope, callee, type_args, args, hint, span),
            ExprKind::Construct { .. } => err(
                span,
                "an instantiation is not allowed in an expression here",
            ),
            ExprKind::Mask(..) | ExprKind::Range(..) => {
                err(span, "`&&&` and `..` may only appear in keysets")
            }
        }
    }

    /// The default value of a type (P4_16 1.2.5 "default values"): 0 for bit-strings, integers and
    /// serializable enums, `false`, the first member of a plain enum, `error.NoError`, an invalid
    /// header or union, and a struct, tuple or stack of the defaults of its parts.
    pub(super) fn default_value(&mut self, t: &Ty, span: Span) -> PResult<Val> {
        Ok(match t {
            Ty::Bit(_) | Ty::Int(_) | Ty::Bool | Ty::Enum(_) | Ty::Error => {
                Val::Const(num_bigint::BigInt::from(0), t.clone())
            }
            Ty::Agg(a) if a.kind == ast::AggregateKind::Struct => {
                let mut vs = vec![];
                for f in &a.fields {
                    vs.push(self.default_value(&f.ty, span)?);
                }
                Val::List(vs)
            }
            Ty::Agg(_) => Val::Invalid,
            Ty::Stack(e, n) if e.is_header() || e.is_union() => {
                Val::List((0..*n).map(|_| Val::Invalid).collect())
            }
            Ty::Stack(e, n) => {
                let d = self.default_value(e, span)?;
                Val::List((0..*n).map(|_| d.clone()).collect())
            }
            Ty::Tuple(ts) => {
                let mut vs = vec![];
                for t in ts {
                    vs.push(self.default_value(t, span)?);
                }
                Val::List(vs)
            }
            other => {
                return err(
                    span,
                    format!("p4sec has no default value for type {other} in a `...` initializer"),
                )
            }
        })
    }

    pub(super) fn name(&mut self, scope: &Rc<Scope>, id: &ast::Ident) -> PResult<Val> {
        match scope.lookup(&id.name) {
            Some(Binding::Var(p)) => Ok(Val::Place(p)),
            Some(Binding::Value(v)) => Ok(*v),
            Some(Binding::Type(t)) => Ok(Val::Type(t)),
            Some(b) => Ok(Val::Binding(b)),
            None => err(id.span, format!("`{}` is not declared", id.name)),
        }
    }

    pub(super) fn member(
        &mut self,
        scope: &Rc<Scope>,
        base: &ast::Expr,
        m: &ast::Ident,
        span: Span,
    ) -> PResult<Val> {
        let b = self.expr(scope, base, None)?;
        let name = m.name.as_str();
        match b {
            Val::Binding(Binding::ErrorNs) | Val::Type(Ty::Error) => {
                match self.errors.iter().position(|e| e == name) {
                    Some(i) => Ok(Val::Const(BigInt::from(i), Ty::Error)),
                    None => err(m.span, format!("`error.{name}` is not declared")),
                }
            }
            Val::Type(Ty::Enum(en)) => match en.members.iter().find(|(n, _)| n == name) {
                Some((_, v)) => Ok(Val::Const(v.clone(), Ty::Enum(en.clone()))),
                None => err(m.span, format!("enum `{}` has no member `{name}`", en.name)),
            },
            Val::Type(t) => match name {
                "minSizeInBits" | "maxSizeInBits" => {
                    Ok(Val::Const(BigInt::from(t.bit_size()), Ty::InfInt))
                }
                "minSizeInBytes" | "maxSizeInBytes" => Ok(Val::Const(
                    BigInt::from(t.bit_size().div_ceil(8)),
                    Ty::InfInt,
                )),
                _ => err(m.span, format!("type {t} has no member `{name}`")),
            },
            Val::Place(p) => self.place_member(p, name, m.span),
            Val::TableResult(t, hit, run) => match name {
                "hit" => Ok(Val::Rv(ir::Expr::Load(ir::LValue::Static(hit)), Ty::Bool)),
                "miss" => Ok(Val::Rv(
                    ir::Expr::Unary {
                        op: ir::UnOp::Not,
                        width: 1,
                        arg: Box::new(ir::Expr::Load(ir::LValue::Static(hit))),
                    },
                    Ty::Bool,
                )),
                "action_run" => Ok(Val::TableResult(t, hit, run)),
                _ => err(
                    m.span,
                    format!(
                        "a table apply result has no member `{name}` (use hit, miss or action_run)"
                    ),
                ),
            },
            Val::Binding(b) => Ok(Val::Method(Box::new(Val::Binding(b)), name.to_string())),
            Val::Struct(fields, _) => match fields.into_iter().find(|(n, _)| n == name) {
                Some((_, v)) => Ok(v),
                None => err(m.span, format!("no field `{name}`")),
            },
            other => {
                let _ = other;
                err(
                    span,
                    format!("cannot take member `{name}` of this expression"),
                )
            }
        }
    }

    pub(super) fn place_member(&mut self, p: Place, name: &str, span: Span) -> PResult<Val> {
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
            Place::Stack { elem, elems, .. } if !(elem.is_header() || elem.is_union()) => match name {
                "size" => Ok(Val::Const(BigInt::from(elems.len()), Ty::Bit(32))),
                _ => err(span, format!("`{name}` is a member of header stacks only; an array of {elem} has only `size`")),
            },
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

    pub(super) fn index(
        &mut self,
        scope: &Rc<Scope>,
        base: &ast::Expr,
        idx: &ast::Expr,
        span: Span,
    ) -> PResult<Val> {
        let b = self.expr(scope, base, None)?;
        let i = self.expr(scope, idx, None)?;
        match b {
            Val::Place(stack @ Place::Stack { .. }) => {
                let Place::Stack { elems, .. } = &stack else {
                    unreachable!()
                };
                match i {
                    Val::Const(c, _) => match c.to_usize() {
                        Some(k) if k < elems.len() => Ok(Val::Place(elems[k].clone())),
                        _ => err(
                            idx.span,
                            format!(
                                "index {c} is out of bounds for a stack of size {}",
                                elems.len()
                            ),
                        ),
                    },
                    other => {
                        let Place::Stack { elem, .. } = &stack else {
                            unreachable!()
                        };
                        if !elems[0].is_static() && (elem.is_header() || elem.is_union()) {
                            return err(
                                idx.span,
                                "p4sec supports a run-time index into a header stack only when the element that holds it is chosen with a constant index",
                            );
                        }
                        if !(elem.is_header() || elem.is_union()) && elem.holds_header() {
                            return err(idx.span, format!("p4sec indexes an array of {elem} (its elements hold headers) only with constant indices"));
                        }
                        let (x, t) = self.rvalue(other, None, idx.span)?;
                        let x = match t {
                            Ty::Bit(w) | Ty::Int(w) if w != 32 => ir::Expr::Cast {
                                arg: Box::new(x),
                                width: 32,
                                signed: false,
                            },
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
            return err(
                span,
                format!("slice [{hi}:{lo}] has its high bound below its low bound"),
            );
        }
        let w = hi - lo + 1;
        match b {
            Val::Const(c, t) => {
                if let Some(tw) = t.scalar_width() {
                    if hi >= tw {
                        return err(
                            span,
                            format!("slice [{hi}:{lo}] is outside the {tw} bits of {t}"),
                        );
                    }
                }
                let u = if matches!(t, Ty::InfInt) {
                    c
                } else {
                    wrap_unsigned(&c, t.scalar_width().unwrap_or(0))
                };
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
                    return err(
                        span,
                        format!("slice [{hi}:{lo}] is outside the {tw} bits of {t}"),
                    );
                }
                Ok(Val::Rv(
                    ir::Expr::Slice {
                        arg: Box::new(x),
                        hi,
                        lo,
                    },
                    Ty::Bit(w),
                ))
            }
        }
    }

    /// Slices used as assignment targets: `x[7:0] = v` becomes `x = (x & ~mask) | (v << lo)`.
    pub fn slice_place(
        &mut self,
        scope: &Rc<Scope>,
        base: &ast::Expr,
        hi: &ast::Expr,
        lo: &ast::Expr,
    ) -> PResult<(Place, u32, u32)> {
        let hi = self.const_width(scope, hi)?;
        let lo = self.const_width(scope, lo)?;
        if let ExprKind::Slice(inner, ihi, ilo) = &base.kind {
            // a slice of a slice (`x[15:0][7:4]`): bits [lo, hi] of the inner slice, counted from
            // its low bit
            let (p, ihi, ilo) = self.slice_place(scope, inner, ihi, ilo)?;
            if ihi < ilo || hi < lo || hi > ihi - ilo {
                return err(
                    base.span,
                    format!("slice [{hi}:{lo}] is outside the slice [{ihi}:{ilo}]"),
                );
            }
            return Ok((p, ilo + hi, ilo + lo));
        }
        let p = self.place(scope, base)?;
        if let Place::Scalar(_, t) = &p {
            let w = t.scalar_width().unwrap_or(0);
            if hi >= w || hi < lo {
                return err(
                    base.span,
                    format!("slice [{hi}:{lo}] is outside the {w} bits of {t}"),
                );
            }
        }
        Ok((p, hi, lo))
    }

    pub(super) fn unary(
        &mut self,
        scope: &Rc<Scope>,
        op: UnOp,
        a: &ast::Expr,
        hint: Option<&Ty>,
        span: Span,
    ) -> PResult<Val> {
        let v = self.expr(
            scope,
            a,
            if op == UnOp::Not {
                Some(&Ty::Bool)
            } else {
                hint
            },
        )?;
        match (op, v) {
            (UnOp::Plus, v) => Ok(v),
            (UnOp::Not, Val::Const(c, Ty::Bool)) => Ok(Val::Const(
                if c.is_zero() {
                    BigInt::one()
                } else {
                    BigInt::zero()
                },
                Ty::Bool,
            )),
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
                    (UnOp::Not, Ty::Bool) => Ok(Val::Rv(
                        ir::Expr::Unary {
                            op: ir::UnOp::Not,
                            width: 1,
                            arg: Box::new(x),
                        },
                        t,
                    )),
                    (UnOp::BitNot, Ty::Bit(w) | Ty::Int(w)) => Ok(Val::Rv(
                        ir::Expr::Unary {
                            op: ir::UnOp::BitNot,
                            width: *w,
                            arg: Box::new(x),
                        },
                        t.clone(),
                    )),
                    (UnOp::Neg, Ty::Bit(w) | Ty::Int(w)) => Ok(Val::Rv(
                        ir::Expr::Unary {
                            op: ir::UnOp::Neg,
                            width: *w,
                            arg: Box::new(x),
                        },
                        t.clone(),
                    )),
                    _ => err(span, format!("operator {op:?} cannot be applied to {t}")),
                }
            }
        }
    }

    pub(super) fn ternary(
        &mut self,
        scope: &Rc<Scope>,
        c: &ast::Expr,
        a: &ast::Expr,
        b: &ast::Expr,
        hint: Option<&Ty>,
        span: Span,
    ) -> PResult<Val> {
        let cv = self.expr(scope, c, Some(&Ty::Bool))?;
        if let Val::Const(k, _) = &cv {
            return if k.is_zero() {
                self.expr(scope, b, hint)
            } else {
                self.expr(scope, a, hint)
            };
        }
        let (cx, _) = self.rvalue(cv, Some(&Ty::Bool), c.span)?;
        let (av, sa) = self.capture(|s| s.expr(scope, a, hint))?;
        let (bv, sb) = self.capture(|s| s.expr(scope, b, hint))?;
        let t = match (av.ty(), bv.ty()) {
            (Some(Ty::InfInt), Some(Ty::InfInt)) | (None, None) => match hint {
                Some(h) => h.clone(),
                None => {
                    return err(
                        span,
                        "cannot infer the type of this conditional expression; add a cast",
                    )
                }
            },
            (Some(Ty::InfInt), Some(t))
            | (Some(t), Some(Ty::InfInt))
            | (Some(t), _)
            | (_, Some(t)) => t,
        };
        if t.is_scalar() {
            let (ax, _) = self.rvalue(av, Some(&t), a.span)?;
            let (bx, _) = self.rvalue(bv, Some(&t), b.span)?;
            if sa.is_empty() && sb.is_empty() {
                let w = t.scalar_width().unwrap();
                return Ok(Val::Rv(
                    ir::Expr::Cond {
                        cond: Box::new(cx),
                        then: Box::new(ax),
                        else_: Box::new(bx),
                        width: w,
                    },
                    t,
                ));
            }
            let tmp = self.alloc(&t, "tmp", span)?;
            let Place::Scalar(lv, _) = &tmp else {
                unreachable!()
            };
            let mut then = sa;
            then.push(ir::Stmt::Assign {
                dst: lv.clone(),
                src: ax,
            });
            let mut else_ = sb;
            else_.push(ir::Stmt::Assign {
                dst: lv.clone(),
                src: bx,
            });
            self.emit(ir::Stmt::If {
                cond: cx,
                then,
                else_,
            });
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
        self.emit(ir::Stmt::If {
            cond: cx,
            then: t1,
            else_: e1,
        });
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
}
