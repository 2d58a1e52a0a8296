//! Semantic types of P4_16 and compile-time constants.

use num_bigint::BigInt;
use num_traits::{One, Signed, ToPrimitive, Zero};
use std::fmt;
use std::rc::Rc;

/// A struct, header or header union type with its fields resolved.
#[derive(Debug)]
pub struct AggInfo {
    pub name: String,
    pub kind: crate::ast::AggregateKind,
    pub fields: Vec<FieldInfo>,
}

#[derive(Debug, Clone)]
pub struct FieldInfo {
    pub name: String,
    pub ty: Ty,
    /// `@field_list(n, ...)` annotation ids.
    pub field_lists: Vec<u32>,
    /// `@match(kind)` (struct fields of value sets: the field's P4Runtime match kind).
    pub match_kind: Option<String>,
    /// `@name("...")`: the field's control-plane name.
    pub cp_name: Option<String>,
    /// The field's declared type when it is a new type (`type bit<W> T`): its P4Info `type_name`.
    pub new_type: Option<String>,
}

#[derive(Debug)]
pub struct EnumInfo {
    pub name: String,
    /// Underlying type for serializable enums.
    pub repr: Option<Ty>,
    /// Member names and values (index for plain enums).
    pub members: Vec<(String, BigInt)>,
}

#[derive(Debug)]
pub struct ExternInfo {
    pub decl: Rc<crate::ast::ExternDecl>,
}

#[derive(Clone, Debug)]
pub enum Ty {
    Bool,
    /// `bit<W>`.
    Bit(u32),
    /// `int<W>`.
    Int(u32),
    /// Arbitrary-precision compile-time `int`.
    InfInt,
    Varbit(u32),
    Error,
    MatchKind,
    Str,
    Void,
    Enum(Rc<EnumInfo>),
    Agg(Rc<AggInfo>),
    Stack(Box<Ty>, u32),
    Tuple(Vec<Ty>),
    Extern(Rc<ExternInfo>, Vec<Ty>),
    /// A type variable not yet bound (generic externs/functions).
    Var(String),
    /// `_` / unknown: accepts anything (used for generic externs of the architecture).
    Any,
    /// A `typedef`-independent new type (`type bit<9> PortId_t`): behaves like the inner type.
    PacketIn,
    PacketOut,
}

