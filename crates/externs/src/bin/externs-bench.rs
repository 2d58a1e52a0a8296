//! `externs-bench [--json FILE] [--quick]`: benchmarks of the security externs, printed as tables.
//!
//! 1. The cryptographic-hashing paper's Table I on this machine: cycles per byte and fixed cycles
//!    per packet from a least-squares fit over input lengths 2..1500 B (TSC cycles, median of
//!    repetitions), and cycles for 64 B, beside the paper's figures.
//! 2. ESP encapsulation and decapsulation per suite for 64, 512 and 1500-byte inner packets (Gbit/s
//!    and Mpps, one core), beside the raw AES-128-GCM seal of `ring` and `openssl speed -evp`
//!    measured in the same run.
//! 3. ASCON-AEAD128 (SP 800-232) and ASCON-128 v1.2 encryption of 8..64-byte inputs with 4 bytes of
//!    AD.

use p4sec_externs::ascon::{self, Variant};
use p4sec_externs::esp::{Cipher, Integ, Limits, Sa, SaConfig};
use p4sec_externs::hash::{self, HashAlg};
use serde_json::json;
use std::hint::black_box;
use std::time::Instant;

fn tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    }
}

fn tsc_ghz() -> f64 {
    let t0 = tsc();
    let i0 = Instant::now();
    while i0.elapsed().as_millis() < 200 {}
    (tsc() - t0) as f64 / i0.elapsed().as_nanos() as f64
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Median TSC cycles of one call of `f`, measured over batches.
fn cycles(mut f: impl FnMut(), batch: u32, reps: usize) -> f64 {
    let mut v = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = tsc();
        for _ in 0..batch {
            f();
        }
        v.push((tsc() - t) as f64 / batch as f64);
    }
    median(&mut v)
}

