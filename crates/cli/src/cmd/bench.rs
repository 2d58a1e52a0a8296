//! The benchmark commands (`p4sec bench`, `bench-engines`, `bench-sad`, `bench-esp`, `bench-mixed`, `bench-hash`,
//! `bench-p4ead`): their flags, and the runs in `p4sec_bench` they start.

use std::path::PathBuf;
use std::process::ExitCode;

// `p4sec bench` (the forwarding benchmark; its description is on `Cmd::Bench`)
#[derive(clap::Args)]
pub struct RouterArgs {
    /// Number of routes in the LPM table.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub routes: u32,
    /// Route in VRFs: the VRF router (programs/ipv4_vrf_router.p4, its routes keyed by VRF and
    /// prefix) with the routes spread over N VRFs, a packet's VRF by the port it arrives on. 0:
    /// the plain router (programs/ipv4_router.p4).
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=510))]
    pub vrfs: u32,
    /// The IPv6 router (programs/ipv6_router.p4: 128-bit destinations, prefix lengths /32 to
    /// /128) instead of the IPv4 one.
    #[arg(long, conflicts_with = "vrfs")]
    pub ipv6: bool,
    /// Seconds to measure.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Write the figures as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Instead of timing: exactly N packets through the engine `--engine` picks, untimed (for
    /// instruction counts under callgrind).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..),
          conflicts_with_all = ["seconds", "json"])]
    pub packets: Option<u32>,
}

// `p4sec bench-engines`
#[derive(clap::Args)]
pub struct EnginesArgs {
    /// Seconds per pipeline (both engines).
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Write the figures as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Only this pipeline.
    #[arg(long, value_name = "NAME",
          value_parser = clap::builder::PossibleValuesParser::new(p4sec_bench::engines::PIPELINES))]
    pub pipeline: Option<String>,
    /// Instead of timing: exactly N packets of `--pipeline` through the engine `--engine` picks,
    /// untimed (for instruction counts under callgrind).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..),
          requires = "pipeline", conflicts_with_all = ["seconds", "json"])]
    pub packets: Option<u32>,
}

// `p4sec bench-sad`
#[derive(clap::Args)]
pub struct SadArgs {
    /// SAD sizes to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,1000,100000")]
    pub sas: Vec<u32>,
    /// Write the figures as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

// `p4sec bench-esp`
#[derive(clap::Args)]
pub struct EspArgs {
    /// The direction measured: enc (plain in on the LAN port, ESP out) or dec (ESP in, plain
    /// out).
    #[arg(long, default_value = "enc")]
    pub dir: String,
    /// Size of the plain IP packets (the hosts' MTU).
    #[arg(long, default_value_t = 1400)]
    pub size: usize,
    /// Packets to push through.
    #[arg(long, default_value_t = 20_000)]
    pub packets: u32,
    /// The SA's cipher: aes-gcm-128, or null (the pipeline and the ESP framing without a cipher).
    #[arg(long, default_value = "aes-gcm-128")]
    pub cipher: String,
}

// `p4sec bench-mixed`
#[derive(clap::Args)]
pub struct MixedArgs {
    /// Frame sizes (the plain and the decrypted frames; 64 to 1518), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "64,512,1500")]
    pub sizes: Vec<usize>,
    /// ESP packets per 16 (0 to 16), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0,1,2,4,8,10,12,16")]
    pub ks: Vec<u32>,
    /// Tunnels (SAs) the ESP packets are spread over.
    #[arg(long, default_value_t = 16)]
    pub tunnels: u32,
    /// Seconds of gateway time per measurement.
    #[arg(long, default_value_t = 0.5)]
    pub seconds: f64,
    /// Rounds per figure (each: one measurement without and one with re-keying); medians are
    /// reported.
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// SA renewals per second during re-keying (round robin over the tunnels).
    #[arg(long, default_value_t = 1000.0)]
    pub rekey_rate: f64,
    /// Milliseconds an old SAD-dec entry stays after its renewal (and until every packet made
    /// under it is through).
    #[arg(long, default_value_t = 10.0)]
    pub grace_ms: f64,
    /// Write the figures as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

// `p4sec bench-hash`
#[derive(clap::Args)]
pub struct HashArgs {
    /// Seconds to measure in total.
    #[arg(long, default_value_t = 8.0)]
    pub seconds: f64,
    /// Write the figures as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

// `p4sec bench-p4ead`
#[derive(clap::Args)]
pub struct P4eadArgs {
    /// Seconds per measurement group (throughput: median of 5 runs of S/5; latency: S).
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Write the figures as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

pub fn router(a: RouterArgs) -> ExitCode {
    let router = p4sec_bench::router::Router::of_flags(a.vrfs, a.ipv6);
    match a.packets {
        Some(n) => p4sec_bench::router::fixed(a.routes, router, n),
        None => p4sec_bench::router::run(a.routes, router, a.seconds, a.json.as_deref()),
    }
}

pub fn engines(a: EnginesArgs) -> ExitCode {
    p4sec_bench::engines::run(&p4sec_bench::engines::Opts {
        seconds: a.seconds,
        json: a.json.as_deref(),
        pipeline: a.pipeline.as_deref(),
        packets: a.packets,
    })
}

pub fn sad(a: SadArgs) -> ExitCode {
    p4sec_bench::sad::run(&a.sas, a.json.as_deref())
}

pub fn esp(a: EspArgs) -> ExitCode {
    p4sec_bench::esp::run(&p4sec_bench::esp::Opts {
        dir: a.dir,
        size: a.size,
        packets: a.packets,
        cipher: a.cipher,
    })
}

pub fn mixed(a: MixedArgs) -> ExitCode {
    p4sec_bench::mixed::run(
        &p4sec_bench::mixed::Opts {
            sizes: a.sizes,
            ks: a.ks,
            tunnels: a.tunnels,
            seconds: a.seconds,
            rounds: a.rounds,
            rekey_rate: a.rekey_rate,
            grace_ms: a.grace_ms,
        },
        a.json.as_deref(),
    )
}

pub fn hash(a: HashArgs) -> ExitCode {
    p4sec_bench::hash::run(a.seconds, a.json.as_deref())
}

pub fn p4ead(a: P4eadArgs) -> ExitCode {
    p4sec_bench::p4ead::run(a.seconds, a.json.as_deref())
}
