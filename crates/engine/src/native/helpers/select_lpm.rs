//! Native code's apply of an LPM table of one key of at most 32 bits ([`np_select_lpm32`], chosen
//! when the code is generated), and of one whose LPM key of at most 32 bits has exact keys beside
//! it, indexed per value of those ([`np_select_parts`]: a VRF and an IPv4 destination): the
//! lookup straight in the table version's prefix levels, a hit's inline arguments written by its
//! action's plan and a miss's few default writes, calling nothing (the helper's frame saves no
//! registers); anything else (a traced packet, a table version not of this shape, a hit whose
//! arguments are not in the plan's form, a default of more words, the meter of the last entry to
//! forget, a miss in a table made without hit maps) is handed to [`np_select`] (or
//! [`np_select_key`]) by a tail call, which does it all as before.

use super::{np_select, np_select_key, ApplySite, Ctx};
use crate::pipeline::match_action::arg_plan::ArgPlan;
use crate::tables::{HitArgs, HotData, TableData};
use crate::worker::Stats;
use crate::Engine;
use p4sec_ir::Loc;

/// [`np_select`] of a narrow LPM table: [`Engine::select_lpm32`]'s work, the rest to
/// [`np_select`] by a tail call. `M`: the site marks `hit` or `action_run` (a site that marks
/// neither takes the helper that does not look).
///
/// # Safety
/// As [`np_select`].
pub(crate) unsafe extern "C" fn np_select_lpm32<const E: bool, const M: bool>(
    ctx: *mut Ctx,
    site: *const ApplySite,
    k: u64,
) -> u64 {
    select_hit::<Narrow, E, M>(ctx, site, k)
}

/// [`np_select_key`] of an LPM table indexed in parts (a narrow LPM key beside exact keys, a VRF
/// and an IPv4 destination: [`crate::tables::has_parts_shape`]): [`np_select_lpm32`]'s work on
/// the part of the key's exact values, the rest to [`np_select_key`] by a tail call (a table
/// version no longer indexed in parts misses here and goes there too).
///
/// # Safety
/// As [`np_select_key`].
pub(crate) unsafe extern "C" fn np_select_parts<const E: bool, const M: bool>(
    ctx: *mut Ctx,
    site: *const ApplySite,
    key: *const u64,
) -> u64 {
    select_hit::<ByParts, E, M>(ctx, site, key)
}

/// How a helper of this file finds what a hit needs: the key as native code passes it, the
/// lookup in a table version's hit maps, and the helper any other case goes to.
trait HitLookup {
    type Key: Copy;
    /// What a hit on key `k` needs, from `data`'s hit maps (a miss where it has none).
    ///
    /// # Safety
    /// `k` as native code passes it to the helper.
    unsafe fn lookup(data: &TableData, k: Self::Key) -> Option<(u32, &HitArgs)>;
    /// Whether a miss in the hit maps is a miss in `data` (it has them).
    fn has_maps(data: &TableData) -> bool;
    /// The general helper, which does it all.
    ///
    /// # Safety
    /// As [`np_select`].
    unsafe fn general<const E: bool>(ctx: *mut Ctx, site: *const ApplySite, k: Self::Key) -> u64;
}

/// A narrow LPM table's apply: one key word ([`np_select_lpm32`]).
struct Narrow;

impl HitLookup for Narrow {
    type Key = u64;
    #[inline(always)]
    unsafe fn lookup(data: &TableData, k: u64) -> Option<(u32, &HitArgs)> {
        // the helper is chosen for tables of the shape only (`lpm32_helpers`)
        data.lookup_lpm32(k)
    }
    #[inline(always)]
    fn has_maps(data: &TableData) -> bool {
        data.has_hit_maps()
    }
    #[inline(always)]
    unsafe fn general<const E: bool>(ctx: *mut Ctx, site: *const ApplySite, k: u64) -> u64 {
        np_select::<E>(ctx, site, k)
    }
}

/// An apply of a table indexed in parts: a word per key in a stack slot ([`np_select_parts`]).
struct ByParts;

impl HitLookup for ByParts {
    type Key = *const u64;
    #[inline(always)]
    unsafe fn lookup(data: &TableData, key: *const u64) -> Option<(u32, &HitArgs)> {
        // the generated code passes a word per key of the table, as many as a version of the
        // table indexed in parts takes (0 for any other, which then misses)
        data.lookup_parts(std::slice::from_raw_parts(key, data.parts_words()))
    }
    #[inline(always)]
    fn has_maps(data: &TableData) -> bool {
        data.has_part_hit_maps()
    }
    #[inline(always)]
    unsafe fn general<const E: bool>(ctx: *mut Ctx, site: *const ApplySite, k: *const u64) -> u64 {
        np_select_key::<E>(ctx, site, k)
    }
}

