//! Which code runs a program ([`Backend`]): the closures of `load/compile.rs`, or machine code
//! generated when the program is loaded (`native/`); chosen by the caller or by `P4SEC_ENGINE`.

use std::fmt;
use std::str::FromStr;

/// Which code runs a program: machine code generated with Cranelift when the program is loaded
/// (the default; it falls back to the closures statement by statement), or the closures built by
/// `load/compile.rs` (the reference).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Backend {
    Closure,
    #[default]
    Native,
}

/// The environment variable [`Backend::from_env`] reads.
pub const BACKEND_ENV: &str = "P4SEC_ENGINE";

impl FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Backend, String> {
        match s {
            "closure" => Ok(Backend::Closure),
            "native" => Ok(Backend::Native),
            _ => Err(format!(
                "unknown engine backend `{s}`: expected `closure` or `native`"
            )),
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Closure => "closure",
            Backend::Native => "native",
        })
    }
}

impl Backend {
    /// The backend `P4SEC_ENGINE` names (`closure` or `native`), the default when it is unset or
    /// empty.
    pub fn from_env() -> Result<Backend, String> {
        match std::env::var(BACKEND_ENV) {
            Err(std::env::VarError::NotPresent) => Ok(Backend::default()),
            Err(std::env::VarError::NotUnicode(v)) => Err(format!(
                "{BACKEND_ENV}={v:?} is not valid: expected `closure` or `native`"
            )),
            Ok(v) if v.is_empty() => Ok(Backend::default()),
            Ok(v) => v.parse().map_err(|e: String| format!("{BACKEND_ENV}: {e}")),
        }
    }
}
