//! `p4sec`: the one binary of the p4sec switch.
//!
//! Subcommands: `compile` (P4 → program + P4Info; also with the reference compiler's flags), `stf`
//! (run STF packet tests), `switch` (also as `simple_switch_grpc`, with BMv2's flags, or through a
//! symlink of that name), `switch-cli` (run-time queue commands to a running switch; also through a
//! symlink named `simple_switch_CLI`), the benchmarks. Run as `p4c` or `p4c-bm2-ss` (a symlink of
//! that name), it is the compiler with p4c's flags ([`bmv2`]).
//!
//! This file is the command line's outline: the subcommands and which module runs each; their flags
//! and what they do are in [`cmd`] (one module per command).

mod bmv2;
mod cmd;
mod stf_runner;

#[global_allocator]
static GLOBAL: p4sec_switch::alloc::CountingAlloc = p4sec_switch::alloc::CountingAlloc;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "p4sec",
    version,
    about = "A P4-programmable software switch with security in its data plane"
)]
struct Cli {
    /// The engine that runs P4 programs in this process: `native` (the default: each program
    /// compiled to machine code when it is loaded) or `closure` (the reference). Also taken from the
    /// environment variable P4SEC_ENGINE; the flag wins.
    #[arg(long, global = true, value_name = "ENGINE")]
    engine: Option<p4sec_engine::Backend>,
    #[command(subcommand)]
    cmd: Cmd,
}

// (parsed once per run: the size of its largest variant's flags costs nothing)
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Cmd {
    /// Compile a P4_16 v1model program: writes OUTDIR/program.json and its P4Info (p4info.txtpb,
    /// p4info.binpb). Takes the reference compiler's flags too (--target bmv2 --arch v1model --std
    /// p4-16 --p4runtime-files ... -o FILE.json), so a Makefile written for p4c works with P4C set
    /// to `p4sec compile`.
    Compile(cmd::compile::Args),
    /// Run STF packet tests: `p4sec stf PROGRAM.p4 TEST.stf` or `p4sec stf --suite DIR`.
    Stf(cmd::stf::Args),
    /// Run the switch: ports (Linux interfaces, TUN/TAP devices, pcap files) and a P4Runtime server
    /// (gRPC service p4.v1.P4Runtime). Also as `p4sec simple_switch_grpc` (or a symlink named
    /// simple_switch_grpc or simple_switch) with BMv2's command line: `[-i N@IFACE]... [--device-id
    /// N] [--log-console | --log-file F] [-L LEVEL] [--pcap DIR] [--no-p4 | PROGRAM.json] [--
    /// --grpc-server-addr ADDR --cpu-port N]` and BMv2's other options (docs/switch.md).
    #[command(alias = "simple_switch_grpc")]
    Switch(cmd::switch::Args),
    /// Send run-time commands to a running switch, one per line on stdin (as BMv2's
    /// simple_switch_CLI, also run as a program named simple_switch_CLI): set_queue_depth DEPTH
    /// [PORT], set_queue_rate RATE_PPS [PORT].
    #[command(name = "switch-cli")]
    SwitchCli(cmd::switch_cli::Args),
    /// ASCON-AEAD for control-plane tools: JSON requests on stdin, answers on stdout (used by
    /// p4sec.inband).
    AsconServe,
    /// Forwarding benchmark: the IPv4 LPM router over 64-byte packets, in process, one core.
    Bench(cmd::bench::RouterArgs),
    /// Engine benchmark: the P4 part of the IPsec gateway (NULL cipher and AES-GCM), the URL
    /// filter, the keyed Bloom filter and whole-frame SipHash on the closure engine and the native
    /// engine, alternated.
    BenchEngines(cmd::bench::EnginesArgs),
    /// SAD benchmark: ESP decapsulation through programs/ipsec_gateway.p4 with 1, 1,000 and 100,000
    /// SAs installed.
    BenchSad(cmd::bench::SadArgs),
    /// ESP benchmark: one tunnel through programs/ipsec_gateway.p4 in one direction (encapsulation
    /// or decapsulation), every output checked, with a digest of the emitted frames (for callgrind:
    /// instructions collected in `Engine::process` divided by the packets).
    BenchEsp(cmd::bench::EspArgs),
    /// Mixed traffic and re-keying benchmark (the IPsec gateway paper's Table 3): throughput with k
    /// of every 16 packets ESP to decrypt and the rest plain IP, without and with SAs renewed
    /// continuously, in the same run.
    BenchMixed(cmd::bench::MixedArgs),
    /// Hashing benchmark: Table III of the cryptographic hashing paper (whole-frame keyed hashing
    /// in the pipeline, percent of 10 GbE line rate) and the per-packet cost of each hash
    /// algorithm.
    BenchHash(cmd::bench::HashArgs),
    /// P4EAD benchmark: ASCON-AEAD in plain P4 with recirculation (1-4 rounds per pass) versus the
    /// extern, throughput and latency per request, beside the P4EAD paper's figures.
    BenchP4ead(cmd::bench::P4eadArgs),
}

fn main() -> ExitCode {
    // symlinks named simple_switch_grpc, simple_switch_CLI, p4c, ... run the subcommand they stand
    // for
    let args = bmv2::subcommand_args(std::env::args_os().collect());
    let as_bmv2 = args.get(1).is_some_and(|a| a == "simple_switch_grpc");
    let cli = Cli::parse_from(args);
    // every engine this process loads reads the choice from the environment (Backend::from_env),
    // set here before any thread starts
    match cli.engine {
        Some(b) => std::env::set_var(p4sec_engine::BACKEND_ENV, b.to_string()),
        None => {
            if let Err(e) = p4sec_engine::Backend::from_env() {
                eprintln!("p4sec: {e}");
                return ExitCode::from(2);
            }
        }
    }
    match cli.cmd {
        Cmd::Compile(a) => cmd::compile::run(a),
        Cmd::Stf(a) => cmd::stf::run(a),
        Cmd::Switch(a) => cmd::switch::run(a, as_bmv2),
        Cmd::SwitchCli(a) => cmd::switch_cli::run(a),
        Cmd::AsconServe => cmd::ascon_serve::run(),
        Cmd::Bench(a) => cmd::bench::router(a),
        Cmd::BenchEngines(a) => cmd::bench::engines(a),
        Cmd::BenchSad(a) => cmd::bench::sad(a),
        Cmd::BenchEsp(a) => cmd::bench::esp(a),
        Cmd::BenchMixed(a) => cmd::bench::mixed(a),
        Cmd::BenchHash(a) => cmd::bench::hash(a),
        Cmd::BenchP4ead(a) => cmd::bench::p4ead(a),
    }
}
