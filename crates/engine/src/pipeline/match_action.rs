//! The match-action stage: a table's key built, looked up (action selectors included), its
//! per-entry state updated, and the chosen action run with its arguments in its parameters; the
//! layout of action arguments in parameter slots.

use crate::code::Flow;
use crate::tables::KEY_WORDS;
use crate::{bits, hash, Engine, Worker};
use p4sec_ir::*;
use std::sync::atomic::Ordering;

/// The slot words a call of its default action writes (`TableData::default_writes`): only slots of
/// the program, which `Engine::process` checks the worker has, so they are written unchecked.
/// Padded to a multiple of four with writes of zero into the worker's sink slot (the one after the
/// program's), so that they are written four at a time; at most [`crate::tables::INLINE_ARGS`] of
/// them are also kept as a fixed array (padded the same way) for the lean apply's miss.
pub(crate) fn param_writes(p: &Program, call: &ActionCall) -> crate::tables::DefaultWrites {
    let mut v: Vec<(u32, u64)> = p
        .actions
        .get(call.action as usize)
        .map(|a| {
            arg_words(a, &call.args)
                .filter(|(s, _)| *s < p.slots)
                .collect()
        })
        .unwrap_or_default();
    let mut inline = [(p.slots, 0); crate::tables::INLINE_ARGS];
    let few = v.len() <= inline.len();
    if few {
        inline[..v.len()].copy_from_slice(&v);
    }
    while !v.len().is_multiple_of(4) {
        v.push((p.slots, 0));
    }
    crate::tables::DefaultWrites {
        all: v,
        inline,
        few,
    }
}

/// The words of `args` for the parameters of `a`: (slot, word), each parameter's top word masked to
/// its width.
pub(crate) fn arg_words<'a>(
    a: &'a Action,
    args: &'a [Value],
) -> impl Iterator<Item = (u32, u64)> + 'a {
    param_word_layout(a).filter_map(|(s, m, p, k)| arg_word(args, p, k, m).map(|v| (s, v)))
}

/// Word `k` of argument `p` (0 past the argument's words) under the mask `m`; `None` if there is no
/// such argument.
#[inline(always)]
pub(crate) fn arg_word(args: &[Value], p: u32, k: u32, m: u64) -> Option<u64> {
    args.get(p as usize)
        .map(|v| v.words.get(k as usize).copied().unwrap_or(0) & m)
}

/// Each word of each parameter of `a`: (slot, mask, parameter, word), low words first, the top
/// word's mask the parameter's width.
pub(crate) fn param_word_layout(a: &Action) -> impl Iterator<Item = (u32, u64, u32, u32)> + '_ {
    a.params.iter().enumerate().flat_map(|(pi, prm)| {
        let n = words_for(prm.loc.width);
        (0..n).map(move |k| {
            (
                prm.loc.slot + k,
                if k + 1 == n {
                    bits::mask64(prm.loc.width - 64 * k)
                } else {
                    u64::MAX
                },
                pi as u32,
                k,
            )
        })
    })
}

impl Engine {
    #[inline(never)]
    /// Pack table `ti`'s key for this packet into `key` (each field in its layout words).
    fn table_key(&self, w: &mut Worker, ti: usize, key: &mut [u64]) {
        let t = &self.prog.tables[ti];
        let layout = &self.match_action.key_layouts[ti];
        for ((k, &(off, words)), ck) in t
            .keys
            .iter()
            .zip(layout.iter())
            .zip(&self.match_action.table_keys[ti])
        {
            if let Some(f) = ck {
                key[off] = f(self, w);
            } else if k.width <= 64 {
                key[off] = self.eval(w, &k.expr);
            } else {
                let v = self.eval_wide(w, &k.expr);
                key[off..off + words].copy_from_slice(&v[..words]);
            }
        }
    }

    pub(crate) fn apply_table(
        &self,
        w: &mut Worker,
        ti: usize,
        hit: Option<Loc>,
        action_run: Option<Loc>,
    ) -> Flow {
        if self.match_action.key_layouts[ti]
            .last()
            .is_some_and(|&(off, words)| off + words > KEY_WORDS)
        {
            std::hint::cold_path();
            return self.apply_table_wide(w, ti, hit, action_run);
        }
        self.apply_keyed(w, ti, [0u64; KEY_WORDS], hit, action_run)
    }

