//! What a statement may write, as the load-time analyses of the program (`pristine`,
//! `unwritten`) see it, and a walk over every statement of a body.

use p4sec_ir::Direction;
use p4sec_ir::{Builtin, HeaderRef, LValue, Program, Stmt};

/// Calls `f` on every statement of `b`, nested ones included.
pub(crate) fn walk_all<'p>(b: &'p [Stmt], f: &mut impl FnMut(&'p Stmt)) {
    for s in b {
        f(s);
        match s {
            Stmt::If { then, else_, .. } => {
                walk_all(then, f);
                walk_all(else_, f);
            }
            Stmt::Switch { cases, default, .. } => {
                for (_, c) in cases {
                    walk_all(c, f);
                }
                walk_all(default, f);
            }
            Stmt::Block { body, .. } | Stmt::Loop { body, .. } => walk_all(body, f),
            _ => {}
        }
    }
}

/// What a statement may write, as far as the analysis can tell.
pub(crate) enum Writes<'s> {
    Nothing,
    Locs(Vec<&'s LValue>),
    Header(&'s HeaderRef),
    /// Anything (unknown, or a run-time index).
    Everything,
}

pub(crate) fn writes(s: &Stmt) -> Writes<'_> {
    match s {
        Stmt::Assign { dst, .. } => Writes::Locs(vec![dst]),
        Stmt::SetValid { hdr, .. }
        | Stmt::CopyHeader { dst: hdr, .. }
        | Stmt::Extract { hdr, .. } => Writes::Header(hdr),
        Stmt::Advance { .. } | Stmt::Emit { .. } | Stmt::Break(_) | Stmt::Exit => Writes::Nothing,
        Stmt::ExternCall { args, ret, .. } => Writes::Locs(
            args.iter()
                .filter(|a| a.dir != Direction::In)
                .flat_map(|a| a.dsts.iter())
                .chain(ret)
                .collect(),
        ),
        Stmt::Builtin(b) => match b {
            Builtin::Hash { dst, .. }
            | Builtin::UpdateChecksum { dst, .. }
            | Builtin::RegisterRead { dst, .. }
            | Builtin::MeterExecute { dst, .. }
            | Builtin::DirectMeterRead { dst, .. }
            | Builtin::Random { dst, .. } => Writes::Locs(vec![dst]),
            // standard metadata only (`checksum_error`, `egress_spec`, `mcast_grp`), or nothing
            Builtin::Verify { .. }
            | Builtin::VerifyChecksum { .. }
            | Builtin::MarkToDrop
            | Builtin::RegisterWrite { .. }
            | Builtin::CounterCount { .. }
            | Builtin::DirectCounterCount { .. }
            | Builtin::Clone { .. }
            | Builtin::Resubmit { .. }
            | Builtin::Recirculate { .. }
            | Builtin::Truncate { .. }
            | Builtin::Digest { .. }
            | Builtin::LogMsg { .. }
            | Builtin::Assert { .. } => Writes::Nothing,
        },
        // the control flow statements are walked by the analysis itself
        Stmt::If { .. }
        | Stmt::Switch { .. }
        | Stmt::Block { .. }
        | Stmt::Loop { .. }
        | Stmt::ApplyTable { .. }
        | Stmt::CallAction { .. } => Writes::Everything,
    }
}

/// Every body of statements of `p`: the parser's states, the controls in pipeline order, then the
/// actions.
pub(crate) fn every_body(p: &Program) -> impl Iterator<Item = &[Stmt]> {
    p.parser
        .states
        .iter()
        .map(|s| &s.body[..])
        .chain([
            &p.verify_checksum.body[..],
            &p.ingress.body[..],
            &p.egress.body[..],
            &p.compute_checksum.body[..],
            &p.deparser.body[..],
        ])
        .chain(p.actions.iter().map(|a| &a.body[..]))
}
