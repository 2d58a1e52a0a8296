//! Table applies of several keys, or of keys wider than 64 bits, from native code: the packed
//! key's words computed by the generated code, the lookup in the worker's table snapshot borrowed
//! in place.

use crate::code::Flow;
use crate::{Engine, Worker};
use p4sec_ir::Loc;

impl Engine {
    /// The words of table `ti`'s packed key (each key in its words: one for a key of at most 64
    /// bits), 0 for no such table.
    pub(crate) fn key_words(&self, ti: usize) -> usize {
        self.match_action
            .key_layouts
            .get(ti)
            .and_then(|l| l.last())
            .map_or(0, |&(off, words)| off + words)
    }

    /// [`Engine::select_native`] for a table of several keys or keys wider than 64 bits, `key`
    /// holding the table's packed key (each key's words in key order): the hit's
    /// arguments (inline or from the entry) or the default's written into the action's
    /// parameters, `hit` and `action_run` set, `Ok(action)` for the caller to run. Anything else
    /// (a traced packet, a table with per-entry state, an action profile group, no snapshot) is
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
        if let Some(a) = self.select_key_lean(w, ti, key, &hit, &action_run) {
            return Ok(a);
        }
        std::hint::cold_path();
        Err(self.apply_table(w, ti, hit, action_run))
    }

    /// [`Engine::select_native_key`] short of the general apply: `None`, nothing written, where
    /// that one is due.
    #[inline(always)]
    pub(crate) fn select_key_lean(
        &self,
        w: &mut Worker,
        ti: usize,
        key: &[u64],
        hit: &Option<Loc>,
        action_run: &Option<Loc>,
    ) -> Option<usize> {
        if w.trace.is_some() || self.match_action.entry_state.get(ti).is_none_or(|&s| s) {
            return None;
        }
        let (Some(Some(data)), Some(t)) = (w.tables.snapshots.get(ti), self.prog.tables.get(ti))
        else {
            return None;
        };
        let found = data.lookup(t, key);
        let a = self.choose_args(&mut w.slots, data, found, false)?;
        self.chosen(w, ti, found.is_some(), a, *hit, *action_run);
        Some(a)
    }
}
