//! One published version of a table's contents ([`TableData`]): its entries, the indexes that find
//! them (exact hash map, LPM levels, priority order and tuple space search) and the changes that
//! keep entries and indexes in step. Lookups on the packet path are in `lookup.rs`.

use super::entry::{meter_cell, Hot, Indirect, Installed};
use super::keys::{prefix_word_mask, HKey, KeyMap, HKEY_WORDS, MAX_KEY_WORDS};
use super::lpm32::Lpm32;
use super::parts::{Parts, Shape};
use super::scan::ScanRows;
use super::{tss, TableError};
use p4sec_ir::{ActionCall, FieldMatch, MatchKind, Table, TableEntry};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Selector keys do not take part in matching (they choose a group member): their matches are
/// stored as "any", whatever the writer gave.
fn without_selector_keys<'a>(t: &Table, e: &'a TableEntry) -> std::borrow::Cow<'a, TableEntry> {
    let sel = |(k, m): (&p4sec_ir::TableKey, &FieldMatch)| {
        k.kind == MatchKind::Selector && *m != FieldMatch::Any
    };
    if !t.keys.iter().zip(&e.matches).any(sel) {
        return std::borrow::Cow::Borrowed(e);
    }
    let mut n = e.clone();
    for (k, m) in t.keys.iter().zip(n.matches.iter_mut()) {
        if k.kind == MatchKind::Selector {
            *m = FieldMatch::Any;
        }
    }
    std::borrow::Cow::Owned(n)
}

fn strip_selector_keys(t: &Table, mut e: TableEntry) -> TableEntry {
    for (k, m) in t.keys.iter().zip(e.matches.iter_mut()) {
        if k.kind == MatchKind::Selector {
            *m = FieldMatch::Any;
        }
    }
    e
}

/// An exact or LPM table entry's packed key ([`TableData::index_key`]): its words and, when a
/// field is matched by prefix, the prefix length.
struct IndexKey {
    words: HKey,
    len: usize,
    plen: Option<u32>,
}

impl IndexKey {
    /// The key's words (the table's key width).
    fn key(&self) -> &[u64] {
        &self.words[..self.len]
    }

    /// A narrow LPM table's key (its one word) and prefix length (0 for an exact value).
    fn narrow(&self) -> (u32, u32) {
        (self.words[0] as u32, self.plen.unwrap_or(0))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// All keys exact (or no keys).
    Exact,
    /// One LPM key plus any number of exact keys (the LPM key is the last packed field).
    Lpm,
    /// Anything else: scan in priority order.
    Scan,
}

/// The lookup of a table version of the lean shape ([`TableData::lean`]), one byte for the packet
/// path to dispatch on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lean {
    /// Not of the lean shape.
    No,
    /// LPM, the key of at most 32 bits (`lpm32`).
    Lpm32,
    /// LPM, a wider key (`lpm`).
    Lpm,
    /// Exact (`exact`).
    Exact,
}

