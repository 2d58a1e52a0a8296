//! The executable program of p4sec: what the front end produces and the engine runs.
//!
//! Everything is resolved at compile time. Per-packet state is one flat array of `u64` words ("slots").
//! A scalar location (a header field, a metadata field, a local variable, a validity bit) is a [`Loc`]:
//! a word offset and a bit width. Values of up to 64 bits live in one word (zero-extended, i.e. a signed
//! `int<W>` is stored as its W-bit two's complement pattern); wider values use `ceil(width/64)` consecutive
//! words, least significant word first. The widest value supported is [`MAX_WIDTH`] bits.
//!
//! Control flow is structured: blocks, `if`, `switch`, labelled blocks with `Break` (used for `return` from
//! inlined functions and actions), and `Exit` (leaves the current pipeline block: parser, a control). All
//! parser/control/function/action calls have been inlined by the front end, except actions run by tables.

use serde::{Deserialize, Serialize};

pub mod p4info;
pub mod p4info_meta;

/// The widest bit string the engine handles (BLAKE2b/SHA3-512 outputs, wide test headers).
pub const MAX_WIDTH: u32 = 512;
/// Number of words for a value of `width` bits.
pub fn words_for(width: u32) -> u32 {
    width.div_ceil(64).max(1)
}

/// A scalar storage location in the per-packet slot array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Loc {
    /// Word offset of the (least significant) word.
    pub slot: u32,
    pub width: u32,
}

/// A location whose header-stack element is chosen at run time: `base + stride * index`.
/// If `index >= count` at run time the access is out of bounds: reads give 0, writes are ignored
/// (bmv2 raises an error instead for parser extracts, see [`Stmt::Extract`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum LValue {
    Static(Loc),
    Dynamic { base: Loc, stride: u32, count: u32, index: Box<Expr> },
}

/// A compile-time constant of arbitrary width (≤ MAX_WIDTH): words, least significant first.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Value {
    pub width: u32,
    pub words: Vec<u64>,
}

