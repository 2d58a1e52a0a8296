//! The index of an LPM table whose LPM key has at most 32 bits and whose other keys are exact, of
//! at most 64 bits each (a VRF beside an IPv4 destination): one narrow LPM index ([`Lpm32`], with
//! the hit maps native code reads when the table has them) per value of the exact keys, its part,
//! found by comparing those values. Each part is looked up as a one-key IPv4 table is, so a route
//! in a VRF costs what a route without one does, plus finding its part. A table that comes to hold
//! more than [`MAX_PARTS`] values of its exact keys is indexed by the general LPM levels instead
//! (until it is cleared): a part is a fixed cost in memory and in every version's copy.

use super::entry::HotData;
use super::keys::{HKey, HKEY_WORDS};
use super::lpm32::{HitArgs, Lpm32};

/// The most parts (values of the exact keys) a table keeps in this index.
pub(super) const MAX_PARTS: usize = 16;

/// Where a table's key puts the LPM field and how wide it is ([`Parts::new`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Shape {
    /// The LPM field's word in the packed key (one word per field).
    pub(super) lpm_word: usize,
    /// The packed key's words (the number of keys), 2 to [`HKEY_WORDS`].
    pub(super) words: usize,
    /// The LPM field's width (1 to 32).
    pub(super) width: u32,
    /// The word of the one exact key, when there is one (a part is then found by that word).
    pub(super) exact1: Option<usize>,
}

/// The parts of an LPM table of the shape.
#[derive(Debug)]
pub(super) struct Parts {
    /// The table's entries are indexed here: its key is of the shape, and it has held at most
    /// [`MAX_PARTS`] values of its exact keys since it was made or last cleared.
    pub(super) on: bool,
    shape: Option<Shape>,
    /// Per part: the packed key of its exact keys' values (the LPM word zero).
    keys: Vec<HKey>,
    /// Per part, for a table of one exact key: that key's word (found by a scan of these words).
    ones: Vec<u64>,
    /// Per part: its prefixes.
    lpms: Vec<Lpm32>,
    seed: u64,
    /// The parts keep hit maps ([`Lpm32::get_hit`]).
    hits: bool,
}

super::clone_fields::clone_by_fields!(Parts {
    on,
    shape,
    keys,
    ones,
    lpms,
    seed,
    hits,
});

impl Parts {
    /// The index of a table of `shape` (`None`: of another shape, never on), its maps hashing with
    /// `seed`, with hit maps when `hits`.
    pub(super) fn new(shape: Option<Shape>, seed: u64, hits: bool) -> Parts {
        Parts {
            on: shape.is_some(),
            shape,
            keys: vec![],
            ones: vec![],
            lpms: vec![],
            seed,
            hits,
        }
    }

    /// The words of the packed key of a table of the shape (a word per key), 0 for another.
    #[inline(always)]
    pub(super) fn words(&self) -> usize {
        self.shape.map_or(0, |s| s.words)
    }

    /// Whether the index answers [`Parts::get_hit`] (on, with hit maps).
    #[inline(always)]
    pub(super) fn has_hits(&self) -> bool {
        self.on && self.hits
    }

    /// The part of packed key `key` (its exact words; the LPM word is not looked at), and the
    /// LPM word.
    #[inline(always)]
    fn part_of(&self, key: &[u64]) -> Option<(&Lpm32, u32)> {
        let s = self.shape.as_ref()?;
        let (p, k) = match s.exact1 {
            // (the common case, a VRF: one word compared per part)
            Some(x) => {
                let (&v, &k) = (key.get(x)?, key.get(s.lpm_word)?);
                (self.ones.iter().position(|&w| w == v)?, k as u32)
            }
            None => {
                let (probe, k) = split(s, key);
                (self.keys.iter().position(|x| *x == probe)?, k)
            }
        };
        Some((self.lpms.get(p)?, k))
    }

