//! `p4sec bench-engines`: the per-packet cost of the P4 part of the security pipelines on both
//! engines — the closure engine (the reference) and the native engine (the program compiled to
//! machine code when it is loaded) — in process, on one core, measured alternately in one run.
//!
//! Pipelines: the IPsec gateway (programs/ipsec_gateway.p4) encapsulating and decapsulating with a
//! NULL-cipher SA, so that the figure is the P4 part and the ESP framing and not the cipher, and
//! with AES-GCM-128 for reference; the URL filter's single-pass program
//! (programs/url_filter_fast.p4) on HTTP, DNS and other traffic that passes; the keyed Bloom filter
//! (programs/keyed_bloom.p4: SipHash-2-4 flow hashes and register reads and writes), learning and
//! checking flows; whole-frame keyed hashing (programs/hash_frames.p4 with SipHash-2-4, the
//! hashing paper's Table III workload) over 64-byte frames. Before it measures, every pipeline's
//! outputs (ports and bytes) on the two engines are compared packet by packet: a difference fails
//! the run.
//!
//! With `--pipeline NAME --packets N` it runs exactly N frames of one pipeline through
//! `Engine::process` on the engine the global `--engine` flag picks, untimed, and prints the
//! frames emitted and their digest: the run `python -m bench.instructions` counts instructions in
//! under callgrind.

use crate::esp::{esp_frames, gateway_with, plain, sa_with, LAN, WAN};
use crate::router::{allocs, median};
use crate::setup::act as action;
use p4sec_engine::{Backend, Engine, Outputs, Worker};
use p4sec_externs::esp::{Cipher, Sa};
use p4sec_ir::{ActionCall, FieldMatch, TableEntry, Value};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

const URL_FILTER: &str = include_str!("../../../programs/url_filter_fast.p4");
const KEYED_BLOOM: &str = include_str!("../../../programs/keyed_bloom.p4");

/// One pipeline to measure: its engines' builder and the frames (ingress port, bytes) it runs.
struct Workload {
    name: &'static str,
    what: String,
    build: Box<dyn Fn(Backend) -> Result<Engine, String>>,
    frames: Vec<(u32, Vec<u8>)>,
}

/// Figures of one workload.
struct Figures {
    ns: [f64; 2],
    allocs: [u64; 2],
    packets: [u64; 2],
}

/// The pipelines, by the names `--pipeline` takes, in the order they are measured.
pub const PIPELINES: &[&str] = &[
    "esp-enc-null",
    "esp-dec-null",
    "esp-enc-aes-gcm",
    "esp-dec-aes-gcm",
    "url-filter",
    "keyed-bloom",
    "hash-frames",
];

/// Options of one run: every pipeline timed on both engines (`pipeline` and `packets` unset),
/// one pipeline timed on both engines (`pipeline`), or exactly `packets` frames of one pipeline
/// through the engine [`Backend::from_env`] picks (both), with no timing.
pub struct Opts<'a> {
    pub seconds: f64,
    pub json: Option<&'a Path>,
    /// One of [`PIPELINES`].
    pub pipeline: Option<&'a str>,
    pub packets: Option<u32>,
}