impl Value {
    pub fn new(width: u32, v: u64) -> Self {
        let mut words = vec![0; words_for(width) as usize];
        words[0] = if width >= 64 { v } else { v & ((1u64 << width) - 1) };
        Value { width, words }
    }
    pub fn as_u64(&self) -> u64 {
        self.words.first().copied().unwrap_or(0)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum UnOp {
    /// Logical not on a bool (width 1).
    Not,
    /// Bitwise complement within the width.
    BitNot,
    /// Two's complement negation within the width.
    Neg,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    /// Unsigned division (the front end rejects signed runtime division, as P4 does).
    Div,
    Mod,
    /// Saturating add/sub; signedness from `Expr::Binary::signed`.
    AddSat,
    SubSat,
    /// Shift left; the right operand is any width (shift amount ≥ width gives 0).
    Shl,
    /// Shift right: arithmetic if `signed`, logical otherwise.
    Shr,
    BitAnd,
    BitOr,
    BitXor,
    /// Comparisons give a bool (width 1); `signed` selects signed comparison.
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// Short-circuit logical and/or on bools.
    And,
    Or,
}

/// An expression. Every node has the bit width of its result (bool = 1). Operands of arithmetic,
/// bitwise and comparison operators have equal widths (the front end inserts casts).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Expr {
    Const(Value),
    /// A constant of at most 64 bits (the engine's fast form of `Const`; see [`Program::optimize`]).
    Small {
        value: u64,
        width: u32,
    },
    Load(LValue),
    Unary {
        op: UnOp,
        width: u32,
        arg: Box<Expr>,
    },
    Binary {
        op: BinOp,
        width: u32,
        signed: bool,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    /// Bits `[hi:lo]` of `arg`; result width `hi - lo + 1`.
    Slice {
        arg: Box<Expr>,
        hi: u32,
        lo: u32,
    },
    /// `hi ++ lo`; result width = sum.
    Concat {
        hi: Box<Expr>,
        lo: Box<Expr>,
    },
    /// Change width: truncate, or extend (sign-extend if `signed` = the source is signed).
    Cast {
        arg: Box<Expr>,
        width: u32,
        signed: bool,
    },
    /// `cond ? a : b` (only the chosen side is evaluated).
    Cond {
        cond: Box<Expr>,
        then: Box<Expr>,
        else_: Box<Expr>,
        width: u32,
    },
    /// Look at the next `width` bits of the packet without consuming them (parser only).
    /// Fails with PacketTooShort if not enough bits remain.
    Lookahead {
        width: u32,
    },
    /// Number of bytes of the packet as received (`packet_in.length()`).
    PacketLength,
}

impl Expr {
    #[inline]
    pub fn width(&self) -> u32 {
        match self {
            Expr::Const(v) => v.width,
            Expr::Small { width, .. } => *width,
            Expr::Load(LValue::Static(l)) => l.width,
            Expr::Load(LValue::Dynamic { base, .. }) => base.width,
            Expr::Unary { width, .. } | Expr::Binary { width, .. } | Expr::Cond { width, .. } => *width,
            Expr::Slice { hi, lo, .. } => hi - lo + 1,
            Expr::Concat { hi, lo } => hi.width() + lo.width(),
            Expr::Cast { width, .. } => *width,
            Expr::Lookahead { width } => *width,
            Expr::PacketLength => 32,
        }
    }
    pub fn konst(width: u32, v: u64) -> Expr {
        Expr::Const(Value::new(width, v))
    }
}

/// A header instance's layout in the slot array.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeaderLayout {
    /// Dotted path for traces, e.g. `hdr.ipv4` or `hdr.stack[2]`.
    pub name: String,
    /// Validity bit (width 1).
    pub valid: Loc,
    /// Fields in declaration (= wire) order. A varbit field has `varbit_max` set and its current length
    /// in `varbit_len` (a 32-bit location, bits); its value is stored right-aligned in `max`-bit storage.
    pub fields: Vec<FieldLayout>,
    /// Sum of the fixed field widths plus the varbit maximum.
    pub max_bits: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FieldLayout {
    pub name: String,
    pub loc: Loc,
    pub varbit_len: Option<Loc>,
}

/// Which header a header operation acts on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum HeaderRef {
    /// Index into `Program::headers`.
    Static(u32),
    /// Element `index` of a header stack (index into `Program::stacks`); out of bounds → the operation
    /// fails with StackOutOfBounds in the parser and is ignored in controls.
    Dynamic { stack: u32, index: Box<Expr> },
    /// `stack.next` in a parser: the element at the stack's next index, which is incremented after a
    /// successful extract. Out of bounds → StackOutOfBounds.
    Next { stack: u32 },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StackLayout {
    pub name: String,
    /// Header indices of the elements, in order (`Program::headers`); all have the same layout shape, and
    /// element i's slots are `elements[0]`'s slots + i * `stride`.
    pub elements: Vec<u32>,
    pub stride: u32,
    /// The 32-bit `nextIndex` location.
    pub next_index: Loc,
}

/// v1model / engine built-in operations (fast paths; everything else goes through registered externs).
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
    /// `verify_checksum[_with_payload](cond, data, field, algo)`: if cond and mismatch → checksum_error = 1.
    VerifyChecksum {
        cond: Expr,
        data: Vec<Expr>,
        field: Expr,
        algo: HashAlgo,
        with_payload: bool,
    },
    /// `update_checksum[_with_payload](cond, data, field, algo)`: if cond → field = H(data [+ payload]).
    UpdateChecksum {
        cond: Expr,
        data: Vec<Expr>,
        dst: LValue,
        algo: HashAlgo,
        with_payload: bool,
    },
    /// Register read/write on register instance `reg` (index into `Program::registers`). Out-of-range index:
    /// read gives 0, write is ignored.
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
    /// `digest(receiver, data)`: the fields of digest type `digest` (index into `Program::digests`).
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
    /// `assert(cond)` / `assume(cond)`: when false, the packet is dropped and the failure is counted.
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

/// An argument to a registered extern method. `In` values are evaluated before the call; `Out`/`InOut`
/// locations are written after the call. A header/struct argument is a list of scalars concatenated
/// (most significant first), with their locations for write-back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExternArg {
    pub dir: Direction,
    /// Total width of the bit string passed.
    pub width: u32,
    /// For `In`: the expressions whose concatenation is the value. For `Out`/`InOut`: loads of `dsts`.
    pub parts: Vec<Expr>,
    /// For `Out`/`InOut`: the locations the result is split back into (same order and widths as `parts`).
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
    /// Set a header valid or invalid. (Union siblings are handled by the front end with extra statements.)
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
    /// Leave the current control (or parser → accept is NOT implied: `exit` in a parser is an error).
    Exit,
    /// Apply table `table`. If `hit` is given, it receives 1 on hit; `action_run` receives the index
    /// (into `Program::actions`) of the action that ran.
    ApplyTable {
        table: u32,
        hit: Option<Loc>,
        action_run: Option<Loc>,
    },
    /// Run action `action` with arguments assigned to its parameter locations (used for direct calls of
    /// actions that are not inlined; the front end normally inlines).
    CallAction {
        action: u32,
        args: Vec<Expr>,
    },
    /// Parser: extract the next `max_bits` (fixed part) of the packet into `hdr` and make it valid; for a
    /// header with a varbit field, `varbit_bits` gives the length of the varbit field in bits.
    Extract {
        hdr: HeaderRef,
        varbit_bits: Option<Expr>,
    },
    /// Parser: skip `bits` bits (must be a multiple of 8 at run time in bmv2; else ParserInvalidArgument).
    Advance {
        bits: Expr,
    },
    /// Deparser: append the header's bytes to the output if it is valid.
    Emit {
        hdr: HeaderRef,
    },
    Builtin(Builtin),
    /// A registered extern method call (`Program::externs[inst]`, method index `method` as resolved by
    /// the engine from `Program::externs[inst].methods[method]`).
    ExternCall {
        inst: u32,
        method: u32,
        args: Vec<ExternArg>,
        ret: Option<LValue>,
    },
}

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
    /// Matches if the value is in value set `Program::value_sets[id]` (installed by the control plane). A
    /// value set of several elements (struct or tuple type) stands for the whole keyset of a select with as
    /// many keys: it sits at the first key and the other keys' matches are `Any`; a member matches when each
    /// of its fields matches the key at the same position.
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
    /// (earlier = larger) or from their `@priority`/`priority =` annotation, converted to this convention.
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
    /// v1model `support_timeout = true`: entries may have an idle timeout (P4Info `idle_timeout_behavior:
    /// NOTIFY_CONTROL`), and hits record when they happened.
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
    /// Control-plane names of the elements: the field names of a struct value set (`@name` honoured),
    /// empty for `bit<W>` and tuple value sets.
    #[serde(default)]
    pub names: Vec<String>,
    /// Match kind of each element (P4Info `match_type`): `@match(ternary)` etc. on a struct field, exact
    /// otherwise. Empty means all exact.
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

/// Locations of the `standard_metadata` fields the architecture reads and writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StdMeta {
    pub ingress_port: Loc,
    pub egress_spec: Loc,
    pub egress_port: Loc,
    pub instance_type: Loc,
    pub packet_length: Loc,
    pub enq_timestamp: Loc,
    pub enq_qdepth: Loc,
    pub deq_timedelta: Loc,
    pub deq_qdepth: Loc,
    pub ingress_global_timestamp: Loc,
    pub egress_global_timestamp: Loc,
    pub mcast_grp: Loc,
    pub egress_rid: Loc,
    pub checksum_error: Loc,
    pub parser_error: Loc,
    pub priority: Loc,
    /// The whole standard_metadata struct: `[first, first + words)`.
    pub first: u32,
    pub words: u32,
}

