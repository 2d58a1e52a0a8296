//! Match-action tables built for lookup speed: exact tables are hash maps on the packed key (an
//! array for one key of at most 10 bits), single-key LPM tables are hash maps per prefix length
//! probed longest first, everything else (ternary, range, optional, mixed keys) is a
//! priority-ordered list. A table's contents are immutable once published; writers build a new
//! version and swap it in (RCU), so lookups never take a lock.

mod tss;

use p4sec_ir::{ActionCall, FieldMatch, MatchKind, Table, TableEntry, Value};
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Words of a packed lookup key on the fast path (the key buffer on the stack).
pub const KEY_WORDS: usize = 16;
/// The most words a table's key may take (keys above `KEY_WORDS` words take a slower path).
pub const MAX_KEY_WORDS: usize = 1024;
/// Words of a hashed (exact/LPM) key: wider keys use the scan kind.
const HKEY_WORDS: usize = 4;
type HKey = [u64; HKEY_WORDS];

fn hkey(words: &[u64]) -> HKey {
    let mut k = [0u64; HKEY_WORDS];
    k[..words.len()].copy_from_slice(words);
    k
}

/// Exact tables with one key of at most this many bits (an ingress port has 9) are indexed
/// directly.
const DIRECT_BITS: u32 = 10;

/// A hash index from packed keys to entry indices; one-word keys (most tables) are stored
/// compactly, and a narrow enough one indexes an array.
#[derive(Clone, Debug)]
enum KeyMap {
    /// One key of at most [`DIRECT_BITS`] bits: per key value, the entry index + 1 (0: none), and
    /// the number of keys present.
    Direct(Box<[u32]>, usize),
    /// One key of at most 32 bits: 8-byte buckets, so more of a large table stays in cache.
    Narrow(FxHashMap<u32, u32>),
    One(FxHashMap<u64, u32>),
    Wide(FxHashMap<HKey, u32>),
}

impl KeyMap {
    /// `direct`: the width of the table's one key when it may be indexed directly.
    fn new(words: usize, narrow: bool, direct: Option<u32>) -> Self {
        match direct {
            Some(w) if w <= DIRECT_BITS => KeyMap::Direct(vec![0; 1 << w].into_boxed_slice(), 0),
            _ if narrow => KeyMap::Narrow(FxHashMap::default()),
            _ if words <= 1 => KeyMap::One(FxHashMap::default()),
            _ => KeyMap::Wide(FxHashMap::default()),
        }
    }
    #[inline]
    fn get(&self, k: &[u64]) -> Option<usize> {
        match self {
            KeyMap::Direct(a, _) => Self::direct_get(a, k.first().copied().unwrap_or(0)),
            KeyMap::Narrow(m) => m
                .get(&(k.first().copied().unwrap_or(0) as u32))
                .map(|i| *i as usize),
            KeyMap::One(m) => m.get(&k.first().copied().unwrap_or(0)).map(|i| *i as usize),
            KeyMap::Wide(m) => m.get(&hkey(k)).map(|i| *i as usize),
        }
    }
    #[inline]
    fn direct_get(a: &[u32], k: u64) -> Option<usize> {
        match usize::try_from(k).ok().and_then(|k| a.get(k)) {
            Some(&i) if i != 0 => Some(i as usize - 1),
            _ => None,
        }
    }
    #[inline(always)]
    fn get_one(&self, k: u64) -> Option<usize> {
        match self {
            KeyMap::Direct(a, _) => Self::direct_get(a, k),
            KeyMap::Narrow(m) => m.get(&(k as u32)).map(|i| *i as usize),
            KeyMap::One(m) => m.get(&k).map(|i| *i as usize),
            KeyMap::Wide(m) => m.get(&hkey(&[k])).map(|i| *i as usize),
        }
    }
    fn insert(&mut self, k: &[u64], i: usize) {
        if let KeyMap::Direct(a, n) = self {
            let kv = k.first().copied().unwrap_or(0);
            match usize::try_from(kv).ok().filter(|&x| x < a.len()) {
                Some(x) => {
                    if a[x] == 0 {
                        *n += 1;
                    }
                    a[x] = i as u32 + 1;
                    return;
                }
                // a key beyond the array (the entry checks keep it from happening): the index
                // becomes a hash map with every key it holds, then takes this one
                None => {
                    let m: FxHashMap<u32, u32> = a
                        .iter()
                        .enumerate()
                        .filter(|(_, v)| **v != 0)
                        .map(|(x, v)| (x as u32, v - 1))
                        .collect();
                    *self = if kv <= u32::MAX as u64 {
                        KeyMap::Narrow(m)
                    } else {
                        KeyMap::One(m.into_iter().map(|(x, v)| (x as u64, v)).collect())
                    };
                }
            }
        }
        match self {
            KeyMap::Direct(..) => unreachable!("handled above"),
            KeyMap::Narrow(m) => {
                m.insert(k.first().copied().unwrap_or(0) as u32, i as u32);
            }
            KeyMap::One(m) => {
                m.insert(k.first().copied().unwrap_or(0), i as u32);
            }
            KeyMap::Wide(m) => {
                m.insert(hkey(k), i as u32);
            }
        }
    }
    fn remove(&mut self, k: &[u64]) {
        match self {
            KeyMap::Direct(a, n) => {
                let kv = k.first().copied().unwrap_or(0);
                if let Some(v) = usize::try_from(kv).ok().and_then(|x| a.get_mut(x)) {
                    if *v != 0 {
                        *v = 0;
                        *n -= 1;
                    }
                }
            }
            KeyMap::Narrow(m) => {
                m.remove(&(k.first().copied().unwrap_or(0) as u32));
            }
            KeyMap::One(m) => {
                m.remove(&k.first().copied().unwrap_or(0));
            }
            KeyMap::Wide(m) => {
                m.remove(&hkey(k));
            }
        }
    }
    fn is_empty(&self) -> bool {
        match self {
            KeyMap::Direct(_, n) => *n == 0,
            KeyMap::Narrow(m) => m.is_empty(),
            KeyMap::One(m) => m.is_empty(),
            KeyMap::Wide(m) => m.is_empty(),
        }
    }
    fn clear(&mut self) {
        match self {
            KeyMap::Direct(a, n) => {
                a.fill(0);
                *n = 0;
            }
            KeyMap::Narrow(m) => m.clear(),
            KeyMap::One(m) => m.clear(),
            KeyMap::Wide(m) => m.clear(),
        }
    }
}

