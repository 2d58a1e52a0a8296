//! The C-style preprocessor P4 programs use: `#include` (with `-I` paths and the built-in include
//! files), object-like and function-like `#define`, `#undef`,
//! `#if`/`#ifdef`/`#ifndef`/`#elif`/`#else`/`#endif`, `#error`, line continuations. Comments are
//! replaced by whitespace so that line numbers are kept, and every output line records the file and
//! line it came from.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Clone, Debug)]
pub struct LineOrigin {
    pub file: Arc<str>,
    pub line: u32,
}

#[derive(Clone, Debug)]
pub struct Preprocessed {
    pub text: String,
    /// Origin of each output line (0-based index = output line).
    pub lines: Vec<LineOrigin>,
}

#[derive(Clone, Debug)]
pub struct PpError {
    pub file: String,
    pub line: u32,
    pub col: u32,
    pub message: String,
    pub source_line: String,
}

impl fmt::Display for PpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            // not at a place in the file (the file itself cannot be read): the file and the message
            // only
            return write!(f, "{}: error: {}", self.file, self.message);
        }
        if self.source_line.is_empty() {
            return write!(
                f,
                "{}:{}:{}: error: {}",
                self.file, self.line, self.col, self.message
            );
        }
        write!(
            f,
            "{}:{}:{}: error: {}\n  {}\n  {}^",
            self.file,
            self.line,
            self.col,
            self.message,
            self.source_line,
            " ".repeat(self.col.saturating_sub(1) as usize)
        )
    }
}

#[derive(Clone)]
pub struct Options {
    pub include_dirs: Vec<PathBuf>,
    pub defines: Vec<(String, Option<String>)>,
    pub builtin: fn(&str) -> Option<&'static str>,
}

#[derive(Clone, Debug)]
struct Macro {
    params: Option<Vec<String>>,
    body: String,
}

const MAX_INCLUDE_DEPTH: usize = 64;
/// The largest source file read (the program or an included file), in bytes.
pub const MAX_FILE_SIZE: u64 = 16 << 20;
/// The longest a line may grow by macro expansion, in bytes (an exponential `#define` chain stops
/// here).
pub const MAX_LINE_EXPANSION: usize = 1 << 20;
/// The largest preprocessed program, in bytes.
pub const MAX_OUTPUT: usize = 64 << 20;

/// Read a source file: a regular file of at most [`MAX_FILE_SIZE`] bytes of UTF-8 (not a device, a
/// FIFO or a directory: `#include "/dev/zero"` is refused instead of read forever).
fn read_source(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read file: {e}"))?;
    if !meta.is_file() {
        return Err("not a regular file (only regular files are read as source)".into());
    }
    if meta.len() > MAX_FILE_SIZE {
        return Err(format!(
            "file of {} bytes is larger than the limit of {MAX_FILE_SIZE} bytes",
            meta.len()
        ));
    }
    let f = std::fs::File::open(path).map_err(|e| format!("cannot read file: {e}"))?;
    // the size may lie (a file growing while read): read at most one byte past the limit
    let mut bytes = vec![];
    f.take(MAX_FILE_SIZE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read file: {e}"))?;
    if bytes.len() as u64 > MAX_FILE_SIZE {
        return Err(format!(
            "file is larger than the limit of {MAX_FILE_SIZE} bytes"
        ));
    }
    String::from_utf8(bytes).map_err(|e| format!("cannot read file: not UTF-8 ({e})"))
}

struct Pp<'o> {
    opts: &'o Options,
    macros: HashMap<String, Macro>,
    out: String,
    lines: Vec<LineOrigin>,
    depth: usize,
}

pub fn preprocess_file(path: &Path, opts: &Options) -> Result<Preprocessed, PpError> {
    let text = read_source(path).map_err(|message| PpError {
        file: path.display().to_string(),
        line: 0,
        col: 0,
        message,
        source_line: String::new(),
    })?;
    preprocess_named(&path.display().to_string(), path.parent(), &text, opts)
}

pub fn preprocess_str(name: &str, text: &str, opts: &Options) -> Result<Preprocessed, PpError> {
    preprocess_named(name, Path::new(name).parent(), text, opts)
}

