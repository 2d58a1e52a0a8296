//! `p4sec bench-mixed`: the gateway paper's Table 3 on programs/ipsec_gateway.p4: throughput of the
//! decrypting gateway with k of every 16 packets ESP (AES-GCM-128, to decrypt) and the rest plain
//! IP (BYPASS), and the same while SAs are renewed continuously through the control path the
//! controller uses, in the same run.
//!
//! Two engines in process: the peer gateway A encrypts (SPD protect, one SA per tunnel) and the
//! measured gateway B decrypts (SAD-dec + esp_sad) and forwards. The data thread makes a batch of
//! packets through A (not timed), then sends it through B (timed), checking every output: an ESP
//! packet must come out decrypted on the LAN port with its tunnel and sequence marker, a plain
//! packet forwarded as it is. A control thread renews the tunnels' SAs round robin at a stated
//! rate, in the controller's loss-free order: new SA + SAD-dec entry on B, SAD-enc swap on A (in
//! place, one atomic swap in the extern), and the old SAD-dec entry and SA removed from B after a
//! grace period, and only once every packet made under the old SA has been through B (the packets
//! "in flight").
//!
//! `gateways.rs` sets the two engines up, `traffic.rs` is the data thread, `rekey.rs` the control
//! thread; this file checks the options, alternates the runs with and without re-keying and writes
//! the report.

mod gateways;
mod rekey;
mod traffic;

use gateways::{setup_a, setup_b, PROGRAM, SLOTS};
use p4sec_engine::Engine;
use rekey::{Control, Shared};
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};
use traffic::{traffic, Tally, BATCH};

/// The gateway paper's Table 3 (Mbit/s, two 1 Gbit/s ports, 64-byte IP packets and 80-byte
/// AES-CBC+HMAC ESP): (a) by secured packets per 16, (b) by IP packets between the last packet of
/// the old SA and the first of the new.
const PAPER_A: [(u32, f64); 7] = [
    (1, 1999.8),
    (2, 1993.3),
    (4, 1981.2),
    (8, 1973.3),
    (10, 1928.2),
    (12, 1907.0),
    (16, 1823.9),
];
const PAPER_B: [(u32, f64); 7] = [
    (20, 1999.8),
    (16, 1985.2),
    (14, 1951.2),
    (8, 1920.7),
    (4, 1914.2),
    (2, 1871.0),
    (0, 1783.9),
];

pub struct Opts {
    pub sizes: Vec<usize>,
    pub ks: Vec<u32>,
    pub tunnels: u32,
    pub seconds: f64,
    pub rounds: u32,
    pub rekey_rate: f64,
    pub grace_ms: f64,
}

pub fn run(o: &Opts, json: Option<&Path>) -> ExitCode {
    match run_inner(o, json) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("p4sec bench-mixed: packets were lost (see above)");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("p4sec bench-mixed: {e}");
            ExitCode::FAILURE
        }
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

