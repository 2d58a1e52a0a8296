//! `p4sec switch` (also `simple_switch_grpc` with BMv2's command line, [`crate::bmv2`]): its
//! flags, read into [`p4sec_switch::SwitchOptions`] and the P4Runtime control plane's settings
//! ([`p4sec_p4runtime::controller`]); the switch then runs in [`p4sec_switch::runner`].

use crate::bmv2;
use p4sec_p4runtime::controller::P4RuntimeControl;
use p4sec_switch::log::Level;
use p4sec_switch::{p4log, CaptureNames, QueueOptions, RunError, SwitchOptions};
use std::path::PathBuf;
use std::process::ExitCode;

// `p4sec switch` (its description is on `Cmd::Switch`)
#[derive(clap::Args)]
pub struct Args {
    /// A compiled program (`p4sec compile -o OUTDIR`: the directory, or its program.json) to
    /// load at start; otherwise the controller pushes one.
    #[arg(long, conflicts_with_all = ["program_file", "no_p4"])]
    pub program: Option<PathBuf>,
    /// The program file to load at start (`p4sec compile -o FILE.json`), as BMv2 takes its
    /// JSON.
    #[arg(value_name = "PROGRAM.json", conflicts_with = "no_p4")]
    pub program_file: Option<PathBuf>,
    /// Start without a program: the controller pushes one (BMv2's flag; the default without a
    /// program).
    #[arg(long)]
    pub no_p4: bool,
    /// gRPC listen address [default: 0.0.0.0:9559; a batch run with --program serves none
    /// unless given].
    #[arg(long, value_name = "ADDR")]
    pub grpc: Option<String>,
    /// P4Runtime device id [default: 1; as simple_switch_grpc 0, BMv2's].
    #[arg(long)]
    pub device_id: Option<u64>,
    /// A port, repeatable: N=IFACE (a Linux interface, e.g. a veth), N=xdp:IFACE (the same
    /// through an AF_XDP socket; where AF_XDP cannot work, the packet socket, with the reason
    /// logged), N=tap:NAME or N=tun:NAME (a TAP/TUN device the switch creates),
    /// N=pcap:in=FILE,out=FILE (frames read from / written to pcap files, either part optional;
    /// with only pcap ports the switch exits once all inputs are processed).
    #[arg(long = "port", value_name = "N=PORT")]
    pub ports: Vec<String>,
    /// BMv2's form of a port on a Linux interface, repeatable: N@IFACE is --port N=IFACE.
    #[arg(short = 'i', long = "interface", value_name = "N@IFACE")]
    pub interfaces: Vec<String>,
    /// The -i ports through AF_XDP sockets: N@IFACE is --port N=xdp:IFACE.
    #[arg(long)]
    pub xdp: bool,
    /// The CPU port: frames sent to it reach the controller as PacketIn; PacketOut enters on
    /// it.
    #[arg(long)]
    pub cpu_port: Option<u32>,
    /// Packet-processing threads; flows are spread over them by the kernel (PACKET_FANOUT
    /// hash).
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Serve Prometheus metrics at http://ADDR/metrics.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    /// Log every packet's path through the pipeline (parser states, tables, actions, externs)
    /// to stderr.
    #[arg(long)]
    pub trace: bool,
    /// Also write every port's received and sent frames to DIR/port<N>-in.pcap and
    /// DIR/port<N>-out.pcap (BMv2's --pcap DIR names them after the interfaces).
    #[arg(long, value_name = "DIR")]
    pub pcap_dir: Option<PathBuf>,
    /// How much the switch says on stderr: error, warn, info (port events), debug, trace (a
    /// line per packet); off is error (also as BMv2's -L/--log-level) [default: info; with
    /// --log-console or --log-file trace, BMv2's].
    #[arg(long, short = 'L', alias = "log-level", value_name = "LEVEL",
          value_parser = ["error", "warn", "info", "debug", "trace", "off"])]
    pub log: Option<String>,
    #[command(flatten)]
    pub bmv2: crate::bmv2::Bmv2Opts,
    /// The run-time control endpoint for `p4sec switch-cli` / `simple_switch_CLI`
    /// (set_queue_depth, set_queue_rate): a TCP port on 127.0.0.1 (not Thrift: p4sec's own line
    /// protocol, see docs/switch.md) [default as simple_switch_grpc: 9090; else none].
    #[arg(long, value_name = "PORT")]
    pub thrift_port: Option<u16>,
    /// Queue depth in packets, repeatable: N for every port, PORT=N for one [default: 64,
    /// BMv2's].
    #[arg(long, value_name = "[PORT=]N")]
    pub queue_depth: Vec<String>,
    /// Queue drain rate in packets per second, repeatable: PPS for every port, PORT=PPS for one
    /// [default: unlimited, no queueing].
    #[arg(long, value_name = "[PORT=]PPS")]
    pub queue_rate: Vec<String>,
    /// Priority queues per port (1..8; BMv2's --priority-queues): standard_metadata.priority
    /// picks the queue, the highest priority is served first [default: 1].
    #[arg(long, value_name = "N")]
    pub priority_queues: Option<usize>,
    /// TLS for the gRPC server: certificate (PEM).
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// TLS: private key (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Mutual TLS: clients must present a certificate signed by this CA (PEM); needs
    /// --tls-writers.
    #[arg(long, requires = "tls_cert")]
    pub tls_ca: Option<PathBuf>,
    /// Mutual TLS: the client certificates (subject CN, DNS or URI subject alternative name)
    /// that may arbitrate, write and set the pipeline, comma-separated, repeatable; `*`: any
    /// certificate the CA signed.
    #[arg(long, value_name = "NAME[,NAME...]", requires = "tls_ca")]
    pub tls_writers: Vec<String>,
    /// Mutual TLS: the client certificates that may only read (Read, GetForwardingPipelineConfig,
    /// Capabilities), comma-separated, repeatable; `*`: any certificate the CA signed. Others are
    /// refused every call (PERMISSION_DENIED).
    #[arg(long, value_name = "NAME[,NAME...]", requires = "tls_ca")]
    pub tls_readers: Vec<String>,
    /// Mutual TLS: the client CA's revocation list (`p4sec-ca`'s DIR/revoked.json, a JSON list
    /// of serials), read again when it changes: a revoked certificate is refused from its next
    /// call on; while the list cannot be read, every client is.
    #[arg(long, value_name = "FILE", requires = "tls_ca")]
    pub tls_revoked: Option<PathBuf>,
    /// P4Runtime type translation, repeatable: TYPE=FILE, a JSON object mapping the SDN strings
    /// of the `@p4runtime_translation` type TYPE (its name or URI) to data-plane values, e.g.
    /// {"Ethernet0": 1}.
    #[arg(long, value_name = "TYPE=FILE")]
    pub translate: Vec<String>,
    /// BMv2's target options, after `--`: --grpc-server-addr ADDR (as --grpc), --cpu-port N,
    /// --priority-queues N, --grpc-server-ssl with --grpc-server-cert/-key/-cacert and
    /// --grpc-server-with-client-auth (as --tls-*), --drop-port 511, --enable-swap.
    #[arg(last = true, value_name = "TARGET-OPTION")]
    pub target_options: Vec<String>,
}

