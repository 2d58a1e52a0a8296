//! The packet loop of a worker: it waits on its ports' descriptors, receives frames in batches,
//! runs each through the engine installed on the P4Runtime device (taken afresh for every batch, so
//! a pipeline pushed by the controller takes effect without restarting the loop), and transmits
//! what the pipeline emits to ports or, for the CPU port, to the controller; PacketOut frames from
//! the controller enter as received on the CPU port. Where the frames of a packet go (ports by
//! number, the CPU port, the egress queues) is in [`egress`].

mod egress;

use crate::control_plane::ControlPlane;
use crate::log::{self, Level};
use crate::pcap_file::{self, Ts};
use crate::port::Port;
use crate::tm::{Queues, TrafficManager};
use egress::{enqueue_all, log_packet, note_blocked, transmit, PortIndex};
use p4sec_engine::tm::{QueueMeta, Queued};
use p4sec_engine::{Outputs, Worker};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

fn log_trace(w: &mut Worker, port: u32, len: usize) {
    let lines = w.take_trace();
    let name = std::thread::current()
        .name()
        .unwrap_or("worker")
        .to_string();
    eprintln!(
        "[{name}] packet of {len} bytes on port {port}: {}",
        lines.join("; ")
    );
}

/// Run the packet loop until `stop` is set. Frames sent to ports that do not exist are counted and
/// dropped.
pub fn run(device: Arc<dyn ControlPlane>, ports: Vec<Port>, stop: Arc<AtomicBool>) {
    run_with(device, ports, stop, false)
}

/// The packet loop; with `trace`, every packet's path through the pipeline is written to stderr.
pub fn run_with(
    device: Arc<dyn ControlPlane>,
    ports: Vec<Port>,
    stop: Arc<AtomicBool>,
    trace: bool,
) {
    let opts = LoopOpts {
        trace,
        ..LoopOpts::default()
    };
    worker_loop(device, ports, stop, opts, None, Arc::default(), None)
}

/// How a worker's loop reports packets.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LoopOpts {
    /// p4sec's pipeline trace (`--trace`): a line per packet on stderr (with BMv2's log on, that
    /// log shows the same path instead).
    pub trace: bool,
    /// BMv2's per-packet log ([`crate::bmv2log`]).
    pub bmv2_log: Option<crate::bmv2log::Options>,
}

/// Counters of one worker (its share of the traffic, and how many frames it takes per round of its
/// loop).
#[derive(Debug)]
pub struct WorkerStats {
    /// Frames run through the pipeline (received on its ports, and PacketOut).
    pub packets: AtomicU64,
    /// Rounds of the loop that processed frames: `packets / batches` frames per wake-up.
    pub batches: AtomicU64,
    /// Heap allocations the worker's thread has made since it started (published once per batch),
    /// when the process counts them ([`crate::alloc::CountingAlloc`]); `u64::MAX` when it does not,
    /// or before its first batch.
    pub heap_allocations: AtomicU64,
}

impl Default for WorkerStats {
    fn default() -> Self {
        WorkerStats {
            packets: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            heap_allocations: AtomicU64::new(u64::MAX),
        }
    }
}

/// Set (to anything but `0`) to have every worker poll its ports without sleeping: a CPU busy all
/// the time for each worker, and no wake-up to pay per batch.
pub const BUSY_POLL_ENV: &str = "P4SEC_BUSY_POLL";

fn busy_poll_wanted() -> bool {
    matches!(std::env::var(BUSY_POLL_ENV), Ok(v) if !v.is_empty() && v != "0")
}

/// While frames wait in receive rings, the loop goes on to them without asking `poll` again, at
/// most this many times in a row (the other descriptors and the ports' errors are looked at in
/// between).
const POLL_SKIP_MAX: u32 = 16;

