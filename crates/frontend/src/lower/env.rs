//! Scopes, bindings, storage places and lowered values.

use crate::ast;
use crate::semantic_types::*;
use num_bigint::BigInt;
use p4sec_ir as ir;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::{Rc, Weak};

/// A lexical scope. Scopes form a chain to the global scope; declarations capture the scope they
/// were declared in (actions capture their control instance's scope), so a scope and its bindings
/// refer to each other: [`Scope::release_all`] breaks those cycles once lowering is over.
pub struct Scope {
    pub parent: Option<Rc<Scope>>,
    pub names: RefCell<HashMap<String, Binding>>,
    /// Every scope of the tree this one belongs to (shared by all of them).
    tree: Rc<RefCell<Vec<Weak<Scope>>>>,
}

impl Scope {
    pub fn root() -> Rc<Scope> {
        let tree = Rc::new(RefCell::new(vec![]));
        let s = Rc::new(Scope {
            parent: None,
            names: RefCell::new(HashMap::new()),
            tree: tree.clone(),
        });
        tree.borrow_mut().push(Rc::downgrade(&s));
        s
    }
    pub fn child(parent: &Rc<Scope>) -> Rc<Scope> {
        let s = Rc::new(Scope {
            parent: Some(parent.clone()),
            names: RefCell::new(HashMap::new()),
            tree: parent.tree.clone(),
        });
        parent.tree.borrow_mut().push(Rc::downgrade(&s));
        s
    }
    /// Empties every scope of this one's tree: the bindings that hold scopes go, so the tree is
    /// freed when the last outside reference to it goes (without this, each lowering leaked its
    /// scopes through the cycles between scopes and the declarations that capture them).
    pub fn release_all(&self) {
        let scopes: Vec<Weak<Scope>> = std::mem::take(&mut *self.tree.borrow_mut());
        for s in scopes.iter().filter_map(Weak::upgrade) {
            // the bindings are dropped after the borrow ends: dropping one may drop a scope
            let names = std::mem::take(&mut *s.names.borrow_mut());
            drop(names);
        }
    }
    pub fn lookup(&self, name: &str) -> Option<Binding> {
        if let Some(b) = self.names.borrow().get(name) {
            return Some(b.clone());
        }
        self.parent.as_ref().and_then(|p| p.lookup(name))
    }
    pub fn define(&self, name: &str, b: Binding) {
        self.names.borrow_mut().insert(name.to_string(), b);
    }
    /// Root of the chain (for `.name` lookups).
    pub fn root_of(self: &Rc<Scope>) -> Rc<Scope> {
        let mut s = self.clone();
        while let Some(p) = s.parent.clone() {
            s = p;
        }
        s
    }
    pub fn id(self: &Rc<Scope>) -> usize {
        Rc::as_ptr(self) as usize
    }
}

#[derive(Clone)]
pub enum Binding {
    Type(Ty),
    GenericAgg(Rc<ast::AggregateDecl>),
    ExternType(Rc<ExternInfo>),
    /// A constant or compile-time value.
    Value(Box<Val>),
    /// A variable or parameter.
    Var(Place),
    Functions(Vec<Rc<ast::FunctionDecl>>),
    ExternFunctions(Vec<Rc<ast::FunctionProto>>),
    Action(Rc<ast::ActionDecl>, Rc<Scope>),
    ParserDecl(Rc<ast::ParserDecl>, Rc<Scope>),
    ControlDecl(Rc<ast::ControlDecl>, Rc<Scope>),
    BlockType(Rc<ast::BlockTypeDecl>),
    Instance(Rc<Instance>),
    Table(Rc<TableInfo>),
    ValueSet(u32, Ty),
    PacketIn,
    PacketOut,
    /// The `error` namespace and `match_kind` members.
    ErrorNs,
    MatchKind(String),
}

