//! `p4sec bench`: the IPv4 LPM router (programs/ipv4_router.p4; with `--vrfs N` the VRF router,
//! with `--ipv6` the IPv6 router) over 64-byte packets, in process,
//! on one core, on both engines (the closure engine and the native engine, which compiles the
//! program to machine code when it is loaded) beside a hand-written Rust implementation of the same
//! forwarding work, the three measured alternately in one run. Heap allocations during the measured
//! loops are counted by the CLI's counting global allocator
//! ([`p4sec_switch::alloc::CountingAlloc`]). With `--packets N` it runs exactly N packets on the
//! engine `--engine` picks instead, untimed ([`fixed`]).

mod forwarding;
mod ipv6;

pub use forwarding::Router;
use forwarding::{Hand, Setup};

/// `routes` routes of `router` on `backend` (in the VRF router spread over its VRFs, VRF `v` on
/// port `v + 1`).
fn setup(routes: u32, router: Router, backend: Backend) -> Result<Setup, String> {
    match router {
        Router::Ipv4 => forwarding::setup_ipv4(routes, 0, backend),
        Router::Vrf(n) => forwarding::setup_ipv4(routes, n, backend),
        Router::Ipv6 => ipv6::setup(routes, backend),
    }
}
use p4sec_engine::{Backend, Engine, Outputs, Worker};
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

/// Heap allocations of the calling thread so far (the CLI's global allocator counts them per
/// thread).
pub fn allocs() -> u64 {
    p4sec_switch::alloc::thread_allocations().unwrap_or(0)
}

/// Packets `engine` forwards exactly as the hand-written router does (port and bytes), of `pkts`
/// arriving on `ports`.
fn agreeing(engine: &Engine, native: &Hand, pkts: &[Vec<u8>], ports: &[u32]) -> usize {
    let mut w = Worker::new(engine);
    let mut out = Outputs::default();
    let mut agree = 0;
    for (p, &port) in pkts.iter().zip(ports) {
        out.clear();
        engine.process(&mut w, port, p, &mut out);
        let mut q = p.clone();
        let n = native.forward(port, &mut q);
        let e = out.iter().next().map(|(port, b)| (port as u16, b.to_vec()));
        if out.len() <= 1 && n.map(|port| (port, q)) == e {
            agree += 1;
        }
    }
    agree
}

