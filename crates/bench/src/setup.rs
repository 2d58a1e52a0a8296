//! What the benchmarks' set-up shares: table entries built by hand, the program's actions and
//! tables looked up by name for them, and the digest of the frames a run emits.

use p4sec_engine::Engine;
use p4sec_ir::{ActionCall, FieldMatch, TableEntry, Value};

/// An IPv4 address as the value of a 32-bit key or argument.
pub(crate) fn be(a: [u8; 4]) -> u64 {
    u32::from_be_bytes(a) as u64
}

/// The index of action `name`.
pub(crate) fn act(e: &Engine, name: &str) -> Result<u32, String> {
    e.prog
        .actions
        .iter()
        .position(|a| a.name == name)
        .map(|i| i as u32)
        .ok_or(format!("no action {name}"))
}

/// The index of table `name`.
pub(crate) fn table(e: &Engine, name: &str) -> Result<usize, String> {
    e.table_index(name).ok_or(format!("no table {name}"))
}

/// A table entry of `action(args)` matching `matches`.
pub(crate) fn entry(
    matches: Vec<FieldMatch>,
    action: u32,
    args: Vec<Value>,
    priority: i32,
) -> TableEntry {
    TableEntry {
        matches,
        action: ActionCall { action, args },
        priority,
    }
}

/// FNV-1a over the emitted frames (port and bytes), folded into `h`.
pub(crate) fn digest(h: &mut u64, port: u32, bytes: &[u8]) {
    for b in port.to_be_bytes().iter().chain(bytes) {
        *h = (*h ^ *b as u64).wrapping_mul(0x100_0000_01b3);
    }
}