/// One published version of a table's contents.
#[derive(Debug)]
pub(crate) struct TableData {
    pub(super) kind: Kind,
    /// The installed entries; change them only through the methods here, which keep `hot` in step.
    pub entries: crate::chunkvec::ChunkVec<Arc<Installed>>,
    /// `hot[i]` mirrors what a hit on `entries[i]` needs.
    pub(super) hot: crate::chunkvec::ChunkVec<Hot>,
    pub(super) exact: KeyMap,
    /// (prefix length, masked key → entry index), longest first.
    pub(super) lpm: Vec<(u32, KeyMap)>,
    /// Per `lpm` level: the mask of the whole packed key (the LPM field's prefix, exact fields
    /// whole).
    pub(super) lpm_masks: Vec<HKey>,
    /// An LPM table of one key of at most 32 bits keeps its levels here instead (`lpm` and
    /// `lpm_masks` stay empty).
    pub(super) lpm32: Lpm32,
    /// An LPM table whose LPM key has at most 32 bits beside exact keys of at most 64 bits each
    /// keeps its levels per value of the exact keys here while it holds few such values (`lpm`
    /// and `lpm_masks` stay empty while `parts.on`).
    pub(super) parts: Parts,
    /// The multiplier of this table's 32-bit hash maps, drawn when the table was made.
    seed: u64,
    /// Whether the packet path's lean shape applies, and its lookup: one key of at most 64 bits,
    /// exact or LPM, no per-entry state (direct counter, meter, idle timeout) and no action
    /// selector. Hits on action profile groups and arguments not inline still take the general
    /// path.
    pub(crate) lean: Lean,
    /// `lean` is [`Lean::Lpm32`], or [`Lean::Exact`] (each tested by itself on the packet path).
    pub(super) lean_lpm32: bool,
    pub(super) lean_exact: bool,
    /// Entry indices in match order (priority desc, then seq asc).
    pub(super) order: Vec<usize>,
    /// Scan tables: the entries' matches compiled to words, in match order.
    pub(super) scan: ScanRows,
    /// Scan tables: the same entries grouped by mask tuple (searched once the table holds more than
    /// [`super::scan::SCAN_MAX`] entries).
    pub(super) tss: tss::Tss,

    pub default: ActionCall,
    /// The default action's arguments as (slot, word) writes into its parameters, each word masked
    /// to the parameter's width (see [`super::DefaultWrites`]); set by the engine whenever a
    /// version is published (`Engine::publish`).
    pub(crate) default_writes: super::DefaultWrites,
    next_seq: u64,
    /// Word layout of the packed key: (offset, words) per key field.
    pub(super) layout: Vec<(usize, usize)>,
    pub(super) key_words: usize,
    /// One key field of at most 32 bits: the hash indexes use 32-bit keys.
    pub(super) narrow_key: bool,
    lpm_field: Option<usize>,
}

super::clone_fields::clone_by_fields!(TableData {
    kind,
    entries,
    hot,
    exact,
    lpm,
    lpm_masks,
    lpm32,
    parts,
    seed,
    lean,
    lean_lpm32,
    lean_exact,
    order,
    scan,
    tss,
    default,
    default_writes,
    next_seq,
    layout,
    key_words,
    narrow_key,
    lpm_field,
});

/// How a table's versions index their entries (by its keys' kinds and words).
fn kind_of(t: &Table) -> Kind {
    let kinds: Vec<MatchKind> = t
        .keys
        .iter()
        .map(|k| k.kind)
        .filter(|k| *k != MatchKind::Selector)
        .collect();
    let lpms = kinds.iter().filter(|k| **k == MatchKind::Lpm).count();
    let others = kinds
        .iter()
        .filter(|k| !matches!(k, MatchKind::Exact | MatchKind::Lpm))
        .count();
    let total_words: usize = t
        .keys
        .iter()
        .map(|k| p4sec_ir::words_for(k.width) as usize)
        .sum();
    if others > 0 || lpms > 1 || total_words > HKEY_WORDS {
        Kind::Scan
    } else if lpms == 1 {
        Kind::Lpm
    } else {
        Kind::Exact
    }
}

/// The shape of an LPM table indexed in parts ([`Parts`]): several keys, the LPM one of at most
/// 32 bits, the others exact and of at most 64 bits each.
pub(super) fn parts_shape(t: &Table) -> Option<Shape> {
    let lpm_word = t.keys.iter().position(|k| k.kind == MatchKind::Lpm)?;
    let fits = (2..=HKEY_WORDS).contains(&t.keys.len())
        && (1..=32).contains(&t.keys[lpm_word].width)
        && t.keys.iter().enumerate().all(|(i, k)| {
            i == lpm_word || (k.kind == MatchKind::Exact && p4sec_ir::words_for(k.width) == 1)
        });
    (fits && kind_of(t) == Kind::Lpm).then_some(Shape {
        lpm_word,
        words: t.keys.len(),
        width: t.keys[lpm_word].width,
        exact1: (t.keys.len() == 2).then_some(1 - lpm_word),
    })
}

