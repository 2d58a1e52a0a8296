//! The abstract syntax tree of a P4_16 program, as the parser produces it (before name resolution
//! and type checking). Every node carries a [`Span`] into the preprocessed text, which the source
//! map turns back into file, line and column.

use num_bigint::BigInt;

/// Byte offsets `[lo, hi)` into the preprocessed source text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    pub lo: u32,
    pub hi: u32,
}

impl Span {
    pub fn new(lo: u32, hi: u32) -> Self {
        Span { lo, hi }
    }
    pub fn to(self, other: Span) -> Span {
        Span {
            lo: self.lo.min(other.lo),
            hi: self.hi.max(other.hi),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

/// A P4 annotation such as `@name("x")`, `@priority(3)`, `@field_list(1)`.
#[derive(Clone, Debug)]
pub struct Annotation {
    pub name: Ident,
    pub body: AnnotationBody,
    /// The body's tokens as written, separated by single spaces (how the reference compiler writes
    /// an annotation into the P4Info); empty for `@name` alone and for structured annotations.
    pub text: String,
}

#[derive(Clone, Debug)]
pub enum AnnotationBody {
    /// `@name` with no parentheses.
    Empty,
    /// `@name(e1, e2, ...)` where the body parsed as expressions.
    Exprs(Vec<Expr>),
    /// `@name[k=v, ...]` structured key-value annotation.
    KeyValues(Vec<(Ident, Expr)>),
    /// `@name[e1, e2, ...]` structured expression-list annotation.
    ExprList(Vec<Expr>),
    /// Anything else: the raw token text between the parentheses.
    Raw(String),
}

pub type Annotations = Vec<Annotation>;

#[derive(Clone, Debug, Default)]
pub struct Program {
    pub decls: Vec<Decl>,
}

#[derive(Clone, Debug)]
pub enum Decl {
    Const(ConstDecl),
    Var(VarDecl),
    /// `header`, `header_union` or `struct`.
    Aggregate(AggregateDecl),
    Enum(EnumDecl),
    /// `error { ... }` (may appear several times; members are merged).
    Error(Vec<Ident>),
    MatchKind(Vec<Ident>),
    Typedef(TypedefDecl),
    Extern(ExternDecl),
    ExternFunction(FunctionProto),
    Function(FunctionDecl),
    Action(ActionDecl),
    Parser(ParserDecl),
    Control(ControlDecl),
    /// `parser P(...);`, `control C(...);` or `package Pkg(...);` type declarations.
    BlockType(BlockTypeDecl),
    Instantiation(Instantiation),
    Table(TableDecl),
    ValueSet(ValueSetDecl),
}

#[derive(Clone, Debug)]
pub struct ConstDecl {
    pub annos: Annotations,
    pub ty: Type,
    pub name: Ident,
    pub value: Expr,
}

#[derive(Clone, Debug)]
pub struct VarDecl {
    pub annos: Annotations,
    pub ty: Type,
    pub name: Ident,
    pub init: Option<Expr>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggregateKind {
    Header,
    HeaderUnion,
    Struct,
}

#[derive(Clone, Debug)]
pub struct Field {
    pub annos: Annotations,
    pub ty: Type,
    pub name: Ident,
}

#[derive(Clone, Debug)]
pub struct AggregateDecl {
    pub annos: Annotations,
    pub kind: AggregateKind,
    pub name: Ident,
    /// Generic structs/headers (`struct S<T> { ... }`).
    pub type_params: Vec<Ident>,
    pub fields: Vec<Field>,
}

#[derive(Clone, Debug)]
pub struct EnumDecl {
    pub annos: Annotations,
    pub name: Ident,
    /// `enum bit<8> E { A = 1, ... }`: the underlying type of a serializable enum.
    pub repr: Option<Type>,
    pub members: Vec<(Ident, Option<Expr>)>,
}

#[derive(Clone, Debug)]
pub struct TypedefDecl {
    pub annos: Annotations,
    /// `type X Y;` (a new type) rather than `typedef X Y;`.
    pub is_newtype: bool,
    pub ty: Type,
    pub name: Ident,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    In,
    Out,
    InOut,
}

#[derive(Clone, Debug)]
pub struct Param {
    pub annos: Annotations,
    pub dir: Option<Direction>,
    pub ty: Type,
    pub name: Ident,
    pub default: Option<Expr>,
}

#[derive(Clone, Debug)]
pub struct FunctionProto {
    pub annos: Annotations,
    pub ret: Type,
    pub name: Ident,
    pub type_params: Vec<Ident>,
    pub params: Vec<Param>,
}

#[derive(Clone, Debug)]
pub enum ExternMember {
    Constructor {
        annos: Annotations,
        name: Ident,
        params: Vec<Param>,
    },
    Method {
        proto: FunctionProto,
        is_abstract: bool,
    },
}

#[derive(Clone, Debug)]
pub struct ExternDecl {
    pub annos: Annotations,
    pub name: Ident,
    pub type_params: Vec<Ident>,
    pub members: Vec<ExternMember>,
}

#[derive(Clone, Debug)]
pub struct FunctionDecl {
    pub proto: FunctionProto,
    pub body: Block,
}

#[derive(Clone, Debug)]
pub struct ActionDecl {
    pub annos: Annotations,
    pub name: Ident,
    pub params: Vec<Param>,
    pub body: Block,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockKind {
    Parser,
    Control,
    Package,
}

/// The signature shared by parser/control declarations and parser/control/package type
/// declarations.
#[derive(Clone, Debug)]
pub struct BlockTypeDecl {
    pub annos: Annotations,
    pub kind: BlockKind,
    pub name: Ident,
    pub type_params: Vec<Ident>,
    pub params: Vec<Param>,
}

#[derive(Clone, Debug)]
pub struct ParserDecl {
    pub sig: BlockTypeDecl,
    pub ctor_params: Vec<Param>,
    /// Constants, variables, instantiations and value sets declared in the parser.
    pub locals: Vec<Decl>,
    pub states: Vec<ParserState>,
}

#[derive(Clone, Debug)]
pub struct ParserState {
    pub annos: Annotations,
    pub name: Ident,
    pub body: Vec<Stmt>,
    pub transition: Option<Transition>,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum Transition {
    /// `transition next;` (also `accept` / `reject`).
    Direct(Ident),
    Select {
        exprs: Vec<Expr>,
        cases: Vec<SelectCase>,
        span: Span,
    },
}

#[derive(Clone, Debug)]
pub struct SelectCase {
    /// A keyset: an expression, `default`, `_`, `a &&& m`, `a .. b`, a tuple `(k1, k2)` as
    /// `ExprKind::List`, or the name of a value set.
    pub keyset: Expr,
    pub next: Ident,
}

#[derive(Clone, Debug)]
pub struct ControlDecl {
    pub sig: BlockTypeDecl,
    pub ctor_params: Vec<Param>,
    /// Constants, variables, instantiations, actions and tables declared in the control.
    pub locals: Vec<Decl>,
    pub apply: Block,
}

#[derive(Clone, Debug)]
pub struct Instantiation {
    pub annos: Annotations,
    pub ty: Type,
    pub args: Vec<Argument>,
    pub name: Ident,
    /// `{ ... }` implementations of abstract methods.
    pub initializer: Vec<Decl>,
}

#[derive(Clone, Debug)]
pub struct ValueSetDecl {
    pub annos: Annotations,
    pub elem: Type,
    pub size: Expr,
    pub name: Ident,
}

#[derive(Clone, Debug)]
pub struct TableDecl {
    pub annos: Annotations,
    pub name: Ident,
    pub props: Vec<TableProp>,
}

#[derive(Clone, Debug)]
pub struct KeyElement {
    pub annos: Annotations,
    pub expr: Expr,
    pub match_kind: Ident,
}

#[derive(Clone, Debug)]
pub struct ActionRef {
    pub annos: Annotations,
    /// A name (possibly `.name`) or a call with (some) arguments bound.
    pub expr: Expr,
}

#[derive(Clone, Debug)]
pub struct TableEntry {
    pub annos: Annotations,
    pub is_const: bool,
    /// Keyset: a single expression or `ExprKind::List` for several keys.
    pub keyset: Expr,
    pub action: Expr,
    /// `priority = N :` before the keyset (P4_16 1.2.2).
    pub priority: Option<Expr>,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum TableProp {
    Key {
        annos: Annotations,
        elements: Vec<KeyElement>,
        span: Span,
    },
    Actions {
        annos: Annotations,
        actions: Vec<ActionRef>,
        span: Span,
    },
    DefaultAction {
        annos: Annotations,
        is_const: bool,
        action: Expr,
        span: Span,
    },
    Entries {
        annos: Annotations,
        is_const: bool,
        entries: Vec<TableEntry>,
        span: Span,
    },
    /// `size`, `implementation`, `counters`, `meters`, `support_timeout`, `largest_priority_wins`,
    /// ...
    Other {
        annos: Annotations,
        is_const: bool,
        name: Ident,
        value: Expr,
    },
}

#[derive(Clone, Debug)]
pub struct Type {
    pub kind: TypeKind,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum TypeKind {
    Bool,
    Error,
    String,
    MatchKind,
    Void,
    /// `int` (arbitrary precision, compile time only).
    Int,
    /// `bit<W>` (also `bit` = `bit<1>`).
    Bit(Box<Expr>),
    /// `int<W>`.
    SignedInt(Box<Expr>),
    Varbit(Box<Expr>),
    /// `_` in a type argument position.
    DontCare,
    /// A named type; `dot` if written `.Name`.
    Named {
        name: Ident,
        dot: bool,
    },
    /// `Name<T1, T2>`.
    Specialized {
        base: Ident,
        args: Vec<Type>,
    },
    /// `T[N]`.
    Stack {
        elem: Box<Type>,
        size: Box<Expr>,
    },
    /// `tuple<T1, T2>`.
    Tuple(Vec<Type>),
    /// `list<T>`.
    List(Box<Type>),
}

#[derive(Clone, Debug)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

/// An integer literal: value, and the width/signedness if written (`8w5`, `4s3`).
#[derive(Clone, Debug)]
pub struct IntLit {
    pub value: BigInt,
    pub width: Option<(u32, bool)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    /// `!`
    Not,
    /// `~`
    BitNot,
    /// `-`
    Neg,
    /// `+`
    Plus,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Mul,
    Div,
    Mod,
    Add,
    Sub,
    /// `|+|`
    AddSat,
    /// `|-|`
    SubSat,
    Shl,
    Shr,
    Le,
    Ge,
    Lt,
    Gt,
    Eq,
    Ne,
    BitAnd,
    BitXor,
    BitOr,
    /// `++`
    Concat,
    /// `&&`
    And,
    /// `||`
    Or,
}

#[derive(Clone, Debug)]
pub struct Argument {
    pub name: Option<Ident>,
    /// `_` is `ExprKind::DontCare`.
    pub value: Expr,
}

#[derive(Clone, Debug)]
pub enum ExprKind {
    Bool(bool),
    Int(IntLit),
    Str(String),
    /// A plain name (`x`, also `error`, `accept`, `this`).
    Name(Ident),
    /// `.x`: a name looked up at top level only.
    DotName(Ident),
    Member(Box<Expr>, Ident),
    Index(Box<Expr>, Box<Expr>),
    /// `e[hi:lo]`.
    Slice(Box<Expr>, Box<Expr>, Box<Expr>),
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Ternary(Box<Expr>, Box<Expr>, Box<Expr>),
    Cast(Type, Box<Expr>),
    Call {
        callee: Box<Expr>,
        type_args: Vec<Type>,
        args: Vec<Argument>,
    },
    /// Constructor call in an expression context: `Type(args)` where Type is specialized,
    /// e.g. `register<bit<8>>(16)` used as an argument. Plain `Name(args)` parses as `Call`.
    Construct {
        ty: Type,
        args: Vec<Argument>,
    },
    /// `{ a, b, c }` (list/tuple/struct/header initializer by position), also a select tuple
    /// keyset.
    List(Vec<Expr>),
    /// `{ a, b, ... }` / `{...}` (P4_16 1.2.5 default initializer): the elements given, the other
    /// fields of the struct or header their default values.
    ListRest(Vec<Expr>),
    /// `{ f1 = e1, f2 = e2 }`; `...` at the end sets `has_rest` (P4 1.2.4 `...`).
    StructInit {
        fields: Vec<(Ident, Expr)>,
        has_rest: bool,
    },
    /// `(Type) { ... }` is a Cast of a List/StructInit; `Type { ... }` is this.
    TypedInit {
        ty: Type,
        fields: Vec<(Ident, Expr)>,
    },
    /// `{#}`: the invalid header / union.
    Invalid,
    /// `a &&& b` (keysets only).
    Mask(Box<Expr>, Box<Expr>),
    /// `a .. b` (keysets only).
    Range(Box<Expr>, Box<Expr>),
    /// `default` (keysets / switch labels).
    Default,
    /// `_`.
    DontCare,
    /// A type used where an expression is expected, e.g. the receiver of a static member
    /// `bit<8>.minSizeInBits` or a type argument to `sizeof`-style builtins.
    Type(Type),
}

#[derive(Clone, Debug)]
pub struct Block {
    pub annos: Annotations,
    pub stmts: Vec<Stmt>,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum SwitchLabel {
    Default,
    Expr(Expr),
}

#[derive(Clone, Debug)]
pub struct SwitchCase {
    pub label: SwitchLabel,
    /// `None` for a fall-through label (`a: b: { ... }`).
    pub body: Option<Block>,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum StmtKind {
    Assign(Expr, Expr),
    /// `a += b` etc. (P4_16 1.2.4 compound assignment).
    OpAssign(BinOp, Expr, Expr),
    /// A method/function call statement; the expression is an `ExprKind::Call`.
    Call(Expr),
    If(Expr, Box<Stmt>, Option<Box<Stmt>>),
    Block(Block),
    Exit,
    Return(Option<Expr>),
    Empty,
    Switch(Expr, Vec<SwitchCase>),
    Var(VarDecl),
    Const(ConstDecl),
    /// An instantiation inside a parser state / control body is not legal, but a local declaration
    /// of other kinds is reported by the checker.
    Decl(Box<Decl>),
    /// `for (init; cond; update) body` (P4_16 1.2.5): `init` declarations/assignments and `update`
    /// assignments/calls, each list comma-separated in the source.
    For {
        init: Vec<Stmt>,
        cond: Option<Expr>,
        update: Vec<Stmt>,
        body: Box<Stmt>,
    },
    /// `for (T x in e) body` / `for (x in e) body`: `e` a range `a .. b` (both ends included) or a
    /// header stack.
    ForIn {
        ty: Option<Type>,
        var: Ident,
        coll: ForInColl,
        body: Box<Stmt>,
    },
    Break,
    Continue,
}

/// What a `for`-in loop runs over.
#[derive(Clone, Debug)]
pub enum ForInColl {
    Range(Expr, Expr),
    Expr(Expr),
}
