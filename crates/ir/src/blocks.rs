//! Parser states and transitions ([`Parser`]) and control blocks ([`Control`]).

use crate::expr::*;
use crate::stmt::*;
use serde::{Deserialize, Serialize};

/// One keyset element of a `select` case.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum KeyMatch {
    Any,
    Exact(Value),
    Mask {
        value: Value,
        mask: Value,
    },
    Range {
        lo: Value,
        hi: Value,
    },
    /// Matches if the value is in value set `Program::value_sets[id]` (installed by the control
    /// plane). A value set of several elements (struct or tuple type) stands for the whole keyset
    /// of a select with as many keys: it sits at the first key and the other keys' matches are
    /// `Any`; a member matches when each of its fields matches the key at the same position.
    ValueSet(u32),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Next {
    Accept,
    Reject,
    State(u32),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Transition {
    Goto(Next),
    /// First matching case wins; no match → parser error NoMatch and reject.
    Select {
        keys: Vec<Expr>,
        cases: Vec<(Vec<KeyMatch>, Next)>,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ParserState {
    pub name: String,
    pub body: Vec<Stmt>,
    pub transition: Transition,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Parser {
    pub name: String,
    pub states: Vec<ParserState>,
    pub start: u32,
}

/// A control block (ingress, egress, verify/compute checksum, deparser): its body after inlining.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Control {
    pub name: String,
    pub body: Vec<Stmt>,
}