/// Whether table `t` has no per-entry state (direct counter, meter, idle timeout) and no action
/// selector: a hit is its entry's action with its arguments.
pub(crate) fn without_entry_state(t: &Table) -> bool {
    t.direct_counter.is_none()
        && t.direct_meter.is_none()
        && !t.support_timeout
        && !matches!(
            t.implementation,
            p4sec_ir::Implementation::ActionSelector(_)
        )
}

/// Whether table `t`'s versions are indexed in parts while they hold few values of their exact
/// keys ([`parts_shape`]; native code's `np_select_parts` serves its applies).
pub(crate) fn has_parts_shape(t: &Table) -> bool {
    parts_shape(t).is_some()
}

/// The lean shape of table `t`'s versions ([`TableData::lean`]), fixed by its declaration: one key
/// of at most 64 bits, exact or LPM, no per-entry state (direct counter, meter, idle timeout) and
/// no action selector. Native code chooses its apply helper by it.
pub(crate) fn lean_of(t: &Table) -> Lean {
    let kind = kind_of(t);
    let lean_shape = matches!(&t.keys[..], [k] if p4sec_ir::words_for(k.width) == 1
            && k.kind != MatchKind::Selector)
        && matches!(kind, Kind::Exact | Kind::Lpm)
        && without_entry_state(t);
    let narrow_key = matches!(&t.keys[..], [k] if k.width <= 32);
    match kind {
        _ if !lean_shape => Lean::No,
        Kind::Lpm if narrow_key => Lean::Lpm32,
        Kind::Lpm => Lean::Lpm,
        _ => Lean::Exact,
    }
}

impl TableData {
    /// An empty version of table `t` (its const entries installed), indexed for both engines.
    #[cfg(test)]
    pub fn new(t: &Table) -> Result<Self, String> {
        Self::with_hit_maps(t, true)
    }

    /// [`TableData::new`], a narrow LPM table's index with the hit maps native code reads only
    /// when `hit_maps` (a table the closure engine runs does without them: its writes and memory
    /// as before native code).
    pub fn with_hit_maps(t: &Table, hit_maps: bool) -> Result<Self, String> {
        let kind = kind_of(t);
        let mut layout = vec![];
        let mut off = 0;
        for k in &t.keys {
            let w = p4sec_ir::words_for(k.width) as usize;
            layout.push((off, w));
            off += w;
        }
        if off > MAX_KEY_WORDS {
            return Err(format!("table `{}`: the key takes {off} words of 64 bits (one or more per field), more than {MAX_KEY_WORDS}", t.name));
        }
        let lpm_field = t.keys.iter().position(|k| k.kind == MatchKind::Lpm);
        let narrow_key = matches!(&t.keys[..], [k] if k.width <= 32);
        let lean = lean_of(t);
        let seed = super::map32::table_seed();
        let lpm_width = lpm_field.map_or(0, |f| t.keys[f].width);
        let mut d = TableData {
            kind,
            entries: Default::default(),
            hot: Default::default(),
            exact: KeyMap::new(
                off,
                narrow_key,
                match (&t.keys[..], kind) {
                    ([k], Kind::Exact) => Some(k.width),
                    _ => None,
                },
                seed,
            ),
            lpm: vec![],
            lpm_masks: vec![],
            lpm32: Lpm32::new(
                (kind == Kind::Lpm && narrow_key).then_some(lpm_width),
                seed,
                hit_maps,
            ),
            parts: Parts::new(parts_shape(t), seed, hit_maps),
            seed,
            lean,
            lean_lpm32: lean == Lean::Lpm32,
            lean_exact: lean == Lean::Exact,
            order: vec![],
            scan: ScanRows::new(t),
            tss: Default::default(),
            default: t.default_action.clone(),
            default_writes: Default::default(),
            next_seq: 0,
            layout,
            key_words: off,
            narrow_key,
            lpm_field,
        };
        for e in &t.entries {
            d.insert(t, e.clone())?;
        }
        Ok(d)
    }

