//! Tuple space search for tables whose entries carry masks (ternary, optional, several LPM keys, range):
//! entries are grouped by their mask tuple; each group is a hash map from the masked key to its entries in
//! match order. A lookup probes one hash map per group, best groups first, and stops as soon as no group left
//! can hold a better entry. Range fields take no part in the hash (their mask is zero) and are checked on the
//! candidates.

use rustc_hash::FxHashMap;
use std::cmp::Reverse;

/// Match rank of an entry: lower is better (priority descending, then the earlier insertion).
pub type Rank = (Reverse<i32>, u64);

#[derive(Clone, Debug)]
struct Group {
    mask: Box<[u64]>,
    /// Masked key -> (rank, entry index), sorted by rank.
    map: FxHashMap<Box<[u64]>, Vec<(Rank, u32)>>,
    /// The best priority of any entry in the group.
    max_prio: i32,
    len: usize,
}

#[derive(Clone, Debug, Default)]
pub struct Tss {
    /// Sorted by `max_prio`, highest first.
    groups: Vec<Group>,
}

impl Tss {
    pub fn clear(&mut self) {
        self.groups.clear();
    }

    /// Add entry `i` with its mask and masked key (both `key_words` long).
    pub fn add(&mut self, mask: &[u64], key: &[u64], rank: Rank, i: u32) {
        let g = match self.groups.iter().position(|g| &*g.mask == mask) {
            Some(g) => g,
            None => {
                self.groups.push(Group { mask: mask.into(), map: FxHashMap::default(), max_prio: rank.0 .0, len: 0 });
                self.groups.len() - 1
            }
        };
        let grp = &mut self.groups[g];
        let list = grp.map.entry(key.into()).or_default();
        let p = list.partition_point(|(r, _)| *r < rank);
        list.insert(p, (rank, i));
        grp.len += 1;
        grp.max_prio = grp.max_prio.max(rank.0 .0);
        self.sort();
    }

    /// Remove entry `i` (added with this mask and key).
    pub fn remove(&mut self, mask: &[u64], key: &[u64], i: u32) {
        let Some(g) = self.groups.iter().position(|g| &*g.mask == mask) else { return };
        let grp = &mut self.groups[g];
        let Some(list) = grp.map.get_mut(key) else { return };
        let Some(p) = list.iter().position(|(_, j)| *j == i) else { return };
        let (rank, _) = list.remove(p);
        if list.is_empty() {
            grp.map.remove(key);
        }
        grp.len -= 1;
        if grp.len == 0 {
            self.groups.remove(g);
        } else if rank.0 .0 == grp.max_prio {
            grp.max_prio = grp.map.values().filter_map(|l| l.first()).map(|(r, _)| r.0 .0).max().unwrap_or(i32::MIN);
            self.sort();
        }
    }

    fn sort(&mut self) {
        self.groups.sort_by_key(|g| Reverse(g.max_prio));
    }

    /// The entries whose mask and masked key are these (in match order): for finding an entry by its match.
    pub fn candidates(&self, mask: &[u64], key: &[u64]) -> &[(Rank, u32)] {
        self.groups.iter().find(|g| &*g.mask == mask).and_then(|g| g.map.get(key)).map_or(&[], |l| l.as_slice())
    }

    /// The best entry for `key` (`key_words` long) among those `accept` takes (the range check).
    #[inline]
    pub fn lookup(&self, key: &[u64], mut accept: impl FnMut(usize) -> bool) -> Option<usize> {
        let kw = key.len();
        let mut probe = [0u64; crate::tables::KEY_WORDS];
        let mut best: Option<(Rank, u32)> = None;
        for g in &self.groups {
            if let Some(((Reverse(p), _), _)) = best {
                if g.max_prio < p {
                    break;
                }
            }
            for j in 0..kw {
                probe[j] = key[j] & g.mask[j];
            }
            if let Some(list) = g.map.get(&probe[..kw]) {
                if let Some(&(r, i)) = list.iter().find(|(_, i)| accept(*i as usize)) {
                    if best.is_none_or(|(b, _)| r < b) {
                        best = Some((r, i));
                    }
                }
            }
        }
        best.map(|(_, i)| i as usize)
    }
}
