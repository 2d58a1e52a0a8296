//! Reading tables back in the engine's terms: installed entries with their counters, meters, idle
//! state and action profile targets ([`EntryInfo`]), and the idle entries to report.

use crate::tables::profiles::target_of;
use crate::tables::{EntryInfo, Installed, TableError};
use crate::Engine;
use p4sec_ir::TableEntry;
use std::sync::atomic::Ordering::Relaxed;

fn info(x: &Installed) -> EntryInfo {
    EntryInfo {
        entry: x.entry.clone(),
        target: x.indirect.as_deref().map(target_of),
        packets: x.packets.load(Relaxed),
        bytes: x.bytes.load(Relaxed),
        meter: x.meter.as_ref().map(|m| (m.rates(), m.counts())),
        idle_timeout_ns: x.idle_timeout_ns,
        last_hit_ms: x.last_hit.load(Relaxed),
        idle_notified_ms: x.idle_notified.load(Relaxed),
    }
}

impl Engine {
    /// The installed entries of table `ti`, in installation order (with deletions filled from the
    /// end).
    pub fn table_read(&self, ti: usize) -> Result<Vec<EntryInfo>, TableError> {
        let (_, rt) = self.table(ti).map_err(TableError::not_found)?;
        Ok(rt.data.load().entries.iter().map(|x| info(x)).collect())
    }

    /// The installed entry of table `ti` with the match (and priority) of `m`.
    pub fn table_read_entry(&self, ti: usize, m: &TableEntry) -> Result<EntryInfo, TableError> {
        let (t, rt) = self.table(ti).map_err(TableError::not_found)?;
        let d = rt.data.load();
        let i = d.find(t, m).ok_or_else(|| TableError::no_entry(t))?;
        Ok(info(&d.entries[i]))
    }

    /// The number of entries table `ti` holds.
    pub fn table_len(&self, ti: usize) -> Result<usize, String> {
        Ok(self.table(ti)?.1.data.load().entries.len())
    }

    /// Call `f` with each installed entry of table `ti` (its match and the action a hit runs),
    /// without copying them.
    pub fn table_for_each_entry(
        &self,
        ti: usize,
        mut f: impl FnMut(&TableEntry),
    ) -> Result<(), String> {
        let (_, rt) = self.table(ti)?;
        for x in rt.data.load().entries.iter() {
            f(&x.entry);
        }
        Ok(())
    }

    /// The entries of table `ti` with an idle timeout that were not hit for longer than it by
    /// `now_ms` ([`crate::coarse_ms`]) and whose controller was not told yet since their last hit.
    pub fn table_idle_entries(&self, ti: usize, now_ms: u64) -> Result<Vec<EntryInfo>, String> {
        let (_, rt) = self.table(ti)?;
        Ok(rt
            .data
            .load()
            .entries
            .iter()
            .filter(|x| {
                let last = x.last_hit.load(Relaxed);
                x.idle_timeout_ns != 0
                    && now_ms.saturating_sub(last).saturating_mul(1_000_000) >= x.idle_timeout_ns
                    && x.idle_notified.load(Relaxed) != last
            })
            .map(|x| info(x))
            .collect())
    }

    /// The controller was told that the entry of table `ti` with this match is idle since its hit
    /// at `last_hit_ms`: it is not told again until the entry is hit and idle anew.
    pub fn table_idle_told(&self, ti: usize, m: &TableEntry, last_hit_ms: u64) {
        let Ok((t, rt)) = self.table(ti) else { return };
        let d = rt.data.load();
        if let Some(i) = d.find(t, m) {
            d.entries[i].idle_notified.store(last_hit_ms, Relaxed);
        }
    }
}