    /// The packed key of an exact or LPM table's entry `e` (whole exact values, prefixes masked
    /// to their length, other matches and selector fields zero) and its prefix length, built on
    /// the stack: no allocation per table write.
    fn index_key(&self, t: &Table, e: &TableEntry) -> IndexKey {
        // (exact and LPM tables' keys take at most `HKEY_WORDS` words: `kind_of` scans wider ones)
        debug_assert!(self.key_words <= HKEY_WORDS);
        let mut k = IndexKey {
            words: [0; HKEY_WORDS],
            len: self.key_words.min(HKEY_WORDS),
            plen: None,
        };
        for (i, (m, f)) in e.matches.iter().zip(&t.keys).enumerate() {
            let Some(&(off, words)) = self.layout.get(i) else {
                break;
            };
            if f.kind == MatchKind::Selector {
                continue;
            }
            let (value, mask) = match m {
                FieldMatch::Exact(v) => (v, None),
                FieldMatch::Lpm { value, prefix_len } => {
                    k.plen = Some(*prefix_len);
                    (value, Some(*prefix_len))
                }
                FieldMatch::Any => {
                    k.plen = Some(0);
                    continue;
                }
                _ => continue,
            };
            for j in 0..words {
                let w = value.words.get(j).copied().unwrap_or(0);
                let w = match mask {
                    Some(plen) => w & prefix_word_mask(f.width, plen, j),
                    None => w,
                };
                if let Some(slot) = k.words.get_mut(off + j) {
                    *slot = w;
                }
            }
        }
        k
    }

    /// An LPM table of one key of at most 32 bits (its levels in `lpm32`).
    #[inline(always)]
    pub(super) fn lpm_narrow(&self) -> bool {
        self.kind == Kind::Lpm && self.narrow_key
    }

    fn same_match(a: &TableEntry, b: &TableEntry) -> bool {
        a.matches == b.matches && a.priority == b.priority
    }

    /// Find an installed entry with the same match (and priority).
    pub fn find(&self, t: &Table, e: &TableEntry) -> Option<usize> {
        let e = &*without_selector_keys(t, e);
        match self.kind {
            Kind::Exact => {
                let k = self.index_key(t, e);
                self.exact
                    .get(k.key())
                    .filter(|i| Self::same_match(&self.entries[*i].entry, e))
            }
            Kind::Lpm => {
                let k = self.index_key(t, e);
                if self.lpm_narrow() {
                    let (k, plen) = k.narrow();
                    return self
                        .lpm32
                        .get_exact(k, plen)
                        .map(|i| i as usize)
                        .filter(|i| Self::same_match(&self.entries[*i].entry, e));
                }
                let plen = k.plen.unwrap_or(0);
                if self.parts.on {
                    return self
                        .parts
                        .get_exact(k.key(), plen)
                        .map(|i| i as usize)
                        .filter(|i| Self::same_match(&self.entries[*i].entry, e));
                }
                self.lpm
                    .iter()
                    .find(|(l, _)| *l == plen)
                    .and_then(|(_, m)| m.get(k.key()))
                    .filter(|i| Self::same_match(&self.entries[*i].entry, e))
            }
            Kind::Scan => {
                let (mask, k) = self.tss_key(t, e);
                self.tss
                    .candidates(&mask, &k)
                    .find(|&i| Self::same_match(&self.entries[i].entry, e))
            }
        }
    }

    /// The packed-key mask of LPM level `plen`: the LPM field's top `plen` bits, every other field
    /// whole.
    fn lpm_mask(&self, t: &Table, plen: u32) -> HKey {
        let mut m = [0u64; HKEY_WORDS];
        for (fi, &(off, words)) in self.layout.iter().enumerate() {
            for j in 0..words {
                if off + j < HKEY_WORDS {
                    m[off + j] = if Some(fi) == self.lpm_field {
                        prefix_word_mask(t.keys[fi].width, plen, j)
                    } else if t.keys[fi].kind == MatchKind::Selector {
                        0
                    } else {
                        u64::MAX
                    };
                }
            }
        }
        m
    }

