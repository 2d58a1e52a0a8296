//! The index of an LPM table whose one key has at most 32 bits ([`Lpm32`]): a hash map of masked
//! keys per prefix length, and a summary of the prefix lengths present in each bucket of the
//! key's top bits, so that a lookup probes only the lengths that may match its key (longest
//! first) instead of every length the table holds.

use super::entry::{HotData, INLINE_ARGS};
use super::map32::{Align32, Map32};

/// A hit's inline argument words, as a level's hit map holds them beside the key.
pub(crate) type HitArgs = [u64; INLINE_ARGS];
/// A level's map of what a hit needs: key → the hit's code ([`HotData::code`]) and arguments, in
/// 32-byte slots each within one cache line.
type HitMap = Map32<HitArgs, Align32>;

/// The summary's buckets: at most 2^16 (a 256 KiB array copied with each table version), at least
/// 2^6, about two per entry in between.
const MAX_BUCKET_BITS: u32 = 16;
const MIN_BUCKET_BITS: u32 = 6;
/// A table of at most this many prefix lengths is looked up by probing each of its levels
/// (longest first) instead of the levels its key's summary bucket names: the probes' loads do not
/// depend on each other, while the summary's is one more load before the first probe (measured on
/// the router benchmark's 5 lengths: 66.1 -> 61.2 ns per packet).
const FEW_LEVELS: u32 = 6;

/// The levels of a narrow LPM table (prefix lengths 1 to the key's width in `levels`, length 0
/// apart) and the summary that tells a lookup which of them to probe.
#[derive(Debug)]
pub(super) struct Lpm32 {
    /// `levels[32 - p]`: the masked keys of prefix length `p` (→ entry index; 32 levels, or none
    /// when the table is not a narrow LPM one), longest first.
    levels: Vec<Map32>,
    /// `hits[32 - p]`: the same keys → what a hit on their entry needs, the key and the hit in
    /// one cache line (native code's lookup reads only these); none in the index of a table that
    /// native code does not read (the closure engine's: its writes do not pay for them).
    hits: Vec<HitMap>,
    /// `masks[32 - p]`: the key's mask of prefix length `p` (0 past the width).
    masks: [u32; 32],
    /// Per bucket of the key's top `bits` bits: bit `32 - p` set when the level of length `p` may
    /// hold a prefix overlapping the bucket (so the lowest bit set is the longest length; set on
    /// insert, a delete leaves it until the next rebuild). Empty while lookups probe the held
    /// levels directly (`direct`).
    summary: Vec<u32>,
    /// The key's width, the summary's bucket bits (at most the width) and the shift that takes a
    /// key to its bucket (`width - bits`).
    width: u32,
    bits: u32,
    shift: u32,
    /// The number of buckets minus one.
    bucket_mask: u32,
    /// The entry of prefix length 0, if any (it matches every key), and what a hit on it needs
    /// (its code and arguments).
    zero: Option<(u32, u32, HitArgs)>,
    /// Bit `32 - p` set when the level of length `p` holds a prefix (the summary of every key).
    held: u32,
    /// `held` when it has at most [`FEW_LEVELS`] bits set (a lookup probes those levels), else 0
    /// (a lookup probes the levels its summary bucket names).
    direct: u32,
    /// Entries held (length 0 included) and deletes since the summary was last rebuilt.
    len: usize,
    stale: usize,
}

super::clone_fields::clone_by_fields!(Lpm32 {
    levels,
    hits,
    masks,
    summary,
    width,
    bits,
    shift,
    bucket_mask,
    zero,
    held,
    direct,
    len,
    stale,
});

impl Lpm32 {
    /// The index of a narrow LPM table whose key is `width` bits wide (1 to 32), its maps hashing
    /// with `seed`, with hit maps when `hits` ([`Lpm32::get_hit`]); `None` makes an index of no
    /// levels (other tables).
    pub(super) fn new(width: Option<u32>, seed: u64, hits: bool) -> Lpm32 {
        let width = width.unwrap_or(0).min(32);
        let n = if width == 0 { 0 } else { 32 };
        let levels = (0..n).map(|_| Map32::new(seed)).collect();
        let hits = (0..if hits { n } else { 0 })
            .map(|_| Map32::new(seed))
            .collect();
        let mut masks = [0u32; 32];
        for p in 1..=width {
            masks[32 - p as usize] = (u32::MAX >> (32 - p)) << (width - p);
        }
        let mut l = Lpm32 {
            levels,
            hits,
            masks,
            summary: vec![],
            width,
            bits: 0,
            shift: 0,
            bucket_mask: 0,
            zero: None,
            held: 0,
            direct: 0,
            len: 0,
            stale: 0,
        };
        l.rebuild();
        l
    }

