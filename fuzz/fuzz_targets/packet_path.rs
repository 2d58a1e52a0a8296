//! Any frame on any port through a program with stacks, varbit, unions and checksums: no panic, no
//! hang.
//!
//! One engine and one worker serve every input (as in the switch, where a worker lives as long as
//! its thread): `Worker::new` registers the worker's statistics with the engine for the engine's
//! lifetime, so a worker per input grew the process by one registration per run until libFuzzer's
//! memory limit (~15 M runs).
#![no_main]
use libfuzzer_sys::fuzz_target;
use p4sec_engine::{Engine, Outputs, Worker};
use std::cell::RefCell;
use std::sync::{Arc, OnceLock};

static ENGINE: OnceLock<Engine> = OnceLock::new();

thread_local! {
    /// The worker and output buffers reused across inputs (libFuzzer runs the inputs on one
    /// thread).
    static STATE: RefCell<Option<(Worker, Outputs)>> = const { RefCell::new(None) };
}

fuzz_target!(|data: &[u8]| {
    let e = ENGINE.get_or_init(|| {
        let src = include_str!("../../programs/ipv4_router.p4");
        let p = p4sec_frontend::compile_str("router.p4", src, &Default::default()).expect("compiles");
        Engine::new(Arc::new(p), &[]).expect("loads")
    });
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        let (w, out) = s.get_or_insert_with(|| (Worker::new(e), Outputs::default()));
        // `process` appends to its outputs: empty them so they do not grow across inputs
        out.clear();
        let port = data.first().copied().unwrap_or(0) as u32;
        e.process(w, port, data, out);
    });
});
