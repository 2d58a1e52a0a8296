//! What the integration tests share: the checkout's root and the shared corpora (the reference
//! compiler's conformance tests), read through `P4SEC_SHARED` (default `../shared` next to the
//! checkout; a relative value is relative to the checkout).
// (each test target uses some of these)
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};

/// The checkout's root.
pub fn root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::canonicalize(&root).unwrap_or(root)
}

/// The directory of the shared corpora (the default named without `..`, so messages show the plain
/// path).
pub fn shared_root() -> PathBuf {
    match std::env::var_os("P4SEC_SHARED") {
        Some(v) => root().join(v),
        None => root()
            .parent()
            .map(|p| p.join("shared"))
            .unwrap_or_else(|| root().join("../shared")),
    }
}

/// The path `rel` inside the shared corpora, or `None` after printing one skip line that names the
/// path and the variable (the caller returns: the test is skipped). Under `CI=true` a missing
/// corpus is a failure (a panic), so CI cannot pass by skipping.
pub fn shared(rel: &str) -> Option<PathBuf> {
    let path = shared_root().join(rel);
    if path.exists() {
        return Some(path);
    }
    let msg = format!(
        "shared corpus not found at {} (set P4SEC_SHARED; default ../shared next to the checkout)",
        path.display()
    );
    if matches!(
        std::env::var("CI")
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref(),
        Ok("true" | "1")
    ) {
        panic!("{msg}; CI=true: a missing corpus is a failure");
    }
    // straight to the process's stderr, past the test harness's capture, so the skip is listed in
    // the run's output (the harness names each test's thread after the test)
    let test = std::thread::current().name().unwrap_or("test").to_string();
    let _ = writeln!(std::io::stderr(), "skipped {test}: {msg}");
    None
}

/// The tests' xorshift generator: the next value of state `s` (not zero).
pub fn rng(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// The frames of `out` as (port, bytes), to compare one engine's output with another's.
pub fn frames(out: &p4sec_engine::Outputs) -> Vec<(u32, Vec<u8>)> {
    out.iter().map(|(p, b)| (p, b.to_vec())).collect()
}

/// Every extern the switch has and the engine's test externs: what the corpus programs may use.
pub fn all_externs() -> Vec<Box<dyn p4sec_externs::iface::ExternType>> {
    let mut r = p4sec_externs::p4::registry();
    r.extend(p4sec_engine::test_externs::registry());
    r
}
