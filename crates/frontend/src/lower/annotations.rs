//! Reading annotations: `@name`, `@id`, `@match`, integer lists, and their P4Info form.

use crate::ast;
use p4sec_ir as ir;

/// The string argument of an annotation such as `@name("x")`.
pub fn annotation_str(annos: &ast::Annotations, name: &str) -> Option<String> {
    for a in annos {
        if a.name.name == name {
            if let ast::AnnotationBody::Exprs(es) = &a.body {
                if let Some(ast::Expr { kind: ast::ExprKind::Str(s), .. }) = es.first() {
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
                    if let Some(ast::Expr { kind: ast::ExprKind::Name(n), .. }) = es.first() {
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
                            ast::ExprKind::Int(l) => out.push(num_traits::ToPrimitive::to_i64(&l.value)?),
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

/// The P4Info form of an object's annotations, as the reference compiler writes them: `@name` and `@id`
/// are left out (they give the name and id), `@brief`/`@description` become the documentation, structured
/// annotations keep their keys and literal values, every other annotation is `@name(tokens)`.
pub fn p4info_annos(annos: &ast::Annotations) -> ir::p4info::Annos {
    use ir::p4info::{AnnoValue, StructuredAnno};
    let mut out = ir::p4info::Annos::default();
    let value = |e: &ast::Expr| match &e.kind {
        ast::ExprKind::Str(s) => AnnoValue::Str(s.clone()),
        ast::ExprKind::Bool(b) => AnnoValue::Bool(*b),
        ast::ExprKind::Int(l) => AnnoValue::Int(num_traits::ToPrimitive::to_i64(&l.value).unwrap_or(0)),
        ast::ExprKind::Unary(ast::UnOp::Neg, inner) => match &inner.kind {
            ast::ExprKind::Int(l) => AnnoValue::Int(-num_traits::ToPrimitive::to_i64(&l.value).unwrap_or(0)),
            _ => AnnoValue::Str(String::new()),
        },
        _ => AnnoValue::Str(String::new()),
    };
    for a in annos {
        let n = a.name.name.as_str();
        match (&a.body, n) {
            (_, "name" | "id") => {}
            (_, "brief") => out.brief = annotation_str(&vec![a.clone()], n),
            (_, "description") => out.description = annotation_str(&vec![a.clone()], n),
            (ast::AnnotationBody::KeyValues(kvs), _) => {
                out.structured.push(StructuredAnno { name: n.to_string(), kv: true, items: kvs.iter().map(|(k, e)| (k.name.clone(), value(e))).collect() })
            }
            (ast::AnnotationBody::ExprList(es), _) => {
                out.structured.push(StructuredAnno { name: n.to_string(), kv: false, items: es.iter().map(|e| (String::new(), value(e))).collect() })
            }
            (ast::AnnotationBody::Empty, _) => out.annotations.push(format!("@{n}")),
            _ => out.annotations.push(format!("@{n}({})", a.text)),
        }
    }
    out
}

pub fn has_annotation(annos: &ast::Annotations, name: &str) -> bool {
    annos.iter().any(|a| a.name.name == name)
}
