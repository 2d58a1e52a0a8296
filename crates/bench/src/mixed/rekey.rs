//! The control thread of `p4sec bench-mixed`: the tunnels' SAs renewed round robin at a stated rate
//! in the controller's loss-free order, old SAs removed once no packet made under them is in
//! flight.

use super::gateways::{sa_json, sad_dec_entry, selector_entry};
use crate::setup::table;
use p4sec_engine::Engine;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::time::{Duration, Instant};

/// Shared state of one measurement between the data thread and the control thread.
pub(super) struct Shared {
    /// batches whose generation (through A) has started / that have been through B
    pub(super) started: AtomicU64,
    pub(super) done: AtomicU64,
    pub(super) stop: AtomicBool,
}

/// The control plane of the run: B's free SA slots, each tunnel's live SA (SPI, slot on B), the
/// next SPI.
pub(super) struct Control {
    pub(super) free: Vec<u32>,
    pub(super) live: Vec<(u32, u32)>,
    pub(super) next_spi: u32,
    pub(super) renewals: u64,
    pub(super) retired: u64,
    pub(super) no_slot: u64,
}

impl Control {
    pub(super) fn install(&mut self, a: &Engine, b: &Engine, t: u32) -> Result<(u32, u32), String> {
        let slot = self.free.pop().ok_or("no free SA slot on B")?;
        let spi = self.next_spi;
        self.next_spi += 1;
        // SAD-dec first (the SA, then its entry), then the SAD-enc swap on the sender
        b.extern_control("GwIngress.sad", "add_sa", sa_json(slot, spi).as_bytes())?;
        b.table_insert(
            table(b, "GwIngress.sa_selectors")?,
            selector_entry(b, slot)?,
        )?;
        b.table_insert(table(b, "GwIngress.sad_dec")?, sad_dec_entry(b, spi, slot)?)?;
        a.extern_control("GwIngress.sad", "add_sa", sa_json(t, spi).as_bytes())?;
        Ok((spi, slot))
    }

    fn remove(&mut self, b: &Engine, spi: u32, slot: u32) -> Result<(), String> {
        b.table_delete(
            table(b, "GwIngress.sad_dec")?,
            &sad_dec_entry(b, spi, slot)?,
        )?;
        b.table_delete(
            table(b, "GwIngress.sa_selectors")?,
            &selector_entry(b, slot)?,
        )?;
        b.extern_control(
            "GwIngress.sad",
            "del_sa",
            format!("{{\"index\": {slot}}}").as_bytes(),
        )?;
        self.free.push(slot);
        self.retired += 1;
        Ok(())
    }

    /// Renew tunnels round robin at `rate` per second until told to stop; old SAs leave B after the
    /// grace period and once every batch begun before the swap has been through B. Leftovers are
    /// removed at the end (the data thread has stopped: nothing is in flight).
    pub(super) fn run(
        &mut self,
        a: &Engine,
        b: &Engine,
        sh: &Shared,
        rate: f64,
        grace: Duration,
    ) -> Result<(), String> {
        let mut pending: VecDeque<(Instant, u64, u32, u32)> = VecDeque::new();
        let start = Instant::now();
        let mut i = 0u64;
        let mut err = Ok(());
        while !sh.stop.load(SeqCst) {
            let now = Instant::now();
            while let Some(&(at, batch, spi, slot)) = pending.front() {
                if now.duration_since(at) < grace || sh.done.load(SeqCst) < batch {
                    break;
                }
                pending.pop_front();
                self.remove(b, spi, slot)?;
            }
            let due = start + Duration::from_secs_f64(i as f64 / rate);
            if now >= due {
                let t = (i % self.live.len() as u64) as u32;
                i += 1;
                if self.free.is_empty() {
                    self.no_slot += 1;
                    continue;
                }
                let (old_spi, old_slot) = self.live[t as usize];
                match self.install(a, b, t) {
                    Ok(new) => {
                        // every batch begun from now on uses the new SA; the ones begun before may
                        // hold old packets
                        pending.push_back((
                            Instant::now(),
                            sh.started.load(SeqCst),
                            old_spi,
                            old_slot,
                        ));
                        self.live[t as usize] = new;
                        self.renewals += 1;
                    }
                    Err(e) => {
                        err = Err(e);
                        break;
                    }
                }
                continue;
            }
            std::thread::sleep((due - now).min(Duration::from_millis(1)));
        }
        while let Some((_, _, spi, slot)) = pending.pop_front() {
            self.remove(b, spi, slot)?;
        }
        err
    }
}