    /// The entry whose prefix is the longest to match packed key `key` among those of its exact
    /// keys' values.
    #[inline(always)]
    pub(super) fn get(&self, key: &[u64]) -> Option<u32> {
        let (l, k) = self.part_of(key)?;
        l.get(k)
    }

    /// What a hit on the entry [`Parts::get`] finds needs, from the part's hit maps (none without
    /// them: a miss).
    #[inline(always)]
    pub(super) fn get_hit(&self, key: &[u64]) -> Option<(u32, &HitArgs)> {
        let (l, k) = self.part_of(key)?;
        l.get_hit(k)
    }

    /// The entry of packed key `key` (its prefix masked) of prefix length `plen`.
    pub(super) fn get_exact(&self, key: &[u64], plen: u32) -> Option<u32> {
        let (l, k) = self.part_of(key)?;
        l.get_exact(k, plen)
    }

    /// Index entry `i` under packed key `key` (its prefix masked) of prefix length `plen`; `hot`:
    /// what a hit on it needs. `false`, nothing changed, when its exact keys' values would be a
    /// part past [`MAX_PARTS`] (the caller gives the index up: [`Parts::give_up`]).
    pub(super) fn insert(&mut self, key: &[u64], plen: u32, i: u32, hot: &HotData) -> bool {
        let Some(s) = self.shape else {
            return false;
        };
        let (probe, k) = split(&s, key);
        let p = match self.keys.iter().position(|x| *x == probe) {
            Some(p) => p,
            // a part left empty by deletes takes the new values
            None => match self.lpms.iter().position(Lpm32::is_empty) {
                Some(p) => {
                    self.keys[p] = probe;
                    self.ones[p] = one(&s, &probe);
                    p
                }
                None if self.keys.len() < MAX_PARTS => {
                    self.keys.push(probe);
                    self.ones.push(one(&s, &probe));
                    self.lpms
                        .push(Lpm32::new(Some(s.width), self.seed, self.hits));
                    self.keys.len() - 1
                }
                None => return false,
            },
        };
        self.lpms[p].insert(k, plen, i, hot);
        true
    }

    /// Forget the entry of packed key `key` (its prefix masked) of prefix length `plen`.
    pub(super) fn remove(&mut self, key: &[u64], plen: u32) {
        let Some(s) = self.shape else {
            return;
        };
        let (probe, k) = split(&s, key);
        if let Some(p) = self.keys.iter().position(|x| *x == probe) {
            self.lpms[p].remove(k, plen);
        }
    }

    /// Stop indexing here: the parts let go (the table's general LPM levels take over).
    pub(super) fn give_up(&mut self) {
        self.on = false;
        self.keys = vec![];
        self.ones = vec![];
        self.lpms = vec![];
    }

    /// Empty, and on again for a table of the shape.
    pub(super) fn clear(&mut self) {
        self.on = self.shape.is_some();
        self.keys.clear();
        self.ones.clear();
        self.lpms.clear();
    }

    /// The parts held (values of the exact keys, parts left empty by deletes included).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.keys.len()
    }
}

/// Packed key `key` of a table of shape `s` as its part's key (the exact words, the LPM word zero)
/// and the LPM word.
#[inline(always)]
fn split(s: &Shape, key: &[u64]) -> (HKey, u32) {
    let mut probe: HKey = [0; HKEY_WORDS];
    // (word by word over the fixed array: no call to copy a slice of unknown length)
    for (j, p) in probe.iter_mut().enumerate() {
        if j < s.words {
            *p = key.get(j).copied().unwrap_or(0);
        }
    }
    let k = probe.get_mut(s.lpm_word).map_or(0, std::mem::take);
    (probe, k as u32)
}

/// A part's word in [`Parts::ones`]: its one exact key's word (0 for a table of more).
fn one(s: &Shape, key: &HKey) -> u64 {
    s.exact1.and_then(|x| key.get(x)).copied().unwrap_or(0)
}