/// A usage error: said, exit status 2.
fn usage(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("p4sec switch: {e}");
    ExitCode::from(2)
}

/// Runs the switch as the command line `a` says (`as_bmv2`: run as `simple_switch_grpc`, with
/// BMv2's defaults).
pub fn run(a: Args, as_bmv2: bool) -> ExitCode {
    let Args {
        program,
        program_file,
        no_p4: _,
        grpc,
        device_id,
        mut ports,
        interfaces,
        xdp,
        cpu_port,
        workers,
        metrics,
        trace,
        pcap_dir,
        log,
        bmv2,
        thrift_port,
        queue_depth,
        queue_rate,
        priority_queues,
        tls_cert,
        tls_key,
        tls_ca,
        tls_writers,
        tls_readers,
        tls_revoked,
        translate,
        target_options,
    } = a;
    let mut maps = p4sec_p4runtime::translate::Maps::new();
    for t in &translate {
        match p4sec_p4runtime::translate::read_map(t) {
            Ok((k, m)) => drop(maps.insert(k, m)),
            Err(e) => return usage(format!("--translate {t}: {e}")),
        }
    }
    if bmv2.version {
        println!(
            "p4sec {} (BMv2's simple_switch_grpc command line)",
            env!("CARGO_PKG_VERSION")
        );
        return ExitCode::SUCCESS;
    }
    if bmv2.json_version {
        println!("none: p4sec runs its own program files (`p4sec compile`, or p4c by that name), not BMv2 JSON");
        return ExitCode::SUCCESS;
    }
    let authz = match &tls_ca {
        Some(_) => match p4sec_p4runtime::authz::Policy::new(&tls_writers, &tls_readers) {
            Ok(p) => Some(p),
            Err(e) => return usage(e),
        },
        None => None,
    };
    let tls = match (tls_cert, tls_key) {
        (Some(cert), Some(key)) => Some(p4sec_p4runtime::server::TlsFiles {
            cert,
            key,
            client_ca: tls_ca,
            authz,
            revoked: tls_revoked,
        }),
        _ => None,
    };
    let device_id = device_id.unwrap_or(if as_bmv2 { 0 } else { 1 });
    let plan = match bmv2.plan(&interfaces, &mut ports, xdp, as_bmv2) {
        Ok(p) => p,
        Err(e) => return usage(e),
    };
    let target = match bmv2::TargetOptions::parse(&target_options) {
        Ok(t) => t,
        Err(e) => return usage(e),
    };
    let grpc = match (grpc, target.grpc_server_addr) {
        (Some(_), Some(_)) => {
            return usage("--grpc and --grpc-server-addr both given: give one");
        }
        (a, b) => a.or(b),
    };
    let cpu_port = match (cpu_port, target.cpu_port) {
        (Some(_), Some(_)) => {
            return usage("--cpu-port given twice (before and after `--`): give one");
        }
        (a, b) => a.or(b),
    };
    let priority_queues = match (priority_queues, target.priority_queues) {
        (Some(_), Some(_)) => {
            return usage("--priority-queues given twice (before and after `--`): give one");
        }
        (a, b) => a.or(b).unwrap_or(1),
    };
    // the control endpoint: where asked for, and at BMv2's default port as simple_switch_grpc
    let control_port = match thrift_port {
        Some(p) => Some((p, true)),
        None if as_bmv2 => Some((9090, false)),
        None => None,
    };
    // --program OUTDIR (its program.json) or a program file
    let program = program
        .map(|p| {
            if p.is_dir() {
                p.join("program.json")
            } else {
                p
            }
        })
        .or(program_file);
    // BMv2 logs at trace level by default once a log is asked for; its `off` is p4sec's quietest
    let log = log.unwrap_or_else(|| if plan.packet_log { "trace" } else { "info" }.to_string());
    let log = if log == "off" {
        "error".to_string()
    } else {
        log
    };
    let tls = match (tls, target.tls) {
        (Some(_), Some(_)) => {
            return usage("--tls-cert and --grpc-server-ssl both given: give one");
        }
        (a, b) => a.or(b),
    };
    if let Some(f) = &bmv2.log_file {
        if let Err(e) = p4sec_switch::log::set_file(f, bmv2.log_flush) {
            eprintln!("p4sec switch: --log-file: {e}");
            return ExitCode::FAILURE;
        }
    }
    match log.parse::<Level>() {
        Ok(l) => p4sec_switch::log::set_level(l),
        Err(e) => return usage(e),
    }
    for n in plan.notes.iter().chain(&target.notes) {
        p4log!(Level::Info, "{n}");
    }
    if let Some(d) = plan.wait {
        std::thread::sleep(d);
    }
    let capture = match (pcap_dir, bmv2.pcap) {
        (Some(d), _) => Some((d, CaptureNames::PortNumber)),
        (None, Some(d)) => Some((d, CaptureNames::Interface)),
        (None, None) => None,
    };
    let bmv2_log = plan.packet_log.then_some(p4sec_switch::bmv2log::Options {
        dump_bytes: bmv2.dump_packet_data.unwrap_or(0),
    });
    let mut control = match P4RuntimeControl::new(device_id, cpu_port, grpc, tls, maps) {
        Ok(c) => c,
        Err(e) => return usage(e),
    };
    let metrics = match metrics.map(|m| p4sec_p4runtime::listen::resolve(&m, "--metrics")) {
        Some(Err(e)) => return usage(e),
        m => m.and_then(Result::ok),
    };
    let opts = SwitchOptions {
        program,
        ports,
        cpu_port,
        workers,
        metrics,
        trace,
        capture,
        bmv2_log,
        queues: QueueOptions {
            depth: queue_depth,
            rate: queue_rate,
            priority_queues,
            control_port,
        },
    };
    let code = match opts.run(&mut control) {
        Ok(()) => ExitCode::SUCCESS,
        Err(RunError::Usage(e)) => usage(e),
        Err(RunError::Failed(e)) => {
            eprintln!("p4sec switch: {e}");
            ExitCode::FAILURE
        }
    };
    p4sec_switch::log::flush();
    code
}
