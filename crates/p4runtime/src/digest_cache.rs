//! The digest cache: digest data sent to the controller and not acknowledged yet.

use std::collections::HashMap;

/// Digest data sent to the controller and not acknowledged yet (the P4Runtime digest "cache"): the
/// same data is not sent again until its list is acknowledged or `ack_timeout_ns` has passed. At
/// most [`DIGEST_CACHE_MAX`] messages are held (the oldest lists go first: a duplicate is then
/// possible, a loss never).
#[derive(Default)]
pub(crate) struct DigestCache {
    /// Per digest id, its unacknowledged lists in the order they were sent: (list id, sent at,
    /// messages).
    pub(crate) lists:
        HashMap<u32, std::collections::VecDeque<(u64, std::time::Instant, Vec<Vec<u8>>)>>,
    /// Every message of `lists`: the digest id (4 bytes, big-endian) then the encoded `P4Data`.
    pub(crate) sent: std::collections::HashSet<Vec<u8>>,
}

const DIGEST_CACHE_MAX: usize = 1 << 16;

impl DigestCache {
    pub(crate) fn forget(&mut self, msgs: Vec<Vec<u8>>) {
        for m in msgs {
            self.sent.remove(&m);
        }
    }
    /// A DigestListAck: the list's data may be sent again.
    pub(crate) fn remove_list(&mut self, digest_id: u32, list_id: u64) {
        let Some(q) = self.lists.get_mut(&digest_id) else {
            return;
        };
        if let Some(i) = q.iter().position(|(l, _, _)| *l == list_id) {
            if let Some((_, _, msgs)) = q.remove(i) {
                self.forget(msgs);
            }
        }
    }
    /// Drop the lists of `digest_id` sent `ack_timeout` or longer ago.
    pub(crate) fn expire(
        &mut self,
        digest_id: u32,
        ack_timeout: std::time::Duration,
        now: std::time::Instant,
    ) {
        let Some(q) = self.lists.get_mut(&digest_id) else {
            return;
        };
        let mut old = vec![];
        while q
            .front()
            .is_some_and(|(_, t, _)| now.duration_since(*t) >= ack_timeout)
        {
            old.extend(q.pop_front().map(|(_, _, m)| m).unwrap_or_default());
        }
        self.forget(old);
    }
    pub(crate) fn add(
        &mut self,
        digest_id: u32,
        list_id: u64,
        now: std::time::Instant,
        msgs: Vec<Vec<u8>>,
    ) {
        for m in &msgs {
            self.sent.insert(m.clone());
        }
        let q = self.lists.entry(digest_id).or_default();
        q.push_back((list_id, now, msgs));
        while self.sent.len() > DIGEST_CACHE_MAX {
            let Some((_, _, m)) = q.pop_front() else {
                break;
            };
            for x in m {
                self.sent.remove(&x);
            }
        }
    }
    pub(crate) fn clear(&mut self) {
        self.lists.clear();
        self.sent.clear();
    }
}
