//! Stateful objects and extern instances: registers, counters, meters, value sets, digests,
//! registered externs.

use crate::expr::*;
use crate::stmt::*;
use crate::tables::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CounterUnit {
    Packets,
    Bytes,
    Both,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Register {
    pub name: String,
    pub id: u32,
    pub size: u32,
    pub width: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Counter {
    pub name: String,
    pub id: u32,
    /// 0 for direct counters.
    pub size: u32,
    pub unit: CounterUnit,
    /// For direct counters: the owning table.
    pub table: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Meter {
    pub name: String,
    pub id: u32,
    pub size: u32,
    /// Packets or bytes.
    pub unit: CounterUnit,
    pub table: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValueSet {
    pub name: String,
    pub id: u32,
    pub size: u32,
    /// Widths of the elements (several for a tuple/struct value set).
    pub widths: Vec<u32>,
    /// Control-plane names of the elements: the field names of a struct value set (`@name`
    /// honoured), empty for `bit<W>` and tuple value sets.
    #[serde(default)]
    pub names: Vec<String>,
    /// Match kind of each element (P4Info `match_type`): `@match(ternary)` etc. on a struct field,
    /// exact otherwise. Empty means all exact.
    #[serde(default)]
    pub kinds: Vec<MatchKind>,
}

impl ValueSet {
    /// The match kind of element `i` (exact unless declared otherwise).
    pub fn kind(&self, i: usize) -> MatchKind {
        self.kinds.get(i).copied().unwrap_or(MatchKind::Exact)
    }
    /// The control-plane name of element `i` (empty when it has none).
    pub fn field_name(&self, i: usize) -> &str {
        self.names.get(i).map(|s| s.as_str()).unwrap_or("")
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Digest {
    pub name: String,
    pub id: u32,
    /// (field name, width) of the digest struct, in order.
    pub fields: Vec<(String, u32)>,
}

/// A registered extern instance (resolved by type name in the engine's registry).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExternInstance {
    /// Fully qualified instance name (or the function name for extern functions).
    pub name: String,
    /// P4 extern type name (for extern functions: the function name).
    pub type_name: String,
    pub ctor_args: Vec<Value>,
    /// Methods used by the program: name, (direction, width) per argument, return width.
    pub methods: Vec<ExternMethod>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExternMethod {
    pub name: String,
    pub args: Vec<(Direction, u32)>,
    pub ret: Option<u32>,
}
