//! Shared libraries opened at run time with `dlopen` (libxdp and libbpf for AF_XDP ports): the
//! switch builds and runs without them, and says why a feature that needs one is not available.

use std::ffi::c_void;

/// A shared library opened with `dlopen` (never closed: its functions are kept for the process's
/// life).
pub struct Dl(*mut c_void);

impl Dl {
    /// The first of `names` that opens; `missing` is the error when none does.
    pub fn open(names: &[&std::ffi::CStr], missing: &str) -> Result<Dl, String> {
        names
            .iter()
            .map(|n| unsafe { libc::dlopen(n.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) })
            .find(|h| !h.is_null())
            .map(Dl)
            .ok_or_else(|| missing.to_string())
    }

    /// The address of function `name` (`lib` names the library in the error).
    pub fn sym(&self, name: &std::ffi::CStr, lib: &str) -> Result<*mut c_void, String> {
        let p = unsafe { libc::dlsym(self.0, name.as_ptr()) };
        if p.is_null() {
            Err(format!("{lib} has no `{}`", name.to_string_lossy()))
        } else {
            Ok(p)
        }
    }
}
