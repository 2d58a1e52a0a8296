//! Storage locations, constants and expressions: [`Loc`], [`LValue`], [`Value`], [`Expr`] and their
//! operators.

use serde::{Deserialize, Serialize};

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
    Dynamic {
        base: Loc,
        stride: u32,
        count: u32,
        index: Box<Expr>,
    },
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
        words[0] = if width >= 64 {
            v
        } else {
            v & ((1u64 << width) - 1)
        };
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
    /// A constant of at most 64 bits (the engine's fast form of `Const`; see
    /// [`Program::optimize`]).
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
            Expr::Unary { width, .. } | Expr::Binary { width, .. } | Expr::Cond { width, .. } => {
                *width
            }
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