/// Median of `v` (not empty).
pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// `p4sec bench`: `routes` routes of `router` (in the VRF router, spread over its VRFs), timed
/// for `seconds`.
pub fn run(routes: u32, router: Router, seconds: f64, json: Option<&Path>) -> ExitCode {
    match run_inner(routes, router, seconds, json) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("p4sec bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `p4sec bench --packets N`: exactly `packets` of the router's packets (in turn, from the first)
/// through `Engine::process` on the engine the environment picks, untimed, for instruction counts
/// under callgrind; every output is compared with the hand-written router's. Prints the packets
/// forwarded, how many agree and a digest of the emitted frames (the same on both engines).
pub fn fixed(routes: u32, router: Router, packets: u32) -> ExitCode {
    match fixed_inner(routes, router, packets) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("p4sec bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn fixed_inner(routes: u32, router: Router, packets: u32) -> Result<(), String> {
    if routes == 0 || packets == 0 {
        return Err("--routes and --packets take at least 1".into());
    }
    let backend = Backend::from_env()?;
    let s = setup(routes, router, backend)?;
    let mut w = Worker::new(&s.engine);
    let mut out = Outputs::default();
    let mut q = vec![0u8; 64];
    let (mut forwarded, mut agree, mut h) = (0u64, 0u64, 0xcbf2_9ce4_8422_2325u64);
    let sent = s.pkts.iter().zip(&s.ports).cycle().take(packets as usize);
    for (p, &port) in sent {
        out.clear();
        s.engine.process(&mut w, port, p, &mut out);
        q.copy_from_slice(p);
        let want = s.native.forward(port, &mut q);
        let got = out.iter().next();
        for (port, b) in out.iter() {
            forwarded += 1;
            crate::setup::digest(&mut h, port, b);
        }
        if out.len() <= 1 && want.map(|port| (port as u32, &q[..])) == got {
            agree += 1;
        }
    }
    println!(
        "p4sec bench: {} LPM router ({}), {routes} routes{}, on the {backend} engine: packets \
         {packets}, forwarded {forwarded}, agree with the hand-written router {agree}/{packets}, \
         digest {h:016x}",
        family(router),
        router.program_name(),
        in_vrfs(router)
    );
    Ok(())
}

/// Installs timed per engine for the route insert rates.
const INSTALLS: usize = 5;

/// Routes installed per second into a fresh engine of each backend (closure, native): medians of
/// [`INSTALLS`] installs each (`first`'s among them), the two alternated. The closure engine's
/// LPM index keeps no hit maps: its writes are the table writes as they were before native code.
fn install_rates(routes: u32, router: Router, first: [&Setup; 2]) -> Result<[f64; 2], String> {
    let mut s = first.map(|f| vec![f.insert_s]);
    for _ in 1..INSTALLS {
        for (k, b) in [Backend::Closure, Backend::Native].into_iter().enumerate() {
            s[k].push(setup(routes, router, b)?.insert_s);
        }
    }
    Ok(s.map(|mut v| routes as f64 / median(&mut v)))
}

/// `, in N VRFs` when there are VRFs.
fn in_vrfs(router: Router) -> String {
    match router.vrfs() {
        0 => String::new(),
        n => format!(" in {n} VRFs"),
    }
}

/// The address family `router` routes.
fn family(router: Router) -> &'static str {
    match router {
        Router::Ipv6 => "IPv6",
        _ => "IPv4",
    }
}

/// Rounds of the closure engine, the native engine and the hand-written router in turn over
/// `pkts` (arriving on `ports`), `slice` seconds each: the packets per second of each round, and
/// the heap allocations and packets of the engines' rounds.
type Rounds = ([Vec<f64>; 3], [u64; 2], [u64; 2]);

fn rounds(
    engines: [&Engine; 2],
    workers: [&mut Worker; 2],
    native: &Hand,
    pkts: &[Vec<u8>],
    ports: &[u32],
    slice: f64,
) -> Rounds {
    let [wc, wn] = workers;
    let mut out = Outputs::default();
    let mut buf = vec![0u8; 64];
    let mut pps = [vec![], vec![], vec![]];
    let mut allocs_of = [0u64; 2];
    let mut pkts_of = [0u64; 2];
    for _ in 0..ROUNDS {
        for (k, f) in pps.iter_mut().enumerate() {
            let start = Instant::now();
            let a0 = allocs();
            let mut n = 0u64;
            while start.elapsed().as_secs_f64() < slice {
                for (p, &port) in pkts.iter().zip(ports) {
                    match k {
                        0 => {
                            out.clear();
                            engines[0].process(wc, port, p, &mut out);
                        }
                        1 => {
                            out.clear();
                            engines[1].process(wn, port, p, &mut out);
                        }
                        _ => {
                            buf.copy_from_slice(p);
                            std::hint::black_box(native.forward(port, &mut buf));
                        }
                    }
                }
                n += pkts.len() as u64;
            }
            let dt = start.elapsed().as_secs_f64();
            if k < 2 {
                allocs_of[k] += allocs() - a0;
                pkts_of[k] += n;
            }
            f.push(n as f64 / dt);
        }
    }
    (pps, allocs_of, pkts_of)
}

/// Rounds of the three, alternated, so that a change in the machine's load hits all alike.
const ROUNDS: usize = 5;

fn run_inner(routes: u32, router: Router, seconds: f64, json: Option<&Path>) -> Result<(), String> {
    let closure = setup(routes, router, Backend::Closure)?;
    let native_engine = setup(routes, router, Backend::Native)?;
    let [insert_closure, insert_native] =
        install_rates(routes, router, [&closure, &native_engine])?;
    let (pkts, ports) = (&closure.pkts, &closure.ports);
    let native = &closure.native;
    // the engines must forward every packet as the hand-written router does
    let agree_closure = agreeing(&closure.engine, native, pkts, ports);
    let agree_native = agreeing(&native_engine.engine, native, pkts, ports);
    let mut wc = Worker::new(&closure.engine);
    let mut wn = Worker::new(&native_engine.engine);
    let mut out = Outputs::default();
    // warm up: the workers' table snapshots and the output buffer
    for (p, &port) in pkts.iter().zip(ports) {
        out.clear();
        closure.engine.process(&mut wc, port, p, &mut out);
        out.clear();
        native_engine.engine.process(&mut wn, port, p, &mut out);
    }
    let slice = seconds / (3 * ROUNDS) as f64;
    let engines = [&closure.engine, &native_engine.engine];
    let (pps, allocs_of, pkts_of) = rounds(engines, [&mut wc, &mut wn], native, pkts, ports, slice);
    let [mut c, mut j, mut r] = pps;
    let (closure_pps, jit_pps, native_pps) = (median(&mut c), median(&mut j), median(&mut r));
    let per = |k: usize| allocs_of[k] as f64 / pkts_of[k].max(1) as f64;
    println!(
        "p4sec bench: {} LPM router ({}), {routes} routes{}, 64-byte packets, 1 core",
        family(router),
        router.program_name(),
        in_vrfs(router)
    );
    println!(
        "  routes installed through the control-plane API in batches of 1000, medians of {INSTALLS} installs, alternated:"
    );
    println!(
        "  closure engine {insert_closure:.0} entries/s, native engine {insert_native:.0} entries/s \
         (native / closure {:.2}: its LPM index also keeps the hits native code reads)",
        insert_native / insert_closure
    );
    println!(
        "  agree with the hand-written router: closure engine {agree_closure}/{n}, native engine {agree_native}/{n} packets",
        n = pkts.len()
    );
    println!("  medians of {ROUNDS} rounds each, the three alternated:");
    println!(
        "  {:<40} {:>8.2} Mpps  {:>6.1} ns/packet",
        "p4sec closure engine",
        closure_pps / 1e6,
        1e9 / closure_pps
    );
    println!(
        "  {:<40} {:>8.2} Mpps  {:>6.1} ns/packet",
        "p4sec native engine (compiled at load)",
        jit_pps / 1e6,
        1e9 / jit_pps
    );
    println!(
        "  {:<40} {:>8.2} Mpps  {:>6.1} ns/packet",
        "hand-written Rust router (same work)",
        native_pps / 1e6,
        1e9 / native_pps
    );
    println!(
        "  closure engine / hand-written            {:>8.2}",
        closure_pps / native_pps
    );
    println!(
        "  native engine / hand-written             {:>8.2}",
        jit_pps / native_pps
    );
    println!(
        "  native engine / closure engine           {:>8.2}",
        jit_pps / closure_pps
    );
    println!(
        "  heap allocations per packet: closure {:.4} ({} in {} packets), native {:.4} ({} in {} packets)",
        per(0),
        allocs_of[0],
        pkts_of[0],
        per(1),
        allocs_of[1],
        pkts_of[1]
    );
    let met = |ok: bool| if ok { "met" } else { "NOT met" };
    println!(
        "  target: native engine >= 0.8 x hand-written with 0 allocations per packet: {}",
        met(jit_pps >= 0.8 * native_pps && allocs_of[1] == 0)
    );
    println!(
        "  target: >= 5 Mpps on one core with 0 allocations per packet (default engine, {}): {}",
        Backend::default(),
        met(default_pps(closure_pps, jit_pps) >= 5e6 && allocs_of[default_index()] == 0)
    );
    if let Some(path) = json {
        let j = serde_json::json!({
            "benchmark": match router {
                Router::Ipv4 => "ipv4_router_64B",
                Router::Vrf(_) => "ipv4_vrf_router_64B",
                Router::Ipv6 => "ipv6_router_64B",
            },
            "routes": routes,
            "vrfs": router.vrfs(),
            "default_engine": Backend::default().to_string(),
            "engine_pps": default_pps(closure_pps, jit_pps),
            "closure_pps": closure_pps,
            "jit_pps": jit_pps,
            "native_pps": native_pps,
            "engine_over_native": default_pps(closure_pps, jit_pps) / native_pps,
            "closure_over_native": closure_pps / native_pps,
            "jit_over_native": jit_pps / native_pps,
            "jit_over_closure": jit_pps / closure_pps,
            "allocs_per_packet": per(default_index()),
            "closure_allocs_per_packet": per(0),
            "jit_allocs_per_packet": per(1),
            "agree": agree_closure.min(agree_native),
            "packets_checked": pkts.len(),
            "route_insert_per_s": insert_closure,
            "route_insert_per_s_native": insert_native,
        });
        std::fs::write(path, serde_json::to_string_pretty(&j).unwrap_or_default())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Index of the default engine in the figures (0 closure, 1 native).
fn default_index() -> usize {
    match Backend::default() {
        Backend::Closure => 0,
        Backend::Native => 1,
    }
}

fn default_pps(closure: f64, jit: f64) -> f64 {
    [closure, jit][default_index()]
}
