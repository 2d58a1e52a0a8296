//! Storage allocation: slots for a value of any type (scalars, structs, headers and their fields,
//! unions, stacks, tuples), header layouts recorded for the engine.

use super::env::*;
use super::lowerer::Lowerer;
use crate::ast::{self, Span};
use crate::diag::{Diagnostic, PResult};
use crate::semantic_types::*;
use p4sec_ir as ir;
use std::rc::Rc;

impl<'t> Lowerer<'t> {
    pub fn alloc_scalar(&mut self, width: u32) -> ir::Loc {
        let loc = ir::Loc {
            slot: self.slots,
            width,
        };
        self.slots += ir::words_for(width);
        loc
    }

    /// Allocate storage for a value of type `ty`, named `name` (for traces).
    pub fn alloc(&mut self, ty: &Ty, name: &str, span: Span) -> PResult<Place> {
        Ok(match ty {
            Ty::Agg(a) if a.kind == ast::AggregateKind::Header => {
                self.alloc_header(a, name, span)?
            }
            Ty::Agg(a) if a.kind == ast::AggregateKind::HeaderUnion => {
                let mut members = vec![];
                for f in &a.fields {
                    let Ty::Agg(h) = &f.ty else {
                        return Err(Diagnostic::new(
                            span,
                            format!("header_union member `{}` is not a header", f.name),
                        ));
                    };
                    members.push((
                        f.name.clone(),
                        self.alloc_header(h, &format!("{name}.{}", f.name), span)?,
                    ));
                }
                let valids: Vec<ir::LValue> = members
                    .iter()
                    .map(|(_, p)| p.header_valid().unwrap())
                    .collect();
                for (i, (_, m)) in members.iter_mut().enumerate() {
                    if let Place::Header { siblings, .. } = m {
                        *siblings = valids
                            .iter()
                            .enumerate()
                            .filter(|(j, _)| *j != i)
                            .map(|(_, v)| v.clone())
                            .collect();
                    }
                }
                Place::Union {
                    ty: a.clone(),
                    members,
                }
            }
            Ty::Agg(a) => {
                let mut fields = vec![];
                for f in &a.fields {
                    fields.push((
                        f.name.clone(),
                        self.alloc(&f.ty, &format!("{name}.{}", f.name), span)?,
                    ));
                }
                Place::Struct {
                    ty: a.clone(),
                    fields,
                }
            }
            Ty::Stack(elem, n) => {
                let mut elems = vec![];
                let mut stride = 0;
                for i in 0..*n {
                    let before = self.slots;
                    let p = self.alloc(elem, &format!("{name}[{i}]"), span)?;
                    stride = self.slots - before;
                    elems.push(p);
                }
                let next_index = self.alloc_scalar(32);
                let id = self.stacks.len() as u32;
                let hid = |p: &Place| match p {
                    Place::Header {
                        hdr: ir::HeaderRef::Static(h),
                        ..
                    } => *h,
                    _ => u32::MAX,
                };
                let elements = elems.iter().map(hid).collect();
                self.stacks.push(ir::StackLayout {
                    name: name.to_string(),
                    elements,
                    stride,
                    next_index,
                });
                // a stack of unions: one header stack per union member, sharing the next index
                let mut member_stacks = vec![];
                if let Some(Place::Union { members, .. }) = elems.first() {
                    for (k, (mname, _)) in members.iter().enumerate() {
                        let elements = elems
                            .iter()
                            .map(|e| match e {
                                Place::Union { members, .. } => hid(&members[k].1),
                                _ => u32::MAX,
                            })
                            .collect();
                        member_stacks.push(self.stacks.len() as u32);
                        self.stacks.push(ir::StackLayout {
                            name: format!("{name}.{mname}"),
                            elements,
                            stride,
                            next_index,
                        });
                    }
                }
                Place::Stack {
                    id,
                    elem: (**elem).clone(),
                    elems,
                    stride,
                    next_index,
                    member_stacks,
                }
            }
            Ty::Tuple(ts) => {
                let mut ps = vec![];
                for (i, t) in ts.iter().enumerate() {
                    ps.push(self.alloc(t, &format!("{name}.{i}"), span)?);
                }
                Place::Tuple(ps)
            }
            Ty::Varbit(max) => {
                let data = self.alloc_scalar(*max);
                let len = self.alloc_scalar(32);
                Place::Varbit {
                    data: ir::LValue::Static(data),
                    len: ir::LValue::Static(len),
                    max: *max,
                }
            }
            t => match t.scalar_width() {
                Some(w) => {
                    if w > ir::MAX_WIDTH {
                        return Err(Diagnostic::new(
                            span,
                            format!(
                                "type {t} is wider than the {} bits p4sec supports",
                                ir::MAX_WIDTH
                            ),
                        ));
                    }
                    Place::Scalar(ir::LValue::Static(self.alloc_scalar(w.max(1))), t.clone())
                }
                None => {
                    return Err(Diagnostic::new(
                        span,
                        format!("cannot declare a variable of type {t}"),
                    ))
                }
            },
        })
    }