/// A `@field_list(n)` of user metadata fields preserved across clone/resubmit/recirculate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FieldList {
    pub id: u32,
    pub fields: Vec<Loc>,
}

/// A `@controller_header("packet_in"/"packet_out")` header for the CPU port.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ControllerHeader {
    pub name: String,
    pub id: u32,
    /// (name, id, width) of each field.
    pub fields: Vec<(String, u32, u32)>,
}

/// A whole compiled v1model program.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Program {
    /// Format version of this file.
    pub format: u32,
    pub source: String,
    /// Number of u64 words of per-packet state.
    pub slots: u32,
    /// Initial values of the slot array (all zero except constants the front end placed there);
    /// empty means all zero.
    pub initial: Vec<(u32, u64)>,
    pub headers: Vec<HeaderLayout>,
    pub stacks: Vec<StackLayout>,
    /// Names of `error` values; the value of an error is its index here (NoError = 0).
    pub errors: Vec<String>,
    pub std_meta: StdMeta,
    pub parser: Parser,
    pub verify_checksum: Control,
    pub ingress: Control,
    pub egress: Control,
    pub compute_checksum: Control,
    pub deparser: Control,
    pub actions: Vec<Action>,
    pub tables: Vec<Table>,
    pub action_profiles: Vec<ActionProfile>,
    pub registers: Vec<Register>,
    pub counters: Vec<Counter>,
    pub direct_counters: Vec<Counter>,
    pub meters: Vec<Meter>,
    pub direct_meters: Vec<Meter>,
    pub value_sets: Vec<ValueSet>,
    pub digests: Vec<Digest>,
    pub externs: Vec<ExternInstance>,
    pub field_lists: Vec<FieldList>,
    pub controller_headers: Vec<ControllerHeader>,
    /// What only the P4Info needs: annotations, documentation and type information.
    #[serde(default)]
    pub p4info: p4info_meta::P4InfoMeta,
}

