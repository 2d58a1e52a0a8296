//! The STF ("simple test framework") runner: parses `.stf` files (see conformance/STF-FORMAT.md in
//! the shared corpora, `$P4SEC_SHARED`), drives the engine, and compares emitted frames with the
//! expectations.
//!
//! `parse.rs` reads the STF text into commands (`values.rs` its numbers, `pattern.rs` its expected
//! packets), `run.rs` runs one test on the engine, `suite.rs` runs a suite folder and writes its
//! report.

/// How far the STF runner's virtual clock moves per packet (µs).
pub const STF_CLOCK_STEP_US: u64 = 1000;

mod parse;
mod pattern;
mod run;
mod suite;
mod values;

pub use run::run_one_cli;
pub use suite::run_suite;
