//! `p4sec bench`: the IPv4 LPM router (programs/ipv4_router.p4) over 64-byte packets, in process,
//! on one core, on both engines (the closure engine and the native engine, which compiles the
//! program to machine code when it is loaded) beside a hand-written Rust implementation of the same
//! forwarding work, the three measured alternately in one run. Heap allocations during the measured
//! loops are counted by the CLI's counting global allocator
//! ([`p4sec_switch::alloc::CountingAlloc`]). With `--packets N` it runs exactly N packets on the
//! engine `--engine` picks instead, untimed ([`fixed`]).

use p4sec_engine::{Backend, Engine, Outputs, Worker};
use p4sec_ir::{ActionCall, FieldMatch, TableEntry, Value};
use std::collections::HashMap;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

/// Heap allocations of the calling thread so far (the CLI's global allocator counts them per
/// thread).
pub fn allocs() -> u64 {
    p4sec_switch::alloc::thread_allocations().unwrap_or(0)
}

const ROUTER: &str = include_str!("../../../programs/ipv4_router.p4");

fn lcg(s: &mut u64) -> u64 {
    *s = s
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *s >> 16
}

pub(crate) fn packet(dst: u32) -> Vec<u8> {
    let mut p = vec![0u8; 64];
    p[12] = 0x08;
    p[14] = 0x45;
    p[16..18].copy_from_slice(&(50u16).to_be_bytes());
    p[22] = 64;
    p[23] = 17;
    p[26..30].copy_from_slice(&[192, 168, 0, 1]);
    p[30..34].copy_from_slice(&dst.to_be_bytes());
    let c = p4sec_engine::hash::csum16(&p[14..34]);
    p[24..26].copy_from_slice(&c.to_be_bytes());
    p
}

/// The same router written directly in Rust: per-prefix-length hash maps, TTL, checksum.
pub(crate) struct Native {
    by_len: Vec<(u32, HashMap<u32, (u64, u64, u16)>)>,
}

impl Native {
    pub(crate) fn forward(&self, pkt: &mut [u8]) -> Option<u16> {
        if pkt.len() < 34
            || pkt[12] != 0x08
            || pkt[13] != 0
            || pkt[14] != 0x45
            || p4sec_engine::hash::csum16(&pkt[14..34]) != 0
            || pkt[22] <= 1
        {
            return None;
        }
        let dst = u32::from_be_bytes([pkt[30], pkt[31], pkt[32], pkt[33]]);
        for (len, m) in &self.by_len {
            let mask = if *len == 0 { 0 } else { u32::MAX << (32 - len) };
            if let Some(&(dmac, smac, port)) = m.get(&(dst & mask)) {
                pkt[0..6].copy_from_slice(&dmac.to_be_bytes()[2..]);
                pkt[6..12].copy_from_slice(&smac.to_be_bytes()[2..]);
                pkt[22] -= 1;
                pkt[24] = 0;
                pkt[25] = 0;
                let c = p4sec_engine::hash::csum16(&pkt[14..34]);
                pkt[24..26].copy_from_slice(&c.to_be_bytes());
                return Some(port);
            }
        }
        None
    }
}

/// The router program loaded on `backend` with `routes` routes, the packets towards them, and the
/// same routes in the hand-written router. The same `routes` give the same routes and packets.
pub(crate) struct Setup {
    pub engine: Engine,
    pub pkts: Vec<Vec<u8>>,
    pub native: Native,
    /// Seconds the routes took to install.
    pub insert_s: f64,
}