    fn index_add(&mut self, t: &Table, i: usize) {
        // (the entry's own `Arc`, not a copy of the entry: the index is changed through `self`)
        let inst = Arc::clone(&self.entries[i]);
        let e = &inst.entry;
        match self.kind {
            Kind::Exact => {
                let k = self.index_key(t, e);
                self.exact.insert(k.key(), i);
            }
            Kind::Lpm => {
                let k = self.index_key(t, e);
                if self.lpm_narrow() {
                    let (k, plen) = k.narrow();
                    self.lpm32.insert(k, plen, i as u32, &self.hot[i]);
                    return;
                }
                let plen = k.plen.unwrap_or(0);
                if self.parts.on {
                    if self.parts.insert(k.key(), plen, i as u32, &self.hot[i]) {
                        return;
                    }
                    // one value of the exact keys more than the parts take: every entry (this
                    // one too) indexed in the general levels instead
                    self.parts.give_up();
                    for j in 0..self.entries.len() {
                        self.index_add(t, j);
                    }
                    return;
                }
                let pos = match self.lpm.iter().position(|(l, _)| *l <= plen) {
                    Some(p) if self.lpm[p].0 == plen => p,
                    Some(p) => {
                        self.lpm.insert(
                            p,
                            (
                                plen,
                                KeyMap::new(self.key_words, self.narrow_key, None, self.seed),
                            ),
                        );
                        self.lpm_masks.insert(p, self.lpm_mask(t, plen));
                        p
                    }
                    None => {
                        self.lpm.push((
                            plen,
                            KeyMap::new(self.key_words, self.narrow_key, None, self.seed),
                        ));
                        self.lpm_masks.push(self.lpm_mask(t, plen));
                        self.lpm.len() - 1
                    }
                };
                self.lpm[pos].1.insert(k.key(), i);
            }
            Kind::Scan => {
                let ents = &self.entries;
                let key = |j: usize| (std::cmp::Reverse(ents[j].entry.priority), ents[j].seq);
                let p = self.order.partition_point(|&j| key(j) < key(i));
                self.order.insert(p, i);
                let ents = &self.entries;
                let n = self.order.len();
                let in_order = self.order.iter().map(|&j| &ents[j].entry);
                self.scan.rebuild(t, in_order, n);
                let (mask, k) = self.tss_key(t, e);
                self.tss.add(&mask, &k, key(i), i as u32);
            }
        }
    }

    fn index_remove(&mut self, t: &Table, i: usize) {
        // (the entry's own `Arc`, not a copy of the entry: the index is changed through `self`)
        let inst = Arc::clone(&self.entries[i]);
        let e = &inst.entry;
        match self.kind {
            Kind::Exact => {
                let k = self.index_key(t, e);
                self.exact.remove(k.key());
            }
            Kind::Lpm => {
                let k = self.index_key(t, e);
                if self.lpm_narrow() {
                    let (k, plen) = k.narrow();
                    self.lpm32.remove(k, plen);
                    return;
                }
                let plen = k.plen.unwrap_or(0);
                if self.parts.on {
                    self.parts.remove(k.key(), plen);
                    return;
                }
                if let Some(p) = self.lpm.iter().position(|(l, _)| *l == plen) {
                    self.lpm[p].1.remove(k.key());
                    if self.lpm[p].1.is_empty() {
                        self.lpm.remove(p);
                        self.lpm_masks.remove(p);
                    }
                }
            }
            Kind::Scan => {
                self.order.retain(|&j| j != i);
                let ents = &self.entries;
                let n = self.order.len();
                let in_order = self.order.iter().map(|&j| &ents[j].entry);
                self.scan.rebuild(t, in_order, n);
                let (mask, k) = self.tss_key(t, e);
                self.tss.remove(&mask, &k, i as u32);
            }
        }
    }

