//! `p4sec bench-sad`: the cost of SA lookup and ESP decapsulation in programs/ipsec_gateway.p4 as
//! the SAD grows (1, 1,000 and 100,000 SAs installed), in process on one core. Every SA is a real
//! AES-GCM-128 SA in the `esp_sad` extern with its SAD-dec entry (outer source, destination, SPI);
//! the ESP packets are made by the same ESP code outside the pipeline for SAs spread over the whole
//! SAD, each with fresh sequence numbers, and every packet must come out decrypted on the LAN port
//! (checked).

use p4sec_engine::{Engine, Outputs, Worker};
use p4sec_externs::esp::{Cipher, Integ, Limits, Sa, SaConfig};
use p4sec_ir::{ActionCall, FieldMatch, TableEntry, Value};
use std::net::IpAddr;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

const PROGRAM: &str = include_str!("../../../programs/ipsec_gateway.p4");
const ME: [u8; 4] = [198, 51, 100, 1];
const PEER: [u8; 4] = [192, 0, 2, 1];

fn cfg(i: u32) -> SaConfig {
    let key: Vec<u8> = (0..20u32)
        .map(|b| (b.wrapping_mul(31) ^ i.wrapping_mul(2654435761)) as u8)
        .collect();
    SaConfig {
        spi: 0x1000 + i,
        cipher: Cipher::AesGcm128,
        integ: Integ::None,
        enc_key: key,
        auth_key: vec![],
        esn: false,
        replay_window: 1024,
        tunnel: Some((IpAddr::from(PEER), IpAddr::from(ME))),
        soft: Limits::default(),
        hard: Limits::default(),
        initial_seq: 0,
        udp_encap: None,
    }
}

fn inner(i: u32) -> Vec<u8> {
    let mut p = vec![
        0x45,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        64,
        17,
        0,
        0,
        10,
        1,
        0,
        5,
        10,
        2,
        (i >> 8) as u8,
        i as u8,
    ];
    let payload = [0u8; 8 + 64];
    let total = (p.len() + payload.len()) as u16;
    p[2..4].copy_from_slice(&total.to_be_bytes());
    let c = p4sec_engine::hash::csum16(&p);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p.extend_from_slice(&payload);
    p
}

struct Setup {
    engine: Engine,
    install_s: f64,
}

fn setup(n: u32) -> Result<Setup, String> {
    let slots = n.next_power_of_two().max(1024);
    let mut opts = p4sec_frontend::CompileOptions::default();
    opts.defines
        .push(("SA_SLOTS".into(), Some(slots.to_string())));
    let prog = p4sec_frontend::compile_str("programs/ipsec_gateway.p4", PROGRAM, &opts)
        .map_err(|e| e.to_string())?;
    let engine = Engine::new(Arc::new(prog), &p4sec_externs::p4::registry())?;
    let act = |name: &str| {
        engine
            .prog
            .actions
            .iter()
            .position(|a| a.name == name)
            .map(|i| i as u32)
            .ok_or(format!("no action {name}"))
    };
    let lpm = engine
        .table_index("GwIngress.ipv4_lpm")
        .ok_or("no ipv4_lpm")?;
    engine.table_insert(
        lpm,
        TableEntry {
            matches: vec![FieldMatch::Lpm {
                value: Value::new(32, 0x0a02_0000),
                prefix_len: 16,
            }],
            action: ActionCall {
                action: act("GwIngress.set_nhop")?,
                args: vec![
                    Value::new(48, 0x0200_0000_00aa),
                    Value::new(48, 0x0200_0000_0001),
                    Value::new(9, 1),
                ],
            },
            priority: 0,
        },
    )?;
    let dec = engine
        .table_index("GwIngress.sad_dec")
        .ok_or("no sad_dec")?;
    let dec_sa = act("GwIngress.dec_sa")?;
    let (selectors, selector_ok) = (
        engine
            .table_index("GwIngress.sa_selectors")
            .ok_or("no sa_selectors")?,
        act("GwIngress.selector_ok")?,
    );
    let t0 = Instant::now();
    for i in 0..n {
        let c = cfg(i);
        let json = serde_json::json!({"index": i, "sa": {
            "spi": c.spi, "cipher": "AesGcm128", "integ": "None", "enc_key": c.enc_key, "auth_key": [], "esn": false, "replay_window": 1024,
            "tunnel": [IpAddr::from(PEER).to_string(), IpAddr::from(ME).to_string()],
            "soft": {"packets": null, "bytes": null, "seconds": null}, "hard": {"packets": null, "bytes": null, "seconds": null}, "initial_seq": 0}});
        engine.extern_control("GwIngress.sad", "add_sa", json.to_string().as_bytes())?;
    }
    // the SAD-dec entries in one table version (as a batched P4Runtime Write does)
    engine.table_insert_batch(
        dec,
        (0..n)
            .map(|i| TableEntry {
                matches: vec![
                    FieldMatch::Exact(Value::new(32, u32::from_be_bytes(PEER) as u64)),
                    FieldMatch::Exact(Value::new(32, u32::from_be_bytes(ME) as u64)),
                    FieldMatch::Exact(Value::new(32, (0x1000 + i) as u64)),
                ],
                action: ActionCall {
                    action: dec_sa,
                    args: vec![Value::new(32, i as u64)],
                },
                priority: 0,
            })
            .collect(),
    )?;
    // each SA's selectors: 10.1.0.0/16 -> 10.2.0.0/16 (the inner packets of `inner`)
    engine.table_insert_batch(
        selectors,
        (0..n)
            .map(|i| TableEntry {
                matches: vec![
                    FieldMatch::Exact(Value::new(32, i as u64)),
                    FieldMatch::Ternary {
                        value: Value::new(32, 0x0a01_0000),
                        mask: Value::new(32, 0xffff_0000),
                    },
                    FieldMatch::Ternary {
                        value: Value::new(32, 0x0a02_0000),
                        mask: Value::new(32, 0xffff_0000),
                    },
                    FieldMatch::Any,
                ],
                action: ActionCall {
                    action: selector_ok,
                    args: vec![],
                },
                priority: 10,
            })
            .collect(),
    )?;
    Ok(Setup {
        engine,
        install_s: t0.elapsed().as_secs_f64(),
    })
}

