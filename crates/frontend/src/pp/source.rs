//! Reading preprocessor input: a source file from disk (a regular file of bounded size, UTF-8) and
//! the lexical scans every other part of the preprocessor shares: where a string literal ends,
//! comments replaced by whitespace, whether a line ends inside a string literal.

use std::path::Path;

/// The largest source file read (the program or an included file), in bytes.
pub const MAX_FILE_SIZE: u64 = 16 << 20;

/// Read a source file: a regular file of at most [`MAX_FILE_SIZE`] bytes of UTF-8 (not a device, a
/// FIFO or a directory: `#include "/dev/zero"` is refused instead of read forever).
pub(super) fn read_source(path: &Path) -> Result<String, String> {
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

/// The index just past the string literal that starts with the quote at `b[start]` (a backslash
/// escapes the next byte); the end of `b` when the literal is not closed.
pub(super) fn string_end(b: &[u8], start: usize) -> usize {
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
pub(super) fn strip_comments(text: &str) -> Result<String, usize> {
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
pub(super) fn open_string(line: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_end_skips_escapes_and_stops_at_the_end() {
        assert_eq!(string_end(br#""a\"b" x"#, 0), 6);
        assert_eq!(string_end(br#""open"#, 0), 5);
    }
}