/// One installed entry with its per-entry direct counter.
#[derive(Debug)]
pub struct Installed {
    pub entry: TableEntry,
    /// Insertion sequence number: among equal priorities the earlier entry wins.
    pub seq: u64,
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    /// Per-entry meter configuration (direct meters): (cir, cbs, pir, pbs) and its state.
    pub meter: Option<Arc<crate::meters::MeterCell>>,
    /// The action arguments as machine words held in the entry itself, when all of them together
    /// take at most [`INLINE_ARGS`] words (saves following a pointer per argument on every hit).
    pub inline_args: Option<([u64; INLINE_ARGS], u8)>,
    /// Entries of tables with an action profile or selector: the member, group or action set the
    /// entry refers to (the entry's `action` is a member's action; groups and action sets choose
    /// per packet).
    pub indirect: Option<Arc<Indirect>>,
    /// Idle timeout (tables with `support_timeout`): 0 for none.
    pub idle_timeout_ns: u64,
    /// When the entry was last hit ([`crate::coarse_ms`]; its insertion until the first hit).
    /// Written only for tables with `support_timeout`.
    pub last_hit: AtomicU64,
    /// The `last_hit` for which the controller was told the entry is idle (`u64::MAX`: not told):
    /// it is told once per idle period.
    pub idle_notified: AtomicU64,
}

pub const INLINE_ARGS: usize = 3;

/// Scan tables with at most this many entries are searched in order; larger ones by tuple space
/// search.
const SCAN_MAX: usize = 8;

/// What a hit needs from an entry, kept contiguously beside the entries (one cache line per hit
/// instead of following the entry's pointer): the action and its arguments when they are held
/// inline.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(32))]
pub struct Hot {
    pub action: u32,
    /// Number of inline argument words (all the arguments' words, in parameter order, low words
    /// first), or [`Hot::NOT_INLINE`] when the entry's `action.args` must be used.
    pub nargs: u8,
    /// The entry refers to an action profile group or action set (the action is chosen per packet).
    pub selects: bool,
    pub args: [u64; INLINE_ARGS],
}

