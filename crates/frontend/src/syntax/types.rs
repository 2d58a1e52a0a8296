//! Parsing annotations, types, type parameters and parameter lists.

use super::*;

impl Parser {
    // ------------------------------------------------------------ annotations

    pub(super) fn annotations(&mut self) -> PResult<Annotations> {
        let mut v = vec![];
        while self.is("@") {
            self.bump();
            let name = self.any_name("an annotation name")?;
            let mut text = String::new();
            let body = if self.is("(") {
                let first = self.pos + 1;
                let body = self.annotation_body()?;
                // the tokens between the parentheses, each as written
                text = self.toks[first..self.pos - 1]
                    .iter()
                    .map(|t| self.token_text(t))
                    .collect::<Vec<_>>()
                    .join(" ");
                body
            } else if self.is("[") {
                self.bump();
                let kv = matches!(self.peek(), Tok::Ident(_)) && self.is_at(1, "=");
                let mut kvs = vec![];
                let mut exprs = vec![];
                while !self.is("]") {
                    if kv {
                        let k = self.any_name("a key")?;
                        self.expect("=", "in a structured annotation")?;
                        kvs.push((k, self.expr()?));
                    } else {
                        exprs.push(self.expr()?);
                    }
                    if !self.eat(",") {
                        break;
                    }
                }
                self.expect("]", "closing the annotation")?;
                if kv {
                    AnnotationBody::KeyValues(kvs)
                } else {
                    AnnotationBody::ExprList(exprs)
                }
            } else {
                AnnotationBody::Empty
            };
            v.push(Annotation { name, body, text });
        }
        Ok(v)
    }

    /// A token's source text (string literals with their quotes and escapes).
    pub(super) fn token_text(&self, t: &Token) -> String {
        match &t.tok {
            Tok::Eof => String::new(),
            _ => self
                .text
                .get(t.span.lo as usize..t.span.hi as usize)
                .unwrap_or("")
                .to_string(),
        }
    }

    pub(super) fn annotation_body(&mut self) -> PResult<AnnotationBody> {
        let open = self.bump().span;
        // find the matching parenthesis, then try to parse the inside as expressions
        let start = self.pos;
        let mut depth = 1;
        let mut end = self.pos;
        while depth > 0 {
            match self.peek_at(end - self.pos) {
                Tok::Eof => return Err(Diagnostic::new(open, "unclosed annotation")),
                Tok::Punct("(") => depth += 1,
                Tok::Punct(")") => depth -= 1,
                _ => {}
            }
            end += 1;
        }
        // tokens [start, end-1) are the body, end-1 is `)`
        let saved = self.pos;
        let mut exprs = vec![];
        let mut ok = true;
        if !self.is(")") {
            loop {
                match self.expr() {
                    Ok(e) => exprs.push(e),
                    Err(_) => {
                        ok = false;
                        break;
                    }
                }
                if self.pos >= end - 1 {
                    break;
                }
                if !self.eat(",") {
                    ok = false;
                    break;
                }
            }
        }
        if ok && self.pos == end - 1 {
            self.bump();
            return Ok(AnnotationBody::Exprs(exprs));
        }
        self.pos = saved;
        let lo = self.toks[start].span.lo as usize;
        let hi = self.toks[end - 1].span.lo as usize;
        let _ = (lo, hi);
        let mut raw = String::new();
        while self.pos < end - 1 {
            let t = self.bump();
            if !raw.is_empty() {
                raw.push(' ');
            }
            raw.push_str(&match t.tok {
                Tok::Ident(s) => s,
                Tok::Int(i) => i.value.to_string(),
                Tok::Str(s) => format!("\"{s}\""),
                Tok::Punct(p) => p.to_string(),
                Tok::Other(c) => c.to_string(),
                Tok::Eof => String::new(),
            });
        }
        self.bump();
        Ok(AnnotationBody::Raw(raw))
    }

    // ------------------------------------------------------------ types

    pub(super) fn starts_type(&self) -> bool {
        match self.peek() {
            Tok::Ident(s) => {
                matches!(
                    s.as_str(),
                    "bit"
                        | "int"
                        | "varbit"
                        | "bool"
                        | "error"
                        | "string"
                        | "void"
                        | "tuple"
                        | "match_kind"
                        | "list"
                ) || self.is_type_name(s)
            }
            Tok::Punct("_") => true,
            Tok::Punct(".") => matches!(self.peek_at(1), Tok::Ident(s) if self.is_type_name(s)),
            _ => false,
        }
    }

    pub(super) fn ty(&mut self) -> PResult<Type> {
        let start = self.span();
        let mut t = self.base_type()?;
        while self.is("[") {
            self.bump();
            let size = self.expr()?;
            self.expect("]", "closing the header stack size")?;
            t = Type {
                kind: TypeKind::Stack {
                    elem: Box::new(t),
                    size: Box::new(size),
                },
                span: start.to(self.prev_span()),
            };
        }
        Ok(t)
    }

