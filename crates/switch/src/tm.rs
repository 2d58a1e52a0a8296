//! The traffic manager: per egress port a FIFO queue (or, with priority queues, one per priority
//! served highest first) of a configurable depth in packets (BMv2's default 64) drained at a
//! configurable rate in packets per second (unlimited by default), as BMv2's `set_queue_depth` /
//! `set_queue_rate` and `--priority-queues` set them. Packets that find their queue full are
//! dropped at the tail and counted.
//!
//! While no port has a rate, nothing is queued: every worker runs egress right after ingress (the
//! engine's inline path), and the queue fields read 0. Once a rate is set anywhere, workers stop
//! packets after ingress and put them in their port's queue, and the egress pipeline runs when they
//! leave.
//!
//! Backpressure: a port whose link cannot take frames as fast as they come (the kernel refuses
//! them: its send buffer is full) is *blocked* for the worker that sends on it ([`Queues::set_blocked`]);
//! while it is, that worker queues its packets for the port as if it had a rate, and none leave
//! until the link takes frames again. So the queue fills up to its depth (tail drops past it) and
//! `enq_qdepth`, `deq_timedelta` and ECN marking see the congestion as on BMv2, whose transmit
//! waits for the link, instead of the kernel dropping frames unseen. Without a blocked port and a
//! rate nothing is queued (no cost on the fast path).
//!
//! The limits and counters of a port ([`PortQueue`]) are shared by all workers; the packets
//! themselves wait in per-worker queues ([`Queues`], each worker runs the egress of its own
//! packets), so the depth counts every worker's packets and the rate paces their departures
//! together. This file holds the shared part; the per-worker queues are in [`queues`].

mod queues;

pub use queues::{Enqueued, Queues};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// BMv2's default queue depth (packets).
pub const DEFAULT_DEPTH: usize = 64;
/// The most priority queues per port (v1model's `priority` is 3 bits).
pub const MAX_PRIORITY_QUEUES: usize = 8;

/// A port's queue limits and counters, shared by the workers.
#[derive(Debug)]
pub struct PortQueue {
    /// Packets each queue of the port holds at most.
    depth: AtomicUsize,
    /// Departures per second × 1000 (0: unlimited).
    rate_mpps: AtomicU64,
    /// Packets waiting, per priority queue (over all workers).
    occupancy: Vec<AtomicUsize>,
    /// The earliest time (ns since the traffic manager started) the next packet may leave.
    next_ns: AtomicU64,
    /// Packets dropped because their queue was full.
    pub tail_drops: AtomicU64,
    /// `tail_drops` as last reported in the log.
    reported: AtomicU64,
}

impl PortQueue {
    fn new(queues: usize) -> PortQueue {
        PortQueue {
            depth: AtomicUsize::new(DEFAULT_DEPTH),
            rate_mpps: AtomicU64::new(0),
            occupancy: (0..queues).map(|_| AtomicUsize::new(0)).collect(),
            next_ns: AtomicU64::new(0),
            tail_drops: AtomicU64::new(0),
            reported: AtomicU64::new(0),
        }
    }
    /// The depth limit (packets per queue).
    pub fn depth(&self) -> usize {
        self.depth.load(Ordering::Relaxed)
    }
    /// The drain rate in packets per second (`None`: unlimited).
    pub fn rate(&self) -> Option<f64> {
        match self.rate_mpps.load(Ordering::Relaxed) {
            0 => None,
            r => Some(r as f64 / 1000.0),
        }
    }
    /// Packets waiting in all the port's queues.
    pub fn occupancy(&self) -> usize {
        self.occupancy
            .iter()
            .map(|o| o.load(Ordering::Relaxed))
            .sum()
    }
    /// May a packet leave at `now_ns`? Takes the departure slot if so. A rate paces departures
    /// `1/rate` apart; a worker that comes late catches up on at most 2 ms (or one interval) of
    /// missed departures.
    fn take_departure(&self, now_ns: u64) -> bool {
        let r = self.rate_mpps.load(Ordering::Relaxed);
        if r == 0 {
            return true;
        }
        let interval = (1_000_000_000_000u128 / r as u128).max(1) as u64;
        let mut cur = self.next_ns.load(Ordering::Acquire);
        loop {
            if cur > now_ns {
                return false;
            }
            let base = if now_ns - cur > interval.max(2_000_000) {
                now_ns
            } else {
                cur
            };
            match self.next_ns.compare_exchange_weak(
                cur,
                base + interval,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(c) => cur = c,
            }
        }
    }
}

