//! Time and queues as the v1model architecture shows them to a program: the clock behind
//! `ingress_global_timestamp`, `egress_global_timestamp` and `enq_timestamp` (microseconds since
//! the switch started, BMv2's clock), and the hand-over between the ingress and the egress pipeline
//! when a traffic manager queues packets in between (`enq_qdepth`, `deq_timedelta`, `deq_qdepth`).
//!
//! By default a worker runs egress right after ingress, in one go ("inline"): the queue fields are
//! 0 and the clock is read only when the program refers to one of the time fields
//! ([`p4sec_ir::Program::tm_field_use`]). A worker put in queueing mode
//! ([`crate::Worker::set_queueing`]) stops after ingress instead and keeps each packet bound for
//! egress as a [`Queued`] item ([`crate::Worker::take_queued`]); the caller's traffic manager holds
//! it in a port queue and runs [`crate::Engine::egress`] with the [`QueueMeta`] of its stay when it
//! leaves. A virtual clock ([`crate::Worker::set_virtual_clock`]) makes the time fields
//! deterministic (the STF runner).

use crate::pipeline::effects::Effects;
use std::sync::OnceLock;
use std::time::Instant;

static EPOCH: OnceLock<Instant> = OnceLock::new();

/// Start the switch's clock (the first call wins; later calls change nothing).
pub fn start_clock() {
    EPOCH.get_or_init(Instant::now);
}

/// Microseconds since [`start_clock`] (started by the first call of either).
#[inline]
pub fn now_us() -> u64 {
    EPOCH.get_or_init(Instant::now).elapsed().as_micros() as u64
}

/// What a packet's stay in a queue was, as its egress pass sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueMeta {
    /// When the packet entered the queue (µs, the switch's clock).
    pub enq_timestamp: u64,
    /// Packets in the queue when it entered (not counting itself).
    pub enq_qdepth: u32,
    /// Microseconds it waited.
    pub deq_timedelta: u32,
    /// Packets in the queue when it left (not counting itself).
    pub deq_qdepth: u32,
}

/// A packet between ingress and egress: everything its egress pass needs.
#[derive(Debug)]
pub struct Queued {
    /// The egress port it goes to.
    pub port: u32,
    /// `standard_metadata.priority` as ingress left it (0..=7).
    pub priority: u8,
    pub(crate) slots: Vec<u64>,
    pub(crate) payload: Vec<u8>,
    pub(crate) pkt_len: usize,
    pub(crate) rid: u32,
    pub(crate) itype: u32,
    pub(crate) fx: Effects,
}

impl Queued {
    /// A packet with no pipeline state, for tests of a traffic manager: [`crate::Engine::egress`]
    /// drops it.
    pub fn bare(port: u32, priority: u8) -> Queued {
        Queued {
            port,
            priority,
            slots: vec![],
            payload: vec![],
            pkt_len: 0,
            rid: 0,
            itype: 0,
            fx: Effects::default(),
        }
    }
}

/// How a worker's clock runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Clock {
    /// The switch's clock ([`now_us`]).
    Real,
    /// A clock at `now` that moves `step` µs after every frame.
    Virtual { now: u64, step: u64 },
}

/// A worker's traffic-manager state.
#[derive(Debug)]
pub(crate) struct WorkerTm {
    pub(crate) clock: Clock,
    /// Stop after ingress and keep packets bound for egress in `queued`.
    pub(crate) queueing: bool,
    pub(crate) queued: Vec<Queued>,
    /// The current packet's ingress time (the enqueue time of an inline packet).
    pub(crate) ingress_ts: u64,
    /// The queue metadata of the current egress pass.
    pub(crate) meta: QueueMeta,
}

impl Default for WorkerTm {
    fn default() -> Self {
        WorkerTm {
            clock: Clock::Real,
            queueing: false,
            queued: vec![],
            ingress_ts: 0,
            meta: QueueMeta::default(),
        }
    }
}

