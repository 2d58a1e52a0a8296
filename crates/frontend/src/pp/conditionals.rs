//! Conditional compilation: the stack of open `#if`/`#ifdef`/`#ifndef` ... `#elif`/`#else`/`#endif`
//! groups (which lines are kept), and the evaluation of an `#if` expression (`defined`, macros
//! expanded, C's integer operators).

use super::macros::Macros;

struct Cond {
    /// This branch is active.
    active: bool,
    /// Some branch of this #if chain was taken.
    taken: bool,
    /// The enclosing context is active.
    parent: bool,
}

/// The open conditional groups at a point of a file, innermost last.
#[derive(Default)]
pub(super) struct Conditionals {
    stack: Vec<Cond>,
}

impl Conditionals {
    /// The lines here are kept (every enclosing group is in its taken branch).
    pub(super) fn active(&self) -> bool {
        self.stack.last().map(|c| c.active).unwrap_or(true)
    }

    /// Some group is still open (an `#endif` is missing at the end of a file).
    pub(super) fn open(&self) -> bool {
        !self.stack.is_empty()
    }

    /// Run the directive `#kw rest` if it is a conditional one (`None` if it is not).
    pub(super) fn directive(
        &mut self,
        kw: &str,
        rest: &str,
        macros: &Macros,
    ) -> Option<Result<(), String>> {
        let active = self.active();
        Some(match kw {
            "if" | "ifdef" | "ifndef" => {
                let v = if !active {
                    Ok(false)
                } else {
                    match kw {
                        "ifdef" => {
                            Ok(macros.is_defined(rest.split_whitespace().next().unwrap_or("")))
                        }
                        "ifndef" => {
                            Ok(!macros.is_defined(rest.split_whitespace().next().unwrap_or("")))
                        }
                        _ => eval_cond(rest, macros),
                    }
                };
                v.map(|v| {
                    self.stack.push(Cond {
                        active: active && v,
                        taken: v,
                        parent: active,
                    })
                })
            }
            "elif" => match self.stack.last_mut() {
                None => Err("#elif without #if".into()),
                Some(c) if c.taken || !c.parent => {
                    c.active = false;
                    Ok(())
                }
                Some(c) => eval_cond(rest, macros).map(|v| {
                    c.active = c.parent && v;
                    c.taken = v;
                }),
            },
            "else" => match self.stack.last_mut() {
                None => Err("#else without #if".into()),
                Some(c) => {
                    c.active = c.parent && !c.taken;
                    c.taken = true;
                    Ok(())
                }
            },
            "endif" => match self.stack.pop() {
                None => Err("#endif without #if".into()),
                Some(_) => Ok(()),
            },
            _ => return None,
        })
    }
}

/// The value of an `#if` expression: `defined(X)` / `defined X` replaced, then macros expanded,
/// then evaluated (an identifier left over is 0).
fn eval_cond(expr: &str, macros: &Macros) -> Result<bool, String> {
    // replace defined(X) / defined X, then expand macros, then evaluate
    let mut s = String::new();
    let mut rest = expr;
    while let Some(p) = rest.find("defined") {
        s.push_str(&rest[..p]);
        let mut r = rest[p + 7..].trim_start();
        let paren = r.starts_with('(');
        if paren {
            r = r[1..].trim_start();
        }
        let end = r
            .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .unwrap_or(r.len());
        let name = &r[..end];
        s.push_str(if macros.is_defined(name) {
            " 1 "
        } else {
            " 0 "
        });
        let mut r2 = &r[end..];
        if paren {
            r2 = r2
                .trim_start()
                .strip_prefix(')')
                .ok_or("missing `)` after defined(")?;
        }
        rest = r2;
    }
    s.push_str(rest);
    let e = macros.expand(&s, 0)?;
    let toks = cond_tokens(&e)?;
    let mut p = CondParser { toks, pos: 0 };
    let v = p.expr(0)?;
    if p.pos != p.toks.len() {
        return Err(format!("malformed #if expression `{expr}`"));
    }
    Ok(v != 0)
}

fn cond_tokens(s: &str) -> Result<Vec<String>, String> {
    let mut v = vec![];
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_alphanumeric() || c == b'_' {
            let st = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            v.push(s[st..i].to_string());
        } else {
            let two = s.get(i..i + 2).unwrap_or("");
            if ["&&", "||", "==", "!=", "<=", ">=", "<<", ">>"].contains(&two) {
                v.push(two.to_string());
                i += 2;
            } else {
                v.push((c as char).to_string());
                i += 1;
            }
        }
    }
    Ok(v)
}

struct CondParser {
    toks: Vec<String>,
    pos: usize,
}

impl CondParser {
    fn peek(&self) -> Option<&str> {
        self.toks.get(self.pos).map(|s| s.as_str())
    }
    fn prec(op: &str) -> Option<u8> {
        Some(match op {
            "||" => 1,
            "&&" => 2,
            "|" => 3,
            "^" => 4,
            "&" => 5,
            "==" | "!=" => 6,
            "<" | ">" | "<=" | ">=" => 7,
            "<<" | ">>" => 8,
            "+" | "-" => 9,
            "*" | "/" | "%" => 10,
            _ => return None,
        })
    }
    fn expr(&mut self, min: u8) -> Result<i64, String> {
        let mut l = self.unary()?;
        while let Some(op) = self.peek().map(|s| s.to_string()) {
            let Some(p) = Self::prec(&op) else { break };
            if p <= min {
                break;
            }
            self.pos += 1;
            let r = self.expr(p)?;
            l = match op.as_str() {
                "||" => ((l != 0) || (r != 0)) as i64,
                "&&" => ((l != 0) && (r != 0)) as i64,
                "|" => l | r,
                "^" => l ^ r,
                "&" => l & r,
                "==" => (l == r) as i64,
                "!=" => (l != r) as i64,
                "<" => (l < r) as i64,
                ">" => (l > r) as i64,
                "<=" => (l <= r) as i64,
                ">=" => (l >= r) as i64,
                "<<" => l.wrapping_shl(r as u32),
                ">>" => l.wrapping_shr(r as u32),
                "+" => l.wrapping_add(r),
                "-" => l.wrapping_sub(r),
                "*" => l.wrapping_mul(r),
                "/" | "%" => {
                    if r == 0 {
                        return Err("division by zero in #if".into());
                    }
                    if op == "/" {
                        l / r
                    } else {
                        l % r
                    }
                }
                _ => unreachable!(),
            };
        }
        Ok(l)
    }
    fn unary(&mut self) -> Result<i64, String> {
        let t = self
            .peek()
            .ok_or("unexpected end of #if expression")?
            .to_string();
        self.pos += 1;
        match t.as_str() {
            "!" => Ok((self.unary()? == 0) as i64),
            "-" => Ok(-self.unary()?),
            "~" => Ok(!self.unary()?),
            "(" => {
                let v = self.expr(0)?;
                if self.peek() != Some(")") {
                    return Err("missing `)` in #if expression".into());
                }
                self.pos += 1;
                Ok(v)
            }
            _ => {
                if let Some(h) = t.strip_prefix("0x") {
                    i64::from_str_radix(h, 16).map_err(|_| format!("bad number `{t}` in #if"))
                } else if t
                    .chars()
                    .next()
                    .map(|c| c.is_ascii_digit())
                    .unwrap_or(false)
                {
                    t.trim_end_matches(['L', 'l', 'U', 'u'])
                        .parse()
                        .map_err(|_| format!("bad number `{t}` in #if"))
                } else {
                    Ok(0) // an undefined identifier is 0
                }
            }
        }
    }
}