/// ESP frames for `sas` SAs spread over 0..n, `per` fresh sequence numbers each, interleaved across
/// SAs.
fn frames(n: u32, sas: u32, per: u32) -> Result<Vec<Vec<u8>>, String> {
    let step = (n / sas.min(n)).max(1);
    let chosen: Vec<u32> = (0..sas.min(n)).map(|k| k * step).collect();
    let txs: Vec<Sa> = chosen
        .iter()
        .map(|&i| Sa::new(cfg(i)).map_err(|e| format!("{e:?}")))
        .collect::<Result<_, _>>()?;
    let mut out = Vec::with_capacity((chosen.len() as u32 * per) as usize);
    let mut buf = vec![];
    for _ in 0..per {
        for (k, sa) in txs.iter().enumerate() {
            buf.clear();
            sa.encapsulate(&inner(chosen[k]), &mut buf)
                .map_err(|e| format!("{e:?}"))?;
            let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
            f.extend_from_slice(&buf);
            out.push(f);
        }
    }
    Ok(out)
}

pub fn run(sizes: &[u32], json: Option<&Path>) -> ExitCode {
    match run_inner(sizes, json) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("p4sec bench-sad: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_inner(sizes: &[u32], json: Option<&Path>) -> Result<(), String> {
    if sizes.is_empty() || sizes.iter().any(|&n| n == 0 || n > 1 << 20) {
        return Err("--sas takes SAD sizes from 1 to 1048576".into());
    }
    println!("p4sec bench-sad: ESP decapsulation through programs/ipsec_gateway.p4 (SAD-dec table + esp_sad), AES-GCM-128,");
    println!("64-byte inner payload, one core, in process; packets spread over the whole SAD, each checked");
    println!(
        "  {:>8} {:>12} {:>14} {:>12} {:>10}",
        "SAs", "install (s)", "SA installs/s", "ns/packet", "kpps"
    );
    let mut rows = vec![];
    for &n in sizes {
        let s = setup(n)?;
        let sample = n.min(4096);
        let per = (262_144 / sample).clamp(16, 1000);
        let fr = frames(n, sample, per)?;
        let mut w = Worker::new(&s.engine);
        let mut out = Outputs::default();
        // check a few first: the inner packet comes out on port 1
        for f in fr.iter().take(4) {
            out.clear();
            s.engine.process(&mut w, 2, f, &mut out);
            let (port, pkt) = out
                .iter()
                .next()
                .ok_or("a packet was dropped: the SAD lookup or decapsulation failed")?;
            if port != 1 || pkt.len() < 34 || pkt[14 + 12..14 + 16] != [10, 1, 0, 5] {
                return Err(format!("unexpected output on port {port}"));
            }
        }
        let t0 = Instant::now();
        let mut ok = 4u64;
        for f in fr.iter().skip(4) {
            out.clear();
            s.engine.process(&mut w, 2, f, &mut out);
            ok += (out.iter().next().map(|(p, _)| p) == Some(1)) as u64;
        }
        let el = t0.elapsed().as_secs_f64();
        let measured = (fr.len() - 4) as f64;
        if ok != fr.len() as u64 {
            return Err(format!(
                "{} of {} packets did not come out decrypted with {n} SAs",
                fr.len() as u64 - ok,
                fr.len()
            ));
        }
        let ns = el / measured * 1e9;
        println!(
            "  {:>8} {:>12.2} {:>14.0} {:>12.0} {:>10.0}",
            n,
            s.install_s,
            n as f64 / s.install_s,
            ns,
            1e6 / ns
        );
        rows.push(serde_json::json!({"sas": n, "install_s": s.install_s, "installs_per_s": n as f64 / s.install_s, "ns_per_packet": ns,
                                     "packets": fr.len(), "sas_sampled": sample}));
    }
    if rows.len() > 1 {
        let first = rows[0]["ns_per_packet"].as_f64().unwrap_or(1.0);
        let last = rows[rows.len() - 1]["ns_per_packet"]
            .as_f64()
            .unwrap_or(1.0);
        println!(
            "  cost at {} SAs vs {}: {:.2}x",
            sizes[sizes.len() - 1],
            sizes[0],
            last / first
        );
    }
    if let Some(p) = json {
        std::fs::write(
            p,
            serde_json::to_string_pretty(&serde_json::json!({"rows": rows})).unwrap_or_default(),
        )
        .map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(())
}