    /// The entry whose prefix is the longest to match key `k` (bits above the width ignored).
    #[inline(always)]
    pub(super) fn get(&self, k: u32) -> Option<u32> {
        match self.probe(&self.levels, k) {
            Some((i, _)) => Some(i),
            None => self.zero.map(|(i, _, _)| i),
        }
    }

    /// Whether the index holds no entry.
    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether this index has hit maps ([`Lpm32::get_hit`] reads them).
    #[inline(always)]
    pub(super) fn has_hits(&self) -> bool {
        !self.hits.is_empty()
    }

    /// What a hit on the entry [`Lpm32::get`] finds needs: its code ([`HotData::code`]) and
    /// arguments, read from its key's slot in the level's hit map. Only for an index with hit
    /// maps ([`Lpm32::has_hits`]); one without misses.
    #[inline(always)]
    pub(super) fn get_hit(&self, k: u32) -> Option<(u32, &HitArgs)> {
        if !self.has_hits() {
            return None;
        }
        match self.probe(&self.hits, k) {
            Some(hit) => Some(hit),
            None => self.zero.as_ref().map(|(_, c, a)| (*c, a)),
        }
    }

    /// The longest level of `maps` (the levels or the hit maps, alike in their keys) holding key
    /// `k` masked to its length: the word and value its slot holds.
    #[inline(always)]
    fn probe<'a, V: Copy + Default, A: Copy>(
        &self,
        maps: &'a [Map32<V, A>],
        k: u32,
    ) -> Option<(u32, &'a V)> {
        let mut present = if self.direct != 0 {
            self.direct
        } else {
            let b = ((k >> self.shift) & self.bucket_mask) as usize;
            debug_assert!(b < self.summary.len());
            // SAFETY: while `direct` is 0 the summary has `bucket_mask + 1` buckets (`rebuild`,
            // which `set_held` calls when lookups turn to the summary) and `b` is masked to
            // below that
            unsafe { *self.summary.get_unchecked(b) }
        };
        while present != 0 {
            // the longest length that may match: the lowest bit set
            let top = present.trailing_zeros() as usize;
            debug_assert_eq!(maps.len(), 32);
            // SAFETY: a bit of the summary or of `direct` is set only for a level there is (`mark`,
            // `insert`): an index of a width has its 32 levels, and 32 hit maps when it has any
            // (`new`, `get_hit`; none of no width, whose summary and `direct` stay all zero)
            let level = unsafe { maps.get_unchecked(top) };
            if let Some(hit) = level.get_taken(k & self.masks[top]) {
                return Some(hit);
            }
            present &= present - 1;
        }
        None
    }

    /// The entry of prefix `k` (masked) of length `plen`.
    pub(super) fn get_exact(&self, k: u32, plen: u32) -> Option<u32> {
        match plen {
            0 => self.zero.map(|(i, _, _)| i),
            p => self.levels.get(level(p)?)?.get(k),
        }
    }

    /// Index entry `i` under prefix `k` (masked) of length `plen` (at most the width), what a hit
    /// on it needs `hot` (an entry indexed anew takes its new index and `hot`).
    pub(super) fn insert(&mut self, k: u32, plen: u32, i: u32, hot: &HotData) {
        let fresh = match plen {
            0 => self.zero.replace((i, hot.code(), hot.args)).is_none(),
            p => {
                let Some(j) = level(p).filter(|&j| j < self.levels.len()) else {
                    return;
                };
                let fresh = self.levels[j].insert(k, i);
                if let Some(h) = self.hits.get_mut(j) {
                    h.insert_with(k, hot.code(), hot.args);
                }
                self.set_held(self.held | 1 << (32 - p));
                fresh
            }
        };
        if !fresh {
            return;
        }
        self.len += 1;
        if self.wanted_bits() > self.bits {
            self.rebuild();
        } else {
            self.mark(k, plen);
        }
    }

    /// Forget prefix `k` (masked) of length `plen`.
    pub(super) fn remove(&mut self, k: u32, plen: u32) {
        let held = match plen {
            0 => self.zero.take().is_some(),
            p => match level(p).filter(|&j| j < self.levels.len()) {
                Some(j) if self.levels[j].remove(k) => {
                    if let Some(h) = self.hits.get_mut(j) {
                        h.remove(k);
                    }
                    if self.levels[j].is_empty() {
                        self.set_held(self.held & !(1 << (32 - p)));
                    }
                    true
                }
                _ => false,
            },
        };
        if !held {
            return;
        }
        self.len -= 1;
        self.stale += 1;
        // the summary's stale bits cost probes, not answers: rebuilt (and fit to the entries left)
        // once deletes reach half the entries, a cost in proportion to the deletes that led to it
        if self.stale > self.len / 2 + 64 {
            self.rebuild();
        }
    }

    pub(super) fn clear(&mut self) {
        for l in &mut self.levels {
            l.clear();
        }
        for h in &mut self.hits {
            h.clear();
        }
        self.zero = None;
        self.set_held(0);
        self.len = 0;
        self.rebuild();
    }

    /// The levels holding prefixes are `held` (and whether a lookup probes them directly).
    fn set_held(&mut self, held: u32) {
        let was = self.direct;
        self.held = held;
        self.direct = if held.count_ones() <= FEW_LEVELS {
            held
        } else {
            0
        };
        // the summary is kept only while lookups read it (not copied with every version of a
        // table of few lengths)
        if (was == 0) != (self.direct == 0) {
            self.rebuild();
        }
    }

    /// The summary's bucket bits for the entries held: about two buckets per entry.
    fn wanted_bits(&self) -> u32 {
        let b = usize::BITS - (2 * self.len).leading_zeros();
        b.clamp(MIN_BUCKET_BITS, MAX_BUCKET_BITS).min(self.width)
    }

    /// Set level `plen`'s bit in the buckets its prefix `k` overlaps.
    fn mark(&mut self, k: u32, plen: u32) {
        if self.direct != 0 {
            return;
        }
        // (`get` probes the level of every bit set without a check: only levels there are marked)
        if plen == 0 || plen > self.width || level(plen).is_none_or(|j| j >= self.levels.len()) {
            return;
        }
        let first = (k >> self.shift) as usize & (self.summary.len() - 1);
        let n = 1usize << self.bits.saturating_sub(plen);
        let bit = 1u32 << (32 - plen);
        let end = (first + n).min(self.summary.len());
        for s in &mut self.summary[first..end] {
            *s |= bit;
        }
    }

    /// The summary made anew from the levels, its size fit to the entries held.
    fn rebuild(&mut self) {
        self.bits = self.wanted_bits();
        self.shift = self.width - self.bits;
        self.summary.clear();
        self.bucket_mask = (1u32 << self.bits) - 1;
        self.stale = 0;
        if self.direct != 0 {
            return;
        }
        self.summary.resize(1 << self.bits, 0);
        let keys: Vec<(u32, u32)> = (self.levels.iter().enumerate())
            .flat_map(|(j, l)| l.keys().map(move |k| (k, 32 - j as u32)))
            .collect();
        for (k, p) in keys {
            self.mark(k, p);
        }
    }
}

