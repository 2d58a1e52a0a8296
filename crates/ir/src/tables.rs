//! Tables, actions and entries: keys and match kinds, action calls, action profiles and selectors.

use crate::expr::*;
use crate::stmt::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MatchKind {
    Exact,
    Ternary,
    Lpm,
    Range,
    Optional,
    /// Action selector key (used to pick a member of a group, not for matching).
    Selector,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableKey {
    /// The control-plane name (the `@name` annotation or the source text), e.g. `hdr.ipv4.dstAddr`.
    pub name: String,
    /// P4Info match field id (1-based position).
    pub id: u32,
    pub expr: Expr,
    pub kind: MatchKind,
    pub width: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Param {
    pub name: String,
    pub id: u32,
    pub loc: Loc,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Action {
    /// Fully qualified control-plane name, e.g. `MyIngress.set_nhop`.
    pub name: String,
    /// P4Info id.
    pub id: u32,
    /// Directionless parameters (set by the table entry / default action).
    pub params: Vec<Param>,
    pub body: Vec<Stmt>,
}

/// The match of one key element in a table entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum FieldMatch {
    Exact(Value),
    Ternary {
        value: Value,
        mask: Value,
    },
    Lpm {
        value: Value,
        prefix_len: u32,
    },
    Range {
        lo: Value,
        hi: Value,
    },
    /// Optional: `None` = wildcard.
    Optional(Option<Value>),
    /// Don't care (ternary `_`, lpm /0, range full).
    Any,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ActionCall {
    /// Index into `Program::actions`.
    pub action: u32,
    pub args: Vec<Value>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableEntry {
    /// One per table key, in key order.
    pub matches: Vec<FieldMatch>,
    pub action: ActionCall,
    /// Larger wins (P4Runtime convention). Const entries get priorities from their position
    /// (earlier = larger) or from their `@priority`/`priority =` annotation, converted to this
    /// convention.
    pub priority: i32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableAction {
    /// Index into `Program::actions`.
    pub action: u32,
    pub default_only: bool,
    pub table_only: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Implementation {
    None,
    /// Index into `Program::action_profiles`.
    ActionProfile(u32),
    ActionSelector(u32),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Table {
    pub name: String,
    pub id: u32,
    pub keys: Vec<TableKey>,
    pub actions: Vec<TableAction>,
    pub default_action: ActionCall,
    pub default_is_const: bool,
    /// `const entries` (the table is then immutable from the control plane) or `entries` (initial).
    pub entries: Vec<TableEntry>,
    pub entries_are_const: bool,
    pub size: u32,
    pub implementation: Implementation,
    /// Index into `Program::direct_counters` / `direct_meters`.
    pub direct_counter: Option<u32>,
    pub direct_meter: Option<u32>,
    /// v1model `support_timeout = true`: entries may have an idle timeout (P4Info
    /// `idle_timeout_behavior: NOTIFY_CONTROL`), and hits record when they happened.
    #[serde(default)]
    pub support_timeout: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ActionProfile {
    pub name: String,
    pub id: u32,
    pub size: u32,
    /// For selectors: the hash algorithm over the selector keys.
    pub selector: Option<HashAlgo>,
    pub tables: Vec<u32>,
}
