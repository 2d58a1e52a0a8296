//! The hash index of tables whose one key has at most 32 bits ([`Map32`]): 32-bit keys to entry
//! indices (and, for a map of a value type other than `()`, a copy of what a hit needs, read with
//! the key) in one flat array of 8-byte slots (plus the value's size), open addressing with
//! linear probing, at most 3/8 full, small maps at most 1/8 (a miss ends at a free slot after
//! fewer than two reads on average). A probe on the packet path is one multiply, a shift and
//! (usually) one slot read, against hashbrown's group of control bytes, tag broadcast and masks
//! per map; cloning a table version copies the array as it is (8 bytes per slot, 21 to 43 bytes
//! per key, plus the value's). A bit per slot says whether it is taken: a probe that may miss
//! (an LPM level longer than the key's match) reads that bit first and, when its home slot is
//! free, not the slot's line.
//!
//! The slot of a key is the top bits of the key times the map's multiplier (multiply-shift
//! hashing), an odd number drawn at random for each table ([`table_seed`]): which keys collide
//! differs from table to table and from run to run, so a controller cannot choose keys that
//! pile up in one probe run.

/// A random odd 64-bit multiplier for the maps of one table: SipHash, keyed by std's
/// `RandomState` (its keys drawn from the operating system's random source, a fresh key per
/// call), of a constant.
pub(super) fn table_seed() -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64) | 1
}
/// A slot's `idx` when it is free (entry indices stay below it: a table holds fewer entries).
const FREE: u32 = u32::MAX;
/// The fewest slots: two, so that the shift stays below 64.
const MIN_SLOTS: usize = 2;
/// Maps of fewer slots than this are kept at most 1/8 full (a key meets another in its home slot
/// about one time in eight instead of three), at most 8 KiB each.
const SPARSE_BELOW: usize = 1024;

/// A slot: a key, the word it maps to and its value, aligned to at least 8 bytes and to `A`'s
/// alignment (a zero-sized marker such as [`Align32`]).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(8))]
struct Slot<V, A> {
    _align: [A; 0],
    key: u32,
    idx: u32,
    val: V,
}

/// The alignment marker of a map whose slots are 32 bytes: each slot then lies within one cache
/// line (a probe reads one line).
#[derive(Clone, Copy, Debug, Default)]
#[repr(align(32))]
pub(super) struct Align32;

impl<V: Default, A> Slot<V, A> {
    fn empty() -> Slot<V, A> {
        Slot {
            _align: [],
            key: 0,
            idx: FREE,
            val: V::default(),
        }
    }
}

/// 32-bit keys → entry indices (or any other word below `u32::MAX`) and a value `V` each (none
/// by default), the slots aligned as `A` is.
#[derive(Debug)]
pub(super) struct Map32<V = (), A = ()> {
    /// A power of two of slots, never more than 3/8 of them taken (so a probe always meets a
    /// free slot).
    slots: Box<[Slot<V, A>]>,
    /// 64 minus log2 of the number of slots.
    shift: u32,
    /// The odd multiplier of the hash (the table's [`table_seed`]).
    mul: u64,
    /// Keys held (fewer than 2^32: entry indices are `u32`s).
    len: u32,
    /// One bit per slot, set when the slot holds a key (a word per 64 slots): a probe whose home
    /// slot is free is answered from here, without reading the slot's line.
    taken: Box<[u64]>,
    /// Which map contents this is ([`next_gen`]), the contents it was copied from (its slots the
    /// same but for the blocks of [`Map32::BLOCK`] slots set in `dirty`), or [`NO_GEN`] when it
    /// was made anew (grown, cleared).
    gen: u64,
    base: u64,
    dirty: Box<[u64]>,
}

/// Bytes of slots per block of `dirty` (a bit each): two cache lines, 16 slots of 8 bytes, 4 of
/// 32 (a table version copies the blocks a change touched, so the fewer bytes a block holds, the
/// fewer a copy moves; 64 slots of `taken` hold a whole number of blocks).
const BLOCK_BYTES: usize = 128;
/// The `base` of a map not copied from another.
const NO_GEN: u64 = 0;

