//! The native engine against the closure engine on frames neither was written for: every program of
//! the shared STF corpus, of tests/stf and of programs/ is loaded on both engines, and random frames
//! and mutations of well-formed Ethernet/IPv4/TCP/UDP frames go through both. The frames out (ports
//! and bytes) and the packet statistics must be the same. Time stamps come from a virtual clock; a
//! frame whose output differs between two closure engines (random numbers) is not compared.

mod common;

use common::{frames, rng};

use p4sec_engine::{Backend, Engine, Outputs, Worker};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn programs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut dirs = vec![root.join("programs"), root.join("tests/stf")];
    if let Some(d) = common::shared("conformance/p4c-stf") {
        dirs.push(d);
    }
    let mut v = vec![];
    for d in dirs {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "p4") {
                v.push(p);
            }
        }
    }
    v.sort();
    v
}

/// A well-formed frame: Ethernet, IPv4 (checksum right), TCP or UDP, a payload.
fn template(seed: &mut u64) -> Vec<u8> {
    let udp = rng(seed).is_multiple_of(2);
    let payload = (rng(seed) % 48) as usize;
    let l4 = if udp { 8 } else { 20 };
    let mut f = vec![0u8; 14 + 20 + l4 + payload];
    for b in f.iter_mut() {
        *b = rng(seed) as u8;
    }
    f[12] = 0x08;
    f[13] = 0x00;
    f[14] = 0x45;
    let total = (20 + l4 + payload) as u16;
    f[16..18].copy_from_slice(&total.to_be_bytes());
    f[20] = 0;
    f[21] = 0;
    f[22] = 1 + (rng(seed) % 255) as u8;
    f[23] = if udp { 17 } else { 6 };
    f[24] = 0;
    f[25] = 0;
    let c = p4sec_engine::hash::csum16(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    if !udp {
        f[46] = 0x50;
    }
    f
}

/// Frame `n` of the sweep: random bytes, a template, or a template with bytes flipped or cut.
fn frame(n: u32, seed: &mut u64) -> Vec<u8> {
    match n % 4 {
        0 => {
            let len = (rng(seed) % 120) as usize;
            (0..len).map(|_| rng(seed) as u8).collect()
        }
        1 => template(seed),
        2 => {
            let mut f = template(seed);
            for _ in 0..1 + rng(seed) % 3 {
                let i = (rng(seed) as usize) % f.len();
                f[i] ^= 1 << (rng(seed) % 8);
            }
            f
        }
        _ => {
            let mut f = template(seed);
            let cut = (rng(seed) as usize) % f.len();
            f.truncate(cut);
            f
        }
    }
}

#[test]
fn native_engine_emits_what_the_closure_engine_emits() {
    let all_externs = common::all_externs();
    let (mut programs_run, mut frames_compared) = (0, 0);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for p in programs() {
        let Ok(prog) = p4sec_frontend::compile_file(&p, &Default::default()) else {
            continue;
        };
        let prog = Arc::new(prog);
        let load = |b: Backend| Engine::with_backend(prog.clone(), &all_externs, b);
        // a program the closure engine refuses (an extern this switch lacks) is not compared; one it
        // loads must load on the native engine too
        let Ok(c1) = load(Backend::Closure) else {
            continue;
        };
        let c2 = load(Backend::Closure).expect("loads twice");
        let n = load(Backend::Native)
            .unwrap_or_else(|e| panic!("{} does not load on the native engine: {e}", p.display()));
        let mut ws = [Worker::new(&c1), Worker::new(&c2), Worker::new(&n)];
        // time stamps from a virtual clock, the same on every engine
        for w in ws.iter_mut() {
            w.set_virtual_clock(1000, 10);
        }
        let mut outs = [Outputs::default(), Outputs::default(), Outputs::default()];
        programs_run += 1;
        for i in 0..48 {
            let f = frame(i, &mut seed);
            let port = (rng(&mut seed) % 4) as u32;
            for (k, e) in [&c1, &c2, &n].into_iter().enumerate() {
                outs[k].clear();
                e.process(&mut ws[k], port, &f, &mut outs[k]);
            }
            let (a, a2, b) = (frames(&outs[0]), frames(&outs[1]), frames(&outs[2]));
            if a == a2 {
                frames_compared += 1;
                assert_eq!(
                    a,
                    b,
                    "{}: frame {f:02x?} on port {port}: the closure engine emits the first, the native engine the second",
                    p.display()
                );
            }
        }
        let (sa, sb) = (c1.stats(), n.stats());
        assert_eq!(
            (sa.packets_in, sa.packets_out, sa.dropped),
            (sb.packets_in, sb.packets_out, sb.dropped),
            "{}: packet statistics differ between the closure and the native engine",
            p.display()
        );
    }
    eprintln!("{programs_run} programs, {frames_compared} frames compared");
    assert!(programs_run >= 20, "only {programs_run} programs loaded");
    assert!(frames_compared > programs_run * 40);
}
