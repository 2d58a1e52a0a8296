//! `p4sec bench-p4ead`: P4EAD — ASCON-AEAD computed in plain P4 with recirculation
//! (programs/p4ead_service.p4 with programs/lib/p4ead.p4, 1 to 4 rounds per pass) versus one extern
//! call per request (-D P4EAD_EXTERN), in process on one core: throughput (requests per second,
//! back to back) and latency (one request handed to the engine until its reply is out,
//! recirculations included), beside the P4EAD paper's Tofino figures.
//!
//! Requests follow the paper's methodology: ASCON-128 v1.2, encryption, 4 bytes of associated data,
//! 8 to 32 bytes of data. Every build's reply is checked before it is measured: status, pass count
//! (the paper's formula) and ciphertext + tag equal to the extern build's (which is checked against
//! RustCrypto's ASCON).

use p4sec_engine::{Engine, Outputs, Worker};
use p4sec_externs::ascon::{self, Variant};
use p4sec_ir::{ActionCall, FieldMatch, TableEntry, Value};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

const PROGRAM: &str = include_str!("../../../programs/p4ead_service.p4");
/// The library the program includes; spliced in so the binary does not depend on the source tree at
/// run time.
const LIB: &str = include_str!("../../../programs/lib/p4ead.p4");
const LIB_INCLUDE: &str = "#include \"lib/p4ead.p4\"";

const LENGTHS: [usize; 4] = [8, 16, 24, 32];
const AD_LEN: usize = 4;
const KEY: u128 = 0x000102030405060708090a0b0c0d0e0f;
const KEY_ID: u32 = 7;
const IN_PORT: u32 = 1;
const ETHERTYPE: u16 = 0x88b5;
const OP_ENCRYPT: u8 = 0;
const VARIANT_V12: u8 = 1;
const ST_DONE: u8 = 1;
const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 2];
/// The target: the extern at least this many times as fast as the plain-P4 version.
const TARGET_RATIO: f64 = 20.0;
/// Latency samples kept per (build, length) at most.
const MAX_SAMPLES: usize = 1_000_000;

/// Byte offsets in a request / reply (Ethernet header, then p4ead_req_t, then the AD and data
/// blocks).
const OFF_STATUS: usize = 16;
const OFF_RPP: usize = 19;
const OFF_PASSES: usize = 20;
const OFF_TAG: usize = 42;
const OFF_AD: usize = 58;

/// The builds: name and rounds per pass (`None`: the extern build).
const BUILDS: [(&str, Option<u32>); 5] = [
    ("rpp1", Some(1)),
    ("rpp2", Some(2)),
    ("rpp3", Some(3)),
    ("rpp4", Some(4)),
    ("extern", None),
];

/// The paper's figures where it gives them: (platform, Mpps, latency in microseconds).
fn paper(rpp: Option<u32>, len: usize) -> Option<(&'static str, f64, f64)> {
    match (rpp, len) {
        (Some(1), 8) => Some(("Tofino2", 10.0, 25.6)),
        (Some(4), 8) => Some(("Tofino2", 40.0, 8.5)),
        (Some(1), 32) => Some(("Tofino", 1.5, 34.9)),
        _ => None,
    }
}

fn blocks(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// Pipeline passes of a request: the paper's formula R = 12 + 6 (q/8 + 1) + 6 floor(p/8) + 12
/// rounds (ASCON-128 v1.2, AD not empty), in passes of `rpp` rounds; one pass for the extern.
fn passes_expected(len: usize, rpp: Option<u32>) -> u16 {
    match rpp {
        None => 1,
        Some(r) => {
            let rounds = 12 + 6 * (AD_LEN / 8 + 1) + 6 * (len / 8) + 12;
            rounds.div_ceil(r as usize) as u16
        }
    }
}

fn nonce() -> [u8; 16] {
    std::array::from_fn(|i| (0xa0 + i) as u8)
}
fn ad() -> Vec<u8> {
    (0..AD_LEN).map(|i| (0x30 + i) as u8).collect()
}
fn data(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 13 + 5) as u8).collect()
}

