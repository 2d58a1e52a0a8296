//! Two-rate three-color meters (RFC 2698). An unconfigured meter marks everything green, as BMv2
//! does. Each cell also counts the packets and bytes it marked per colour (P4Runtime's
//! `MeterCounterData`): plain adds under the cell's lock, which metering takes anyway.

use std::sync::Mutex;
use std::time::Instant;

pub const GREEN: u64 = 0;
pub const YELLOW: u64 = 1;
pub const RED: u64 = 2;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MeterRates {
    /// Committed information rate (units per second) and burst size (units).
    pub cir: u64,
    pub cbs: u64,
    /// Peak information rate and burst size.
    pub pir: u64,
    pub pbs: u64,
}

#[derive(Debug)]
struct Bucket {
    rates: Option<MeterRates>,
    tc: f64,
    tp: f64,
    last: Instant,
    /// (packets, bytes) marked green, yellow and red.
    counts: [(u64, u64); 3],
}

/// One meter cell. The lock is per cell, so workers metering different cells never contend.
#[derive(Debug)]
pub struct MeterCell {
    b: Mutex<Bucket>,
}

impl Default for MeterCell {
    fn default() -> Self {
        MeterCell {
            b: Mutex::new(Bucket {
                rates: None,
                tc: 0.0,
                tp: 0.0,
                last: Instant::now(),
                counts: [(0, 0); 3],
            }),
        }
    }
}

impl MeterCell {
    pub fn configure(&self, r: Option<MeterRates>) {
        let mut b = self.b.lock().unwrap_or_else(|p| p.into_inner());
        b.rates = r;
        if let Some(r) = r {
            b.tc = r.cbs as f64;
            b.tp = r.pbs as f64;
        }
        b.last = Instant::now();
    }
    pub fn rates(&self) -> Option<MeterRates> {
        self.b.lock().unwrap_or_else(|p| p.into_inner()).rates
    }
    /// (packets, bytes) this cell marked green, yellow and red.
    pub fn counts(&self) -> [(u64, u64); 3] {
        self.b.lock().unwrap_or_else(|p| p.into_inner()).counts
    }
    /// Set the per-colour counters (a controller's write).
    pub fn set_counts(&self, c: [(u64, u64); 3]) {
        self.b.lock().unwrap_or_else(|p| p.into_inner()).counts = c;
    }
    /// Meter `amount` units (1 for packet meters, the byte count for byte meters) of a packet of
    /// `bytes` bytes; the packet is counted under its colour.
    pub fn execute(&self, amount: u64, bytes: u64) -> u64 {
        let mut b = self.b.lock().unwrap_or_else(|p| p.into_inner());
        let color = match b.rates {
            None => GREEN,
            Some(r) => {
                let now = Instant::now();
                let dt = now.duration_since(b.last).as_secs_f64();
                b.last = now;
                b.tc = (b.tc + dt * r.cir as f64).min(r.cbs as f64);
                b.tp = (b.tp + dt * r.pir as f64).min(r.pbs as f64);
                let a = amount as f64;
                if b.tp < a {
                    RED
                } else if b.tc < a {
                    b.tp -= a;
                    YELLOW
                } else {
                    b.tp -= a;
                    b.tc -= a;
                    GREEN
                }
            }
        };
        let c = &mut b.counts[color as usize];
        c.0 += 1;
        c.1 += bytes;
        color
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colors() {
        let m = MeterCell::default();
        assert_eq!(m.execute(1, 100), GREEN);
        m.configure(Some(MeterRates {
            cir: 1,
            cbs: 2,
            pir: 1,
            pbs: 3,
        }));
        assert_eq!(m.execute(1, 10), GREEN);
        assert_eq!(m.execute(1, 10), GREEN);
        assert_eq!(m.execute(1, 20), YELLOW);
        assert_eq!(m.execute(1, 30), RED);
        assert_eq!(m.execute(1, 40), RED);
    }

    #[test]
    fn per_color_counts() {
        let m = MeterCell::default();
        m.execute(1, 100);
        m.configure(Some(MeterRates {
            cir: 1,
            cbs: 2,
            pir: 1,
            pbs: 3,
        }));
        for n in [10, 10, 20, 30, 40] {
            m.execute(1, n);
        }
        // configuring again keeps the counts
        m.configure(Some(MeterRates {
            cir: 1,
            cbs: 2,
            pir: 1,
            pbs: 3,
        }));
        assert_eq!(m.counts(), [(3, 120), (1, 20), (2, 70)]);
        m.set_counts([(0, 0), (5, 6), (0, 0)]);
        assert_eq!(m.execute(1, 7), GREEN);
        assert_eq!(m.counts(), [(1, 7), (5, 6), (0, 0)]);
    }
}