pub fn run(o: &Opts) -> ExitCode {
    let r = match (o.pipeline, o.packets) {
        (Some(name), Some(n)) => fixed(name, n),
        (None, Some(_)) => Err("--packets needs --pipeline (the pipeline to run)".into()),
        (only, None) => run_inner(o.seconds, o.json, only),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("p4sec bench-engines: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The workload of the pipeline called `name` (one of [`PIPELINES`]).
fn workload(name: &str) -> Result<Workload, String> {
    match name {
        "esp-enc-null" => gateway("esp-enc-null", "enc", Cipher::Null),
        "esp-dec-null" => gateway("esp-dec-null", "dec", Cipher::Null),
        "esp-enc-aes-gcm" => gateway("esp-enc-aes-gcm", "enc", Cipher::AesGcm128),
        "esp-dec-aes-gcm" => gateway("esp-dec-aes-gcm", "dec", Cipher::AesGcm128),
        "url-filter" => url_filter(),
        "keyed-bloom" => keyed_bloom(),
        "hash-frames" => hash_frames(),
        _ => Err(format!(
            "--pipeline is one of {}, not `{name}`",
            PIPELINES.join(", ")
        )),
    }
}

/// Exactly `packets` frames of the pipeline `name` (its frames in turn, from the first) through
/// `Engine::process` on the engine the environment picks, once each, untimed: under callgrind
/// the calls of `Engine::process` are the packets. Prints the frames emitted and a digest of them
/// (ports and bytes), the same on both engines.
fn fixed(name: &str, packets: u32) -> Result<(), String> {
    if packets == 0 {
        return Err("--packets at least 1".into());
    }
    let wl = workload(name)?;
    let backend = Backend::from_env()?;
    let e = (wl.build)(backend)?;
    let mut w = Worker::new(&e);
    let mut out = Outputs::default();
    let (mut emitted, mut h) = (0u64, 0xcbf2_9ce4_8422_2325u64);
    for (port, f) in wl.frames.iter().cycle().take(packets as usize) {
        out.clear();
        e.process(&mut w, *port, f, &mut out);
        for (p, b) in out.iter() {
            emitted += 1;
            crate::setup::digest(&mut h, p, b);
        }
    }
    println!(
        "p4sec bench-engines: {} on the {backend} engine: packets {packets}, frames out {emitted}, \
         digest {h:016x}",
        wl.name
    );
    Ok(())
}

fn run_inner(seconds: f64, json: Option<&Path>, only: Option<&str>) -> Result<(), String> {
    if !(seconds > 0.0 && seconds.is_finite()) {
        return Err(format!("--seconds must be above 0, not {seconds}"));
    }
    let names = match only {
        Some(name) => vec![name],
        None => PIPELINES.to_vec(),
    };
    let workloads = names
        .into_iter()
        .map(workload)
        .collect::<Result<Vec<_>, _>>()?;
    println!("p4sec bench-engines: the P4 part of each pipeline on the closure engine and the native engine,");
    println!("in process, one core; medians of rounds alternated between the engines ({seconds} s per pipeline)");
    println!(
        "  {:<18} {:>14} {:>14} {:>9}  what",
        "pipeline", "closure ns/pkt", "native ns/pkt", "speed-up"
    );
    let mut rows = vec![];
    for wl in &workloads {
        let f = measure(wl, seconds)?;
        println!(
            "  {:<18} {:>14.1} {:>14.1} {:>8.2}x  {}",
            wl.name,
            f.ns[0],
            f.ns[1],
            f.ns[0] / f.ns[1],
            wl.what
        );
        rows.push((wl.name, f));
    }
    let allocs: u64 = rows.iter().map(|(_, f)| f.allocs[0] + f.allocs[1]).sum();
    println!("  heap allocations in the measured loops of both engines: {allocs}");
    if rows.iter().any(|(name, _)| name.starts_with("esp-")) {
        println!(
            "  (NULL cipher: the ESP framing without the cipher; the AES-GCM rows include it)"
        );
    }
    if let Some(path) = json {
        let j: Vec<_> = rows
            .iter()
            .map(|(name, f)| {
                serde_json::json!({
                    "pipeline": name,
                    "closure_ns_per_packet": f.ns[0],
                    "native_ns_per_packet": f.ns[1],
                    "speedup": f.ns[0] / f.ns[1],
                    "closure_allocs": f.allocs[0],
                    "native_allocs": f.allocs[1],
                    "closure_packets": f.packets[0],
                    "native_packets": f.packets[1],
                })
            })
            .collect();
        let j = serde_json::json!({"benchmark": "engines", "pipelines": j});
        std::fs::write(path, serde_json::to_string_pretty(&j).unwrap_or_default())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Checks that both engines emit the same frames for `wl`'s frames, then times them alternately.
fn measure(wl: &Workload, seconds: f64) -> Result<Figures, String> {
    let engines = [(wl.build)(Backend::Closure)?, (wl.build)(Backend::Native)?];
    let mut workers: Vec<Worker> = engines.iter().map(Worker::new).collect();
    let mut outs = [Outputs::default(), Outputs::default()];
    for (i, (port, f)) in wl.frames.iter().enumerate() {
        for k in 0..2 {
            outs[k].clear();
            engines[k].process(&mut workers[k], *port, f, &mut outs[k]);
        }
        let a: Vec<_> = outs[0].iter().collect();
        let b: Vec<_> = outs[1].iter().collect();
        if a != b {
            return Err(format!(
                "{}: frame {i} (port {port}): the closure engine emits {} frames {:?}, the native engine {} frames {:?}",
                wl.name,
                a.len(),
                a.iter().map(|(p, b)| (p, b.len())).collect::<Vec<_>>(),
                b.len(),
                b.iter().map(|(p, b)| (p, b.len())).collect::<Vec<_>>()
            ));
        }
        if a.is_empty() && i == 0 {
            return Err(format!("{}: the first frame is dropped", wl.name));
        }
    }
    const ROUNDS: usize = 7;
    let slice = seconds / (2 * ROUNDS) as f64;
    let mut ns = [vec![], vec![]];
    let mut allocs_of = [0u64; 2];
    let mut packets = [0u64; 2];
    for _ in 0..ROUNDS {
        for k in 0..2 {
            let (e, w, out) = (&engines[k], &mut workers[k], &mut outs[k]);
            let a0 = allocs();
            let start = Instant::now();
            let mut n = 0u64;
            while start.elapsed().as_secs_f64() < slice {
                for (port, f) in &wl.frames {
                    out.clear();
                    e.process(w, *port, f, out);
                }
                n += wl.frames.len() as u64;
            }
            let dt = start.elapsed().as_secs_f64();
            allocs_of[k] += allocs() - a0;
            packets[k] += n;
            ns[k].push(dt * 1e9 / n as f64);
        }
    }
    let [mut c, mut n] = ns;
    Ok(Figures {
        ns: [median(&mut c), median(&mut n)],
        allocs: allocs_of,
        packets,
    })
}

/// The gateway encapsulating (`enc`: plain frames into the LAN port) or decapsulating (`dec`: ESP
/// frames into the WAN port) 64-byte IP packets with an SA of `cipher`.
fn gateway(name: &'static str, dir: &'static str, cipher: Cipher) -> Result<Workload, String> {
    // no anti-replay window: the same ESP frames are decapsulated round after round
    let sa = sa_with(cipher, 0);
    let peer = Sa::new(sa.clone()).map_err(|e| format!("{e:?}"))?;
    let plains: Vec<Vec<u8>> = (0..256).map(|i| plain(64, i)).collect();
    let frames = if dir == "enc" {
        plains.into_iter().map(|p| (LAN, p)).collect()
    } else {
        esp_frames(&peer, &plains)?
            .into_iter()
            .map(|f| (WAN, f))
            .collect()
    };
    let what = format!(
        "programs/ipsec_gateway.p4, {} {}, 64-byte IP packets",
        cipher.name(),
        if dir == "enc" {
            "encapsulation"
        } else {
            "decapsulation"
        }
    );
    Ok(Workload {
        name,
        what,
        build: Box::new(move |b| gateway_with(dir, &sa, b)),
        frames,
    })
}

fn compile(name: &str, source: &str) -> Result<p4sec_ir::Program, String> {
    // p4sec.p4 is one of the front end's built-in includes
    p4sec_frontend::compile_str(name, source, &Default::default()).map_err(|e| e.to_string())
}

fn exact_entry(port: u32, action: u32, args: Vec<Value>) -> TableEntry {
    TableEntry {
        matches: vec![FieldMatch::Exact(Value::new(9, port as u64))],
        action: ActionCall { action, args },
        priority: 0,
    }
}

/// Ethernet + IPv4 (10.0.0.1 -> 10.0.0.2, or the reverse) + the L4 header and payload `l4`.
fn ip_frame(proto: u8, reverse: bool, l4: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    let total = 20 + l4.len();
    let (a, b) = ([10, 0, 0, 1], [10, 0, 0, 2]);
    let (s, d) = if reverse { (b, a) } else { (a, b) };
    let mut h = vec![0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, proto, 0, 0];
    h[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    h.extend_from_slice(&s);
    h.extend_from_slice(&d);
    let c = p4sec_engine::hash::csum16(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&h);
    f.extend_from_slice(l4);
    f
}

fn tcp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut t = vec![0u8; 20];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&dport.to_be_bytes());
    t[12] = 0x50;
    t[13] = 0x18;
    t.extend_from_slice(payload);
    t
}

fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut u = vec![0u8; 8];
    u[0..2].copy_from_slice(&sport.to_be_bytes());
    u[2..4].copy_from_slice(&dport.to_be_bytes());
    u[4..6].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    u.extend_from_slice(payload);
    u
}

/// The URL filter with a blocklist automaton that matches nothing, so that every frame passes: an
/// HTTP request, a TLS record start, a DNS query and SSH traffic (not inspected), in turn.
fn url_filter() -> Result<Workload, String> {
    let prog = Arc::new(compile("programs/url_filter_fast.p4", URL_FILTER)?);
    let build = move |b: Backend| -> Result<Engine, String> {
        let e = Engine::with_backend(prog.clone(), &p4sec_externs::p4::registry(), b)?;
        let ti = e
            .table_index("UfIngress.uf_port")
            .ok_or("no table uf_port")?;
        let fwd = action(&e, "UfIngress.forward")?;
        e.table_insert(ti, exact_entry(1, fwd, vec![Value::new(9, 2)]))?;
        // two modes (HTTP/TLS, DNS), two classes, no accepting state reachable
        let map = vec![0u8; 256];
        let automaton = serde_json::json!({"states": 2, "classes": 2, "end_class": 1,
            "modes": [[map, 0], [map, 0]], "transitions": [], "accept": [1]});
        e.extern_control(
            "UfIngress.blocklist",
            "load",
            automaton.to_string().as_bytes(),
        )?;
        Ok(e)
    };
    let http = b"GET /index.html HTTP/1.1\r\nHost: www.example.org\r\n\r\n";
    let dns = [
        0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 3, b'w', b'w', b'w', 7, b'e', b'x', b'a', b'm',
        b'p', b'l', b'e', 3, b'o', b'r', b'g', 0, 0, 1, 0, 1,
    ];
    let tls = [0x16, 3, 1, 0, 0x30, 1, 0, 0, 0x2c, 3, 3];
    let frames = (0..64u16)
        .flat_map(|i| {
            [
                (1, ip_frame(6, false, &tcp(40000 + i, 80, http))),
                (1, ip_frame(6, false, &tcp(40000 + i, 443, &tls))),
                (1, ip_frame(17, false, &udp(30000 + i, 53, &dns))),
                (1, ip_frame(6, false, &tcp(40000 + i, 22, &[0u8; 32]))),
            ]
        })
        .collect();
    Ok(Workload {
        name: "url-filter",
        what: "programs/url_filter_fast.p4: HTTP, TLS, DNS (inspected, pass), SSH".into(),
        build: Box::new(build),
        frames,
    })
}

/// The keyed Bloom filter: flows learned on port 1, their return traffic checked on port 2.
fn keyed_bloom() -> Result<Workload, String> {
    let prog = Arc::new(compile("programs/keyed_bloom.p4", KEYED_BLOOM)?);
    let build = move |b: Backend| -> Result<Engine, String> {
        let e = Engine::with_backend(prog.clone(), &p4sec_externs::p4::registry(), b)?;
        let ti = e
            .table_index("KbIngress.kb_port")
            .ok_or("no table kb_port")?;
        let key = Value {
            width: 128,
            words: vec![0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908],
        };
        let learn = action(&e, "KbIngress.learn")?;
        let check = action(&e, "KbIngress.check")?;
        e.table_insert(
            ti,
            exact_entry(1, learn, vec![Value::new(9, 2), key.clone()]),
        )?;
        e.table_insert(
            ti,
            exact_entry(
                2,
                check,
                vec![Value::new(9, 1), key, Value::new(32, u32::MAX as u64)],
            ),
        )?;
        Ok(e)
    };
    let frames = (0..128u16)
        .flat_map(|i| {
            [
                (1, ip_frame(6, false, &tcp(40000 + i, 443, &[0u8; 6]))),
                (2, ip_frame(6, true, &tcp(443, 40000 + i, &[0u8; 6]))),
            ]
        })
        .collect();
    Ok(Workload {
        name: "keyed-bloom",
        what: "programs/keyed_bloom.p4: SipHash-2-4 flow hash, Bloom filter, count-min sketch"
            .into(),
        build: Box::new(build),
        frames,
    })
}

/// Whole-frame keyed hashing: programs/hash_frames.p4 with SipHash-2-4 over 64-byte frames (60
/// bytes in the pipeline, the FCS stripped), as `p4sec bench-hash` loads it, the digest written
/// into the source MAC.
fn hash_frames() -> Result<Workload, String> {
    let alg = p4sec_externs::hash::HashAlg::SipHash24;
    let frames = (0..64u8)
        .map(|i| {
            let mut f = crate::hash::frame(64);
            f[14] = i;
            (0, f)
        })
        .collect();
    Ok(Workload {
        name: "hash-frames",
        what: "programs/hash_frames.p4: SipHash-2-4 over the whole 64-byte frame".into(),
        build: Box::new(move |b| crate::hash::engine_with(Some(alg), b)),
        frames,
    })
}
