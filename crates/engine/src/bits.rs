//! Fixed-width bit-string arithmetic for values wider than 64 bits (up to `MAX_WIDTH`), without
//! allocation. Values narrower than 65 bits take the `u64` fast path in the interpreter instead.
//! Also bit strings packed most significant bit first: [`BitWriter`] (emitted headers, extern
//! arguments, checksum data) and [`read_wide`].

use p4sec_externs::layout::read_bits;
use p4sec_ir::MAX_WIDTH;

pub const WORDS: usize = (MAX_WIDTH as usize).div_ceil(64);

/// A bit string of up to `MAX_WIDTH` bits, least significant word first.
pub type Wide = [u64; WORDS];

pub const ZERO: Wide = [0; WORDS];

#[inline]
pub fn mask64(width: u32) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

/// Clear the bits at and above `width`.
pub fn truncate(v: &mut Wide, width: u32) {
    for (i, w) in v.iter_mut().enumerate() {
        let lo = i as u32 * 64;
        if lo >= width {
            *w = 0;
        } else if width - lo < 64 {
            *w &= mask64(width - lo);
        }
    }
}

pub fn from_u64(x: u64) -> Wide {
    let mut v = ZERO;
    v[0] = x;
    v
}

pub fn not(a: &Wide, width: u32) -> Wide {
    let mut r = ZERO;
    for i in 0..WORDS {
        r[i] = !a[i];
    }
    truncate(&mut r, width);
    r
}

pub fn add(a: &Wide, b: &Wide, width: u32) -> Wide {
    let mut r = ZERO;
    let mut carry = 0u64;
    for i in 0..WORDS {
        let (s1, c1) = a[i].overflowing_add(b[i]);
        let (s2, c2) = s1.overflowing_add(carry);
        r[i] = s2;
        carry = (c1 || c2) as u64;
    }
    truncate(&mut r, width);
    r
}

pub fn neg(a: &Wide, width: u32) -> Wide {
    add(&not(a, width), &from_u64(1), width)
}

pub fn sub(a: &Wide, b: &Wide, width: u32) -> Wide {
    add(a, &neg(b, width), width)
}

pub fn mul(a: &Wide, b: &Wide, width: u32) -> Wide {
    let mut r = ZERO;
    for i in 0..WORDS {
        if a[i] == 0 {
            continue;
        }
        let mut carry: u128 = 0;
        for j in 0..WORDS - i {
            let cur = r[i + j] as u128 + (a[i] as u128) * (b[j] as u128) + carry;
            r[i + j] = cur as u64;
            carry = cur >> 64;
        }
    }
    truncate(&mut r, width);
    r
}

pub fn cmp(a: &Wide, b: &Wide) -> std::cmp::Ordering {
    for i in (0..WORDS).rev() {
        match a[i].cmp(&b[i]) {
            std::cmp::Ordering::Equal => continue,
            o => return o,
        }
    }
    std::cmp::Ordering::Equal
}

pub fn is_zero(a: &Wide) -> bool {
    a.iter().all(|w| *w == 0)
}

pub fn bit(a: &Wide, i: u32) -> bool {
    (i as usize) < WORDS * 64 && (a[(i / 64) as usize] >> (i % 64)) & 1 == 1
}

pub fn shl(a: &Wide, n: u32, width: u32) -> Wide {
    let mut r = ZERO;
    if n as usize >= WORDS * 64 {
        return r;
    }
    let (ws, bs) = ((n / 64) as usize, n % 64);
    for i in (ws..WORDS).rev() {
        let src = i - ws;
        r[i] = a[src] << bs;
        if bs > 0 && src > 0 {
            r[i] |= a[src - 1] >> (64 - bs);
        }
    }
    truncate(&mut r, width);
    r
}

pub fn shr(a: &Wide, n: u32) -> Wide {
    let mut r = ZERO;
    if n as usize >= WORDS * 64 {
        return r;
    }
    let (ws, bs) = ((n / 64) as usize, n % 64);
    for (i, ri) in r.iter_mut().enumerate().take(WORDS - ws) {
        let src = i + ws;
        *ri = a[src] >> bs;
        if bs > 0 && src + 1 < WORDS {
            *ri |= a[src + 1] << (64 - bs);
        }
    }
    r
}

