//! Start-up of the data plane: the ports of a [`Config`] opened for every worker (interfaces,
//! TUN/TAP devices created, pcap files opened, captures), the worker threads started, and the
//! running [`Switch`] that stops them.

use crate::control_plane::ControlPlane;
use crate::datapath::{worker_loop, LoopOpts, WorkerStats};
use crate::log::Level;
use crate::pcap_file;
use crate::port::io::PortStats;
use crate::port::pcap::Pcap;
use crate::port::tap::Tap;
use crate::port::tun::Tun;
use crate::port::{Capture, Io, Port};
use crate::spec::{capture_files, check_ports, CaptureNames, PortKind, PortSpec};
use crate::tm::TrafficManager;
use crate::tuntap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// What [`start`] runs.
#[derive(Clone, Debug, Default)]
pub struct Config {
    pub ports: Vec<PortSpec>,
    /// Packet threads (at least 1).
    pub workers: usize,
    /// Log every packet's path through the pipeline.
    pub trace: bool,
    /// Capture every port's received and sent frames to DIR/port<N>-in.pcap and
    /// DIR/port<N>-out.pcap (or as `pcap_names` says).
    pub pcap_dir: Option<PathBuf>,
    /// How the capture files are named (BMv2's `--pcap`: after the interfaces).
    pub pcap_names: CaptureNames,
    /// BMv2's per-packet log (`--log-console`/`--log-file` as `simple_switch_grpc`): every packet's
    /// path through the pipeline in BMv2's words, at the levels BMv2 logs them ([`crate::bmv2log`]).
    pub bmv2_log: Option<crate::bmv2log::Options>,
    /// The traffic manager: port queues, their depths and rates (none: no queueing at all).
    pub tm: Option<Arc<TrafficManager>>,
}

/// The running data plane.
pub struct Switch {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    /// Every port's number, name and counters (for the metrics).
    pub stats: Vec<(u32, String, Arc<PortStats>)>,
    /// Every worker's counters, in worker order (for the metrics).
    pub workers: Vec<Arc<WorkerStats>>,
    batch: Option<Arc<AtomicBool>>,
    pcap_stats: Vec<Arc<PortStats>>,
}

impl Switch {
    /// A batch run: only pcap ports (some with input) and no CPU port; it ends by itself.
    pub fn is_batch(&self) -> bool {
        self.batch.is_some()
    }

    /// Has a batch run consumed all its input?
    pub fn finished(&self) -> bool {
        self.batch
            .as_ref()
            .map(|d| d.load(Ordering::Acquire))
            .unwrap_or(false)
    }

    /// Errors of the pcap ports so far: inputs that could not be read to their end, frames that
    /// could not be written (a batch run with errors should end with a failure).
    pub fn pcap_errors(&self) -> u64 {
        self.pcap_stats
            .iter()
            .map(|s| s.errors.load(Ordering::Relaxed))
            .sum()
    }