/// The level of prefix length `p` (1 to 32) in [`Lpm32::levels`] and [`Lpm32::masks`].
fn level(p: u32) -> Option<usize> {
    32usize.checked_sub(p as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a hit on entry `i` needs, as the tests give it: action `i`.
    fn hot(i: u32) -> HotData {
        HotData {
            action: i,
            ..HotData::default()
        }
    }

    /// The longest matching prefix by scanning every held prefix.
    fn reference(held: &[(u32, u32, u32)], width: u32, k: u32) -> Option<u32> {
        held.iter()
            .filter(|&&(p, l, _)| {
                let m = if l == 0 {
                    0
                } else {
                    (u32::MAX >> (32 - l)) << (width - l)
                };
                k & m == p
            })
            .max_by_key(|&&(_, l, _)| l)
            .map(|&(_, _, i)| i)
    }

    /// Random inserts and deletes of prefixes of every length (0 and the full width included,
    /// nested and overlapping ones), through summary growth, shrinking and rebuilds: every lookup
    /// agrees with a scan for the longest matching prefix (with and without hit maps).
    #[test]
    fn agrees_with_a_scan() {
        for width in [32u32, 20, 9, 1] {
            let mut t = Lpm32::new(Some(width), super::super::map32::table_seed(), width != 9);
            let mut held: Vec<(u32, u32, u32)> = vec![];
            let mut s = 11u64 + width as u64;
            let mut next = || {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (s >> 32) as u32
            };
            let full = if width == 32 {
                u32::MAX
            } else {
                (1 << width) - 1
            };
            let mask = |l: u32| {
                if l == 0 {
                    0
                } else {
                    (u32::MAX >> (32 - l)) << (width - l)
                }
            };
            for step in 0..6000u32 {
                let r = next();
                if r % 7 < 4 || held.is_empty() {
                    // a prefix inside a held one half of the time (nested and overlapping ones)
                    let l = next() % (width + 1);
                    let base = match held.get(next() as usize % (2 * held.len() + 1)) {
                        Some(&(p, _, _)) => p | (next() & full & !mask(l.min(width))),
                        None => next() & full,
                    };
                    let p = base & mask(l);
                    if let Some(h) = held.iter_mut().find(|h| h.0 == p && h.1 == l) {
                        h.2 = step;
                    } else {
                        held.push((p, l, step));
                    }
                    t.insert(p, l, step, &hot(step));
                } else {
                    let (p, l, _) = held.swap_remove(r as usize % held.len());
                    t.remove(p, l);
                    assert_eq!(t.get_exact(p, l), None);
                }
                assert_eq!(t.len, held.len());
                for j in 0..4usize {
                    // keys inside held prefixes, and anywhere
                    let k = match held.get((next() as usize + j) % (held.len() + 1)) {
                        Some(&(p, l, _)) => p | (next() & full & !mask(l)),
                        None => next() & full,
                    };
                    assert_eq!(
                        t.get(k),
                        reference(&held, width, k),
                        "width {width}, key {k:#x}"
                    );
                    // the hit's copy is its entry's, moved with it (an entry's action is its step)
                    // (an index without hit maps answers none)
                    let want = t.get(k).filter(|_| t.has_hits()).map(|i| hot(i).code());
                    assert_eq!(
                        t.get_hit(k).map(|(c, _)| c),
                        want,
                        "width {width}, key {k:#x}"
                    );
                }
            }
            for &(p, l, i) in &held {
                assert_eq!(t.get_exact(p, l), Some(i));
            }
            t.clear();
            assert_eq!((t.get(0), t.get(full), t.len), (None, None, 0));
        }
    }

    /// A table probes its levels directly while it holds at most `FEW_LEVELS` lengths and through
    /// the summary past that, and back when a length empties: the same answers either way.
    #[test]
    fn direct_probes_and_summary_agree() {
        let mut t = Lpm32::new(Some(32), 9, true);
        let lens = [8u32, 12, 16, 20, 24, 28, 32];
        for (j, &l) in lens.iter().enumerate() {
            t.insert(
                0x0a0b_0c0d & (u32::MAX << (32 - l)),
                l,
                j as u32,
                &hot(j as u32),
            );
            assert_eq!(t.direct != 0, j < FEW_LEVELS as usize, "{} lengths", j + 1);
            // the longest inserted so far matches the full key; a key off in its last bit matches
            // the longest length below 32
            assert_eq!(t.get(0x0a0b_0c0d), Some(j as u32));
            let below = lens[..=j].iter().rposition(|&x| x < 32).map(|x| x as u32);
            assert_eq!(t.get(0x0a0b_0c0c), below);
            assert_eq!(t.get(0x0b00_0000), None);
        }
        t.remove(0x0a0b_0c0d, 32);
        assert_ne!(t.direct, 0);
        assert_eq!(t.get(0x0a0b_0c0d), Some(5));
        assert_eq!(t.get_hit(0x0a0b_0c0d).map(|(c, _)| c), Some(hot(5).code()));
    }

    /// Bits above the key's width do not change the answer, and a table of no levels misses.
    #[test]
    fn high_bits_ignored_and_empty_index_misses() {
        let mut t = Lpm32::new(Some(16), 7, true);
        t.insert(0xab00, 8, 1, &hot(1));
        assert_eq!(t.get(0xabcd), Some(1));
        assert_eq!(t.get(0xffff_abcd), Some(1));
        assert_eq!(t.get(0xacff), None);
        assert_eq!(Lpm32::new(None, 7, true).get(5), None);
    }
}
