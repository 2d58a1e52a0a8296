//! The control-plane API of the engine: tables (atomic publication of new versions), the packet
//! replication engine (mirroring, multicast), registers, counters, meters, value sets, extern
//! instances, digests and statistics. Packet processing never waits for any of these.

use crate::meters::{MeterCell, MeterRates};
use crate::pipeline::match_action::param_writes;
use crate::tables::{self, TableData};
use crate::{bits, DigestMsg, Engine, Pre, StatsSnapshot, TableRt};
use p4sec_ir::*;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Pre {
    /// A new node in the first free handle (handles of deleted nodes are reused).
    fn add_node(&mut self, rid: u32, ports: Vec<u32>) -> u32 {
        match self.nodes.iter().position(Option::is_none) {
            Some(h) => {
                self.nodes[h] = Some((rid, ports));
                h as u32
            }
            None => {
                self.nodes.push(Some((rid, ports)));
                self.nodes.len() as u32 - 1
            }
        }
    }
    /// Delete the nodes no group refers to any more (after a group lost them).
    fn release_nodes(&mut self, handles: &[u32]) {
        for &h in handles {
            if !self.groups.values().any(|g| g.contains(&h)) {
                if let Some(n) = self.nodes.get_mut(h as usize) {
                    *n = None;
                }
            }
        }
        while matches!(self.nodes.last(), Some(None)) {
            self.nodes.pop();
        }
    }
}

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

    // ------------------------------------------------------------ control plane

    pub fn table_index(&self, name: &str) -> Option<usize> {
        self.prog.tables.iter().position(|t| t.name == name)
    }

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
        for (ti, d) in versions {
            self.match_action.tables[ti].data.store(Arc::new(d));
        }
        self.match_action.version.fetch_add(1, Ordering::Release);
    }

    /// Apply a batch of changes to one table and publish them as one new version.
    pub(crate) fn table_update(
        &self,
        ti: usize,
        f: impl FnOnce(&Table, &mut TableData) -> Result<(), String>,
    ) -> Result<(), String> {
        let (t, rt) = self.table(ti)?;
        let _g = rt.write.lock().unwrap_or_else(|p| p.into_inner());
        let mut d = (**rt.data.load()).clone();
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
        let mut versions = vec![];
        for &ti in tables {
            let t = &self.prog.tables[ti];
            let mut d = match versions.iter().position(|(x, _)| *x == ti) {
                Some(p) => versions.remove(p).1,
                None => (**self.match_action.tables[ti].data.load()).clone(),
            };
            f(ti, t, &mut d)?;
            versions.push((ti, d));
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

    pub fn mirroring_add(&self, session: u32, port: u32) {
        let _g = self
            .replication
            .write
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut p = (**self.replication.config.load()).clone();
        p.mirror.insert(session, port);
        self.replication.config.store(Arc::new(p));
    }

    pub fn mirroring_delete(&self, session: u32) -> Result<(), String> {
        let _g = self
            .replication
            .write
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut p = (**self.replication.config.load()).clone();
        p.mirror
            .remove(&session)
            .ok_or_else(|| format!("no mirror session {session}"))?;
        self.replication.config.store(Arc::new(p));
        Ok(())
    }

    pub fn pre(&self) -> Arc<Pre> {
        self.replication.config.load_full()
    }

    pub fn mc_group_create(&self, grp: u32) -> Result<(), String> {
        let _g = self
            .replication
            .write
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut p = (**self.replication.config.load()).clone();
        if p.groups.contains_key(&grp) {
            return Err(format!("multicast group {grp} already exists"));
        }
        p.groups.insert(grp, vec![]);
        self.replication.config.store(Arc::new(p));
        Ok(())
    }

    pub fn mc_group_delete(&self, grp: u32) -> Result<(), String> {
        let _g = self
            .replication
            .write
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut p = (**self.replication.config.load()).clone();
        let old = p
            .groups
            .remove(&grp)
            .ok_or_else(|| format!("no multicast group {grp}"))?;
        p.release_nodes(&old);
        self.replication.config.store(Arc::new(p));
        Ok(())
    }

    /// Create a replication node; returns its handle (0, 1, 2, ... in creation order).
    pub fn mc_node_create(&self, rid: u32, ports: Vec<u32>) -> u32 {
        let _g = self
            .replication
            .write
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut p = (**self.replication.config.load()).clone();
        let h = p.add_node(rid, ports);
        self.replication.config.store(Arc::new(p));
        h
    }

    pub fn mc_node_associate(&self, grp: u32, node: u32) -> Result<(), String> {
        let _g = self
            .replication
            .write
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut p = (**self.replication.config.load()).clone();
        if !matches!(p.nodes.get(node as usize), Some(Some(_))) {
            return Err(format!("no replication node {node}"));
        }
        p.groups
            .get_mut(&grp)
            .ok_or_else(|| format!("no multicast group {grp}"))?
            .push(node);
        self.replication.config.store(Arc::new(p));
        Ok(())
    }

    /// Replace a multicast group's replicas with `(rid, port)` pairs (the P4Runtime view of the
    /// PRE).
    pub fn mc_group_set(&self, grp: u32, replicas: &[(u32, u32)]) {
        let _g = self
            .replication
            .write
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut p = (**self.replication.config.load()).clone();
        let old = p.groups.remove(&grp).unwrap_or_default();
        p.release_nodes(&old);
        let handles = replicas
            .iter()
            .map(|(rid, port)| p.add_node(*rid, vec![*port]))
            .collect();
        p.groups.insert(grp, handles);
        self.replication.config.store(Arc::new(p));
    }

    pub fn register_read(&self, reg: usize, index: usize) -> Result<Value, String> {
        let r = self
            .externs
            .registers
            .get(reg)
            .ok_or_else(|| format!("no register {reg}"))?;
        if index >= r.size {
            return Err(format!(
                "register index {index} is out of range (size {})",
                r.size
            ));
        }
        let words = (0..r.words)
            .map(|k| r.cells[index * r.words + k].load(Ordering::Relaxed))
            .collect();
        Ok(Value {
            width: r.width,
            words,
        })
    }

    pub fn register_write(&self, reg: usize, index: usize, v: &Value) -> Result<(), String> {
        let r = self
            .externs
            .registers
            .get(reg)
            .ok_or_else(|| format!("no register {reg}"))?;
        if index >= r.size {
            return Err(format!(
                "register index {index} is out of range (size {})",
                r.size
            ));
        }
        for k in 0..r.words {
            let mut x = v.words.get(k).copied().unwrap_or(0);
            let lo = k as u32 * 64;
            if r.width - lo < 64 {
                x &= bits::mask64(r.width - lo);
            }
            r.cells[index * r.words + k].store(x, Ordering::Relaxed);
        }
        Ok(())
    }

    pub fn register_size(&self, reg: usize) -> Option<usize> {
        self.externs.registers.get(reg).map(|r| r.size)
    }

    /// (packets, bytes) of an indexed counter cell.
    pub fn counter_read(&self, counter: usize, index: usize) -> Result<(u64, u64), String> {
        let c = self
            .externs
            .counters
            .get(counter)
            .ok_or_else(|| format!("no counter {counter}"))?;
        let cell = c
            .get(index)
            .ok_or_else(|| format!("counter index {index} is out of range (size {})", c.len()))?;
        Ok((
            cell.0.load(Ordering::Relaxed),
            cell.1.load(Ordering::Relaxed),
        ))
    }

    pub fn counter_write(
        &self,
        counter: usize,
        index: usize,
        packets: u64,
        bytes: u64,
    ) -> Result<(), String> {
        let c = self
            .externs
            .counters
            .get(counter)
            .ok_or_else(|| format!("no counter {counter}"))?;
        let cell = c
            .get(index)
            .ok_or_else(|| format!("counter index {index} is out of range (size {})", c.len()))?;
        cell.0.store(packets, Ordering::Relaxed);
        cell.1.store(bytes, Ordering::Relaxed);
        Ok(())
    }

    pub fn meter_set_rates(
        &self,
        meter: usize,
        index: usize,
        rates: Option<MeterRates>,
    ) -> Result<(), String> {
        let m = self
            .externs
            .meters
            .get(meter)
            .ok_or_else(|| format!("no meter {meter}"))?;
        m.get(index)
            .ok_or_else(|| format!("meter index {index} is out of range"))?
            .configure(rates);
        Ok(())
    }

    pub fn meter_rates(&self, meter: usize, index: usize) -> Result<Option<MeterRates>, String> {
        let m = self
            .externs
            .meters
            .get(meter)
            .ok_or_else(|| format!("no meter {meter}"))?;
        Ok(m.get(index)
            .ok_or_else(|| format!("meter index {index} is out of range"))?
            .rates())
    }

    /// Per-colour counters of an indexed meter cell: (packets, bytes) green, yellow, red.
    pub fn meter_counts(&self, meter: usize, index: usize) -> Result<[(u64, u64); 3], String> {
        let m = self
            .externs
            .meters
            .get(meter)
            .ok_or_else(|| format!("no meter {meter}"))?;
        Ok(m.get(index)
            .ok_or_else(|| format!("meter index {index} is out of range"))?
            .counts())
    }

    pub fn meter_set_counts(
        &self,
        meter: usize,
        index: usize,
        c: [(u64, u64); 3],
    ) -> Result<(), String> {
        let m = self
            .externs
            .meters
            .get(meter)
            .ok_or_else(|| format!("no meter {meter}"))?;
        m.get(index)
            .ok_or_else(|| format!("meter index {index} is out of range"))?
            .set_counts(c);
        Ok(())
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
            d.replace(i, n);
            Ok(())
        })
    }

    /// Replace the members of a value set: one match per element of the set (exact, ternary, lpm,
    /// range, optional or any), each fitting the element's width.
    pub fn value_set_set(&self, vs: usize, members: Vec<Vec<FieldMatch>>) -> Result<(), String> {
        let s = self
            .parser
            .value_sets
            .get(vs)
            .ok_or_else(|| format!("no value set {vs}"))?;
        let v = &self.prog.value_sets[vs];
        if members.len() > v.size as usize {
            return Err(format!(
                "value set `{}` holds at most {} members, {} given",
                v.name,
                v.size,
                members.len()
            ));
        }
        for m in &members {
            if m.len() != v.widths.len() {
                return Err(format!(
                    "value set `{}` has {} elements, a member gives {}",
                    v.name,
                    v.widths.len(),
                    m.len()
                ));
            }
        }
        s.store(Arc::new(members));
        Ok(())
    }

    pub fn value_set_get(&self, vs: usize) -> Result<Vec<Vec<FieldMatch>>, String> {
        Ok((**self
            .parser
            .value_sets
            .get(vs)
            .ok_or_else(|| format!("no value set {vs}"))?
            .load())
        .clone())
    }

    /// Control-plane access to a registered extern instance (e.g. installing an SA).
    pub fn extern_control(&self, inst: &str, op: &str, args: &[u8]) -> Result<Vec<u8>, String> {
        let i = self
            .prog
            .externs
            .iter()
            .position(|e| e.name == inst)
            .ok_or_else(|| format!("no extern instance `{inst}`"))?;
        self.externs.instances[i].control(op, args)
    }

    pub fn extern_events(&self) -> Vec<(String, String)> {
        let mut v = vec![];
        for (i, e) in self.externs.instances.iter().enumerate() {
            for ev in e.drain_events() {
                v.push((self.prog.externs[i].name.clone(), ev));
            }
        }
        v
    }
}

mod profile_writes;
mod table_reads;
mod table_writes;
#[cfg(test)]
mod tests;
