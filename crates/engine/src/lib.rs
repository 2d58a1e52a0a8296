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
//! The engine is the composition of its stages, each a type with its own state (the fields of
//! [`Engine`], defined in `engine.rs`): `Layout` (where the program's data lives
//! in a worker's slots), the parser, the controls, match-action, the externs, the deparser, the
//! packet replication engine and the digest queue. Code is in folders by when it runs:
//!
//! * `load/` builds an engine for a program (`mod.rs`), compiling its blocks into closures
//!   (`compile.rs`; the closure and block types are in `code.rs`) with the plans of `plans.rs`
//!   (header layouts) and `pristine.rs` (which extern arguments are headers as extracted);
//! * `pipeline/` runs a packet, stage by stage: `mod.rs` (the v1model passes: parser, verify,
//!   ingress, traffic manager, egress, compute, deparser; clone, resubmit, recirculate, multicast)
//!   runs `parser.rs`, `match_action.rs` (table apply), `call/` (built-ins and extern calls),
//!   `exec.rs` (statements and expressions), `headers.rs` (extract, emit, the deparser's
//!   checksums), `effects.rs` (what the v1model built-ins ask of the pass) and `tm.rs` (queues and
//!   the clock);
//! * `tables/` is the tables' storage (`mod.rs`, `tss.rs`), `meters.rs` the meters' state;
//! * `control.rs` is the control-plane API (tables, registers, counters, meters, the replication
//!   engine, digests), apart from the pipeline.
//!
//! A worker's per-packet state is `worker.rs`.

mod backend;
pub mod bits;
pub mod chunkvec;
mod clock;
mod code;
mod control;
mod engine;
pub mod harness_externs;
pub mod hash;
mod load;
pub mod meters;
mod native;
mod pipeline;
pub mod tables;
/// Externs for tests only (one breaks the extern interface on purpose): never in a shipped binary.
/// Enabled by `cfg(test)` or the `test-externs` feature (the crates' dev-dependencies set it).
#[cfg(any(test, feature = "test-externs"))]
pub mod test_externs;
mod worker;

pub use backend::{Backend, BACKEND_ENV};
pub use clock::coarse_ms;
pub(crate) use engine::bump;
pub use engine::{DigestMsg, Engine, Outputs, Pre, RegisterRt, StatsSnapshot, TableRt};
pub use pipeline::tm;
pub use pipeline::{DROP_PORT, MAX_PASSES};
pub use worker::{Stats, Worker};
pub(crate) use worker::{NOT_IN_PKT, NO_OFFSET};

/// The most loop iterations (all run-time loops together) one pass of a packet may run; past it the
/// packet is dropped and counted in `Stats::loop_limit`, so a loop that never ends cannot hang a
/// worker. About ten milliseconds of a small loop body.
pub const MAX_LOOP_STEPS: u32 = 1 << 20;

#[cfg(test)]
mod testutil;