fn fit(xs: &[f64], ys: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mx = xs.iter().sum::<f64>() / n;
    let my = ys.iter().sum::<f64>() / n;
    let sxy: f64 = xs.iter().zip(ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
    let slope = sxy / sxx;
    (slope, my - slope * mx)
}

fn openssl_speed(cipher: &str, bytes: usize) -> Option<f64> {
    let out = std::process::Command::new("openssl")
        .args([
            "speed",
            "-evp",
            cipher,
            "-seconds",
            "1",
            "-bytes",
            &bytes.to_string(),
        ])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    // last line: "<cipher>   12345678.90k"
    let line = text
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with(cipher) || l.to_lowercase().contains(cipher))?;
    let v = line.split_whitespace().last()?;
    let k: f64 = v.trim_end_matches('k').parse().ok()?;
    Some(k * 1000.0 * 8.0 / 1e9) // Gbit/s
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let json_path = args
        .iter()
        .position(|a| a == "--json")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let quick = args.iter().any(|a| a == "--quick");
    let reps = if quick { 5 } else { 21 };
    let ghz = tsc_ghz();
    println!("TSC: {ghz:.2} GHz\n");

    // ---- 1. Table I
    // (the paper's figures: BLAKE2b's 3.14 is a measurement, not pi)
    #[allow(clippy::approx_constant)]
    let paper: &[(&str, f64, f64, f64)] = &[
        ("CRC32", 0.32, 0.00, 10.79),
        ("csum16", 0.44, 0.00, 30.06),
        ("SipHash-2-4", 1.06, 56.40, 121.10),
        ("Poly1305-AES", 1.69, 83.71, 170.38),
        ("BLAKE2b", 3.14, 35.85, 232.77),
        ("HMAC-SHA-512", 3.70, 1454.51, 1578.14),
        ("HMAC-SHA-256", 5.57, 959.69, 1462.13),
    ];
    println!("1. Hash latency (paper's Table I: Intel Xeon, 2.4 GHz; here: this CPU, TSC cycles)");
    println!(
        "{:<16} {:>10} {:>12} {:>10} | {:>10} {:>12} {:>10}",
        "hash", "cyc/B", "fixed cyc", "cyc@64B", "paper c/B", "paper fixed", "paper@64B"
    );
    let lens: Vec<usize> = (0..=30).map(|i| (2 + i * 50).min(1500)).collect();
    let data = vec![0xa5u8; 1500];
    let mut table1 = vec![];
    for alg in HashAlg::ALL {
        let key: Vec<u8> = match alg {
            HashAlg::SipHash24 => vec![7; 16],
            HashAlg::HalfSipHash24 => vec![7; 8],
            HashAlg::Poly1305Aes => vec![7; 48],
            HashAlg::HmacSha256 | HashAlg::HmacSha512 => vec![7; 32],
            _ => vec![],
        };
        let mut out = vec![0u8; alg.out_len()];
        let mut xs = vec![];
        let mut ys = vec![];
        for &n in &lens {
            let c = cycles(
                || hash::compute(alg, black_box(&key), black_box(&data[..n]), &mut out).unwrap(),
                50,
                reps,
            );
            xs.push(n as f64);
            ys.push(c);
        }
        let (cpb, fixed) = fit(&xs, &ys);
        let c64 = cycles(
            || hash::compute(alg, black_box(&key), black_box(&data[..64]), &mut out).unwrap(),
            200,
            reps,
        );
        let p = paper.iter().find(|p| p.0 == alg.name());
        match p {
            Some(p) => println!(
                "{:<16} {:>10.2} {:>12.1} {:>10.1} | {:>10.2} {:>12.2} {:>10.2}",
                alg.name(),
                cpb,
                fixed.max(0.0),
                c64,
                p.1,
                p.2,
                p.3
            ),
            None => println!(
                "{:<16} {:>10.2} {:>12.1} {:>10.1} | {:>10} {:>12} {:>10}",
                alg.name(),
                cpb,
                fixed.max(0.0),
                c64,
                "-",
                "-",
                "-"
            ),
        }
        table1.push(json!({"hash": alg.name(), "cycles_per_byte": cpb, "fixed_cycles": fixed, "cycles_64B": c64,
            "paper": p.map(|p| json!({"cycles_per_byte": p.1, "fixed_cycles": p.2, "cycles_64B": p.3}))}));
    }

    // ---- 2. ESP
    println!(
        "\n2. ESP tunnel mode, one core (encapsulation and decapsulation of an inner IPv4 packet)"
    );
    let secs = if quick { 0.1 } else { 0.4 };
    let raw_gcm = {
        let key = ring::aead::LessSafeKey::new(
            ring::aead::UnboundKey::new(&ring::aead::AES_128_GCM, &[3; 16]).unwrap(),
        );
        let mut buf = vec![0u8; 1500];
        let start = Instant::now();
        let mut n = 0u64;
        while start.elapsed().as_secs_f64() < secs {
            for i in 0..64u64 {
                let mut nonce = [0u8; 12];
                nonce[4..].copy_from_slice(&(n + i).to_be_bytes());
                let t = key
                    .seal_in_place_separate_tag(
                        ring::aead::Nonce::assume_unique_for_key(nonce),
                        ring::aead::Aad::from(&[1u8; 8]),
                        &mut buf,
                    )
                    .unwrap();
                let _ = black_box(t);
            }
            n += 64;
        }
        n as f64 * 1500.0 * 8.0 / start.elapsed().as_secs_f64() / 1e9
    };
    let ossl = openssl_speed("aes-128-gcm", 1500);
    let ossl_chacha = openssl_speed("chacha20-poly1305", 1500);
    println!(
        "raw AES-128-GCM seal at 1500 B: ring {raw_gcm:.2} Gbit/s; openssl speed -evp aes-128-gcm: {}; chacha20-poly1305: {}",
        ossl.map(|g| format!("{g:.2} Gbit/s")).unwrap_or("n/a".into()),
        ossl_chacha.map(|g| format!("{g:.2} Gbit/s")).unwrap_or("n/a".into())
    );
    println!(
        "{:<36} {:>6} {:>11} {:>9} {:>11} {:>9}",
        "suite", "bytes", "encap Gb/s", "Mpps", "decap Gb/s", "Mpps"
    );
    let suites = [
        (Cipher::Null, Integ::HmacSha256_128),
        (Cipher::AesCbc128, Integ::HmacSha1_96),
        (Cipher::AesCbc256, Integ::HmacSha256_128),
        (Cipher::AesCtr128, Integ::HmacSha256_128),
        (Cipher::AesCtr256, Integ::HmacSha1_96),
        (Cipher::AesCbc128, Integ::HmacMd5_96),
        (Cipher::AesGcm128, Integ::None),
        (Cipher::AesGcm256, Integ::None),
        (Cipher::ChaCha20Poly1305, Integ::None),
    ];
    let mut esp_rows = vec![];
    let mut gcm_encap_1500 = 0.0;
    for (c, i) in suites {
        for size in [64usize, 512, 1500] {
            let cfg = SaConfig {
                spi: 7,
                cipher: c,
                integ: i,
                enc_key: vec![5; c.keymat_len()],
                auth_key: vec![6; if c.is_aead() { 0 } else { i.key_len() }],
                esn: true,
                replay_window: 0,
                tunnel: Some(("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap())),
                soft: Limits::default(),
                hard: Limits::default(),
                initial_seq: 0,
                udp_encap: None,
            };
            let tx = Sa::new(cfg.clone()).unwrap();
            let rx = Sa::new(cfg).unwrap();
            let mut inner = vec![0u8; size];
            inner[0] = 0x45;
            let mut out = Vec::with_capacity(2048);
            let mut dec = Vec::with_capacity(2048);
            // encapsulation
            let start = Instant::now();
            let mut n = 0u64;
            while start.elapsed().as_secs_f64() < secs {
                for _ in 0..64 {
                    tx.encapsulate(&inner, &mut out).unwrap();
                }
                n += 64;
            }
            let enc_pps = n as f64 / start.elapsed().as_secs_f64();
            // decapsulation of one packet repeatedly (replay protection off)
            let esp = p4sec_externs::esp::esp_of_ip(&out).unwrap().to_vec();
            let start = Instant::now();
            let mut m = 0u64;
            while start.elapsed().as_secs_f64() < secs {
                for _ in 0..64 {
                    rx.decapsulate(&esp, &mut dec).unwrap();
                }
                m += 64;
            }
            let dec_pps = m as f64 / start.elapsed().as_secs_f64();
            let enc_g = enc_pps * size as f64 * 8.0 / 1e9;
            let dec_g = dec_pps * size as f64 * 8.0 / 1e9;
            if c == Cipher::AesGcm128 && size == 1500 {
                gcm_encap_1500 = enc_g;
            }
            let name = format!("{} {}", c.name(), if c.is_aead() { "" } else { i.name() });
            println!(
                "{:<36} {:>6} {:>11.2} {:>9.2} {:>11.2} {:>9.2}",
                name,
                size,
                enc_g,
                enc_pps / 1e6,
                dec_g,
                dec_pps / 1e6
            );
            esp_rows.push(json!({"suite": name.trim(), "bytes": size, "encap_gbps": enc_g, "encap_mpps": enc_pps / 1e6, "decap_gbps": dec_g, "decap_mpps": dec_pps / 1e6}));
        }
    }
    let fastest = raw_gcm.max(ossl.unwrap_or(0.0));
    println!(
        "AES-GCM-128 ESP encapsulation at 1500 B: {:.2} Gbit/s = {:.0}% of the fastest raw AES-128-GCM here ({:.2} Gbit/s); target >= 80%",
        gcm_encap_1500,
        100.0 * gcm_encap_1500 / fastest,
        fastest
    );

    // ---- 3. ASCON
    println!("\n3. ASCON encryption with 4 bytes of associated data, one core");
    println!("{:<28} {:>6} {:>14}", "variant", "bytes", "Mops/s");
    let mut ascon_rows = vec![];
    for v in [Variant::Aead128, Variant::V12] {
        for size in [8usize, 16, 32, 64] {
            let key = [1u8; 16];
            let nonce = [2u8; 16];
            let mut buf = vec![0u8; size];
            let start = Instant::now();
            let mut n = 0u64;
            while start.elapsed().as_secs_f64() < secs {
                for _ in 0..256 {
                    black_box(ascon::encrypt(v, &key, &nonce, &[9, 9, 9, 9], &mut buf).unwrap());
                }
                n += 256;
            }
            let ops = n as f64 / start.elapsed().as_secs_f64();
            let name = match v {
                Variant::Aead128 => "Ascon-AEAD128 (SP 800-232)",
                Variant::V12 => "ASCON-128 v1.2",
            };
            println!("{:<28} {:>6} {:>14.2}", name, size, ops / 1e6);
            ascon_rows.push(json!({"variant": name, "bytes": size, "ops_per_s": ops}));
        }
    }
    if let Some(p) = json_path {
        let j = json!({"tsc_ghz": ghz, "table1": table1, "esp": esp_rows, "raw_aes128gcm_ring_gbps": raw_gcm,
            "openssl_aes128gcm_gbps": ossl, "openssl_chacha20poly1305_gbps": ossl_chacha,
            "gcm128_esp_over_fastest_raw": gcm_encap_1500 / fastest, "ascon": ascon_rows});
        std::fs::write(&p, serde_json::to_string_pretty(&j).unwrap())
            .unwrap_or_else(|e| eprintln!("cannot write {p}: {e}"));
    }
}