/// Error codes of the core `error` type, by name (their index in `Program::errors` is their value).
pub const CORE_ERRORS: [&str; 7] = ["NoError", "PacketTooShort", "NoMatch", "StackOutOfBounds", "HeaderTooShort", "ParserTimeout", "ParserInvalidArgument"];

impl Program {
    pub fn error_code(&self, name: &str) -> Option<u32> {
        self.errors.iter().position(|e| e == name).map(|i| i as u32)
    }
    /// Rewrite the program into the engine's fast forms (constants of ≤ 64 bits as `Expr::Small`).
    pub fn optimize(&mut self) {
        fn ex(e: &mut Expr) {
            match e {
                Expr::Const(v) if v.width <= 64 => *e = Expr::Small { value: v.as_u64(), width: v.width },
                Expr::Load(LValue::Dynamic { index, .. }) => ex(index),
                Expr::Unary { arg, .. } | Expr::Slice { arg, .. } | Expr::Cast { arg, .. } => ex(arg),
                Expr::Binary { lhs, rhs, .. } => {
                    ex(lhs);
                    ex(rhs);
                }
                Expr::Concat { hi, lo } => {
                    ex(hi);
                    ex(lo);
                }
                Expr::Cond { cond, then, else_, .. } => {
                    ex(cond);
                    ex(then);
                    ex(else_);
                }
                _ => {}
            }
        }
        fn lv(l: &mut LValue) {
            if let LValue::Dynamic { index, .. } = l {
                ex(index);
            }
        }
        fn hr(h: &mut HeaderRef) {
            if let HeaderRef::Dynamic { index, .. } = h {
                ex(index);
            }
        }
        fn st(s: &mut Stmt) {
            match s {
                Stmt::Assign { dst, src } => {
                    lv(dst);
                    ex(src);
                }
                Stmt::SetValid { hdr, .. } => hr(hdr),
                Stmt::CopyHeader { dst, src } => {
                    hr(dst);
                    hr(src);
                }
                Stmt::If { cond, then, else_ } => {
                    ex(cond);
                    then.iter_mut().for_each(st);
                    else_.iter_mut().for_each(st);
                }
                Stmt::Switch { expr, cases, default } => {
                    ex(expr);
                    cases.iter_mut().for_each(|(_, b)| b.iter_mut().for_each(st));
                    default.iter_mut().for_each(st);
                }
                Stmt::Block { body, .. } => body.iter_mut().for_each(st),
                Stmt::CallAction { args, .. } => args.iter_mut().for_each(ex),
                Stmt::Extract { hdr, varbit_bits } => {
                    hr(hdr);
                    if let Some(e) = varbit_bits {
                        ex(e);
                    }
                }
                Stmt::Advance { bits } => ex(bits),
                Stmt::Emit { hdr } => hr(hdr),
                Stmt::Builtin(b) => match b {
                    Builtin::Verify { cond, .. } | Builtin::Assert { cond } => ex(cond),
                    Builtin::Hash { dst, base, data, max, .. } => {
                        lv(dst);
                        ex(base);
                        ex(max);
                        data.iter_mut().for_each(ex);
                    }
                    Builtin::VerifyChecksum { cond, data, field, .. } => {
                        ex(cond);
                        ex(field);
                        data.iter_mut().for_each(ex);
                    }
                    Builtin::UpdateChecksum { cond, data, dst, .. } => {
                        ex(cond);
                        lv(dst);
                        data.iter_mut().for_each(ex);
                    }
                    Builtin::RegisterRead { dst, index, .. } => {
                        lv(dst);
                        ex(index);
                    }
                    Builtin::RegisterWrite { index, value, .. } => {
                        ex(index);
                        ex(value);
                    }
                    Builtin::CounterCount { index, .. } => ex(index),
                    Builtin::MeterExecute { index, dst, .. } => {
                        ex(index);
                        lv(dst);
                    }
                    Builtin::Clone { session, .. } => ex(session),
                    Builtin::Truncate { length } => ex(length),
                    Builtin::Random { dst, lo, hi } => {
                        lv(dst);
                        ex(lo);
                        ex(hi);
                    }
                    _ => {}
                },
                Stmt::ExternCall { args, .. } => args.iter_mut().for_each(|a| {
                    a.parts.iter_mut().for_each(ex);
                    a.dsts.iter_mut().for_each(lv);
                }),
                _ => {}
            }
        }
        /// Does `label` appear as a `Break` target anywhere in `body`?
        fn breaks_to(body: &[Stmt], label: u32) -> bool {
            body.iter().any(|s| match s {
                Stmt::Break(l) => *l == label,
                Stmt::If { then, else_, .. } => breaks_to(then, label) || breaks_to(else_, label),
                Stmt::Switch { cases, default, .. } => cases.iter().any(|(_, b)| breaks_to(b, label)) || breaks_to(default, label),
                Stmt::Block { body, .. } => breaks_to(body, label),
                _ => false,
            })
        }
        /// Splice labelled blocks that nothing breaks out of into the enclosing list.
        fn flatten(body: &mut Vec<Stmt>) {
            let mut out = Vec::with_capacity(body.len());
            for mut s in body.drain(..) {
                match &mut s {
                    Stmt::If { then, else_, .. } => {
                        flatten(then);
                        flatten(else_);
                    }
                    Stmt::Switch { cases, default, .. } => {
                        cases.iter_mut().for_each(|(_, b)| flatten(b));
                        flatten(default);
                    }
                    Stmt::Block { label, body } => {
                        flatten(body);
                        if !breaks_to(body, *label) {
                            out.append(body);
                            continue;
                        }
                    }
                    _ => {}
                }
                out.push(s);
            }
            *body = out;
        }
        for s in self.parser.states.iter_mut() {
            flatten(&mut s.body);
        }
        // start directly in the first state that does something (the entry state is often a bare goto)
        let mut hops = 0;
        while let Some(ParserState { body, transition: Transition::Goto(Next::State(n)), .. }) = self.parser.states.get(self.parser.start as usize) {
            if !body.is_empty() || hops > self.parser.states.len() {
                break;
            }
            self.parser.start = *n;
            hops += 1;
        }
        for c in [&mut self.verify_checksum, &mut self.ingress, &mut self.egress, &mut self.compute_checksum, &mut self.deparser] {
            flatten(&mut c.body);
        }
        for a in self.actions.iter_mut() {
            flatten(&mut a.body);
        }
        for s in self.parser.states.iter_mut() {
            s.body.iter_mut().for_each(st);
            if let Transition::Select { keys, .. } = &mut s.transition {
                keys.iter_mut().for_each(ex);
            }
        }
        for c in [&mut self.verify_checksum, &mut self.ingress, &mut self.egress, &mut self.compute_checksum, &mut self.deparser] {
            c.body.iter_mut().for_each(st);
        }
        for a in self.actions.iter_mut() {
            a.body.iter_mut().for_each(st);
        }
        for t in self.tables.iter_mut() {
            t.keys.iter_mut().for_each(|k| ex(&mut k.expr));
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("IR serializes")
    }
    /// Read a program file (the JSON `to_json` writes), whatever its nesting depth up to [`MAX_JSON_DEPTH`]:
    /// serde_json's default recursion limit (128 levels, about 60 nested expressions) is lifted, and the
    /// recursive descent runs on a thread with a stack sized for that depth ([`LOAD_STACK`]). A deeper file is
    /// refused before it is parsed, with the byte offset where it gets too deep.
    pub fn from_json(s: &str) -> Result<Program, String> {
        if let Some(at) = json_too_deep(s.as_bytes(), MAX_JSON_DEPTH) {
            return Err(format!("not a p4sec program file: nested more than {MAX_JSON_DEPTH} levels deep at byte {at}"));
        }
        let parse = || {
            let mut de = serde_json::Deserializer::from_str(s);
            de.disable_recursion_limit();
            let p = <Program as serde::Deserialize>::deserialize(&mut de).and_then(|p| de.end().map(|_| p));
            p.map_err(|e| format!("not a p4sec program file: {e}"))
        };
        std::thread::scope(|sc| match std::thread::Builder::new().name("p4sec-load".into()).stack_size(LOAD_STACK).spawn_scoped(sc, parse) {
            Ok(h) => h.join().unwrap_or_else(|_| Err("not a p4sec program file: the reader failed".into())),
            // no thread to be had: read on this one (the depth check still bounds the recursion)
            Err(_) => parse(),
        })
    }
}

/// The deepest JSON nesting (objects and arrays) a program file may have: room for expressions and statements
/// nested [`MAX_NESTING`] levels deep (an expression level is two JSON levels, `{"Binary": {"lhs": ...`).
pub const MAX_JSON_DEPTH: usize = 4 * MAX_NESTING + 256;

/// The deepest nesting of expressions (and of statements) the front end compiles; the engine and the loader
/// handle programs up to it on an ordinary thread's stack.
pub const MAX_NESTING: usize = 512;

/// The stack of the thread that reads a program file: enough for [`MAX_JSON_DEPTH`] levels of recursive descent.
pub const LOAD_STACK: usize = 256 << 20;

/// The byte offset where `text` first nests deeper than `limit` (objects and arrays, outside strings), if it
/// does. A single pass without recursion, so any input is checked in constant stack space.
pub fn json_too_deep(text: &[u8], limit: usize) -> Option<usize> {
    let (mut depth, mut in_str, mut esc) = (0usize, false, false);
    for (i, &b) in text.iter().enumerate() {
        if in_str {
            if esc {
                esc = false;
            } else if b == b'\\' {
                esc = true;
            } else if b == b'"' {
                in_str = false;
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > limit {
                    return Some(i);
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// Which of the traffic manager's `standard_metadata` fields a program refers to (reads, or writes: a write
/// is counted as a use, which errs on the safe side).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TmFieldUse {
    /// `ingress_global_timestamp`, `egress_global_timestamp`, `enq_timestamp` or `deq_timedelta`: the clock
    /// must be read for every packet.
    pub clock: bool,
    /// `enq_qdepth`, `deq_qdepth`, `enq_timestamp` or `deq_timedelta`: the queue's state is looked at.
    pub queue: bool,
}

impl Program {
    /// Which traffic-manager fields of `standard_metadata` the program's code (parser, controls, actions,
    /// tables, extern arguments, digests, field lists) refers to. Every location in the program other than
    /// the `std_meta` table itself is looked at, so a field passed whole to an extern or copied as part of a
    /// struct counts too.
    pub fn tm_field_use(&self) -> TmFieldUse {
        let sm = &self.std_meta;
        let slot_of = |l: Loc| (l.width > 0).then_some(l.slot as u64);
        let clock_fields: Vec<u64> =
            [sm.ingress_global_timestamp, sm.egress_global_timestamp, sm.enq_timestamp, sm.deq_timedelta].into_iter().filter_map(slot_of).collect();
        let queue_fields: Vec<u64> = [sm.enq_qdepth, sm.deq_qdepth, sm.enq_timestamp, sm.deq_timedelta].into_iter().filter_map(slot_of).collect();
        let mut used = TmFieldUse::default();
        if clock_fields.is_empty() && queue_fields.is_empty() {
            return used;
        }
        let Ok(serde_json::Value::Object(mut all)) = serde_json::to_value(self) else {
            // (cannot happen: the program is plain data) every field counts as used
            return TmFieldUse { clock: true, queue: true };
        };
        for k in ["std_meta", "initial", "headers", "stacks", "p4info", "source", "errors"] {
            all.remove(k);
        }
        fn walk(v: &serde_json::Value, f: &mut impl FnMut(u64, u64)) {
            match v {
                serde_json::Value::Object(m) => {
                    if m.len() == 2 {
                        if let (Some(s), Some(w)) = (m.get("slot").and_then(|x| x.as_u64()), m.get("width").and_then(|x| x.as_u64())) {
                            f(s, w);
                            return;
                        }
                    }
                    m.values().for_each(|x| walk(x, f));
                }
                serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, f)),
                _ => {}
            }
        }
        walk(&serde_json::Value::Object(all), &mut |slot, width| {
            let end = slot + words_for(width as u32) as u64;
            let hit = |fields: &[u64]| fields.iter().any(|&s| s >= slot && s < end);
            used.clock |= hit(&clock_fields);
            used.queue |= hit(&queue_fields);
        });
        used
    }
}