impl Hot {
    pub const NOT_INLINE: u8 = u8::MAX;
    fn of(e: &Installed) -> Hot {
        let (args, nargs) = e.inline_args.unwrap_or(([0; INLINE_ARGS], Hot::NOT_INLINE));
        Hot {
            action: e.entry.action.action,
            nargs,
            selects: e.indirect.as_deref().is_some_and(Indirect::selects),
            args,
        }
    }
}

/// What an entry of a table implemented by an action profile or selector refers to (P4Runtime's
/// `TableAction`): an action profile member, a group of members, or a one-shot action set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProfileRef {
    Member(u32),
    Group(u32),
    ActionSet,
}

/// An indirect entry's reference and, for groups and action sets, the weighted actions a packet
/// chooses from by the hash of the table's selector keys.
#[derive(Clone, Debug, PartialEq)]
pub struct Indirect {
    pub reference: ProfileRef,
    /// (action, weight); empty for members (and for empty groups, which behave as a table miss).
    pub choices: Vec<(ActionCall, u32)>,
    /// Running sums of the weights.
    ends: Vec<u64>,
}

impl Indirect {
    pub fn new(reference: ProfileRef, choices: Vec<(ActionCall, u32)>) -> Indirect {
        let mut sum = 0u64;
        let ends = choices
            .iter()
            .map(|(_, w)| {
                sum += (*w).max(1) as u64;
                sum
            })
            .collect();
        Indirect {
            reference,
            choices,
            ends,
        }
    }
    /// Does a packet choose among `choices` (groups and action sets), rather than run the entry's
    /// action?
    #[inline]
    pub fn selects(&self) -> bool {
        !matches!(self.reference, ProfileRef::Member(_))
    }
    /// The action chosen by hash value `h` (weighted); `None` for an empty group.
    #[inline]
    pub fn pick(&self, h: u64) -> Option<&ActionCall> {
        let total = *self.ends.last()?;
        let x = h % total;
        let i = self.ends.partition_point(|e| *e <= x);
        self.choices.get(i).map(|(a, _)| a)
    }
}

impl Installed {
    /// Take over the idle-timeout state of the entry this one replaces.
    fn keep_idle_state(&mut self, old: &Installed) {
        self.idle_timeout_ns = old.idle_timeout_ns;
        self.last_hit = AtomicU64::new(old.last_hit.load(Ordering::Relaxed));
        self.idle_notified = AtomicU64::new(old.idle_notified.load(Ordering::Relaxed));
    }
    pub fn new(
        entry: TableEntry,
        seq: u64,
        packets: u64,
        bytes: u64,
        meter: Option<Arc<crate::meters::MeterCell>>,
    ) -> Installed {
        let args = &entry.action.args;
        // the arguments' words in the order of the action's parameter words (`param_word_layout`):
        // each argument in turn, low words first
        let nwords: usize = args
            .iter()
            .map(|v| p4sec_ir::words_for(v.width) as usize)
            .sum();
        let inline_args = (nwords <= INLINE_ARGS).then(|| {
            let mut a = [0u64; INLINE_ARGS];
            let words = args.iter().flat_map(|v| {
                (0..p4sec_ir::words_for(v.width) as usize)
                    .map(|k| v.words.get(k).copied().unwrap_or(0))
            });
            for (x, wd) in a.iter_mut().zip(words) {
                *x = wd;
            }
            (a, nwords as u8)
        });
        Installed {
            entry,
            seq,
            packets: AtomicU64::new(packets),
            bytes: AtomicU64::new(bytes),
            meter,
            inline_args,
            indirect: None,
            idle_timeout_ns: 0,
            last_hit: AtomicU64::new(crate::coarse_ms()),
            idle_notified: AtomicU64::new(u64::MAX),
        }
    }
}

impl Clone for Installed {
    fn clone(&self) -> Self {
        let mut c = Installed::new(
            self.entry.clone(),
            self.seq,
            self.packets.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
            self.meter.clone(),
        );
        c.indirect = self.indirect.clone();
        c.keep_idle_state(self);
        c
    }
}

/// A meter cell configured with `rates` (a direct meter's state for one entry).
fn meter_cell(rates: Option<crate::meters::MeterRates>) -> Arc<crate::meters::MeterCell> {
    let cell = Arc::new(crate::meters::MeterCell::default());
    cell.configure(rates);
    cell
}

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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// All keys exact (or no keys).
    Exact,
    /// One LPM key plus any number of exact keys (the LPM key is the last packed field).
    Lpm,
    /// Anything else: scan in priority order.
    Scan,
}

