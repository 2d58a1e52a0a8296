//! The P4_16 lexer: source text to [`Token`]s, and integer literal parsing.

use crate::ast::*;
use crate::diag::{Diagnostic, PResult};
use num_bigint::BigInt;
use num_traits::Num;

#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    Ident(String),
    Int(IntLit),
    Str(String),
    Punct(&'static str),
    /// A character that is no P4 token: allowed only inside a free-form annotation body
    /// `@name(...)`, where any tokens may appear (an apostrophe in prose, `$`, ...).
    Other(char),
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
    "&&&", "|+|", "|-|", "<<=", ">>=", "|+|=", "|-|=", "...", "++", "&&", "||", "==", "!=", "<=",
    ">=", "<<", ">>", "..", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "{", "}", "(", ")",
    "[", "]", "<", ">", ";", ":", ",", ".", "=", "+", "-", "*", "/", "%", "&", "|", "^", "~", "!",
    "?", "@", "_", "#",
];

pub(super) fn describe(t: &Tok) -> String {
    match t {
        Tok::Ident(s) => format!("`{s}`"),
        Tok::Int(i) => format!("`{}`", i.value),
        Tok::Str(s) => format!("\"{s}\""),
        Tok::Punct(p) => format!("`{p}`"),
        Tok::Other(c) => format!("`{c}`"),
        Tok::Eof => "end of input".into(),
    }
}

/// Split P4 source into tokens.
pub fn lex(text: &str) -> PResult<Vec<Token>> {
    let b = text.as_bytes();
    let mut i = 0;
    let mut out: Vec<Token> = vec![];
    let mut puncts: Vec<&'static str> = PUNCTS.to_vec();
    puncts.sort_by_key(|p| std::cmp::Reverse(p.len()));
    // Free-form annotation bodies: `anno` is 1 after `@`, 2 after `@name`; `depth` counts the open
    // parentheses of a body `@name(...)` (0 outside one).
    let mut anno = 0u8;
    let mut depth = 0u32;
    let mut seen = 0;
    while i < b.len() {
        if out.len() > seen {
            seen = out.len();
            track_annotation(&out[seen - 1].tok, &mut anno, &mut depth);
        }
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
                return Err(Diagnostic::new(
                    Span::new(start as u32, start as u32 + 2),
                    "unterminated comment",
                ));
            }
            i += 2;
            continue;
        }
        let start = i;
        if c.is_ascii_alphabetic()
            || (c == b'_'
                && b.get(i + 1)
                    .map(|x| x.is_ascii_alphanumeric() || *x == b'_')
                    .unwrap_or(false))
        {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Token {
                tok: Tok::Ident(text[start..i].to_string()),
                span: Span::new(start as u32, i as u32),
            });
            continue;
        }
        if c.is_ascii_digit() {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let lit = parse_int(&text[start..i])
                .map_err(|m| Diagnostic::new(Span::new(start as u32, i as u32), m))?;
            out.push(Token {
                tok: Tok::Int(lit),
                span: Span::new(start as u32, i as u32),
            });
            continue;
        }
        if c == b'"' {
            i += 1;
            let mut s = String::new();
            loop {
                match b.get(i) {
                    None => {
                        return Err(Diagnostic::new(
                            Span::new(start as u32, start as u32 + 1),
                            "unterminated string literal",
                        ))
                    }
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
            out.push(Token {
                tok: Tok::Str(s),
                span: Span::new(start as u32, i as u32),
            });
            continue;
        }
        let rest = &text[i..];
        match puncts.iter().find(|p| rest.starts_with(**p)) {
            Some(p) => {
                i += p.len();
                out.push(Token {
                    tok: Tok::Punct(p),
                    span: Span::new(start as u32, i as u32),
                });
            }
            None => {
                let ch = rest.chars().next().unwrap_or(' ');
                if depth == 0 {
                    return Err(Diagnostic::new(
                        Span::new(start as u32, (start + ch.len_utf8()) as u32),
                        format!("unexpected character `{ch}`"),
                    ));
                }
                i += ch.len_utf8();
                out.push(Token {
                    tok: Tok::Other(ch),
                    span: Span::new(start as u32, i as u32),
                });
            }
        }
    }
    out.push(Token {
        tok: Tok::Eof,
        span: Span::new(b.len() as u32, b.len() as u32),
    });
    Ok(out)
}

/// Follow `@name(` ... `)` through the token stream: `depth` > 0 inside a free-form annotation
/// body.
fn track_annotation(t: &Tok, anno: &mut u8, depth: &mut u32) {
    if *depth > 0 {
        match t {
            Tok::Punct("(") => *depth += 1,
            Tok::Punct(")") => *depth -= 1,
            _ => {}
        }
        return;
    }
    *anno = match (t, *anno) {
        (Tok::Punct("@"), _) => 1,
        (Tok::Ident(_), 1) => 2,
        (Tok::Punct("("), 2) => {
            *depth = 1;
            0
        }
        _ => 0,
    };
}

pub(super) fn parse_int(s: &str) -> Result<IntLit, String> {
    let clean: String = s.chars().filter(|c| *c != '_').collect();
    // width prefix: 8w5, 4s3, 16w0xff
    let (width, body) = match clean.find(['w', 's']) {
        Some(p)
            if p > 0
                && clean[..p].chars().all(|c| c.is_ascii_digit())
                && !clean[..p].starts_with("0x") =>
        {
            let w: u32 = clean[..p]
                .parse()
                .map_err(|_| format!("bad width in `{s}`"))?;
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
    let value =
        BigInt::from_str_radix(digits, radix).map_err(|_| format!("malformed integer `{s}`"))?;
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
