//! The plain data of the engine's table API: what the control plane hands in (a batch of
//! [`TableOp`]s, action profile members and [`Group`]s) and gets back ([`EntryInfo`], a
//! [`TableError`] with its kind). Nothing here refers to how tables are stored.

use crate::meters::MeterRates;
use p4sec_ir::{ActionCall, Table, TableEntry};

/// Why a table or action profile change was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableErrorKind {
    /// No such entry, member or group.
    NotFound,
    /// An entry with this match, or a member or group with this id, exists.
    AlreadyExists,
    /// The current state does not allow it (a member or group in use, const entries, ...).
    Precondition,
    /// The change itself is malformed (wrong key, action, argument, weight, ...).
    Invalid,
    /// The table or action profile is full.
    Full,
    /// The engine's own state is inconsistent (a bug).
    Internal,
}

/// A refused change: its kind and a message naming the table, profile, entry or value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableError {
    pub kind: TableErrorKind,
    pub message: String,
}

impl TableError {
    pub fn new(kind: TableErrorKind, message: impl Into<String>) -> TableError {
        TableError {
            kind,
            message: message.into(),
        }
    }
    pub(crate) fn exists(m: impl Into<String>) -> TableError {
        Self::new(TableErrorKind::AlreadyExists, m)
    }
    pub(crate) fn full(m: impl Into<String>) -> TableError {
        Self::new(TableErrorKind::Full, m)
    }
    pub(crate) fn not_found(m: impl Into<String>) -> TableError {
        Self::new(TableErrorKind::NotFound, m)
    }
    pub(crate) fn invalid(m: impl Into<String>) -> TableError {
        Self::new(TableErrorKind::Invalid, m)
    }
    pub(crate) fn precondition(m: impl Into<String>) -> TableError {
        Self::new(TableErrorKind::Precondition, m)
    }
    pub(crate) fn internal(m: impl Into<String>) -> TableError {
        Self::new(TableErrorKind::Internal, m)
    }
    /// No entry of table `t` has the match looked for.
    pub(crate) fn no_entry(t: &Table) -> TableError {
        Self::not_found(format!("table `{}`: no entry with this match", t.name))
    }
}

impl std::fmt::Display for TableError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<TableError> for String {
    fn from(e: TableError) -> String {
        e.message
    }
}

/// What an entry of a table implemented by an action profile or selector runs: a member of the
/// profile, a group of members (one chosen per packet by the hash of the selector keys), or a
/// one-shot set of weighted actions.
#[derive(Clone, Debug, PartialEq)]
pub enum ProfileTarget {
    Member(u32),
    Group(u32),
    ActionSet(Vec<(ActionCall, u32)>),
}

/// An entry to install or change.
#[derive(Clone, Debug)]
pub struct EntryWrite {
    /// The match and priority; the action too, for tables without an action profile (with one,
    /// `target` says what the entry runs and this action is not used).
    pub entry: TableEntry,
    pub target: Option<ProfileTarget>,
    /// The direct meter: on insert, its configuration (`None` or `Some(None)`: every packet
    /// green); on modify, `None` keeps it and `Some(rates)` configures it anew.
    pub meter: Option<Option<MeterRates>>,
    /// The idle timeout in ns (tables with `support_timeout`); `None` leaves it.
    pub idle_timeout_ns: Option<u64>,
}

impl EntryWrite {
    /// An entry running its own action, without meter configuration or idle timeout.
    pub fn new(entry: TableEntry) -> EntryWrite {
        EntryWrite {
            entry,
            target: None,
            meter: None,
            idle_timeout_ns: None,
        }
    }
}

/// One change of a batch (`Engine::tables_apply`), on the table of that index.
#[derive(Clone, Debug)]
pub enum TableOp {
    Insert(usize, EntryWrite),
    Modify(usize, EntryWrite),
    /// The entry with this match (and priority).
    Delete(usize, TableEntry),
    SetDefault(usize, ActionCall),
}

impl TableOp {
    pub fn table(&self) -> usize {
        match self {
            TableOp::Insert(t, _)
            | TableOp::Modify(t, _)
            | TableOp::Delete(t, _)
            | TableOp::SetDefault(t, _) => *t,
        }
    }
}

/// An installed entry as the control plane reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct EntryInfo {
    /// Its match and the action a hit runs (for a group or action set: its first choice).
    pub entry: TableEntry,
    /// What it refers to in the table's action profile, as written.
    pub target: Option<ProfileTarget>,
    /// The direct counter.
    pub packets: u64,
    pub bytes: u64,
    /// The direct meter's configuration (`None`: every packet green) and per-colour counts
    /// (packets, bytes: green, yellow, red), for entries that have one.
    pub meter: Option<(Option<MeterRates>, [(u64, u64); 3])>,
    /// Idle timeout in ns (0: none), when the entry was last hit ([`crate::coarse_ms`]) and the
    /// last hit the controller was told about as idle (`u64::MAX`: not told).
    pub idle_timeout_ns: u64,
    pub last_hit_ms: u64,
    pub idle_notified_ms: u64,
}

/// A group member's watch port as it was written: an integer (0: none) or big-endian bytes (empty:
/// none), read back in the same form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchSpec {
    Int(i32),
    Bytes(Vec<u8>),
}

impl WatchSpec {
    /// The port watched, if any.
    pub fn port(&self) -> Result<Option<u32>, String> {
        match self {
            WatchSpec::Int(0) => Ok(None),
            WatchSpec::Int(p) if *p < 0 => Err(format!("watch port {p} is negative")),
            WatchSpec::Int(p) => Ok(Some(*p as u32)),
            WatchSpec::Bytes(b) if b.is_empty() => Ok(None),
            WatchSpec::Bytes(b) if b.len() > 4 => Err(format!(
                "watch_port has {} bytes; ports have at most 4",
                b.len()
            )),
            WatchSpec::Bytes(b) => Ok(Some(b.iter().fold(0u32, |a, x| (a << 8) | *x as u32))),
        }
    }
}

/// One member of a group: its weight (positive) and the port it watches (it is left out of the
/// choice while that port is down).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupMember {
    pub member: u32,
    pub weight: i32,
    pub watch: Option<WatchSpec>,
}

/// A group of an action selector: its members and the largest sum of weights it may hold (0: the
/// selector's size).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub members: Vec<GroupMember>,
    pub max_size: i32,
}

impl Group {
    /// The port member `i` watches, if any.
    pub(crate) fn watch_port(&self, i: usize) -> Option<u32> {
        self.members
            .get(i)
            .and_then(|m| m.watch.as_ref())
            .and_then(|w| w.port().ok().flatten())
    }
}

/// Which ports are up, as the data plane reports them; a port never reported is down. Group members
/// watching a port that is down are left out of the choice.
#[derive(Debug, Default)]
pub struct PortStatus(std::sync::RwLock<std::collections::HashMap<u32, bool>>);

impl PortStatus {
    pub fn is_up(&self, port: u32) -> bool {
        self.0
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&port)
            .copied()
            .unwrap_or(false)
    }
    /// Record a port's state; true when it changed.
    pub fn set(&self, port: u32, up: bool) -> bool {
        self.0
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(port, up)
            != Some(up)
    }
}
