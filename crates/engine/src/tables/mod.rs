//! Match-action tables built for lookup speed: exact tables are hash maps on the packed key (an
//! array for one key of at most 10 bits), single-key LPM tables are hash maps per prefix length
//! probed longest first, everything else (ternary, range, optional, mixed keys) is a
//! priority-ordered list. A table's contents are immutable once published; writers build a new
//! version and swap it in (RCU), so lookups never take a lock.
//!
//! The files: `keys.rs` (packed keys and their hash index), `map32.rs` (the index of 32-bit keys),
//! `lpm32.rs` (the levels of an LPM table of one key of at most 32 bits),
//! `scan.rs` (small scan tables' matches compiled to words), `entry.rs` (one installed entry),
//! `storage.rs` (a table version and its changes), `clone_fields.rs` (a version's copy made in a
//! replaced one, field by field), `lookup.rs` (the packet path's lookups),
//! `validate.rs` (entries checked against the table), `profiles.rs` (action profile members and
//! groups), `api.rs` (the plain data of the control-plane API, whose methods are on `Engine` in
//! `control/`). Storage types stay inside the engine.

mod api;
mod clone_fields;
mod entry;
mod keys;
mod lookup;
mod lpm32;
mod map32;
mod parts;
pub(crate) mod profiles;
mod scan;
mod storage;
mod tss;
mod validate;

pub use api::{
    EntryInfo, EntryWrite, Group, GroupMember, PortStatus, ProfileTarget, TableError,
    TableErrorKind, TableOp, WatchSpec,
};
pub(crate) use entry::{DefaultWrites, Hot, HotData, Installed, INLINE_ARGS};
pub(crate) use keys::DIRECT_BITS;
pub use keys::{KEY_WORDS, MAX_KEY_WORDS};
pub(crate) use lookup::field_matches;
pub(crate) use lpm32::HitArgs;
pub use profiles::profile_table;
pub(crate) use storage::{has_parts_shape, lean_of, without_entry_state, Lean, TableData};
pub use validate::{validate_action, validate_entry};
