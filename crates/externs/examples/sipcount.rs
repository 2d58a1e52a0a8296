fn main() {
    let data: Vec<u8> = (0..64u8).collect();
    let mut acc = 0u64;
    for i in 0..20000u64 {
        acc ^= p4sec_externs::hash::siphash24(i, 7, std::hint::black_box(&data));
    }
    println!("{acc}");
}