/// A number for a map's contents no other map has had.
fn next_gen() -> u64 {
    static GEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    GEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// The words of a bitmap of `n` bits.
fn words(n: usize) -> usize {
    n.div_ceil(64)
}

impl<V, A> Map32<V, A> {
    /// Slots per block of `dirty`: [`BLOCK_BYTES`] of them (at least one; a power of two dividing
    /// 64, as slot sizes are powers of two from 8 to 128 bytes).
    const BLOCK: usize = {
        let n = BLOCK_BYTES / std::mem::size_of::<Slot<V, A>>();
        let n = if n == 0 { 1 } else { n };
        assert!(64 % n == 0);
        n
    };
}

impl<V: Copy, A: Copy> Clone for Map32<V, A> {
    /// A copy, its contents numbered anew and derived from this one's (nothing changed yet).
    fn clone(&self) -> Self {
        Self {
            slots: self.slots.clone(),
            shift: self.shift,
            mul: self.mul,
            len: self.len,
            taken: self.taken.clone(),
            gen: next_gen(),
            base: self.gen,
            dirty: vec![0; self.dirty.len()].into_boxed_slice(),
        }
    }

    /// `src` copied into this map's own arrays (no allocation at the same sizes): when `src` was
    /// derived from this map's contents, only the blocks it changed (a table change made in the
    /// version it replaced copies what the change touched, not the whole index).
    fn clone_from(&mut self, src: &Self) {
        // every field named: a field added later cannot be left out
        let Self {
            slots,
            shift,
            mul,
            len,
            taken,
            gen,
            base,
            dirty,
        } = self;
        if src.base == *gen && *gen != NO_GEN && slots.len() == src.slots.len() {
            for (w, &bits) in src.dirty.iter().enumerate() {
                let mut bits = bits;
                while bits != 0 {
                    let b = w * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let (lo, hi) = (b * Self::BLOCK, ((b + 1) * Self::BLOCK).min(slots.len()));
                    slots[lo..hi].copy_from_slice(&src.slots[lo..hi]);
                    // (a block lies within one word of `taken`: 64 is a multiple of `BLOCK`)
                    taken[lo / 64] = src.taken[lo / 64];
                }
            }
        } else {
            slots.clone_from(&src.slots);
            taken.clone_from(&src.taken);
        }
        *shift = src.shift;
        *mul = src.mul;
        *len = src.len;
        *gen = next_gen();
        *base = src.gen;
        if dirty.len() == src.dirty.len() {
            dirty.fill(0);
        } else {
            *dirty = vec![0; src.dirty.len()].into_boxed_slice();
        }
    }
}

impl<V: Copy + Default, A: Copy> Map32<V, A> {
    /// An empty map hashing with multiplier `seed` (made odd).
    pub(super) fn new(seed: u64) -> Map32<V, A> {
        Map32::with_slots(MIN_SLOTS, seed | 1)
    }

    fn with_slots(n: usize, mul: u64) -> Map32<V, A> {
        debug_assert!(n.is_power_of_two() && n >= MIN_SLOTS);
        Map32 {
            slots: vec![Slot::empty(); n].into_boxed_slice(),
            shift: 64 - n.trailing_zeros(),
            mul,
            len: 0,
            taken: vec![0; words(n)].into_boxed_slice(),
            gen: next_gen(),
            base: NO_GEN,
            dirty: vec![0; words(n.div_ceil(Self::BLOCK))].into_boxed_slice(),
        }
    }

    /// The slot a key's probe starts at.
    #[inline(always)]
    fn home(&self, k: u32) -> usize {
        ((k as u64).wrapping_mul(self.mul) >> self.shift) as usize
    }

    /// The entry index of key `k`.
    #[inline(always)]
    pub(super) fn get(&self, k: u32) -> Option<u32> {
        self.get_with(k).map(|(i, _)| i)
    }

    /// The entry index of key `k` and its value.
    #[inline(always)]
    pub(super) fn get_with(&self, k: u32) -> Option<(u32, &V)> {
        let mask = self.slots.len() - 1;
        let mut i = self.home(k);
        loop {
            debug_assert!(i < self.slots.len());
            // SAFETY: `home` is below the number of slots (the product's top `64 - shift` bits,
            // and there are `1 << (64 - shift)` slots) and every next index is masked to it
            let s = unsafe { self.slots.get_unchecked(i) };
            if s.idx == FREE {
                return None;
            }
            if s.key == k {
                return Some((s.idx, &s.val));
            }
            // at most 3/8 of the slots are taken: a free one comes
            i = (i + 1) & mask;
        }
    }

    /// [`Map32::get_with`] that first reads the home slot's bit in `taken` (a small array, mostly
    /// in the cache): a key whose home slot is free misses without a read of the slots.
    #[inline(always)]
    pub(super) fn get_taken(&self, k: u32) -> Option<(u32, &V)> {
        let i = self.home(k);
        debug_assert!(i / 64 < self.taken.len());
        // SAFETY: `home` is below the number of slots, and `taken` has a bit per slot
        let w = unsafe { *self.taken.get_unchecked(i / 64) };
        if w >> (i % 64) & 1 == 0 {
            return None;
        }
        self.get_with(k)
    }

    /// Slot `i` set to `s`, its bit in `taken` with it.
    #[inline]
    fn put(&mut self, i: usize, s: Slot<V, A>) {
        let b = i / Self::BLOCK;
        self.dirty[b / 64] |= 1 << (b % 64);
        let bit = 1u64 << (i % 64);
        if s.idx == FREE {
            self.taken[i / 64] &= !bit;
        } else {
            self.taken[i / 64] |= bit;
        }
        self.slots[i] = s;
    }

    /// Where key `k` is, or the free slot where it would go.
    fn find(&self, k: u32) -> (usize, bool) {
        let mask = self.slots.len() - 1;
        let mut i = self.home(k);
        loop {
            let s = self.slots[i];
            if s.idx == FREE {
                return (i, false);
            }
            if s.key == k {
                return (i, true);
            }
            i = (i + 1) & mask;
        }
    }

    /// Map `k` to entry index `v` (below `u32::MAX`), replacing what it mapped to, its value
    /// the default: whether `k` is new to the map.
    pub(super) fn insert(&mut self, k: u32, v: u32) -> bool {
        self.insert_with(k, v, V::default())
    }

    /// Map `k` to entry index `v` (below `u32::MAX`) and value `val`, replacing what it mapped
    /// to: whether `k` is new to the map.
    pub(super) fn insert_with(&mut self, k: u32, v: u32, val: V) -> bool {
        debug_assert!(v != FREE);
        let (i, present) = self.find(k);
        let slot = Slot {
            _align: [],
            key: k,
            idx: v,
            val,
        };
        if present {
            self.put(i, slot);
            return false;
        }
        let (n, slots) = (self.len as usize + 1, self.slots.len());
        if n * 8 > slots * 3 || (slots < SPARSE_BELOW && n * 8 > slots) {
            self.grow();
            let (i, _) = self.find(k);
            self.put(i, slot);
        } else {
            self.put(i, slot);
        }
        self.len += 1;
        true
    }

    fn grow(&mut self) {
        self.rehash(self.slots.len() * 2);
    }

    /// The keys moved into `n` slots (a power of two that holds them within the load limits).
    fn rehash(&mut self, n: usize) {
        let mut n = Map32::with_slots(n, self.mul);
        for s in self.slots.iter().filter(|s| s.idx != FREE) {
            let (i, _) = n.find(s.key);
            n.put(i, *s);
        }
        n.len = self.len;
        *self = n;
    }

    /// Forget key `k`: the slots after it in its run move back over the hole where their probes
    /// pass it (no tombstones, so probes stay short). Whether the map held `k`.
    pub(super) fn remove(&mut self, k: u32) -> bool {
        let (mut hole, present) = self.find(k);
        if !present {
            return false;
        }
        let mask = self.slots.len() - 1;
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let s = self.slots[j];
            if s.idx == FREE {
                break;
            }
            // `s` may move into the hole if its probe passes the hole on its way to `j`
            let home = self.home(s.key);
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.put(hole, s);
                hole = j;
            }
        }
        self.put(hole, Slot::empty());
        self.len -= 1;
        // a map emptied to a 32nd of its slots gives its memory back: a quarter of the slots per
        // step (at most 1/8 full after it; growing takes 3/8)
        if self.slots.len() > MIN_SLOTS && (self.len as usize) * 32 < self.slots.len() {
            let mut n = self.slots.len();
            while n > MIN_SLOTS && (self.len as usize) * 32 < n {
                n = (n / 4).max(MIN_SLOTS);
            }
            self.rehash(n);
        }
        true
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The keys held, in slot order.
    pub(super) fn keys(&self) -> impl Iterator<Item = u32> + '_ {
        self.slots.iter().filter(|s| s.idx != FREE).map(|s| s.key)
    }

    /// Forget every key (the multiplier stays).
    pub(super) fn clear(&mut self) {
        *self = Map32::new(self.mul);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Inserts, replacements and removals in a pseudo-random order agree with a `HashMap` at every
    /// step, colliding keys and key 0 included, through growth.
    #[test]
    fn agrees_with_hashmap() {
        let mut m = Map32::<()>::new(table_seed());
        let mut r: HashMap<u32, u32> = HashMap::new();
        let mut s = 7u64;
        for step in 0..20_000u32 {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // a small key space, so that keys are replaced and removed often; some keys far apart
            let k = match (s >> 33) % 4 {
                0 => 0,
                1 => ((s >> 40) % 512) as u32,
                2 => ((s >> 40) % 512) as u32 * 0x0100_0000,
                _ => ((s >> 40) % 512) as u32 | 0xffff_0000,
            };
            if (s >> 20).is_multiple_of(3) {
                m.remove(k);
                r.remove(&k);
            } else {
                m.insert(k, step);
                r.insert(k, step);
            }
            assert_eq!(m.get(k), r.get(&k).copied(), "step {step}, key {k:#x}");
            assert_eq!(m.len as usize, r.len());
            // every slot's bit says whether it holds a key, and the probe through it agrees
            for (i, sl) in m.slots.iter().enumerate() {
                assert_eq!(m.taken[i / 64] >> (i % 64) & 1 == 1, sl.idx != FREE);
            }
            assert_eq!(m.get_taken(k), m.get_with(k));
            assert!(m.len as usize * 8 <= m.slots.len() * 3);
        }
        for k in (0..512u32).chain((0..512).map(|x| (x * 0x0100_0000) | 0xffff_0000)) {
            assert_eq!(m.get(k), r.get(&k).copied(), "key {k:#x}");
        }
    }

    /// A map of 24-byte values aligned as `Align32` has 32-byte slots starting on 32-byte
    /// boundaries (each within one cache line), and keeps its values through growth and removals.
    #[test]
    fn aligned_slots_keep_their_values() {
        assert_eq!(std::mem::size_of::<Slot<[u64; 3], Align32>>(), 32);
        let mut m = Map32::<[u64; 3], Align32>::new(table_seed());
        for k in 0..3000u32 {
            m.insert_with(k * 7, k, [k as u64, !(k as u64), 3]);
        }
        for k in (0..3000u32).step_by(3) {
            m.remove(k * 7);
        }
        assert_eq!(m.slots.as_ptr() as usize % 32, 0);
        for k in 0..3000u32 {
            let want = (k % 3 != 0).then_some((k, [k as u64, !(k as u64), 3]));
            assert_eq!(m.get_taken(k * 7).map(|(i, v)| (i, *v)), want, "key {k}");
        }
    }

    /// The same slots and taken bits.
    fn same<V: Copy + PartialEq + std::fmt::Debug, A: Copy>(a: &Map32<V, A>, b: &Map32<V, A>) {
        assert_eq!(
            (a.slots.len(), a.len, a.shift, a.mul),
            (b.slots.len(), b.len, b.shift, b.mul)
        );
        for (x, y) in a.slots.iter().zip(b.slots.iter()) {
            assert_eq!((x.key, x.idx, x.val), (y.key, y.idx, y.val));
        }
        assert_eq!(a.taken, b.taken);
    }

    /// Versions made as the tables make them: each the previous one's copy, or the one before
    /// it (replaced, so no longer read) brought up to date by `clone_from`, which copies only the
    /// blocks the newer one changed when it was derived from it, everything otherwise (grown
    /// maps, an older map, a cleared one). Every copy has the same contents as its source, and
    /// the changes agree with a `HashMap`.
    #[test]
    fn copies_into_replaced_versions_follow_their_changes() {
        let mut cur = Map32::<[u64; 3], Align32>::new(table_seed());
        let mut spare: Option<Map32<[u64; 3], Align32>> = None;
        let mut older: Option<Map32<[u64; 3], Align32>> = None;
        let mut model: HashMap<u32, (u32, [u64; 3])> = HashMap::new();
        let mut s = 99u64;
        for round in 0..300u32 {
            let mut next = match (round % 7, spare.take(), older.take()) {
                // now and then an older map than the source's parent, or a cleared one
                (0, _, Some(mut o)) => {
                    o.clone_from(&cur);
                    o
                }
                (1, Some(mut sp), _) => {
                    sp.clear();
                    sp.clone_from(&cur);
                    sp
                }
                (_, Some(mut sp), _) => {
                    sp.clone_from(&cur);
                    sp
                }
                _ => cur.clone(),
            };
            same(&next, &cur);
            // a few changes, or many (growth)
            let n = if round % 50 == 0 { 400 } else { 1 + round % 9 };
            for _ in 0..n {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let k = ((s >> 33) % 3000) as u32 * 13;
                if (s >> 20).is_multiple_of(4) {
                    next.remove(k);
                    model.remove(&k);
                } else {
                    let v = [s, s >> 7, round as u64];
                    next.insert_with(k, round, v);
                    model.insert(k, (round, v));
                }
            }
            assert_eq!(next.len as usize, model.len());
            for (&k, &(i, v)) in &model {
                assert_eq!(next.get_taken(k), Some((i, &v)), "round {round}, key {k}");
            }
            older = spare.take();
            spare = Some(std::mem::replace(&mut cur, next));
        }
    }

    #[test]
    fn empty_and_cleared_maps_miss() {
        let mut m = Map32::<()>::new(table_seed());
        assert_eq!(m.get(0), None);
        assert!(m.is_empty());
        m.insert(0, 3);
        m.insert(u32::MAX, 4);
        assert_eq!(
            (m.get(0), m.get(u32::MAX), m.get(1)),
            (Some(3), Some(4), None)
        );
        m.remove(0);
        assert_eq!((m.get(0), m.get(u32::MAX)), (None, Some(4)));
        m.clear();
        assert!(m.is_empty());
        assert_eq!(m.get(u32::MAX), None);
    }

    /// Each table draws its own multiplier: two maps of different seeds put the same keys in
    /// different slots (a fixed multiplier would put them in the same ones), and find them all.
    #[test]
    fn seeds_differ_and_place_keys_differently() {
        let (s1, s2) = (table_seed(), table_seed());
        assert_ne!(s1, s2);
        assert_eq!((s1 & 1, s2 & 1), (1, 1));
        let (mut a, mut b) = (Map32::<()>::new(s1), Map32::<()>::new(s2));
        for k in 0..1000u32 {
            a.insert(k << 8, k);
            b.insert(k << 8, k);
        }
        assert_eq!(a.slots.len(), b.slots.len());
        assert_eq!((a.mul, b.mul), (s1, s2));
        let same = (0..1000u32)
            .filter(|&k| a.home(k << 8) == b.home(k << 8))
            .count();
        // 4096 slots: by chance a key of the one map shares its home with 1 in 4096
        assert!(same < 100, "{same} of 1000 keys in the same home slot");
        for k in 0..1000u32 {
            assert_eq!((a.get(k << 8), b.get(k << 8)), (Some(k), Some(k)));
        }
        let mut ka: Vec<u32> = a.keys().collect();
        ka.sort_unstable();
        assert_eq!(ka, (0..1000u32).map(|k| k << 8).collect::<Vec<_>>());
    }
}
