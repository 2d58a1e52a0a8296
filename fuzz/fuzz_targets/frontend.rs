//! Any byte string as P4 source: the front end must return a program or an error, never panic or
//! hang.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = p4sec_frontend::compile_str("fuzz.p4", text, &Default::default());
    }
});
