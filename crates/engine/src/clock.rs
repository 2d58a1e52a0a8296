//! The clock of table entries' last hits (idle timeouts).

/// A coarse monotonic clock in milliseconds (CLOCK_MONOTONIC_COARSE: a few nanoseconds to read, a
/// few milliseconds of resolution), for the last hits of entries with idle timeouts.
#[inline]
pub fn coarse_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}