    /// An entry's mask tuple and masked key for tuple space search (range fields: mask zero).
    fn tss_key(&self, t: &Table, e: &TableEntry) -> (Vec<u64>, Vec<u64>) {
        let mut mask = vec![0u64; self.key_words];
        let mut key = vec![0u64; self.key_words];
        for (fi, m) in e.matches.iter().enumerate() {
            let (off, words) = self.layout[fi];
            let width = t.keys[fi].width;
            for j in 0..words {
                let (v, mk) = match m {
                    FieldMatch::Exact(v) | FieldMatch::Optional(Some(v)) => {
                        (v.words.get(j).copied().unwrap_or(0), u64::MAX)
                    }
                    FieldMatch::Ternary { value, mask } => (
                        value.words.get(j).copied().unwrap_or(0),
                        mask.words.get(j).copied().unwrap_or(0),
                    ),
                    FieldMatch::Lpm { value, prefix_len } => (
                        value.words.get(j).copied().unwrap_or(0),
                        prefix_word_mask(width, *prefix_len, j),
                    ),
                    FieldMatch::Any | FieldMatch::Optional(None) | FieldMatch::Range { .. } => {
                        (0, 0)
                    }
                };
                mask[off + j] = mk;
                key[off + j] = v & mk;
            }
        }
        (mask, key)
    }

    pub fn insert(&mut self, t: &Table, e: TableEntry) -> Result<(), String> {
        Ok(self.insert_with(t, e, None, None)?)
    }

    /// Insert an entry with what it refers to in the table's action profile or selector (if any)
    /// and the initial configuration of its direct meter (`None`: every packet green).
    pub fn insert_with(
        &mut self,
        t: &Table,
        e: TableEntry,
        indirect: Option<Arc<Indirect>>,
        meter: Option<crate::meters::MeterRates>,
    ) -> Result<(), TableError> {
        let e = strip_selector_keys(t, e);
        if self.find(t, &e).is_some() {
            return Err(TableError::exists(format!(
                "table `{}`: an entry with this match already exists",
                t.name
            )));
        }
        if self.entries.len() >= t.size as usize {
            return Err(TableError::full(format!(
                "table `{}` is full ({} entries)",
                t.name, t.size
            )));
        }
        self.next_seq += 1;
        // entries of tables with a direct meter always have a cell: it counts packets per colour
        // even while unconfigured (all green)
        let cell = if t.direct_meter.is_some() {
            Some(meter_cell(meter))
        } else {
            meter.map(|r| meter_cell(Some(r)))
        };
        let mut inst = Installed::new(e, self.next_seq, 0, 0, cell);
        inst.indirect = indirect;
        self.hot.push(Hot::of(&inst));
        self.entries.push(Arc::new(inst));
        let i = self.entries.len() - 1;
        self.index_add(t, i);
        Ok(())
    }

    pub fn modify(&mut self, t: &Table, e: TableEntry) -> Result<(), String> {
        Ok(self.modify_with(t, e, None, None)?)
    }

    /// Replace the action of an entry (and what it refers to in the table's action profile or
    /// selector), keeping its counters; `meter`: `None` keeps the direct meter, `Some(rates)`
    /// configures it anew (`Some(None)`: back to every packet green).
    pub fn modify_with(
        &mut self,
        t: &Table,
        e: TableEntry,
        indirect: Option<Arc<Indirect>>,
        meter: Option<Option<crate::meters::MeterRates>>,
    ) -> Result<(), TableError> {
        let e = strip_selector_keys(t, e);
        let i = self.find(t, &e).ok_or_else(|| TableError::no_entry(t))?;
        let old = &self.entries[i];
        // a new configuration is a new cell (the old version stays as it was until the new one is
        // published), with the per-colour counts carried over
        let meter = match meter {
            None => old.meter.clone(),
            Some(None) if t.direct_meter.is_none() => None,
            Some(r) => {
                let cell = meter_cell(r);
                if let Some(o) = &old.meter {
                    cell.set_counts(o.counts());
                }
                Some(cell)
            }
        };
        let mut inst = Installed::new(
            e,
            old.seq,
            old.packets.load(Ordering::Relaxed),
            old.bytes.load(Ordering::Relaxed),
            meter,
        );
        inst.indirect = indirect;
        inst.keep_idle_state(old);
        self.replace(t, i, inst);
        Ok(())
    }