/// The helpers' work: the hit's arguments written by its action's plan, or a miss's few default
/// writes, the counter, `hit` and `action_run` as `M` says, calling nothing; anything else handed
/// to `L`'s general helper by a tail call.
///
/// # Safety
/// As [`np_select`].
#[inline(always)]
unsafe fn select_hit<L: HitLookup, const E: bool, const M: bool>(
    ctx: *mut Ctx,
    site: *const ApplySite,
    k: L::Key,
) -> u64 {
    let found = {
        let (w, s) = (&*(*ctx).w, &*site);
        // a traced packet, or the meter of the last entry to forget (dropping it calls out)
        if w.trace.is_some() || w.calls.cur_meter.is_some() {
            return L::general::<E>(ctx, site, k);
        }
        let Some(Some(data)) = w.tables.snapshots.get(s.table).map(|d| d.as_deref()) else {
            return L::general::<E>(ctx, site, k);
        };
        let hit = L::lookup(data, k).map(|(c, a)| (c, a as *const HitArgs));
        (data as *const TableData, hit)
    };
    // the engine, the worker and the table read anew, the worker and the table only once
    // nothing is left to hand on (not kept in registers through the lookup and the checks, which
    // would take registers this frame then saves and restores)
    let (data, found) = (&*found.0, found.1);
    let a = match found {
        Some((code, args)) => {
            // (in the table version, which the worker's snapshot keeps alive)
            let args = &*args;
            let e = std::ptr::read_volatile(&(*ctx).e);
            let Some((a, plan)) = hit_plan(&e.match_action.arg_plans, code) else {
                return L::general::<E>(ctx, site, k);
            };
            let w = &mut *std::ptr::read_volatile(&(*ctx).w);
            let s = &*site;
            let ti = std::ptr::read_volatile(&s.table);
            let (slots, stats) = (&mut w.slots[..], &*w.stats);
            plan.write(slots, args);
            marked::<M>(slots, stats, ti, true, a, &s.hit, &s.action_run);
            a
        }
        None => {
            // (a table made without hit maps misses at once: the general lookup answers)
            if !data.default_writes.few || !L::has_maps(data) {
                return L::general::<E>(ctx, site, k);
            }
            let w = &mut *std::ptr::read_volatile(&(*ctx).w);
            let s = &*site;
            let ti = std::ptr::read_volatile(&s.table);
            let (slots, stats) = (&mut w.slots[..], &*w.stats);
            miss_writes::<M>(slots, stats, ti, data, &s.hit, &s.action_run)
        }
    };
    a as u64
}

/// The helpers of an apply of table `t` if its versions are of the lean shape of a narrow LPM
/// table (one LPM key of at most 32 bits, no per-entry state, no action selector): (emitting, not
/// emitting); `marks`: the apply marks `hit` or `action_run`.
pub(crate) fn lpm32_helpers(t: &p4sec_ir::Table, marks: bool) -> Option<(*const (), *const ())> {
    let lpm32 = crate::tables::lean_of(t) == crate::tables::Lean::Lpm32;
    lpm32.then_some(if marks {
        (
            np_select_lpm32::<true, true> as *const (),
            np_select_lpm32::<false, true> as *const (),
        )
    } else {
        (
            np_select_lpm32::<true, false> as *const (),
            np_select_lpm32::<false, false> as *const (),
        )
    })
}

/// The helpers of an apply of table `t` of several keys if it is indexed in parts and has no
/// per-entry state (direct counter, meter, idle timeout) and no action selector: (emitting, not
/// emitting); `marks`: the apply marks `hit` or `action_run`.
pub(crate) fn parts_helpers(t: &p4sec_ir::Table, marks: bool) -> Option<(*const (), *const ())> {
    let fits = crate::tables::has_parts_shape(t) && crate::tables::without_entry_state(t);
    fits.then_some(if marks {
        (
            np_select_parts::<true, true> as *const (),
            np_select_parts::<false, true> as *const (),
        )
    } else {
        (
            np_select_parts::<true, false> as *const (),
            np_select_parts::<false, false> as *const (),
        )
    })
}