    /// [`Engine::apply_table`] for a table whose key takes more than `KEY_WORDS` words (more than
    /// 16 fields, each in words of its own): the key in a buffer of its size.
    #[cold]
    #[inline(never)]
    fn apply_table_wide(
        &self,
        w: &mut Worker,
        ti: usize,
        hit: Option<Loc>,
        action_run: Option<Loc>,
    ) -> Flow {
        let words = self.match_action.key_layouts[ti]
            .last()
            .map_or(0, |&(off, words)| off + words);
        self.apply_keyed(w, ti, vec![0u64; words], hit, action_run)
    }

    /// A table apply with `key` (all zeros, at least as many words as the table's key takes) as the
    /// key buffer.
    #[inline(always)]
    fn apply_keyed<K: AsRef<[u64]> + AsMut<[u64]> + Clone>(
        &self,
        w: &mut Worker,
        ti: usize,
        mut key: K,
        hit: Option<Loc>,
        action_run: Option<Loc>,
    ) -> Flow {
        let t = &self.prog.tables[ti];
        let layout = &self.match_action.key_layouts[ti];
        let keys = &self.match_action.table_keys[ti];
        if let (true, Some(Some(f))) = (self.match_action.one_word_key[ti], keys.first()) {
            key.as_mut()[0] = f(self, w);
        } else {
            self.table_key(w, ti, key.as_mut());
        }
        // action selectors: the selector keys do not match (their words are zero in the lookup
        // key); they choose a member of a group
        let mut selector_key = None;
        if let Some((_, sel)) = &self.match_action.selectors[ti] {
            selector_key = Some(key.clone());
            let k = key.as_mut();
            for &s in sel {
                let (off, words) = layout[s];
                k[off..off + words].fill(0);
            }
        }
        // the worker's snapshot of the table (refreshed per packet when the control plane changed a
        // table); taken out of the worker while the action runs, so no reference count is touched
        let data = match w.tables.snapshots.get_mut(ti).and_then(Option::take) {
            Some(d) => d,
            None => self.match_action.tables[ti].data.load_full(),
        };
        let mut found = data.lookup(t, key.as_ref());
        let mut chosen = None;
        if let (Some(i), Some(full)) = (found, selector_key.as_ref()) {
            if data.hot(i).selects {
                let h = self.selector_hash(w, ti, full.as_ref());
                chosen = data.entries[i]
                    .indirect
                    .as_deref()
                    .and_then(|ind| ind.pick(h));
                if chosen.is_none() {
                    found = None; // an empty group: the table misses
                }
            }
        }
        if let Some((h, m)) = w.stats.tables.get(ti) {
            crate::bump(if found.is_some() { h } else { m });
        }
        let len = w.packet.len as u64;
        // the action and its arguments: inline in the entry's hot line when possible
        let mut inline = None;
        let call = match found {
            Some(i) => {
                // per-entry state is touched only when the table has it (shared atomics cost a
                // locked instruction and a cache line per hit)
                if self.match_action.entry_state[ti] {
                    let e = &data.entries[i];
                    if t.direct_counter.is_some() {
                        e.packets.fetch_add(1, Ordering::Relaxed);
                        e.bytes.fetch_add(len, Ordering::Relaxed);
                    }
                    if t.support_timeout {
                        e.last_hit.store(crate::coarse_ms(), Ordering::Relaxed);
                    }
                    w.calls.cur_meter = if t.direct_meter.is_some() {
                        e.meter.clone()
                    } else {
                        None
                    };
                } else {
                    w.calls.cur_meter = None;
                }
                match chosen {
                    Some(c) => Err(c),
                    None => {
                        let hot = data.hot(i);
                        if hot.nargs != crate::tables::Hot::NOT_INLINE {
                            inline = Some(hot);
                            Ok(hot.action)
                        } else {
                            Err(&data.entries[i].entry.action)
                        }
                    }
                }
            }
            None => {
                w.calls.cur_meter = None;
                Ok(default_args(&mut w.slots, &data))
            }
        };
        let a = match call {
            Ok(a) => a,
            Err(c) => c.action,
        } as usize;
        match (inline, call) {
            (Some(hot), _) => self.inline_args(&mut w.slots, a, hot),
            // arguments not inline (wide arguments, a selected member)
            (None, Err(c)) => self.entry_args(&mut w.slots, a, &c.args),
            (None, Ok(_)) => {}
        }
        if w.trace.is_some() {
            let k = selector_key.as_ref().unwrap_or(&key);
            self.trace_apply(w, ti, k.as_ref(), found.is_some(), a);
        }
        self.finish_apply(w, ti, data, found.is_some(), a, hit, action_run)
    }

