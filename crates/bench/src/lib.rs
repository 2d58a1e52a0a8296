//! The benchmarks behind the `p4sec bench*` commands, apart from the command line: each module
//! measures one thing in process and prints its figures beside the comparison it is judged by
//! (`--json FILE` for scripts). `router` (`p4sec bench`): the IPv4 LPM router against native Rust;
//! `hash` (`bench-hash`): keyed hashing in the pipeline; `p4ead` (`bench-p4ead`): ASCON in plain P4
//! against the extern; `sad` (`bench-sad`): ESP decapsulation as the SAD grows; `mixed`
//! (`bench-mixed`): an IPsec gateway's mixed IP/ESP traffic during re-keying; `esp`
//! (`bench-esp`): the per-packet cost of one ESP tunnel; `engines` (`bench-engines`): the P4 part
//! of the security pipelines on the closure and the native engine.

pub mod engines;
pub mod esp;
pub mod hash;
pub mod mixed;
pub mod p4ead;
pub mod router;
pub mod sad;
mod setup;
