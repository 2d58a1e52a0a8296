//! What the front end notes for P4Info while lowering: serializable enums and new types the P4Info
//! objects use, and each object's annotations (structured ones evaluated as constants).

use super::annotations::*;
use super::env::*;
use super::lowerer::{err, Lowerer};
use crate::ast::{self};
use crate::diag::PResult;
use crate::semantic_types::*;
use num_traits::{ToPrimitive, Zero};
use p4sec_ir as ir;
use std::rc::Rc;

impl<'t> Lowerer<'t> {
    /// Record the P4Info annotations of the object `key` (see [`ir::p4info::P4InfoMeta::annos`]).
    /// A P4Info object uses type `t`: a serializable enum goes into `type_info`.
    pub fn note_type(&mut self, t: &Ty) {
        if let Ty::Enum(e) = t {
            if let Some(v) = self.ser_enums.get(&e.name) {
                self.p4meta
                    .serializable_enums
                    .insert(e.name.clone(), v.clone());
            }
        }
    }

    /// The name of a declared type that is a new type (`type bit<W> T`).
    pub fn new_type_name(&self, ty: &ast::Type) -> Option<String> {
        match &ty.kind {
            ast::TypeKind::Named { name, .. } if self.newtypes.contains_key(&name.name) => {
                Some(name.name.clone())
            }
            _ => None,
        }
    }

    /// An object `key` of declared type `ty`: a new type gives it a P4Info `type_name`.
    pub fn note_type_name(&mut self, key: String, ty: &ast::Type) {
        if let Some(n) = self.new_type_name(ty) {
            self.note_new_type(key, &n);
        }
    }

    pub fn note_new_type(&mut self, key: String, n: &str) {
        if let Some(v) = self.newtypes.get(n) {
            self.p4meta.new_types.insert(n.to_string(), v.clone());
            self.p4meta.type_names.insert(key, n.to_string());
        }
    }

    /// Record an object's P4Info annotations; a structured annotation's expressions are evaluated
    /// as compile-time constants (top-level constants, arithmetic, comparisons), as the reference
    /// compiler does.
    pub fn note_annos(&mut self, key: String, annos: &ast::Annotations) -> PResult<()> {
        let global = self.global.clone();
        let a = p4info_annos_with(annos, &mut |e| self.annotation_value(&global, e))?;
        if a != ir::p4info::Annos::default() {
            self.p4meta.annos.insert(key, a);
        }
        Ok(())
    }

    /// The value of an expression in a structured annotation: an integer, a boolean or a string
    /// constant.
    fn annotation_value(
        &mut self,
        scope: &Rc<Scope>,
        e: &ast::Expr,
    ) -> PResult<ir::p4info::AnnoValue> {
        use ir::p4info::AnnoValue;
        if let Some(v) = literal_value(e) {
            return Ok(v);
        }
        let not_const = |why: &str| {
            err(e.span, format!("an expression in a structured annotation must be a compile-time integer, boolean or string constant ({why})"))
        };
        match self.expr(scope, e, None) {
            Ok(Val::Const(v, Ty::Bool)) => Ok(AnnoValue::Bool(!v.is_zero())),
            Ok(Val::Const(v, Ty::Bit(_) | Ty::Int(_) | Ty::InfInt)) => match v.to_i64() {
                Some(i) => Ok(AnnoValue::Int(i)),
                None => not_const(&format!("{v} does not fit in 64 bits")),
            },
            Ok(Val::Str(s)) => Ok(AnnoValue::Str(s)),
            Ok(_) => not_const("this one is not"),
            Err(d) => not_const(&d.message),
        }
    }
}
