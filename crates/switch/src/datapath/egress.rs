//! Where the frames of a processed packet go, for the worker's loop ([`super::worker_loop`]): the
//! ports by number ([`PortIndex`]), transmission to a port or, for the CPU port, to the controller
//! ([`transmit`]), the egress queues when the traffic manager queues ([`enqueue_all`], ports whose
//! link refuses frames: [`note_blocked`]) and the `--log trace` line of a packet ([`log_packet`]).

use crate::control_plane::ControlPlane;
use crate::log::Level;
use crate::pcap_file::Ts;
use crate::port::Port;
use crate::tm::{Enqueued, Queues};
use p4sec_engine::tm::{QueueMeta, Queued};
use p4sec_engine::{Engine, Outputs, Worker};
use std::collections::HashMap;

/// Port number -> index into the worker's ports, looked up for every frame sent: a table indexed by
/// the number for the usual small numbers (below [`DIRECT_PORTS`]), a hash map for the others.
pub(super) struct PortIndex {
    direct: Vec<u16>,
    other: HashMap<u32, usize>,
}

/// Port numbers below this are looked up in a table.
const DIRECT_PORTS: u32 = 4096;
const NO_PORT: u16 = u16::MAX;

impl PortIndex {
    pub(super) fn new(ports: &[Port]) -> PortIndex {
        let top = ports
            .iter()
            .map(|p| p.number)
            .filter(|n| *n < DIRECT_PORTS)
            .max()
            .map_or(0, |n| n as usize + 1);
        let mut ix = PortIndex {
            direct: vec![NO_PORT; top],
            other: HashMap::new(),
        };
        for (i, p) in ports.iter().enumerate() {
            match ix.direct.get_mut(p.number as usize) {
                Some(d) if i < NO_PORT as usize => *d = i as u16,
                _ => {
                    ix.other.insert(p.number, i);
                }
            }
        }
        ix
    }

    #[inline]
    pub(super) fn get(&self, number: u32) -> Option<usize> {
        match self.direct.get(number as usize) {
            Some(&i) if i != NO_PORT => Some(i as usize),
            _ if self.other.is_empty() => None,
            _ => self.other.get(&number).copied(),
        }
    }
}

/// The `--log trace` line of one packet: where it came from and where its frames went.
pub(super) fn log_packet(
    port: u32,
    len: usize,
    out: &Outputs,
    cpu: Option<u32>,
    by_number: &PortIndex,
    queueing: bool,
) {
    let mut to = vec![];
    for (p, f) in out.iter() {
        let what = if Some(p) == cpu {
            "CPU port".to_string()
        } else if by_number.get(p).is_some() {
            format!("port {p}")
        } else {
            format!("port {p} (no such port, dropped)")
        };
        to.push(format!("{what} ({} bytes)", f.len()));
    }
    let to = match (to.is_empty(), queueing) {
        (true, false) => "dropped".to_string(),
        (true, true) => "queued for egress (or dropped)".to_string(),
        (false, _) => to.join(", "),
    };
    p4log!(Level::Trace, "port {port}: {len} bytes in -> {to}");
}

/// After the transmit rings were flushed: a port whose link refused frames (they wait in its ring)
/// is blocked, its packets held in its egress queue until the link takes frames again
/// ([`crate::tm`]: backpressure); a port that took everything is not. True when the worker's
/// queueing changed.
#[inline]
pub(super) fn note_blocked(ports: &[Port], queues: &mut Option<Queues>, w: &mut Worker) -> bool {
    let Some(q) = queues.as_mut() else {
        return false;
    };
    let mut changed = false;
    for p in ports {
        let b = p.tx_blocked();
        if b != q.is_blocked(p.number) {
            std::hint::cold_path();
            q.set_blocked(p.number, b);
            changed = true;
            p4log!(
                Level::Debug,
                "port {}: {}",
                p.number,
                if b {
                    "the link refuses frames; its packets wait in its egress queue"
                } else {
                    "the link takes frames again"
                }
            );
        }
    }
    if changed {
        let on = q.queueing();
        if w.queueing() != on {
            w.set_queueing(on);
        }
    }
    changed
}

/// Send what one packet produced: to ports, or to the controller for the CPU port.
pub(super) fn transmit(
    device: &dyn ControlPlane,
    engine: &p4sec_engine::Engine,
    ports: &[Port],
    by_number: &PortIndex,
    out: &Outputs,
    unknown: &mut u64,
    ts: Ts,
) {
    // once per packet, not per frame it emits: the CPU port is fixed for the device's life
    let cpu = device.cpu_port();
    for (port, frame) in out.iter() {
        if Some(port) == cpu {
            device.packet_in(engine, frame);
            continue;
        }
        match by_number.get(port) {
            Some(j) => ports[j].send(frame, ts),
            None => *unknown += 1,
        }
    }
}

/// Queueing mode: the packets the last pipeline calls left for egress go to their port's queue
/// (tail drops are counted there); those for a port without a queue (the CPU port, a port the
/// switch lacks) go through egress at once, their frames added to `out`.
pub(super) fn enqueue_all(
    engine: &Engine,
    w: &mut Worker,
    queues: &mut Queues,
    pending: &mut Vec<Queued>,
    out: &mut Outputs,
) {
    pending.extend(w.take_queued());
    if pending.is_empty() {
        return;
    }
    let now = w.now_us();
    for item in pending.drain(..) {
        let port = item.port;
        match queues.enqueue(item, now) {
            Enqueued::Queued => {}
            Enqueued::TailDropped => p4log!(
                Level::Trace,
                "port {port}: queue full, frame dropped at the tail"
            ),
            Enqueued::NoQueue(item) => engine.egress(
                w,
                item,
                QueueMeta {
                    enq_timestamp: now,
                    ..QueueMeta::default()
                },
                out,
            ),
        }
    }
    // (egress of those may have made more: recirculations, clones)
    let more: Vec<Queued> = w.take_queued().collect();
    if !more.is_empty() {
        pending.extend(more);
        enqueue_all(engine, w, queues, pending, out);
    }
}
