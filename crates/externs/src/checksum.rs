//! The Internet checksum (RFC 1071): the 16-bit one's complement sum of a byte string taken as
//! big-endian words, an odd last byte padded with zero. The one implementation in the workspace:
//! the `csum16` hash, the engine's `verify_checksum`/`update_checksum` (compiled and interpreted),
//! the ESP extern's inner headers and the switch's checksum offload (segmentation, coalescing,
//! partial checksums completed) all use it.

/// `sum` folded to 16 bits with end-around carry (zero only when `sum` is).
#[inline]
pub fn fold<S: Into<u64>>(sum: S) -> u16 {
    let mut sum: u64 = sum.into();
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The 16-bit one's complement sum of `data` (big-endian words, an odd last byte padded with zero),
/// folded and not complemented: a partial sum to add to others (a pseudo-header's) before [`fold`].
/// Eight bytes at a time in native order: the one's complement sum does not depend on the byte
/// order except for a swap of the result (RFC 1071).
#[inline]
pub fn ones_sum(data: &[u8]) -> u16 {
    let mut acc: u64 = 0;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        acc += (w & 0xffff_ffff) + (w >> 32);
    }
    let mut tail = [0u8; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    let w = u64::from_ne_bytes(tail);
    acc += (w & 0xffff_ffff) + (w >> 32);
    u16::from_be(fold(acc))
}

/// The Internet checksum of `data`: the one's complement of [`ones_sum`] (zero over a header whose
/// checksum field is right).
#[inline]
pub fn csum16(data: &[u8]) -> u16 {
    !ones_sum(data)
}

/// The Internet checksum of `data` as if its 16-bit word at byte `skip` were zero (`skip` and
/// `data.len()` even): what a header's checksum field is computed as, or checked against, without
/// zeroing it first. Big-endian 32-bit lanes (the last one zero-padded): each 16-bit word counts
/// with weight 1 or 2^16, both 1 modulo 0xffff.
#[inline]
pub fn csum16_without(data: &[u8], skip: usize) -> u16 {
    let len = data.len();
    let mut sum: u64 = 0;
    let mut i = 0;
    while i + 8 <= len {
        let x = u64::from_be_bytes([
            data[i],
            data[i + 1],
            data[i + 2],
            data[i + 3],
            data[i + 4],
            data[i + 5],
            data[i + 6],
            data[i + 7],
        ]);
        sum += (x >> 32) + (x & 0xffff_ffff);
        i += 8;
    }
    if i + 4 <= len {
        sum += u32::from_be_bytes([data[i], data[i + 1], data[i + 2], data[i + 3]]) as u64;
        i += 4;
    }
    if i + 2 <= len {
        sum += (u16::from_be_bytes([data[i], data[i + 1]]) as u64) << 16;
    }
    // without the skipped word, so that the sum is zero only when all other words are
    let w = u16::from_be_bytes([data[skip], data[skip + 1]]) as u64;
    sum -= if skip.is_multiple_of(4) { w << 16 } else { w };
    !fold(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ones_complement_sums() {
        let simple = |d: &[u8]| {
            let mut sum: u64 = d
                .chunks(2)
                .map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u64)
                .sum();
            while sum >> 16 != 0 {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            sum as u16
        };
        let mut x: u32 = 12345;
        let data: Vec<u8> = (0..3000)
            .map(|_| {
                x = x.wrapping_mul(1103515245).wrapping_add(12345);
                (x >> 16) as u8
            })
            .collect();
        for start in 0..9 {
            for len in [
                0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1499, 1500, 2991,
            ] {
                let d = &data[start..start + len];
                assert_eq!(ones_sum(d), simple(d), "start {start} len {len}");
                assert_eq!(csum16(d), !simple(d), "start {start} len {len}");
            }
        }
        assert_eq!(ones_sum(&[0xff; 64]), 0xffff);
        assert_eq!(fold(0x1_fffe_u32), 0xffff);
        assert_eq!(fold(0u64), 0);
    }

    #[test]
    fn rfc1071_header() {
        // an IPv4 header with its checksum field zeroed, and with the checksum in place
        let mut hdr = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(csum16(&hdr), 0xb861);
        hdr[10..12].copy_from_slice(&0xb861u16.to_be_bytes());
        assert_eq!(csum16(&hdr), 0);
        assert_eq!(ones_sum(&hdr), 0xffff);
    }

    #[test]
    fn checksum_without_a_word_is_the_checksum_with_it_zeroed() {
        let mut x: u32 = 7;
        let mut next = || {
            x = x.wrapping_mul(1103515245).wrapping_add(12345);
            (x >> 16) as u8
        };
        for len in [2usize, 4, 6, 8, 10, 18, 20, 24, 40, 60] {
            for skip in (0..len).step_by(2) {
                for zero in [false, true] {
                    let data: Vec<u8> = (0..len)
                        .map(|i| if zero && i != skip { 0 } else { next() })
                        .collect();
                    let mut zeroed = data.clone();
                    zeroed[skip..skip + 2].fill(0);
                    assert_eq!(
                        csum16_without(&data, skip),
                        csum16(&zeroed),
                        "len {len} skip {skip}"
                    );
                }
            }
        }
        // all other words zero: the checksum of nothing, 0xffff
        assert_eq!(csum16_without(&[0, 0, 0x12, 0x34, 0, 0], 2), 0xffff);
    }
}