    /// The trace lines of a table apply: the key looked up (each field in hex, as wide as the
    /// field) and the outcome.
    #[cold]
    #[inline(never)]
    fn trace_apply(&self, w: &mut Worker, ti: usize, key: &[u64], hit: bool, a: usize) {
        let t = &self.prog.tables[ti];
        let mut fields = vec![];
        for (k, &(off, words)) in t.keys.iter().zip(&self.match_action.key_layouts[ti]) {
            let digits = (k.width as usize).div_ceil(4).max(1);
            let mut hex = String::new();
            for i in (0..words).rev() {
                hex.push_str(&format!("{:016x}", key.get(off + i).copied().unwrap_or(0)));
            }
            let hex = &hex[hex.len().saturating_sub(digits)..];
            fields.push(format!("{}={hex}", k.name));
        }
        // the action's arguments, as written into its parameters (low words first per parameter)
        let mut args: Vec<Vec<u64>> = vec![];
        for &(slot, _, p, k) in &self.match_action.param_words[a] {
            let (p, k) = (p as usize, k as usize);
            if args.len() <= p {
                args.resize(p + 1, vec![]);
            }
            if args[p].len() <= k {
                args[p].resize(k + 1, 0);
            }
            args[p][k] = w.slots.get(slot as usize).copied().unwrap_or(0);
        }
        let args: Vec<String> = args
            .iter()
            .map(|words| {
                let hex: String = words.iter().rev().map(|v| format!("{v:016x}")).collect();
                let t = hex.trim_start_matches('0');
                if t.is_empty() { "0" } else { t }.to_string()
            })
            .collect();
        if let Some(tr) = w.trace.as_mut() {
            if !fields.is_empty() {
                tr.push(format!("lookup {} key {}", t.name, fields.join(", ")));
            }
            if !args.is_empty() {
                tr.push(format!("arguments {}", args.join(",")));
            }
            tr.push(format!(
                "table {} {} -> {}",
                t.name,
                if hit { "hit" } else { "miss" },
                self.prog.actions[a].name
            ));
        }
    }

    /// An entry's arguments, held in the entry, into action `a`'s parameters: their words straight
    /// into the parameter slots, each top word masked to the width.
    #[inline(never)]
    fn entry_args(&self, slots: &mut [u64], a: usize, args: &[Value]) {
        let Some(words) = self.match_action.param_words.get(a) else {
            return;
        };
        for &(s, m, p, k) in words {
            if let (Some(v), Some(x)) = (arg_word(args, p, k, m), slots.get_mut(s as usize)) {
                *x = v;
            }
        }
    }

    /// A hit's arguments held inline in its hot line (their words in parameter order), into action
    /// `a`'s parameters.
    #[inline(always)]
    fn inline_args(&self, slots: &mut [u64], a: usize, hot: &crate::tables::Hot) {
        if let Some(plan) = self.match_action.arg_plans.get(a) {
            if plan.words == hot.nargs {
                plan.write(slots, &hot.args);
                return;
            }
        }
        self.inline_args_by_word(slots, a, hot);
    }