fn preprocess_named(
    name: &str,
    dir: Option<&Path>,
    text: &str,
    opts: &Options,
) -> Result<Preprocessed, PpError> {
    let mut pp = Pp {
        opts,
        macros: HashMap::new(),
        out: String::new(),
        lines: vec![],
        depth: 0,
    };
    for (n, v) in &opts.defines {
        pp.macros.insert(
            n.clone(),
            Macro {
                params: None,
                body: v.clone().unwrap_or_else(|| "1".into()),
            },
        );
    }
    pp.file(name, dir.map(|d| d.to_path_buf()), text)?;
    Ok(Preprocessed {
        text: pp.out,
        lines: pp.lines,
    })
}

/// The index just past the string literal that starts with the quote at `b[start]` (a backslash
/// escapes the next byte); the end of `b` when the literal is not closed.
fn string_end(b: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while i < b.len() && b[i] != b'"' {
        if b[i] == b'\\' {
            i += 1;
        }
        i += 1;
    }
    (i + 1).min(b.len())
}

/// Replace comments with spaces (keeping newlines), leaving string literals (which may span lines)
/// intact. A `/*` without its `*/` is an error: the byte offset of the `/*`.
fn strip_comments(text: &str) -> Result<String, usize> {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'"' {
            let start = i;
            i = string_end(b, i);
            out.push_str(&text[start..i]);
        } else if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            let open = i;
            i += 2;
            out.push(' ');
            while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                if b[i] == b'\n' {
                    out.push('\n');
                }
                i += 1;
            }
            if i >= b.len() {
                return Err(open);
            }
            i += 2;
        } else {
            let ch = text[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    Ok(out)
}

/// The line ends inside a string literal.
fn open_string(line: &str) -> bool {
    let b = line.as_bytes();
    let mut in_str = false;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' if in_str => i += 1,
            b'"' => in_str = !in_str,
            _ => {}
        }
        i += 1;
    }
    in_str
}

struct Cond {
    /// This branch is active.
    active: bool,
    /// Some branch of this #if chain was taken.
    taken: bool,
    /// The enclosing context is active.
    parent: bool,
}

