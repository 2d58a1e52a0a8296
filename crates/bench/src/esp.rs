//! `p4sec bench-esp`: the per-packet cost of one ESP tunnel through programs/ipsec_gateway.p4, in
//! process on one core, in one direction at a time: `enc` pushes plain IPv4/TCP frames into the LAN
//! port of an encrypting gateway (SPD protect, `encap_split`, AES-GCM-128 or, with `--cipher null`,
//! no cipher: the pipeline and the ESP framing alone), `dec` pushes ESP frames
//! into the WAN port of a decrypting gateway (SAD-dec, `decap_split`, selectors). The ESP frames
//! for `dec` are made outside the pipeline by the peer's SA, so only the measured direction runs
//! through [`Engine::process`]: under `valgrind --tool=callgrind
//! --toggle-collect='*Engine*process*'` the instructions collected, divided by `--packets`, are the
//! instructions per packet of that direction.
//!
//! Every output is checked (an `enc` output decrypts back to the input with its TTL decremented; a
//! `dec` output is the inner packet), and a digest of every emitted frame (port and bytes) is
//! printed: the same options give the same digest, so a change to the engine or the externs that
//! alters any emitted packet shows there.

use crate::setup::{act, digest, entry, table};
use p4sec_engine::{Backend, Engine, Outputs, Worker};
use p4sec_externs::esp::{Cipher, Integ, Limits, Sa, SaConfig};
use p4sec_ir::{FieldMatch, Value};
use std::net::IpAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

const PROGRAM: &str = include_str!("../../../programs/ipsec_gateway.p4");
/// The encrypting gateway's WAN address and its peer's (the tunnel endpoints).
const ENC_GW: [u8; 4] = [192, 0, 2, 1];
const DEC_GW: [u8; 4] = [198, 51, 100, 1];
const SPI: u32 = 0x4242;
pub(crate) const LAN: u32 = 1;
pub(crate) const WAN: u32 = 2;

/// Options of one run.
pub struct Opts {
    /// "enc" or "dec".
    pub dir: String,
    /// IP packet size of the plain (inner) packets (the host MTU), 40 to 1500.
    pub size: usize,
    pub packets: u32,
    /// "aes-gcm-128" or "null".
    pub cipher: String,
}

fn be(a: [u8; 4]) -> u64 {
    u32::from_be_bytes(a) as u64
}

/// The tunnel's SA with `cipher` (AES-GCM-128 or NULL; no integrity algorithm) and an anti-replay
/// window of `window` packets (0: none, so that the same ESP packets can be decapsulated again).
pub(crate) fn sa_with(cipher: Cipher, window: u32) -> SaConfig {
    let enc_key = match cipher {
        Cipher::Null => vec![],
        _ => (0..20u8).map(|b| b.wrapping_mul(37) ^ 0x5c).collect(),
    };
    SaConfig {
        spi: SPI,
        cipher,
        integ: Integ::None,
        enc_key,
        auth_key: vec![],
        esn: false,
        replay_window: window,
        tunnel: Some((IpAddr::from(ENC_GW), IpAddr::from(DEC_GW))),
        soft: Limits::default(),
        hard: Limits::default(),
        initial_seq: 0,
        udp_encap: None,
    }
}

fn add_sa(e: &Engine, c: &SaConfig) -> Result<(), String> {
    let cipher = serde_json::to_value(c.cipher).map_err(|e| e.to_string())?;
    let json = serde_json::json!({"index": 0, "sa": {
        "spi": c.spi, "cipher": cipher, "integ": "None", "enc_key": c.enc_key, "auth_key": [], "esn": false, "replay_window": c.replay_window,
        "tunnel": [IpAddr::from(ENC_GW).to_string(), IpAddr::from(DEC_GW).to_string()],
        "soft": {"packets": null, "bytes": null, "seconds": null}, "hard": {"packets": null, "bytes": null, "seconds": null}, "initial_seq": 0}});
    e.extern_control("GwIngress.sad", "add_sa", json.to_string().as_bytes())?;
    Ok(())
}

fn route(e: &Engine, prefix: [u8; 4], len: u32, port: u32) -> Result<(), String> {
    let args = vec![
        Value::new(48, 0x0200_0000_00a0 + port as u64),
        Value::new(48, 0x0200_0000_0001),
        Value::new(9, port as u64),
    ];
    e.table_insert(
        table(e, "GwIngress.ipv4_lpm")?,
        entry(
            vec![FieldMatch::Lpm {
                value: Value::new(32, be(prefix)),
                prefix_len: len,
            }],
            act(e, "GwIngress.set_nhop")?,
            args,
            0,
        ),
    )
}

