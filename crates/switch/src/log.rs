//! The switch's log (`p4sec switch --log LEVEL`, BMv2's `--log-file`): one level and one place
//! for the data plane and for the P4Runtime server (`p4sec_p4runtime::log` re-exports this), on
//! stderr or in a file.

use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;

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

/// The log file, when messages go to one, and whether it is flushed after every message.
static FILE: Mutex<Option<(std::io::BufWriter<std::fs::File>, bool)>> = Mutex::new(None);

/// Send the messages to `path` (created or truncated) instead of stderr; with `flush`, the file is
/// flushed after every message (BMv2's `--log-flush`), else when its buffer fills and at [`flush`].
pub fn set_file(path: &std::path::Path, flush: bool) -> Result<(), String> {
    let f = std::fs::File::create(path)
        .map_err(|e| format!("cannot create the log file {}: {e}", path.display()))?;
    *FILE.lock().unwrap_or_else(|p| p.into_inner()) =
        Some((std::io::BufWriter::with_capacity(64 << 10, f), flush));
    Ok(())
}

/// Flush the log file, if any (before the process exits).
pub fn flush() {
    if let Some((f, _)) = FILE.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
        let _ = f.flush();
    }
}

/// Write text (whole lines, each ending in a newline) to the log: the file, or stderr.
pub fn write_lines(text: &str) {
    let mut file = FILE.lock().unwrap_or_else(|p| p.into_inner());
    match file.as_mut() {
        Some((f, flush)) => {
            let _ = f.write_all(text.as_bytes());
            if *flush {
                let _ = f.flush();
            }
        }
        None => {
            drop(file);
            let _ = std::io::stderr().lock().write_all(text.as_bytes());
        }
    }
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
    write_lines(&format!("p4sec switch: {tag}{args}\n"));
}

/// `p4log!(Level::Info, "port {} is up", n)`: a message on stderr if the level is enabled.
#[macro_export]
macro_rules! p4log {
    ($lvl:expr, $($arg:tt)*) => {
        if $crate::log::enabled($lvl) {
            $crate::log::write($lvl, format_args!($($arg)*))
        }
    };
}
