//! What compiling a program needs ([`Cx`]: the program, its extern instances, the call sites the
//! engine may vouch for), and what the compilers ask of the IR before they compile: can a statement
//! or an expression leave a parser error pending (only `lookahead` can)?

use p4sec_externs::iface::ExternObject;
use p4sec_ir::*;

/// Can running `s` leave a parser error pending in `w.perr` (a `lookahead` past the end of the
/// packet in one of its own expressions)? Conservative: shapes not listed may.
pub(crate) fn stmt_may_fail(s: &Stmt) -> bool {
    match s {
        Stmt::Assign {
            dst: LValue::Static(_),
            src,
        } => may_fail(src),
        Stmt::If { cond, .. } => may_fail(cond),
        Stmt::Switch { expr, .. } => may_fail(expr),
        Stmt::Block { .. }
        | Stmt::Break(_)
        | Stmt::Exit
        | Stmt::ApplyTable { .. }
        | Stmt::SetValid {
            hdr: HeaderRef::Static(_),
            ..
        } => false,
        Stmt::Extract {
            hdr: HeaderRef::Static(_),
            varbit_bits: None,
        }
        | Stmt::Emit {
            hdr: HeaderRef::Static(_),
        } => false,
        Stmt::CallAction { args, .. } => args.iter().any(may_fail),
        Stmt::Builtin(Builtin::MarkToDrop) => false,
        // an extern method cannot raise a parser error (its faults drop the packet); its arguments'
        // expressions can
        Stmt::ExternCall { args, ret, .. } => {
            args.iter()
                .any(|a| a.parts.iter().any(may_fail) || a.dsts.iter().any(lvalue_may_fail))
                || ret.as_ref().is_some_and(lvalue_may_fail)
        }
        _ => true,
    }
}

/// What compiling needs: the program, and its extern instances, so that a call site can be bound by
/// its extern ([`ExternObject::bind`]).
pub(crate) struct Cx<'a> {
    pub prog: &'a Program,
    pub externs: &'a [Box<dyn ExternObject>],
    pub methods: &'a [Vec<u32>],
    /// Call sites whose header argument the engine may vouch for ([`crate::load::pristine`]).
    pub pristine: &'a crate::load::pristine::Pristine,
}

/// Can writing to `l` fail? Only through a header-stack index that can.
fn lvalue_may_fail(l: &LValue) -> bool {
    match l {
        LValue::Dynamic { index, .. } => may_fail(index),
        _ => false,
    }
}

/// Can evaluating `e` fail (set a parser error)? Only `lookahead` can.
pub(crate) fn may_fail(e: &Expr) -> bool {
    match e {
        Expr::Lookahead { .. } => true,
        Expr::Load(LValue::Dynamic { index, .. }) => may_fail(index),
        Expr::Unary { arg, .. } | Expr::Slice { arg, .. } | Expr::Cast { arg, .. } => may_fail(arg),
        Expr::Binary { lhs, rhs, .. } => may_fail(lhs) || may_fail(rhs),
        Expr::Concat { hi, lo } => may_fail(hi) || may_fail(lo),
        Expr::Cond {
            cond, then, else_, ..
        } => may_fail(cond) || may_fail(then) || may_fail(else_),
        _ => false,
    }
}

/// The mask of a `w`-bit value in a word.
#[inline]
pub(crate) fn mask(w: u32) -> u64 {
    crate::bits::mask64(w)
}
