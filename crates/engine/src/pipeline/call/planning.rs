//! Extern argument planning, done once at load time: each argument's layout when its parts are
//! fixed locations or narrow constants ([`plan_arg`]), and call sites whose arguments are all
//! planned ([`PlannedCall`]), which an extern may compile for itself ([`PlannedCall::bind`]).

use p4sec_externs::iface::{BoundArg, BoundCall, Dir, ExternObject};
use p4sec_externs::layout::{ArgLayout, Part};
use p4sec_ir::*;

/// The layout of extern argument `a` ([`ArgLayout`]), if every part is a load of a fixed location
/// or a narrow constant (and, for `out`/`inout`, every destination is a fixed location) and fields
/// wider than 64 bits sit on byte boundaries.
pub(crate) fn plan_arg(a: &ExternArg) -> Option<ArgLayout> {
    let field = |l: &Loc| Part::Field {
        slot: l.slot,
        width: l.width,
    };
    let parts: Vec<Part> = if a.dir == Direction::In {
        let mut parts = vec![];
        for e in &a.parts {
            match e {
                Expr::Load(LValue::Static(l)) => parts.push(field(l)),
                Expr::Small { value, width } => parts.push(Part::Const {
                    value: *value,
                    width: *width,
                }),
                // a constant wider than 64 bits (a key written in the program): 64-bit pieces, most
                // significant first
                Expr::Const(v) => {
                    let n = words_for(v.width);
                    for k in (0..n).rev() {
                        let width = if k + 1 == n { v.width - 64 * k } else { 64 };
                        parts.push(Part::Const {
                            value: v.words.get(k as usize).copied().unwrap_or(0)
                                & crate::bits::mask64(width),
                            width,
                        });
                    }
                }
                _ => return None,
            }
        }
        parts
    } else {
        a.dsts
            .iter()
            .map(|d| {
                if let LValue::Static(l) = d {
                    Some(field(l))
                } else {
                    None
                }
            })
            .collect::<Option<_>>()?
    };
    if a.dir == Direction::InOut {
        // the value going in must be the destinations' own
        let same = a.parts.len() == parts.len()
            && a.parts
                .iter()
                .zip(&parts)
                .all(|(e, p)| matches!((e, p), (Expr::Load(LValue::Static(x)), Part::Field { slot, width }) if x.slot == *slot && x.width == *width));
        if !same {
            return None;
        }
    }
    ArgLayout::new(a.width, &parts)
}

/// The extern interface's direction of a P4 parameter direction.
pub(crate) fn dir_of(d: Direction) -> Dir {
    match d {
        Direction::In => Dir::In,
        Direction::Out => Dir::Out,
        Direction::InOut => Dir::InOut,
    }
}

/// An extern call site whose arguments are all planned ([`ArgLayout`]) and whose return value, if
/// any, goes to a fixed location: what [`crate::Engine::extern_call_planned`] needs per packet, resolved
/// once.
pub(crate) struct PlannedCall {
    pub(super) inst: usize,
    pub(super) method: u32,
    /// Per argument: its layout and its direction.
    pub(super) args: Vec<(ArgLayout, Direction)>,
    pub(super) ret: Option<Loc>,
}

impl PlannedCall {
    pub(crate) fn new(
        inst: usize,
        method: u32,
        args: &[ExternArg],
        plans: &[Option<ArgLayout>],
        ret: Option<&LValue>,
    ) -> Option<Self> {
        let ret = match ret {
            None => None,
            Some(LValue::Static(l)) => Some(*l),
            Some(_) => return None,
        };
        let args = args
            .iter()
            .zip(plans)
            .map(|(a, p)| p.clone().map(|p| (p, a.dir)))
            .collect::<Option<Vec<_>>>()?;
        Some(PlannedCall {
            inst,
            method,
            args,
            ret,
        })
    }

    /// The call site compiled by its extern, if the extern binds it ([`ExternObject::bind`]);
    /// `frame_prefix`: the argument the engine may vouch for ([`crate::load::pristine`]).
    pub(crate) fn bind(
        &self,
        externs: &[Box<dyn ExternObject>],
        methods: &[Vec<u32>],
        frame_prefix: Option<usize>,
    ) -> Option<Box<dyn BoundCall>> {
        let obj = externs.get(self.inst)?;
        let m = *methods.get(self.inst)?.get(self.method as usize)?;
        let args: Vec<BoundArg> = self
            .args
            .iter()
            .enumerate()
            .map(|(i, (layout, d))| BoundArg {
                dir: dir_of(*d),
                layout,
                frame_prefix: frame_prefix == Some(i),
            })
            .collect();
        let ret = match self.ret {
            Some(l) => Some(ArgLayout::new(
                l.width,
                &[Part::Field {
                    slot: l.slot,
                    width: l.width,
                }],
            )?),
            None => None,
        };
        obj.bind(m, &args, ret.as_ref())
    }
}
