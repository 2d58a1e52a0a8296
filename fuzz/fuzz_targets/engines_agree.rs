//! Any frame on any port through the router, the IPsec gateway's parser and tables (no SAs), the
//! URL filter and the keyed Bloom filter, on the closure engine and on the native engine: the same
//! frames out of both, byte for byte, and no panic or hang in either.
//!
//! The first input byte picks the program, the second the ingress port; the engines and their
//! workers live across inputs (see packet_path.rs for why).
#![no_main]
use libfuzzer_sys::fuzz_target;
use p4sec_engine::{Backend, Engine, Outputs, Worker};
use std::cell::RefCell;
use std::sync::{Arc, OnceLock};

const PROGRAMS: [(&str, &str); 4] = [
    ("ipv4_router.p4", include_str!("../../programs/ipv4_router.p4")),
    ("ipsec_gateway.p4", include_str!("../../programs/ipsec_gateway.p4")),
    ("url_filter_fast.p4", include_str!("../../programs/url_filter_fast.p4")),
    ("keyed_bloom.p4", include_str!("../../programs/keyed_bloom.p4")),
];

/// Per program: (closure engine, native engine).
static ENGINES: OnceLock<Vec<(Engine, Engine)>> = OnceLock::new();

thread_local! {
    /// Per program: a worker and an output buffer for each engine.
    static STATE: RefCell<Vec<[(Worker, Outputs); 2]>> = const { RefCell::new(Vec::new()) };
}

fuzz_target!(|data: &[u8]| {
    let engines = ENGINES.get_or_init(|| {
        PROGRAMS
            .iter()
            .map(|(name, src)| {
                let p = Arc::new(
                    p4sec_frontend::compile_str(name, src, &Default::default()).expect("compiles"),
                );
                let reg = p4sec_externs::p4::registry();
                let load = |b| Engine::with_backend(p.clone(), &reg, b).expect("loads");
                (load(Backend::Closure), load(Backend::Native))
            })
            .collect()
    });
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        if s.is_empty() {
            for (c, n) in engines {
                s.push([
                    (Worker::new(c), Outputs::default()),
                    (Worker::new(n), Outputs::default()),
                ]);
            }
        }
        let k = data.first().copied().unwrap_or(0) as usize % engines.len();
        let port = data.get(1).copied().unwrap_or(0) as u32 % 8;
        let frame = data.get(2..).unwrap_or(&[]);
        let (c, n) = &engines[k];
        let [(wc, oc), (wn, on)] = &mut s[k];
        oc.clear();
        on.clear();
        c.process(wc, port, frame, oc);
        n.process(wn, port, frame, on);
        let a: Vec<_> = oc.iter().collect();
        let b: Vec<_> = on.iter().collect();
        assert_eq!(a, b, "program {}: the engines differ", PROGRAMS[k].0);
    });
});
