//! The executable program of p4sec: what the front end produces and the engine runs.
//!
//! Everything is resolved at compile time. Per-packet state is one flat array of `u64` words
//! ("slots"). A scalar location (a header field, a metadata field, a local variable, a validity
//! bit) is a [`Loc`]: a word offset and a bit width. Values of up to 64 bits live in one word
//! (zero-extended, i.e. a signed `int<W>` is stored as its W-bit two's complement pattern); wider
//! values use `ceil(width/64)` consecutive words, least significant word first. The widest value
//! supported is [`MAX_WIDTH`] bits.
//!
//! Control flow is structured: blocks, `if`, `switch`, labelled blocks with `Break` (used for
//! `return` from inlined functions and actions), and `Exit` (leaves the current pipeline block:
//! parser, a control). All parser/control/function/action calls have been inlined by the front end,
//! except actions run by tables.
//!
//! The types by concern, all re-exported here: `expr.rs` (locations, values, expressions),
//! `stmt.rs` (statements and built-ins), `blocks.rs` (parser states, control blocks), `tables.rs`
//! (tables, actions, entries), `objects.rs` (registers, counters, meters, value sets, digests,
//! extern instances) and `program.rs` (the whole program, its fast forms and its JSON form).

mod blocks;
mod expr;
mod objects;
pub mod p4info;
pub mod p4info_meta;
mod program;
mod stmt;
mod tables;

pub use blocks::{Control, KeyMatch, Next, Parser, ParserState, Transition};
pub use expr::{words_for, BinOp, Expr, LValue, Loc, UnOp, Value, MAX_WIDTH};
pub use objects::{
    Counter, CounterUnit, Digest, ExternInstance, ExternMethod, Meter, Register, ValueSet,
};
pub use program::{
    json_too_deep, ControllerHeader, FieldLayout, FieldList, HeaderLayout, Program, StackLayout,
    StdMeta, TmFieldUse, CORE_ERRORS, LOAD_STACK, MAX_JSON_DEPTH, MAX_NESTING,
};
pub use stmt::{Builtin, CloneKind, Direction, ExternArg, HashAlgo, HeaderRef, Stmt};
pub use tables::{
    Action, ActionCall, ActionProfile, FieldMatch, Implementation, MatchKind, Param, Table,
    TableAction, TableEntry, TableKey,
};
