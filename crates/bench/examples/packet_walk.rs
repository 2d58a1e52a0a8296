//! One frame through the IPsec gateway program, for a debugger to follow: one tunnel's gateway
//! (NULL cipher, so the walk is the pipeline's), warmed up with a few frames, then [`walked`]
//! processes one more. `scripts/packet-walk` steps through [`walked`] with gdb and lists the source
//! files the frame visits, in order.
//!
//! `packet_walk [enc|dec]`: the encrypting gateway with a plain frame on its LAN port (default), or
//! the decrypting gateway with an ESP frame on its WAN port.

use p4sec_engine::{Engine, Outputs, Worker};

/// The frame the debugger follows: everything [`Engine::process`] does with it.
#[inline(never)]
fn walked(e: &Engine, w: &mut Worker, port: u32, frame: &[u8], out: &mut Outputs) {
    e.process(w, port, frame, out);
}

fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "enc".into());
    let (e, port, frame) = match p4sec_bench::esp::one_tunnel(&dir) {
        Ok(x) => x,
        Err(m) => {
            eprintln!("packet_walk: {m}");
            std::process::exit(2);
        }
    };
    let mut w = Worker::new(&e);
    let mut out = Outputs::default();
    // warm up: the first frames fill the worker's buffers and caches
    for _ in 0..4 {
        out.clear();
        e.process(&mut w, port, &frame, &mut out);
    }
    out.clear();
    walked(&e, &mut w, port, &frame, &mut out);
    let first = out.iter().next().map(|(p, f)| (p, f.len()));
    match first {
        Some((p, len)) if out.len() == 1 => println!("1 frame out on port {p}, {len} bytes"),
        _ => {
            eprintln!("packet_walk: {} frames out, not 1", out.len());
            std::process::exit(1);
        }
    }
}