    /// Stop the packet threads and wait for them: files are flushed, TUN/TAP devices removed.
    pub fn shutdown(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Open all ports (for `cfg.workers` workers) and start the packet threads. Nothing is left open on
/// error.
pub fn start(device: Arc<dyn ControlPlane>, cfg: &Config) -> Result<Switch, String> {
    start_with_stop(device, cfg, Arc::new(AtomicBool::new(false)))
}

fn start_with_stop(
    device: Arc<dyn ControlPlane>,
    cfg: &Config,
    stop: Arc<AtomicBool>,
) -> Result<Switch, String> {
    let workers = cfg.workers;
    if workers == 0 {
        return Err("at least one worker is needed".into());
    }
    check_ports(
        &cfg.ports,
        device.cpu_port(),
        cfg.pcap_dir.as_deref().map(|d| (d, cfg.pcap_names)),
    )?;
    // the clock of the timestamps starts with the switch
    p4sec_engine::tm::start_clock();
    crate::ring::rx_ring_bytes()?;
    // pcap inputs first (nothing to undo when one is bad), then the live ports, then the files
    // written
    let mut inputs: Vec<Option<pcap_file::Reader>> = vec![];
    for s in &cfg.ports {
        inputs.push(match &s.kind {
            PortKind::Pcap { input: Some(f), .. } => {
                Some(pcap_file::Reader::open(f).map_err(|e| format!("port {}: {e}", s.number))?)
            }
            _ => None,
        });
    }
    // fanout group ids: unique per process and port
    let base = (std::process::id() as u16).wrapping_mul(31);
    let stats: Vec<Arc<PortStats>> = cfg.ports.iter().map(|_| Arc::default()).collect();
    let mut per_port: Vec<Vec<Port>> = vec![];
    for (k, s) in cfg.ports.iter().enumerate() {
        let n = s.number;
        let mut v = vec![];
        match &s.kind {
            PortKind::Iface(iface) => {
                for _ in 0..workers {
                    v.push(if workers == 1 {
                        Port::open(n, iface)?
                    } else {
                        Port::open_fanout(n, iface, base.wrapping_add(k as u16))?
                    });
                }
                if crate::gro::wanted() {
                    for p in v.iter_mut() {
                        if let Err(e) = p.enable_gro() {
                            p4log!(
                                Level::Debug,
                                "port {n}: TCP segments are not joined on `{iface}`: {e}"
                            );
                        }
                    }
                }
                let gro = match v[0].packet() {
                    Some(p) if p.udp_gro() => ", TCP segments of a stream and UDP datagrams of a flow joined into GSO super-frames on transmit",
                    Some(p) if p.gro() => ", TCP segments of a stream joined into GSO super-frames on transmit",
                    _ => "",
                };
                let how = match v[0].packet().and_then(|p| p.slots()) {
                    Some((rx, tx)) => {
                        format!("memory-mapped rings, {rx} receive and {tx} transmit slots{gro}")
                    }
                    _ => "one recvmsg/send per frame".into(),
                };
                p4log!(Level::Info, "port {n}: interface `{iface}` ({how})");
            }
            PortKind::Xdp(iface) => {
                v = crate::port::open_xdp_ports(n, iface, workers, base.wrapping_add(k as u16))?
            }
            PortKind::Tap(name) | PortKind::Tun(name) => {
                let tap = matches!(s.kind, PortKind::Tap(_));
                let existed = tuntap::exists(name);
                let vnet = tuntap::offloads_wanted();
                let mut offloads = vnet;
                for _ in 0..workers {
                    let (fd, off) = tuntap::open_queue(name, tap, workers > 1, vnet)
                        .map_err(|e| format!("port {n}: {e}"))?;
                    offloads &= off;
                    let io = if tap {
                        Io::Tap(Tap::new(fd, vnet))
                    } else {
                        Io::Tun(Tun::new(fd, vnet))
                    };
                    v.push(Port::new(n, &s.label, io));
                }
                tuntap::set_up(name).map_err(|e| format!("port {n}: {e}"))?;
                let k = if tap { "TAP" } else { "TUN" };
                // (a device whose queue cannot be lengthened still works: said, not an error)
                let qlen = match tuntap::set_tx_queue_len(name, tuntap::TX_QUEUE_LEN) {
                    Ok(q) => format!("{q}-packet queues"),
                    Err(e) => {
                        p4log!(Level::Warn, "port {n}: {e}");
                        "the device's queue length".into()
                    }
                };
                let mut queues = if workers > 1 {
                    format!("{workers} queues (one per worker), {qlen}")
                } else {
                    qlen
                };
                queues += match (vnet, offloads) {
                    (true, true) if crate::gro::wanted() => {
                        ", checksum and TCP segmentation offloads taken from the host, TCP segments joined into GSO super-frames on transmit"
                    }
                    (true, true) => ", checksum and TCP segmentation offloads taken from the host",
                    (true, false) => ", virtio-net headers but no offloads (the kernel refused them)",
                    (false, _) => ", no offloads",
                };
                if existed {
                    p4log!(Level::Info, "port {n}: {k} device `{name}` (an existing persistent device, left in place at exit; {queues})");
                } else {
                    p4log!(
                        Level::Info,
                        "port {n}: {k} device `{name}` created (removed at exit; {queues})"
                    );
                }
            }
            PortKind::Pcap { .. } => {}
        }
        per_port.push(v);
    }
    let mut written = vec![];
    for (k, s) in cfg.ports.iter().enumerate() {
        let n = s.number;
        if let PortKind::Pcap { input, output } = &s.kind {
            let w = match output {
                Some(f) => Some(Arc::new(Mutex::new(
                    pcap_file::Writer::create(f).map_err(|e| format!("port {n}: {e}"))?,
                ))),
                None => None,
            };
            let mut input_reader = inputs[k].take();
            for _ in 0..workers {
                let io = Io::Pcap(Pcap::new(input_reader.take(), w.clone()));
                per_port[k].push(Port::new(n, &s.label, io));
            }
            let from = input
                .as_ref()
                .map(|f| format!("frames from {}", f.display()))
                .unwrap_or_else(|| "no input".into());
            let to = output
                .as_ref()
                .map(|f| format!("frames sent written to {}", f.display()))
                .unwrap_or_else(|| "frames sent discarded".into());
            p4log!(Level::Info, "port {n}: pcap, {from}, {to}");
        }
        if let Some(dir) = &cfg.pcap_dir {
            if written.is_empty() {
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("--pcap-dir: cannot create {}: {e}", dir.display()))?;
            }
            let (i, o) = capture_files(dir, &cfg.ports[k], cfg.pcap_names);
            let c = Arc::new(Capture {
                rx: Mutex::new(pcap_file::Writer::create(&i)?),
                tx: Mutex::new(pcap_file::Writer::create(&o)?),
            });
            for p in per_port[k].iter_mut() {
                p.capture = Some(c.clone());
            }
            written.push(n);
        }
        for p in per_port[k].iter_mut() {
            p.stats = stats[k].clone();
        }
    }
    if let Some(dir) = &cfg.pcap_dir {
        p4log!(
            Level::Info,
            "capturing the frames of ports {written:?} to {}",
            dir.display()
        );
    }
    let batch_run = cfg
        .ports
        .iter()
        .any(|s| matches!(s.kind, PortKind::Pcap { input: Some(_), .. }))
        && !cfg.ports.iter().any(|s| s.is_live())
        && device.cpu_port().is_none();
    let batch = batch_run.then(|| Arc::new(AtomicBool::new(false)));
    let mut sets: Vec<Vec<Port>> = (0..workers).map(|_| vec![]).collect();
    for v in per_port {
        for (w, p) in v.into_iter().enumerate() {
            sets[w].push(p);
        }
    }
    let mut threads = vec![];
    let worker_stats: Vec<Arc<WorkerStats>> = (0..workers).map(|_| Arc::default()).collect();
    for (i, set) in sets.into_iter().enumerate() {
        let (d, st) = (device.clone(), stop.clone());
        let b = if i == 0 { batch.clone() } else { None };
        let opts = LoopOpts {
            trace: cfg.trace,
            bmv2_log: cfg.bmv2_log,
        };
        let ws = worker_stats[i].clone();
        let tm = cfg.tm.clone();
        let t = std::thread::Builder::new()
            .name(format!("p4sec-worker-{i}"))
            .spawn(move || worker_loop(d, set, st, opts, b, ws, tm))
            .map_err(|e| format!("cannot start a worker thread: {e}"));
        match t {
            Ok(t) => threads.push(t),
            Err(e) => {
                stop.store(true, Ordering::Relaxed);
                for t in threads {
                    let _ = t.join();
                }
                return Err(e);
            }
        }
    }
    let pcap_stats = cfg
        .ports
        .iter()
        .zip(&stats)
        .filter(|(s, _)| !s.is_live())
        .map(|(_, st)| st.clone())
        .collect();
    let stats = cfg
        .ports
        .iter()
        .zip(stats)
        .map(|(s, st)| (s.number, s.label.clone(), st))
        .collect();
    Ok(Switch {
        stop,
        threads,
        stats,
        workers: worker_stats,
        batch,
        pcap_stats,
    })
}

/// Run `workers` packet loops, each with its own sockets on every port (joined in a PACKET_FANOUT
/// group per port, so flows are spread over the workers) and its own engine worker state. The
/// threads run until `stop` is set.
pub fn run_workers(
    device: Arc<dyn ControlPlane>,
    ports: &[(u32, String)],
    workers: usize,
    stop: Arc<AtomicBool>,
    trace: bool,
) -> Result<Vec<(u32, String, Arc<PortStats>)>, String> {
    let specs = ports
        .iter()
        .map(|(n, i)| PortSpec {
            number: *n,
            kind: PortKind::Iface(i.clone()),
            label: i.clone(),
        })
        .collect();
    let mut sw = start_with_stop(
        device,
        &Config {
            ports: specs,
            workers,
            trace,
            ..Config::default()
        },
        stop,
    )?;
    sw.threads.clear(); // detached: they stop with `stop`
    Ok(std::mem::take(&mut sw.stats))
}