/// One published version of a table's contents.
#[derive(Clone, Debug)]
pub struct TableData {
    kind: Kind,
    /// The installed entries; change them only through the methods here, which keep `hot` in step.
    pub entries: crate::chunkvec::ChunkVec<Arc<Installed>>,
    /// `hot[i]` mirrors what a hit on `entries[i]` needs.
    hot: crate::chunkvec::ChunkVec<Hot>,
    exact: KeyMap,
    /// (prefix length, masked key → entry index), longest first.
    lpm: Vec<(u32, KeyMap)>,
    /// Per `lpm` level: the mask of the whole packed key (the LPM field's prefix, exact fields
    /// whole).
    lpm_masks: Vec<HKey>,
    /// Entry indices in match order (priority desc, then seq asc).
    order: Vec<usize>,
    /// Scan tables: the same entries grouped by mask tuple (searched once the table holds more than
    /// [`SCAN_MAX`] entries).
    tss: tss::Tss,

    pub default: ActionCall,
    /// The default action's arguments as (slot, word) writes into its parameters, each word masked
    /// to the parameter's width, padded to a multiple of four with writes into the worker's sink
    /// slot; set by the engine whenever a version is published (`Engine::publish`).
    pub default_writes: Vec<(u32, u64)>,
    next_seq: u64,
    /// Word layout of the packed key: (offset, words) per key field.
    layout: Vec<(usize, usize)>,
    key_words: usize,
    /// One key field of at most 32 bits: the hash indexes use 32-bit keys.
    narrow_key: bool,
    lpm_field: Option<usize>,
}

/// Pack a field value (width `w`) into `words` little-endian words.
fn pack(v: &Value, out: &mut Vec<u64>, words: usize) {
    for i in 0..words {
        out.push(v.words.get(i).copied().unwrap_or(0));
    }
}

/// Word `j` of the mask selecting the top `plen` bits of a `width`-bit field.
#[inline]
fn prefix_word_mask(width: u32, plen: u32, j: usize) -> u64 {
    let keep_from = width - plen.min(width);
    let lo = j as u32 * 64;
    let hi = (lo + 64).min(width);
    if hi <= lo || keep_from >= hi {
        return 0;
    }
    let below = keep_from.saturating_sub(lo);
    let top = hi - lo;
    let upper = if top >= 64 {
        u64::MAX
    } else {
        (1u64 << top) - 1
    };
    upper & !((1u64 << below.min(63)) - 1) & if below >= 64 { 0 } else { u64::MAX }
}

fn prefix_mask(width: u32, plen: u32, words: usize) -> Vec<u64> {
    (0..words)
        .map(|j| prefix_word_mask(width, plen, j))
        .collect()
}

impl TableData {
    pub fn new(t: &Table) -> Result<Self, String> {
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
        let kind = if others > 0 || lpms > 1 || total_words > HKEY_WORDS {
            Kind::Scan
        } else if lpms == 1 {
            Kind::Lpm
        } else {
            Kind::Exact
        };
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
            ),
            lpm: vec![],
            lpm_masks: vec![],
            order: vec![],
            tss: Default::default(),
            default: t.default_action.clone(),
            default_writes: vec![],
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

    fn index_key(&self, t: &Table, e: &TableEntry) -> (Vec<u64>, Option<u32>) {
        let mut key = Vec::with_capacity(self.key_words);
        let mut plen = None;
        for (i, (m, k)) in e.matches.iter().zip(&t.keys).enumerate() {
            let words = self.layout[i].1;
            if k.kind == MatchKind::Selector {
                key.extend(std::iter::repeat(0).take(words));
                continue;
            }
            match m {
                FieldMatch::Exact(v) => pack(v, &mut key, words),
                FieldMatch::Lpm { value, prefix_len } => {
                    let mask = prefix_mask(k.width, *prefix_len, words);
                    for (j, mw) in mask.iter().enumerate() {
                        key.push(value.words.get(j).copied().unwrap_or(0) & mw);
                    }
                    plen = Some(*prefix_len);
                }
                FieldMatch::Any => {
                    key.extend(std::iter::repeat(0).take(words));
                    plen = Some(0);
                }
                _ => key.extend(std::iter::repeat(0).take(words)),
            }
        }
        (key, plen)
    }

    fn same_match(a: &TableEntry, b: &TableEntry) -> bool {
        a.matches == b.matches && a.priority == b.priority
    }

