//! A Prometheus text-format `/metrics` endpoint: port, queue, worker, pipeline, table and
//! controller-channel counters. A deliberately small HTTP/1.1 responder (one request per
//! connection) on its own thread.

use crate::control_plane::ControlPlane;
use crate::datapath::WorkerStats;
use crate::port::io::PortStats;
use crate::tm::{PortQueue, TrafficManager};
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// The metrics text for the device and ports (and their queues) as they are now.
pub fn render(
    device: &dyn ControlPlane,
    ports: &[(u32, String, Arc<PortStats>)],
    workers: &[Arc<WorkerStats>],
    tm: Option<&TrafficManager>,
) -> String {
    let mut o = String::new();
    let mut family = |name: &str, help: &str, kind: &str, samples: Vec<(String, u64)>| {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, v) in samples {
            let _ = writeln!(o, "{name}{labels} {v}");
        }
    };
    let port = |f: fn(&PortStats) -> u64| {
        ports
            .iter()
            .map(|(n, i, s)| (format!("{{port=\"{n}\",iface=\"{}\"}}", escape(i)), f(s)))
            .collect::<Vec<_>>()
    };
    family(
        "p4sec_port_rx_packets_total",
        "Frames received on the port.",
        "counter",
        port(|s| s.rx.load(Ordering::Relaxed)),
    );
    family(
        "p4sec_port_tx_packets_total",
        "Frames transmitted on the port.",
        "counter",
        port(|s| s.tx.load(Ordering::Relaxed)),
    );
    family(
        "p4sec_port_rx_gso_frames_total",
        "GSO/GRO super-frames received on the port and cut into segments (each segment counts as a received frame).",
        "counter",
        port(|s| s.gso.load(Ordering::Relaxed)),
    );
    family(
        "p4sec_port_tx_gso_frames_total",
        "GSO super-frames sent on the port: TCP segments joined on transmit (each segment counts as a transmitted frame).",
        "counter",
        port(|s| s.gro.load(Ordering::Relaxed)),
    );
    family(
        "p4sec_port_rx_errors_total",
        "Frames lost on receive: dropped by the kernel for want of room in the port's rings (AF_XDP) or received broken.",
        "counter",
        port(|s| s.rx_errors.load(Ordering::Relaxed)),
    );
    family(
        "p4sec_port_tx_errors_total",
        "Frames the port failed to transmit.",
        "counter",
        port(|s| s.errors.load(Ordering::Relaxed)),
    );
    if let Some(tm) = tm {
        let queue = |f: &dyn Fn(&PortQueue) -> u64| {
            tm.ports()
                .map(|(n, q)| (format!("{{port=\"{n}\"}}"), f(q)))
                .collect::<Vec<_>>()
        };
        family(
            "p4sec_port_queue_tail_drops_total",
            "Frames dropped because the port's queue was full (traffic manager).",
            "counter",
            queue(&|q| q.tail_drops.load(Ordering::Relaxed)),
        );
        family(
            "p4sec_port_queue_packets",
            "Frames waiting in the port's queues.",
            "gauge",
            queue(&|q| q.occupancy() as u64),
        );
        family(
            "p4sec_port_queue_depth",
            "The depth limit of each of the port's queues (packets).",
            "gauge",
            queue(&|q| q.depth() as u64),
        );
        family(
            "p4sec_port_queue_rate_pps",
            "The port's drain rate in packets per second (0: unlimited).",
            "gauge",
            queue(&|q| q.rate().map(|r| r.round() as u64).unwrap_or(0)),
        );
    }
    let worker = |f: fn(&WorkerStats) -> u64| {
        workers
            .iter()
            .enumerate()
            .map(|(i, w)| (format!("{{worker=\"{i}\"}}"), f(w)))
            .collect::<Vec<_>>()
    };
    family(
        "p4sec_worker_packets_total",
        "Frames a worker ran through the pipeline.",
        "counter",
        worker(|w| w.packets.load(Ordering::Relaxed)),
    );
    family(
        "p4sec_worker_batches_total",
        "Rounds of a worker's loop that processed frames (packets / batches: frames per wake-up).",
        "counter",
        worker(|w| w.batches.load(Ordering::Relaxed)),
    );
    if workers
        .iter()
        .any(|w| w.heap_allocations.load(Ordering::Relaxed) != u64::MAX)
    {
        family(
            "p4sec_worker_heap_allocations_total",
            "Heap allocations made by a worker's thread, as of its last batch (none per frame in steady state).",
            "counter",
            worker(|w| w.heap_allocations.load(Ordering::Relaxed)).into_iter().filter(|(_, v)| *v != u64::MAX).collect(),
        );
    }
    family(
        "p4sec_packet_in_dropped_total",
        "PacketIn messages with no primary controller to take them.",
        "counter",
        vec![(String::new(), device.dropped().0)],
    );
    family(
        "p4sec_digests_dropped_total",
        "Digest messages not enabled by the controller or not deliverable.",
        "counter",
        vec![(String::new(), device.dropped().1)],
    );
    if let Some(engine) = device.engine() {
        let s = engine.stats();
        family(
            "p4sec_pipeline_packets_total",
            "Packets by what became of them in the pipeline.",
            "counter",
            vec![
                ("{outcome=\"received\"}".into(), s.packets_in),
                ("{outcome=\"emitted\"}".into(), s.packets_out),
                ("{outcome=\"dropped\"}".into(), s.dropped),
                ("{outcome=\"pass_limit\"}".into(), s.pass_limit),
            ],
        );
        family(
            "p4sec_pipeline_engine",
            "The engine that runs the loaded program (1 on the engine in use): closures or native code.",
            "gauge",
            vec![(format!("{{engine=\"{}\"}}", engine.backend()), 1)],
        );
        family(
            "p4sec_extern_faults_total",
            "Extern calls that failed (the packet is dropped).",
            "counter",
            vec![(String::new(), s.extern_faults)],
        );
        let mut hits = vec![];
        let mut entries = vec![];
        let mut versions = vec![];
        for (ti, t) in engine.prog.tables.iter().enumerate() {
            let (h, m) = engine.table_stats(ti);
            let name = escape(&t.name);
            hits.push((format!("{{table=\"{name}\",result=\"hit\"}}"), h));
            hits.push((format!("{{table=\"{name}\",result=\"miss\"}}"), m));
            entries.push((
                format!("{{table=\"{name}\"}}"),
                engine.table_len(ti).unwrap_or(0) as u64,
            ));
            let (reused, copied) = engine.table_versions_made(ti).unwrap_or((0, 0));
            versions.push((format!("{{table=\"{name}\",made=\"reused\"}}"), reused));
            versions.push((format!("{{table=\"{name}\",made=\"copied\"}}"), copied));
        }
        family(
            "p4sec_table_lookups_total",
            "Table applications by result.",
            "counter",
            hits,
        );
        family(
            "p4sec_table_entries",
            "Installed entries per table.",
            "gauge",
            entries,
        );
        family(
            "p4sec_table_versions_total",
            "Table versions made for changes (each write request or batch publishes one): in the version the previous change replaced, its memory reused (made=reused), or in a new copy while packets still read the replaced one (made=copied).",
            "counter",
            versions,
        );
    }
    o
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn answer(
    mut c: TcpStream,
    device: &dyn ControlPlane,
    ports: &[(u32, String, Arc<PortStats>)],
    workers: &[Arc<WorkerStats>],
    tm: Option<&TrafficManager>,
) {
    let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
    let mut req = [0u8; 2048];
    let n = c.read(&mut req).unwrap_or(0);
    let line = String::from_utf8_lossy(&req[..n])
        .lines()
        .next()
        .unwrap_or("")
        .to_string();
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (status, body, ctype) = match (method, path) {
        ("GET", "/metrics") => (
            "200 OK",
            render(device, ports, workers, tm),
            "text/plain; version=0.0.4",
        ),
        ("GET", _) => (
            "404 Not Found",
            "only /metrics is served here\n".to_string(),
            "text/plain",
        ),
        _ => (
            "405 Method Not Allowed",
            "GET only\n".to_string(),
            "text/plain",
        ),
    };
    let _ = write!(c, "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
}

/// Serve `/metrics` on `addr` from a background thread (with the traffic manager's queues, if
/// given).
pub fn serve(
    addr: SocketAddr,
    device: Arc<dyn ControlPlane>,
    ports: Vec<(u32, String, Arc<PortStats>)>,
    workers: Vec<Arc<WorkerStats>>,
    tm: Option<Arc<TrafficManager>>,
) -> Result<(), String> {
    let l = TcpListener::bind(addr).map_err(|e| {
        format!("metrics: cannot listen on {addr}: {e}; give another address with --metrics ADDR")
    })?;
    std::thread::Builder::new()
        .name("p4sec-metrics".into())
        .spawn(move || {
            for c in l.incoming().flatten() {
                answer(c, &*device, &ports, &workers, tm.as_deref());
            }
        })
        .map_err(|e| format!("metrics: {e}"))?;
    Ok(())
}
