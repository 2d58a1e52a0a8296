//! The P4Runtime server's log: the switch's (`p4sec_switch::log`: one level and one place for the
//! data plane and the server), and its `rtlog!` macro.

pub use p4sec_switch::log::{enabled, flush, set_file, set_level, write, write_lines, Level};

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
