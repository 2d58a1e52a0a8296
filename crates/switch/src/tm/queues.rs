//! One worker's waiting packets ([`Queues`]): per port of the [`TrafficManager`] and priority a
//! FIFO, filled after ingress and drained as the port's rate (and link) lets packets leave, the
//! highest priority first; the limits and counters they obey are the traffic manager's, shared by
//! the workers.

use super::TrafficManager;
use p4sec_engine::tm::{QueueMeta, Queued};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What [`Queues::enqueue`] did with a packet.
#[derive(Debug)]
pub enum Enqueued {
    /// It waits in its port's queue.
    Queued,
    /// Its queue was full: dropped (counted in the port's `tail_drops`).
    TailDropped,
    /// Its port has no rate (nothing waits there), or the traffic manager has no queue for its port
    /// (the CPU port, a port the switch lacks): it goes through egress now.
    NoQueue(Queued),
}

/// One waiting packet and when it came (µs, the engine's clock).
#[derive(Debug)]
struct Waiting {
    item: Queued,
    enq_us: u64,
    /// Packets waiting in the port's queues when it came.
    enq_depth: u32,
}

/// One worker's waiting packets, per port and priority.
#[derive(Debug)]
pub struct Queues {
    tm: Arc<TrafficManager>,
    /// Per port: one FIFO per priority.
    waiting: BTreeMap<u32, Vec<VecDeque<Waiting>>>,
    len: usize,
    /// This worker's ports whose link refuses frames now (few: a list).
    blocked: Vec<u32>,
}

impl Queues {
    pub fn new(tm: Arc<TrafficManager>) -> Queues {
        let waiting = tm
            .ports
            .keys()
            .map(|p| (*p, (0..tm.queues).map(|_| VecDeque::new()).collect()))
            .collect();
        Queues {
            tm,
            waiting,
            len: 0,
            blocked: vec![],
        }
    }

    /// Packets waiting in this worker's queues.
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Drop every waiting packet (the pipeline they were made by was replaced); returns how many.
    pub fn clear(&mut self) -> usize {
        let n = self.len;
        for (port, qs) in self.waiting.iter_mut() {
            let Some(pq) = self.tm.ports.get(port) else {
                continue;
            };
            for (qi, q) in qs.iter_mut().enumerate() {
                pq.occupancy[qi].fetch_sub(q.len(), Ordering::AcqRel);
                q.clear();
            }
        }
        self.len = 0;
        n
    }

    /// The traffic manager's tail drops not yet reported (by any worker), per port.
    pub fn tail_drops_to_report(&self) -> Vec<(u32, u64)> {
        self.tm.new_tail_drops()
    }

    /// Is the traffic manager queueing (a rate is set on some port)?
    pub fn active(&self) -> bool {
        self.tm.active()
    }

    /// Does this worker have to keep queueing: a port has a rate, or packets queued while one had
    /// still wait (those that follow them to the same port must not overtake them)?
    pub fn queueing(&self) -> bool {
        self.tm.active() || self.len > 0 || !self.blocked.is_empty()
    }

    /// Mark `port` blocked (its link refuses frames: its packets wait in its queue) or not; true
    /// when that changed.
    pub fn set_blocked(&mut self, port: u32, blocked: bool) -> bool {
        match (self.blocked.iter().position(|&p| p == port), blocked) {
            (None, true) if self.tm.ports.contains_key(&port) => {
                self.blocked.push(port);
                true
            }
            (Some(i), false) => {
                self.blocked.swap_remove(i);
                true
            }
            _ => false,
        }
    }

    /// Is any port blocked?
    pub fn any_blocked(&self) -> bool {
        !self.blocked.is_empty()
    }

    /// Is `port` blocked?
    pub fn is_blocked(&self, port: u32) -> bool {
        self.blocked.contains(&port)
    }

    /// Put a packet that ingress sent to `item.port` at the tail of its queue, at `now_us`.
    pub fn enqueue(&mut self, item: Queued, now_us: u64) -> Enqueued {
        let Some(pq) = self.tm.ports.get(&item.port) else {
            return Enqueued::NoQueue(item);
        };
        if pq.rate_mpps.load(Ordering::Relaxed) == 0
            && !self.blocked.contains(&item.port)
            && self
                .waiting
                .get(&item.port)
                .is_none_or(|w| w.iter().all(|q| q.is_empty()))
        {
            // a port without a rate drains as fast as packets come: nothing waits (unless packets
            // queued while it had one still do: this one leaves after them)
            return Enqueued::NoQueue(item);
        }
        let qi = self.tm.queue_of(item.priority);
        let depth = pq.depth();
        // (the test and the increment are one step, so workers together never exceed the depth)
        let occ = &pq.occupancy[qi];
        let Ok(before) = occ.fetch_update(Ordering::AcqRel, Ordering::Acquire, |o| {
            (o < depth).then_some(o + 1)
        }) else {
            pq.tail_drops.fetch_add(1, Ordering::Relaxed);
            return Enqueued::TailDropped;
        };
        let others: usize = pq
            .occupancy
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != qi)
            .map(|(_, o)| o.load(Ordering::Relaxed))
            .sum();
        let enq_depth = (before + others) as u32;
        let Some(w) = self.waiting.get_mut(&item.port) else {
            return Enqueued::TailDropped;
        };
        w[qi].push_back(Waiting {
            item,
            enq_us: now_us,
            enq_depth,
        });
        self.len += 1;
        Enqueued::Queued
    }

    /// The packets whose departure is due now, each with the queue metadata of its stay, highest
    /// priority first within a port; and when to look again (ns from now) if packets are left
    /// waiting.
    pub fn dequeue_due(&mut self, now_us: u64, out: &mut Vec<(Queued, QueueMeta)>) -> Option<u64> {
        if self.len == 0 {
            return None;
        }
        let now_ns = self.tm.now_ns();
        let mut next: Option<u64> = None;
        for (port, qs) in self.waiting.iter_mut() {
            let Some(pq) = self.tm.ports.get(port) else {
                continue;
            };
            if self.blocked.contains(port) {
                // (its link takes nothing now: the worker looks again when it retries the ring)
                continue;
            }
            while let Some(qi) = (0..qs.len()).rev().find(|&i| !qs[i].is_empty()) {
                if !pq.take_departure(now_ns) {
                    let at = pq.next_ns.load(Ordering::Acquire).saturating_sub(now_ns);
                    next = Some(next.map_or(at, |n| n.min(at)));
                    break;
                }
                let Some(wt) = qs[qi].pop_front() else { break };
                self.len -= 1;
                let left = pq.occupancy[qi].fetch_sub(1, Ordering::AcqRel) - 1;
                let meta = QueueMeta {
                    enq_timestamp: wt.enq_us,
                    enq_qdepth: wt.enq_depth,
                    deq_timedelta: now_us.saturating_sub(wt.enq_us).min(u32::MAX as u64) as u32,
                    deq_qdepth: (left
                        + pq.occupancy
                            .iter()
                            .enumerate()
                            .filter(|(i, _)| *i != qi)
                            .map(|(_, o)| o.load(Ordering::Relaxed))
                            .sum::<usize>()) as u32,
                };
                out.push((wt.item, meta));
            }
        }
        next
    }
}

impl Drop for Queues {
    fn drop(&mut self) {
        self.clear();
    }
}