    /// A retired version kept only for its arrays: its entries (and what they hold: counters,
    /// meters) let go; `clone_from` gives it a version's entries again.
    pub(crate) fn let_go_of_entries(&mut self) {
        self.entries = Default::default();
        self.hot = Default::default();
    }

    /// Replace entry `i` (same match) with `inst`.
    pub fn replace(&mut self, t: &Table, i: usize, inst: Installed) {
        self.hot[i] = Hot::of(&inst);
        self.entries[i] = Arc::new(inst);
        if (self.lpm_narrow() && self.lpm32.has_hits()) || self.parts.has_hits() {
            // the copy of what a hit needs in the key's slot (the key's entry index is unchanged)
            self.index_add(t, i);
        }
    }

    /// What a hit on entry `i` needs (see [`Hot`]).
    #[inline]
    pub fn hot(&self, i: usize) -> &Hot {
        &self.hot[i]
    }

    /// [`TableData::hot`], `None` past the entries.
    #[inline(always)]
    pub fn hot_get(&self, i: usize) -> Option<&Hot> {
        self.hot.get(i)
    }

    /// Set the idle timeout of the entry with this match (0: none); its idle period starts anew.
    pub fn set_idle_timeout(
        &mut self,
        t: &Table,
        e: &TableEntry,
        ns: u64,
    ) -> Result<(), TableError> {
        let e = strip_selector_keys(t, e.clone());
        let i = self.find(t, &e).ok_or_else(|| TableError::no_entry(t))?;
        let mut n = (*self.entries[i]).clone();
        n.idle_timeout_ns = ns;
        n.idle_notified = AtomicU64::new(u64::MAX);
        self.replace(t, i, n);
        Ok(())
    }

    /// Give entry `i` another action and reference (a member or group of its action profile
    /// changed), keeping its match, counters and meter.
    pub fn set_indirect(
        &mut self,
        t: &Table,
        i: usize,
        action: ActionCall,
        indirect: Option<Arc<Indirect>>,
    ) {
        let Some(old) = self.entries.get(i) else {
            return;
        };
        let e = TableEntry {
            action,
            ..old.entry.clone()
        };
        let mut inst = Installed::new(
            e,
            old.seq,
            old.packets.load(Ordering::Relaxed),
            old.bytes.load(Ordering::Relaxed),
            old.meter.clone(),
        );
        inst.indirect = indirect;
        inst.keep_idle_state(old);
        self.replace(t, i, inst);
    }

    pub fn delete(&mut self, t: &Table, e: &TableEntry) -> Result<TableEntry, TableError> {
        let i = self.find(t, e).ok_or_else(|| TableError::no_entry(t))?;
        self.index_remove(t, i);
        let last = self.entries.len() - 1;
        if i != last {
            // move the last entry into slot i and repoint its index
            self.index_remove(t, last);
            self.entries.swap(i, last);
            self.hot.swap(i, last);
            self.hot.pop();
            let removed = self.entries.pop().expect("entry");
            self.index_add(t, i);
            return Ok(removed.entry.clone());
        }
        self.hot.pop();
        Ok(self.entries.pop().expect("entry").entry.clone())
    }

    pub fn clear(&mut self, _t: &Table) {
        self.entries.clear();
        self.hot.clear();
        self.exact.clear();
        self.lpm.clear();
        self.lpm_masks.clear();
        self.lpm32.clear();
        self.parts.clear();
        self.order.clear();
        self.scan.clear();
        self.tss.clear();
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod two_word_tests;
