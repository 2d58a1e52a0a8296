//! Lookups on the packet path: a packed key against one table version, and whether a key field
//! matches an entry's field match (also used by value sets).

use super::keys::{prefix_word_mask, HKEY_WORDS};
use super::scan::SCAN_MAX;
use super::storage::{Kind, Lean, TableData};
use p4sec_ir::{FieldMatch, Table};

impl TableData {
    /// [`TableData::lookup`] of a one-word key: an exact table's map, or an LPM table's maps one
    /// masked probe per prefix length, longest first, probed here (inlined into the caller); any
    /// other kind through the general lookup.
    #[inline(always)]
    pub fn lookup_one(&self, t: &Table, k: u64) -> Option<usize> {
        if self.entries.is_empty() {
            return None;
        }
        match self.kind {
            Kind::Exact if self.key_words == 1 => self.exact.get_one(k),
            Kind::Lpm if self.key_words == 1 => self.lpm_one(k),
            _ => self.lookup(t, std::slice::from_ref(&k)),
        }
    }

    /// The lookup of a table of the lean shape ([`TableData::lean`]: one key word, exact or
    /// LPM): an exact table's map, or an LPM table's levels probed longest first without a
    /// dispatch per level. `None` for a table not of the lean shape.
    #[inline(always)]
    pub fn lookup_lean(&self, k: u64) -> Option<Option<usize>> {
        // the two common cases tested by themselves (LLVM makes a jump table of a `match` of
        // four, five instructions, and folds tests of `lean` into it)
        if self.lean_lpm32 {
            return Some(self.lpm32_one(k));
        }
        if self.lean_exact {
            return Some(self.exact.get_one(k));
        }
        match self.lean {
            Lean::Lpm32 => Some(self.lpm32_one(k)),
            Lean::Exact => Some(self.exact.get_one(k)),
            Lean::Lpm => Some(self.lpm_levels_one(k)),
            Lean::No => None,
        }
    }

    /// [`TableData::lookup_lean`] of an exact table whose map is indexed directly (one key of at
    /// most [`super::keys::DIRECT_BITS`] bits): `None` for any other table.
    #[inline(always)]
    pub fn lookup_direct(&self, k: u64) -> Option<Option<usize>> {
        if !self.lean_exact {
            return None;
        }
        self.exact.get_direct(k)
    }

    /// [`TableData::lookup_lean`] of a narrow LPM table ([`Lean::Lpm32`], which the caller knows
    /// from the table's declaration: [`super::lean_of`]; native code's `np_select_lpm32`): what a
    /// hit needs, its code and arguments ([`super::HotData::code`]), from the index's hit maps.
    /// The index it reads holds nothing in a table of any other kind, nor in one made without hit
    /// maps ([`TableData::has_hit_maps`]): a miss there, which the caller hands to the general
    /// lookup.
    #[inline(always)]
    pub(crate) fn lookup_lpm32(&self, k: u64) -> Option<(u32, &super::HitArgs)> {
        debug_assert_eq!(self.lean, Lean::Lpm32);
        self.lpm32.get_hit(k as u32)
    }

    /// [`TableData::lookup_lpm32`] of an LPM table indexed in parts (a narrow LPM key beside exact
    /// keys, [`super::parts_shape`]), `key` a word per key in key order: what a hit needs, from
    /// the part's hit maps. A miss in a table not indexed in parts or made without hit maps
    /// ([`TableData::has_part_hit_maps`]), which the caller hands to the general lookup.
    #[inline(always)]
    pub(crate) fn lookup_parts(&self, key: &[u64]) -> Option<(u32, &super::HitArgs)> {
        self.parts.get_hit(key)
    }

    /// The words of the key [`TableData::lookup_parts`] takes (a word per key of the table), 0
    /// for a table not of the shape.
    #[inline(always)]
    pub(crate) fn parts_words(&self) -> usize {
        self.parts.words()
    }

    /// Whether the table is indexed in parts with hit maps ([`TableData::lookup_parts`]).
    #[inline(always)]
    pub(crate) fn has_part_hit_maps(&self) -> bool {
        self.parts.has_hits()
    }

    /// Whether a narrow LPM table's index keeps hit maps ([`TableData::lookup_lpm32`] answers
    /// from them; a table made for the closure engine has none).
    #[inline(always)]
    pub(crate) fn has_hit_maps(&self) -> bool {
        self.lpm32.has_hits()
    }

    /// A narrow LPM table: one probe of a 32-bit map per prefix length that may match, longest
    /// first (the key of a field of at most 32 bits fits in 32 bits).
    #[inline(always)]
    fn lpm32_one(&self, k: u64) -> Option<usize> {
        self.lpm32.get(k as u32).map(|i| i as usize)
    }

    /// An LPM table of one key word: one masked probe per prefix length, longest first.
    #[inline(always)]
    fn lpm_one(&self, k: u64) -> Option<usize> {
        if self.narrow_key {
            return self.lpm32_one(k);
        }
        self.lpm_levels_one(k)
    }

    /// [`TableData::lpm_one`] of a key wider than 32 bits.
    #[inline(always)]
    fn lpm_levels_one(&self, k: u64) -> Option<usize> {
        for ((_, map), m) in self.lpm.iter().zip(&self.lpm_masks) {
            if let Some(i) = map.get_one(k & m[0]) {
                return Some(i);
            }
        }
        None
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
                if self.parts.on {
                    // a VRF and the like beside a narrow prefix: its part's levels
                    return self.parts.get(&key[..self.key_words]).map(|i| i as usize);
                }
                if let [k0] = key[..self.key_words] {
                    // one-word keys (IPv4 routes and the like)
                    return self.lpm_one(k0);
                }
                if let [k0, k1] = key[..self.key_words] {
                    // two-word keys (IPv6 routes and the like)
                    for ((_, map), m) in self.lpm.iter().zip(&self.lpm_masks) {
                        if let Some(i) = map.get_two(k0 & m[0], k1 & m[1]) {
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
            Kind::Scan if self.scan.usable() => {
                let p = self.scan.search(&key[..self.key_words])?;
                self.order.get(p).copied()
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