    /// [`Engine::inline_args`] where the action's plan does not apply: word by word (kept out of
    /// line, so that the plan's path stays small where it is inlined).
    #[cold]
    #[inline(never)]
    fn inline_args_by_word(&self, slots: &mut [u64], a: usize, hot: &crate::tables::Hot) {
        let words = &hot.args[..(hot.nargs as usize).min(hot.args.len())];
        let ws = slots;
        let Some(params) = self.match_action.param_words.get(a) else {
            return;
        };
        for (&(s, m, _, _), v) in params.iter().zip(words) {
            debug_assert!((s as usize) < ws.len());
            // SAFETY: `param_words` holds only the program's slots and the sink slot after them,
            // all of which the worker has (checked on entry to `Engine::process`)
            unsafe { *ws.get_unchecked_mut(s as usize) = *v & m };
        }
    }

    /// [`Engine::apply_table`] for a table with one key of at most 64 bits and no action selector,
    /// its key `k` computed by the call site: a miss and a hit (arguments inline or not) on a table
    /// without per-entry state are handled here; anything else (an action profile group, a traced
    /// packet) takes the general path.
    #[inline(always)]
    pub(crate) fn apply_one_key(
        &self,
        w: &mut Worker,
        ti: usize,
        k: u64,
        hit: Option<Loc>,
        action_run: Option<Loc>,
    ) -> Flow {
        match self.select_one_key(w, ti, k, hit, action_run) {
            Ok(a) => self.run_action(w, a),
            Err(f) => f,
        }
    }

    /// [`Engine::apply_one_key`] up to the action: its arguments in its parameters, `hit` and
    /// `action_run` set; `Ok(action)` for the caller to run (the native backend runs it inline), or
    /// `Err(flow)` when the general path ran the whole apply.
    #[inline(always)]
    pub(crate) fn select_one_key(
        &self,
        w: &mut Worker,
        ti: usize,
        k: u64,
        hit: Option<Loc>,
        action_run: Option<Loc>,
    ) -> Result<usize, Flow> {
        if w.trace.is_some() || self.match_action.entry_state[ti] {
            std::hint::cold_path();
            return Err(self.apply_table(w, ti, hit, action_run));
        }
        let data = match w.tables.snapshots.get_mut(ti).and_then(Option::take) {
            Some(d) => d,
            None => self.match_action.tables[ti].data.load_full(),
        };
        // an empty table misses without a lookup
        let found = data.lookup_one(&self.prog.tables[ti], k);
        let chosen = self.choose_args(&mut w.slots, &data, found, false);
        if let Some(slot) = w.tables.snapshots.get_mut(ti) {
            *slot = Some(data);
        }
        match chosen {
            Some(a) => {
                self.chosen(w, ti, found.is_some(), a, hit, action_run);
                Ok(a)
            }
            None => {
                std::hint::cold_path();
                Err(self.apply_table(w, ti, hit, action_run))
            }
        }
    }

    /// [`Engine::select_one_key`] for native code: the lookup in the worker's table snapshot
    /// borrowed in place (no `Arc` moved out and back). Anything [`Engine::choose_args`] leaves
    /// (an action profile group, arguments not inline), a traced packet, a table with per-entry
    /// state or no snapshot take [`Engine::select_one_key`].
    #[inline(always)]
    pub(crate) fn select_native(
        &self,
        w: &mut Worker,
        ti: usize,
        k: u64,
        hit: Option<Loc>,
        action_run: Option<Loc>,
    ) -> Result<usize, Flow> {
        let general = w.trace.is_some() || self.match_action.entry_state.get(ti).is_none_or(|&s| s);
        if let (false, Some(Some(data)), Some(t)) = (
            general,
            w.tables.snapshots.get(ti),
            self.prog.tables.get(ti),
        ) {
            let found = data.lookup_one(t, k);
            if let Some(a) = self.choose_args(&mut w.slots, data, found, true) {
                self.chosen(w, ti, found.is_some(), a, hit, action_run);
                return Ok(a);
            }
        }
        std::hint::cold_path();
        self.select_one_key(w, ti, k, hit, action_run)
    }

