//! Which helper a one-key table apply of the generated code calls: the narrow-exact one, the
//! narrow-LPM one or the general [`np_select`].

use super::{np_select, np_select_direct};

/// The one-key helpers ([`np_select_direct`], [`super::select_lpm::np_select_lpm32`] or [`np_select`])
/// for an apply of table `t` (`marks`: the apply marks `hit` or `action_run`): (emitting, not
/// emitting).
pub(crate) fn select_helpers(t: &p4sec_ir::Table, marks: bool) -> (*const (), *const ()) {
    if let Some(h) = super::select_lpm::lpm32_helpers(t, marks) {
        return h;
    }
    let direct = matches!(&t.keys[..], [k] if k.kind == p4sec_ir::MatchKind::Exact
        && k.width <= crate::tables::DIRECT_BITS);
    match (direct, marks) {
        (true, true) => (
            np_select_direct::<true, true> as *const (),
            np_select_direct::<false, true> as *const (),
        ),
        (true, false) => (
            np_select_direct::<true, false> as *const (),
            np_select_direct::<false, false> as *const (),
        ),
        (false, _) => (
            np_select::<true> as *const (),
            np_select::<false> as *const (),
        ),
    }
}
