//! Native code's apply of an LPM table of one key of at most 32 bits ([`np_select_lpm32`], chosen
//! when the code is generated): the lookup straight in the table version's prefix levels, a hit's
//! inline arguments written by its action's plan and a miss's few default writes, calling nothing
//! (the helper's frame saves no registers); anything else (a traced packet, a table version not
//! of this shape, a hit whose arguments are not in the plan's form, a default of more words, the
//! meter of the last entry to forget) is handed to [`np_select`] by a tail call, which does it all
//! as before.

use super::{np_select, ApplySite, Ctx};
use crate::{Engine, Worker};
use p4sec_ir::Loc;

/// [`np_select`] of a narrow LPM table: [`Engine::select_lpm32`], the rest to [`np_select`].
///
/// # Safety
/// As [`np_select`].
pub(crate) unsafe extern "C" fn np_select_lpm32<const E: bool>(
    ctx: *mut Ctx,
    site: *const ApplySite,
    k: u64,
) -> u64 {
    let c = &mut *ctx;
    let (e, w, s) = (c.e, &mut *c.w, &*site);
    match e.select_lpm32(w, s.table, k, &s.hit, &s.action_run) {
        Some(a) => a as u64,
        None => np_select::<E>(ctx, site, k),
    }
}

/// The helpers of an apply of table `t` if its one key is LPM of at most 32 bits: (emitting, not
/// emitting).
pub(crate) fn lpm32_helpers(t: &p4sec_ir::Table) -> Option<(*const (), *const ())> {
    let lpm32 = matches!(&t.keys[..], [k] if k.kind == p4sec_ir::MatchKind::Lpm && k.width <= 32);
    lpm32.then_some((
        np_select_lpm32::<true> as *const (),
        np_select_lpm32::<false> as *const (),
    ))
}

impl Engine {
    /// [`Engine::select_lean`] of a narrow LPM table version ([`crate::tables::TableData::lookup_lpm32`])
    /// in its common cases only: a hit whose arguments its action's plan writes, or a miss whose
    /// default action writes at most [`crate::tables::INLINE_ARGS`] words; the hit or miss counted,
    /// `hit` and `action_run` set: `Some(action)`. `None`, with nothing written or counted, for
    /// anything else (the caller takes [`Engine::select_lean`] and the general path). Calls
    /// nothing and panics nowhere.
    #[inline(always)]
    pub(crate) fn select_lpm32(
        &self,
        w: &mut Worker,
        ti: usize,
        k: u64,
        hit: &Option<Loc>,
        action_run: &Option<Loc>,
    ) -> Option<usize> {
        // a traced packet, or the meter of the last entry to forget (dropping it calls out)
        if w.trace.is_some() || w.calls.cur_meter.is_some() {
            return None;
        }
        let data = w.tables.snapshots.get(ti)?.as_deref()?;
        match data.lookup_lpm32(k)? {
            Some(i) => {
                let h = data.hot_fast(i)?;
                let a = h.action as usize;
                let plan = self.match_action.arg_plans.get(a)?;
                // a selecting entry never has the plan's count (`Hot::of`)
                if h.nargs != plan.words {
                    return None;
                }
                plan.write(&mut w.slots, &h.args);
                marked(w, ti, true, a, hit, action_run);
                Some(a)
            }
            None => {
                let d = &data.default_writes;
                if !d.few {
                    return None;
                }
                for &(s, v) in &d.inline {
                    debug_assert!((s as usize) < w.slots.len());
                    // SAFETY: `param_writes` keeps only the program's slots and the sink slot
                    // after them, all of which the worker has (checked on entry to
                    // `Engine::process`)
                    unsafe { *w.slots.get_unchecked_mut(s as usize) = v };
                }
                let a = data.default.action as usize;
                marked(w, ti, false, a, hit, action_run);
                Some(a)
            }
        }
    }
}

/// A lean apply's action chosen and its arguments written: the hit or miss counted, `hit` and
/// `action_run` set (`found` a constant where it is inlined).
#[inline(always)]
fn marked(
    w: &mut Worker,
    ti: usize,
    found: bool,
    a: usize,
    hit: &Option<Loc>,
    action_run: &Option<Loc>,
) {
    if let Some((h, m)) = w.stats.tables.get(ti) {
        crate::bump(if found { h } else { m });
    }
    if let Some(h) = hit {
        if let Some(s) = w.slots.get_mut(h.slot as usize) {
            *s = found as u64 & crate::bits::mask64(h.width);
        }
    }
    if let Some(r) = action_run {
        if let Some(s) = w.slots.get_mut(r.slot as usize) {
            *s = a as u64 & crate::bits::mask64(r.width);
        }
    }
}

#[cfg(test)]
mod tests;
