//! Load time of programs on each backend (development aid): `cargo run --release -p p4sec-engine
//! --example native_load -- FILE.p4...` prints, per program, the milliseconds `Engine::with_backend`
//! takes with closures and with native code (best of 3; the front end is not counted).
use p4sec_engine::{Backend, Engine};
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let mut externs = p4sec_engine::harness_externs::registry();
    externs.extend(p4sec_externs::p4::registry());
    for path in std::env::args().skip(1) {
        let p = std::path::Path::new(&path);
        let opts = p4sec_frontend::CompileOptions {
            include_dirs: p.parent().map(|d| d.to_path_buf()).into_iter().collect(),
            defines: vec![],
        };
        let prog = match p4sec_frontend::compile_file(p, &opts) {
            Ok(x) => Arc::new(x),
            Err(e) => {
                println!("{path}: compile error: {e}");
                continue;
            }
        };
        let mut line = format!("{path}:");
        for b in [Backend::Closure, Backend::Native] {
            let mut best = f64::MAX;
            for _ in 0..3 {
                let t = Instant::now();
                match Engine::with_backend(prog.clone(), &externs, b) {
                    Ok(_) => best = best.min(t.elapsed().as_secs_f64() * 1e3),
                    Err(e) => {
                        line += &format!(" {b}: {e}");
                        break;
                    }
                }
            }
            line += &format!(" {b} {best:.1} ms");
        }
        println!("{line}");
    }
}
