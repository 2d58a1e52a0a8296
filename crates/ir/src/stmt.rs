//! Statements: [`Stmt`], the v1model built-ins ([`Builtin`]), extern call arguments and header
//! references.

use crate::expr::*;
use serde::{Deserialize, Serialize};

/// Which header a header operation acts on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum HeaderRef {
    /// Index into `Program::headers`.
    Static(u32),
    /// Element `index` of a header stack (index into `Program::stacks`); out of bounds → the
    /// operation fails with StackOutOfBounds in the parser and is ignored in controls.
    Dynamic { stack: u32, index: Box<Expr> },
    /// `stack.next` in a parser: the element at the stack's next index, which is incremented after
    /// a successful extract. Out of bounds → StackOutOfBounds.
    Next { stack: u32 },
}

/// v1model / engine built-in operations (fast paths; everything else goes through registered
/// externs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Builtin {
    /// `verify(cond, err)` (parser): if !cond, parser error `err` and go to reject.
    Verify {
        cond: Expr,
        error: u32,
    },
    /// `mark_to_drop(sm)`: egress_spec = 511, mcast_grp = 0.
    MarkToDrop,
    /// `hash(dst, algo, base, data, max)`: dst = base + H(data) mod max (max = 0 → base + H(data)).
    Hash {
        dst: LValue,
        algo: HashAlgo,
        base: Expr,
        data: Vec<Expr>,
        max: Expr,
    },
    /// `verify_checksum[_with_payload](cond, data, field, algo)`: if cond and mismatch →
    /// checksum_error = 1.
    VerifyChecksum {
        cond: Expr,
        data: Vec<Expr>,
        field: Expr,
        algo: HashAlgo,
        with_payload: bool,
    },
    /// `update_checksum[_with_payload](cond, data, field, algo)`: if cond → field = H(data [+
    /// payload]).
    UpdateChecksum {
        cond: Expr,
        data: Vec<Expr>,
        dst: LValue,
        algo: HashAlgo,
        with_payload: bool,
    },
    /// Register read/write on register instance `reg` (index into `Program::registers`).
    /// Out-of-range index: read gives 0, write is ignored.
    RegisterRead {
        reg: u32,
        dst: LValue,
        index: Expr,
    },
    RegisterWrite {
        reg: u32,
        index: Expr,
        value: Expr,
    },
    /// Indexed counter `count(index)`.
    CounterCount {
        counter: u32,
        index: Expr,
    },
    /// Indexed meter `execute_meter(index, dst)`: dst = color (0 green, 1 yellow, 2 red).
    MeterExecute {
        meter: u32,
        index: Expr,
        dst: LValue,
    },
    /// `direct_meter.read(dst)` inside an action of the table that owns the meter.
    DirectMeterRead {
        meter: u32,
        dst: LValue,
    },
    /// `direct_counter.count()` (a no-op in bmv2 beyond the automatic count; kept for traces).
    DirectCounterCount {
        counter: u32,
    },
    /// `clone(type, session)` / `clone_preserving_field_list(type, session, list)`.
    Clone {
        kind: CloneKind,
        session: Expr,
        field_list: Option<u32>,
    },
    /// `resubmit_preserving_field_list(list)` (plain `resubmit` → field_list None).
    Resubmit {
        field_list: Option<u32>,
    },
    /// `recirculate_preserving_field_list(list)`.
    Recirculate {
        field_list: Option<u32>,
    },
    /// `truncate(length_bytes)`.
    Truncate {
        length: Expr,
    },
    /// `digest(receiver, data)`: the fields of digest type `digest` (index into
    /// `Program::digests`).
    Digest {
        digest: u32,
        data: Vec<Expr>,
    },
    /// `random(dst, lo, hi)`.
    Random {
        dst: LValue,
        lo: Expr,
        hi: Expr,
    },
    /// `log_msg(fmt, args)`.
    LogMsg {
        format: String,
        args: Vec<Expr>,
    },
    /// `assert(cond)` / `assume(cond)`: when false, the packet is dropped and the failure is
    /// counted.
    Assert {
        cond: Expr,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CloneKind {
    I2E,
    E2E,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum HashAlgo {
    Crc32,
    Crc32Custom,
    Crc16,
    Crc16Custom,
    Random,
    Identity,
    Csum16,
    Xor16,
}

/// An argument to a registered extern method. `In` values are evaluated before the call;
/// `Out`/`InOut` locations are written after the call. A header/struct argument is a list of
/// scalars concatenated (most significant first), with their locations for write-back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExternArg {
    pub dir: Direction,
    /// Total width of the bit string passed.
    pub width: u32,
    /// For `In`: the expressions whose concatenation is the value. For `Out`/`InOut`: loads of
    /// `dsts`.
    pub parts: Vec<Expr>,
    /// For `Out`/`InOut`: the locations the result is split back into (same order and widths as
    /// `parts`).
    pub dsts: Vec<LValue>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Direction {
    In,
    Out,
    InOut,
}

/// A statement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Stmt {
    /// `dst = src` (equal widths).
    Assign {
        dst: LValue,
        src: Expr,
    },
    /// Set a header valid or invalid. (Union siblings are handled by the front end with extra
    /// statements.)
    SetValid {
        hdr: HeaderRef,
        valid: bool,
    },
    /// Copy a whole header (validity and all fields) from one header to another of the same layout;
    /// used for stack elements chosen at run time. Out-of-bounds dynamic refs make it a no-op.
    CopyHeader {
        dst: HeaderRef,
        src: HeaderRef,
    },
    If {
        cond: Expr,
        then: Vec<Stmt>,
        else_: Vec<Stmt>,
    },
    /// Run the first case whose value equals `expr`, or `default`.
    Switch {
        expr: Expr,
        cases: Vec<(Vec<Value>, Vec<Stmt>)>,
        default: Vec<Stmt>,
    },
    /// A labelled block; `Break(label)` inside it jumps to its end.
    Block {
        label: u32,
        body: Vec<Stmt>,
    },
    Break(u32),
    /// A run-time loop: `body` runs again and again until a `Break(label)` inside it ends the loop
    /// (other `Break`s, `Exit` and parser errors leave it as they leave a block). The engine bounds
    /// the iterations of a packet's pass (a loop that would never end drops the packet).
    Loop {
        label: u32,
        body: Vec<Stmt>,
    },
    /// Leave the current control (or parser → accept is NOT implied: `exit` in a parser is an
    /// error).
    Exit,
    /// Apply table `table`. If `hit` is given, it receives 1 on hit; `action_run` receives the
    /// index (into `Program::actions`) of the action that ran.
    ApplyTable {
        table: u32,
        hit: Option<Loc>,
        action_run: Option<Loc>,
    },
    /// Run action `action` with arguments assigned to its parameter locations (used for direct
    /// calls of actions that are not inlined; the front end normally inlines).
    CallAction {
        action: u32,
        args: Vec<Expr>,
    },
    /// Parser: extract the next `max_bits` (fixed part) of the packet into `hdr` and make it valid;
    /// for a header with a varbit field, `varbit_bits` gives the length of the varbit field in
    /// bits.
    Extract {
        hdr: HeaderRef,
        varbit_bits: Option<Expr>,
    },
    /// Parser: skip `bits` bits (must be a multiple of 8 at run time in bmv2; else
    /// ParserInvalidArgument).
    Advance {
        bits: Expr,
    },
    /// Deparser: append the header's bytes to the output if it is valid.
    Emit {
        hdr: HeaderRef,
    },
    Builtin(Builtin),
    /// A registered extern method call (`Program::externs[inst]`, method index `method` as resolved
    /// by the engine from `Program::externs[inst].methods[method]`).
    ExternCall {
        inst: u32,
        method: u32,
        args: Vec<ExternArg>,
        ret: Option<LValue>,
    },
}
