//! Table applies of several narrow keys from native code: the key's words computed by the
//! generated code, the lookup in the worker's table snapshot borrowed in place.

use super::default_args;
use crate::code::Flow;
use crate::{Engine, Worker};
use p4sec_ir::Loc;

impl Engine {
    /// [`Engine::select_native`] for a table of several keys of at most 64 bits each, `key` holding
    /// one word per key in the table's key order (the table's key layout for such keys): the hit's
    /// inline arguments or the default's written into the action's parameters, `hit` and
    /// `action_run` set, `Ok(action)` for the caller to run. Anything else (a traced packet, a
    /// table with per-entry state, an action profile group, arguments not inline, no snapshot) is
    /// the general apply, which builds the key again from the slots (a key is an expression
    /// without side effects) and runs the action: `Err(flow)`.
    #[inline(always)]
    pub(crate) fn select_native_key(
        &self,
        w: &mut Worker,
        ti: usize,
        key: &[u64],
        hit: Option<Loc>,
        action_run: Option<Loc>,
    ) -> Result<usize, Flow> {
        let general = w.trace.is_some() || self.match_action.entry_state.get(ti).is_none_or(|&s| s);
        if let (false, Some(Some(data)), Some(t)) = (
            general,
            w.tables.snapshots.get(ti),
            self.prog.tables.get(ti),
        ) {
            let found = data.lookup(t, key);
            let a = match found.map(|i| data.hot(i)) {
                Some(h) if h.selects || h.nargs == crate::tables::Hot::NOT_INLINE => {
                    std::hint::cold_path();
                    return Err(self.apply_table(w, ti, hit, action_run));
                }
                Some(h) => {
                    self.inline_args(&mut w.slots, h.action as usize, h);
                    h.action as usize
                }
                None => default_args(&mut w.slots, data) as usize,
            };
            if let Some((h, m)) = w.stats.tables.get(ti) {
                crate::bump(if found.is_some() { h } else { m });
            }
            w.calls.cur_meter = None;
            self.mark_apply(w, found.is_some(), a, hit, action_run);
            return Ok(a);
        }
        std::hint::cold_path();
        Err(self.apply_table(w, ti, hit, action_run))
    }
}
