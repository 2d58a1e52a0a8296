use std::time::Instant;
fn main() {
    let data: Vec<u8> = (0..64u8).collect();
    let n = 20_000_000u64;
    for _ in 0..3 {
        let t = Instant::now();
        let mut acc = 0u64;
        for i in 0..n {
            acc ^= p4sec_externs::hash::siphash24(i, 7, std::hint::black_box(&data));
        }
        let ns_ind = t.elapsed().as_secs_f64() * 1e9 / n as f64;
        let t = Instant::now();
        let mut k = 0u64;
        for _ in 0..n {
            k = p4sec_externs::hash::siphash24(k, 7, std::hint::black_box(&data));
        }
        let ns_dep = t.elapsed().as_secs_f64() * 1e9 / n as f64;
        // dependent add chain for clock estimation: 1 cycle per add
        let t = Instant::now();
        let mut x = 1u64;
        for _ in 0..n*10 { x = std::hint::black_box(x).wrapping_add(3); }
        let ns_add = t.elapsed().as_secs_f64() * 1e9 / (n*10) as f64;
        println!("independent {ns_ind:.1} ns  dependent {ns_dep:.1} ns  loop-iter {ns_add:.3} ns  {acc} {k} {x}");
    }
}
