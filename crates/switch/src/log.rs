//! The switch's stderr messages and their level (`p4sec switch --log LEVEL`): one level for the
//! data plane and the P4Runtime server, whose log lives in `p4sec_p4runtime::log` (re-exported
//! here).

pub use p4sec_p4runtime::log::{enabled, flush, set_file, set_level, write, write_lines, Level};

/// `p4log!(Level::Info, "port {} is up", n)`: a message on stderr if the level is enabled.
#[macro_export]
macro_rules! p4log {
    ($lvl:expr, $($arg:tt)*) => {
        if $crate::log::enabled($lvl) {
            $crate::log::write($lvl, format_args!($($arg)*))
        }
    };
}