/// An encryption request (ASCON-128 v1.2) from MAC_A to MAC_B; the layout of tests/inband/kat.py
/// `request`.
fn request(len: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(OFF_AD + blocks(AD_LEN) + blocks(len));
    f.extend_from_slice(&MAC_B);
    f.extend_from_slice(&MAC_A);
    f.extend_from_slice(&ETHERTYPE.to_be_bytes());
    f.extend_from_slice(&[OP_ENCRYPT, VARIANT_V12, 0, AD_LEN as u8, len as u8, 0]);
    f.extend_from_slice(&0u16.to_be_bytes());
    f.extend_from_slice(&KEY_ID.to_be_bytes());
    f.extend_from_slice(&nonce());
    f.extend_from_slice(&[0u8; 16]);
    let mut a = ad();
    a.resize(blocks(AD_LEN), 0);
    f.extend_from_slice(&a);
    let mut d = data(len);
    d.resize(blocks(len), 0);
    f.extend_from_slice(&d);
    f
}

fn off_data() -> usize {
    OFF_AD + blocks(AD_LEN)
}

struct Pipeline {
    engine: Engine,
    w: Worker,
    out: Outputs,
}

impl Pipeline {
    /// One request through the engine (recirculations included); the reply, if exactly one frame
    /// came out of the ingress port.
    fn serve(&mut self, req: &[u8]) -> Result<Vec<u8>, String> {
        self.out.clear();
        self.engine
            .process(&mut self.w, IN_PORT, req, &mut self.out);
        let frames: Vec<(u32, &[u8])> = self.out.iter().collect();
        match frames.as_slice() {
            [(port, r)] if *port == IN_PORT => Ok(r.to_vec()),
            [(port, _)] => Err(format!(
                "the reply left on port {port}, not the ingress port {IN_PORT}"
            )),
            [] => Err("no reply (the request was dropped or hit the pass limit)".into()),
            f => Err(format!("{} frames came out for one request", f.len())),
        }
    }

    /// One request, as fast as possible: true if exactly one reply with status "done" came out.
    #[inline]
    fn serve_fast(&mut self, req: &[u8]) -> bool {
        self.out.clear();
        self.engine
            .process(&mut self.w, IN_PORT, req, &mut self.out);
        self.out.len() == 1
            && self
                .out
                .iter()
                .next()
                .is_some_and(|(_, r)| r.get(OFF_STATUS) == Some(&ST_DONE))
    }
}

fn source() -> Result<String, String> {
    if !PROGRAM.contains(LIB_INCLUDE) {
        return Err(format!(
            "programs/p4ead_service.p4 no longer contains `{LIB_INCLUDE}`"
        ));
    }
    Ok(PROGRAM.replacen(LIB_INCLUDE, LIB, 1))
}

fn pipeline(src: &str, build: &str, rpp: Option<u32>) -> Result<Pipeline, String> {
    let mut opts = p4sec_frontend::CompileOptions::default();
    match rpp {
        Some(r) => opts.defines.push(("P4EAD_RPP".into(), Some(r.to_string()))),
        None => opts.defines.push(("P4EAD_EXTERN".into(), None)),
    }
    let prog = p4sec_frontend::compile_str("programs/p4ead_service.p4", src, &opts)
        .map_err(|e| format!("build {build}: {e}"))?;
    let engine = Engine::new(Arc::new(prog), &p4sec_externs::p4::registry())
        .map_err(|e| format!("build {build}: {e}"))?;
    let ti = engine
        .table_index("SvcIngress.p4ead_keys")
        .ok_or("table SvcIngress.p4ead_keys missing")?;
    let set_key = engine
        .prog
        .actions
        .iter()
        .position(|a| a.name == "SvcIngress.set_key")
        .ok_or("action SvcIngress.set_key missing")? as u32;
    let entry = TableEntry {
        matches: vec![FieldMatch::Exact(Value::new(32, KEY_ID as u64))],
        action: ActionCall {
            action: set_key,
            args: vec![Value {
                width: 128,
                words: vec![KEY as u64, (KEY >> 64) as u64],
            }],
        },
        priority: 0,
    };
    engine
        .table_insert(ti, entry)
        .map_err(|e| format!("build {build}: installing the key: {e}"))?;
    let w = Worker::new(&engine);
    Ok(Pipeline {
        engine,
        w,
        out: Outputs::default(),
    })
}

