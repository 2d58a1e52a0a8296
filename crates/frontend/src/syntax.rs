//! Lexer and recursive-descent parser for P4_16 (the whole grammar of the language specification v1.2.x
//! that v1model programs use), producing the [`ast`](crate::ast).
//!
//! The grammar's type/expression ambiguity is resolved by tracking type names while parsing: every
//! declared type (and the type parameters in scope) is known by the time it is used.

use crate::ast::*;
use crate::diag::{Diagnostic, PResult};
use num_bigint::BigInt;
use num_traits::{Num, Zero};
use std::collections::HashSet;

#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    Ident(String),
    Int(IntLit),
    Str(String),
    Punct(&'static str),
    Eof,
}

impl PartialEq for IntLit {
    fn eq(&self, o: &Self) -> bool {
        self.value == o.value && self.width == o.width
    }
}

#[derive(Clone, Debug)]
pub struct Token {
    pub tok: Tok,
    pub span: Span,
}

const PUNCTS: &[&str] = &[
    "&&&", "|+|", "|-|", "<<=", ">>=", "|+|=", "|-|=", "...", "++", "&&", "||", "==", "!=", "<=", ">=", "<<", ">>", "..", "+=", "-=", "*=",
    "/=", "%=", "&=", "|=", "^=", "{", "}", "(", ")", "[", "]", "<", ">", ";", ":", ",", ".", "=", "+", "-", "*", "/", "%", "&", "|",
    "^", "~", "!", "?", "@", "_", "#",
];

fn describe(t: &Tok) -> String {
    match t {
        Tok::Ident(s) => format!("`{s}`"),
        Tok::Int(i) => format!("`{}`", i.value),
        Tok::Str(s) => format!("\"{s}\""),
        Tok::Punct(p) => format!("`{p}`"),
        Tok::Eof => "end of input".into(),
    }
}

/// Split P4 source into tokens.
pub fn lex(text: &str) -> PResult<Vec<Token>> {
    let b = text.as_bytes();
    let mut i = 0;
    let mut out = vec![];
    let mut puncts: Vec<&'static str> = PUNCTS.to_vec();
    puncts.sort_by_key(|p| std::cmp::Reverse(p.len()));
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let start = i;
            i += 2;
            while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                i += 1;
            }
            if i + 1 >= b.len() {
                return Err(Diagnostic::new(Span::new(start as u32, start as u32 + 2), "unterminated comment"));
            }
            i += 2;
            continue;
        }
        let start = i;
        if c.is_ascii_alphabetic() || (c == b'_' && b.get(i + 1).map(|x| x.is_ascii_alphanumeric() || *x == b'_').unwrap_or(false)) {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Token { tok: Tok::Ident(text[start..i].to_string()), span: Span::new(start as u32, i as u32) });
            continue;
        }
        if c.is_ascii_digit() {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let lit = parse_int(&text[start..i]).map_err(|m| Diagnostic::new(Span::new(start as u32, i as u32), m))?;
            out.push(Token { tok: Tok::Int(lit), span: Span::new(start as u32, i as u32) });
            continue;
        }
        if c == b'"' {
            i += 1;
            let mut s = String::new();
            loop {
                match b.get(i) {
                    None | Some(b'\n') => return Err(Diagnostic::new(Span::new(start as u32, i as u32), "unterminated string literal")),
                    Some(b'"') => {
                        i += 1;
                        break;
                    }
                    Some(b'\\') => {
                        let e = b.get(i + 1).copied().unwrap_or(b'\\');
                        s.push(match e {
                            b'n' => '\n',
                            b't' => '\t',
                            b'r' => '\r',
                            other => other as char,
                        });
                        i += 2;
                    }
                    Some(_) => {
                        let ch = text[i..].chars().next().unwrap();
                        s.push(ch);
                        i += ch.len_utf8();
                    }
                }
            }
            out.push(Token { tok: Tok::Str(s), span: Span::new(start as u32, i as u32) });
            continue;
        }
        let rest = &text[i..];
        match puncts.iter().find(|p| rest.starts_with(**p)) {
            Some(p) => {
                i += p.len();
                out.push(Token { tok: Tok::Punct(p), span: Span::new(start as u32, i as u32) });
            }
            None => {
                let ch = rest.chars().next().unwrap();
                return Err(Diagnostic::new(Span::new(start as u32, (start + ch.len_utf8()) as u32), format!("unexpected character `{ch}`")));
            }
        }
    }
    out.push(Token { tok: Tok::Eof, span: Span::new(b.len() as u32, b.len() as u32) });
    Ok(out)
}

fn parse_int(s: &str) -> Result<IntLit, String> {
    let clean: String = s.chars().filter(|c| *c != '_').collect();
    // width prefix: 8w5, 4s3, 16w0xff
    let (width, body) = match clean.find(['w', 's']) {
        Some(p) if p > 0 && clean[..p].chars().all(|c| c.is_ascii_digit()) && !clean[..p].starts_with("0x") => {
            let w: u32 = clean[..p].parse().map_err(|_| format!("bad width in `{s}`"))?;
            (Some((w, &clean[p..p + 1] == "s")), &clean[p + 1..])
        }
        _ => (None, clean.as_str()),
    };
    let lower = body.to_ascii_lowercase();
    let (radix, digits) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d)
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d)
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d)
    } else if let Some(d) = lower.strip_prefix("0d") {
        (10, d)
    } else {
        (10, lower.as_str())
    };
    if digits.is_empty() {
        return Err(format!("malformed integer `{s}`"));
    }
    let value = BigInt::from_str_radix(digits, radix).map_err(|_| format!("malformed integer `{s}`"))?;
    if let Some((w, signed)) = width {
        if w > 4096 {
            return Err(format!("width {w} in `{s}` is too large"));
        }
        if signed && w == 0 {
            return Err("int<0> literals are not allowed".into());
        }
    }
    Ok(IntLit { value, width })
}

/// Parse a whole program.
pub fn parse_program(text: &str) -> PResult<Program> {
    let toks = lex(text)?;
    let mut p = Parser::new(toks);
    let mut decls = vec![];
    while !p.at_eof() {
        if p.eat(";") {
            continue;
        }
        decls.push(p.declaration()?);
    }
    Ok(Program { decls })
}

/// Parse one expression (for tests and tools).
pub fn parse_expr(text: &str) -> PResult<Expr> {
    let toks = lex(text)?;
    let mut p = Parser::new(toks);
    let e = p.expr()?;
    if !p.at_eof() {
        return Err(p.unexpected("end of expression"));
    }
    Ok(e)
}