fn run_inner(o: &Opts, json: Option<&Path>) -> Result<bool, String> {
    if o.sizes.is_empty() || o.sizes.iter().any(|&s| !(64..=1518).contains(&s)) {
        return Err("--sizes takes frame sizes from 64 to 1518 bytes".into());
    }
    if o.ks.is_empty() || o.ks.iter().any(|&k| k > 16) {
        return Err("--ks takes ESP packets per 16 from 0 to 16".into());
    }
    if o.tunnels == 0 || o.tunnels > 256 {
        return Err("--tunnels takes 1 to 256".into());
    }
    if !(o.seconds > 0.0 && o.seconds <= 600.0) || o.rounds == 0 || o.rounds > 100 {
        return Err("--seconds takes (0, 600] and --rounds 1 to 100".into());
    }
    if !(o.rekey_rate > 0.0
        && o.rekey_rate <= 100_000.0
        && o.grace_ms >= 0.0
        && o.grace_ms <= 10_000.0)
    {
        return Err("--rekey-rate takes (0, 100000] renewals/s and --grace-ms [0, 10000]".into());
    }
    let mut opts = p4sec_frontend::CompileOptions::default();
    opts.defines
        .push(("SA_SLOTS".into(), Some(SLOTS.to_string())));
    let prog = Arc::new(
        p4sec_frontend::compile_str("programs/ipsec_gateway.p4", PROGRAM, &opts)
            .map_err(|e| e.to_string())?,
    );
    let a = Engine::new(prog.clone(), &p4sec_externs::p4::registry())?;
    let b = Engine::new(prog, &p4sec_externs::p4::registry())?;
    setup_a(&a, o.tunnels)?;
    setup_b(&b)?;
    let mut ctl = Control {
        free: (0..SLOTS).rev().collect(),
        live: vec![],
        next_spi: 0x1_0000,
        renewals: 0,
        retired: 0,
        no_slot: 0,
    };
    for t in 0..o.tunnels {
        let sa = ctl.install(&a, &b, t)?;
        ctl.live.push(sa);
    }
    let status = b
        .prog
        .counters
        .iter()
        .position(|c| c.name == "GwIngress.esp_status")
        .ok_or("no counter GwIngress.esp_status")?;
    let grace = Duration::from_secs_f64(o.grace_ms / 1000.0);
    let mut seq = vec![0u32; o.tunnels as usize];
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;

    println!("p4sec bench-mixed: programs/ipsec_gateway.p4 as the decrypting gateway, in process; k of every 16 packets ESP");
    println!("(AES-GCM-128, {} tunnels, to decrypt), the rest plain IP (BYPASS); every output checked. Re-keying: SAs renewed", o.tunnels);
    println!(
        "round robin at {:.0}/s (new SA + SAD-dec, SAD-enc swap, old SAD-dec removed after {} ms); {} rounds of {} s",
        o.rekey_rate, o.grace_ms, o.rounds, o.seconds
    );
    println!("of gateway time per figure, alternating without and with re-keying; medians. Size: the plain and decrypted frames");
    println!("(ESP on the wire is 54-57 bytes longer); Gbit/s: output frames.");
    println!(
        "  {:>5} {:>5} {:>8} {:>8} {:>11} {:>11} {:>6} {:>7} {:>8} {:>7} {:>9} {:>5} {:>14}",
        "size",
        "k/16",
        "kpps",
        "Gbit/s",
        "rekey kpps",
        "rekey Gb/s",
        "ratio",
        "cpu ns",
        "rekey ns",
        "ratio",
        "renewal/s",
        "lost",
        "paper (a) Mb/s"
    );
    let mut rows = vec![];
    let mut all_ok = true;
    let (mut esp_ok_total, c0) = (0u64, b.counter_read(status, 0)?.0);
    for &size in &o.sizes {
        // warm-up: caches, table snapshots
        let sh = Shared {
            started: AtomicU64::new(0),
            done: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        };
        let w = traffic(
            &a,
            &b,
            size,
            8,
            o.tunnels,
            (o.seconds / 5.0).min(0.2),
            &sh,
            &mut seq,
            &mut rng,
        )?;
        esp_ok_total += w.esp_ok;
        for &k in &o.ks {
            let (mut base, mut rekey) = (vec![], vec![]);
            let (mut tb, mut tr) = (Tally::default(), Tally::default());
            let (mut renewals, mut rekey_wall, mut no_slot) = (0u64, 0.0f64, 0u64);
            for _ in 0..o.rounds {
                for with_rekey in [false, true] {
                    let sh = Shared {
                        started: AtomicU64::new(0),
                        done: AtomicU64::new(0),
                        stop: AtomicBool::new(false),
                    };
                    let t0 = Instant::now();
                    let r0 = (ctl.renewals, ctl.no_slot);
                    let tally = if with_rekey {
                        std::thread::scope(|s| {
                            let c = s.spawn(|| ctl.run(&a, &b, &sh, o.rekey_rate, grace));
                            let r = traffic(
                                &a, &b, size, k, o.tunnels, o.seconds, &sh, &mut seq, &mut rng,
                            );
                            sh.stop.store(true, SeqCst);
                            let c = c
                                .join()
                                .map_err(|_| "the control thread panicked".to_string())?;
                            c.and(r)
                        })?
                    } else {
                        traffic(
                            &a, &b, size, k, o.tunnels, o.seconds, &sh, &mut seq, &mut rng,
                        )?
                    };
                    let into = if with_rekey { &mut tr } else { &mut tb };
                    for (x, y) in [
                        (&mut into.packets, tally.packets),
                        (&mut into.esp_in, tally.esp_in),
                        (&mut into.esp_ok, tally.esp_ok),
                        (&mut into.plain_in, tally.plain_in),
                        (&mut into.plain_ok, tally.plain_ok),
                        (&mut into.bytes_in, tally.bytes_in),
                        (&mut into.bytes_out, tally.bytes_out),
                    ] {
                        *x += y;
                    }
                    into.secs += tally.secs;
                    into.cpu += tally.cpu;
                    esp_ok_total += tally.esp_ok;
                    if with_rekey {
                        renewals += ctl.renewals - r0.0;
                        no_slot += ctl.no_slot - r0.1;
                        rekey_wall += t0.elapsed().as_secs_f64();
                        rekey.push(tally);
                    } else {
                        base.push(tally);
                    }
                }
            }
            let pps = |v: &[Tally]| median(v.iter().map(|t| t.packets as f64 / t.secs).collect());
            let gbps = |v: &[Tally]| {
                median(
                    v.iter()
                        .map(|t| t.bytes_out as f64 * 8.0 / t.secs / 1e9)
                        .collect(),
                )
            };
            let (bp, rp) = (pps(&base), pps(&rekey));
            // the data plane's own cost: CPU time per packet (not the time the thread waited for a
            // CPU)
            let cpu_ns = |v: &[Tally]| {
                median(
                    v.iter()
                        .map(|t| {
                            if t.cpu > 0.0 {
                                t.cpu / t.packets as f64 * 1e9
                            } else {
                                f64::NAN
                            }
                        })
                        .collect(),
                )
            };
            let (bc, rc) = (cpu_ns(&base), cpu_ns(&rekey));
            let lost_base = (tb.esp_in - tb.esp_ok) + (tb.plain_in - tb.plain_ok);
            let lost_rekey_esp = tr.esp_in - tr.esp_ok;
            let lost_rekey = lost_rekey_esp + (tr.plain_in - tr.plain_ok);
            all_ok &= lost_base == 0 && lost_rekey == 0;
            let paper = PAPER_A.iter().find(|p| p.0 == k).map(|p| p.1);
            println!(
                "  {:>5} {:>5} {:>8.0} {:>8.3} {:>11.0} {:>11.3} {:>6.3} {:>7.0} {:>8.0} {:>7.3} {:>9.0} {:>5} {:>14}",
                size,
                k,
                bp / 1e3,
                gbps(&base),
                rp / 1e3,
                gbps(&rekey),
                rp / bp,
                bc,
                rc,
                bc / rc,
                renewals as f64 / rekey_wall,
                lost_base + lost_rekey,
                paper.map(|p| format!("{p:.1}")).unwrap_or("-".into())
            );
            rows.push(serde_json::json!({
                "size": size, "k": k,
                "base": {"pps": bp, "gbps_out": gbps(&base), "gbps_in": median(base.iter().map(|t| t.bytes_in as f64 * 8.0 / t.secs / 1e9).collect()),
                         "packets": tb.packets, "esp_in": tb.esp_in, "esp_decrypted": tb.esp_ok, "plain_in": tb.plain_in, "plain_out": tb.plain_ok,
                         "lost": lost_base, "seconds": tb.secs, "cpu_ns_per_packet": bc, "cpu_seconds": tb.cpu},
                "rekey": {"pps": rp, "gbps_out": gbps(&rekey), "gbps_in": median(rekey.iter().map(|t| t.bytes_in as f64 * 8.0 / t.secs / 1e9).collect()),
                          "packets": tr.packets, "esp_in": tr.esp_in, "esp_decrypted": tr.esp_ok, "plain_in": tr.plain_in, "plain_out": tr.plain_ok,
                          "lost": lost_rekey, "lost_esp_live_sas": lost_rekey_esp, "seconds": tr.secs, "cpu_ns_per_packet": rc, "cpu_seconds": tr.cpu,
                          "renewals": renewals, "renewals_per_s": renewals as f64 / rekey_wall, "renewals_skipped_no_slot": no_slot},
                "ratio": rp / bp,
                "cpu_ratio": bc / rc,
                "paper_a_mbps": paper,
            }));
        }
    }
    let esp_ok_counter = b.counter_read(status, 0)?.0 - c0;
    let worst = rows
        .iter()
        .filter_map(|r| r["ratio"].as_f64())
        .fold(f64::INFINITY, f64::min);
    let worst_cpu = rows
        .iter()
        .filter_map(|r| r["cpu_ratio"].as_f64())
        .fold(f64::INFINITY, f64::min);
    let ratios: Vec<f64> = rows.iter().filter_map(|r| r["ratio"].as_f64()).collect();
    let cpu_ratios: Vec<f64> = rows
        .iter()
        .filter_map(|r| r["cpu_ratio"].as_f64())
        .collect();
    println!(
        "  ratio with/without re-keying (throughput, wall clock): median {:.3}, worst {worst:.3}; on the data thread's CPU time per packet: median {:.3}, worst {worst_cpu:.3}",
        median(ratios.clone()),
        median(cpu_ratios.clone())
    );
    println!(
        "  paper (b), during a re-key: {:.1} Mbit/s with no interim packets vs {:.1} (ratio {:.3})",
        PAPER_B[6].1,
        PAPER_B[0].1,
        PAPER_B[6].1 / PAPER_B[0].1
    );
    println!(
        "  renewals: {} (old SAD-dec entries removed: {}); ESP decrypted (checked): {esp_ok_total}, B's esp_status OK counter: {esp_ok_counter}",
        ctl.renewals, ctl.retired
    );
    if let Some(p) = json {
        let doc = serde_json::json!({
            "program": "programs/ipsec_gateway.p4", "suite": "aes-gcm-128", "tunnels": o.tunnels, "seconds": o.seconds, "rounds": o.rounds,
            "rekey_rate": o.rekey_rate, "grace_ms": o.grace_ms, "batch": BATCH,
            "rows": rows, "worst_ratio": worst, "median_ratio": median(ratios), "worst_cpu_ratio": worst_cpu, "median_cpu_ratio": median(cpu_ratios), "renewals": ctl.renewals, "retired": ctl.retired,
            "esp_decrypted_checked": esp_ok_total, "esp_status_ok_counter": esp_ok_counter,
            "paper": {"table3a_mbps": PAPER_A.iter().map(|(k, v)| serde_json::json!({"k": k, "mbps": v})).collect::<Vec<_>>(),
                      "table3b_mbps": PAPER_B.iter().map(|(n, v)| serde_json::json!({"interim": n, "mbps": v})).collect::<Vec<_>>()},
        });
        std::fs::write(p, serde_json::to_string_pretty(&doc).unwrap_or_default())
            .map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(all_ok)
}
