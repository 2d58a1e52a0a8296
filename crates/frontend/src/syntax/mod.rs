//! Lexer and recursive-descent parser for P4_16 (the whole grammar of the language specification
//! v1.2.x that v1model programs use), producing the [`ast`](crate::ast).
//!
//! The grammar's type/expression ambiguity is resolved by tracking type names while parsing: every
//! declared type (and the type parameters in scope) is known by the time it is used.

mod controls;
mod decl;
mod expr;
mod lexer;
mod parsers;
mod stmt;
mod tables;
mod types;

use lexer::describe;
pub use lexer::{lex, Tok, Token};

use crate::ast::*;
use crate::diag::{Diagnostic, PResult};
use num_bigint::BigInt;
use num_traits::Zero;
use std::collections::HashSet;

/// Parse a whole program.
pub fn parse_program(text: &str) -> PResult<Program> {
    let toks = lex(text)?;
    let mut p = Parser::new(toks, text);
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
    let mut p = Parser::new(toks, text);
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
    /// The source text the tokens' spans index.
    text: String,
}

impl Parser {
    fn new(toks: Vec<Token>, text: &str) -> Self {
        let mut base = HashSet::new();
        for t in ["packet_in", "packet_out"] {
            base.insert(t.to_string());
        }
        Parser {
            toks,
            pos: 0,
            types: vec![base],
            depth: 0,
            split_gt: false,
            text: text.to_string(),
        }
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
        matches!(self.peek(), Tok::Punct(x) if *x == p)
            || matches!(self.peek(), Tok::Ident(x) if x == p)
    }
    fn is_at(&self, k: usize, p: &str) -> bool {
        matches!(self.peek_at(k), Tok::Punct(x) if *x == p)
            || matches!(self.peek_at(k), Tok::Ident(x) if x == p)
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
        Diagnostic::new(
            self.span(),
            format!("expected {what}, found {}", describe(self.peek())),
        )
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
            return Err(Diagnostic::new(
                self.span(),
                format!("program nests too deeply: more than {MAX_DEPTH} levels of blocks, statements or parenthesised expressions"),
            ));
        }
        Ok(())
    }
    fn leave(&mut self) {
        self.depth -= 1;
    }

    fn ident(&mut self, what: &str) -> PResult<Ident> {
        match self.peek().clone() {
            Tok::Ident(s)
                if !is_reserved(&s)
                    || matches!(
                        s.as_str(),
                        "apply" | "key" | "actions" | "state" | "entries" | "type" | "priority"
                    ) =>
            {
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
        self.types
            .push(params.iter().map(|i| i.name.clone()).collect());
    }
    fn pop_type_scope(&mut self) {
        self.types.pop();
    }
}

fn is_reserved(s: &str) -> bool {
    matches!(
        s,
        "action"
            | "apply"
            | "bit"
            | "bool"
            | "const"
            | "control"
            | "default"
            | "else"
            | "enum"
            | "error"
            | "exit"
            | "extern"
            | "false"
            | "header"
            | "header_union"
            | "if"
            | "in"
            | "inout"
            | "int"
            | "key"
            | "match_kind"
            | "out"
            | "parser"
            | "package"
            | "return"
            | "select"
            | "state"
            | "struct"
            | "switch"
            | "table"
            | "transition"
            | "true"
            | "tuple"
            | "typedef"
            | "varbit"
            | "void"
            | "value_set"
            | "entries"
            | "actions"
            | "type"
            | "abstract"
            | "priority"
    )
}

#[allow(dead_code)]
fn is_zero(v: &BigInt) -> bool {
    v.is_zero()
}

#[cfg(test)]
mod tests {
    use super::lexer::parse_int;
    use super::*;

    #[test]
    fn strings_span_lines_and_annotations_keep_their_tokens() {
        let toks = lex("@e(\"a\n  b\") x").unwrap();
        assert_eq!(toks[3].tok, Tok::Str("a\n  b".into()));
        let prog = parse_program("@a(X/Y, \"s\") @s[k=\"v\", n=1] @l[1, \"two\"] @free(any \"tokens\" + 3w1 :: ) const bit<8> c = 1;").unwrap();
        let Decl::Const(c) = &prog.decls[0] else {
            panic!("a constant")
        };
        let a: Vec<(&str, &str)> = c
            .annos
            .iter()
            .map(|a| (a.name.name.as_str(), a.text.as_str()))
            .collect();
        assert_eq!(a[0], ("a", "X / Y , \"s\""));
        assert_eq!(a[3], ("free", "any \"tokens\" + 3w1 : :"));
        assert!(
            matches!(&c.annos[1].body, AnnotationBody::KeyValues(kv) if kv.len() == 2 && kv[1].0.name == "n")
        );
        assert!(matches!(&c.annos[2].body, AnnotationBody::ExprList(es) if es.len() == 2));
    }

    #[test]
    fn free_form_annotation_bodies_take_any_characters_and_nothing_else_does() {
        let prog = parse_program(
            "@scrabble(\n - That's it. (All there is) 0xdeadbeef\n) @b const bit<8> c = 1;",
        )
        .unwrap();
        let Decl::Const(c) = &prog.decls[0] else {
            panic!("a constant")
        };
        assert_eq!(c.annos[0].name.name, "scrabble");
        assert!(
            c.annos[0].text.contains("That ' s it"),
            "{}",
            c.annos[0].text
        );
        assert!(
            matches!(&c.annos[0].body, AnnotationBody::Raw(r) if r.contains("'") && r.contains("3735928559")),
            "{:?}",
            c.annos[0].body
        );
        assert_eq!(c.annos[1].name.name, "b");
        // outside an annotation body the character is refused, with its place
        let e = parse_program("const bit<8> c = 'a';").unwrap_err();
        assert!(
            e.message.contains("unexpected character `'`"),
            "{}",
            e.message
        );
        // after the annotation's closing parenthesis the lexer is strict again
        assert!(parse_program("@a(') const bit<8> c = 'a';").is_err());
        assert!(parse_program("@a(x) const bit<8> c = ';").is_err());
    }

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
        let ExprKind::Binary(BinOp::And, l, _) = e.kind else {
            panic!("top is &&")
        };
        let ExprKind::Binary(BinOp::Eq, l2, _) = l.kind else {
            panic!("then ==")
        };
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
        let src = format!(
            "const bit<8> x = {}1{};",
            "(".repeat(5000),
            ")".repeat(5000)
        );
        assert!(parse_program(&src).is_err());
    }
}
