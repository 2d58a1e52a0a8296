//! Counting heap allocations per thread: [`CountingAlloc`], a global allocator over the system's
//! that counts every `alloc`, `alloc_zeroed` and `realloc` in a counter of the calling thread. A
//! binary that installs it (`#[global_allocator]`, as the `p4sec` CLI does) lets each worker
//! publish how many allocations its thread has made ([`WorkerStats`](crate::WorkerStats),
//! `p4sec_worker_heap_allocations_total`), so that "no heap allocation per frame in steady state"
//! can be checked on a running switch, on every port kind.
//!
//! The counter is thread-local (no cache line shared between workers; a few instructions per
//! allocation). [`thread_allocations`] answers `None` until the allocator has counted anything in
//! the process: a binary without it reports no figure rather than a false zero.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

/// The system allocator, counting each thread's allocations.
pub struct CountingAlloc;

static ACTIVE: AtomicBool = AtomicBool::new(false);

thread_local! {
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

#[inline]
fn count() {
    // a const-initialised Cell has no destructor: it can be reached while the thread is ending
    COUNT.with(|c| c.set(c.get() + 1));
    if !ACTIVE.load(Ordering::Relaxed) {
        ACTIVE.store(true, Ordering::Relaxed);
    }
}

unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(p, l, n) }
    }
}

/// The heap allocations the calling thread has made so far, or `None` when [`CountingAlloc`] is not
/// the process's allocator.
pub fn thread_allocations() -> Option<u64> {
    if ACTIVE.load(Ordering::Relaxed) {
        Some(COUNT.with(|c| c.get()))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The library's unit tests run under the system allocator: only the counting itself is testable
    // here (the CLI installs it; tests/switch/test_steady_alloc.py reads the workers' figures from
    // a running switch).
    #[test]
    fn counts_each_allocation_of_its_own_thread_only() {
        let a = CountingAlloc;
        let l = Layout::from_size_align(64, 8).unwrap();
        let before = COUNT.with(|c| c.get());
        let other = std::thread::spawn(move || unsafe {
            let p = CountingAlloc.alloc(l);
            CountingAlloc.dealloc(p, l);
            COUNT.with(|c| c.get())
        })
        .join()
        .unwrap();
        assert_eq!(other, 1);
        unsafe {
            let p = a.alloc(l);
            let p = a.realloc(p, l, 128);
            a.dealloc(p, Layout::from_size_align(128, 8).unwrap());
            let z = a.alloc_zeroed(l);
            assert!(std::slice::from_raw_parts(z, 64).iter().all(|&b| b == 0));
            a.dealloc(z, l);
        }
        assert_eq!(COUNT.with(|c| c.get()) - before, 3);
        assert!(thread_allocations().is_some());
    }
}
