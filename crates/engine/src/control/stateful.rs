//! The program's stateful objects and externs from the control plane: registers, indexed counters
//! and meters, parser value sets, extern instances' control operations and events.

use crate::engine::RegisterRt;
use crate::meters::{MeterCell, MeterRates};
use crate::{bits, Engine};
use p4sec_ir::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

impl Engine {
    /// Register `reg`, with `index` checked to be one of its cells.
    fn register_rt(&self, reg: usize, index: usize) -> Result<&RegisterRt, String> {
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
        Ok(r)
    }

    /// Cell `index` of indexed counter `counter`: (packets, bytes).
    fn counter_cell(
        &self,
        counter: usize,
        index: usize,
    ) -> Result<&(AtomicU64, AtomicU64), String> {
        let c = self
            .externs
            .counters
            .get(counter)
            .ok_or_else(|| format!("no counter {counter}"))?;
        c.get(index)
            .ok_or_else(|| format!("counter index {index} is out of range (size {})", c.len()))
    }

    /// Cell `index` of indexed meter `meter`.
    fn meter_cell(&self, meter: usize, index: usize) -> Result<&MeterCell, String> {
        let m = self
            .externs
            .meters
            .get(meter)
            .ok_or_else(|| format!("no meter {meter}"))?;
        m.get(index)
            .ok_or_else(|| format!("meter index {index} is out of range"))
    }

    pub fn register_read(&self, reg: usize, index: usize) -> Result<Value, String> {
        let r = self.register_rt(reg, index)?;
        let words = (0..r.words)
            .map(|k| r.cells[index * r.words + k].load(Ordering::Relaxed))
            .collect();
        Ok(Value {
            width: r.width,
            words,
        })
    }

    pub fn register_write(&self, reg: usize, index: usize, v: &Value) -> Result<(), String> {
        let r = self.register_rt(reg, index)?;
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
        let cell = self.counter_cell(counter, index)?;
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
        let cell = self.counter_cell(counter, index)?;
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
        self.meter_cell(meter, index)?.configure(rates);
        Ok(())
    }

    pub fn meter_rates(&self, meter: usize, index: usize) -> Result<Option<MeterRates>, String> {
        Ok(self.meter_cell(meter, index)?.rates())
    }

    /// Per-colour counters of an indexed meter cell: (packets, bytes) green, yellow, red.
    pub fn meter_counts(&self, meter: usize, index: usize) -> Result<[(u64, u64); 3], String> {
        Ok(self.meter_cell(meter, index)?.counts())
    }

    pub fn meter_set_counts(
        &self,
        meter: usize,
        index: usize,
        c: [(u64, u64); 3],
    ) -> Result<(), String> {
        self.meter_cell(meter, index)?.set_counts(c);
        Ok(())
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