const MAX_DEPTH: u32 = 200;

struct Parser {
    toks: Vec<Token>,
    pos: usize,
    types: Vec<HashSet<String>>,
    depth: u32,
    /// A pending `>` left over from splitting `>>` in a type argument list.
    split_gt: bool,
}

impl Parser {
    fn new(toks: Vec<Token>) -> Self {
        let mut base = HashSet::new();
        for t in ["packet_in", "packet_out"] {
            base.insert(t.to_string());
        }
        Parser { toks, pos: 0, types: vec![base], depth: 0, split_gt: false }
    }

    fn peek(&self) -> &Tok {
        &self.toks[self.pos].tok
    }
    fn peek_at(&self, k: usize) -> &Tok {
        &self.toks[(self.pos + k).min(self.toks.len() - 1)].tok
    }
    fn span(&self) -> Span {
        self.toks[self.pos].span
    }
    fn prev_span(&self) -> Span {
        self.toks[self.pos.saturating_sub(1)].span
    }
    fn at_eof(&self) -> bool {
        matches!(self.peek(), Tok::Eof)
    }
    fn bump(&mut self) -> Token {
        let t = self.toks[self.pos].clone();
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
        t
    }
    fn is(&self, p: &str) -> bool {
        matches!(self.peek(), Tok::Punct(x) if *x == p) || matches!(self.peek(), Tok::Ident(x) if x == p)
    }
    fn is_at(&self, k: usize, p: &str) -> bool {
        matches!(self.peek_at(k), Tok::Punct(x) if *x == p) || matches!(self.peek_at(k), Tok::Ident(x) if x == p)
    }
    fn eat(&mut self, p: &str) -> bool {
        if self.is(p) {
            self.bump();
            true
        } else {
            false
        }
    }
    fn unexpected(&self, what: &str) -> Diagnostic {
        Diagnostic::new(self.span(), format!("expected {what}, found {}", describe(self.peek())))
    }
    fn expect(&mut self, p: &str, ctx: &str) -> PResult<Span> {
        if self.is(p) {
            Ok(self.bump().span)
        } else {
            Err(self.unexpected(&format!("`{p}` {ctx}")))
        }
    }
    /// `>` closing a type argument list, splitting `>>` / `>=` when needed.
    fn expect_close_angle(&mut self) -> PResult<()> {
        if self.split_gt {
            self.split_gt = false;
            return Ok(());
        }
        match self.peek() {
            Tok::Punct(">") => {
                self.bump();
                Ok(())
            }
            Tok::Punct(">>") => {
                self.bump();
                self.split_gt = true;
                Ok(())
            }
            _ => Err(self.unexpected("`>` closing the type arguments")),
        }
    }
    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Diagnostic::new(self.span(), "program nests too deeply"));
        }
        Ok(())
    }
    fn leave(&mut self) {
        self.depth -= 1;
    }

    fn ident(&mut self, what: &str) -> PResult<Ident> {
        match self.peek().clone() {
            Tok::Ident(s) if !is_reserved(&s) || matches!(s.as_str(), "apply" | "key" | "actions" | "state" | "entries" | "type" | "priority") => {
                let sp = self.bump().span;
                Ok(Ident { name: s, span: sp })
            }
            _ => Err(self.unexpected(what)),
        }
    }
    /// A name in a position where keywords such as `apply`/`key` are allowed (members, properties).
    fn any_name(&mut self, what: &str) -> PResult<Ident> {
        match self.peek().clone() {
            Tok::Ident(s) => {
                let sp = self.bump().span;
                Ok(Ident { name: s, span: sp })
            }
            _ => Err(self.unexpected(what)),
        }
    }

    fn is_type_name(&self, n: &str) -> bool {
        self.types.iter().any(|s| s.contains(n))
    }
    fn add_type(&mut self, n: &str) {
        self.types[0].insert(n.to_string());
    }
    fn push_type_scope(&mut self, params: &[Ident]) {
        self.types.push(params.iter().map(|i| i.name.clone()).collect());
    }
    fn pop_type_scope(&mut self) {
        self.types.pop();
    }

    // ------------------------------------------------------------ annotations

    fn annotations(&mut self) -> PResult<Annotations> {
        let mut v = vec![];
        while self.is("@") {
            self.bump();
            let name = self.any_name("an annotation name")?;
            let body = if self.is("(") && self.span().lo == name.span.hi {
                self.annotation_body()?
            } else if self.is("(") {
                self.annotation_body()?
            } else if self.is("[") {
                self.bump();
                let mut kvs = vec![];
                while !self.is("]") {
                    let k = self.any_name("a key")?;
                    self.expect("=", "in a structured annotation")?;
                    let e = self.expr()?;
                    kvs.push((k, e));
                    if !self.eat(",") {
                        break;
                    }
                }
                self.expect("]", "closing the annotation")?;
                AnnotationBody::KeyValues(kvs)
            } else {
                AnnotationBody::Empty
            };
            v.push(Annotation { name, body });
        }
        Ok(v)
    }

    fn annotation_body(&mut self) -> PResult<AnnotationBody> {
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
                Tok::Eof => String::new(),
            });
        }
        self.bump();
        Ok(AnnotationBody::Raw(raw))
    }

    // ------------------------------------------------------------ types

    fn starts_type(&self) -> bool {
        match self.peek() {
            Tok::Ident(s) => {
                matches!(s.as_str(), "bit" | "int" | "varbit" | "bool" | "error" | "string" | "void" | "tuple" | "match_kind" | "list")
                    || self.is_type_name(s)
            }
            Tok::Punct("_") => true,
            Tok::Punct(".") => matches!(self.peek_at(1), Tok::Ident(s) if self.is_type_name(s)),
            _ => false,
        }
    }

    fn ty(&mut self) -> PResult<Type> {
        let start = self.span();
        let mut t = self.base_type()?;
        while self.is("[") {
            self.bump();
            let size = self.expr()?;
            self.expect("]", "closing the header stack size")?;
            t = Type { kind: TypeKind::Stack { elem: Box::new(t), size: Box::new(size) }, span: start.to(self.prev_span()) };
        }
        Ok(t)
    }

    fn width_arg(&mut self) -> PResult<Expr> {
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

    fn base_type(&mut self) -> PResult<Type> {
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
                        TypeKind::Bit(Box::new(Expr { kind: ExprKind::Int(IntLit { value: 1.into(), width: None }), span: start }))
                    } else if s == "int" {
                        TypeKind::Int
                    } else {
                        return Err(Diagnostic::new(start, "varbit needs a maximum width: varbit<N>"));
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
        Ok(Type { kind, span: start.to(self.prev_span()) })
    }

    fn type_arg(&mut self) -> PResult<Type> {
        if self.is("_") {
            let sp = self.bump().span;
            return Ok(Type { kind: TypeKind::DontCare, span: sp });
        }
        self.ty()
    }

    fn type_params(&mut self) -> PResult<Vec<Ident>> {
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

    fn params(&mut self) -> PResult<Vec<Param>> {
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
            let default = if self.eat("=") { Some(self.expr()?) } else { None };
            v.push(Param { annos, dir, ty, name, default });
            if !self.eat(",") {
                break;
            }
        }
        self.expect(")", "closing the parameter list")?;
        Ok(v)
    }

    // ------------------------------------------------------------ declarations

    fn declaration(&mut self) -> PResult<Decl> {
        self.enter()?;
        let r = self.declaration_inner();
        self.leave();
        r
    }

    fn declaration_inner(&mut self) -> PResult<Decl> {
        let annos = self.annotations()?;
        let kw = match self.peek() {
            Tok::Ident(s) => s.clone(),
            _ => return Err(self.unexpected("a declaration")),
        };
        match kw.as_str() {
            "const" => {
                self.bump();
                let ty = self.ty()?;
                let name = self.ident("a constant name")?;
                self.expect("=", "in a constant declaration")?;
                let value = self.expr()?;
                self.expect(";", "after the constant declaration")?;
                Ok(Decl::Const(ConstDecl { annos, ty, name, value }))
            }
            "header" | "struct" | "header_union" => {
                self.bump();
                let kind = match kw.as_str() {
                    "header" => AggregateKind::Header,
                    "struct" => AggregateKind::Struct,
                    _ => AggregateKind::HeaderUnion,
                };
                let name = self.ident("a type name")?;
                self.add_type(&name.name);
                let type_params = self.type_params()?;
                self.push_type_scope(&type_params);
                self.expect("{", "opening the field list")?;
                let mut fields = vec![];
                while !self.is("}") {
                    let fa = self.annotations()?;
                    let ty = self.ty()?;
                    let fname = self.ident("a field name")?;
                    self.expect(";", "after the field")?;
                    fields.push(Field { annos: fa, ty, name: fname });
                }
                self.bump();
                self.pop_type_scope();
                Ok(Decl::Aggregate(AggregateDecl { annos, kind, name, type_params, fields }))
            }
            "enum" => {
                self.bump();
                let repr = if self.is("bit") || self.is("int") { Some(self.ty()?) } else { None };
                let name = self.ident("an enum name")?;
                self.add_type(&name.name);
                self.expect("{", "opening the enum")?;
                let mut members = vec![];
                while !self.is("}") {
                    let _ = self.annotations()?;
                    let m = self.ident("an enum member")?;
                    let v = if self.eat("=") { Some(self.expr()?) } else { None };
                    members.push((m, v));
                    if !self.eat(",") {
                        break;
                    }
                }
                self.expect("}", "closing the enum")?;
                Ok(Decl::Enum(EnumDecl { annos, name, repr, members }))
            }
            "error" | "match_kind" => {
                self.bump();
                self.expect("{", &format!("after `{kw}`"))?;
                let mut ids = vec![];
                while !self.is("}") {
                    ids.push(self.ident("a name")?);
                    if !self.eat(",") {
                        break;
                    }
                }
                self.expect("}", "closing the list")?;
                Ok(if kw == "error" { Decl::Error(ids) } else { Decl::MatchKind(ids) })
            }
            "typedef" | "type" => {
                self.bump();
                let ty = self.ty()?;
                let name = self.ident("a type name")?;
                self.add_type(&name.name);
                self.expect(";", "after the type definition")?;
                Ok(Decl::Typedef(TypedefDecl { annos, is_newtype: kw == "type", ty, name }))
            }
            "extern" => {
                self.bump();
                // extern object or extern function
                let is_object = matches!(self.peek(), Tok::Ident(_)) && (self.is_at(1, "{") || self.is_at(1, "<") && !self.starts_type_at_fn());
                if is_object {
                    let name = self.ident("an extern name")?;
                    self.add_type(&name.name);
                    let type_params = self.type_params()?;
                    self.push_type_scope(&type_params);
                    self.expect("{", "opening the extern")?;
                    let mut members = vec![];
                    while !self.is("}") {
                        let ma = self.annotations()?;
                        let is_abstract = self.eat("abstract");
                        if matches!(self.peek(), Tok::Ident(s) if *s == name.name) && self.is_at(1, "(") {
                            let cname = self.ident("a constructor")?;
                            let params = self.params()?;
                            self.expect(";", "after the constructor")?;
                            members.push(ExternMember::Constructor { annos: ma, name: cname, params });
                            continue;
                        }
                        let proto = self.function_proto(ma)?;
                        self.expect(";", "after the method")?;
                        members.push(ExternMember::Method { proto, is_abstract });
                    }
                    self.bump();
                    self.pop_type_scope();
                    Ok(Decl::Extern(ExternDecl { annos, name, type_params, members }))
                } else {
                    let proto = self.function_proto(annos)?;
                    self.expect(";", "after the extern function")?;
                    Ok(Decl::ExternFunction(proto))
                }
            }
            "action" => {
                self.bump();
                let name = self.ident("an action name")?;
                let params = self.params()?;
                let body = self.block()?;
                Ok(Decl::Action(ActionDecl { annos, name, params, body }))
            }
            "parser" | "control" | "package" => {
                self.bump();
                let kind = match kw.as_str() {
                    "parser" => BlockKind::Parser,
                    "control" => BlockKind::Control,
                    _ => BlockKind::Package,
                };
                let name = self.ident("a name")?;
                self.add_type(&name.name);
                let type_params = self.type_params()?;
                self.push_type_scope(&type_params);
                let params = self.params()?;
                let sig = BlockTypeDecl { annos, kind, name, type_params, params };
                if self.eat(";") {
                    self.pop_type_scope();
                    return Ok(Decl::BlockType(sig));
                }
                if kind == BlockKind::Package {
                    self.pop_type_scope();
                    return Err(self.unexpected("`;` after the package declaration"));
                }
                let ctor_params = if self.is("(") { self.params()? } else { vec![] };
                self.expect("{", "opening the body")?;
                let r = if kind == BlockKind::Parser { self.parser_body(sig, ctor_params) } else { self.control_body(sig, ctor_params) };
                self.pop_type_scope();
                r
            }
            "table" => {
                self.bump();
                let name = self.ident("a table name")?;
                self.table_body(annos, name)
            }
            "value_set" => {
                self.bump();
                self.expect("<", "after value_set")?;
                let elem = self.type_arg()?;
                self.expect_close_angle()?;
                self.expect("(", "before the value set size")?;
                let size = self.expr()?;
                self.expect(")", "after the value set size")?;
                let name = self.ident("a value set name")?;
                self.expect(";", "after the value set")?;
                Ok(Decl::ValueSet(ValueSetDecl { annos, elem, size, name }))
            }
            _ => {
                // function, variable, or instantiation: all start with a type
                if !self.starts_type() {
                    return Err(self.unexpected("a declaration"));
                }
                let ty = self.ty()?;
                if self.is("(") {
                    // instantiation: Type(args) name [= { ... }];
                    let args = self.arguments()?;
                    let name = self.ident("an instance name")?;
                    let mut initializer = vec![];
                    if self.eat("=") {
                        self.expect("{", "opening the instance initializer")?;
                        while !self.is("}") {
                            initializer.push(self.declaration()?);
                        }
                        self.bump();
                    }
                    self.expect(";", "after the instantiation")?;
                    return Ok(Decl::Instantiation(Instantiation { annos, ty, args, name, initializer }));
                }
                let name = self.ident("a name")?;
                if self.is("<") || self.is("(") {
                    // function declaration
                    let type_params = self.type_params()?;
                    self.push_type_scope(&type_params);
                    let params = self.params()?;
                    let body = self.block()?;
                    self.pop_type_scope();
                    return Ok(Decl::Function(FunctionDecl { proto: FunctionProto { annos, ret: ty, name, type_params, params }, body }));
                }
                let init = if self.eat("=") { Some(self.expr()?) } else { None };
                self.expect(";", "after the variable declaration")?;
                Ok(Decl::Var(VarDecl { annos, ty, name, init }))
            }
        }
    }

    /// After `extern`: `Name<T>(` is a generic extern function only if preceded by a return type.
    fn starts_type_at_fn(&self) -> bool {
        false
    }

    fn function_proto(&mut self, annos: Annotations) -> PResult<FunctionProto> {
        // return type, then name, type params, params; type params must be in scope for the return type
        // when the return type is a type parameter (`T lookahead<T>()`): pre-scan for `name <`.
        let save = self.pos;
        let mut pre_params = vec![];
        // find the pattern <type> <ident> '<' ... by scanning to the first '(' at depth 0
        let mut k = 0;
        while !matches!(self.peek_at(k), Tok::Punct("(") | Tok::Punct(";") | Tok::Eof) {
            k += 1;
        }
        // if the token before '(' is '>', the type params are right before
        if k >= 2 && matches!(self.peek_at(k - 1), Tok::Punct(">")) {
            let mut j = k - 1;
            while j > 0 && !matches!(self.peek_at(j), Tok::Punct("<")) {
                j -= 1;
            }
            let mut m = j + 1;
            while m < k - 1 {
                if let Tok::Ident(s) = self.peek_at(m) {
                    pre_params.push(Ident { name: s.clone(), span: self.span() });
                }
                m += 1;
            }
        }
        self.pos = save;
        self.push_type_scope(&pre_params);
        let ret = self.ty()?;
        let name = self.any_name("a function name")?;
        let type_params = self.type_params()?;
        self.push_type_scope(&type_params);
        let params = self.params()?;
        self.pop_type_scope();
        self.pop_type_scope();
        Ok(FunctionProto { annos, ret, name, type_params, params })
    }

    fn parser_body(&mut self, sig: BlockTypeDecl, ctor_params: Vec<Param>) -> PResult<Decl> {
        let mut locals = vec![];
        let mut states = vec![];
        while !self.is("}") {
            let save = self.pos;
            let annos = self.annotations()?;
            if self.is("state") {
                self.bump();
                let name = self.ident("a state name")?;
                let start = name.span;
                self.expect("{", "opening the state")?;
                let mut body = vec![];
                let mut transition = None;
                while !self.is("}") {
                    if self.is("transition") {
                        self.bump();
                        transition = Some(self.transition()?);
                        break;
                    }
                    body.push(self.stmt()?);
                }
                let end = self.expect("}", "closing the state")?;
                states.push(ParserState { annos, name, body, transition, span: start.to(end) });
            } else {
                self.pos = save;
                locals.push(self.declaration()?);
            }
        }
        self.bump();
        Ok(Decl::Parser(ParserDecl { sig, ctor_params, locals, states }))
    }

    fn transition(&mut self) -> PResult<Transition> {
        if self.is("select") {
            let start = self.bump().span;
            self.expect("(", "after select")?;
            let mut exprs = vec![];
            while !self.is(")") {
                exprs.push(self.expr()?);
                if !self.eat(",") {
                    break;
                }
            }
            self.expect(")", "closing the select expressions")?;
            self.expect("{", "opening the select cases")?;
            let mut cases = vec![];
            while !self.is("}") {
                let _ = self.annotations()?;
                let keyset = self.keyset()?;
                self.expect(":", "after the keyset")?;
                let next = self.ident("a state name")?;
                self.expect(";", "after the select case")?;
                cases.push(SelectCase { keyset, next });
            }
            let end = self.bump().span;
            self.eat(";");
            Ok(Transition::Select { exprs, cases, span: start.to(end) })
        } else {
            let id = self.ident("a state name or select")?;
            self.expect(";", "after the transition")?;
            Ok(Transition::Direct(id))
        }
    }

    /// A keyset: `default`, `_`, an expression, `e &&& m`, `a .. b`, or a tuple `(k1, k2)`.
    fn keyset(&mut self) -> PResult<Expr> {
        if self.is("(") {
            // tuple keyset or parenthesized expression
            let start = self.span();
            let save = self.pos;
            self.bump();
            let mut items = vec![];
            loop {
                items.push(self.simple_keyset()?);
                if !self.eat(",") {
                    break;
                }
            }
            if self.eat(")") && (items.len() > 1 || self.is(":")) {
                if items.len() == 1 {
                    return Ok(items.pop().unwrap());
                }
                return Ok(Expr { kind: ExprKind::List(items), span: start.to(self.prev_span()) });
            }
            self.pos = save;
        }
        self.simple_keyset()
    }

    fn simple_keyset(&mut self) -> PResult<Expr> {
        let start = self.span();
        if self.eat("default") {
            return Ok(Expr { kind: ExprKind::Default, span: start });
        }
        if self.is("_") {
            self.bump();
            return Ok(Expr { kind: ExprKind::DontCare, span: start });
        }
        let e = self.expr()?;
        if self.eat("&&&") {
            let m = self.expr()?;
            let sp = start.to(m.span);
            return Ok(Expr { kind: ExprKind::Mask(Box::new(e), Box::new(m)), span: sp });
        }
        if self.eat("..") {
            let hi = self.expr()?;
            let sp = start.to(hi.span);
            return Ok(Expr { kind: ExprKind::Range(Box::new(e), Box::new(hi)), span: sp });
        }
        Ok(e)
    }

    fn control_body(&mut self, sig: BlockTypeDecl, ctor_params: Vec<Param>) -> PResult<Decl> {
        let mut locals = vec![];
        let mut apply = None;
        while !self.is("}") {
            if self.is("apply") && self.is_at(1, "{") {
                self.bump();
                apply = Some(self.block()?);
                continue;
            }
            if self.at_eof() {
                return Err(self.unexpected("`}` closing the control"));
            }
            locals.push(self.declaration()?);
        }
        self.bump();
        let apply = apply.ok_or_else(|| Diagnostic::new(sig.name.span, format!("control `{}` has no apply block", sig.name.name)))?;
        Ok(Decl::Control(ControlDecl { sig, ctor_params, locals, apply }))
    }

    fn table_body(&mut self, annos: Annotations, name: Ident) -> PResult<Decl> {
        self.expect("{", "opening the table")?;
        let mut props = vec![];
        while !self.is("}") {
            let pa = self.annotations()?;
            let is_const = self.eat("const");
            let pname = self.any_name("a table property")?;
            let start = pname.span;
            match pname.name.as_str() {
                "key" => {
                    self.expect("=", "after key")?;
                    self.expect("{", "opening the key")?;
                    let mut elements = vec![];
                    while !self.is("}") {
                        let expr = self.expr()?;
                        self.expect(":", "after the key expression")?;
                        let match_kind = self.any_name("a match kind")?;
                        let ka = self.annotations()?;
                        self.expect(";", "after the key element")?;
                        elements.push(KeyElement { annos: ka, expr, match_kind });
                    }
                    let end = self.bump().span;
                    self.eat(";");
                    props.push(TableProp::Key { annos: pa, elements, span: start.to(end) });
                }
                "actions" => {
                    self.expect("=", "after actions")?;
                    self.expect("{", "opening the action list")?;
                    let mut actions = vec![];
                    while !self.is("}") {
                        let aa = self.annotations()?;
                        let expr = self.expr()?;
                        self.expect(";", "after the action")?;
                        actions.push(ActionRef { annos: aa, expr });
                    }
                    let end = self.bump().span;
                    self.eat(";");
                    props.push(TableProp::Actions { annos: pa, actions, span: start.to(end) });
                }
                "default_action" => {
                    self.expect("=", "after default_action")?;
                    let action = self.expr()?;
                    let end = self.expect(";", "after the default action")?;
                    props.push(TableProp::DefaultAction { annos: pa, is_const, action, span: start.to(end) });
                }
                "entries" => {
                    self.expect("=", "after entries")?;
                    self.expect("{", "opening the entries")?;
                    let mut entries = vec![];
                    while !self.is("}") {
                        let estart = self.span();
                        let mut ea = self.annotations()?;
                        let e_const = self.eat("const");
                        let priority = if self.is("priority") && self.is_at(1, "=") {
                            self.bump();
                            self.bump();
                            let p = self.expr()?;
                            self.expect(":", "after the entry priority")?;
                            Some(p)
                        } else {
                            None
                        };
                        let keyset = self.keyset()?;
                        self.expect(":", "after the entry keyset")?;
                        let action = self.expr()?;
                        let mut trailing = self.annotations()?;
                        ea.append(&mut trailing);
                        let end = self.expect(";", "after the entry")?;
                        entries.push(TableEntry { annos: ea, is_const: e_const, keyset, action, priority, span: estart.to(end) });
                    }
                    let end = self.bump().span;
                    self.eat(";");
                    props.push(TableProp::Entries { annos: pa, is_const, entries, span: start.to(end) });
                }
                _ => {
                    self.expect("=", "after the table property name")?;
                    let value = self.initializer_expr()?;
                    self.expect(";", "after the table property")?;
                    props.push(TableProp::Other { annos: pa, is_const, name: pname, value });
                }
            }
        }
        self.bump();
        Ok(Decl::Table(TableDecl { annos, name, props }))
    }

    /// A property value, which may be a constructor call like `action_selector(HashAlgorithm.crc16, 32w64, 32w16)`
    /// or a specialized one `direct_meter<bit<32>>(MeterType.packets)`.
    fn initializer_expr(&mut self) -> PResult<Expr> {
        if let Tok::Ident(n) = self.peek().clone() {
            if self.is_type_name(&n) && self.is_at(1, "<") {
                let ty = self.ty()?;
                let args = self.arguments()?;
                let sp = ty.span.to(self.prev_span());
                return Ok(Expr { kind: ExprKind::Construct { ty, args }, span: sp });
            }
        }
        self.expr()
    }

    // ------------------------------------------------------------ statements

    fn block(&mut self) -> PResult<Block> {
        let annos = self.annotations()?;
        let start = self.expect("{", "opening a block")?;
        let mut stmts = vec![];
        while !self.is("}") {
            if self.at_eof() {
                return Err(self.unexpected("`}` closing the block"));
            }
            stmts.push(self.stmt()?);
        }
        let end = self.bump().span;
        Ok(Block { annos, stmts, span: start.to(end) })
    }

    fn stmt(&mut self) -> PResult<Stmt> {
        self.enter()?;
        let r = self.stmt_inner();
        self.leave();
        r
    }

    fn stmt_inner(&mut self) -> PResult<Stmt> {
        let start = self.span();
        if self.is("@") {
            // annotated statement: block or declaration
            let save = self.pos;
            let annos = self.annotations()?;
            if self.is("{") {
                let mut b = self.block()?;
                b.annos = annos;
                let sp = b.span;
                return Ok(Stmt { kind: StmtKind::Block(b), span: sp });
            }
            self.pos = save;
            let _ = self.annotations()?;
            return self.stmt_inner();
        }
        let kw = match self.peek() {
            Tok::Ident(s) => s.clone(),
            Tok::Punct("{") => {
                let b = self.block()?;
                let sp = b.span;
                return Ok(Stmt { kind: StmtKind::Block(b), span: sp });
            }
            Tok::Punct(";") => {
                self.bump();
                return Ok(Stmt { kind: StmtKind::Empty, span: start });
            }
            _ => String::new(),
        };
        let mk = |kind, p: &Parser| Stmt { kind, span: start.to(p.prev_span()) };
        match kw.as_str() {
            "if" => {
                self.bump();
                self.expect("(", "after if")?;
                let c = self.expr()?;
                self.expect(")", "closing the condition")?;
                let then = self.stmt()?;
                let else_ = if self.eat("else") { Some(Box::new(self.stmt()?)) } else { None };
                Ok(mk(StmtKind::If(c, Box::new(then), else_), self))
            }
            "exit" => {
                self.bump();
                self.expect(";", "after exit")?;
                Ok(mk(StmtKind::Exit, self))
            }
            "return" => {
                self.bump();
                let e = if self.is(";") { None } else { Some(self.expr()?) };
                self.expect(";", "after return")?;
                Ok(mk(StmtKind::Return(e), self))
            }
            "switch" => {
                self.bump();
                self.expect("(", "after switch")?;
                let e = self.expr()?;
                self.expect(")", "closing the switch expression")?;
                self.expect("{", "opening the switch cases")?;
                let mut cases = vec![];
                while !self.is("}") {
                    let cs = self.span();
                    let label = if self.eat("default") {
                        SwitchLabel::Default
                    } else {
                        SwitchLabel::Expr(self.expr()?)
                    };
                    self.expect(":", "after the switch label")?;
                    let body = if self.is("{") { Some(self.block()?) } else { None };
                    cases.push(SwitchCase { label, body, span: cs.to(self.prev_span()) });
                }
                self.bump();
                Ok(mk(StmtKind::Switch(e, cases), self))
            }
            "const" => {
                self.bump();
                let ty = self.ty()?;
                let name = self.ident("a constant name")?;
                self.expect("=", "in the constant declaration")?;
                let value = self.expr()?;
                self.expect(";", "after the constant declaration")?;
                Ok(mk(StmtKind::Const(ConstDecl { annos: vec![], ty, name, value }), self))
            }
            _ => {
                // variable declaration or expression statement
                if self.starts_type() && self.looks_like_decl() {
                    let ty = self.ty()?;
                    if self.is("(") {
                        return Err(Diagnostic::new(start, "instantiations are not allowed inside a block"));
                    }
                    let name = self.ident("a variable name")?;
                    let init = if self.eat("=") { Some(self.expr()?) } else { None };
                    self.expect(";", "after the variable declaration")?;
                    return Ok(mk(StmtKind::Var(VarDecl { annos: vec![], ty, name, init }), self));
                }
                let lhs = self.expr()?;
                for (op, bop) in [
                    ("+=", BinOp::Add),
                    ("-=", BinOp::Sub),
                    ("*=", BinOp::Mul),
                    ("/=", BinOp::Div),
                    ("%=", BinOp::Mod),
                    ("<<=", BinOp::Shl),
                    (">>=", BinOp::Shr),
                    ("&=", BinOp::BitAnd),
                    ("|=", BinOp::BitOr),
                    ("^=", BinOp::BitXor),
                    ("|+|=", BinOp::AddSat),
                    ("|-|=", BinOp::SubSat),
                ] {
                    if self.eat(op) {
                        let rhs = self.expr()?;
                        self.expect(";", "after the assignment")?;
                        return Ok(mk(StmtKind::OpAssign(bop, lhs, rhs), self));
                    }
                }
                if self.eat("=") {
                    let rhs = self.expr()?;
                    self.expect(";", "after the assignment")?;
                    return Ok(mk(StmtKind::Assign(lhs, rhs), self));
                }
                if matches!(lhs.kind, ExprKind::Call { .. }) {
                    self.expect(";", "after the call")?;
                    return Ok(mk(StmtKind::Call(lhs), self));
                }
                Err(self.unexpected("`=` or `;` (a statement must be an assignment or a call)"))
            }
        }
    }

    /// After a type-looking start: is this `Type name ...` (declaration) rather than an expression?
    fn looks_like_decl(&self) -> bool {
        // scan over a type: ident [ <...> ] [ [N] ]* then expect an identifier
        let mut k = 0;
        if matches!(self.peek_at(k), Tok::Punct(".")) {
            k += 1;
        }
        match self.peek_at(k) {
            Tok::Ident(_) | Tok::Punct("_") => k += 1,
            _ => return false,
        }
        if matches!(self.peek_at(k), Tok::Punct("<")) {
            let mut depth = 0i32;
            loop {
                match self.peek_at(k) {
                    Tok::Punct("<") => depth += 1,
                    Tok::Punct(">") => depth -= 1,
                    Tok::Punct(">>") => depth -= 2,
                    Tok::Punct(";") | Tok::Punct("{") | Tok::Eof => return false,
                    _ => {}
                }
                k += 1;
                if depth <= 0 {
                    break;
                }
            }
        }
        while matches!(self.peek_at(k), Tok::Punct("[")) {
            while !matches!(self.peek_at(k), Tok::Punct("]") | Tok::Eof) {
                k += 1;
            }
            k += 1;
        }
        matches!(self.peek_at(k), Tok::Ident(_))
    }

    // ------------------------------------------------------------ expressions

    fn arguments(&mut self) -> PResult<Vec<Argument>> {
        self.expect("(", "opening the arguments")?;
        let mut v = vec![];
        while !self.is(")") {
            let name = if matches!(self.peek(), Tok::Ident(_)) && self.is_at(1, "=") && !self.is_at(1, "==") {
                let n = self.any_name("an argument name")?;
                self.bump();
                Some(n)
            } else {
                None
            };
            let value = if self.is("_") && (self.is_at(1, ",") || self.is_at(1, ")")) {
                let sp = self.bump().span;
                Expr { kind: ExprKind::DontCare, span: sp }
            } else {
                self.expr()?
            };
            v.push(Argument { name, value });
            if !self.eat(",") {
                break;
            }
        }
        self.expect(")", "closing the arguments")?;
        Ok(v)
    }

    pub fn expr(&mut self) -> PResult<Expr> {
        self.enter()?;
        let r = self.ternary();
        self.leave();
        r
    }

    fn ternary(&mut self) -> PResult<Expr> {
        let c = self.binary(0)?;
        if self.eat("?") {
            let a = self.expr()?;
            self.expect(":", "in the conditional expression")?;
            let b = self.expr()?;
            let sp = c.span.to(b.span);
            return Ok(Expr { kind: ExprKind::Ternary(Box::new(c), Box::new(a), Box::new(b)), span: sp });
        }
        Ok(c)
    }

    fn binop(&self) -> Option<(BinOp, u8)> {
        let Tok::Punct(p) = self.peek() else { return None };
        Some(match *p {
            "||" => (BinOp::Or, 1),
            "&&" => (BinOp::And, 2),
            "==" => (BinOp::Eq, 3),
            "!=" => (BinOp::Ne, 3),
            "<" => (BinOp::Lt, 4),
            ">" => (BinOp::Gt, 4),
            "<=" => (BinOp::Le, 4),
            ">=" => (BinOp::Ge, 4),
            "|" => (BinOp::BitOr, 5),
            "^" => (BinOp::BitXor, 6),
            "&" => (BinOp::BitAnd, 7),
            "<<" => (BinOp::Shl, 8),
            ">>" => (BinOp::Shr, 8),
            "++" => (BinOp::Concat, 9),
            "+" => (BinOp::Add, 10),
            "-" => (BinOp::Sub, 10),
            "|+|" => (BinOp::AddSat, 10),
            "|-|" => (BinOp::SubSat, 10),
            "*" => (BinOp::Mul, 11),
            "/" => (BinOp::Div, 11),
            "%" => (BinOp::Mod, 11),
            _ => return None,
        })
    }

    fn binary(&mut self, min: u8) -> PResult<Expr> {
        let mut lhs = self.unary()?;
        while let Some((op, prec)) = self.binop() {
            if prec <= min {
                break;
            }
            self.bump();
            let rhs = self.binary(prec)?;
            let sp = lhs.span.to(rhs.span);
            lhs = Expr { kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)), span: sp };
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> PResult<Expr> {
        self.enter()?;
        let r = self.unary_inner();
        self.leave();
        r
    }

    fn unary_inner(&mut self) -> PResult<Expr> {
        let start = self.span();
        let op = match self.peek() {
            Tok::Punct("!") => Some(UnOp::Not),
            Tok::Punct("~") => Some(UnOp::BitNot),
            Tok::Punct("-") => Some(UnOp::Neg),
            Tok::Punct("+") => Some(UnOp::Plus),
            _ => None,
        };
        if let Some(op) = op {
            self.bump();
            let e = self.unary()?;
            let sp = start.to(e.span);
            return Ok(Expr { kind: ExprKind::Unary(op, Box::new(e)), span: sp });
        }
        // cast: ( Type ) expr
        if self.is("(") && self.is_cast() {
            self.bump();
            let t = self.ty()?;
            self.expect(")", "closing the cast")?;
            let e = self.unary()?;
            let sp = start.to(e.span);
            return Ok(Expr { kind: ExprKind::Cast(t, Box::new(e)), span: sp });
        }
        self.postfix()
    }

    fn is_cast(&self) -> bool {
        // `(` followed by a type and `)`, and then something that starts an expression
        match self.peek_at(1) {
            Tok::Ident(s) if matches!(s.as_str(), "bit" | "int" | "varbit" | "bool" | "error" | "tuple") => true,
            Tok::Ident(s) if self.is_type_name(s) => {
                // `(T) x` vs `(x)`: T is a type name; check the closing paren follows the type
                let mut k = 2;
                if matches!(self.peek_at(k), Tok::Punct("<")) {
                    let mut depth = 0i32;
                    loop {
                        match self.peek_at(k) {
                            Tok::Punct("<") => depth += 1,
                            Tok::Punct(">") => depth -= 1,
                            Tok::Punct(">>") => depth -= 2,
                            Tok::Eof => return false,
                            _ => {}
                        }
                        k += 1;
                        if depth <= 0 {
                            break;
                        }
                    }
                }
                matches!(self.peek_at(k), Tok::Punct(")")) && !matches!(self.peek_at(k + 1), Tok::Punct(".") | Tok::Punct(";") | Tok::Punct(")"))
            }
            _ => false,
        }
    }

    fn postfix(&mut self) -> PResult<Expr> {
        let mut e = self.primary_expr()?;
        loop {
            let start = e.span;
            if self.is(".") {
                self.bump();
                let m = self.any_name("a member name")?;
                let sp = start.to(m.span);
                e = Expr { kind: ExprKind::Member(Box::new(e), m), span: sp };
            } else if self.is("[") {
                self.bump();
                let a = self.expr()?;
                if self.eat(":") {
                    let b = self.expr()?;
                    let end = self.expect("]", "closing the slice")?;
                    e = Expr { kind: ExprKind::Slice(Box::new(e), Box::new(a), Box::new(b)), span: start.to(end) };
                } else {
                    let end = self.expect("]", "closing the index")?;
                    e = Expr { kind: ExprKind::Index(Box::new(e), Box::new(a)), span: start.to(end) };
                }
            } else if self.is("(") {
                let args = self.arguments()?;
                let sp = start.to(self.prev_span());
                e = Expr { kind: ExprKind::Call { callee: Box::new(e), type_args: vec![], args }, span: sp };
            } else if self.is("<") && matches!(e.kind, ExprKind::Name(_) | ExprKind::DotName(_) | ExprKind::Member(..)) && self.generic_call_ahead() {
                self.bump();
                let mut targs = vec![];
                loop {
                    targs.push(self.type_arg()?);
                    if !self.eat(",") {
                        break;
                    }
                }
                self.expect_close_angle()?;
                let args = self.arguments()?;
                let sp = start.to(self.prev_span());
                e = Expr { kind: ExprKind::Call { callee: Box::new(e), type_args: targs, args }, span: sp };
            } else {
                break;
            }
        }
        Ok(e)
    }

    /// `f<T>(...)`: a `<` that opens type arguments of a call.
    fn generic_call_ahead(&self) -> bool {
        let mut k = 1;
        let mut depth = 1i32;
        while depth > 0 {
            match self.peek_at(k) {
                Tok::Punct("<") => depth += 1,
                Tok::Punct(">") => depth -= 1,
                Tok::Punct(">>") => depth -= 2,
                Tok::Ident(s) if self.is_type_name(s) || matches!(s.as_str(), "bit" | "int" | "varbit" | "bool" | "error" | "tuple") => {}
                Tok::Int(_) | Tok::Punct(",") | Tok::Punct("_") | Tok::Punct("[") | Tok::Punct("]") | Tok::Punct("(") | Tok::Punct(")") => {}
                _ => return false,
            }
            k += 1;
            if k > 64 {
                return false;
            }
        }
        // `a < (b >> c)`: a `>>` closing more than was opened is a shift, not the end of type arguments
        depth == 0 && matches!(self.peek_at(k), Tok::Punct("("))
    }

    fn primary_expr(&mut self) -> PResult<Expr> {
        let start = self.span();
        let t = self.peek().clone();
        match t {
            Tok::Int(i) => {
                self.bump();
                Ok(Expr { kind: ExprKind::Int(i), span: start })
            }
            Tok::Str(s) => {
                self.bump();
                Ok(Expr { kind: ExprKind::Str(s), span: start })
            }
            Tok::Punct("(") => {
                self.bump();
                let e = self.expr()?;
                self.expect(")", "closing the parenthesis")?;
                Ok(Expr { kind: e.kind, span: start.to(self.prev_span()) })
            }
            Tok::Punct("{") => {
                self.bump();
                if self.is("#") {
                    self.bump();
                    self.expect("}", "in `{#}`")?;
                    return Ok(Expr { kind: ExprKind::Invalid, span: start.to(self.prev_span()) });
                }
                // struct initializer `{ a = 1, ... }` or list `{ 1, 2 }`
                if matches!(self.peek(), Tok::Ident(_)) && self.is_at(1, "=") && !self.is_at(1, "==") {
                    let mut fields = vec![];
                    let mut has_rest = false;
                    while !self.is("}") {
                        if self.eat("...") {
                            has_rest = true;
                            break;
                        }
                        let n = self.any_name("a field name")?;
                        self.expect("=", "after the field name")?;
                        let v = self.expr()?;
                        fields.push((n, v));
                        if !self.eat(",") {
                            break;
                        }
                    }
                    self.expect("}", "closing the initializer")?;
                    return Ok(Expr { kind: ExprKind::StructInit { fields, has_rest }, span: start.to(self.prev_span()) });
                }
                let mut items = vec![];
                while !self.is("}") {
                    if self.eat("...") {
                        break;
                    }
                    items.push(self.expr()?);
                    if !self.eat(",") {
                        break;
                    }
                }
                self.expect("}", "closing the list")?;
                Ok(Expr { kind: ExprKind::List(items), span: start.to(self.prev_span()) })
            }
            Tok::Punct(".") => {
                self.bump();
                let n = self.any_name("a name")?;
                Ok(Expr { kind: ExprKind::DotName(n), span: start.to(self.prev_span()) })
            }
            Tok::Punct("_") => {
                self.bump();
                Ok(Expr { kind: ExprKind::DontCare, span: start })
            }
            Tok::Ident(s) => match s.as_str() {
                "true" | "false" => {
                    self.bump();
                    Ok(Expr { kind: ExprKind::Bool(s == "true"), span: start })
                }
                "default" => {
                    self.bump();
                    Ok(Expr { kind: ExprKind::Default, span: start })
                }
                "bit" | "int" | "varbit" | "bool" | "tuple" => {
                    let t = self.ty()?;
                    Ok(Expr { kind: ExprKind::Type(t), span: start.to(self.prev_span()) })
                }
                _ => {
                    // a specialized type used as a value: `Type<args>(...)` constructor or `T<..>.member`
                    if self.is_type_name(&s) && self.is_at(1, "<") && !self.generic_call_ahead_at(1) {
                        let t = self.ty()?;
                        if self.is("(") {
                            let args = self.arguments()?;
                            return Ok(Expr { kind: ExprKind::Construct { ty: t, args }, span: start.to(self.prev_span()) });
                        }
                        return Ok(Expr { kind: ExprKind::Type(t), span: start.to(self.prev_span()) });
                    }
                    self.bump();
                    Ok(Expr { kind: ExprKind::Name(Ident { name: s, span: start }), span: start })
                }
            },
            _ => Err(self.unexpected("an expression")),
        }
    }

    fn generic_call_ahead_at(&self, _k: usize) -> bool {
        false
    }
}