impl WorkerTm {
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        match self.clock {
            Clock::Real => now_us(),
            Clock::Virtual { now, .. } => now,
        }
    }
    /// A frame was processed: the virtual clock moves on.
    #[inline]
    pub(crate) fn tick(&mut self) {
        if let Clock::Virtual { now, step } = &mut self.clock {
            *now += *step;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Engine, Outputs, Worker};
    use std::sync::Arc;

    /// Egress copies the time and queue fields into the packet's header; ingress sends to port 2
    /// with the priority the packet's last byte gives.
    const PROG: &str = r#"#include <v1model.p4>
header h_t { bit<48> its; bit<48> ets; bit<32> enq_ts; bit<32> enq_q; bit<32> deq_td; bit<32> deq_q; bit<8> prio; }
struct hs { h_t h; }
struct m { }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) { state start { p.extract(hdr.h); transition accept; } }
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { sm.egress_spec = 2; sm.priority = (bit<3>)hdr.h.prio; } }
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    apply {
        hdr.h.its = sm.ingress_global_timestamp;
        hdr.h.ets = sm.egress_global_timestamp;
        hdr.h.enq_ts = sm.enq_timestamp;
        hdr.h.enq_q = (bit<32>)sm.enq_qdepth;
        hdr.h.deq_td = sm.deq_timedelta;
        hdr.h.deq_q = (bit<32>)sm.deq_qdepth;
    }
}
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), V(), D()) main;
"#;

    fn engine(src: &str) -> Engine {
        let prog = p4sec_frontend::compile_str("test.p4", src, &Default::default())
            .unwrap_or_else(|e| panic!("{e}"));
        Engine::new(Arc::new(prog), &crate::test_externs::registry()).unwrap()
    }

    fn be(b: &[u8]) -> u64 {
        b.iter().fold(0, |a, x| a << 8 | *x as u64)
    }

    /// (its, ets, enq_ts, enq_q, deq_td, deq_q) of an emitted frame.
    fn fields(f: &[u8]) -> [u64; 6] {
        [
            be(&f[0..6]),
            be(&f[6..12]),
            be(&f[12..16]),
            be(&f[16..20]),
            be(&f[20..24]),
            be(&f[24..28]),
        ]
    }

    fn frame(prio: u8) -> Vec<u8> {
        let mut f = vec![0u8; 29];
        f[28] = prio;
        f
    }

    #[test]
    fn field_use_is_found_in_the_program() {
        let e = engine(PROG);
        assert_eq!(
            e.prog.tm_field_use(),
            p4sec_ir::TmFieldUse {
                clock: true,
                queue: true
            }
        );
        let only_clock = PROG
            .replace("hdr.h.enq_ts = sm.enq_timestamp;", "")
            .replace("hdr.h.deq_td = sm.deq_timedelta;", "");
        let only_clock = only_clock
            .replace("hdr.h.enq_q = (bit<32>)sm.enq_qdepth;", "")
            .replace("hdr.h.deq_q = (bit<32>)sm.deq_qdepth;", "");
        assert_eq!(
            engine(&only_clock).prog.tm_field_use(),
            p4sec_ir::TmFieldUse {
                clock: true,
                queue: false
            }
        );
        let router = engine(include_str!("../../../../programs/ipv4_router.p4"));
        assert_eq!(router.prog.tm_field_use(), p4sec_ir::TmFieldUse::default());
    }

    #[test]
    fn a_virtual_clock_moves_a_step_per_frame_and_inline_queues_are_empty() {
        let e = engine(PROG);
        let mut w = Worker::new(&e);
        w.set_virtual_clock(5, 1000);
        let mut out = Outputs::default();
        let mut seen = vec![];
        for _ in 0..3 {
            out.clear();
            e.process(&mut w, 1, &frame(0), &mut out);
            let (port, f) = out.iter().next().expect("a frame out");
            assert_eq!(port, 2);
            seen.push(fields(f));
        }
        assert_eq!(
            seen,
            vec![
                [5, 5, 5, 0, 0, 0],
                [1005, 1005, 1005, 0, 0, 0],
                [2005, 2005, 2005, 0, 0, 0]
            ]
        );
    }

    #[test]
    fn the_real_clock_counts_microseconds() {
        start_clock();
        let e = engine(PROG);
        let mut w = Worker::new(&e);
        let mut out = Outputs::default();
        e.process(&mut w, 1, &frame(0), &mut out);
        std::thread::sleep(std::time::Duration::from_millis(20));
        e.process(&mut w, 1, &frame(0), &mut out);
        let v: Vec<[u64; 6]> = out.iter().map(|(_, f)| fields(f)).collect();
        let d = v[1][0] - v[0][0];
        assert!((20_000..2_000_000).contains(&d), "20 ms apart read {d} µs");
        assert!(v[0][1] >= v[0][0] && v[0][2] == v[0][0] & 0xffff_ffff);
    }

    #[test]
    fn queueing_mode_hands_packets_over_and_egress_sees_the_stay() {
        let e = engine(PROG);
        let mut w = Worker::new(&e);
        w.set_virtual_clock(100, 10);
        w.set_queueing(true);
        let mut out = Outputs::default();
        e.process(&mut w, 1, &frame(5), &mut out);
        e.process(&mut w, 1, &frame(2), &mut out);
        assert!(
            out.is_empty(),
            "nothing leaves before the traffic manager lets it"
        );
        let items: Vec<Queued> = w.take_queued().collect();
        assert_eq!(
            items
                .iter()
                .map(|q| (q.port, q.priority))
                .collect::<Vec<_>>(),
            vec![(2, 5), (2, 2)]
        );
        let mut it = items.into_iter();
        let meta = QueueMeta {
            enq_timestamp: 100,
            enq_qdepth: 3,
            deq_timedelta: 77,
            deq_qdepth: 9,
        };
        e.egress(&mut w, it.next().unwrap(), meta, &mut out);
        let (port, f) = out.iter().next().unwrap();
        assert_eq!(port, 2);
        // ingress at 100; the egress pass reads the clock as it is now (120: two frames went by)
        assert_eq!(fields(f), [100, 120, 100, 3, 77, 9]);
        assert_eq!(f[28], 5);
        // an item of another program is dropped, not run
        let other = engine(&PROG.replace("bit<8> prio;", "bit<8> prio; bit<8> extra;"));
        let mut w2 = Worker::new(&other);
        out.clear();
        other.egress(&mut w2, it.next().unwrap(), meta, &mut out);
        assert!(out.is_empty());
        assert_eq!(other.stats().dropped, 1);
    }
}
