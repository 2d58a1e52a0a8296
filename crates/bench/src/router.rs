//! `p4sec bench`: the IPv4 LPM router (programs/ipv4_router.p4) over 64-byte packets, in process,
//! on one core, beside a native Rust implementation of the same forwarding work measured in the
//! same run. Heap allocations during the measured loop are counted by the CLI's counting global
//! allocator ([`p4sec_switch::alloc::CountingAlloc`]).

use p4sec_engine::{Engine, Outputs, Worker};
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

fn packet(dst: u32) -> Vec<u8> {
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
struct Native {
    by_len: Vec<(u32, HashMap<u32, (u64, u64, u16)>)>,
}

impl Native {
    fn forward(&self, pkt: &mut [u8]) -> Option<u16> {
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

pub fn run(routes: u32, seconds: f64, json: Option<&Path>) -> ExitCode {
    let prog =
        match p4sec_frontend::compile_str("programs/ipv4_router.p4", ROUTER, &Default::default()) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        };
    let engine = match Engine::new(Arc::new(prog), &[]) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let ti = engine
        .table_index("RouterIngress.ipv4_lpm")
        .expect("router table");
    let set_nhop = engine
        .prog
        .actions
        .iter()
        .position(|a| a.name == "RouterIngress.set_nhop")
        .expect("set_nhop") as u32;
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
                if let Err(err) =
                    p4sec_engine::tables::validate_entry(&engine.prog, &engine.prog.tables[ti], e)
                {
                    eprintln!("p4sec bench: bad route: {err}");
                    return ExitCode::FAILURE;
                }
            }
            if let Err(err) = engine.table_insert_batch(ti, b) {
                eprintln!("p4sec bench: installing routes failed: {err}");
                return ExitCode::FAILURE;
            }
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
    let mut w = Worker::new(&engine);
    let mut out = Outputs::default();
    // warm up, and check the engine forwards every packet the native router forwards
    let mut agree = 0;
    for p in &pkts {
        out.clear();
        engine.process(&mut w, 0, p, &mut out);
        let mut q = p.clone();
        let n = native.forward(&mut q);
        let e = out.iter().next().map(|(port, b)| (port as u16, b.to_vec()));
        if n.map(|port| (port, q)) == e {
            agree += 1;
        }
    }
    let measure = |f: &mut dyn FnMut(&[u8])| -> (f64, u64, u64) {
        let mut best: f64 = 0.0;
        let mut total_allocs = 0;
        let mut total_pkts = 0;
        for _ in 0..3 {
            let start = Instant::now();
            let a0 = allocs();
            let mut n = 0u64;
            while start.elapsed().as_secs_f64() < seconds / 3.0 {
                for p in &pkts {
                    f(p);
                }
                n += pkts.len() as u64;
            }
            let dt = start.elapsed().as_secs_f64();
            total_allocs += allocs() - a0;
            total_pkts += n;
            best = best.max(n as f64 / dt);
        }
        (best, total_allocs, total_pkts)
    };
    let (engine_pps, allocs, npkts) = measure(&mut |p: &[u8]| {
        out.clear();
        engine.process(&mut w, 0, p, &mut out);
    });
    let mut buf = vec![0u8; 64];
    let (native_pps, _, _) = measure(&mut |p: &[u8]| {
        buf.copy_from_slice(p);
        std::hint::black_box(native.forward(&mut buf));
    });
    let per_pkt_allocs = allocs as f64 / npkts as f64;
    println!("p4sec bench: IPv4 LPM router (programs/ipv4_router.p4), {routes} routes, 64-byte packets, 1 core");
    println!("  routes installed through the control-plane API in batches of 1000 in {:.1} ms ({:.0} entries/s)", insert_s * 1e3, routes as f64 / insert_s);
    println!(
        "  engine agrees with the native router on {agree}/{} packets",
        pkts.len()
    );
    println!(
        "  {:<34} {:>12.2} Mpps",
        "p4sec engine (P4 program)",
        engine_pps / 1e6
    );
    println!(
        "  {:<34} {:>12.2} Mpps",
        "native Rust router (same work)",
        native_pps / 1e6
    );
    println!(
        "  engine / native                    {:>12.2}",
        engine_pps / native_pps
    );
    println!(
        "  heap allocations per packet        {:>12.4}  ({allocs} in {npkts} packets)",
        per_pkt_allocs
    );
    println!(
        "  target: >= 5 Mpps on one core with 0 allocations per packet: {}",
        if engine_pps >= 5e6 && allocs == 0 {
            "met"
        } else {
            "NOT met"
        }
    );
    if let Some(path) = json {
        let j = serde_json::json!({
            "benchmark": "ipv4_router_64B",
            "routes": routes,
            "engine_pps": engine_pps,
            "native_pps": native_pps,
            "engine_over_native": engine_pps / native_pps,
            "allocs_per_packet": per_pkt_allocs,
            "agree": agree,
            "packets_checked": pkts.len(),
            "route_insert_per_s": routes as f64 / insert_s,
        });
        if let Err(e) = std::fs::write(path, serde_json::to_string_pretty(&j).unwrap()) {
            eprintln!("cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