/// An instantiated object.
pub enum Instance {
    /// A v1model or registered extern. `id` indexes the list its `kind` names.
    Extern {
        kind: ExternKind,
        id: u32,
        info: Rc<ExternInfo>,
        targs: Vec<Ty>,
        name: String,
    },
    Control {
        decl: Rc<ast::ControlDecl>,
        scope: Rc<Scope>,
        name: String,
        state: RefCell<Option<ControlState>>,
    },
    Parser {
        decl: Rc<ast::ParserDecl>,
        scope: Rc<Scope>,
        name: String,
    },
}

/// A control instance after its locals were elaborated (on first apply).
pub struct ControlState {
    pub scope: Rc<Scope>,
    /// Parameter places; `apply` copies arguments in and out unless `aliased`.
    pub params: Vec<(ast::Direction, Place)>,
    pub aliased: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExternKind {
    Register,
    Counter,
    DirectCounter,
    Meter,
    DirectMeter,
    ActionProfile,
    ActionSelector,
    /// Through the engine's extern registry (`Program::externs`).
    Registered,
}

pub struct TableInfo {
    pub id: u32,
    /// Statements that compute the table's keys into temporaries before each lookup, when a key has
    /// side effects (`t2.apply().hit` as a key): the reference compiler hoists such keys,
    /// evaluating each once per apply.
    pub key_prelude: Vec<ir::Stmt>,
    /// IR action indices of the table's actions, by declared name.
    pub actions: Vec<(String, u32)>,
}

/// A storage location of some type.
#[derive(Clone, Debug)]
pub enum Place {
    Scalar(ir::LValue, Ty),
    Varbit {
        data: ir::LValue,
        len: ir::LValue,
        max: u32,
    },
    Header {
        hdr: ir::HeaderRef,
        valid: ir::LValue,
        fields: Vec<(String, Place)>,
        ty: Rc<AggInfo>,
        /// Validity bits of the other members when this header is in a union.
        siblings: Vec<ir::LValue>,
    },
    Struct {
        ty: Rc<AggInfo>,
        fields: Vec<(String, Place)>,
    },
    Union {
        ty: Rc<AggInfo>,
        members: Vec<(String, Place)>,
    },
    /// `member_stacks`: for a stack of header unions, the stack id of each member's headers.
    Stack {
        id: u32,
        elem: Ty,
        elems: Vec<Place>,
        stride: u32,
        next_index: ir::Loc,
        member_stacks: Vec<u32>,
    },
    Tuple(Vec<Place>),
}

impl Place {
    pub fn ty(&self) -> Ty {
        match self {
            Place::Scalar(_, t) => t.clone(),
            Place::Varbit { max, .. } => Ty::Varbit(*max),
            Place::Header { ty, .. } | Place::Struct { ty, .. } | Place::Union { ty, .. } => {
                Ty::Agg(ty.clone())
            }
            Place::Stack { elem, elems, .. } => {
                Ty::Stack(Box::new(elem.clone()), elems.len() as u32)
            }
            Place::Tuple(ps) => Ty::Tuple(ps.iter().map(|p| p.ty()).collect()),
        }
    }
    pub fn header_valid(&self) -> Option<ir::LValue> {
        match self {
            Place::Header { valid, .. } => Some(valid.clone()),
            _ => None,
        }
    }
    pub fn field(&self, name: &str) -> Option<&Place> {
        match self {
            Place::Header { fields, .. }
            | Place::Struct { fields, .. }
            | Place::Union {
                members: fields, ..
            } => fields.iter().find(|(n, _)| n == name).map(|(_, p)| p),
            _ => None,
        }
    }
    /// All static scalar locations, in declaration order (validity bits included for headers).
    pub fn scalar_locs(&self) -> Vec<ir::Loc> {
        let mut v = vec![];
        self.walk_locs(&mut v);
        v
    }
    fn walk_locs(&self, v: &mut Vec<ir::Loc>) {
        match self {
            Place::Scalar(ir::LValue::Static(l), _) => v.push(*l),
            Place::Scalar(..) => {}
            Place::Varbit { data, len, .. } => {
                if let (ir::LValue::Static(d), ir::LValue::Static(l)) = (data, len) {
                    v.push(*d);
                    v.push(*l);
                }
            }
            Place::Header { valid, fields, .. } => {
                if let ir::LValue::Static(l) = valid {
                    v.push(*l);
                }
                fields.iter().for_each(|(_, f)| f.walk_locs(v));
            }
            Place::Struct { fields, .. }
            | Place::Union {
                members: fields, ..
            } => fields.iter().for_each(|(_, f)| f.walk_locs(v)),
            Place::Stack {
                elems, next_index, ..
            } => {
                elems.iter().for_each(|e| e.walk_locs(v));
                v.push(*next_index);
            }
            Place::Tuple(ps) => ps.iter().for_each(|p| p.walk_locs(v)),
        }
    }
    /// True if no location depends on a run-time index.
    pub fn is_static(&self) -> bool {
        match self {
            Place::Scalar(lv, _) => matches!(lv, ir::LValue::Static(_)),
            Place::Varbit { data, .. } => matches!(data, ir::LValue::Static(_)),
            Place::Header { hdr, .. } => matches!(hdr, ir::HeaderRef::Static(_)),
            Place::Struct { fields, .. }
            | Place::Union {
                members: fields, ..
            } => fields.iter().all(|(_, f)| f.is_static()),
            Place::Stack { elems, .. } => elems.iter().all(|e| e.is_static()),
            Place::Tuple(ps) => ps.iter().all(|p| p.is_static()),
        }
    }
    /// The place of the stack element chosen at run time by `index` (`next` = the parser's
    /// `.next`).
    pub fn stack_element(&self, index: &ir::Expr, next: bool) -> Option<Place> {
        let Place::Stack {
            id,
            elems,
            stride,
            member_stacks,
            ..
        } = self
        else {
            return None;
        };
        let count = elems.len() as u32;
        let fix = |p: &mut Place, sid: u32| {
            if let Place::Header { hdr, .. } = p {
                *hdr = if next {
                    ir::HeaderRef::Next { stack: sid }
                } else {
                    ir::HeaderRef::Dynamic {
                        stack: sid,
                        index: Box::new(index.clone()),
                    }
                };
            }
        };
        match &elems[0] {
            Place::Union { ty, members } => {
                let mut ms = vec![];
                for (k, (n, m)) in members.iter().enumerate() {
                    let sid = member_stacks[k];
                    let mut d = m.dynamic(sid, *stride, count, index);
                    fix(&mut d, sid);
                    ms.push((n.clone(), d));
                }
                Some(Place::Union {
                    ty: ty.clone(),
                    members: ms,
                })
            }
            e => {
                let mut d = e.dynamic(*id, *stride, count, index);
                fix(&mut d, *id);
                Some(d)
            }
        }
    }