    /// The lean one-key apply of native code: for a table version of the lean shape
    /// ([`crate::tables::TableData::lean`]) and an untraced packet, the lookup, the hit's
    /// arguments (inline in its hot line or from the entry) or the default's written into the
    /// action's parameters, the hit or miss counted, `hit` and `action_run` set: `Some(action)`
    /// for the caller to run. `None`, with nothing written, for anything else (a hit on an action
    /// profile group; the caller takes [`Engine::select_native`]). Panics nowhere (every access is
    /// checked or proven in range), so native code calls it without catching unwinds.
    #[inline(always)]
    pub(crate) fn select_lean(
        &self,
        w: &mut Worker,
        ti: usize,
        k: u64,
        hit: &Option<Loc>,
        action_run: &Option<Loc>,
    ) -> Option<usize> {
        if w.trace.is_some() {
            return None;
        }
        let data = w.tables.snapshots.get(ti)?.as_deref()?;
        let found = data.lookup_lean(k)?;
        let a = match found {
            Some(i) => {
                let h = data.hot_get(i)?;
                let a = h.action as usize;
                let plan = self.match_action.arg_plans.get(a)?;
                // an entry that selects never has the plan's count (`Hot::of`): tested below
                if h.nargs == plan.words {
                    plan.write(&mut w.slots, &h.args);
                } else {
                    // a selecting entry, arguments not inline (wide ones, or more than fit), or
                    // not as many words as the parameters take
                    std::hint::cold_path();
                    self.args_off_plan(&mut w.slots, data, i, h)?;
                }
                a
            }
            None => default_args(&mut w.slots, data) as usize,
        };
        // `chosen`'s work written out here: through `chosen` the router's packets took 9
        // instructions more (callgrind)
        if let Some((h, m)) = w.stats.tables.get(ti) {
            crate::bump(if found.is_some() { h } else { m });
        }
        if w.calls.cur_meter.is_some() {
            std::hint::cold_path();
            w.calls.cur_meter = None;
        }
        if let Some(h) = hit {
            if let Some(s) = w.slots.get_mut(h.slot as usize) {
                *s = found.is_some() as u64 & crate::bits::mask64(h.width);
            }
        }
        if let Some(r) = action_run {
            if let Some(s) = w.slots.get_mut(r.slot as usize) {
                *s = a as u64 & crate::bits::mask64(r.width);
            }
        }
        Some(a)
    }

    /// [`Engine::select_lean`] of an exact table indexed directly
    /// ([`crate::tables::TableData::lookup_direct`]) in its common cases only: a hit whose
    /// arguments its action's plan writes, or a miss whose default action writes at most
    /// [`crate::tables::INLINE_ARGS`] words: `Ok(action)`. `Err(Some(entry))`, nothing written,
    /// for a hit on an entry whose arguments are not in the plan's form (the caller goes on with
    /// [`Engine::direct_hit_args`]); `Err(None)`, nothing written, for anything else (another
    /// table, the meter of the last entry to forget, a default of more words; the caller then
    /// takes [`Engine::select_lean`]). Calls nothing, so that native code's helper around it needs
    /// no saved registers and hands the rest on by a tail call. For untraced packets only (native
    /// code's).
    #[inline(always)]
    pub(crate) fn select_direct(
        &self,
        w: &mut Worker,
        ti: usize,
        k: u64,
        hit: &Option<Loc>,
        action_run: &Option<Loc>,
    ) -> Result<usize, Option<usize>> {
        // generated code never runs on a traced packet (its entries hand those to the closures);
        // the meter of the last entry to forget (dropping it calls out) goes on elsewhere
        debug_assert!(w.trace.is_none());
        if w.calls.cur_meter.is_some() {
            return Err(None);
        }
        let Some(Some(data)) = w.tables.snapshots.get(ti).map(|d| d.as_deref()) else {
            return Err(None);
        };
        let found = data.lookup_direct(k).ok_or(None)?;
        match found {
            Some(i) => {
                let h = data.hot_get(i).ok_or(None)?;
                let a = h.action as usize;
                let plan = self.match_action.arg_plans.get(a).ok_or(None)?;
                // a selecting entry never has the plan's count (`Hot::of`)
                if h.nargs != plan.words {
                    return Err(Some(i));
                }
                plan.write(&mut w.slots, &h.args);
                // marked in each arm, `found` a constant in each
                lean_marked(w, ti, true, a, hit, action_run);
                Ok(a)
            }
            None => {
                let d = &data.default_writes;
                if !d.few {
                    return Err(None);
                }
                for &(s, v) in &d.inline {
                    debug_assert!((s as usize) < w.slots.len());
                    // SAFETY: as in `default_args`: the program's slots and the sink slot
                    unsafe { *w.slots.get_unchecked_mut(s as usize) = v };
                }
                let a = data.default.action as usize;
                lean_marked(w, ti, false, a, hit, action_run);
                Ok(a)
            }
        }
    }

