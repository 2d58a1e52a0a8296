//! Compile errors: every error names file, line and column and shows the offending source line.

use crate::ast::Span;
use std::fmt;
use std::sync::Arc;

/// Where each line of the preprocessed text came from.
#[derive(Clone, Debug, Default)]
pub struct SourceMap {
    /// The preprocessed text.
    pub text: Arc<str>,
    /// Byte offset of the start of each line of `text`.
    line_starts: Vec<u32>,
    /// Origin (file, 1-based line) of each line of `text`.
    origins: Vec<(Arc<str>, u32)>,
}

impl SourceMap {
    pub fn new(text: &str, origins: Vec<(Arc<str>, u32)>) -> Self {
        let mut line_starts = vec![0u32];
        for (i, b) in text.bytes().enumerate() {
            if b == b'\n' {
                line_starts.push(i as u32 + 1);
            }
        }
        SourceMap {
            text: Arc::from(text),
            line_starts,
            origins,
        }
    }

    /// A source map for text that did not pass through the preprocessor.
    pub fn plain(name: &str, text: &str) -> Self {
        let n = text.lines().count() + 1;
        let file: Arc<str> = Arc::from(name);
        SourceMap::new(text, (1..=n as u32).map(|l| (file.clone(), l)).collect())
    }

    /// (file, line, column, source line) of a byte offset. Columns are 1-based.
    pub fn locate(&self, offset: u32) -> (String, u32, u32, String) {
        let idx = match self.line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i.saturating_sub(1),
        };
        let start = self.line_starts.get(idx).copied().unwrap_or(0) as usize;
        let end = self.text[start.min(self.text.len())..]
            .find('\n')
            .map(|e| start + e)
            .unwrap_or(self.text.len());
        let line_text = self.text.get(start..end).unwrap_or("").to_string();
        let col = offset.saturating_sub(start as u32) + 1;
        let (file, line) = match self.origins.get(idx) {
            Some((f, l)) => (f.to_string(), *l),
            None => ("<input>".to_string(), idx as u32 + 1),
        };
        (file, line, col, line_text)
    }
}

/// A compile error (or several) with a location.
#[derive(Clone, Debug)]
pub struct Diagnostic {
    pub span: Span,
    pub message: String,
}

impl Diagnostic {
    pub fn new(span: Span, message: impl Into<String>) -> Self {
        Diagnostic {
            span,
            message: message.into(),
        }
    }
    pub fn render(&self, map: &SourceMap) -> String {
        let (file, line, col, text) = map.locate(self.span.lo);
        let chars: Vec<char> = text.chars().collect();
        let at = (col as usize).saturating_sub(1).min(chars.len());
        let caret_len = ((self.span.hi.saturating_sub(self.span.lo)) as usize)
            .clamp(1, chars.len().saturating_sub(at).max(1));
        // a long line (generated source, a minified program) is shown around the column only
        let start = if chars.len() > EXCERPT {
            at.saturating_sub(EXCERPT / 3)
        } else {
            0
        };
        let end = (start + EXCERPT).min(chars.len());
        let (before, after) = (
            if start > 0 { "..." } else { "" },
            if end < chars.len() { "..." } else { "" },
        );
        let shown: String = chars[start..end].iter().collect();
        // (tabs kept, so that the caret lines up under a tabbed line)
        let pad: String = before
            .chars()
            .chain(chars[start..at].iter().copied())
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        let caret_len = caret_len.min(end.saturating_sub(at).max(1));
        format!(
            "{file}:{line}:{col}: error: {}\n  {before}{shown}{after}\n  {pad}{}",
            self.message,
            "^".repeat(caret_len)
        )
    }
}

/// The most characters of a source line an error shows (a window around the error's column).
const EXCERPT: usize = 160;

/// The error type of the whole front end: rendered diagnostics.
#[derive(Clone, Debug)]
pub struct CompileError {
    pub messages: Vec<String>,
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.messages.join("\n"))
    }
}
impl std::error::Error for CompileError {}

pub type PResult<T> = Result<T, Diagnostic>;

/// An error at `span` with `msg`, as a result.
pub fn err<T>(span: Span, msg: impl Into<String>) -> PResult<T> {
    Err(Diagnostic::new(span, msg))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error on a line of some 180,000 characters shows a window of it around the column, the
    /// caret under the error; a short line is shown whole.
    #[test]
    fn long_lines_are_shown_around_the_error() {
        let decls: String = (0..4000)
            .map(|i| format!("const bit<8> c{i} = 1; "))
            .collect();
        let src = format!("{decls}bad{decls}");
        let p = crate::compile_str("long.p4", &src, &Default::default()).unwrap_err();
        let text = p.to_string();
        assert!(text.len() < 1_000, "{} bytes", text.len());
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("long.p4:1:"), "{text}");
        let (shown, caret) = (lines[1], lines[2]);
        assert!(
            shown.starts_with("  ...") && shown.ends_with("..."),
            "{shown}"
        );
        let at = caret.find('^').expect("a caret");
        assert_eq!(&shown[at..at + 1], "b", "{shown}\n{caret}");
        let short = crate::compile_str("s.p4", "header h { bit<8> x; } bad", &Default::default())
            .unwrap_err()
            .to_string();
        assert!(
            short.contains("\n  header h { bit<8> x; } bad\n"),
            "{short}"
        );
    }
}
