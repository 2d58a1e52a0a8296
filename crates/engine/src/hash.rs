//! The v1model hash algorithms over a byte string (the concatenated data fields, MSB first,
//! zero-padded to a whole byte at the end): CRC-16/ARC, CRC-32 (IEEE), ones'-complement checksum,
//! XOR-16, identity.

use p4sec_ir::HashAlgo;

/// CRC-32 (IEEE 802.3), as BMv2's `crc32`.
pub fn crc32(data: &[u8]) -> u32 {
    let mut o = [0u8; 4];
    let _ = p4sec_externs::hash::compute(p4sec_externs::hash::HashAlg::Crc32, &[], data, &mut o);
    u32::from_be_bytes(o)
}

/// CRC-16/ARC: polynomial 0x8005 reflected, init 0, no final XOR (BMv2's `crc16`).
pub fn crc16(data: &[u8]) -> u16 {
    let mut o = [0u8; 2];
    let _ = p4sec_externs::hash::compute(p4sec_externs::hash::HashAlg::Crc16, &[], data, &mut o);
    u16::from_be_bytes(o)
}

/// The 16-bit ones'-complement Internet checksum (RFC 1071) of `data` (odd length padded with
/// zero).
pub use p4sec_externs::hash::csum16;

pub fn xor16(data: &[u8]) -> u16 {
    let mut x = 0u16;
    for c in data.chunks(2) {
        x ^= u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]);
    }
    x
}

/// Compute `algo` over `data`; `random` draws from `rng`.
pub fn compute(algo: HashAlgo, data: &[u8], rng: &mut u64) -> u64 {
    match algo {
        HashAlgo::Crc32 | HashAlgo::Crc32Custom => crc32(data) as u64,
        HashAlgo::Crc16 | HashAlgo::Crc16Custom => crc16(data) as u64,
        HashAlgo::Csum16 => csum16(data) as u64,
        HashAlgo::Xor16 => xor16(data) as u64,
        HashAlgo::Identity => data
            .iter()
            .rev()
            .take(8)
            .rev()
            .fold(0u64, |a, &b| (a << 8) | b as u64),
        HashAlgo::Random => next_random(rng),
    }
}

/// xorshift64*: a fast generator for `random()` and the random hash (not for cryptography).
pub fn next_random(s: &mut u64) -> u64 {
    if *s == 0 {
        *s = 0x9E37_79B9_7F4A_7C15;
    }
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    s.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_values() {
        // the "check" values of the CRC catalogue for the ASCII string 123456789
        assert_eq!(crc16(b"123456789"), 0xBB3D);
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        // RFC 1071 example header checksum
        let hdr = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(csum16(&hdr), 0xb861);
        assert_eq!(xor16(&[0x12, 0x34, 0x56, 0x78]), 0x1234 ^ 0x5678);
    }
}
