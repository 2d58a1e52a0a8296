//! Tables changed one entry (or one batch closure) at a time: a copy of the table's current
//! version is changed and published (RCU), several tables at once when they must change together;
//! single-entry insert, modify, delete, default action, direct counters and meters.

use crate::meters::{MeterCell, MeterRates};
use crate::pipeline::match_action::param_writes;
use crate::tables::{self, TableData};
use crate::{Engine, TableRt};
use p4sec_ir::*;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Engine {
    pub(crate) fn table(&self, ti: usize) -> Result<(&Table, &TableRt), String> {
        match (self.prog.tables.get(ti), self.match_action.tables.get(ti)) {
            (Some(t), Some(rt)) => Ok((t, rt)),
            _ => Err(format!("no table with index {ti}")),
        }
    }

    /// Publish new versions of several tables so that no packet sees some of them without the
    /// others.
    pub(crate) fn publish(&self, versions: Vec<(usize, TableData)>) {
        let versions: Vec<(usize, TableData)> = versions
            .into_iter()
            .map(|(ti, mut d)| {
                d.default_writes = param_writes(&self.prog, &d.default);
                (ti, d)
            })
            .collect();
        let _g = self
            .match_action
            .publish_lock
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        self.match_action.version.fetch_add(1, Ordering::AcqRel);
        let mut replaced = vec![];
        for (ti, d) in versions {
            replaced.push((ti, self.match_action.tables[ti].data.swap(Arc::new(d))));
        }
        self.match_action.version.fetch_add(1, Ordering::Release);
        drop(_g);
        for (ti, old) in replaced {
            let rt = &self.match_action.tables[ti];
            // kept only when no worker reads it any more, its entries let go (only its arrays are
            // reused), and not after a change that removed most of the table (its arrays would
            // hold memory the table no longer needs)
            let now = rt.data.load().entries.len();
            let spare = Arc::try_unwrap(old)
                .ok()
                .filter(|d| d.entries.len() / 2 <= now)
                .map(|mut d| {
                    d.let_go_of_entries();
                    d
                });
            *rt.spare.lock().unwrap_or_else(|p| p.into_inner()) = spare;
        }
    }

    /// A copy of table `ti`'s current version `cur` to change: made in the version the last
    /// publication replaced when it kept it (no worker read it any more: its arrays reused, no
    /// allocation and no fresh pages for the large ones), else a new copy. The caller holds the
    /// table's write lock.
    fn copy_to_change(&self, rt: &TableRt, cur: &TableData) -> TableData {
        let spare = rt.spare.lock().unwrap_or_else(|p| p.into_inner()).take();
        match spare {
            Some(mut d) => {
                d.clone_from(cur);
                rt.recycled.fetch_add(1, Ordering::Relaxed);
                d
            }
            // a worker still read the replaced version when it was replaced, or none
            None => {
                rt.copied.fetch_add(1, Ordering::Relaxed);
                cur.clone()
            }
        }
    }

    /// How table `ti`'s changes so far made their versions: in the version the previous change
    /// replaced (its arrays reused), and in a new copy of the current one.
    pub fn table_versions_made(&self, ti: usize) -> Result<(u64, u64), String> {
        let (_, rt) = self.table(ti)?;
        Ok((
            rt.recycled.load(Ordering::Relaxed),
            rt.copied.load(Ordering::Relaxed),
        ))
    }

    /// Apply a batch of changes to one table and publish them as one new version.
    pub(crate) fn table_update(
        &self,
        ti: usize,
        f: impl FnOnce(&Table, &mut TableData) -> Result<(), String>,
    ) -> Result<(), String> {
        let (t, rt) = self.table(ti)?;
        let _g = rt.write.lock().unwrap_or_else(|p| p.into_inner());
        let mut d = self.copy_to_change(rt, &rt.data.load());
        f(t, &mut d)?;
        self.publish(vec![(ti, d)]);
        Ok(())
    }

    /// Apply changes to several tables all or nothing: `f` is called once per table (in the order
    /// given) on a copy of its current contents; if every call succeeds, all the new versions are
    /// published together (a packet sees either none or all of them), otherwise nothing changes.
    pub(crate) fn tables_update_atomic(
        &self,
        tables: &[usize],
        mut f: impl FnMut(usize, &Table, &mut TableData) -> Result<(), String>,
    ) -> Result<(), String> {
        let mut order: Vec<usize> = tables.to_vec();
        order.sort_unstable();
        order.dedup();
        for &ti in &order {
            self.table(ti)?;
        }
        // the write locks in index order (no deadlock with other writers)
        let guards: Vec<_> = order
            .iter()
            .map(|&ti| {
                self.match_action.tables[ti]
                    .write
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
            })
            .collect();
        let mut versions: Vec<(usize, TableData)> = vec![];
        for &ti in tables {
            let t = &self.prog.tables[ti];
            // each table's copy changed where it lies (a table version is hundreds of bytes: not
            // moved per change)
            let p = match versions.iter().position(|(x, _)| *x == ti) {
                Some(p) => p,
                None => {
                    let rt = &self.match_action.tables[ti];
                    versions.push((ti, self.copy_to_change(rt, &rt.data.load())));
                    versions.len() - 1
                }
            };
            f(ti, t, &mut versions[p].1)?;
        }
        self.publish(versions);
        drop(guards);
        Ok(())
    }

    pub fn table_insert(&self, ti: usize, e: TableEntry) -> Result<(), String> {
        let (t, _) = self.table(ti)?;
        if t.entries_are_const {
            return Err(format!(
                "table `{}` has const entries and cannot be changed",
                t.name
            ));
        }
        tables::validate_entry(&self.prog, t, &e)?;
        self.table_update(ti, |t, d| d.insert(t, e))
    }

    pub fn table_modify(&self, ti: usize, e: TableEntry) -> Result<(), String> {
        let (t, _) = self.table(ti)?;
        if t.entries_are_const {
            return Err(format!(
                "table `{}` has const entries and cannot be changed",
                t.name
            ));
        }
        tables::validate_entry(&self.prog, t, &e)?;
        self.table_update(ti, |t, d| d.modify(t, e))
    }

    pub fn table_delete(&self, ti: usize, e: &TableEntry) -> Result<(), String> {
        let (t, _) = self.table(ti)?;
        if t.entries_are_const {
            return Err(format!(
                "table `{}` has const entries and cannot be changed",
                t.name
            ));
        }
        self.table_update(ti, |t, d| Ok(d.delete(t, e).map(|_| ())?))
    }

    pub fn table_set_default(&self, ti: usize, a: ActionCall) -> Result<(), String> {
        let (t, _) = self.table(ti)?;
        if t.default_is_const && a != t.default_action {
            return Err(format!("table `{}` has a const default action", t.name));
        }
        tables::validate_action(&self.prog, t, &a, true)?;
        self.table_update(ti, |_, d| {
            d.default = a;
            Ok(())
        })
    }

    pub fn table_default(&self, ti: usize) -> Result<ActionCall, String> {
        let (_, rt) = self.table(ti)?;
        Ok(rt.data.load().default.clone())
    }

    /// Installed entries with their direct counter values (packets, bytes).
    pub fn table_entries(&self, ti: usize) -> Result<Vec<(TableEntry, u64, u64)>, String> {
        let (_, rt) = self.table(ti)?;
        Ok(rt
            .data
            .load()
            .entries
            .iter()
            .map(|e| {
                (
                    e.entry.clone(),
                    e.packets.load(Ordering::Relaxed),
                    e.bytes.load(Ordering::Relaxed),
                )
            })
            .collect())
    }

    /// The current contents of table `ti` (installed entries with their counters, meters and action
    /// profile references).
    pub(crate) fn table_snapshot(&self, ti: usize) -> Result<Arc<TableData>, String> {
        let (_, rt) = self.table(ti)?;
        Ok(rt.data.load_full())
    }

    /// Set the direct counter of one installed entry (no new table version: the counters are shared
    /// cells).
    pub fn table_entry_counters_set(
        &self,
        ti: usize,
        e: &TableEntry,
        packets: u64,
        bytes: u64,
    ) -> Result<(), String> {
        let (t, rt) = self.table(ti)?;
        if t.direct_counter.is_none() {
            return Err(format!("table `{}` has no direct counter", t.name));
        }
        let d = rt.data.load();
        let i = d
            .find(t, e)
            .ok_or_else(|| format!("table `{}`: no entry with this match", t.name))?;
        d.entries[i].packets.store(packets, Ordering::Relaxed);
        d.entries[i].bytes.store(bytes, Ordering::Relaxed);
        Ok(())
    }

    pub fn table_clear(&self, ti: usize) -> Result<(), String> {
        self.table_update(ti, |t, d| {
            d.clear(t);
            Ok(())
        })
    }

    /// Configure the direct meter of one table entry (`rates`: `None` leaves the configuration,
    /// `Some(None)` marks everything green); its per-colour counters are kept, or set to `counts`
    /// when given.
    pub fn direct_meter_set(
        &self,
        ti: usize,
        e: &TableEntry,
        rates: Option<Option<MeterRates>>,
        counts: Option<[(u64, u64); 3]>,
    ) -> Result<(), String> {
        let cell = {
            let d = self.table_snapshot(ti)?;
            let t = &self.prog.tables[ti];
            let i = d
                .find(t, e)
                .ok_or_else(|| format!("table `{}`: no entry with this match", t.name))?;
            d.entries[i].meter.clone()
        };
        if let Some(cell) = cell {
            if let Some(r) = rates {
                cell.configure(r);
            }
            if let Some(c) = counts {
                cell.set_counts(c);
            }
            return Ok(());
        }
        self.table_update(ti, |t, d| {
            let i = d
                .find(t, e)
                .ok_or_else(|| format!("table `{}`: no entry with this match", t.name))?;
            let old = &d.entries[i];
            let cell = Arc::new(MeterCell::default());
            cell.configure(rates.flatten());
            if let Some(c) = counts {
                cell.set_counts(c);
            }
            let mut n = (**old).clone();
            n.meter = Some(cell);
            d.replace(t, i, n);
            Ok(())
        })
    }
}