    fn alloc_header(&mut self, a: &Rc<AggInfo>, name: &str, span: Span) -> PResult<Place> {
        let valid = self.alloc_scalar(1);
        let mut fields = vec![];
        let mut layout = vec![];
        let mut max_bits = 0;
        for f in &a.fields {
            let p = self.alloc_header_field(a, &f.name, &f.ty, span, &mut layout, &mut max_bits)?;
            fields.push((f.name.clone(), p));
        }
        let id = self.headers.len() as u32;
        self.headers.push(ir::HeaderLayout {
            name: name.to_string(),
            valid,
            fields: layout,
            max_bits,
        });
        Ok(Place::Header {
            hdr: ir::HeaderRef::Static(id),
            valid: ir::LValue::Static(valid),
            fields,
            ty: a.clone(),
            siblings: vec![],
        })
    }

    /// Storage of one header field named `path` (dotted inside a struct-typed field): a
    /// struct-typed field is flattened, its leaves laid out in declaration (= wire) order as the
    /// reference compiler does.
    fn alloc_header_field(
        &mut self,
        a: &Rc<AggInfo>,
        path: &str,
        t: &Ty,
        span: Span,
        layout: &mut Vec<ir::FieldLayout>,
        max_bits: &mut u32,
    ) -> PResult<Place> {
        Ok(match t {
            Ty::Varbit(max) => {
                let data = self.alloc_scalar(*max);
                let len = self.alloc_scalar(32);
                layout.push(ir::FieldLayout {
                    name: path.to_string(),
                    loc: data,
                    varbit_len: Some(len),
                });
                *max_bits += max;
                Place::Varbit {
                    data: ir::LValue::Static(data),
                    len: ir::LValue::Static(len),
                    max: *max,
                }
            }
            Ty::Agg(s) if s.kind == ast::AggregateKind::Struct => {
                let mut fields = vec![];
                for f in &s.fields {
                    if matches!(f.ty, Ty::Varbit(_)) {
                        return Err(Diagnostic::new(
                            span,
                            format!("header field `{}.{path}.{}` is a varbit inside a struct, which headers cannot hold", a.name, f.name),
                        ));
                    }
                    let p = self.alloc_header_field(
                        a,
                        &format!("{path}.{}", f.name),
                        &f.ty,
                        span,
                        layout,
                        max_bits,
                    )?;
                    fields.push((f.name.clone(), p));
                }
                Place::Struct {
                    ty: s.clone(),
                    fields,
                }
            }
            Ty::Stack(e, n) if !e.is_header() && !e.is_union() => {
                // a generic array in a header: its elements laid out one after the other, element 0
                // first
                let mut elems = vec![];
                let mut stride = 0;
                for i in 0..*n {
                    let before = self.slots;
                    elems.push(self.alloc_header_field(
                        a,
                        &format!("{path}[{i}]"),
                        e,
                        span,
                        layout,
                        max_bits,
                    )?);
                    stride = self.slots - before;
                }
                let next_index = self.alloc_scalar(32);
                let id = self.stacks.len() as u32;
                self.stacks.push(ir::StackLayout {
                    name: format!("{}.{path}", a.name),
                    elements: vec![u32::MAX; *n as usize],
                    stride,
                    next_index,
                });
                Place::Stack {
                    id,
                    elem: (**e).clone(),
                    elems,
                    stride,
                    next_index,
                    member_stacks: vec![],
                }
            }
            t => {
                let w = match t {
                    Ty::Bool => 1,
                    Ty::Bit(w) | Ty::Int(w) => *w,
                    Ty::Enum(e) if e.repr.is_some() => t.scalar_width().unwrap_or(0),
                    _ => {
                        return Err(Diagnostic::new(
                            span,
                            format!(
                                "header field `{}.{path}` has type {t}, which headers cannot hold",
                                a.name
                            ),
                        ))
                    }
                };
                if w > ir::MAX_WIDTH {
                    return Err(Diagnostic::new(
                        span,
                        format!("field `{path}` is wider than {} bits", ir::MAX_WIDTH),
                    ));
                }
                let loc = self.alloc_scalar(w);
                layout.push(ir::FieldLayout {
                    name: path.to_string(),
                    loc,
                    varbit_len: None,
                });
                *max_bits += w;
                Place::Scalar(ir::LValue::Static(loc), t.clone())
            }
        })
    }
}