/// The reply a build must give: the request with the MACs swapped, status done, rpp and passes set,
/// the data replaced by `ct` and the tag by `tag`.
fn expected_reply(req: &[u8], len: usize, rpp: Option<u32>, ct: &[u8], tag: &[u8]) -> Vec<u8> {
    let mut r = req.to_vec();
    r[0..6].copy_from_slice(&MAC_A);
    r[6..12].copy_from_slice(&MAC_B);
    r[OFF_STATUS] = ST_DONE;
    r[OFF_RPP] = rpp.unwrap_or(0) as u8;
    r[OFF_PASSES..OFF_PASSES + 2].copy_from_slice(&passes_expected(len, rpp).to_be_bytes());
    r[OFF_TAG..OFF_TAG + 16].copy_from_slice(tag);
    r[off_data()..off_data() + len].copy_from_slice(ct);
    r
}

/// Check one reply of `build` against the expected one; say what differs.
fn check_reply(
    build: &str,
    len: usize,
    rpp: Option<u32>,
    got: &[u8],
    want: &[u8],
    what: &str,
) -> Result<(), String> {
    if got == want {
        return Ok(());
    }
    let ctx = format!("build {build}, {len}-byte data");
    if got.len() != want.len() {
        return Err(format!(
            "{ctx}: reply of {} bytes, expected {}",
            got.len(),
            want.len()
        ));
    }
    if got[OFF_STATUS] != ST_DONE {
        return Err(format!(
            "{ctx}: reply status {} (expected 1, done)",
            got[OFF_STATUS]
        ));
    }
    let passes = u16::from_be_bytes([got[OFF_PASSES], got[OFF_PASSES + 1]]);
    if passes != passes_expected(len, rpp) {
        return Err(format!(
            "{ctx}: {passes} passes, the formula gives {}",
            passes_expected(len, rpp)
        ));
    }
    let (d, t) = (off_data(), OFF_TAG);
    if got[d..d + len] != want[d..d + len] || got[t..t + 16] != want[t..t + 16] {
        return Err(format!(
            "{ctx}: ciphertext+tag {:02x?}+{:02x?} differ from {what} {:02x?}+{:02x?}",
            &got[d..d + len],
            &got[t..t + 16],
            &want[d..d + len],
            &want[t..t + 16]
        ));
    }
    Err(format!(
        "{ctx}: reply {:02x?} differs from the expected {:02x?}",
        got, want
    ))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Requests completed per second, back to back: the median of 5 runs of `secs / 5`.
fn throughput(p: &mut Pipeline, req: &[u8], secs: f64) -> Result<f64, String> {
    for _ in 0..16 {
        p.serve_fast(req);
    }
    let per = secs / 5.0;
    let mut runs = vec![];
    for _ in 0..5 {
        let start = Instant::now();
        let (mut done, mut bad) = (0u64, 0u64);
        loop {
            for _ in 0..8 {
                if p.serve_fast(req) {
                    done += 1;
                } else {
                    bad += 1;
                }
            }
            if start.elapsed().as_secs_f64() >= per {
                break;
            }
        }
        let dt = start.elapsed().as_secs_f64();
        if bad > 0 {
            return Err(format!(
                "{bad} of {} requests got no correct reply while measuring",
                done + bad
            ));
        }
        runs.push(done as f64 / dt);
    }
    Ok(median(&mut runs))
}

/// Latency of single requests (handed to the engine until the reply is out), in microseconds:
/// median, p99 and the number of samples. At least 100 samples, then as many as fit in `secs`.
fn latency(p: &mut Pipeline, req: &[u8], secs: f64) -> Result<(f64, f64, usize), String> {
    let budget = Duration::from_secs_f64(secs);
    let mut ns: Vec<u64> = Vec::with_capacity(4096);
    let start = Instant::now();
    while ns.len() < MAX_SAMPLES && (ns.len() < 100 || start.elapsed() < budget) {
        p.out.clear();
        let t = Instant::now();
        p.engine.process(&mut p.w, IN_PORT, req, &mut p.out);
        let d = t.elapsed();
        if p.out.len() != 1 || p.out.iter().next().map(|(_, r)| r[OFF_STATUS]) != Some(ST_DONE) {
            return Err("a request got no correct reply while measuring latency".into());
        }
        ns.push(d.as_nanos() as u64);
    }
    ns.sort_unstable();
    let n = ns.len();
    let med = if n % 2 == 1 {
        ns[n / 2] as f64
    } else {
        (ns[n / 2 - 1] + ns[n / 2]) as f64 / 2.0
    };
    let p99 = ns[((n * 99).div_ceil(100)).max(1) - 1] as f64;
    Ok((med / 1e3, p99 / 1e3, n))
}

fn fmt_rate(pps: f64) -> String {
    if pps >= 1e6 {
        format!("{:.2} Mpps", pps / 1e6)
    } else {
        format!("{:.1} kpps", pps / 1e3)
    }
}

struct Row {
    build: &'static str,
    rpp: Option<u32>,
    len: usize,
    passes: u16,
    pps: f64,
    lat_med: f64,
    lat_p99: f64,
    samples: usize,
}

pub fn run(seconds: f64, json: Option<&Path>) -> ExitCode {
    if !seconds.is_finite() || seconds <= 0.0 || seconds > 3600.0 {
        eprintln!("p4sec bench-p4ead: --seconds must be a positive number of seconds, at most 3600 (got {seconds})");
        return ExitCode::from(2);
    }
    if let Some(path) = json {
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if !dir.is_dir() {
            eprintln!(
                "p4sec bench-p4ead: --json {}: directory {} does not exist",
                path.display(),
                dir.display()
            );
            return ExitCode::from(2);
        }
    }
    match run_inner(seconds, json) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("p4sec bench-p4ead: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_inner(seconds: f64, json: Option<&Path>) -> Result<(), String> {
    let src = source()?;
    let mut pipes = vec![];
    for (name, rpp) in BUILDS {
        pipes.push((name, rpp, pipeline(&src, name, rpp)?));
    }
    let key = KEY.to_be_bytes();
    let mut rows: Vec<Row> = vec![];
    for len in LENGTHS {
        let req = request(len);
        // the extern build first: its reply must equal ASCON-128 v1.2 computed directly ...
        let mut ct = data(len);
        let tag = ascon::encrypt(Variant::V12, &key, &nonce(), &ad(), &mut ct)
            .map_err(|e| format!("ASCON: {e:?}"))?;
        let ext = pipes
            .iter_mut()
            .find(|p| p.1.is_none())
            .map(|p| &mut p.2)
            .ok_or("no extern build")?;
        let got = ext
            .serve(&req)
            .map_err(|e| format!("build extern, {len}-byte data: {e}"))?;
        check_reply(
            "extern",
            len,
            None,
            &got,
            &expected_reply(&req, len, None, &ct, &tag),
            "ASCON-128 v1.2 computed directly",
        )?;
        // ... and every plain-P4 build's ciphertext + tag must equal the extern's
        let (ext_ct, ext_tag) = (
            got[off_data()..off_data() + len].to_vec(),
            got[OFF_TAG..OFF_TAG + 16].to_vec(),
        );
        for (name, rpp, p) in pipes.iter_mut() {
            let got = p
                .serve(&req)
                .map_err(|e| format!("build {name}, {len}-byte data: {e}"))?;
            check_reply(
                name,
                len,
                *rpp,
                &got,
                &expected_reply(&req, len, *rpp, &ext_ct, &ext_tag),
                "the extern build's",
            )?;
            let pps = throughput(p, &req, seconds)
                .map_err(|e| format!("build {name}, {len}-byte data: {e}"))?;
            let (lat_med, lat_p99, samples) = latency(p, &req, seconds)
                .map_err(|e| format!("build {name}, {len}-byte data: {e}"))?;
            rows.push(Row {
                build: name,
                rpp: *rpp,
                len,
                passes: passes_expected(len, *rpp),
                pps,
                lat_med,
                lat_p99,
                samples,
            });
        }
    }

    println!("p4sec bench-p4ead: P4EAD, ASCON-128 v1.2 encryption in the pipeline (programs/p4ead_service.p4), {AD_LEN}-byte AD,");
    println!("one core, in process; plain P4 with 1-4 rounds per pass (recirculating) versus one extern call per request");
    println!("(every reply checked first: status, passes = ceil((30 + 6 len/8) / rpp), ciphertext+tag = the extern's = RustCrypto's)");
    println!();
    println!(
        "  {:>4}  {:<7}{:>7}{:>13}{:>11}{:>11}{:>9}   | paper: {:<9}{:>11}{:>10}",
        "len",
        "build",
        "passes",
        "throughput",
        "lat med",
        "lat p99",
        "samples",
        "platform",
        "throughput",
        "latency"
    );
    for r in &rows {
        let (plat, ppps, plat_us) = match paper(r.rpp, r.len) {
            Some((p, m, l)) => (p.to_string(), fmt_rate(m * 1e6), format!("{l:.1} us")),
            None => ("-".into(), "-".into(), "-".into()),
        };
        println!(
            "  {:>4}  {:<7}{:>7}{:>13}{:>8.2} us{:>8.2} us{:>9}   |        {:<9}{:>11}{:>10}",
            r.len,
            r.build,
            r.passes,
            fmt_rate(r.pps),
            r.lat_med,
            r.lat_p99,
            r.samples,
            plat,
            ppps,
            plat_us
        );
    }
    println!();
    println!("Extern speed-up over plain P4 (throughput ratio); target: extern >= {TARGET_RATIO:.0}x the plain-P4 version");
    println!(
        "  {:>4}{:>10}{:>10}{:>10}{:>10}   {:<14}target rpp4",
        "len", "vs rpp1", "vs rpp2", "vs rpp3", "vs rpp4", "target rpp1"
    );
    let mut ratios = vec![];
    for len in LENGTHS {
        let pps_of = |b: &str| {
            rows.iter()
                .find(|r| r.len == len && r.build == b)
                .map(|r| r.pps)
                .unwrap_or(f64::NAN)
        };
        let ext = pps_of("extern");
        let over: Vec<(&str, f64)> = ["rpp1", "rpp2", "rpp3", "rpp4"]
            .iter()
            .map(|b| (*b, ext / pps_of(b)))
            .collect();
        let (r1, r4) = (over[0].1, over[3].1);
        let verdict = |x: f64| if x >= TARGET_RATIO { "PASS" } else { "MISS" };
        print!("  {len:>4}");
        for (_, x) in &over {
            print!("{:>9.1}x", x);
        }
        let t1 = format!("{} ({r1:.1}x)", verdict(r1));
        println!("   {t1:<14}{} ({r4:.1}x)", verdict(r4));
        ratios.push(serde_json::json!({
            "length": len,
            "extern_over": over.iter().map(|(b, x)| (b.to_string(), serde_json::json!(x))).collect::<serde_json::Map<_, _>>(),
            "target_vs_rpp1": r1 >= TARGET_RATIO,
            "target_vs_rpp4": r4 >= TARGET_RATIO,
        }));
    }

    if let Some(path) = json {
        let j = serde_json::json!({
            "benchmark": "p4ead",
            "variant": "ascon128_v1.2",
            "operation": "encrypt",
            "ad_length": AD_LEN,
            "lengths": LENGTHS,
            "seconds": seconds,
            "rows": rows.iter().map(|r| {
                let paper = paper(r.rpp, r.len);
                serde_json::json!({
                    "build": r.build,
                    "rpp": r.rpp.unwrap_or(0),
                    "length": r.len,
                    "passes": r.passes,
                    "pps": r.pps,
                    "latency_us_median": r.lat_med,
                    "latency_us_p99": r.lat_p99,
                    "latency_samples": r.samples,
                    "paper_platform": paper.map(|p| p.0),
                    "paper_pps": paper.map(|p| p.1 * 1e6),
                    "paper_latency_us": paper.map(|p| p.2),
                })
            }).collect::<Vec<_>>(),
            "target_ratio": TARGET_RATIO,
            "ratios": ratios,
        });
        std::fs::write(path, serde_json::to_string_pretty(&j).unwrap())
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}
