//! Macros: the table of `#define`d names (object-like and function-like), `#define` parsed into it,
//! and macro expansion of a line (identifiers outside string literals, arguments expanded first,
//! the result rescanned), bounded in depth and in how far a line may grow.

use super::source::string_end;
use std::collections::HashMap;

/// The longest a line may grow by macro expansion, in bytes (an exponential `#define` chain stops
/// here).
pub const MAX_LINE_EXPANSION: usize = 1 << 20;

#[derive(Clone, Debug)]
struct Macro {
    params: Option<Vec<String>>,
    body: String,
}

/// The macros defined at a point of the input.
#[derive(Default)]
pub(super) struct Macros {
    map: HashMap<String, Macro>,
}

impl Macros {
    /// Define `name` as an object-like macro (`-D NAME=VALUE` on the command line).
    pub(super) fn define_object(&mut self, name: &str, body: &str) {
        self.map.insert(
            name.to_string(),
            Macro {
                params: None,
                body: body.to_string(),
            },
        );
    }

    pub(super) fn is_defined(&self, name: &str) -> bool {
        self.map.contains_key(name)
    }

    pub(super) fn undef(&mut self, name: &str) {
        self.map.remove(name);
    }

    /// `#define` with the text after the directive's name.
    pub(super) fn define(&mut self, rest: &str) -> Result<(), String> {
        let name_end = rest
            .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .unwrap_or(rest.len());
        let name = &rest[..name_end];
        if name.is_empty() {
            return Err("#define needs a name".into());
        }
        let after = &rest[name_end..];
        if let Some(p) = after.strip_prefix('(') {
            let close = p.find(')').ok_or("unclosed parameter list in #define")?;
            let params: Vec<String> = p[..close]
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect();
            self.map.insert(
                name.to_string(),
                Macro {
                    params: Some(params),
                    body: p[close + 1..].trim().to_string(),
                },
            );
        } else {
            self.map.insert(
                name.to_string(),
                Macro {
                    params: None,
                    body: after.trim().to_string(),
                },
            );
        }
        Ok(())
    }

    /// Expand macros in a line (identifiers outside string literals); the line may grow by at most
    /// [`MAX_LINE_EXPANSION`] bytes.
    pub(super) fn expand(&self, line: &str, depth: usize) -> Result<String, String> {
        self.expand_within(line, depth, line.len().saturating_add(MAX_LINE_EXPANSION))
    }

    /// `expand`, the result (and every intermediate) at most `limit` bytes long.
    fn expand_within(&self, line: &str, depth: usize, limit: usize) -> Result<String, String> {
        if depth > 32 || self.map.is_empty() {
            return Ok(line.to_string());
        }
        let b = line.as_bytes();
        let mut out = String::with_capacity(line.len());
        let mut i = 0;
        let mut changed = false;
        while i < b.len() {
            let c = b[i];
            if c == b'"' {
                let start = i;
                i = string_end(b, i);
                out.push_str(&line[start..i]);
            } else if c.is_ascii_alphabetic() || c == b'_' {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                let word = &line[start..i];
                // a number like 8w5 is not an identifier: skip if preceded by a digit
                let after_digit = start > 0 && b[start - 1].is_ascii_digit();
                match self.map.get(word) {
                    Some(m) if !after_digit => match &m.params {
                        None => {
                            out.push_str(&m.body);
                            changed = true;
                        }
                        Some(params) => {
                            let mut j = i;
                            while j < b.len() && b[j] == b' ' {
                                j += 1;
                            }
                            if j < b.len() && b[j] == b'(' {
                                let (args, end) = split_args(line, j)?;
                                let args: Vec<String> = args
                                    .iter()
                                    .map(|a| self.expand_within(a.trim(), depth + 1, limit))
                                    .collect::<Result<_, _>>()?;
                                if args.len() != params.len()
                                    && !(params.is_empty() && args.len() == 1 && args[0].is_empty())
                                {
                                    return Err(format!(
                                        "macro `{word}` takes {} arguments, {} given",
                                        params.len(),
                                        args.len()
                                    ));
                                }
                                out.push_str(&substitute(&m.body, params, &args));
                                i = end;
                                changed = true;
                            } else {
                                out.push_str(word);
                            }
                        }
                    },
                    _ => out.push_str(word),
                }
            } else if c.is_ascii_digit() {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                out.push_str(&line[start..i]);
            } else {
                let ch = line[i..].chars().next().unwrap();
                out.push(ch);
                i += ch.len_utf8();
            }
            if out.len() > limit {
                return Err(format!(
                    "macro expansion of this line grows past the limit of {MAX_LINE_EXPANSION} bytes (a macro defined through itself twice or more per level?)"
                ));
            }
        }
        if changed {
            self.expand_within(&out, depth + 1, limit)
        } else {
            Ok(out)
        }
    }
}

fn split_args(line: &str, open: usize) -> Result<(Vec<String>, usize), String> {
    let b = line.as_bytes();
    let mut depth = 0;
    let mut args = vec![];
    let mut cur = String::new();
    let mut i = open;
    while i < b.len() {
        let c = b[i] as char;
        match c {
            '(' => {
                depth += 1;
                if depth > 1 {
                    cur.push(c);
                }
            }
            ')' => {
                depth -= 1;
                if depth == 0 {
                    args.push(cur);
                    return Ok((args, i + 1));
                }
                cur.push(c);
            }
            ',' if depth == 1 => args.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
        i += 1;
    }
    Err("unterminated macro arguments (they must be on one line)".into())
}

fn substitute(body: &str, params: &[String], args: &[String]) -> String {
    let b = body.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_alphabetic() || b[i] == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let w = &body[start..i];
            match params.iter().position(|p| p == w) {
                Some(k) => out.push_str(args.get(k).map(|s| s.as_str()).unwrap_or("")),
                None => out.push_str(w),
            }
        } else {
            let ch = body[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}