/// Sign-extend a `from`-bit value to `to` bits.
pub fn sign_extend(a: &Wide, from: u32, to: u32) -> Wide {
    let mut r = *a;
    if from > 0 && from < to && bit(a, from - 1) {
        for i in from..to.min(WORDS as u32 * 64) {
            r[(i / 64) as usize] |= 1 << (i % 64);
        }
    }
    truncate(&mut r, to);
    r
}

/// Bits `[hi:lo]` as a new value.
pub fn slice(a: &Wide, hi: u32, lo: u32) -> Wide {
    let mut r = shr(a, lo);
    truncate(&mut r, hi - lo + 1);
    r
}

/// Unsigned division and remainder (long division; only used for rare wide operands).
pub fn divmod(a: &Wide, b: &Wide, width: u32) -> (Wide, Wide) {
    if is_zero(b) {
        return (ZERO, ZERO);
    }
    let mut q = ZERO;
    let mut r = ZERO;
    for i in (0..width).rev() {
        r = shl(&r, 1, MAX_WIDTH);
        if bit(a, i) {
            r[0] |= 1;
        }
        if cmp(&r, b) != std::cmp::Ordering::Less {
            r = sub(&r, b, MAX_WIDTH);
            q[(i / 64) as usize] |= 1 << (i % 64);
        }
    }
    (q, r)
}

/// Appends bit fields MSB first to a byte vector through a 128-bit accumulator.
#[derive(Default, Clone, Copy, Debug)]
pub struct BitWriter {
    pub(crate) acc: u128,
    pub(crate) n: u32,
}

impl BitWriter {
    #[inline]
    pub fn put(&mut self, out: &mut Vec<u8>, v: u64, width: u32) {
        if width == 0 {
            return;
        }
        self.acc = (self.acc << width) | (v & mask64(width)) as u128;
        self.n += width;
        if self.n >= 64 {
            let x = (self.acc >> (self.n - 64)) as u64;
            out.extend_from_slice(&x.to_be_bytes());
            self.n -= 64;
            self.acc &= (1u128 << self.n) - 1;
        }
    }
    pub fn put_wide(&mut self, out: &mut Vec<u8>, v: &Wide, width: u32) {
        let mut remaining = width;
        while remaining > 0 {
            let chunk = if remaining.is_multiple_of(64) {
                64
            } else {
                remaining % 64
            };
            let x = slice(v, remaining - 1, remaining - chunk)[0];
            self.put(out, x, chunk);
            remaining -= chunk;
        }
    }
    /// Flush the pending bits, padding the last byte with zeros.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        while self.n >= 8 {
            out.push((self.acc >> (self.n - 8)) as u8);
            self.n -= 8;
        }
        if self.n > 0 {
            out.push((self.acc << (8 - self.n)) as u8);
        }
        self.acc = 0;
        self.n = 0;
    }
}

/// `width` bits of `data` from bit `pos` (MSB first), as a wide value.
pub fn read_wide(data: &[u8], pos: usize, width: u32) -> Wide {
    let mut v = ZERO;
    let mut done = 0;
    while done < width {
        let chunk = (width - done).min(64);
        let x = read_bits(data, pos + done as usize, chunk);
        v = shl(&v, chunk, MAX_WIDTH);
        v[0] |= x;
        done += chunk;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_carries_across_words() {
        let mut a = ZERO;
        a[0] = u64::MAX;
        let r = add(&a, &from_u64(1), 128);
        assert_eq!(r[0], 0);
        assert_eq!(r[1], 1);
        let r = add(&a, &from_u64(1), 64);
        assert!(is_zero(&r));
    }

    #[test]
    fn shifts_and_slices() {
        let a = from_u64(0xABCD);
        let s = shl(&a, 120, 128);
        assert_eq!(s[1] >> 56, 0xCD);
        assert_eq!(slice(&s, 127, 120)[0], 0xCD);
        assert_eq!(shr(&s, 120)[0], 0xCD);
    }

    #[test]
    fn mul_div() {
        let a = from_u64(1 << 40);
        let p = mul(&a, &a, 128);
        assert_eq!(p[1], 1 << 16);
        let (q, r) = divmod(&p, &a, 128);
        assert_eq!(q[0], 1 << 40);
        assert!(is_zero(&r));
        let n = neg(&from_u64(1), 100);
        assert_eq!(n[1], (1 << 36) - 1);
        let e = sign_extend(&from_u64(0x80), 8, 100);
        assert_eq!(e[0], 0xffff_ffff_ffff_ff80);
    }
}
