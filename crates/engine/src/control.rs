//! The control-plane API of the engine: statistics and digests here; tables in `control/`
//! (`table_versions.rs` one-entry changes and the publication of new versions, `table_writes.rs`
//! batches of [`crate::tables::TableOp`]s, `table_reads.rs`, `profile_writes.rs` action profile
//! members and groups), the packet replication engine (`replication.rs`: mirroring, multicast),
//! registers, counters, meters, value sets and extern instances (`stateful.rs`). Packet
//! processing never waits for any of these.

use crate::{DigestMsg, Engine, StatsSnapshot};
use p4sec_ir::*;
use std::sync::atomic::Ordering;

impl Engine {
    /// Packet statistics summed over every worker created for this engine.
    pub fn stats(&self) -> StatsSnapshot {
        let mut t = StatsSnapshot::default();
        for s in self
            .worker_stats
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            t.packets_in += s.packets_in.load(Ordering::Relaxed);
            t.packets_out += s.packets_out.load(Ordering::Relaxed);
            t.dropped += s.dropped.load(Ordering::Relaxed);
            t.pass_limit += s.pass_limit.load(Ordering::Relaxed);
            t.assert_failures += s.assert_failures.load(Ordering::Relaxed);
            t.extern_faults += s.extern_faults.load(Ordering::Relaxed);
            t.loop_limit += s.loop_limit.load(Ordering::Relaxed);
        }
        t
    }

    /// (hits, misses) of table `ti`, summed over every worker.
    pub fn table_stats(&self, ti: usize) -> (u64, u64) {
        let mut t = (0, 0);
        for s in self
            .worker_stats
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            if let Some((h, m)) = s.tables.get(ti) {
                t.0 += h.load(Ordering::Relaxed);
                t.1 += m.load(Ordering::Relaxed);
            }
        }
        t
    }

    pub fn program(&self) -> &Program {
        &self.prog
    }

    pub(crate) fn push_digest(&self, id: u32, vals: Vec<Value>) {
        let mut q = self.digests.queue.lock().unwrap_or_else(|p| p.into_inner());
        if q.len() < 65536 {
            q.push_back((id, vals));
            self.digests.pending.store(true, Ordering::Release);
        }
    }

    /// Are digest messages waiting? (One atomic load: cheap to ask after every packet.)
    pub fn has_digests(&self) -> bool {
        self.digests.pending.load(Ordering::Acquire)
    }

    /// Take the digest messages produced so far.
    pub fn drain_digests(&self) -> Vec<DigestMsg> {
        let mut q = self.digests.queue.lock().unwrap_or_else(|p| p.into_inner());
        self.digests.pending.store(false, Ordering::Release);
        q.drain(..).collect()
    }

    /// The index of the table named `name`.
    pub fn table_index(&self, name: &str) -> Option<usize> {
        self.prog.tables.iter().position(|t| t.name == name)
    }
}

mod profile_writes;
mod replication;
mod stateful;
mod table_reads;
mod table_versions;
mod table_writes;
#[cfg(test)]
mod tests;
