//! `p4sec`: the one binary of the p4sec switch.
//!
//! Subcommands: `compile` (P4 → program + P4Info; also with the reference compiler's flags), `stf`
//! (run STF packet tests), `switch` (also as `simple_switch_grpc`, with BMv2's flags, or through a
//! symlink of that name), `switch-cli` (run-time queue commands to a running switch; also through a
//! symlink named `simple_switch_CLI`), the benchmarks. Run as `p4c` or `p4c-bm2-ss` (a symlink of
//! that name), it is the compiler with p4c's flags ([`bmv2`]).

mod ascon_serve;
mod bmv2;
mod stf_runner;

#[global_allocator]
static GLOBAL: p4sec_switch::alloc::CountingAlloc = p4sec_switch::alloc::CountingAlloc;

use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "p4sec",
    version,
    about = "A P4-programmable software switch with security in its data plane"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Compile a P4_16 v1model program: writes OUTDIR/program.json and its P4Info (p4info.txtpb,
    /// p4info.binpb). Takes the reference compiler's flags too (--target bmv2 --arch v1model --std
    /// p4-16 --p4runtime-files ... -o FILE.json), so a Makefile written for p4c works with P4C set
    /// to `p4sec compile`.
    Compile {
        /// The P4_16 program (v1model architecture) to compile.
        program: PathBuf,
        /// The output directory (created when missing): program.json for `p4sec switch --program`
        /// and `SetForwardingPipelineConfig` (also as NAME.json, the name p4c gives it, after the
        /// source NAME.p4), p4info.txtpb and p4info.binpb for P4Runtime clients. A name ending in
        /// .json: the program file only.
        #[arg(
            short = 'o',
            long = "out",
            value_name = "OUTDIR|FILE.json",
            required_unless_present = "as_p4c"
        )]
        out: Option<PathBuf>,
        /// Run as `p4c`/`p4c-bm2-ss` (by that name): write what p4c writes, OUTDIR/NAME.json (-o
        /// default: .) and the P4Info files asked for.
        #[arg(long = "as-p4c", hide = true)]
        as_p4c: bool,
        /// Add an include directory.
        #[arg(short = 'I', value_name = "DIR")]
        include: Vec<PathBuf>,
        /// Define a preprocessor macro: NAME or NAME=VALUE.
        #[arg(short = 'D', value_name = "NAME[=VALUE]")]
        define: Vec<String>,
        /// Also write the P4Info to these files, comma-separated (repeatable), the format by
        /// extension: .txt, .txtpb or .pb.txt text, .json JSON, .bin, .binpb or .pb binary protobuf
        /// (p4c's flag).
        #[arg(
            long = "p4runtime-files",
            value_delimiter = ',',
            value_name = "FILE[,FILE...]"
        )]
        p4runtime_files: Vec<PathBuf>,
        /// Also write the P4Info to FILE, in --p4runtime-format (p4c's older flag).
        #[arg(long = "p4runtime-file", value_name = "FILE")]
        p4runtime_file: Option<PathBuf>,
        /// The format of --p4runtime-file.
        #[arg(long = "p4runtime-format", value_name = "FORMAT", value_parser = ["text", "json", "binary"], default_value = "text")]
        p4runtime_format: String,
        /// The target (p4c's flag): bmv2 only, the target whose v1model p4sec runs.
        #[arg(long, short = 'b', value_name = "TARGET", value_parser = ["bmv2"])]
        target: Option<String>,
        /// The architecture (p4c's flag): v1model only.
        #[arg(long, short = 'a', value_name = "ARCH", value_parser = ["v1model"])]
        arch: Option<String>,
        /// The language version (p4c's flag): p4-16 only.
        #[arg(long, value_name = "STD", value_parser = ["p4-16"])]
        std: Option<String>,
        /// The language version as p4c-bm2-ss takes it: 16 only.
        #[arg(long, value_name = "VERSION", value_parser = ["16"])]
        p4v: Option<String>,
        /// Accepted for p4c's sake and ignored: p4sec's program file always describes the externs
        /// it calls.
        #[arg(long)]
        emit_externs: bool,
        /// Accepted for p4c's sake (debug information): p4sec's program file keeps the names of
        /// tables, actions and parser states always.
        #[arg(short = 'g')]
        debug_info: bool,
        /// Accepted for p4c's sake: p4c's verbosity (p4sec's compiler says only what is wrong).
        #[arg(short = 'v', long = "verbose", value_name = "N", num_args = 0..=1, default_missing_value = "1")]
        verbose: Option<u32>,
        /// Accepted for p4c's sake: p4c's diagnostics to silence or demote (p4sec's compiler
        /// issues errors only).
        #[arg(long = "Wdisable", alias = "Wwarn", value_name = "DIAG", num_args = 0..=1, default_missing_value = "")]
        wdisable: Vec<String>,
    },
    /// Run STF packet tests: `p4sec stf PROGRAM.p4 TEST.stf` or `p4sec stf --suite DIR`.
    Stf {
        /// The P4_16 program under test (without --suite).
        program: Option<PathBuf>,
        /// The STF file: table entries to add, packets to send and the packets expected out
        /// (without --suite).
        test: Option<PathBuf>,
        /// Run every NAME.p4 / NAME.stf pair in DIR.
        #[arg(long)]
        suite: Option<PathBuf>,
        /// With --suite: write the suite's section of a Markdown report (FILE keeps other suites'
        /// sections).
        #[arg(long)]
        report: Option<PathBuf>,
        /// With --report: the reasons for failing programs, lines `PROGRAM: reason`.
        #[arg(long)]
        notes: Option<PathBuf>,
        /// Print each packet's path through the pipeline.
        #[arg(long)]
        trace: bool,
        /// Add an include directory (single test).
        #[arg(short = 'I', value_name = "DIR")]
        include: Vec<PathBuf>,
        /// Define a preprocessor macro: NAME or NAME=VALUE (single test).
        #[arg(short = 'D', value_name = "NAME[=VALUE]")]
        define: Vec<String>,
    },
    /// Run the switch: ports (Linux interfaces, TUN/TAP devices, pcap files) and a P4Runtime server
    /// (gRPC service p4.v1.P4Runtime). Also as `p4sec simple_switch_grpc` (or a symlink named
    /// simple_switch_grpc or simple_switch) with BMv2's command line: `[-i N@IFACE]... [--device-id
    /// N] [--log-console | --log-file F] [-L LEVEL] [--pcap DIR] [--no-p4 | PROGRAM.json] [--
    /// --grpc-server-addr ADDR --cpu-port N]` and BMv2's other options (docs/switch.md).
    #[command(alias = "simple_switch_grpc")]
    Switch {
        /// A compiled program (`p4sec compile -o OUTDIR`: the directory, or its program.json) to
        /// load at start; otherwise the controller pushes one.
        #[arg(long, conflicts_with_all = ["program_file", "no_p4"])]
        program: Option<PathBuf>,
        /// The program file to load at start (`p4sec compile -o FILE.json`), as BMv2 takes its
        /// JSON.
        #[arg(value_name = "PROGRAM.json", conflicts_with = "no_p4")]
        program_file: Option<PathBuf>,
        /// Start without a program: the controller pushes one (BMv2's flag; the default without a
        /// program).
        #[arg(long)]
        no_p4: bool,
        /// gRPC listen address [default: 0.0.0.0:9559; a batch run with --program serves none
        /// unless given].
        #[arg(long, value_name = "ADDR")]
        grpc: Option<String>,
        /// P4Runtime device id [default: 1; as simple_switch_grpc 0, BMv2's].
        #[arg(long)]
        device_id: Option<u64>,
        /// A port, repeatable: N=IFACE (a Linux interface, e.g. a veth), N=xdp:IFACE (the same
        /// through an AF_XDP socket; where AF_XDP cannot work, the packet socket, with the reason
        /// logged), N=tap:NAME or N=tun:NAME (a TAP/TUN device the switch creates),
        /// N=pcap:in=FILE,out=FILE (frames read from / written to pcap files, either part optional;
        /// with only pcap ports the switch exits once all inputs are processed).
        #[arg(long = "port", value_name = "N=PORT")]
        ports: Vec<String>,
        /// BMv2's form of a port on a Linux interface, repeatable: N@IFACE is --port N=IFACE.
        #[arg(short = 'i', long = "interface", value_name = "N@IFACE")]
        interfaces: Vec<String>,
        /// The -i ports through AF_XDP sockets: N@IFACE is --port N=xdp:IFACE.
        #[arg(long)]
        xdp: bool,
        /// The CPU port: frames sent to it reach the controller as PacketIn; PacketOut enters on
        /// it.
        #[arg(long)]
        cpu_port: Option<u32>,
        /// Packet-processing threads; flows are spread over them by the kernel (PACKET_FANOUT
        /// hash).
        #[arg(long, default_value_t = 1)]
        workers: usize,
        /// Serve Prometheus metrics at http://ADDR/metrics.
        #[arg(long, value_name = "ADDR")]
        metrics: Option<String>,
        /// Log every packet's path through the pipeline (parser states, tables, actions, externs)
        /// to stderr.
        #[arg(long)]
        trace: bool,
        /// Also write every port's received and sent frames to DIR/port<N>-in.pcap and
        /// DIR/port<N>-out.pcap (BMv2's --pcap DIR names them after the interfaces).
        #[arg(long, value_name = "DIR")]
        pcap_dir: Option<PathBuf>,
        /// How much the switch says on stderr: error, warn, info (port events), debug, trace (a
        /// line per packet); off is error (also as BMv2's -L/--log-level) [default: info; with
        /// --log-console or --log-file trace, BMv2's].
        #[arg(long, short = 'L', alias = "log-level", value_name = "LEVEL",
              value_parser = ["error", "warn", "info", "debug", "trace", "off"])]
        log: Option<String>,
        #[command(flatten)]
        bmv2: bmv2::Bmv2Opts,
        /// The run-time control endpoint for `p4sec switch-cli` / `simple_switch_CLI`
        /// (set_queue_depth, set_queue_rate): a TCP port on 127.0.0.1 (not Thrift: p4sec's own line
        /// protocol, see docs/switch.md) [default as simple_switch_grpc: 9090; else none].
        #[arg(long, value_name = "PORT")]
        thrift_port: Option<u16>,
        /// Queue depth in packets, repeatable: N for every port, PORT=N for one [default: 64,
        /// BMv2's].
        #[arg(long, value_name = "[PORT=]N")]
        queue_depth: Vec<String>,
        /// Queue drain rate in packets per second, repeatable: PPS for every port, PORT=PPS for one
        /// [default: unlimited, no queueing].
        #[arg(long, value_name = "[PORT=]PPS")]
        queue_rate: Vec<String>,
        /// Priority queues per port (1..8; BMv2's --priority-queues): standard_metadata.priority
        /// picks the queue, the highest priority is served first [default: 1].
        #[arg(long, value_name = "N")]
        priority_queues: Option<usize>,
        /// TLS for the gRPC server: certificate (PEM).
        #[arg(long, requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// TLS: private key (PEM).
        #[arg(long, requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// Mutual TLS: clients must present a certificate signed by this CA (PEM); needs
        /// --tls-writers.
        #[arg(long, requires = "tls_cert")]
        tls_ca: Option<PathBuf>,
        /// Mutual TLS: the client certificates (subject CN, DNS or URI subject alternative name)
        /// that may arbitrate, write and set the pipeline, comma-separated, repeatable; `*`: any
        /// certificate the CA signed.
        #[arg(long, value_name = "NAME[,NAME...]", requires = "tls_ca")]
        tls_writers: Vec<String>,
        /// Mutual TLS: the client certificates that may only read (Read, GetForwardingPipelineConfig,
        /// Capabilities), comma-separated, repeatable; `*`: any certificate the CA signed. Others are
        /// refused every call (PERMISSION_DENIED).
        #[arg(long, value_name = "NAME[,NAME...]", requires = "tls_ca")]
        tls_readers: Vec<String>,
        /// Mutual TLS: the client CA's revocation list (`p4sec-ca`'s DIR/revoked.json, a JSON list
        /// of serials), read again when it changes: a revoked certificate is refused from its next
        /// call on; while the list cannot be read, every client is.
        #[arg(long, value_name = "FILE", requires = "tls_ca")]
        tls_revoked: Option<PathBuf>,
        /// P4Runtime type translation, repeatable: TYPE=FILE, a JSON object mapping the SDN strings
        /// of the `@p4runtime_translation` type TYPE (its name or URI) to data-plane values, e.g.
        /// {"Ethernet0": 1}.
        #[arg(long, value_name = "TYPE=FILE")]
        translate: Vec<String>,
        /// BMv2's target options, after `--`: --grpc-server-addr ADDR (as --grpc), --cpu-port N,
        /// --priority-queues N, --grpc-server-ssl with --grpc-server-cert/-key/-cacert and
        /// --grpc-server-with-client-auth (as --tls-*), --drop-port 511, --enable-swap.
        #[arg(last = true, value_name = "TARGET-OPTION")]
        target_options: Vec<String>,
    },
    /// Send run-time commands to a running switch, one per line on stdin (as BMv2's
    /// simple_switch_CLI, also run as a program named simple_switch_CLI): set_queue_depth DEPTH
    /// [PORT], set_queue_rate RATE_PPS [PORT].
    #[command(name = "switch-cli")]
    SwitchCli {
        /// The switch's control endpoint port (its --thrift-port).
        #[arg(long, default_value_t = 9090)]
        thrift_port: u16,
        /// The switch's address.
        #[arg(long, default_value = "127.0.0.1")]
        thrift_ip: String,
        /// Accepted for BMv2's sake and unused (the switch knows its program).
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Accepted for BMv2's sake and unused.
        #[arg(long, value_name = "PRE")]
        pre: Option<String>,
    },
    /// ASCON-AEAD for control-plane tools: JSON requests on stdin, answers on stdout (used by
    /// p4sec.inband).
    AsconServe,
    /// Forwarding benchmark: the IPv4 LPM router over 64-byte packets, in process, one core.
    Bench {
        /// Number of routes in the LPM table.
        #[arg(long, default_value_t = 10_000)]
        routes: u32,
        /// Seconds to measure.
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        /// Write the figures as JSON.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Engine benchmark: the P4 part of the IPsec gateway (NULL cipher and AES-GCM), the URL
    /// filter and the keyed Bloom filter on the closure engine and the native engine, alternated.
    BenchEngines {
        /// Seconds per pipeline (both engines).
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        /// Write the figures as JSON.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// SAD benchmark: ESP decapsulation through programs/ipsec_gateway.p4 with 1, 1,000 and 100,000
    /// SAs installed.
    BenchSad {
        /// SAD sizes to measure, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "1,1000,100000")]
        sas: Vec<u32>,
        /// Write the figures as JSON.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// ESP benchmark: one tunnel through programs/ipsec_gateway.p4 in one direction (encapsulation
    /// or decapsulation), every output checked, with a digest of the emitted frames (for callgrind:
    /// instructions collected in `Engine::process` divided by the packets).
    BenchEsp {
        /// The direction measured: enc (plain in on the LAN port, ESP out) or dec (ESP in, plain
        /// out).
        #[arg(long, default_value = "enc")]
        dir: String,
        /// Size of the plain IP packets (the hosts' MTU).
        #[arg(long, default_value_t = 1400)]
        size: usize,
        /// Packets to push through.
        #[arg(long, default_value_t = 20_000)]
        packets: u32,
    },
    /// Mixed traffic and re-keying benchmark (the IPsec gateway paper's Table 3): throughput with k
    /// of every 16 packets ESP to decrypt and the rest plain IP, without and with SAs renewed
    /// continuously, in the same run.
    BenchMixed {
        /// Frame sizes (the plain and the decrypted frames; 64 to 1518), comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "64,512,1500")]
        sizes: Vec<usize>,
        /// ESP packets per 16 (0 to 16), comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "0,1,2,4,8,10,12,16")]
        ks: Vec<u32>,
        /// Tunnels (SAs) the ESP packets are spread over.
        #[arg(long, default_value_t = 16)]
        tunnels: u32,
        /// Seconds of gateway time per measurement.
        #[arg(long, default_value_t = 0.5)]
        seconds: f64,
        /// Rounds per figure (each: one measurement without and one with re-keying); medians are
        /// reported.
        #[arg(long, default_value_t = 3)]
        rounds: u32,
        /// SA renewals per second during re-keying (round robin over the tunnels).
        #[arg(long, default_value_t = 1000.0)]
        rekey_rate: f64,
        /// Milliseconds an old SAD-dec entry stays after its renewal (and until every packet made
        /// under it is through).
        #[arg(long, default_value_t = 10.0)]
        grace_ms: f64,
        /// Write the figures as JSON.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Hashing benchmark: Table III of the cryptographic hashing paper (whole-frame keyed hashing
    /// in the pipeline, percent of 10 GbE line rate) and the per-packet cost of each hash
    /// algorithm.
    BenchHash {
        /// Seconds to measure in total.
        #[arg(long, default_value_t = 8.0)]
        seconds: f64,
        /// Write the figures as JSON.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// P4EAD benchmark: ASCON-AEAD in plain P4 with recirculation (1-4 rounds per pass) versus the
    /// extern, throughput and latency per request, beside the P4EAD paper's figures.
    BenchP4ead {
        /// Seconds per measurement group (throughput: median of 5 runs of S/5; latency: S).
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        /// Write the figures as JSON.
        #[arg(long)]
        json: Option<PathBuf>,
    },
}

fn parse_defines(defs: &[String]) -> Vec<(String, Option<String>)> {
    defs.iter()
        .map(|d| match d.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (d.clone(), None),
        })
        .collect()
}

pub fn compile(
    path: &Path,
    include: &[PathBuf],
    defines: &[(String, Option<String>)],
) -> Result<p4sec_ir::Program, String> {
    let opts = p4sec_frontend::CompileOptions {
        include_dirs: include.to_vec(),
        defines: defines.to_vec(),
    };
    p4sec_frontend::compile_file(path, &opts).map_err(|e| e.to_string())
}

/// The formats `--p4runtime-files` and `--p4runtime-format` write the P4Info in.
#[derive(Clone, Copy)]
enum P4InfoFormat {
    Text,
    Json,
    Binary,
}

impl P4InfoFormat {
    /// The format a file name asks for, by its extension (as p4c decides).
    fn of(path: &Path) -> Option<P4InfoFormat> {
        let name = path.file_name()?.to_str()?.to_ascii_lowercase();
        if name.ends_with(".pb.txt") || name.ends_with(".txt") || name.ends_with(".txtpb") {
            Some(P4InfoFormat::Text)
        } else if name.ends_with(".json") {
            Some(P4InfoFormat::Json)
        } else if name.ends_with(".bin") || name.ends_with(".binpb") || name.ends_with(".pb") {
            Some(P4InfoFormat::Binary)
        } else {
            None
        }
    }

    /// A `--p4runtime-format` value (the parser admits only these three).
    fn named(s: &str) -> P4InfoFormat {
        match s {
            "json" => P4InfoFormat::Json,
            "binary" => P4InfoFormat::Binary,
            _ => P4InfoFormat::Text,
        }
    }
}

/// Writes what `p4sec compile` produces: the program into `out` (a directory, or a file named
/// *.json) and the P4Info into `infos`, saying what it wrote.
fn write_compiled(
    prog: &p4sec_ir::Program,
    source: &Path,
    out: &Path,
    infos: &[(PathBuf, P4InfoFormat)],
    as_p4c: bool,
) -> ExitCode {
    use p4sec_p4runtime::prost_message::Message;
    let binpb = p4sec_p4runtime::p4info::p4info(prog).encode_to_vec();
    // the one P4Info message, written in each format from its bytes
    let text = match p4sec_p4runtime::text::to_text("p4.config.v1.P4Info", &binpb) {
        Ok(t) => t.into_bytes(),
        Err(e) => {
            eprintln!("p4sec compile: cannot write the P4Info in the text format: {e}");
            return ExitCode::FAILURE;
        }
    };
    let json = prog.to_json().into_bytes();
    let mut files: Vec<(PathBuf, Vec<u8>)> = vec![];
    let is_file = out
        .extension()
        .is_some_and(|x| x.eq_ignore_ascii_case("json"))
        && !out.is_dir();
    if is_file {
        files.push((out.to_path_buf(), json));
    } else {
        // p4c names the program after the source (build/NAME.json); p4sec's own tools read
        // program.json
        let stem = source
            .file_stem()
            .map(|s| format!("{}.json", s.to_string_lossy()))
            .unwrap_or_else(|| "program.json".into());
        if as_p4c {
            // (as p4c: its one output in the directory)
            files.push((out.join(stem), json));
        } else {
            if stem != "program.json" {
                files.push((out.join(stem), json.clone()));
            }
            files.push((out.join("program.json"), json));
            files.push((out.join("p4info.txtpb"), text.clone()));
            files.push((out.join("p4info.binpb"), binpb.clone()));
        }
    }
    for (path, fmt) in infos {
        let bytes = match fmt {
            P4InfoFormat::Text => text.clone(),
            P4InfoFormat::Binary => binpb.clone(),
            P4InfoFormat::Json => {
                match p4sec_p4runtime::json::to_json("p4.config.v1.P4Info", &binpb) {
                    Ok(j) => j.into_bytes(),
                    Err(e) => {
                        eprintln!("p4sec compile: the P4Info in JSON: {e}");
                        return ExitCode::FAILURE;
                    }
                }
            }
        };
        files.push((path.clone(), bytes));
    }
    for (path, bytes) in files {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if let Err(e) = std::fs::create_dir_all(dir) {
                eprintln!("p4sec compile: cannot create {}: {e}", dir.display());
                return ExitCode::FAILURE;
            }
        }
        if let Err(e) = std::fs::write(&path, bytes) {
            eprintln!("p4sec compile: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("wrote {}", path.display());
    }
    ExitCode::SUCCESS
}

/// The traffic manager's options of `p4sec switch`.
struct QueueOpts {
    depth: Vec<String>,
    rate: Vec<String>,
    priority_queues: usize,
    /// The control endpoint's port on 127.0.0.1, and whether it was asked for (a port that cannot
    /// be listened on is a warning either way; the message differs).
    control_port: Option<(u16, bool)>,
}

/// `[PORT=]VALUE` of --queue-depth / --queue-rate.
fn port_value<T: std::str::FromStr>(
    flag: &str,
    arg: &str,
    what: &str,
) -> Result<(Option<u32>, T), String> {
    let (port, v) = match arg.split_once('=') {
        Some((p, v)) => (
            Some(
                p.trim()
                    .parse::<u32>()
                    .map_err(|_| format!("{flag} {arg}: `{p}` is not a port number"))?,
            ),
            v,
        ),
        None => (None, arg),
    };
    let v = v
        .trim()
        .parse::<T>()
        .map_err(|_| format!("{flag} {arg}: `{v}` is not {what} ({flag} takes [PORT=]VALUE)"))?;
    Ok((port, v))
}

/// The traffic manager for `ports` with the options applied.
fn traffic_manager(
    ports: &[u32],
    q: &QueueOpts,
) -> Result<p4sec_switch::tm::TrafficManager, String> {
    use p4sec_switch::tm::{Setting, TrafficManager};
    let tm = TrafficManager::new(ports, q.priority_queues).map_err(|e| e.to_string())?;
    // settings for every port first, then those of one port
    let mut settings = vec![];
    for d in &q.depth {
        let (p, v) = port_value::<usize>("--queue-depth", d, "a number of packets")?;
        settings.push((p, Setting::Depth(v), format!("--queue-depth {d}")));
    }
    for r in &q.rate {
        let (p, v) = port_value::<f64>("--queue-rate", r, "a rate in packets per second")?;
        settings.push((p, Setting::Rate(v), format!("--queue-rate {r}")));
    }
    settings.sort_by_key(|(p, _, _)| p.is_some());
    for (p, s, flag) in settings {
        tm.set(p, s).map_err(|e| format!("{flag}: {e}"))?;
    }
    Ok(tm)
}

#[allow(clippy::too_many_arguments)]
fn run_switch(
    program: Option<&Path>,
    grpc: Option<&str>,
    device_id: u64,
    port_specs: &[String],
    cpu_port: Option<u32>,
    workers: usize,
    metrics: Option<&str>,
    trace: bool,
    capture: Option<(&Path, p4sec_switch::CaptureNames)>,
    bmv2_log: Option<p4sec_switch::bmv2log::Options>,
    log: &str,
    tls: Option<p4sec_p4runtime::server::TlsFiles>,
    queue_opts: &QueueOpts,
    translate: p4sec_p4runtime::translate::Maps,
) -> ExitCode {
    use p4sec_p4runtime::Device;
    use p4sec_switch::{log::Level, p4log};
    match log.parse::<Level>() {
        Ok(l) => p4sec_switch::log::set_level(l),
        Err(e) => {
            eprintln!("p4sec switch: {e}");
            return ExitCode::from(2);
        }
    }
    let grpc_given = grpc.is_some();
    let grpc = grpc.unwrap_or("0.0.0.0:9559");
    if let Err(e) = p4sec_p4runtime::listen::resolve(grpc, "--grpc") {
        eprintln!("p4sec switch: {e}");
        return ExitCode::from(2);
    }
    // `--port 1 veth1` (a space for the `=`): the interface would be read as the program file
    if let Some(n) = port_specs.iter().find(|p| !p.contains('=')) {
        let after = program
            .filter(|p| !p.exists())
            .map(|p| format!(" (and `{}` was read as the program file)", p.display()))
            .unwrap_or_default();
        eprintln!(
            "p4sec switch: --port takes N=PORT in one word, e.g. --port {n}=veth1 or \
             --port {n}=tap:p4tap0; got `--port {n}`{after}"
        );
        return ExitCode::from(2);
    }
    // the switch's extern set, assembled once: the device builds every pipeline with it (this
    // program and those SetForwardingPipelineConfig installs); test externs are not in it (`p4sec
    // stf` only)
    let device = Device::new(device_id, cpu_port, p4sec_externs::p4::registry());
    *device
        .translate_maps
        .write()
        .unwrap_or_else(|p| p.into_inner()) = translate;
    if let Some(path) = program {
        let bytes = match std::fs::read(&path) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("p4sec switch: cannot read {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        };
        match device.build_pipeline(bytes, None, 0) {
            Ok(pl) => {
                *device.pipeline.write().unwrap_or_else(|p| p.into_inner()) =
                    Some(std::sync::Arc::new(pl))
            }
            Err(e) => {
                eprintln!("p4sec switch: {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        }
    }
    let mut ports = vec![];
    for spec in port_specs {
        match p4sec_switch::PortSpec::parse(spec) {
            Ok(p) => ports.push(p),
            Err(e) => {
                eprintln!("p4sec switch: {e}");
                return ExitCode::from(2);
            }
        }
    }
    if let Err(e) = p4sec_switch::check_ports(&ports, cpu_port, capture) {
        eprintln!("p4sec switch: {e}");
        return ExitCode::from(2);
    }
    if workers == 0 || workers > 64 {
        eprintln!("p4sec switch: --workers must be 1..64, got {workers}");
        return ExitCode::from(2);
    }
    let numbers: Vec<u32> = ports.iter().map(|p| p.number).collect();
    let tm = match traffic_manager(&numbers, queue_opts) {
        Ok(t) => std::sync::Arc::new(t),
        Err(e) => {
            eprintln!("p4sec switch: {e}");
            return ExitCode::from(2);
        }
    };
    p4sec_switch::install_signal_handlers();
    let (mut port_stats, mut worker_stats) = (vec![], vec![]);
    let mut switch = None;
    if !ports.is_empty() || cpu_port.is_some() {
        let cfg = p4sec_switch::Config {
            ports,
            workers,
            trace,
            pcap_dir: capture.map(|(d, _)| d.to_path_buf()),
            pcap_names: capture.map(|(_, n)| n).unwrap_or_default(),
            bmv2_log,
            tm: Some(tm.clone()),
        };
        match p4sec_switch::start(device.clone(), &cfg) {
            Ok(s) => {
                port_stats = s.stats.clone();
                worker_stats = s.workers.clone();
                switch = Some(s);
            }
            Err(e) => {
                eprintln!("p4sec switch: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let batch = switch.as_ref().map(|s| s.is_batch()).unwrap_or(false);
    let stop_switch = |s: Option<p4sec_switch::Switch>| {
        if let Some(s) = s {
            s.shutdown();
        }
    };
    if let Some(m) = metrics {
        let addr = match p4sec_p4runtime::listen::resolve(m, "--metrics") {
            Ok(a) => a,
            Err(e) => {
                eprintln!("p4sec switch: {e}");
                stop_switch(switch);
                return ExitCode::from(2);
            }
        };
        if let Err(e) = p4sec_switch::metrics::serve(
            addr,
            device.clone(),
            port_stats,
            worker_stats,
            Some(tm.clone()),
        ) {
            eprintln!("p4sec switch: {e}");
            stop_switch(switch);
            return ExitCode::FAILURE;
        }
    }
    if let Some((port, asked)) = queue_opts.control_port {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        match p4sec_switch::control::serve(addr, tm.clone()) {
            Ok(at) => p4log!(
                Level::Info,
                "control endpoint (p4sec switch-cli, simple_switch_CLI) on {at}"
            ),
            // (the switch forwards all the same: another switch may hold BMv2's default port)
            Err(e) if asked => p4log!(
                Level::Warn,
                "{e}; run-time queue commands are not available"
            ),
            Err(e) => p4log!(
                Level::Warn,
                "{e}; run-time queue commands are not available (give --thrift-port PORT)"
            ),
        }
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("p4sec switch: {e}");
            stop_switch(switch);
            return ExitCode::FAILURE;
        }
    };
    // A batch run (pcap inputs only) with its program given needs no P4Runtime server unless asked
    // for.
    let mut server = if batch && program.is_some() && !grpc_given {
        p4log!(
            Level::Info,
            "batch run: no P4Runtime server (give --grpc ADDR for one)"
        );
        None
    } else {
        // bound (and TLS read) before saying so: a port in use or a bad certificate is named
        match p4sec_p4runtime::listen::listen(grpc, "--grpc", tls) {
            Ok(l) => {
                let at = l.local_addr();
                p4log!(Level::Info, "P4Runtime (device {device_id}) on {at}");
                Some(rt.spawn(p4sec_p4runtime::server::serve_on(l, device)))
            }
            Err(e) => {
                eprintln!("p4sec switch: {e}");
                stop_switch(switch);
                return ExitCode::FAILURE;
            }
        }
    };
    // Until the server fails, a batch run is done or SIGINT/SIGTERM arrives; then the ports are
    // closed cleanly (pcap files flushed, TUN/TAP devices removed).
    let code = loop {
        if server.as_ref().map(|h| h.is_finished()).unwrap_or(false) {
            let r = rt.block_on(server.take().unwrap());
            break match r {
                Ok(Ok(())) => ExitCode::SUCCESS,
                Ok(Err(e)) => {
                    eprintln!("p4sec switch: {e}");
                    ExitCode::FAILURE
                }
                Err(e) => {
                    eprintln!("p4sec switch: the P4Runtime server failed: {e}");
                    ExitCode::FAILURE
                }
            };
        }
        if let Some(s) = switch.as_ref().filter(|s| s.finished()) {
            let errors = s.pcap_errors();
            if errors > 0 {
                eprintln!("p4sec switch: the batch run had {errors} pcap read or write errors");
                break ExitCode::FAILURE;
            }
            break ExitCode::SUCCESS;
        }
        if p4sec_switch::signalled() {
            p4log!(Level::Info, "stopping (signal)");
            break ExitCode::SUCCESS;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    stop_switch(switch);
    rt.shutdown_timeout(std::time::Duration::from_millis(500));
    p4sec_switch::log::flush();
    code
}

fn main() -> ExitCode {
    // symlinks named simple_switch_grpc, simple_switch_CLI, p4c, ... run the subcommand they stand
    // for
    let args = bmv2::subcommand_args(std::env::args_os().collect());
    let as_bmv2 = args.get(1).is_some_and(|a| a == "simple_switch_grpc");
    let cli = Cli::parse_from(args);
    match cli.cmd {
        Cmd::Compile {
            program,
            out,
            include,
            define,
            p4runtime_files,
            p4runtime_file,
            p4runtime_format,
            as_p4c,
            ..
        } => {
            // (--target, --arch, --std, --p4v: their one accepted value is checked by the parser;
            // --emit-externs ignored)
            let mut infos = vec![];
            for f in p4runtime_files {
                match P4InfoFormat::of(&f) {
                    Some(fmt) => infos.push((f, fmt)),
                    None => {
                        eprintln!(
                            "p4sec compile: --p4runtime-files {}: unknown P4Info format (by extension: .txt, .txtpb or .pb.txt text; .json; .bin, .binpb or .pb binary)",
                            f.display()
                        );
                        return ExitCode::from(2);
                    }
                }
            }
            if let Some(f) = p4runtime_file {
                infos.push((f, P4InfoFormat::named(&p4runtime_format)));
            }
            let prog = match compile(&program, &include, &parse_defines(&define)) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("{e}");
                    return ExitCode::FAILURE;
                }
            };
            let out = out.unwrap_or_else(|| PathBuf::from("."));
            write_compiled(&prog, &program, &out, &infos, as_p4c)
        }
        Cmd::Stf {
            program,
            test,
            suite,
            report,
            notes,
            trace,
            include,
            define,
        } => {
            if let Some(dir) = suite {
                return stf_runner::run_suite(&dir, report.as_deref(), notes.as_deref());
            }
            match (program, test) {
                (Some(p), Some(t)) => {
                    stf_runner::run_one_cli(&p, &t, &include, &parse_defines(&define), trace)
                }
                _ => {
                    eprintln!("usage: p4sec stf PROGRAM.p4 TEST.stf | p4sec stf --suite DIR");
                    ExitCode::from(2)
                }
            }
        }
        Cmd::AsconServe => ascon_serve::run(),
        Cmd::SwitchCli {
            thrift_port,
            thrift_ip,
            json: _,
            pre: _,
        } => {
            let addr = if thrift_ip.contains(':') {
                format!("[{thrift_ip}]:{thrift_port}")
            } else {
                format!("{thrift_ip}:{thrift_port}")
            };
            let stdin = std::io::stdin();
            match p4sec_switch::control::client(
                &addr,
                stdin.lock(),
                &mut std::io::stdout(),
                &mut std::io::stderr(),
            ) {
                Ok(0) => ExitCode::SUCCESS,
                Ok(_) => ExitCode::FAILURE,
                Err(e) => {
                    eprintln!("p4sec switch-cli: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Cmd::Bench {
            routes,
            seconds,
            json,
        } => p4sec_bench::router::run(routes, seconds, json.as_deref()),
        Cmd::BenchEngines { seconds, json } => p4sec_bench::engines::run(seconds, json.as_deref()),
        Cmd::BenchHash { seconds, json } => p4sec_bench::hash::run(seconds, json.as_deref()),
        Cmd::BenchSad { sas, json } => p4sec_bench::sad::run(&sas, json.as_deref()),
        Cmd::BenchEsp { dir, size, packets } => {
            p4sec_bench::esp::run(&p4sec_bench::esp::Opts { dir, size, packets })
        }
        Cmd::BenchMixed {
            sizes,
            ks,
            tunnels,
            seconds,
            rounds,
            rekey_rate,
            grace_ms,
            json,
        } => p4sec_bench::mixed::run(
            &p4sec_bench::mixed::Opts {
                sizes,
                ks,
                tunnels,
                seconds,
                rounds,
                rekey_rate,
                grace_ms,
            },
            json.as_deref(),
        ),
        Cmd::BenchP4ead { seconds, json } => p4sec_bench::p4ead::run(seconds, json.as_deref()),
        Cmd::Switch {
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
        } => {
            let mut maps = p4sec_p4runtime::translate::Maps::new();
            for t in &translate {
                match p4sec_p4runtime::translate::read_map(t) {
                    Ok((k, m)) => drop(maps.insert(k, m)),
                    Err(e) => {
                        eprintln!("p4sec switch: --translate {t}: {e}");
                        return ExitCode::from(2);
                    }
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
                    Err(e) => {
                        eprintln!("p4sec switch: {e}");
                        return ExitCode::from(2);
                    }
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
                Err(e) => {
                    eprintln!("p4sec switch: {e}");
                    return ExitCode::from(2);
                }
            };
            let target = match bmv2::TargetOptions::parse(&target_options) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("p4sec switch: {e}");
                    return ExitCode::from(2);
                }
            };
            let grpc = match (grpc, target.grpc_server_addr) {
                (Some(_), Some(_)) => {
                    eprintln!("p4sec switch: --grpc and --grpc-server-addr both given: give one");
                    return ExitCode::from(2);
                }
                (a, b) => a.or(b),
            };
            let cpu_port = match (cpu_port, target.cpu_port) {
                (Some(_), Some(_)) => {
                    eprintln!(
                        "p4sec switch: --cpu-port given twice (before and after `--`): give one"
                    );
                    return ExitCode::from(2);
                }
                (a, b) => a.or(b),
            };
            let priority_queues = match (priority_queues, target.priority_queues) {
                (Some(_), Some(_)) => {
                    eprintln!("p4sec switch: --priority-queues given twice (before and after `--`): give one");
                    return ExitCode::from(2);
                }
                (a, b) => a.or(b).unwrap_or(1),
            };
            // the control endpoint: where asked for, and at BMv2's default port as
            // simple_switch_grpc
            let control_port = match thrift_port {
                Some(p) => Some((p, true)),
                None if as_bmv2 => Some((9090, false)),
                None => None,
            };
            let queue_opts = QueueOpts {
                depth: queue_depth,
                rate: queue_rate,
                priority_queues,
                control_port,
            };
            // --program OUTDIR (its program.json) or a program file; BMv2's log level `off` is
            // p4sec's quietest
            let program = program
                .map(|p| {
                    if p.is_dir() {
                        p.join("program.json")
                    } else {
                        p
                    }
                })
                .or(program_file);
            // BMv2 logs at trace level by default once a log is asked for; its `off` is p4sec's
            // quietest
            let log =
                log.unwrap_or_else(|| if plan.packet_log { "trace" } else { "info" }.to_string());
            let log = if log == "off" {
                "error".to_string()
            } else {
                log
            };
            let tls = match (tls, target.tls) {
                (Some(_), Some(_)) => {
                    eprintln!(
                        "p4sec switch: --tls-cert and --grpc-server-ssl both given: give one"
                    );
                    return ExitCode::from(2);
                }
                (a, b) => a.or(b),
            };
            if let Some(f) = &bmv2.log_file {
                if let Err(e) = p4sec_switch::log::set_file(f, bmv2.log_flush) {
                    eprintln!("p4sec switch: --log-file: {e}");
                    return ExitCode::FAILURE;
                }
            }
            if let Ok(l) = log.parse::<p4sec_switch::log::Level>() {
                p4sec_switch::log::set_level(l);
            }
            for n in plan.notes.iter().chain(&target.notes) {
                p4sec_switch::p4log!(p4sec_switch::log::Level::Info, "{n}");
            }
            if let Some(d) = plan.wait {
                std::thread::sleep(d);
            }
            let capture = match (pcap_dir, bmv2.pcap) {
                (Some(d), _) => Some((d, p4sec_switch::CaptureNames::PortNumber)),
                (None, Some(d)) => Some((d, p4sec_switch::CaptureNames::Interface)),
                (None, None) => None,
            };
            let bmv2_log = plan.packet_log.then_some(p4sec_switch::bmv2log::Options {
                dump_bytes: bmv2.dump_packet_data.unwrap_or(0),
            });
            run_switch(
                program.as_deref(),
                grpc.as_deref(),
                device_id,
                &ports,
                cpu_port,
                workers,
                metrics.as_deref(),
                trace,
                capture.as_ref().map(|(d, n)| (d.as_path(), *n)),
                bmv2_log,
                &log,
                tls,
                &queue_opts,
                maps,
            )
        }
    }
}
