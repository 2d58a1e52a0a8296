//! A deterministic fuzz sweep that runs with `cargo test` (the coverage-guided targets are in
//! fuzz/): mutated corpus programs must compile or fail with an error (no panic), and random frames
//! through every corpus program must not panic the engine. The corpus is the reference compiler's,
//! from the shared corpora (skipped without them: see common/mod.rs).

mod common;

use common::rng;

use p4sec_engine::{Engine, Outputs, Worker};
use std::path::PathBuf;
use std::sync::Arc;

/// The corpus programs, or `None` (the test is skipped) without the shared corpora.
fn corpus() -> Option<Vec<PathBuf>> {
    let dir = common::shared("conformance/p4c-stf")?;
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("corpus")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().map(|x| x == "p4").unwrap_or(false)
                && !p.to_string_lossy().contains("skeleton")
        })
        .collect();
    v.sort();
    Some(v)
}

#[test]
fn mutated_programs_never_panic() {
    let Some(corpus) = corpus() else { return };
    let mut seed = 0x9e3779b97f4a7c15u64;
    for p in corpus {
        let text = std::fs::read_to_string(&p).unwrap();
        let dir = p.parent().unwrap().to_path_buf();
        for _ in 0..8 {
            let mut t: Vec<char> = text.chars().collect();
            for _ in 0..1 + rng(&mut seed) % 4 {
                let i = (rng(&mut seed) as usize) % t.len().max(1);
                match rng(&mut seed) % 4 {
                    0 => {
                        t.remove(i);
                    }
                    1 => t.insert(
                        i,
                        ['{', '}', ';', '(', ')', '<', '>', '0', 'x', '#']
                            [(rng(&mut seed) % 10) as usize],
                    ),
                    2 => {
                        let j = (i + (rng(&mut seed) as usize % 40)).min(t.len());
                        t.drain(i..j);
                    }
                    _ => {
                        let j = (rng(&mut seed) as usize) % t.len().max(1);
                        t.swap(i, j);
                    }
                }
            }
            let src: String = t.into_iter().collect();
            let opts = p4sec_frontend::CompileOptions {
                include_dirs: vec![dir.clone()],
                defines: vec![],
            };
            let r =
                std::panic::catch_unwind(|| p4sec_frontend::compile_str("mutant.p4", &src, &opts));
            assert!(
                r.is_ok(),
                "front end panicked on a mutant of {}",
                p.display()
            );
        }
    }
}

#[test]
fn random_frames_never_panic_the_engine() {
    let Some(corpus) = corpus() else { return };
    let mut seed = 12345u64;
    let externs = p4sec_engine::test_externs::registry();
    for p in corpus {
        let Ok(prog) = p4sec_frontend::compile_file(&p, &Default::default()) else {
            continue;
        };
        let e = Engine::new(Arc::new(prog), &externs).unwrap();
        let mut w = Worker::new(&e);
        let mut out = Outputs::default();
        for n in 0..64 {
            let len = (rng(&mut seed) % 120) as usize + if n == 0 { 0 } else { 1 };
            let frame: Vec<u8> = (0..len).map(|_| rng(&mut seed) as u8).collect();
            let port = (rng(&mut seed) % 8) as u32;
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                out.clear();
                e.process(&mut w, port, &frame, &mut out);
            }));
            assert!(
                r.is_ok(),
                "engine panicked on {} with frame {:02x?}",
                p.display(),
                frame
            );
        }
    }
}