    /// The C-style array suffixes after a declared name (`bit<8> arr[16];`, P4_16 1.2.5): `T
    /// a[2][3]` declares an array of 2 arrays of 3 `T`, the same type as `T[3][2]`.
    pub(super) fn array_suffix(&mut self, ty: Type) -> PResult<Type> {
        let mut sizes = vec![];
        while self.is("[") {
            let s0 = self.span();
            self.bump();
            let size = self.expr()?;
            self.expect("]", "closing the array size")?;
            sizes.push((size, s0.to(self.prev_span())));
        }
        let mut t = ty;
        for (size, sp) in sizes.into_iter().rev() {
            let span = t.span.to(sp);
            t = Type {
                kind: TypeKind::Stack {
                    elem: Box::new(t),
                    size: Box::new(size),
                },
                span,
            };
        }
        Ok(t)
    }

    pub(super) fn width_arg(&mut self) -> PResult<Expr> {
        self.expect("<", "after the type name")?;
        let e = if self.is("(") {
            self.bump();
            let e = self.expr()?;
            self.expect(")", "closing the width")?;
            e
        } else {
            self.primary_expr()?
        };
        self.expect_close_angle()?;
        Ok(e)
    }

    pub(super) fn base_type(&mut self) -> PResult<Type> {
        let start = self.span();
        let kind = match self.peek().clone() {
            Tok::Punct("_") => {
                self.bump();
                TypeKind::DontCare
            }
            Tok::Punct(".") => {
                self.bump();
                let name = self.ident("a type name")?;
                TypeKind::Named { name, dot: true }
            }
            Tok::Ident(s) => match s.as_str() {
                "bool" => {
                    self.bump();
                    TypeKind::Bool
                }
                "error" => {
                    self.bump();
                    TypeKind::Error
                }
                "string" => {
                    self.bump();
                    TypeKind::String
                }
                "void" => {
                    self.bump();
                    TypeKind::Void
                }
                "match_kind" => {
                    self.bump();
                    TypeKind::MatchKind
                }
                "bit" | "int" | "varbit" => {
                    self.bump();
                    if self.is("<") {
                        let w = self.width_arg()?;
                        match s.as_str() {
                            "bit" => TypeKind::Bit(Box::new(w)),
                            "int" => TypeKind::SignedInt(Box::new(w)),
                            _ => TypeKind::Varbit(Box::new(w)),
                        }
                    } else if s == "bit" {
                        TypeKind::Bit(Box::new(Expr {
                            kind: ExprKind::Int(IntLit {
                                value: 1.into(),
                                width: None,
                            }),
                            span: start,
                        }))
                    } else if s == "int" {
                        TypeKind::Int
                    } else {
                        return Err(Diagnostic::new(
                            start,
                            "varbit needs a maximum width: varbit<N>",
                        ));
                    }
                }
                "tuple" | "list" => {
                    self.bump();
                    self.expect("<", "after tuple")?;
                    let mut ts = vec![];
                    loop {
                        ts.push(self.ty()?);
                        if !self.eat(",") {
                            break;
                        }
                    }
                    self.expect_close_angle()?;
                    if s == "tuple" {
                        TypeKind::Tuple(ts)
                    } else {
                        TypeKind::List(Box::new(ts.into_iter().next().unwrap()))
                    }
                }
                _ => {
                    let name = self.ident("a type")?;
                    if self.is("<") && self.is_type_name(&name.name) {
                        self.bump();
                        let mut args = vec![];
                        loop {
                            if self.is(">") || self.is(">>") {
                                break;
                            }
                            args.push(self.type_arg()?);
                            if !self.eat(",") {
                                break;
                            }
                        }
                        self.expect_close_angle()?;
                        TypeKind::Specialized { base: name, args }
                    } else {
                        TypeKind::Named { name, dot: false }
                    }
                }
            },
            _ => return Err(self.unexpected("a type")),
        };
        Ok(Type {
            kind,
            span: start.to(self.prev_span()),
        })
    }

    pub(super) fn type_arg(&mut self) -> PResult<Type> {
        if self.is("_") {
            let sp = self.bump().span;
            return Ok(Type {
                kind: TypeKind::DontCare,
                span: sp,
            });
        }
        self.ty()
    }

    pub(super) fn type_params(&mut self) -> PResult<Vec<Ident>> {
        let mut v = vec![];
        if self.eat("<") {
            loop {
                v.push(self.ident("a type parameter")?);
                if !self.eat(",") {
                    break;
                }
            }
            self.expect_close_angle()?;
        }
        Ok(v)
    }

    pub(super) fn params(&mut self) -> PResult<Vec<Param>> {
        self.expect("(", "opening the parameter list")?;
        let mut v = vec![];
        while !self.is(")") {
            let annos = self.annotations()?;
            let dir = if self.eat("in") {
                Some(Direction::In)
            } else if self.eat("out") {
                Some(Direction::Out)
            } else if self.eat("inout") {
                Some(Direction::InOut)
            } else {
                None
            };
            let ty = self.ty()?;
            let name = self.ident("a parameter name")?;
            let default = if self.eat("=") {
                Some(self.expr()?)
            } else {
                None
            };
            v.push(Param {
                annos,
                dir,
                ty,
                name,
                default,
            });
            if !self.eat(",") {
                break;
            }
        }
        self.expect(")", "closing the parameter list")?;
        Ok(v)
    }
}