    /// Turn the place of element 0 of a stack into the place of element `index` (chosen at run
    /// time).
    pub fn dynamic(&self, stack: u32, stride: u32, count: u32, index: &ir::Expr) -> Place {
        let dl = |lv: &ir::LValue| match lv {
            ir::LValue::Static(l) => ir::LValue::Dynamic {
                base: *l,
                stride,
                count,
                index: Box::new(index.clone()),
            },
            // an element of an array that was itself chosen at run time (`a[i][j]`): one index over
            // both levels, out of range (so the access reads 0 and writes nothing) when either
            // index is
            ir::LValue::Dynamic {
                base,
                stride: s1,
                count: c1,
                index: i1,
            } => {
                let k = |v: u32| Box::new(ir::Expr::konst(32, v as u64));
                let bin = |op, width, lhs, rhs| {
                    Box::new(ir::Expr::Binary {
                        op,
                        width,
                        signed: false,
                        lhs,
                        rhs,
                    })
                };
                let inside = bin(
                    ir::BinOp::And,
                    1,
                    bin(ir::BinOp::Lt, 1, i1.clone(), k(*c1)),
                    bin(ir::BinOp::Lt, 1, Box::new(index.clone()), k(count)),
                );
                let offset = bin(
                    ir::BinOp::Add,
                    32,
                    bin(ir::BinOp::Mul, 32, i1.clone(), k(*s1)),
                    bin(ir::BinOp::Mul, 32, Box::new(index.clone()), k(stride)),
                );
                let total = s1 * c1;
                let index = ir::Expr::Cond {
                    cond: inside,
                    then: offset,
                    else_: k(total),
                    width: 32,
                };
                ir::LValue::Dynamic {
                    base: *base,
                    stride: 1,
                    count: total,
                    index: Box::new(index),
                }
            }
        };
        match self {
            Place::Scalar(lv, t) => Place::Scalar(dl(lv), t.clone()),
            Place::Varbit { data, len, max } => Place::Varbit {
                data: dl(data),
                len: dl(len),
                max: *max,
            },
            Place::Header {
                valid,
                fields,
                ty,
                siblings,
                ..
            } => Place::Header {
                hdr: ir::HeaderRef::Dynamic {
                    stack,
                    index: Box::new(index.clone()),
                },
                valid: dl(valid),
                fields: fields
                    .iter()
                    .map(|(n, f)| (n.clone(), f.dynamic(stack, stride, count, index)))
                    .collect(),
                ty: ty.clone(),
                siblings: siblings.iter().map(dl).collect(),
            },
            Place::Struct { ty, fields } => Place::Struct {
                ty: ty.clone(),
                fields: fields
                    .iter()
                    .map(|(n, f)| (n.clone(), f.dynamic(stack, stride, count, index)))
                    .collect(),
            },
            Place::Union { ty, members } => Place::Union {
                ty: ty.clone(),
                members: members
                    .iter()
                    .map(|(n, f)| (n.clone(), f.dynamic(stack, stride, count, index)))
                    .collect(),
            },
            Place::Stack {
                id,
                elem,
                elems,
                stride: s,
                next_index,
                member_stacks,
            } => Place::Stack {
                id: *id,
                elem: elem.clone(),
                elems: elems
                    .iter()
                    .map(|e| e.dynamic(stack, stride, count, index))
                    .collect(),
                stride: *s,
                next_index: *next_index,
                member_stacks: member_stacks.clone(),
            },
            other => other.clone(),
        }
    }
}

/// The result of lowering an expression.
#[derive(Clone)]
pub enum Val {
    /// A compile-time scalar constant of type `Ty` (InfInt, bit, int, bool, enum, error).
    Const(BigInt, Ty),
    /// A scalar computed at run time.
    Rv(ir::Expr, Ty),
    /// A storage location (scalar or aggregate).
    Place(Place),
    /// `{a, b}` list / tuple expression.
    List(Vec<Val>),
    /// `{f = a, g = b}`.
    Struct(Vec<(String, Val)>, Option<Ty>),
    /// `{#}`.
    Invalid,
    Str(String),
    DontCare,
    /// A name that is not a value (type, instance, action, function, ...).
    Binding(Binding),
    /// `receiver.method`, to be called.
    Method(Box<Val>, String),
    /// `t.apply()` result: (table index, hit location, action_run location).
    TableResult(Rc<TableInfo>, ir::Loc, ir::Loc),
    /// A type used as a value (`E.member` receivers, casts).
    Type(Ty),
}

impl Val {
    pub fn ty(&self) -> Option<Ty> {
        match self {
            Val::Const(_, t) | Val::Rv(_, t) => Some(t.clone()),
            Val::Place(p) => Some(p.ty()),
            Val::Str(_) => Some(Ty::Str),
            Val::Struct(_, Some(t)) => Some(t.clone()),
            _ => None,
        }
    }
}