    /// Find an installed entry with the same match (and priority).
    pub fn find(&self, t: &Table, e: &TableEntry) -> Option<usize> {
        let e = &*without_selector_keys(t, e);
        match self.kind {
            Kind::Exact => {
                let (k, _) = self.index_key(t, e);
                self.exact
                    .get(&k)
                    .filter(|i| Self::same_match(&self.entries[*i].entry, e))
            }
            Kind::Lpm => {
                let (k, plen) = self.index_key(t, e);
                let plen = plen.unwrap_or(0);
                self.lpm
                    .iter()
                    .find(|(l, _)| *l == plen)
                    .and_then(|(_, m)| m.get(&k))
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
        let e = self.entries[i].entry.clone();
        match self.kind {
            Kind::Exact => {
                let (k, _) = self.index_key(t, &e);
                self.exact.insert(&k, i);
            }
            Kind::Lpm => {
                let (k, plen) = self.index_key(t, &e);
                let plen = plen.unwrap_or(0);
                let pos = match self.lpm.iter().position(|(l, _)| *l <= plen) {
                    Some(p) if self.lpm[p].0 == plen => p,
                    Some(p) => {
                        self.lpm.insert(
                            p,
                            (plen, KeyMap::new(self.key_words, self.narrow_key, None)),
                        );
                        self.lpm_masks.insert(p, self.lpm_mask(t, plen));
                        p
                    }
                    None => {
                        self.lpm
                            .push((plen, KeyMap::new(self.key_words, self.narrow_key, None)));
                        self.lpm_masks.push(self.lpm_mask(t, plen));
                        self.lpm.len() - 1
                    }
                };
                self.lpm[pos].1.insert(&k, i);
            }
            Kind::Scan => {
                let ents = &self.entries;
                let key = |j: usize| (std::cmp::Reverse(ents[j].entry.priority), ents[j].seq);
                let p = self.order.partition_point(|&j| key(j) < key(i));
                self.order.insert(p, i);
                let (mask, k) = self.tss_key(t, &e);
                self.tss.add(&mask, &k, key(i), i as u32);
            }
        }
    }

    fn index_remove(&mut self, t: &Table, i: usize) {
        let e = self.entries[i].entry.clone();
        match self.kind {
            Kind::Exact => {
                let (k, _) = self.index_key(t, &e);
                self.exact.remove(&k);
            }
            Kind::Lpm => {
                let (k, plen) = self.index_key(t, &e);
                let plen = plen.unwrap_or(0);
                if let Some(p) = self.lpm.iter().position(|(l, _)| *l == plen) {
                    self.lpm[p].1.remove(&k);
                    if self.lpm[p].1.is_empty() {
                        self.lpm.remove(p);
                        self.lpm_masks.remove(p);
                    }
                }
            }
            Kind::Scan => {
                self.order.retain(|&j| j != i);
                let (mask, k) = self.tss_key(t, &e);
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
        self.insert_with(t, e, None, None)
    }

    /// Insert an entry with what it refers to in the table's action profile or selector (if any)
    /// and the initial configuration of its direct meter (`None`: every packet green).
    pub fn insert_with(
        &mut self,
        t: &Table,
        e: TableEntry,
        indirect: Option<Arc<Indirect>>,
        meter: Option<crate::meters::MeterRates>,
    ) -> Result<(), String> {
        let e = strip_selector_keys(t, e);
        if self.find(t, &e).is_some() {
            return Err(format!(
                "table `{}`: an entry with this match already exists",
                t.name
            ));
        }
        if self.entries.len() >= t.size as usize {
            return Err(format!("table `{}` is full ({} entries)", t.name, t.size));
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
        self.modify_with(t, e, None, None)
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
    ) -> Result<(), String> {
        let e = strip_selector_keys(t, e);
        let i = self
            .find(t, &e)
            .ok_or_else(|| format!("table `{}`: no entry with this match", t.name))?;
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
        self.replace(i, inst);
        Ok(())
    }

    /// Replace entry `i` (same match) with `inst`.
    pub fn replace(&mut self, i: usize, inst: Installed) {
        self.hot[i] = Hot::of(&inst);
        self.entries[i] = Arc::new(inst);
    }

    /// What a hit on entry `i` needs (see [`Hot`]).
    #[inline]
    pub fn hot(&self, i: usize) -> &Hot {
        &self.hot[i]
    }

    /// Set the idle timeout of the entry with this match (0: none); its idle period starts anew.
    pub fn set_idle_timeout(&mut self, t: &Table, e: &TableEntry, ns: u64) -> Result<(), String> {
        let e = strip_selector_keys(t, e.clone());
        let i = self
            .find(t, &e)
            .ok_or_else(|| format!("table `{}`: no entry with this match", t.name))?;
        let mut n = (*self.entries[i]).clone();
        n.idle_timeout_ns = ns;
        n.idle_notified = AtomicU64::new(u64::MAX);
        self.replace(i, n);
        Ok(())
    }

    /// Give entry `i` another action and reference (a member or group of its action profile
    /// changed), keeping its match, counters and meter.
    pub fn set_indirect(&mut self, i: usize, action: ActionCall, indirect: Option<Arc<Indirect>>) {
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
        self.replace(i, inst);
    }

    pub fn delete(&mut self, t: &Table, e: &TableEntry) -> Result<TableEntry, String> {
        let i = self
            .find(t, e)
            .ok_or_else(|| format!("table `{}`: no entry with this match", t.name))?;
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
        self.order.clear();
        self.tss.clear();
    }

    /// [`TableData::lookup`] of a one-word key: an exact table's map probed here (inlined into the
    /// caller), any other kind through the general lookup.
    #[inline(always)]
    pub fn lookup_one(&self, t: &Table, k: u64) -> Option<usize> {
        if self.entries.is_empty() {
            return None;
        }
        match self.kind {
            Kind::Exact if self.key_words == 1 => self.exact.get_one(k),
            _ => self.lookup(t, std::slice::from_ref(&k)),
        }
    }

    /// Look up a packed key (`key[..key_words]`, each field in its layout words). Returns the entry
    /// index.
    #[inline]
    pub fn lookup(&self, t: &Table, key: &[u64]) -> Option<usize> {
        match self.kind {
            Kind::Exact => {
                if self.entries.is_empty() {
                    return None;
                }
                self.exact.get(&key[..self.key_words])
            }
            Kind::Lpm => {
                if let [k0] = key[..self.key_words] {
                    // one-word keys (IPv4 routes and the like): one masked probe per prefix length
                    for ((_, map), m) in self.lpm.iter().zip(&self.lpm_masks) {
                        if let Some(i) = map.get_one(k0 & m[0]) {
                            return Some(i);
                        }
                    }
                    return None;
                }
                let mut probe = [0u64; HKEY_WORDS];
                for ((_, map), m) in self.lpm.iter().zip(&self.lpm_masks) {
                    for j in 0..self.key_words {
                        probe[j] = key[j] & m[j];
                    }
                    if let Some(i) = map.get(&probe[..self.key_words]) {
                        return Some(i);
                    }
                }
                None
            }
            Kind::Scan if self.entries.len() > SCAN_MAX => {
                let kw = self.key_words;
                self.tss.lookup(&key[..kw], |i| {
                    let e = &self.entries[i].entry;
                    e.matches.iter().enumerate().all(|(fi, m)| {
                        let (off, words) = self.layout[fi];
                        field_matches(m, &key[off..off + words], t.keys[fi].width)
                    })
                })
            }
            Kind::Scan => {
                'entries: for &i in &self.order {
                    let e = &self.entries[i].entry;
                    for (fi, m) in e.matches.iter().enumerate() {
                        let (off, words) = self.layout[fi];
                        let k = &key[off..off + words];
                        if !field_matches(m, k, t.keys[fi].width) {
                            continue 'entries;
                        }
                    }
                    return Some(i);
                }
                None
            }
        }
    }
}

fn cmp_words(a: &[u64], b: &[u64]) -> std::cmp::Ordering {
    for i in (0..a.len()).rev() {
        let bv = b.get(i).copied().unwrap_or(0);
        match a[i].cmp(&bv) {
            std::cmp::Ordering::Equal => continue,
            o => return o,
        }
    }
    std::cmp::Ordering::Equal
}

/// Does the key `k` (the field's words, least significant first) match `m`?
pub(crate) fn field_matches(m: &FieldMatch, k: &[u64], width: u32) -> bool {
    match m {
        FieldMatch::Any => true,
        FieldMatch::Exact(v) | FieldMatch::Optional(Some(v)) => k
            .iter()
            .enumerate()
            .all(|(i, w)| *w == v.words.get(i).copied().unwrap_or(0)),
        FieldMatch::Optional(None) => true,
        FieldMatch::Ternary { value, mask } => k.iter().enumerate().all(|(i, w)| {
            let m = mask.words.get(i).copied().unwrap_or(0);
            (w & m) == (value.words.get(i).copied().unwrap_or(0) & m)
        }),
        FieldMatch::Lpm { value, prefix_len } => k.iter().enumerate().all(|(i, w)| {
            let m = prefix_word_mask(width, *prefix_len, i);
            (w & m) == (value.words.get(i).copied().unwrap_or(0) & m)
        }),
        FieldMatch::Range { lo, hi } => {
            cmp_words(k, &lo.words) != std::cmp::Ordering::Less
                && cmp_words(k, &hi.words) != std::cmp::Ordering::Greater
        }
    }
}

/// Check an entry against the table's declaration: key count, kinds, widths, action and arguments.
pub fn validate_entry(prog: &p4sec_ir::Program, t: &Table, e: &TableEntry) -> Result<(), String> {
    let keys: Vec<_> = t.keys.iter().collect();
    if e.matches.len() != keys.len() {
        return Err(format!(
            "table `{}` has {} key fields, the entry gives {}",
            t.name,
            keys.len(),
            e.matches.len()
        ));
    }
    let fits = |v: &Value, w: u32| -> bool {
        v.words.iter().enumerate().all(|(i, x)| {
            let lo = i as u32 * 64;
            if lo >= w {
                *x == 0
            } else if w - lo >= 64 {
                true
            } else {
                *x >> (w - lo) == 0
            }
        })
    };
    for (m, k) in e.matches.iter().zip(keys) {
        let ok = match (m, k.kind) {
            (FieldMatch::Exact(v), MatchKind::Exact | MatchKind::Selector) => fits(v, k.width),
            (FieldMatch::Ternary { value, mask }, MatchKind::Ternary) => {
                fits(value, k.width) && fits(mask, k.width)
            }
            (FieldMatch::Lpm { value, prefix_len }, MatchKind::Lpm) => {
                fits(value, k.width) && *prefix_len <= k.width
            }
            (FieldMatch::Range { lo, hi }, MatchKind::Range) => {
                fits(lo, k.width) && fits(hi, k.width)
            }
            (FieldMatch::Optional(v), MatchKind::Optional) => {
                v.as_ref().map(|v| fits(v, k.width)).unwrap_or(true)
            }
            (
                FieldMatch::Any,
                MatchKind::Ternary
                | MatchKind::Lpm
                | MatchKind::Range
                | MatchKind::Optional
                | MatchKind::Selector,
            ) => true,
            _ => false,
        };
        if !ok {
            return Err(format!(
                "table `{}`: the match for key `{}` ({:?}, {} bits) is invalid or does not fit",
                t.name, k.name, k.kind, k.width
            ));
        }
    }
    validate_action(prog, t, &e.action, false)
}

pub fn validate_action(
    prog: &p4sec_ir::Program,
    t: &Table,
    a: &ActionCall,
    default: bool,
) -> Result<(), String> {
    let Some(ta) = t.actions.iter().find(|x| x.action == a.action) else {
        return Err(format!(
            "action {} is not an action of table `{}`",
            a.action, t.name
        ));
    };
    if !default && ta.default_only {
        return Err(format!(
            "action `{}` may only be the default action of table `{}`",
            prog.actions[a.action as usize].name, t.name
        ));
    }
    if default && ta.table_only {
        return Err(format!(
            "action `{}` cannot be the default action of table `{}`",
            prog.actions[a.action as usize].name, t.name
        ));
    }
    let act = &prog.actions[a.action as usize];
    if act.params.len() != a.args.len() {
        return Err(format!(
            "action `{}` takes {} arguments, {} given",
            act.name,
            act.params.len(),
            a.args.len()
        ));
    }
    for (p, v) in act.params.iter().zip(&a.args) {
        let w = p.loc.width;
        let ok = v.words.iter().enumerate().all(|(i, x)| {
            let lo = i as u32 * 64;
            lo >= w && *x == 0 || lo < w && (w - lo >= 64 || *x >> (w - lo) == 0)
        });
        if !ok {
            return Err(format!(
                "argument `{}` of action `{}` does not fit in {w} bits",
                p.name, act.name
            ));
        }
    }
    Ok(())
}