pub(crate) fn setup(routes: u32, backend: Backend) -> Result<Setup, String> {
    let prog = p4sec_frontend::compile_str("programs/ipv4_router.p4", ROUTER, &Default::default())
        .map_err(|e| e.to_string())?;
    let engine = Engine::with_backend(Arc::new(prog), &[], backend)?;
    let ti = engine
        .table_index("RouterIngress.ipv4_lpm")
        .ok_or("no table RouterIngress.ipv4_lpm")?;
    let set_nhop = engine
        .prog
        .actions
        .iter()
        .position(|a| a.name == "RouterIngress.set_nhop")
        .ok_or("no action RouterIngress.set_nhop")? as u32;
    // routes: prefix lengths 8..32 weighted towards /24, as in Internet tables
    let mut seed = 42u64;
    let mut installed = vec![];
    let mut native = Native { by_len: vec![] };
    let mut by_len: std::collections::BTreeMap<u32, HashMap<u32, (u64, u64, u16)>> =
        Default::default();
    let mut seen = std::collections::HashSet::new();
    let mut batch = vec![];
    let t0 = Instant::now();
    while installed.len() < routes as usize {
        let r = lcg(&mut seed);
        let len = match r % 10 {
            0 => 16,
            1 => 20,
            2 | 3 => 22,
            9 => 32,
            _ => 24,
        } as u32;
        let prefix = ((lcg(&mut seed) as u32) | 0x0100_0000) & (u32::MAX << (32 - len));
        let port = (lcg(&mut seed) % 8) as u16 + 1;
        let entry = TableEntry {
            matches: vec![FieldMatch::Lpm {
                value: Value::new(32, prefix as u64),
                prefix_len: len,
            }],
            action: ActionCall {
                action: set_nhop,
                args: vec![
                    Value::new(48, 0x0200_0000_0000 | port as u64),
                    Value::new(48, 0x0200_0000_00ff),
                    Value::new(9, port as u64),
                ],
            },
            priority: 0,
        };
        if seen.insert((prefix, len)) {
            installed.push((prefix, len));
            by_len.entry(len).or_default().insert(
                prefix,
                (0x0200_0000_0000 | port as u64, 0x0200_0000_00ff, port),
            );
            batch.push(entry);
        }
        // published in batches of 1000, as a controller's P4Runtime Write requests would carry them
        if batch.len() == 1000 || installed.len() == routes as usize {
            let b = std::mem::take(&mut batch);
            for e in &b {
                p4sec_engine::tables::validate_entry(&engine.prog, &engine.prog.tables[ti], e)
                    .map_err(|err| format!("bad route: {err}"))?;
            }
            engine
                .table_insert_batch(ti, b)
                .map_err(|err| format!("installing routes failed: {err}"))?;
        }
    }
    let insert_s = t0.elapsed().as_secs_f64();
    native.by_len = by_len.into_iter().rev().collect();
    // packets towards installed routes
    let pkts: Vec<Vec<u8>> = (0..4096)
        .map(|_| {
            let (p, len) = installed[(lcg(&mut seed) as usize) % installed.len()];
            let host = if len >= 32 {
                0
            } else {
                (lcg(&mut seed) as u32) & (u32::MAX >> len)
            };
            packet(p | host)
        })
        .collect();
    Ok(Setup {
        engine,
        pkts,
        native,
        insert_s,
    })
}