    /// [`Engine::select_direct`]'s hit on entry `i` whose arguments are not in its action's plan's
    /// form: written word by word from its hot line, or from the entry when not inline; the hit
    /// counted, `hit` and `action_run` set. `None`, nothing written, for an entry that selects its
    /// action per packet (or a table version without it: the caller takes the general path).
    pub(crate) fn direct_hit_args(
        &self,
        w: &mut Worker,
        ti: usize,
        i: usize,
        hit: &Option<Loc>,
        action_run: &Option<Loc>,
    ) -> Option<usize> {
        let data = w.tables.snapshots.get(ti)?.as_deref()?;
        let h = data.hot_get(i)?;
        self.args_off_plan(&mut w.slots, data, i, h)?;
        let a = h.action as usize;
        lean_marked(w, ti, true, a, hit, action_run);
        Some(a)
    }

    /// The arguments of a hit on entry `i` (hot line `h`) that its action's plan does not write
    /// ([`Engine::select_lean`]'s cold branch, [`Engine::direct_hit_args`]): word by word from its
    /// hot line, or from the entry when not inline. `None`, nothing written, for an entry that
    /// selects its action per packet.
    #[inline(always)]
    fn args_off_plan(
        &self,
        slots: &mut [u64],
        data: &crate::tables::TableData,
        i: usize,
        h: &crate::tables::Hot,
    ) -> Option<()> {
        if h.selects {
            return None;
        }
        let a = h.action as usize;
        if h.nargs != crate::tables::Hot::NOT_INLINE {
            self.inline_args_by_word(slots, a, h);
        } else {
            let args = &data.entries.get(i)?.entry.action.args;
            self.entry_args(slots, a, args);
        }
        Some(())
    }

    /// A one-key apply's action once looked up (`found`: the entry hit), its arguments written
    /// into its parameters: the hit's (inline in its hot line or, unless `inline_only`, from the
    /// entry), the default action's on a miss. `None`, nothing written, for a hit the general
    /// path takes (an action profile group, or arguments not inline with `inline_only`).
    #[inline(always)]
    fn choose_args(
        &self,
        slots: &mut [u64],
        data: &crate::tables::TableData,
        found: Option<usize>,
        inline_only: bool,
    ) -> Option<usize> {
        let Some(i) = found else {
            return Some(default_args(slots, data) as usize);
        };
        let h = data.hot_get(i)?;
        if h.selects || (inline_only && h.nargs == crate::tables::Hot::NOT_INLINE) {
            std::hint::cold_path();
            return None;
        }
        if h.nargs != crate::tables::Hot::NOT_INLINE {
            self.inline_args(slots, h.action as usize, h);
            Some(h.action as usize)
        } else {
            // arguments not inline (wide ones, or more than fit)
            std::hint::cold_path();
            let c = &data.entries.get(i)?.entry.action;
            self.entry_args(slots, c.action as usize, &c.args);
            Some(c.action as usize)
        }
    }

    /// A one-key apply once action `a`'s arguments are in its parameters: the hit or miss
    /// counted, the meter of the last entry forgotten, `hit` and `action_run` set.
    #[inline(always)]
    fn chosen(
        &self,
        w: &mut Worker,
        ti: usize,
        found: bool,
        a: usize,
        hit: Option<Loc>,
        action_run: Option<Loc>,
    ) {
        if let Some((h, m)) = w.stats.tables.get(ti) {
            crate::bump(if found { h } else { m });
        }
        w.calls.cur_meter = None;
        self.mark_apply(w, found, a, hit, action_run);
    }