/// The same with the SA `sa`, on `backend`.
pub(crate) fn gateway_with(dir: &str, sa: &SaConfig, backend: Backend) -> Result<Engine, String> {
    let prog = p4sec_frontend::compile_str(
        "programs/ipsec_gateway.p4",
        PROGRAM,
        &p4sec_frontend::CompileOptions::default(),
    )
    .map_err(|e| e.to_string())?;
    let e = Engine::with_backend(Arc::new(prog), &p4sec_externs::p4::registry(), backend)?;
    add_sa(&e, sa)?;
    let net = |a: [u8; 4], m: u64| FieldMatch::Ternary {
        value: Value::new(32, be(a)),
        mask: Value::new(32, m),
    };
    if dir == "enc" {
        // the WAN port is listed in port_side; the LAN traffic 10.1/16 -> 10.2/16 is protected with
        // SA 0
        e.table_insert(
            table(&e, "GwIngress.port_side")?,
            entry(
                vec![FieldMatch::Exact(Value::new(9, WAN as u64))],
                act(&e, "GwIngress.from_wan")?,
                vec![],
                0,
            ),
        )?;
        let m = vec![
            net([10, 1, 0, 0], 0xffff_0000),
            net([10, 2, 0, 0], 0xffff_0000),
            FieldMatch::Any,
            FieldMatch::Any,
            FieldMatch::Any,
        ];
        e.table_insert(
            table(&e, "GwIngress.spd")?,
            entry(
                m,
                act(&e, "GwIngress.protect")?,
                vec![Value::new(32, 0)],
                10,
            ),
        )?;
        route(&e, DEC_GW, 24, WAN)?;
    } else {
        e.table_insert(
            table(&e, "GwIngress.port_side")?,
            entry(
                vec![FieldMatch::Exact(Value::new(9, WAN as u64))],
                act(&e, "GwIngress.from_wan")?,
                vec![],
                0,
            ),
        )?;
        e.table_insert(
            table(&e, "GwIngress.local_addr")?,
            entry(
                vec![FieldMatch::Exact(Value::new(32, be(DEC_GW)))],
                act(&e, "GwIngress.to_me")?,
                vec![],
                0,
            ),
        )?;
        let m = vec![
            FieldMatch::Exact(Value::new(32, be(ENC_GW))),
            FieldMatch::Exact(Value::new(32, be(DEC_GW))),
            FieldMatch::Exact(Value::new(32, SPI as u64)),
        ];
        e.table_insert(
            table(&e, "GwIngress.sad_dec")?,
            entry(m, act(&e, "GwIngress.dec_sa")?, vec![Value::new(32, 0)], 0),
        )?;
        let m = vec![
            FieldMatch::Exact(Value::new(32, 0)),
            net([10, 1, 0, 0], 0xffff_0000),
            net([10, 2, 0, 0], 0xffff_0000),
            FieldMatch::Any,
        ];
        e.table_insert(
            table(&e, "GwIngress.sa_selectors")?,
            entry(m, act(&e, "GwIngress.selector_ok")?, vec![], 10),
        )?;
        route(&e, [10, 2, 0, 0], 16, LAN)?;
    }
    Ok(e)
}