impl<'o> Pp<'o> {
    fn file(&mut self, name: &str, dir: Option<PathBuf>, text: &str) -> Result<(), PpError> {
        let file: Arc<str> = Arc::from(name);
        let clean = strip_comments(text).map_err(|at| {
            let line = text[..at].matches('\n').count();
            let start = text[..at].rfind('\n').map_or(0, |k| k + 1);
            PpError {
                file: name.to_string(),
                line: line as u32 + 1,
                col: text[start..at].chars().count() as u32 + 1,
                message: "unterminated comment: this `/*` has no `*/`".into(),
                source_line: text.lines().nth(line).unwrap_or("").to_string(),
            }
        })?;
        let raw_lines: Vec<&str> = text.lines().collect();
        let mut lines: Vec<&str> = clean.split('\n').collect();
        if clean.ends_with('\n') {
            lines.pop();
        }
        let mut conds: Vec<Cond> = vec![];
        // origin of the lines after a line marker: file name and line offset
        let mut cur_file = file.clone();
        let mut delta: i64 = 0;
        let mut i = 0;
        while i < lines.len() {
            let lineno = i as u32 + 1;
            let mut line = lines[i].trim_end_matches('\r').to_string();
            let mut extra = 0;
            while line.ends_with('\\') && i + extra + 1 < lines.len() {
                line.pop();
                extra += 1;
                line.push_str(lines[i + extra]);
            }
            // a string literal that spans lines (annotation bodies in SAI P4) is kept whole,
            // newlines included; in a skipped `#if` branch a quote opens nothing (as in cpp)
            let skipping = !conds.last().map(|c| c.active).unwrap_or(true);
            let mut embedded = 0;
            while !skipping && open_string(&line) && i + extra + 1 < lines.len() {
                extra += 1;
                embedded += 1;
                line.push('\n');
                line.push_str(lines[i + extra].trim_end_matches('\r'));
            }
            let origin = (lineno as i64 + delta).max(1) as u32;
            let err = |col: usize, msg: String| PpError {
                file: name.to_string(),
                line: lineno,
                col: col as u32 + 1,
                message: msg,
                source_line: raw_lines.get(i).copied().unwrap_or("").to_string(),
            };
            let active = conds.last().map(|c| c.active).unwrap_or(true);
            let trimmed = line.trim_start();
            if let Some(d) = trimmed.strip_prefix('#') {
                let d = d.trim_start();
                let (kw, rest) = d.split_at(
                    d.find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                        .unwrap_or(d.len()),
                );
                let rest = rest.trim();
                match kw {
                    "if" | "ifdef" | "ifndef" => {
                        let v = if !active {
                            false
                        } else {
                            match kw {
                                "ifdef" => self
                                    .macros
                                    .contains_key(rest.split_whitespace().next().unwrap_or("")),
                                "ifndef" => !self
                                    .macros
                                    .contains_key(rest.split_whitespace().next().unwrap_or("")),
                                _ => self.eval_cond(rest).map_err(|m| err(0, m))?,
                            }
                        };
                        conds.push(Cond {
                            active: active && v,
                            taken: v,
                            parent: active,
                        });
                    }
                    "elif" => {
                        let c = conds
                            .last_mut()
                            .ok_or_else(|| err(0, "#elif without #if".into()))?;
                        if c.taken || !c.parent {
                            c.active = false;
                        } else {
                            let (parent, taken) = (c.parent, c.taken);
                            let _ = taken;
                            let v = self.eval_cond(rest).map_err(|m| err(0, m))?;
                            let c = conds.last_mut().unwrap();
                            c.active = parent && v;
                            c.taken = v;
                        }
                    }
                    "else" => {
                        let c = conds
                            .last_mut()
                            .ok_or_else(|| err(0, "#else without #if".into()))?;
                        c.active = c.parent && !c.taken;
                        c.taken = true;
                    }
                    "endif" => {
                        conds
                            .pop()
                            .ok_or_else(|| err(0, "#endif without #if".into()))?;
                    }
                    _ if !active => {}
                    "define" => self.define(rest).map_err(|m| err(0, m))?,
                    "undef" => {
                        self.macros
                            .remove(rest.split_whitespace().next().unwrap_or(""));
                    }
                    "include" => {
                        let (target, quoted) = if let Some(r) = rest.strip_prefix('"') {
                            (r.split('"').next().unwrap_or(""), true)
                        } else if let Some(r) = rest.strip_prefix('<') {
                            (r.split('>').next().unwrap_or(""), false)
                        } else {
                            return Err(err(0, format!("malformed #include: {rest}")));
                        };
                        if self.depth >= MAX_INCLUDE_DEPTH {
                            return Err(err(
                                0,
                                "#include nested too deeply (include cycle?)".into(),
                            ));
                        }
                        let (iname, idir, itext) = self
                            .find_include(target, quoted, dir.as_deref())
                            .map_err(|m| err(0, m))?
                            .ok_or_else(|| {
                                let hint = match target {
                                    "psa.p4" | "pna.p4" | "tna.p4" | "t2na.p4" | "ebpf_model.p4"
                                    | "xdp_model.p4" | "ubpf_model.p4" => format!(
                                        ": p4sec runs the v1model architecture only \
                                         (#include <v1model.p4>), not {}",
                                        target.trim_end_matches(".p4")
                                    ),
                                    _ if quoted => "; searched the including file's directory and \
                                                   the -I directories: add its directory with -I DIR"
                                        .to_string(),
                                    _ => "; searched the -I directories and p4sec's own core.p4 \
                                          and v1model.p4: add its directory with -I DIR"
                                        .to_string(),
                                };
                                err(0, format!("cannot find include file `{target}`{hint}"))
                            })?;
                        self.depth += 1;
                        self.file(&iname, idir, &itext)?;
                        self.depth -= 1;
                    }
                    "error" => return Err(err(0, format!("#error {rest}"))),
                    // line markers: `# 369 "file" flags` (cpp output) and `#line 369 "file"`
                    _ if kw == "line"
                        || (!kw.is_empty() && kw.bytes().all(|c| c.is_ascii_digit())) =>
                    {
                        let spec = if kw == "line" { rest } else { d };
                        let (num, tail) = spec.split_at(
                            spec.find(|c: char| !c.is_ascii_digit())
                                .unwrap_or(spec.len()),
                        );
                        let n: i64 = num.parse().map_err(|_| {
                            err(
                                1,
                                format!("malformed line marker `#{d}`: a line number is expected"),
                            )
                        })?;
                        // the next physical line is line `n`
                        delta = n - (lineno as i64 + extra as i64 + 1);
                        if let Some(r) = tail.trim().strip_prefix('"') {
                            cur_file = Arc::from(r.split('"').next().unwrap_or(""));
                        }
                    }
                    // `#` alone is the null directive (C11 6.10.7): it does nothing
                    "warning" | "pragma" | "" => {}
                    other => {
                        return Err(err(1, format!("unknown preprocessor directive `#{other}`")))
                    }
                }
                for k in 0..=extra {
                    self.push_line(&cur_file, origin + k as u32, "");
                }
            } else if active {
                let expanded = self.expand(&line, 0).map_err(|m| err(0, m))?;
                if self.out.len() + expanded.len() >= MAX_OUTPUT {
                    return Err(err(
                        0,
                        format!(
                            "the preprocessed program grows past the limit of {MAX_OUTPUT} bytes"
                        ),
                    ));
                }
                self.push_line(&cur_file, origin, &expanded);
                for k in 1..=embedded {
                    self.lines.push(LineOrigin {
                        file: cur_file.clone(),
                        line: origin + k as u32,
                    });
                }
                for k in embedded + 1..=extra {
                    self.push_line(&cur_file, origin + k as u32, "");
                }
            } else {
                for k in 0..=extra {
                    self.push_line(&cur_file, origin + k as u32, "");
                }
            }
            i += 1 + extra;
        }
        if !conds.is_empty() {
            return Err(PpError {
                file: name.to_string(),
                line: lines.len() as u32,
                col: 1,
                message: "missing #endif".into(),
                source_line: String::new(),
            });
        }
        Ok(())
    }

