//! `#include`: the directive's target (`"file"` or `<file>`), the file it names (the including
//! file's directory for `"file"`, then the `-I` directories, then the include files built into
//! p4sec), and an error that says where it looked.

use super::source::read_source;
use std::path::{Path, PathBuf};

/// A file an `#include` names: its name as the output's line origins show it, its directory (for
/// the `#include "..."` inside it; none for a built-in file) and its text.
pub(super) struct Included {
    pub name: String,
    pub dir: Option<PathBuf>,
    pub text: String,
}

/// The target of `#include rest` and whether it is quoted (`"file"`, not `<file>`).
pub(super) fn target(rest: &str) -> Result<(&str, bool), String> {
    if let Some(r) = rest.strip_prefix('"') {
        Ok((r.split('"').next().unwrap_or(""), true))
    } else if let Some(r) = rest.strip_prefix('<') {
        Ok((r.split('>').next().unwrap_or(""), false))
    } else {
        Err(format!("malformed #include: {rest}"))
    }
}

/// The file an `#include` of `target` names, read; `dir` is the including file's directory.
pub(super) fn resolve(
    target: &str,
    quoted: bool,
    dir: Option<&Path>,
    include_dirs: &[PathBuf],
    builtin: fn(&str) -> Option<&'static str>,
) -> Result<Included, String> {
    find(target, quoted, dir, include_dirs, builtin)?.ok_or_else(|| {
        let hint = match target {
            "psa.p4" | "pna.p4" | "tna.p4" | "t2na.p4" | "ebpf_model.p4" | "xdp_model.p4"
            | "ubpf_model.p4" => format!(
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
        format!("cannot find include file `{target}`{hint}")
    })
}

/// The first candidate file of an `#include` that exists (an error if it is not a regular file
/// or too large), else a built-in header of that name.
fn find(
    target: &str,
    quoted: bool,
    dir: Option<&Path>,
    include_dirs: &[PathBuf],
    builtin: fn(&str) -> Option<&'static str>,
) -> Result<Option<Included>, String> {
    let mut cands = vec![];
    if quoted {
        if let Some(d) = dir {
            cands.push(d.join(target));
        }
    }
    for d in include_dirs {
        cands.push(d.join(target));
    }
    for c in cands {
        if std::fs::metadata(&c).is_ok() {
            let text = read_source(&c).map_err(|m| format!("#include `{}`: {m}", c.display()))?;
            return Ok(Some(Included {
                name: c.display().to_string(),
                dir: c.parent().map(|p| p.to_path_buf()),
                text,
            }));
        }
    }
    Ok(builtin(target).map(|t| Included {
        name: format!("<{target}>"),
        dir: None,
        text: t.to_string(),
    }))
}