/// The switch's traffic manager: the queue settings of every port.
#[derive(Debug)]
pub struct TrafficManager {
    ports: BTreeMap<u32, PortQueue>,
    queues: usize,
    /// Ports with a rate set: while 0, workers do not queue.
    rated: AtomicUsize,
    epoch: std::time::Instant,
}

/// A run-time setting, as a `set_queue_depth` / `set_queue_rate` command gives it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Setting {
    Depth(usize),
    /// Packets per second (> 0).
    Rate(f64),
}

impl TrafficManager {
    /// Queues for `ports`, `queues` per port (1, or 2..=8 priority queues).
    pub fn new(ports: &[u32], queues: usize) -> Result<TrafficManager, String> {
        if queues == 0 || queues > MAX_PRIORITY_QUEUES {
            return Err(format!(
                "--priority-queues must be 1..{MAX_PRIORITY_QUEUES}, got {queues}"
            ));
        }
        Ok(TrafficManager {
            ports: ports.iter().map(|p| (*p, PortQueue::new(queues))).collect(),
            queues,
            rated: AtomicUsize::new(0),
            epoch: std::time::Instant::now(),
        })
    }

    /// Queues per port.
    pub fn queues_per_port(&self) -> usize {
        self.queues
    }

    /// A port's queue, if the switch has the port.
    pub fn port(&self, port: u32) -> Option<&PortQueue> {
        self.ports.get(&port)
    }

    /// Every port's queue.
    pub fn ports(&self) -> impl Iterator<Item = (u32, &PortQueue)> {
        self.ports.iter().map(|(n, q)| (*n, q))
    }

    /// Does any port have a rate (so workers queue packets)?
    pub fn active(&self) -> bool {
        self.rated.load(Ordering::Relaxed) > 0
    }

