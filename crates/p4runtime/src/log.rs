//! The switch's stderr messages and their level (`p4sec switch --log LEVEL`): `error` and `warn`
//! for what went wrong, `info` (the default) for port events and P4Runtime connections, `debug` for
//! per-port details, `trace` for one line per packet. Pipeline traces (`--trace`) are separate and
//! always written when asked for. The switch crate re-exports this module and has its own `p4log!`
//! macro.

use std::sync::atomic::{AtomicU8, Ordering};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Level {
    Error = 1,
    Warn = 2,
    Info = 3,
    Debug = 4,
    Trace = 5,
}

impl std::str::FromStr for Level {
    type Err = String;
    fn from_str(s: &str) -> Result<Level, String> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "error" => Level::Error,
            "warn" | "warning" => Level::Warn,
            "info" => Level::Info,
            "debug" => Level::Debug,
            "trace" => Level::Trace,
            _ => {
                return Err(format!(
                    "unknown log level `{s}` (error, warn, info, debug or trace)"
                ))
            }
        })
    }
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Info as u8);

/// Set the most detailed level that is written.
pub fn set_level(l: Level) {
    LEVEL.store(l as u8, Ordering::Relaxed);
}

/// Is a message of level `l` written?
#[inline]
pub fn enabled(l: Level) -> bool {
    l as u8 <= LEVEL.load(Ordering::Relaxed)
}

/// Write one message (use the `p4log!` macro, which checks the level first).
pub fn write(l: Level, args: std::fmt::Arguments) {
    let tag = match l {
        Level::Error => "error: ",
        Level::Warn => "warning: ",
        Level::Info => "",
        Level::Debug => "debug: ",
        Level::Trace => "trace: ",
    };
    eprintln!("p4sec switch: {tag}{args}");
}

/// `rtlog!(Level::Info, "controller {} connected", peer)`: a message on stderr if the level is
/// enabled.
#[macro_export]
macro_rules! rtlog {
    ($lvl:expr, $($arg:tt)*) => {
        if $crate::log::enabled($lvl) {
            $crate::log::write($lvl, format_args!($($arg)*))
        }
    };
}
