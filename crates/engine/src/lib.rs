//! The p4sec engine: executes a compiled program (`p4sec_ir::Program`) for the v1model architecture
//! with the semantics of BMv2 simple_switch.
//!
//! * [`Engine`] holds the program and all shared state (tables, registers, counters, meters, the
//!   packet replication engine, extern instances). It is `Sync`: workers share it; table writes
//!   publish new versions atomically (RCU) so packet processing never waits for the control plane.
//! * [`Worker`] holds per-thread, per-packet state that is reset, not reallocated, between packets.
//! * [`Engine::process`] runs one input packet to quiescence and appends the frames it emits to
//!   [`Outputs`].
//!
//! The packet's path, stage by stage: `pipeline.rs` (the v1model passes) runs `parser.rs` (parser
//! states and selects), `headers.rs` (extract, emit, the deparser's checksums), `match_action.rs`
//! (table applies) and `call.rs` (built-ins and extern calls) over the statements and expressions
//! of `exec.rs`, compiled into closures at load time by `compile.rs`. `control.rs` is the
//! control-plane API. The types all of them share (the engine, the worker, the compiled program)
//! are in `state.rs`; `load.rs` builds an engine for a program.

pub mod bits;
mod call;
pub mod chunkvec;
mod clock;
mod compile;
mod control;
mod effects;
mod exec;
pub mod hash;
mod headers;
mod load;
mod match_action;
pub mod meters;
mod parser;
mod pipeline;
mod plans;
mod pristine;
mod state;
pub mod tables;
/// Externs for tests and the STF runner only (one breaks the extern interface on purpose): never in
/// a production switch. Enabled by `cfg(test)` or the `test-externs` feature.
#[cfg(any(test, feature = "test-externs"))]
pub mod test_externs;
pub mod tm;
mod tss;

pub use clock::coarse_ms;
pub use pipeline::{DROP_PORT, MAX_PASSES};

/// The most loop iterations (all run-time loops together) one pass of a packet may run; past it the
/// packet is dropped and counted in `Stats::loop_limit`, so a loop that never ends cannot hang a
/// worker. About ten milliseconds of a small loop body.
pub const MAX_LOOP_STEPS: u32 = 1 << 20;
pub(crate) use state::{bump, NOT_IN_PKT, NO_OFFSET};
pub use state::{
    DigestMsg, Engine, Outputs, Pre, RegisterRt, Stats, StatsSnapshot, TableRt, Worker,
};

#[cfg(test)]
mod tests;