    /// Apply a setting to one port, or to every port with `None`.
    pub fn set(&self, port: Option<u32>, s: Setting) -> Result<(), String> {
        let targets: Vec<&PortQueue> = match port {
            Some(p) => {
                let known: Vec<String> = self.ports.keys().map(|k| k.to_string()).collect();
                vec![self.ports.get(&p).ok_or_else(|| {
                    format!("no port {p} (the switch has ports {})", known.join(", "))
                })?]
            }
            None => self.ports.values().collect(),
        };
        match s {
            Setting::Depth(d) => {
                if d == 0 {
                    return Err("a queue depth must be at least 1 packet".into());
                }
                for q in targets {
                    q.depth.store(d, Ordering::Relaxed);
                }
            }
            Setting::Rate(r) => {
                if !(r.is_finite() && r >= 0.0) || r > 1e12 {
                    return Err(format!("a queue rate must be a number of packets per second, 0 (unlimited) or more, got {r}"));
                }
                // 0: no limit, as in BMv2 (the packets waiting leave at once, before any that come
                // after them)
                let m = if r == 0.0 {
                    0
                } else {
                    ((r * 1000.0).round() as u64).max(1)
                };
                for q in targets {
                    match (q.rate_mpps.swap(m, Ordering::Relaxed), m) {
                        (0, 0) => {}
                        (0, _) => {
                            self.rated.fetch_add(1, Ordering::Relaxed);
                        }
                        (_, 0) => {
                            self.rated.fetch_sub(1, Ordering::Relaxed);
                        }
                        _ => {}
                    }
                }
            }
        }
        Ok(())
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// The queue index of a packet of v1model priority `prio` (the highest priority is served
    /// first; priorities above the number of queues go to the highest queue).
    fn queue_of(&self, prio: u8) -> usize {
        (prio as usize).min(self.queues - 1)
    }

    /// Tail drops since the last call, per port with any (for the log).
    pub fn new_tail_drops(&self) -> Vec<(u32, u64)> {
        let mut v = vec![];
        for (n, q) in &self.ports {
            let t = q.tail_drops.load(Ordering::Relaxed);
            let before = q.reported.swap(t, Ordering::Relaxed);
            if t > before {
                v.push((*n, t - before));
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use p4sec_engine::tm::{QueueMeta, Queued};
    use std::sync::Arc;

    fn q(port: u32, prio: u8) -> Queued {
        Queued::bare(port, prio)
    }

    #[test]
    fn a_blocked_port_queues_its_packets_until_its_link_takes_frames() {
        let tm = Arc::new(TrafficManager::new(&[1, 2], 1).unwrap());
        tm.set(Some(1), Setting::Depth(2)).unwrap();
        let mut qs = Queues::new(tm.clone());
        // no rate and nothing blocked: no queueing at all
        assert!(!qs.queueing());
        assert!(matches!(qs.enqueue(q(1, 0), 1), Enqueued::NoQueue(_)));
        assert!(qs.set_blocked(1, true) && !qs.set_blocked(1, true));
        assert!(
            !qs.set_blocked(7, true),
            "a port without a queue is never blocked"
        );
        assert!(qs.queueing() && qs.is_blocked(1));
        assert!(matches!(qs.enqueue(q(1, 0), 10), Enqueued::Queued));
        assert!(matches!(qs.enqueue(q(1, 0), 11), Enqueued::Queued));
        assert!(matches!(qs.enqueue(q(1, 0), 12), Enqueued::TailDropped));
        // the other port is not held back
        assert!(matches!(qs.enqueue(q(2, 0), 12), Enqueued::NoQueue(_)));
        let mut out = vec![];
        assert_eq!(qs.dequeue_due(50, &mut out), None);
        assert!(out.is_empty(), "nothing leaves a blocked port");
        assert!(qs.set_blocked(1, false));
        qs.dequeue_due(60, &mut out);
        let metas: Vec<_> = out
            .iter()
            .map(|(_, m)| (m.enq_qdepth, m.deq_timedelta))
            .collect();
        assert_eq!(metas, vec![(0, 50), (1, 49)]);
        assert!(!qs.queueing());
    }

    #[test]
    fn settings_are_checked() {
        let tm = TrafficManager::new(&[1, 2], 1).unwrap();
        assert!(!tm.active());
        assert!(tm
            .set(Some(3), Setting::Rate(10.0))
            .unwrap_err()
            .contains("no port 3"));
        assert!(tm
            .set(None, Setting::Depth(0))
            .unwrap_err()
            .contains("at least 1"));
        assert!(tm
            .set(None, Setting::Rate(-1.0))
            .unwrap_err()
            .contains("0 (unlimited) or more"));
        tm.set(None, Setting::Rate(0.0)).unwrap();
        assert!(!tm.active());
        assert!(tm.set(None, Setting::Rate(f64::NAN)).is_err());
        assert_eq!(tm.port(1).unwrap().depth(), DEFAULT_DEPTH);
        assert_eq!(tm.port(1).unwrap().rate(), None);
        tm.set(Some(2), Setting::Rate(2.5)).unwrap();
        assert!(tm.active());
        assert_eq!(tm.port(2).unwrap().rate(), Some(2.5));
        assert_eq!(tm.port(1).unwrap().rate(), None);
        tm.set(None, Setting::Depth(7)).unwrap();
        assert_eq!(
            (tm.port(1).unwrap().depth(), tm.port(2).unwrap().depth()),
            (7, 7)
        );
        assert!(TrafficManager::new(&[1], 9).unwrap_err().contains("1..8"));
        assert!(TrafficManager::new(&[1], 0).is_err());
    }

    #[test]
    fn removing_a_rate_lets_the_waiting_packets_go_first() {
        let tm = Arc::new(TrafficManager::new(&[1, 2], 1).unwrap());
        tm.set(Some(1), Setting::Rate(1.0)).unwrap();
        tm.set(Some(2), Setting::Rate(1.0)).unwrap();
        let mut qs = Queues::new(tm.clone());
        // (one queue per port: the priority only tags the packets)
        let tagged = |k: u8| q(1, k);
        // the first leaves at once, the next two wait a second each
        for k in 0..3 {
            assert!(matches!(qs.enqueue(tagged(k), 10), Enqueued::Queued));
        }
        let mut out = vec![];
        qs.dequeue_due(20, &mut out);
        assert_eq!(out.len(), 1);
        // the rate removed (port 2 keeps its own): the worker still queues while packets wait; one
        // that comes now waits behind them, and all of them leave at the next look, in order
        tm.set(Some(1), Setting::Rate(0.0)).unwrap();
        assert!(tm.active() && qs.queueing());
        assert_eq!(tm.port(1).unwrap().rate(), None);
        assert!(matches!(qs.enqueue(tagged(3), 30), Enqueued::Queued));
        out.clear();
        assert_eq!(qs.dequeue_due(40, &mut out), None);
        assert_eq!(
            out.iter().map(|(i, _)| i.priority).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        // drained: nothing waits at port 1 any more
        assert!(matches!(qs.enqueue(tagged(4), 50), Enqueued::NoQueue(_)));
        tm.set(Some(2), Setting::Rate(0.0)).unwrap();
        assert!(!tm.active() && !qs.queueing());
        // setting 0 again changes nothing
        tm.set(None, Setting::Rate(0.0)).unwrap();
        assert!(!tm.active());
    }

    #[test]
    fn a_full_queue_drops_at_the_tail_and_depths_are_reported() {
        let tm = Arc::new(TrafficManager::new(&[1, 2], 1).unwrap());
        tm.set(Some(1), Setting::Depth(3)).unwrap();
        tm.set(Some(1), Setting::Rate(1.0)).unwrap(); // one packet a second: nothing more leaves in this test
        let mut qs = Queues::new(tm.clone());
        let mut other = Queues::new(tm.clone());
        assert!(matches!(qs.enqueue(q(1, 0), 10), Enqueued::Queued));
        assert!(matches!(other.enqueue(q(1, 0), 11), Enqueued::Queued));
        assert!(matches!(qs.enqueue(q(1, 0), 12), Enqueued::Queued));
        // the depth counts both workers' packets
        assert!(matches!(qs.enqueue(q(1, 0), 13), Enqueued::TailDropped));
        assert!(matches!(other.enqueue(q(1, 0), 13), Enqueued::TailDropped));
        assert!(matches!(qs.enqueue(q(9, 0), 13), Enqueued::NoQueue(_)));
        // port 2 has no rate: nothing waits there
        assert!(matches!(qs.enqueue(q(2, 0), 13), Enqueued::NoQueue(_)));
        assert_eq!(tm.port(1).unwrap().tail_drops.load(Ordering::Relaxed), 2);
        assert_eq!(tm.new_tail_drops(), vec![(1, 2)]);
        assert_eq!(tm.new_tail_drops(), vec![]);
        assert_eq!(tm.port(1).unwrap().occupancy(), 3);
        // the first departure is due at once: it found 0 then waited 90 µs, and leaves 2 behind
        let mut out = vec![];
        let next = qs.dequeue_due(100, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(
            out[0].1,
            QueueMeta {
                enq_timestamp: 10,
                enq_qdepth: 0,
                deq_timedelta: 90,
                deq_qdepth: 2
            }
        );
        assert!(
            next.is_some_and(|n| n > 900_000_000),
            "the next departure is about a second away: {next:?}"
        );
        // nothing else is due; the queues hold what is left, and a cleared worker gives its share
        // back
        out.clear();
        qs.dequeue_due(200, &mut out);
        assert!(out.is_empty());
        assert_eq!((qs.len(), other.len()), (1, 1));
        assert_eq!(qs.clear(), 1);
        drop(other);
        assert_eq!(tm.port(1).unwrap().occupancy(), 0);
    }

    #[test]
    fn the_rate_paces_departures() {
        let tm = Arc::new(TrafficManager::new(&[1], 1).unwrap());
        tm.set(None, Setting::Rate(1000.0)).unwrap();
        let mut qs = Queues::new(tm.clone());
        for i in 0..5 {
            assert!(matches!(qs.enqueue(q(1, 0), i), Enqueued::Queued));
        }
        let start = std::time::Instant::now();
        let mut out = vec![];
        let mut depths = vec![];
        while out.len() < 5 && start.elapsed().as_secs() < 10 {
            let n = out.len();
            if let Some(wait) = qs.dequeue_due(0, &mut out) {
                assert!(wait <= 1_000_000, "at most one interval to wait: {wait} ns");
                std::thread::sleep(std::time::Duration::from_nanos(wait));
            }
            depths.extend(out[n..].iter().map(|(_, m)| (m.enq_qdepth, m.deq_qdepth)));
        }
        // 5 departures 1 ms apart take at least 4 ms (no upper bound: the machine may be busy)
        assert!(
            start.elapsed() >= std::time::Duration::from_micros(3_900),
            "{:?}",
            start.elapsed()
        );
        assert_eq!(depths, vec![(0, 4), (1, 3), (2, 2), (3, 1), (4, 0)]);
    }

    #[test]
    fn priority_queues_serve_the_highest_priority_first() {
        let tm = Arc::new(TrafficManager::new(&[1], 4).unwrap());
        tm.set(None, Setting::Depth(2)).unwrap();
        tm.set(None, Setting::Rate(1e9)).unwrap();
        let mut qs = Queues::new(tm.clone());
        // (each priority queue has its own depth; priorities above 3 share the highest queue)
        for (i, p) in [0u8, 2, 0, 7, 2, 3, 0, 6].into_iter().enumerate() {
            let r = qs.enqueue(q(1, p), i as u64);
            assert_eq!(
                matches!(r, Enqueued::Queued),
                i < 6,
                "packet {i} priority {p}: {r:?}"
            );
        }
        let mut out = vec![];
        while !qs.is_empty() {
            if let Some(w) = qs.dequeue_due(100, &mut out) {
                std::thread::sleep(std::time::Duration::from_nanos(w));
            }
        }
        let order: Vec<(u8, u64)> = out
            .iter()
            .map(|(q, m)| (q.priority, m.enq_timestamp))
            .collect();
        assert_eq!(order, vec![(7, 3), (3, 5), (2, 1), (2, 4), (0, 0), (0, 2)]);
    }
}