/// Packets `engine` forwards exactly as the hand-written router does (port and bytes), of `pkts`.
fn agreeing(engine: &Engine, native: &Native, pkts: &[Vec<u8>]) -> usize {
    let mut w = Worker::new(engine);
    let mut out = Outputs::default();
    let mut agree = 0;
    for p in pkts {
        out.clear();
        engine.process(&mut w, 0, p, &mut out);
        let mut q = p.clone();
        let n = native.forward(&mut q);
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

pub fn run(routes: u32, seconds: f64, json: Option<&Path>) -> ExitCode {
    match run_inner(routes, seconds, json) {
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
pub fn fixed(routes: u32, packets: u32) -> ExitCode {
    match fixed_inner(routes, packets) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("p4sec bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn fixed_inner(routes: u32, packets: u32) -> Result<(), String> {
    if routes == 0 || packets == 0 {
        return Err("--routes and --packets take at least 1".into());
    }
    let backend = Backend::from_env()?;
    let s = setup(routes, backend)?;
    let mut w = Worker::new(&s.engine);
    let mut out = Outputs::default();
    let mut q = vec![0u8; 64];
    let (mut forwarded, mut agree, mut h) = (0u64, 0u64, 0xcbf2_9ce4_8422_2325u64);
    for p in s.pkts.iter().cycle().take(packets as usize) {
        out.clear();
        s.engine.process(&mut w, 0, p, &mut out);
        q.copy_from_slice(p);
        let want = s.native.forward(&mut q);
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
        "p4sec bench: IPv4 LPM router (programs/ipv4_router.p4), {routes} routes, on the {backend} \
         engine: packets {packets}, forwarded {forwarded}, agree with the hand-written router \
         {agree}/{packets}, digest {h:016x}"
    );
    Ok(())
}

/// Installs timed per engine for the route insert rates.
const INSTALLS: usize = 5;

/// Routes installed per second into a fresh engine of each backend (closure, native): medians of
/// [`INSTALLS`] installs each (`first`'s among them), the two alternated. The closure engine's
/// LPM index keeps no hit maps: its writes are the table writes as they were before native code.
fn install_rates(routes: u32, first: [&Setup; 2]) -> Result<[f64; 2], String> {
    let mut s = first.map(|f| vec![f.insert_s]);
    for _ in 1..INSTALLS {
        for (k, b) in [Backend::Closure, Backend::Native].into_iter().enumerate() {
            s[k].push(setup(routes, b)?.insert_s);
        }
    }
    Ok(s.map(|mut v| routes as f64 / median(&mut v)))
}

fn run_inner(routes: u32, seconds: f64, json: Option<&Path>) -> Result<(), String> {
    let closure = setup(routes, Backend::Closure)?;
    let native_engine = setup(routes, Backend::Native)?;
    let [insert_closure, insert_native] = install_rates(routes, [&closure, &native_engine])?;
    let pkts = &closure.pkts;
    let native = &closure.native;
    // the engines must forward every packet as the hand-written router does
    let agree_closure = agreeing(&closure.engine, native, pkts);
    let agree_native = agreeing(&native_engine.engine, native, pkts);
    let mut wc = Worker::new(&closure.engine);
    let mut wn = Worker::new(&native_engine.engine);
    let mut out = Outputs::default();
    let mut buf = vec![0u8; 64];
    // warm up: the workers' table snapshots and the output buffer
    for p in pkts {
        out.clear();
        closure.engine.process(&mut wc, 0, p, &mut out);
        out.clear();
        native_engine.engine.process(&mut wn, 0, p, &mut out);
    }
    // rounds of the three, alternated, so that a change in the machine's load hits all alike
    const ROUNDS: usize = 5;
    let slice = seconds / (3 * ROUNDS) as f64;
    let mut pps = [vec![], vec![], vec![]];
    let mut allocs_of = [0u64; 2];
    let mut pkts_of = [0u64; 2];
    for _ in 0..ROUNDS {
        for (k, f) in pps.iter_mut().enumerate() {
            let start = Instant::now();
            let a0 = allocs();
            let mut n = 0u64;
            while start.elapsed().as_secs_f64() < slice {
                for p in pkts {
                    match k {
                        0 => {
                            out.clear();
                            closure.engine.process(&mut wc, 0, p, &mut out);
                        }
                        1 => {
                            out.clear();
                            native_engine.engine.process(&mut wn, 0, p, &mut out);
                        }
                        _ => {
                            buf.copy_from_slice(p);
                            std::hint::black_box(native.forward(&mut buf));
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
    let [mut c, mut j, mut r] = pps;
    let (closure_pps, jit_pps, native_pps) = (median(&mut c), median(&mut j), median(&mut r));
    let per = |k: usize| allocs_of[k] as f64 / pkts_of[k].max(1) as f64;
    println!("p4sec bench: IPv4 LPM router (programs/ipv4_router.p4), {routes} routes, 64-byte packets, 1 core");
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
            "benchmark": "ipv4_router_64B",
            "routes": routes,
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
