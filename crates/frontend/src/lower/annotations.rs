//! Reading annotations: `@name`, `@id`, `@match`, integer lists, and their P4Info form.

use crate::ast;
use crate::diag::err;
use crate::diag::PResult;
use p4sec_ir as ir;

/// The string argument of an annotation such as `@name("x")`.
pub fn annotation_str(annos: &ast::Annotations, name: &str) -> Option<String> {
    for a in annos {
        if a.name.name == name {
            if let ast::AnnotationBody::Exprs(es) = &a.body {
                if let Some(ast::Expr {
                    kind: ast::ExprKind::Str(s),
                    ..
                }) = es.first()
                {
                    return Some(s.clone());
                }
            }
            if let ast::AnnotationBody::Raw(r) = &a.body {
                return Some(r.trim().trim_matches('"').to_string());
            }
        }
    }
    None
}

/// Integer arguments of an annotation such as `@priority(3)` or `@field_list(1, 2)`.
/// The identifier argument of an annotation such as `@match(ternary)`.
pub fn annotation_ident(annos: &ast::Annotations, name: &str) -> Option<String> {
    for a in annos {
        if a.name.name == name {
            match &a.body {
                ast::AnnotationBody::Exprs(es) => {
                    if let Some(ast::Expr {
                        kind: ast::ExprKind::Name(n),
                        ..
                    }) = es.first()
                    {
                        return Some(n.name.clone());
                    }
                }
                ast::AnnotationBody::Raw(r) => return Some(r.trim().to_string()),
                _ => {}
            }
        }
    }
    None
}

pub fn annotation_ints(annos: &ast::Annotations, name: &str) -> Option<Vec<i64>> {
    for a in annos {
        if a.name.name == name {
            let mut out = vec![];
            match &a.body {
                ast::AnnotationBody::Exprs(es) => {
                    for e in es {
                        match &e.kind {
                            ast::ExprKind::Int(l) => {
                                out.push(num_traits::ToPrimitive::to_i64(&l.value)?)
                            }
                            ast::ExprKind::Unary(ast::UnOp::Neg, inner) => {
                                if let ast::ExprKind::Int(l) = &inner.kind {
                                    out.push(-num_traits::ToPrimitive::to_i64(&l.value)?);
                                }
                            }
                            _ => {}
                        }
                    }
                }
                ast::AnnotationBody::Raw(r) => {
                    for p in r.split(',') {
                        out.push(p.trim().parse().ok()?);
                    }
                }
                _ => {}
            }
            return Some(out);
        }
    }
    None
}

/// The P4Info form of an object's annotations, as the reference compiler writes them: `@name` and
/// `@id` are left out (they give the name and id), `@brief`/`@description` become the
/// documentation, structured annotations keep their keys and literal values, every other annotation
/// is `@name(tokens)`. A structured annotation's expression that is not a literal is written as an
/// empty string here; [`p4info_annos_with`] evaluates it.
pub fn p4info_annos(annos: &ast::Annotations) -> ir::p4info::Annos {
    p4info_annos_with(annos, &mut |e| {
        Ok(literal_value(e).unwrap_or(ir::p4info::AnnoValue::Str(String::new())))
    })
    .unwrap_or_default()
}

/// The value of a structured annotation's expression when it is a literal (`1`, `-1`, `"s"`,
/// `true`).
pub fn literal_value(e: &ast::Expr) -> Option<ir::p4info::AnnoValue> {
    use ir::p4info::AnnoValue;
    match &e.kind {
        ast::ExprKind::Str(s) => Some(AnnoValue::Str(s.clone())),
        ast::ExprKind::Bool(b) => Some(AnnoValue::Bool(*b)),
        ast::ExprKind::Int(l) => num_traits::ToPrimitive::to_i64(&l.value).map(AnnoValue::Int),
        ast::ExprKind::Unary(ast::UnOp::Neg, inner) => match &inner.kind {
            ast::ExprKind::Int(l) => {
                num_traits::ToPrimitive::to_i64(&-l.value.clone()).map(AnnoValue::Int)
            }
            _ => None,
        },
        _ => None,
    }
}

/// [`p4info_annos`] with `eval` giving the value of each structured annotation's expression (the
/// reference compiler folds them: `@a[5 + N, 1 == 2]` is `11, false`).
pub fn p4info_annos_with(
    annos: &ast::Annotations,
    eval: &mut dyn FnMut(&ast::Expr) -> PResult<ir::p4info::AnnoValue>,
) -> PResult<ir::p4info::Annos> {
    use ir::p4info::StructuredAnno;
    let mut out = ir::p4info::Annos::default();
    for a in annos {
        let n = a.name.name.as_str();
        match (&a.body, n) {
            (_, "name" | "id") => {}
            (_, "brief") => out.brief = annotation_str(&vec![a.clone()], n),
            (_, "description") => out.description = annotation_str(&vec![a.clone()], n),
            (ast::AnnotationBody::KeyValues(kvs), _) => {
                let mut items = vec![];
                for (k, e) in kvs {
                    if items.iter().any(|(seen, _)| seen == &k.name) {
                        return err(
                            k.span,
                            format!(
                                "structured annotation `@{n}`: key `{}` appears twice",
                                k.name
                            ),
                        );
                    }
                    items.push((k.name.clone(), eval(e)?));
                }
                out.structured.push(StructuredAnno {
                    name: n.to_string(),
                    kv: true,
                    items,
                })
            }
            (ast::AnnotationBody::ExprList(es), _) => {
                let mut items = vec![];
                for e in es {
                    items.push((String::new(), eval(e)?));
                }
                out.structured.push(StructuredAnno {
                    name: n.to_string(),
                    kv: false,
                    items,
                })
            }
            (ast::AnnotationBody::Empty, _) => out.annotations.push(format!("@{n}")),
            _ => out.annotations.push(format!("@{n}({})", a.text)),
        }
    }
    Ok(out)
}

pub fn has_annotation(annos: &ast::Annotations, name: &str) -> bool {
    annos.iter().any(|a| a.name.name == name)
}
