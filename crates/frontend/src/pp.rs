//! The C-style preprocessor P4 programs use, line by line: this module reads a file's lines
//! (continuations joined, string literals spanning lines kept whole), runs its directives and
//! records the file and line every output line came from (line markers `# N "file"` and `#line`
//! included). The directives' work is in the submodules: `source` (reading files, comments replaced
//! by whitespace so that line numbers are kept), `conditionals` (`#if`/`#ifdef`/`#ifndef`/`#elif`/
//! `#else`/`#endif`), `macros` (object-like and function-like `#define`, `#undef`, expansion) and
//! `include` (`#include` with `-I` paths and the built-in include files). `#error` stops with its
//! message.

mod conditionals;
mod include;
mod macros;
mod source;

pub use macros::MAX_LINE_EXPANSION;
pub use source::MAX_FILE_SIZE;

use conditionals::Conditionals;
use macros::Macros;
use source::{open_string, read_source, strip_comments};
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

const MAX_INCLUDE_DEPTH: usize = 64;
/// The largest preprocessed program, in bytes.
pub const MAX_OUTPUT: usize = 64 << 20;

struct Pp<'o> {
    opts: &'o Options,
    macros: Macros,
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
        macros: Macros::default(),
        out: String::new(),
        lines: vec![],
        depth: 0,
    };
    for (n, v) in &opts.defines {
        pp.macros.define_object(n, v.as_deref().unwrap_or("1"));
    }
    pp.file(name, dir.map(|d| d.to_path_buf()), text)?;
    Ok(Preprocessed {
        text: pp.out,
        lines: pp.lines,
    })
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
        let mut conds = Conditionals::default();
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
            let skipping = !conds.active();
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
            let active = conds.active();
            let trimmed = line.trim_start();
            if let Some(d) = trimmed.strip_prefix('#') {
                let d = d.trim_start();
                let (kw, rest) = d.split_at(
                    d.find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                        .unwrap_or(d.len()),
                );
                let rest = rest.trim();
                // the conditionals run in skipped groups too (they open and close them)
                if let Some(r) = conds.directive(kw, rest, &self.macros) {
                    r.map_err(|m| err(0, m))?;
                } else {
                    match kw {
                        _ if !active => {}
                        "define" => self.macros.define(rest).map_err(|m| err(0, m))?,
                        "undef" => self
                            .macros
                            .undef(rest.split_whitespace().next().unwrap_or("")),
                        "include" => {
                            let (target, quoted) = include::target(rest).map_err(|m| err(0, m))?;
                            if self.depth >= MAX_INCLUDE_DEPTH {
                                return Err(err(
                                    0,
                                    "#include nested too deeply (include cycle?)".into(),
                                ));
                            }
                            let inc = include::resolve(
                                target,
                                quoted,
                                dir.as_deref(),
                                &self.opts.include_dirs,
                                self.opts.builtin,
                            )
                            .map_err(|m| err(0, m))?;
                            self.depth += 1;
                            self.file(&inc.name, inc.dir, &inc.text)?;
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
                            let n: i64 =
                                num.parse().map_err(|_| {
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
                            return Err(err(
                                1,
                                format!("unknown preprocessor directive `#{other}`"),
                            ))
                        }
                    }
                }
                for k in 0..=extra {
                    self.push_line(&cur_file, origin + k as u32, "");
                }
            } else if active {
                let expanded = self.macros.expand(&line, 0).map_err(|m| err(0, m))?;
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
        if conds.open() {
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
