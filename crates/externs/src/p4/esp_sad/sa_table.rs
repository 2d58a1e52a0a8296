//! The SA table of an `esp_sad` instance: its slots (one SA each, under a read-write lock) and the
//! SPI index inbound lookups go through. The packet path reads SAs under their slot's read lock;
//! the control plane installs and removes them (`control.rs`).

use crate::esp::Sa;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// Slots of SAs and an SPI index for inbound lookups. Readers take per-slot read locks (uncontended
/// on the packet path) and use the SA under the lock; SA state itself is per SA.
pub(super) struct Sad {
    slots: Vec<RwLock<Option<Arc<Sa>>>>,
    by_spi: RwLock<HashMap<u32, u32>>,
}

impl Sad {
    /// A table of `size` empty slots.
    pub(super) fn new(size: u64) -> Sad {
        Sad {
            slots: (0..size).map(|_| RwLock::new(None)).collect(),
            by_spi: RwLock::new(HashMap::new()),
        }
    }

    /// The number of slots.
    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    /// The slot of the SA with SPI `spi`.
    #[inline]
    pub(super) fn slot_of_spi(&self, spi: u32) -> Option<u32> {
        self.by_spi
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&spi)
            .copied()
    }

    /// Put `sa` in slot `index`, replacing the SA there; its SPI must not be another slot's.
    pub(super) fn install(&self, index: u32, sa: Sa) -> Result<(), String> {
        let slot = self.slots.get(index as usize).ok_or_else(|| {
            format!(
                "SA index {index} is out of range ({} slots)",
                self.slots.len()
            )
        })?;
        let spi = sa.cfg.spi;
        let mut by = self.by_spi.write().unwrap_or_else(|p| p.into_inner());
        if let Some(other) = by.get(&spi) {
            if *other != index {
                return Err(format!("SPI {spi:#x} is already used by SA {other}"));
            }
        }
        let mut s = slot.write().unwrap_or_else(|p| p.into_inner());
        if let Some(old) = s.as_ref() {
            by.remove(&old.cfg.spi);
        }
        *s = Some(Arc::new(sa));
        by.insert(spi, index);
        Ok(())
    }

    /// Empty slot `index`.
    pub(super) fn remove(&self, index: u32) -> Result<(), String> {
        let slot = self
            .slots
            .get(index as usize)
            .ok_or_else(|| format!("SA index {index} is out of range"))?;
        let old = slot
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| format!("no SA in slot {index}"))?;
        self.by_spi
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&old.cfg.spi);
        Ok(())
    }

    /// (slot, SPI) of every occupied slot.
    pub(super) fn occupied(&self) -> Vec<(u64, u32)> {
        let mut sas = Vec::new();
        for (i, slot) in self.slots.iter().enumerate() {
            if let Some(sa) = slot.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
                sas.push((i as u64, sa.cfg.spi));
            }
        }
        sas
    }

    pub(super) fn sa(&self, i: u64) -> Option<Arc<Sa>> {
        self.slots
            .get(i as usize)
            .and_then(|s| s.read().unwrap_or_else(|p| p.into_inner()).clone())
    }

    /// `f` with the SA in slot `i`, under the slot's read lock (no reference taken); `None`: no SA
    /// there.
    #[inline]
    pub(super) fn with_sa<R>(&self, i: u64, f: impl FnOnce(&Sa) -> R) -> Option<R> {
        let slot = self.slots.get(usize::try_from(i).ok()?)?;
        let sa = slot.read().unwrap_or_else(|p| p.into_inner());
        sa.as_deref().map(f)
    }

    /// The SAs' pending lifetime events, as the control plane collects them.
    pub(super) fn drain_events(&self) -> Vec<String> {
        let mut v = vec![];
        for s in &self.slots {
            if let Some(sa) = s.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
                v.extend(sa.drain_events());
            }
        }
        v
    }
}
