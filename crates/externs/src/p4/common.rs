//! What the extern bindings share: the status codes of `p4sec.p4`, the error for a bad argument and
//! a per-thread scratch buffer.

use crate::iface::ExternError;
use std::cell::RefCell;

/// Status codes of `p4sec.p4`.
pub const OK: u64 = 0;
pub const NO_SA: u64 = 1;

pub(super) fn bad(m: &str) -> ExternError {
    ExternError::BadArgument(m.to_string())
}

thread_local! {
    pub(super) static SCRATCH: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(4096));
}