/// Plain frame `i`: Ethernet, IPv4 of `size` bytes (10.1.0.5 -> 10.2.0.7, identification `i`), TCP,
/// a payload that differs per packet.
pub(crate) fn plain(size: usize, i: u32) -> Vec<u8> {
    let mut f = vec![0u8; 14 + size];
    f[..14].copy_from_slice(&[2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0x11, 0x08, 0x00]);
    let mut h = [
        0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 1, 0, 5, 10, 2, 0, 7,
    ];
    h[2..4].copy_from_slice(&(size as u16).to_be_bytes());
    h[4..6].copy_from_slice(&(i as u16).to_be_bytes());
    let c = p4sec_engine::hash::csum16(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    f[14..34].copy_from_slice(&h);
    // TCP: ports 40000 -> 5201, sequence number, data offset 5, ACK
    f[34..36].copy_from_slice(&40000u16.to_be_bytes());
    f[36..38].copy_from_slice(&5201u16.to_be_bytes());
    f[38..42].copy_from_slice(&(i.wrapping_mul(1360)).to_be_bytes());
    f[46] = 0x50;
    f[47] = 0x10;
    for (k, b) in f[54..].iter_mut().enumerate() {
        *b = (k as u32 ^ i) as u8;
    }
    f
}

/// The ESP frames the peer's SA makes of plain frames (their IP packets encapsulated, in an
/// Ethernet frame to the decrypting gateway's WAN port).
pub(crate) fn esp_frames(peer: &Sa, plains: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, String> {
    let mut buf = vec![];
    plains
        .iter()
        .map(|p| {
            peer.encapsulate(&p[14..], &mut buf)
                .map_err(|err| format!("{err:?}"))?;
            let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0x22, 0x08, 0x00];
            f.extend_from_slice(&buf);
            Ok(f)
        })
        .collect()
}

/// One tunnel's gateway on the engine `P4SEC_ENGINE` names and one frame for it: for `dir` "enc"
/// the encrypting gateway and a plain frame for its LAN port, for "dec" the decrypting gateway
/// and an ESP frame for its WAN port (the NULL cipher: the pipeline's part alone). Returns the
/// engine, the input port and the frame (`examples/packet_walk.rs` follows one through the code).
pub fn one_tunnel(dir: &str) -> Result<(Engine, u32, Vec<u8>), String> {
    let sa = sa_with(Cipher::Null, 0);
    let e = gateway_with(dir, &sa, Backend::from_env()?)?;
    let plains = vec![plain(64, 1)];
    match dir {
        "enc" => Ok((e, LAN, plains[0].clone())),
        "dec" => {
            let peer = Sa::new(sa).map_err(|err| format!("{err:?}"))?;
            Ok((e, WAN, esp_frames(&peer, &plains)?.remove(0)))
        }
        _ => Err(format!("direction `{dir}`: enc or dec")),
    }
}

pub fn run(o: &Opts) -> ExitCode {
    match run_inner(o) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("p4sec bench-esp: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_inner(o: &Opts) -> Result<(), String> {
    if o.dir != "enc" && o.dir != "dec" {
        return Err("--dir is enc or dec".into());
    }
    if !(40..=1500).contains(&o.size) || o.packets == 0 {
        return Err("--size takes 40 to 1500 bytes, --packets at least 1".into());
    }
    let (cipher, cipher_name) = match o.cipher.as_str() {
        "aes-gcm-128" => (Cipher::AesGcm128, "AES-GCM-128"),
        "null" => (Cipher::Null, "the NULL cipher"),
        c => return Err(format!("--cipher is aes-gcm-128 or null, not `{c}`")),
    };
    let enc = o.dir == "enc";
    let sa = sa_with(cipher, 1024);
    // the gateway with the tables of `dir`'s side of the tunnel 10.1.0.0/16 -> 10.2.0.0/16
    let e = gateway_with(&o.dir, &sa, Backend::from_env()?)?;
    let peer = Sa::new(sa).map_err(|err| format!("{err:?}"))?;
    // the input frames, made before the timed part
    let n = o.packets as usize;
    let plains: Vec<Vec<u8>> = (0..n as u32).map(|i| plain(o.size, i)).collect();
    let inputs: Vec<Vec<u8>> = if enc {
        plains.clone()
    } else {
        esp_frames(&peer, &plains)?
    };
    let in_port = if enc { LAN } else { WAN };
    let mut w = Worker::new(&e);
    // batches of `BATCH` frames: each timed through the engine, then its outputs checked (not
    // timed)
    const BATCH: usize = 256;
    let mut outs: Vec<Outputs> = (0..BATCH)
        .map(|_| Outputs {
            data: Vec::with_capacity(2048),
            frames: Vec::with_capacity(2),
        })
        .collect();
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut plain_out = vec![];
    // allocations in the first batch (the worker's and the outputs' buffers growing to the frames'
    // size) and in the rest (the steady state: 0 is the target)
    let (mut secs, mut allocs, mut first_allocs) = (0f64, 0u64, 0u64);
    for (b, chunk) in inputs.chunks(BATCH).enumerate() {
        let a0 = crate::router::allocs();
        let t0 = Instant::now();
        for (f, out) in chunk.iter().zip(outs.iter_mut()) {
            out.clear();
            e.process(&mut w, in_port, f, out);
        }
        secs += t0.elapsed().as_secs_f64();
        let a = crate::router::allocs() - a0;
        if b == 0 {
            first_allocs = a;
        }
        allocs += a;
        for (k, out) in outs.iter().take(chunk.len()).enumerate() {
            let i = b * BATCH + k;
            let p = &plains[i];
            let (port, f) = match (out.len(), out.iter().next()) {
                (1, Some(x)) => x,
                _ => return Err(format!("packet {i}: {} frames out, not 1", out.len())),
            };
            digest(&mut h, port, f);
            let want_port = if enc { WAN } else { LAN };
            if port != want_port || f.len() < 34 {
                return Err(format!(
                    "packet {i} came out on port {port} ({} bytes)",
                    f.len()
                ));
            }
            let inner = if enc {
                p4sec_externs::p4::decap_ip(&peer, &f[14..], &mut plain_out)
                    .map_err(|err| format!("packet {i}: its ESP does not decrypt: {err:?}"))?;
                &plain_out[..]
            } else {
                &f[14..]
            };
            // the inner packet as sent but for the TTL and header checksum (the gateway that
            // forwards it routes it)
            let ok = inner.len() == p.len() - 14
                && inner[..8] == p[14..22]
                && inner[9..10] == p[23..24]
                && inner[12..] == p[26..];
            let ttl_ok = if enc {
                inner[8] == p[22]
            } else {
                inner[8] == p[22] - 1
            };
            if !ok || !ttl_ok {
                return Err(format!(
                    "packet {i}: the inner packet out is not the one sent"
                ));
            }
        }
    }
    let ns = secs / n as f64 * 1e9;
    let what = if enc {
        "encapsulation (LAN -> WAN)"
    } else {
        "decapsulation (WAN -> LAN)"
    };
    println!("p4sec bench-esp: ESP {what} through programs/ipsec_gateway.p4, {cipher_name}, {}-byte IP packets", o.size);
    println!(
        "  packets {n}, {ns:.0} ns/packet, {:.2} Gbit/s of inner IP, heap allocations {allocs} \
         ({first_allocs} in the first {} packets, {} after)",
        o.size as f64 * 8.0 / ns,
        BATCH.min(n),
        allocs - first_allocs
    );
    println!("  digest of the emitted frames {h:016x}");
    Ok(())
}
