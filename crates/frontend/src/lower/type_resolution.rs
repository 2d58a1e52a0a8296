//! Type resolution: a type as written (named, specialized, sized, generic) resolved to its `Ty`,
//! generic structs and headers instantiated, and the constant widths and integers types take.

use super::annotations::*;
use super::env::*;
use super::lowerer::{err, Lowerer};
use crate::ast::TypeKind;
use crate::ast::{self, Span};
use crate::diag::PResult;
use crate::semantic_types::*;
use num_bigint::BigInt;
use num_traits::ToPrimitive;
use std::rc::Rc;

impl<'t> Lowerer<'t> {
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
}