impl Engine {
    /// [`Engine::select_lean`] of a narrow LPM table version ([`TableData::lookup_lpm32`]) in its
    /// common cases only, as native code's [`np_select_lpm32`] makes it: a hit whose arguments
    /// its action's plan writes, or a miss whose default action writes at most
    /// [`crate::tables::INLINE_ARGS`] words; the hit or miss counted, `hit` and `action_run` set:
    /// `Some(action)`. `None`, with nothing written or counted, for anything else (the caller
    /// takes [`Engine::select_lean`] and the general path). Its tests' entry: native code's
    /// helper does the same work in its own order.
    #[cfg(test)]
    pub(crate) fn select_lpm32(
        &self,
        w: &mut crate::Worker,
        ti: usize,
        k: u64,
        hit: &Option<Loc>,
        action_run: &Option<Loc>,
    ) -> Option<usize> {
        if w.trace.is_some() || w.calls.cur_meter.is_some() {
            return None;
        }
        let data = w.tables.snapshots.get(ti)?.as_deref()?;
        if data.lean != crate::tables::Lean::Lpm32 {
            return None;
        }
        let (slots, stats) = (&mut w.slots[..], &*w.stats);
        match data.lookup_lpm32(k) {
            Some((code, args)) => {
                let (a, plan) = hit_plan(&self.match_action.arg_plans, code)?;
                plan.write(slots, args);
                marked::<true>(slots, stats, ti, true, a, hit, action_run);
                Some(a)
            }
            None if data.default_writes.few && data.has_hit_maps() => {
                Some(miss_writes::<true>(slots, stats, ti, data, hit, action_run))
            }
            None => None,
        }
    }
}

/// A hit on an entry (`code`, [`HotData::code`], as its key's slot holds it) whose arguments its
/// action's plan (in `plans`) writes: the action and its plan. `None` for any other entry (one
/// that selects its action per packet, or whose arguments are not inline). Panics nowhere.
#[inline(always)]
fn hit_plan(plans: &[ArgPlan], code: u32) -> Option<(usize, &ArgPlan)> {
    let (a, nargs) = HotData::decode(code);
    let plan = plans.get(a)?;
    // a selecting entry never has the plan's count (`HotData::code`)
    if nargs != plan.words {
        return None;
    }
    Some((a, plan))
}

/// A miss in table `ti`'s version `data`, whose default action writes at most
/// [`crate::tables::INLINE_ARGS`] words (the caller checked `few`): written, the miss counted,
/// `hit` and `action_run` set; the action.
#[inline(always)]
fn miss_writes<const M: bool>(
    slots: &mut [u64],
    stats: &Stats,
    ti: usize,
    data: &TableData,
    hit: &Option<Loc>,
    action_run: &Option<Loc>,
) -> usize {
    let d = &data.default_writes;
    debug_assert!(d.few);
    for &(s, v) in &d.inline {
        debug_assert!((s as usize) < slots.len());
        // SAFETY: `param_writes` keeps only the program's slots and the sink slot after them, all
        // of which the worker has (checked on entry to `Engine::process`)
        unsafe { *slots.get_unchecked_mut(s as usize) = v };
    }
    let a = data.default.action as usize;
    marked::<M>(slots, stats, ti, false, a, hit, action_run);
    a
}

/// A lean apply's action chosen and its arguments written: the hit or miss counted, `hit` and
/// `action_run` set unless `M` is false (the site marks neither; `found` a constant where it is
/// inlined).
#[inline(always)]
fn marked<const M: bool>(
    slots: &mut [u64],
    stats: &Stats,
    ti: usize,
    found: bool,
    a: usize,
    hit: &Option<Loc>,
    action_run: &Option<Loc>,
) {
    if let Some((h, m)) = stats.tables.get(ti) {
        crate::bump(if found { h } else { m });
    }
    if !M {
        debug_assert!(hit.is_none() && action_run.is_none());
        return;
    }
    if let Some(h) = hit {
        if let Some(s) = slots.get_mut(h.slot as usize) {
            *s = found as u64 & crate::bits::mask64(h.width);
        }
    }
    if let Some(r) = action_run {
        if let Some(s) = slots.get_mut(r.slot as usize) {
            *s = a as u64 & crate::bits::mask64(r.width);
        }
    }
}

#[cfg(test)]
mod parts_tests;
#[cfg(test)]
mod tests;
