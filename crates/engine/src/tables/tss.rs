//! Tuple space search for tables whose entries carry masks (ternary, optional, several LPM keys,
//! range): entries are grouped by their mask tuple; each group maps the hash of the masked key to a
//! chain of its entries in match order. A lookup probes one hash map per group, best groups first,
//! and stops as soon as no group left can hold a better entry. Range fields take no part in the
//! hash (their mask is zero); the caller checks each candidate's match in full.
//!
//! Everything is flat (hash maps of integers, per-entry arrays): a table version is copied on every
//! write batch, and this copy must stay a few memcpys, without an allocation per entry.

use rustc_hash::{FxHashMap, FxHasher};
use std::cmp::Reverse;
use std::hash::Hasher;

/// Match rank of an entry: lower is better (priority descending, then the earlier insertion).
pub type Rank = (Reverse<i32>, u64);

const NONE: u32 = u32::MAX;

#[derive(Clone, Debug)]
struct Group {
    mask: Box<[u64]>,
    /// Hash of the masked key -> the first entry of its chain (chains are in match order).
    heads: FxHashMap<u64, u32>,
    /// The best priority of any entry in the group.
    max_prio: i32,
    len: usize,
}

#[derive(Clone, Debug, Default)]
pub struct Tss {
    /// Sorted by `max_prio`, highest first.
    groups: Vec<Group>,
    /// Per entry index: the next entry of its chain, and its rank.
    next: Vec<u32>,
    rank: Vec<Rank>,
}

#[inline]
fn masked_hash(key: &[u64], mask: &[u64]) -> u64 {
    let mut h = FxHasher::default();
    for (k, m) in key.iter().zip(mask) {
        h.write_u64(k & m);
    }
    h.finish()
}

impl Tss {
    pub fn clear(&mut self) {
        self.groups.clear();
        self.next.clear();
        self.rank.clear();
    }

    /// Add entry `i` with its mask and key (both `key_words` long).
    pub fn add(&mut self, mask: &[u64], key: &[u64], rank: Rank, i: u32) {
        let iu = i as usize;
        if self.next.len() <= iu {
            self.next.resize(iu + 1, NONE);
            self.rank.resize(iu + 1, (Reverse(0), 0));
        }
        self.rank[iu] = rank;
        let g = match self.groups.iter().position(|g| &*g.mask == mask) {
            Some(g) => g,
            None => {
                self.groups.push(Group {
                    mask: mask.into(),
                    heads: FxHashMap::default(),
                    max_prio: rank.0 .0,
                    len: 0,
                });
                self.groups.len() - 1
            }
        };
        let h = masked_hash(key, mask);
        let grp = &mut self.groups[g];
        match grp.heads.get(&h).copied() {
            Some(head) if self.rank[head as usize] < rank => {
                // after the last entry that ranks before it
                let mut at = head;
                while self.next[at as usize] != NONE
                    && self.rank[self.next[at as usize] as usize] < rank
                {
                    at = self.next[at as usize];
                }
                self.next[iu] = self.next[at as usize];
                self.next[at as usize] = i;
            }
            old => {
                self.next[iu] = old.unwrap_or(NONE);
                grp.heads.insert(h, i);
            }
        }
        grp.len += 1;
        grp.max_prio = grp.max_prio.max(rank.0 .0);
        self.sort();
    }

    /// Remove entry `i` (added with this mask and key).
    pub fn remove(&mut self, mask: &[u64], key: &[u64], i: u32) {
        let Some(g) = self.groups.iter().position(|g| &*g.mask == mask) else {
            return;
        };
        let h = masked_hash(key, mask);
        let grp = &mut self.groups[g];
        let Some(head) = grp.heads.get(&h).copied() else {
            return;
        };
        if head == i {
            match self.next[i as usize] {
                NONE => grp.heads.remove(&h),
                n => grp.heads.insert(h, n),
            };
        } else {
            let mut at = head;
            while self.next[at as usize] != NONE && self.next[at as usize] != i {
                at = self.next[at as usize];
            }
            if self.next[at as usize] != i {
                return;
            }
            self.next[at as usize] = self.next[i as usize];
        }
        self.next[i as usize] = NONE;
        grp.len -= 1;
        if grp.len == 0 {
            self.groups.remove(g);
        } else if self.rank[i as usize].0 .0 == grp.max_prio {
            let rank = &self.rank;
            grp.max_prio = grp
                .heads
                .values()
                .map(|&x| rank[x as usize].0 .0)
                .max()
                .unwrap_or(i32::MIN);
            self.sort();
        }
    }

    fn sort(&mut self) {
        self.groups.sort_by_key(|g| Reverse(g.max_prio));
    }

    /// The entries whose mask is `mask` and whose masked key hashes like `key`'s, in match order
    /// (the caller checks each one's match).
    pub fn candidates<'a>(&'a self, mask: &[u64], key: &[u64]) -> impl Iterator<Item = usize> + 'a {
        let head = self
            .groups
            .iter()
            .find(|g| &*g.mask == mask)
            .and_then(|g| g.heads.get(&masked_hash(key, mask)).copied());
        std::iter::successors(head, move |&i| {
            Some(self.next[i as usize]).filter(|&n| n != NONE)
        })
        .map(|i| i as usize)
    }

    /// The best entry for `key` (`key_words` long) among those whose full match `matches` confirms.
    #[inline]
    pub fn lookup(&self, key: &[u64], mut matches: impl FnMut(usize) -> bool) -> Option<usize> {
        let mut best: Option<(Rank, u32)> = None;
        for g in &self.groups {
            if let Some(((Reverse(p), _), _)) = best {
                if g.max_prio < p {
                    break;
                }
            }
            let mut at = g
                .heads
                .get(&masked_hash(key, &g.mask))
                .copied()
                .unwrap_or(NONE);
            while at != NONE {
                let r = self.rank[at as usize];
                if best.is_some_and(|(b, _)| b < r) {
                    break; // the rest of the chain ranks lower still
                }
                if matches(at as usize) {
                    best = Some((r, at));
                    break;
                }
                at = self.next[at as usize];
            }
        }
        best.map(|(_, i)| i as usize)
    }
}