    /// The end of a table apply, once the action's arguments are in its parameters: `hit` and
    /// `action_run` set, the worker's table snapshot put back, the action run.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn finish_apply(
        &self,
        w: &mut Worker,
        ti: usize,
        data: std::sync::Arc<crate::tables::TableData>,
        found: bool,
        a: usize,
        hit: Option<Loc>,
        action_run: Option<Loc>,
    ) -> Flow {
        self.finish_select(w, ti, data, found, a, hit, action_run);
        self.run_action(w, a)
    }

    /// `hit` and `action_run` set, the worker's table snapshot put back.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn finish_select(
        &self,
        w: &mut Worker,
        ti: usize,
        data: std::sync::Arc<crate::tables::TableData>,
        found: bool,
        a: usize,
        hit: Option<Loc>,
        action_run: Option<Loc>,
    ) {
        self.mark_apply(w, found, a, hit, action_run);
        if let Some(slot) = w.tables.snapshots.get_mut(ti) {
            *slot = Some(data);
        }
    }

    /// An apply's `hit` and `action_run`, where the program reads them.
    #[inline(always)]
    fn mark_apply(
        &self,
        w: &mut Worker,
        found: bool,
        a: usize,
        hit: Option<Loc>,
        action_run: Option<Loc>,
    ) {
        // written checked: the lean applies of native code run this without catching unwinds
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

    /// A table's action run: its exit and parser errors go on, anything else ends with the apply.
    #[inline(always)]
    pub(crate) fn run_action(&self, w: &mut Worker, a: usize) -> Flow {
        match self.match_action.actions[a].run(self, w) {
            Flow::Exit => Flow::Exit,
            Flow::Reject(e) => Flow::Reject(e),
            _ => Flow::Next,
        }
    }

    /// The selector hash of a packet for table `ti`: the table's algorithm over its selector keys
    /// (each key's value as whole bytes, most significant first, in key order).
    #[inline(never)]
    fn selector_hash(&self, w: &mut Worker, ti: usize, key: &[u64]) -> u64 {
        let Some((algo, sel)) = &self.match_action.selectors[ti] else {
            return 0;
        };
        let t = &self.prog.tables[ti];
        w.emit.scratch.clear();
        for &k in sel {
            let (off, _) = self.match_action.key_layouts[ti][k];
            let nbytes = t.keys[k].width.div_ceil(8) as usize;
            for b in (0..nbytes).rev() {
                w.emit
                    .scratch
                    .push((key[off + b / 8] >> ((b % 8) * 8)) as u8);
            }
        }
        hash::compute(*algo, &w.emit.scratch, &mut w.calls.rng)
    }
}

/// What [`Engine::select_direct`] does once its action is chosen and its arguments written (no
/// meter of the last entry to forget): the hit or miss counted, `hit` and `action_run` set.
#[inline(always)]
fn lean_marked(
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
    lean_marks(w, found, a, hit, action_run);
}

/// `hit` and `action_run` of a lean apply set.
#[inline(always)]
fn lean_marks(w: &mut Worker, found: bool, a: usize, hit: &Option<Loc>, action_run: &Option<Loc>) {
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

/// A miss: the default action's arguments into its parameters (slot words resolved when the
/// table version was published); the action's index.
#[inline(always)]
fn default_args(slots: &mut [u64], data: &crate::tables::TableData) -> u32 {
    for quad in data.default_writes.all.chunks_exact(4) {
        for &(s, v) in quad {
            debug_assert!((s as usize) < slots.len());
            // SAFETY: `param_writes` keeps only the program's slots and the sink slot after
            // them, all of which the worker has (checked on entry to `Engine::process`)
            unsafe { *slots.get_unchecked_mut(s as usize) = v };
        }
    }
    data.default.action
}

pub(crate) mod arg_plan;
#[cfg(test)]
mod arg_plan_tests;
#[cfg(test)]
mod direct_tests;
#[cfg(test)]
mod lean_tests;
mod multi_key;
#[cfg(test)]
mod tests;