/// The packet loop of one worker. With `batch` (only pcap ports, some with input), the loop ends
/// once every input is consumed and its frames processed, and sets the flag.
pub(crate) fn worker_loop(
    device: Arc<dyn ControlPlane>,
    mut ports: Vec<Port>,
    stop: Arc<AtomicBool>,
    opts: LoopOpts,
    batch: Option<Arc<AtomicBool>>,
    stats: Arc<WorkerStats>,
    tm: Option<Arc<TrafficManager>>,
) {
    let trace = opts.trace;
    let mut bmv2_log = opts.bmv2_log.map(crate::bmv2log::Logger::new);
    let mut queues = tm.map(Queues::new);
    let mut pending: Vec<Queued> = vec![];
    let mut due: Vec<(Queued, QueueMeta)> = vec![];
    // when the next queued packet may leave (ns from the last look), while packets wait
    let mut next_departure: Option<u64> = None;
    let by_number = PortIndex::new(&ports);
    let mut fds: Vec<libc::pollfd> = ports
        .iter()
        .map(|p| libc::pollfd {
            fd: p.fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // the last descriptor: PacketOut frames from the controller
    use std::os::fd::AsRawFd;
    fds.push(libc::pollfd {
        fd: device.packet_out().as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    });
    let mut buf = vec![0u8; pcap_file::MAX_FRAME + 64];
    let mut out = Outputs::default();
    let mut worker: Option<(usize, Worker)> = None;
    let mut unknown_port = 0u64;
    let mut suspect = vec![false; ports.len()];
    let writes = ports.iter().any(|p| p.writes());
    let packet_lines = log::enabled(Level::Trace) && opts.bmv2_log.is_none();
    let mut waiting_said = false;
    let mut frames_in = 0u64;
    let rings = ports.iter().any(|p| p.batched());
    let busy_poll = busy_poll_wanted();
    let mut skipped = 0u32;
    // (the first check at once: port liveness is known from the start)
    let mut checked_at = std::time::Instant::now()
        .checked_sub(std::time::Duration::from_secs(2))
        .unwrap_or_else(std::time::Instant::now);
    while !stop.load(Ordering::Relaxed) {
        // once a second: MTUs of ring ports, and every port's existence (a deleted interface does
        // not always leave an error on its socket, above all with rings)
        if checked_at.elapsed() >= std::time::Duration::from_secs(1) {
            for (i, p) in ports.iter().enumerate() {
                if rings {
                    p.refresh_mtu();
                }
                suspect[i] = true;
                // port liveness, for the watch ports of selector members (a port that is gone is
                // down; a pcap port has no descriptor to poll and is always up)
                device.set_port_up(p.number, (fds[i].fd >= 0 || p.is_pcap()) && p.up());
            }
            if let Some(q) = &queues {
                for (port, n) in q.tail_drops_to_report() {
                    p4log!(Level::Info, "port {port}: {n} frames dropped at the tail of its full queue (in the last second or so)");
                }
            }
            checked_at = std::time::Instant::now();
        }
        let engine = device.engine();
        let pcap_pending = engine.is_some() && ports.iter().any(|p| p.has_input());
        if let Some(done) = &batch {
            if engine.is_none() && !waiting_said {
                p4log!(
                    Level::Info,
                    "waiting for a pipeline before reading the pcap inputs"
                );
                waiting_said = true;
            }
            if engine.is_some() && !pcap_pending && queues.as_ref().is_none_or(|q| q.is_empty()) {
                p4log!(
                    Level::Info,
                    "all pcap inputs consumed ({frames_in} frames); stopping"
                );
                done.store(true, Ordering::Release);
                break;
            }
        }
        // frames left in a transmit ring (the kernel was out of buffer space) are retried soon
        let timeout = if pcap_pending || ports.iter().any(|p| p.segments_pending()) {
            0
        } else if rings && ports.iter().any(|p| p.tx_pending() > 0) {
            for p in &ports {
                p.flush_tx();
            }
            if let Some((_, w)) = worker.as_mut() {
                note_blocked(&ports, &mut queues, w);
            }
            1
        } else if rings && queues.as_ref().is_some_and(|q| q.any_blocked()) {
            // a blocked port is looked at again soon (its frames in flight leave the qdisc)
            if let Some((_, w)) = worker.as_mut() {
                note_blocked(&ports, &mut queues, w);
            }
            1
        } else if busy_poll {
            0
        } else {
            50
        };
        // a queued packet due sooner wakes the loop then (to the microsecond)
        let wake_ns = match next_departure {
            Some(ns) if ns < timeout as u64 * 1_000_000 => ns,
            _ => timeout as u64 * 1_000_000,
        };
        // frames already waiting in a receive ring need no system call to be found
        let r = if rings
            && skipped < POLL_SKIP_MAX
            && ports
                .iter()
                .enumerate()
                .any(|(i, p)| fds[i].fd >= 0 && p.rx_ready())
        {
            skipped += 1;
            for f in fds.iter_mut() {
                f.revents = 0;
            }
            1
        } else {
            skipped = 0;
            let ts = libc::timespec {
                tv_sec: (wake_ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (wake_ns % 1_000_000_000) as libc::c_long,
            };
            unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as u64, &ts, std::ptr::null()) }
        };
        // A socket error (the interface went down or away) is consumed here so that poll does not
        // keep reporting it, and the port is checked at once; every port is also checked once a
        // second. A port that is gone (deleted, moved to another namespace) is reported once and no
        // longer polled.
        for (i, p) in ports.iter().enumerate() {
            if fds[i].fd < 0 {
                continue;
            }
            if fds[i].revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
                p.take_error();
                suspect[i] = true;
                fds[i].revents &= !(libc::POLLERR | libc::POLLHUP | libc::POLLNVAL);
            }
            if suspect[i] && !p.alive() {
                p4log!(
                    Level::Warn,
                    "port {} (`{}`) is gone; frames to it are dropped from now on",
                    p.number,
                    p.iface
                );
                fds[i].fd = -1;
                fds[i].revents = 0;
                p.set_gone();
                p.stats.errors.fetch_add(1, Ordering::Relaxed);
            }
            suspect[i] = false;
        }
        let queued = queues.as_ref().is_some_and(|q| !q.is_empty());
        if r <= 0 && !pcap_pending && !queued {
            continue;
        }
        // the pipeline as it is now: one pushed while we waited applies to what woke us up
        let engine = if pcap_pending {
            engine
        } else {
            device.engine()
        };
        let Some(engine) = engine else {
            // no pipeline yet: drain and drop (pcap inputs wait for one)
            for (i, p) in ports.iter_mut().enumerate() {
                if fds[i].fd >= 0 && !p.is_pcap() {
                    let mut woken = fds[i].revents & libc::POLLIN != 0;
                    while p.recv(&mut buf, std::mem::take(&mut woken)).is_some() {}
                    p.release();
                }
            }
            while device.packet_out().recv(&mut buf).is_ok() {}
            continue;
        };
        let key = Arc::as_ptr(&engine) as usize;
        if worker.as_ref().map(|(k, _)| *k != key).unwrap_or(true) {
            let mut w = Worker::new(&engine);
            w.set_trace(trace || bmv2_log.is_some());
            worker = Some((key, w));
            // packets queued by the pipeline that was replaced cannot go through this one's egress
            if let Some(q) = queues.as_mut() {
                let n = q.clear();
                if n > 0 {
                    p4log!(
                        Level::Info,
                        "{n} queued frames dropped: the pipeline was replaced while they waited"
                    );
                }
            }
        }
        let w = &mut worker.as_mut().unwrap().1;
        let mut queueing = queues.as_ref().is_some_and(|q| q.queueing());
        if w.queueing() != queueing {
            w.set_queueing(queueing);
        }
        let mut processed = 0usize;
        for i in 0..ports.len() {
            // (a ring is also looked at when frames reached it after poll returned)
            if fds[i].revents == 0
                && !ports[i].has_input()
                && !(fds[i].fd >= 0 && ports[i].rx_ready())
            {
                continue;
            }
            // a batch per port per wake-up keeps one port from starving the others
            let mut woken = fds[i].revents & libc::POLLIN != 0;
            let mut received = 0u64;
            for _ in 0..64 {
                let Some((at, n, ts)) = ports[i].recv(&mut buf, std::mem::take(&mut woken)) else {
                    break;
                };
                if n == 0 {
                    // a frame the port could not take whole (a broken multi-buffer chain): an
                    // error, not a packet
                    ports[i].stats.rx_errors.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                // SAFETY: the frame is in `buf` or in the port's receive ring, where it stays until
                // the next `recv` or `release` of the port; neither happens before this iteration
                // ends
                let frame = unsafe { std::slice::from_raw_parts(at, n) };
                let ts = match ts {
                    Some(t) => t,
                    None if writes => Ts::now(),
                    None => Ts::default(),
                };
                let p = &ports[i];
                received += 1;
                if let Some(c) = &p.capture {
                    let _ =
                        c.rx.lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .write(ts, frame);
                }
                out.clear();
                engine.process(w, p.number, frame, &mut out);
                if let Some(q) = queues.as_mut().filter(|_| queueing) {
                    enqueue_all(&engine, w, q, &mut pending, &mut out);
                }
                if trace && bmv2_log.is_none() {
                    log_trace(w, p.number, n);
                }
                if let Some(lg) = bmv2_log.as_mut() {
                    std::hint::cold_path();
                    let lines = w.take_trace();
                    lg.packet(p.number, frame, &lines, out.iter(), device.cpu_port());
                }
                if packet_lines {
                    log_packet(p.number, n, &out, device.cpu_port(), &by_number, queueing);
                }
                transmit(
                    &*device,
                    &engine,
                    &ports,
                    &by_number,
                    &out,
                    &mut unknown_port,
                    ts,
                );
                processed += 1;
                if p.has_input() {
                    frames_in += 1;
                }
            }
            // (counted once per batch: one atomic add, not one per frame)
            ports[i].stats.rx.fetch_add(received, Ordering::Relaxed);
            ports[i].release();
            // what this batch produced goes out now: one system call per port with frames in its
            // ring
            if rings {
                for p in &ports {
                    p.flush_tx();
                }
                if note_blocked(&ports, &mut queues, w) {
                    queueing = w.queueing();
                }
            }
        }
        // PacketOut: enters the pipeline as received on the CPU port. Its socket is read only when
        // poll said it is readable (a round that skipped poll leaves it for the next poll, at most
        // POLL_SKIP_MAX rounds later): a `recv` that finds nothing would cost a system call per
        // batch.
        let packet_out = fds.last().is_some_and(|f| f.revents & libc::POLLIN != 0);
        if let Some(cpu) = device.cpu_port().filter(|_| packet_out) {
            for _ in 0..64 {
                let Ok(n) = device.packet_out().recv(&mut buf) else {
                    break;
                };
                out.clear();
                engine.process(w, cpu, &buf[..n], &mut out);
                if let Some(q) = queues.as_mut().filter(|_| queueing) {
                    enqueue_all(&engine, w, q, &mut pending, &mut out);
                }
                if trace && bmv2_log.is_none() {
                    log_trace(w, cpu, n);
                }
                if let Some(lg) = bmv2_log.as_mut() {
                    let lines = w.take_trace();
                    lg.packet(cpu, &buf[..n], &lines, out.iter(), device.cpu_port());
                }
                if packet_lines {
                    log_packet(cpu, n, &out, device.cpu_port(), &by_number, queueing);
                }
                transmit(
                    &*device,
                    &engine,
                    &ports,
                    &by_number,
                    &out,
                    &mut unknown_port,
                    if writes { Ts::now() } else { Ts::default() },
                );
                processed += 1;
            }
            if rings {
                for p in &ports {
                    p.flush_tx();
                }
                note_blocked(&ports, &mut queues, w);
            }
        } else if packet_out {
            while device.packet_out().recv(&mut buf).is_ok() {
                unknown_port += 1;
            }
        }
        // the queued packets whose departure is due: their egress now
        next_departure = None;
        let mut dequeued = 0usize;
        if let Some(q) = queues.as_mut() {
            if !q.is_empty() {
                let now = w.now_us();
                next_departure = q.dequeue_due(now, &mut due);
                for (item, meta) in due.drain(..) {
                    out.clear();
                    let port = item.port;
                    engine.egress(w, item, meta, &mut out);
                    enqueue_all(&engine, w, q, &mut pending, &mut out);
                    if trace && bmv2_log.is_none() {
                        let lines = w.take_trace();
                        let name = std::thread::current()
                            .name()
                            .unwrap_or("worker")
                            .to_string();
                        eprintln!("[{name}] queued packet for port {port} leaves its queue (waited {} µs): {}", meta.deq_timedelta, lines.join("; "));
                    }
                    if let Some(lg) = bmv2_log.as_mut() {
                        let lines = w.take_trace();
                        lg.dequeued(port, meta.deq_timedelta as u64, &lines, out.iter());
                    }
                    transmit(
                        &*device,
                        &engine,
                        &ports,
                        &by_number,
                        &out,
                        &mut unknown_port,
                        if writes { Ts::now() } else { Ts::default() },
                    );
                    dequeued += 1;
                }
                if rings {
                    for p in &ports {
                        p.flush_tx();
                    }
                }
                if !q.is_empty() && next_departure.is_none() {
                    // (due now: what was dequeued made room for more at once; behind a blocked
                    // port, when its ring is retried)
                    next_departure = Some(if q.any_blocked() { 1_000_000 } else { 0 });
                }
            }
        }
        if rings && (dequeued > 0 || queues.as_ref().is_some_and(|q| q.any_blocked())) {
            note_blocked(&ports, &mut queues, w);
        }
        device.deliver_digests(&engine);
        if processed > 0 {
            stats.packets.fetch_add(processed as u64, Ordering::Relaxed);
            stats.batches.fetch_add(1, Ordering::Relaxed);
            stats.heap_allocations.store(
                crate::alloc::thread_allocations().unwrap_or(u64::MAX),
                Ordering::Relaxed,
            );
        }
        if writes && processed + dequeued > 0 {
            for p in &ports {
                p.flush();
            }
        }
        let _ = unknown_port;
    }
    for p in &ports {
        p.flush_tx();
        p.flush();
    }
}