    fn push_line(&mut self, file: &Arc<str>, line: u32, text: &str) {
        self.out.push_str(text);
        self.out.push('\n');
        self.lines.push(LineOrigin {
            file: file.clone(),
            line,
        });
    }

    /// The first candidate file of an `#include` that exists (an error if it is not a regular file
    /// or too large), else a built-in header of that name.
    fn find_include(
        &self,
        target: &str,
        quoted: bool,
        dir: Option<&Path>,
    ) -> Result<Option<(String, Option<PathBuf>, String)>, String> {
        let mut cands = vec![];
        if quoted {
            if let Some(d) = dir {
                cands.push(d.join(target));
            }
        }
        for d in &self.opts.include_dirs {
            cands.push(d.join(target));
        }
        for c in cands {
            if std::fs::metadata(&c).is_ok() {
                let t = read_source(&c).map_err(|m| format!("#include `{}`: {m}", c.display()))?;
                return Ok(Some((
                    c.display().to_string(),
                    c.parent().map(|p| p.to_path_buf()),
                    t,
                )));
            }
        }
        Ok((self.opts.builtin)(target).map(|t| (format!("<{target}>"), None, t.to_string())))
    }

    fn define(&mut self, rest: &str) -> Result<(), String> {
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
            self.macros.insert(
                name.to_string(),
                Macro {
                    params: Some(params),
                    body: p[close + 1..].trim().to_string(),
                },
            );
        } else {
            self.macros.insert(
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
    fn expand(&self, line: &str, depth: usize) -> Result<String, String> {
        self.expand_within(line, depth, line.len().saturating_add(MAX_LINE_EXPANSION))
    }

    /// `expand`, the result (and every intermediate) at most `limit` bytes long.
    fn expand_within(&self, line: &str, depth: usize, limit: usize) -> Result<String, String> {
        if depth > 32 || self.macros.is_empty() {
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
                match self.macros.get(word) {
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

    fn eval_cond(&self, expr: &str) -> Result<bool, String> {
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
            s.push_str(if self.macros.contains_key(name) {
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
        let e = self.expand(&s, 0)?;
        let toks = cond_tokens(&e)?;
        let mut p = CondParser { toks, pos: 0 };
        let v = p.expr(0)?;
        if p.pos != p.toks.len() {
            return Err(format!("malformed #if expression `{expr}`"));
        }
        Ok(v != 0)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> Options {
        Options {
            include_dirs: vec![],
            defines: vec![],
            builtin: |n| {
                if n == "x.p4" {
                    Some("const bit<8> X = 1;\n")
                } else {
                    None
                }
            },
        }
    }

    #[test]
    fn macros_and_conditionals() {
        let src = "#define W 8\n#define F(a) (a + 1)\n#if W > 4 && defined(W)\nbit<W> x = F(2);\n#else\nnope\n#endif\n#ifndef Q\nq\n#endif\n";
        let r = preprocess_str("t.p4", src, &opts()).unwrap();
        assert!(r.text.contains("bit<8> x = (2 + 1);"), "{}", r.text);
        assert!(!r.text.contains("nope"));
        assert!(r.text.contains("q"));
        assert_eq!(r.lines.len(), r.text.lines().count());
    }

    #[test]
    fn include_builtin_and_line_origins() {
        let r = preprocess_str("t.p4", "// c\n#include <x.p4>\nfoo\n", &opts()).unwrap();
        assert!(r.text.contains("const bit<8> X = 1;"));
        let foo = r.text.lines().position(|l| l == "foo").unwrap();
        assert_eq!(r.lines[foo].line, 3);
        assert_eq!(&*r.lines[foo].file, "t.p4");
    }

    #[test]
    fn string_literals_keep_comment_marks_and_macro_names() {
        assert_eq!(string_end(br#""a\"b" x"#, 0), 6);
        assert_eq!(string_end(br#""open"#, 0), 5);
        let src =
            "#define W 8\nconst string s = \"// W /* \\\" W\"; // gone\nbit<W> x; /* gone */\n";
        let r = preprocess_str("t.p4", src, &opts()).unwrap();
        assert!(
            r.text.contains("\"// W /* \\\" W\""),
            "the literal is kept whole: {}",
            r.text
        );
        assert!(
            r.text.contains("bit<8> x;") && !r.text.contains("gone"),
            "{}",
            r.text
        );
    }

    #[test]
    fn errors() {
        assert!(preprocess_str("t.p4", "#include <missing.p4>\n", &opts())
            .unwrap_err()
            .message
            .contains("missing.p4"));
        assert!(preprocess_str("t.p4", "#if 1\n", &opts()).is_err());
        assert!(preprocess_str("t.p4", "#endif\n", &opts()).is_err());
        assert!(preprocess_str("t.p4", "#error stop\n", &opts())
            .unwrap_err()
            .message
            .contains("stop"));
    }

    #[test]
    fn line_markers() {
        let src = "a\n# 369 \"dir/acl.p4\" 1\nb\n#line 20 \"x.p4\"\nc\nd\n";
        let r = preprocess_str("t.p4", src, &opts()).unwrap();
        let at = |w: &str| {
            let k = r.text.lines().position(|l| l == w).unwrap();
            (r.lines[k].file.to_string(), r.lines[k].line)
        };
        assert_eq!(at("a"), ("t.p4".into(), 1));
        assert_eq!(at("b"), ("dir/acl.p4".into(), 369));
        assert_eq!(at("c"), ("x.p4".into(), 20));
        assert_eq!(at("d"), ("x.p4".into(), 21));
        assert!(preprocess_str("t.p4", "#line x\n", &opts())
            .unwrap_err()
            .message
            .contains("line marker"));
    }

    #[test]
    fn strings_spanning_lines() {
        let src = "#define A 1\n@e(\"\n  // not a comment\n  x == A;\n\") A\nA\n";
        let r = preprocess_str("t.p4", src, &opts()).unwrap();
        assert!(
            r.text
                .contains("@e(\"\n  // not a comment\n  x == A;\n\") 1"),
            "{}",
            r.text
        );
        assert_eq!(r.lines.len(), r.text.lines().count());
        let last = r.text.lines().position(|l| l == "1").unwrap();
        assert_eq!(r.lines[last].line, 6);
    }

    #[test]
    fn null_directive_and_unterminated_comment() {
        // `#` alone (with blanks or a comment after it) is cpp's null directive
        let r = preprocess_str("t.p4", "a\n#\n  #  \n# /* c */\nb\n", &opts()).unwrap();
        assert_eq!(
            r.text.lines().filter(|l| !l.trim().is_empty()).count(),
            2,
            "{}",
            r.text
        );
        let e = preprocess_str("t.p4", "a\nb /* open\nc\n", &opts()).unwrap_err();
        assert_eq!((e.line, e.col), (2, 3), "{e}");
        assert!(e.message.contains("unterminated comment"), "{e}");
        // inside a string literal `/*` opens nothing
        assert!(preprocess_str("t.p4", "@a(\"/*\") x\n", &opts()).is_ok());
        // in a skipped branch, a lone quote does not swallow the `#endif`
        let r = preprocess_str("t.p4", "#if 0\n\"open\n#endif\nb\n", &opts()).unwrap();
        assert!(
            r.text.contains('b') && !r.text.contains("open"),
            "{}",
            r.text
        );
    }

    #[test]
    fn comments_and_strings() {
        let r = preprocess_str(
            "t.p4",
            "#define A 1\nx /* A \n A */ \"A\" A // A\n",
            &opts(),
        )
        .unwrap();
        assert!(r.text.contains("\"A\" 1"), "{}", r.text);
        assert_eq!(r.text.lines().count(), 3);
    }
}
