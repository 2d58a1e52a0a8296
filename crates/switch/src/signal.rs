//! Catching SIGINT and SIGTERM, so that the switch can stop cleanly: the first signal is noted
//! ([`signalled`]), a second one ends the process at once.

use std::sync::atomic::{AtomicBool, Ordering};

static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    // a second signal ends the process at once
    if SIGNALLED.swap(true, Ordering::SeqCst) {
        unsafe { libc::_exit(130) };
    }
}

/// Catch SIGINT and SIGTERM so that the switch can stop cleanly (see [`signalled`]).
pub fn install_signal_handlers() {
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_flags = libc::SA_RESTART;
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
    }
}

/// Has SIGINT or SIGTERM arrived since [`install_signal_handlers`]?
pub fn signalled() -> bool {
    SIGNALLED.load(Ordering::SeqCst)
}
