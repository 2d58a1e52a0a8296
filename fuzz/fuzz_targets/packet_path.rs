//! Any frame on any port through a program with stacks, varbit, unions and checksums: no panic, no hang.
#![no_main]
use libfuzzer_sys::fuzz_target;
use p4sec_engine::{Engine, Outputs, Worker};
use std::sync::{Arc, OnceLock};

static ENGINE: OnceLock<Engine> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let e = ENGINE.get_or_init(|| {
        let src = include_str!("../../programs/ipv4_router.p4");
        let p = p4sec_frontend::compile_str("router.p4", src, &Default::default()).expect("compiles");
        Engine::new(Arc::new(p), &[]).expect("loads")
    });
    let mut w = Worker::new(e);
    let mut out = Outputs::default();
    let port = data.first().copied().unwrap_or(0) as u32;
    e.process(&mut w, port, data, &mut out);
});