impl Ty {
    /// Width in bits of a scalar type stored in slots (bool = 1, enum/error = 32).
    pub fn scalar_width(&self) -> Option<u32> {
        match self {
            Ty::Bool => Some(1),
            Ty::Bit(w) | Ty::Int(w) => Some(*w),
            Ty::Error | Ty::MatchKind => Some(32),
            Ty::Enum(e) => match &e.repr {
                Some(r) => r.scalar_width(),
                None => Some(32),
            },
            _ => None,
        }
    }
    pub fn is_signed(&self) -> bool {
        match self {
            Ty::Int(_) => true,
            Ty::Enum(e) => e.repr.as_ref().map(|r| r.is_signed()).unwrap_or(false),
            _ => false,
        }
    }
    pub fn is_scalar(&self) -> bool {
        self.scalar_width().is_some()
    }
    /// True if a header may have a field of this type: `bit<W>`, `int<W>`, `varbit<W>`, `bool`, a
    /// serializable enum, or a struct whose fields are all of such types except varbit (structs of
    /// structs included), as the P4_16 spec allows. A struct field is stored flattened, its leaves
    /// in declaration (= wire) order.
    pub fn fits_in_header(&self) -> bool {
        match self {
            Ty::Bit(_) | Ty::Int(_) | Ty::Varbit(_) | Ty::Bool => true,
            Ty::Enum(e) => e.repr.is_some(),
            Ty::Agg(a) => {
                a.kind == crate::ast::AggregateKind::Struct
                    && a.fields
                        .iter()
                        .all(|f| !matches!(f.ty, Ty::Varbit(_)) && f.ty.fits_in_header())
            }
            Ty::Stack(e, _) => {
                !e.is_header()
                    && !e.is_union()
                    && !matches!(**e, Ty::Varbit(_))
                    && e.fits_in_header()
            }
            _ => false,
        }
    }
    /// True if a generic array (`T[N]`, P4_16 1.2.5) may have elements of this type besides headers
    /// and unions: bit-strings, integers, bools, enums, errors, structs and arrays.
    pub fn is_array_element(&self) -> bool {
        match self {
            Ty::Bit(_) | Ty::Int(_) | Ty::Bool | Ty::Enum(_) | Ty::Error => true,
            Ty::Agg(a) => a.kind == crate::ast::AggregateKind::Struct,
            Ty::Stack(..) => true,
            _ => false,
        }
    }
    /// True if a value of this type contains a header or header union (a struct with a header
    /// field, a stack, ...).
    pub fn holds_header(&self) -> bool {
        match self {
            Ty::Agg(a) => {
                a.kind != crate::ast::AggregateKind::Struct
                    || a.fields.iter().any(|f| f.ty.holds_header())
            }
            Ty::Stack(e, _) => e.holds_header(),
            Ty::Tuple(ts) => ts.iter().any(|t| t.holds_header()),
            _ => false,
        }
    }
    /// True for a stack of headers or header unions (which has `next`, `push_front`, ... ); false
    /// for a generic array of other elements.
    pub fn is_header_stack(&self) -> bool {
        matches!(self, Ty::Stack(e, _) if e.is_header() || e.is_union())
    }
    pub fn is_header(&self) -> bool {
        matches!(self, Ty::Agg(a) if a.kind == crate::ast::AggregateKind::Header)
    }
    pub fn is_union(&self) -> bool {
        matches!(self, Ty::Agg(a) if a.kind == crate::ast::AggregateKind::HeaderUnion)
    }
    pub fn is_struct(&self) -> bool {
        matches!(self, Ty::Agg(a) if a.kind == crate::ast::AggregateKind::Struct)
    }
    /// Total bit width when serialized (headers, structs of bits), for `minSizeInBits` and hashing.
    pub fn bit_size(&self) -> u32 {
        match self {
            Ty::Agg(a) => a.fields.iter().map(|f| f.ty.bit_size()).sum(),
            Ty::Stack(e, n) => e.bit_size() * n,
            Ty::Varbit(_) => 0,
            Ty::Tuple(ts) => ts.iter().map(|t| t.bit_size()).sum(),
            t => t.scalar_width().unwrap_or(0),
        }
    }
    pub fn same(&self, other: &Ty) -> bool {
        match (self, other) {
            (Ty::Bool, Ty::Bool)
            | (Ty::InfInt, Ty::InfInt)
            | (Ty::Error, Ty::Error)
            | (Ty::Str, Ty::Str) => true,
            (Ty::Bit(a), Ty::Bit(b))
            | (Ty::Int(a), Ty::Int(b))
            | (Ty::Varbit(a), Ty::Varbit(b)) => a == b,
            (Ty::Enum(a), Ty::Enum(b)) => Rc::ptr_eq(a, b),
            (Ty::Agg(a), Ty::Agg(b)) => {
                Rc::ptr_eq(a, b) || (a.name == b.name && a.fields.len() == b.fields.len())
            }
            (Ty::Stack(a, n), Ty::Stack(b, m)) => n == m && a.same(b),
            (Ty::Tuple(a), Ty::Tuple(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same(y))
            }
            (Ty::Any, _) | (_, Ty::Any) => true,
            _ => false,
        }
    }
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ty::Bool => write!(f, "bool"),
            Ty::Bit(w) => write!(f, "bit<{w}>"),
            Ty::Int(w) => write!(f, "int<{w}>"),
            Ty::InfInt => write!(f, "int"),
            Ty::Varbit(w) => write!(f, "varbit<{w}>"),
            Ty::Error => write!(f, "error"),
            Ty::MatchKind => write!(f, "match_kind"),
            Ty::Str => write!(f, "string"),
            Ty::Void => write!(f, "void"),
            Ty::Enum(e) => write!(f, "{}", e.name),
            Ty::Agg(a) => write!(f, "{}", a.name),
            Ty::Stack(e, n) => write!(f, "{e}[{n}]"),
            Ty::Tuple(ts) => {
                write!(f, "tuple<")?;
                for (i, t) in ts.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{t}")?;
                }
                write!(f, ">")
            }
            Ty::Extern(e, _) => write!(f, "{}", e.decl.name.name),
            Ty::Var(v) => write!(f, "{v}"),
            Ty::Any => write!(f, "_"),
            Ty::PacketIn => write!(f, "packet_in"),
            Ty::PacketOut => write!(f, "packet_out"),
        }
    }
}

/// Reduce `v` to the value range of a `width`-bit unsigned field (two's complement for negatives).
pub fn wrap_unsigned(v: &BigInt, width: u32) -> BigInt {
    let m = BigInt::one() << width;
    let r = v % &m;
    if r.is_negative() {
        r + m
    } else {
        r
    }
}

/// Interpret the low `width` bits of `v` as a signed value.
pub fn wrap_signed(v: &BigInt, width: u32) -> BigInt {
    if width == 0 {
        return BigInt::zero();
    }
    let u = wrap_unsigned(v, width);
    let half = BigInt::one() << (width - 1);
    if u >= half {
        u - (BigInt::one() << width)
    } else {
        u
    }
}

/// Normalize a constant to its type's range.
pub fn normalize(v: &BigInt, ty: &Ty) -> BigInt {
    match ty {
        Ty::Bit(w) => wrap_unsigned(v, *w),
        Ty::Int(w) => wrap_signed(v, *w),
        Ty::Bool => {
            if v.is_zero() {
                BigInt::zero()
            } else {
                BigInt::one()
            }
        }
        Ty::Enum(e) => match &e.repr {
            Some(r) => normalize(v, r),
            None => v.clone(),
        },
        _ => v.clone(),
    }
}

/// The words (least significant first) of the `width`-bit two's complement pattern of `v`.
pub fn to_words(v: &BigInt, width: u32) -> Vec<u64> {
    let u = wrap_unsigned(v, width.max(1));
    let n = p4sec_ir::words_for(width) as usize;
    let mut digits = u.to_u64_digits().1;
    digits.resize(n, 0);
    digits.truncate(n);
    digits
}

pub fn to_value(v: &BigInt, width: u32) -> p4sec_ir::Value {
    p4sec_ir::Value {
        width,
        words: to_words(v, width),
    }
}

pub fn to_u64(v: &BigInt) -> Option<u64> {
    v.to_u64()
}
