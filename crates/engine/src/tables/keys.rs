//! Packed lookup keys: the hash index from packed keys to entry indices ([`KeyMap`], an array for
//! one narrow key) and the word masks of LPM prefixes.

use super::map32::Map32;
use rustc_hash::FxHashMap;

/// Words of a packed lookup key on the fast path (the key buffer on the stack).
pub const KEY_WORDS: usize = 16;
/// The most words a table's key may take (keys above `KEY_WORDS` words take a slower path).
pub const MAX_KEY_WORDS: usize = 1024;
/// Words of a hashed (exact/LPM) key: wider keys use the scan kind.
pub(super) const HKEY_WORDS: usize = 4;
pub(super) type HKey = [u64; HKEY_WORDS];

pub(super) fn hkey(words: &[u64]) -> HKey {
    let mut k = [0u64; HKEY_WORDS];
    k[..words.len()].copy_from_slice(words);
    k
}

/// Exact tables with one key of at most this many bits (an ingress port has 9) are indexed
/// directly.
pub(crate) const DIRECT_BITS: u32 = 10;

/// A hash index from packed keys to entry indices; one-word keys (most tables) are stored
/// compactly, and a narrow enough one indexes an array.
#[derive(Clone, Debug)]
pub(super) enum KeyMap {
    /// One key of at most [`DIRECT_BITS`] bits: per key value, the entry index + 1 (0: none), and
    /// the number of keys present.
    Direct(Box<[u32]>, usize),
    /// One key of at most 32 bits: 8-byte slots of a flat open-addressing array.
    Narrow(Map32),
    One(FxHashMap<u64, u32>),
    /// Two-word keys (a 128-bit address, or two keys of at most 64 bits): the words as a pair,
    /// hashed and compared without the copy into a padded [`HKey`].
    Two(FxHashMap<(u64, u64), u32>),
    Wide(FxHashMap<HKey, u32>),
}

/// The pair of words a [`KeyMap::Two`] holds of key `k` (missing words are 0).
#[inline(always)]
fn pair(k: &[u64]) -> (u64, u64) {
    (
        k.first().copied().unwrap_or(0),
        k.get(1).copied().unwrap_or(0),
    )
}

impl KeyMap {
    /// `direct`: the width of the table's one key when it may be indexed directly; `seed`: the
    /// table's hash multiplier ([`super::map32::table_seed`]).
    pub(super) fn new(words: usize, narrow: bool, direct: Option<u32>, seed: u64) -> Self {
        match direct {
            Some(w) if w <= DIRECT_BITS => KeyMap::Direct(vec![0; 1 << w].into_boxed_slice(), 0),
            _ if narrow => KeyMap::Narrow(Map32::new(seed)),
            _ if words <= 1 => KeyMap::One(FxHashMap::default()),
            _ if words == 2 => KeyMap::Two(FxHashMap::default()),
            _ => KeyMap::Wide(FxHashMap::default()),
        }
    }
    #[inline]
    pub(super) fn get(&self, k: &[u64]) -> Option<usize> {
        match self {
            KeyMap::Direct(a, _) => Self::direct_get(a, k.first().copied().unwrap_or(0)),
            KeyMap::Narrow(m) => m
                .get(k.first().copied().unwrap_or(0) as u32)
                .map(|i| i as usize),
            KeyMap::One(m) => m.get(&k.first().copied().unwrap_or(0)).map(|i| *i as usize),
            KeyMap::Two(m) => m.get(&pair(k)).map(|i| *i as usize),
            KeyMap::Wide(m) => m.get(&hkey(k)).map(|i| *i as usize),
        }
    }
    /// The lookup of a two-word key (`lo` the first word): a [`KeyMap::Two`] probed directly,
    /// any other map through [`KeyMap::get`].
    #[inline(always)]
    pub(super) fn get_two(&self, lo: u64, hi: u64) -> Option<usize> {
        match self {
            KeyMap::Two(m) => m.get(&(lo, hi)).map(|i| *i as usize),
            _ => self.get(&[lo, hi]),
        }
    }
    /// A directly indexed map's lookup: `None` for a map of another kind, else the entry (if any)
    /// of key `k`.
    #[inline(always)]
    pub(super) fn get_direct(&self, k: u64) -> Option<Option<usize>> {
        match self {
            KeyMap::Direct(a, _) => Some(Self::direct_get(a, k)),
            _ => None,
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
    pub(super) fn get_one(&self, k: u64) -> Option<usize> {
        match self {
            KeyMap::Direct(a, _) => Self::direct_get(a, k),
            KeyMap::Narrow(m) => m.get(k as u32).map(|i| i as usize),
            KeyMap::One(m) => m.get(&k).map(|i| *i as usize),
            KeyMap::Two(m) => m.get(&(k, 0)).map(|i| *i as usize),
            KeyMap::Wide(m) => m.get(&hkey(&[k])).map(|i| *i as usize),
        }
    }
    pub(super) fn insert(&mut self, k: &[u64], i: usize) {
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
                    let m: Vec<(u32, u32)> = a
                        .iter()
                        .enumerate()
                        .filter(|(_, v)| **v != 0)
                        .map(|(x, v)| (x as u32, v - 1))
                        .collect();
                    *self = if kv <= u32::MAX as u64 {
                        let mut n = Map32::new(super::map32::table_seed());
                        for (x, v) in m {
                            n.insert(x, v);
                        }
                        KeyMap::Narrow(n)
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
            KeyMap::Two(m) => {
                m.insert(pair(k), i as u32);
            }
            KeyMap::Wide(m) => {
                m.insert(hkey(k), i as u32);
            }
        }
    }
    pub(super) fn remove(&mut self, k: &[u64]) {
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
                m.remove(k.first().copied().unwrap_or(0) as u32);
            }
            KeyMap::One(m) => {
                m.remove(&k.first().copied().unwrap_or(0));
            }
            KeyMap::Two(m) => {
                m.remove(&pair(k));
            }
            KeyMap::Wide(m) => {
                m.remove(&hkey(k));
            }
        }
    }
    pub(super) fn is_empty(&self) -> bool {
        match self {
            KeyMap::Direct(_, n) => *n == 0,
            KeyMap::Narrow(m) => m.is_empty(),
            KeyMap::One(m) => m.is_empty(),
            KeyMap::Two(m) => m.is_empty(),
            KeyMap::Wide(m) => m.is_empty(),
        }
    }
    pub(super) fn clear(&mut self) {
        match self {
            KeyMap::Direct(a, n) => {
                a.fill(0);
                *n = 0;
            }
            KeyMap::Narrow(m) => m.clear(),
            KeyMap::One(m) => m.clear(),
            KeyMap::Two(m) => m.clear(),
            KeyMap::Wide(m) => m.clear(),
        }
    }
}

/// Word `j` of the mask selecting the top `plen` bits of a `width`-bit field.
#[inline]
pub(super) fn prefix_word_mask(width: u32, plen: u32, j: usize) -> u64 {
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