fn is_reserved(s: &str) -> bool {
    matches!(
        s,
        "action" | "apply" | "bit" | "bool" | "const" | "control" | "default" | "else" | "enum" | "error" | "exit" | "extern" | "false"
            | "header" | "header_union" | "if" | "in" | "inout" | "int" | "key" | "match_kind" | "out" | "parser" | "package"
            | "return" | "select" | "state" | "struct" | "switch" | "table" | "transition" | "true" | "tuple" | "typedef"
            | "varbit" | "void" | "value_set" | "entries" | "actions" | "type" | "abstract" | "priority"
    )
}

#[allow(dead_code)]
fn is_zero(v: &BigInt) -> bool {
    v.is_zero()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_literals() {
        let l = parse_int("8w5").unwrap();
        assert_eq!(l.width, Some((8, false)));
        assert_eq!(l.value, 5.into());
        let l = parse_int("16w0xFF").unwrap();
        assert_eq!(l.value, 255.into());
        let l = parse_int("4s3").unwrap();
        assert_eq!(l.width, Some((4, true)));
        assert_eq!(parse_int("0b1010").unwrap().value, 10.into());
        assert_eq!(parse_int("1_000").unwrap().value, 1000.into());
        assert!(parse_int("0xZZ").is_err());
    }

    #[test]
    fn precedence() {
        let e = parse_expr("a + b * c == d && e").unwrap();
        let ExprKind::Binary(BinOp::And, l, _) = e.kind else { panic!("top is &&") };
        let ExprKind::Binary(BinOp::Eq, l2, _) = l.kind else { panic!("then ==") };
        assert!(matches!(l2.kind, ExprKind::Binary(BinOp::Add, _, _)));
    }

    #[test]
    fn generic_close() {
        let p = parse_program("extern register<T> { register(bit<32> n); } control c() { register<bit<8>>(16) r; apply { } }").unwrap();
        assert_eq!(p.decls.len(), 2);
    }

    #[test]
    fn errors_have_locations() {
        let e = parse_program("control c() { apply { x = ; } }").unwrap_err();
        assert!(e.message.contains("expected"), "{}", e.message);
        assert!(parse_program("header h { bit<8> a }").is_err());
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let src = format!("const bit<8> x = {}1{};", "(".repeat(5000), ")".repeat(5000));
        assert!(parse_program(&src).is_err());
    }
}
