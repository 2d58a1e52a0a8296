//! Hashes for P4 programs: the set of the cryptographic-hashing paper plus what switches use. Keyed
//! algorithms take the key as an argument. Every algorithm writes its digest big-endian into `out`
//! (truncated or left-padded to `out.len()`), except the CRCs/checksums which are numbers and are
//! written right-aligned.

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HashAlg {
    /// CRC-16/ARC.
    Crc16,
    /// CRC-32 (IEEE 802.3).
    Crc32,
    /// CRC-32C (Castagnoli).
    Crc32c,
    /// 16-bit ones' complement Internet checksum (RFC 1071).
    Csum16,
    /// SipHash-2-4, 64-bit output, 16-byte key.
    SipHash24,
    /// HalfSipHash-2-4, 32-bit output, 8-byte key.
    HalfSipHash24,
    /// BLAKE2b with 1..=64 byte output (the length of `out`), optional key up to 64 bytes.
    Blake2b,
    /// Poly1305-AES (Bernstein): key = AES-128 key k (16) || r (16), nonce (16) → s = AES_k(nonce).
    Poly1305Aes,
    HmacSha256,
    HmacSha512,
    Sha3_512,
}

impl HashAlg {
    pub const ALL: [HashAlg; 11] = [
        HashAlg::Crc16,
        HashAlg::Crc32,
        HashAlg::Crc32c,
        HashAlg::Csum16,
        HashAlg::SipHash24,
        HashAlg::HalfSipHash24,
        HashAlg::Blake2b,
        HashAlg::Poly1305Aes,
        HashAlg::HmacSha256,
        HashAlg::HmacSha512,
        HashAlg::Sha3_512,
    ];

    /// The code a P4 program uses for this algorithm (`p4sec.p4`, `p4sec_hash_alg_t`).
    pub fn code(self) -> u8 {
        HashAlg::ALL.iter().position(|a| *a == self).unwrap() as u8
    }
    pub fn from_code(c: u64) -> Option<HashAlg> {
        HashAlg::ALL.get(c as usize).copied()
    }
    pub fn name(self) -> &'static str {
        match self {
            HashAlg::Crc16 => "CRC16",
            HashAlg::Crc32 => "CRC32",
            HashAlg::Crc32c => "CRC32C",
            HashAlg::Csum16 => "csum16",
            HashAlg::SipHash24 => "SipHash-2-4",
            HashAlg::HalfSipHash24 => "HalfSipHash-2-4",
            HashAlg::Blake2b => "BLAKE2b",
            HashAlg::Poly1305Aes => "Poly1305-AES",
            HashAlg::HmacSha256 => "HMAC-SHA-256",
            HashAlg::HmacSha512 => "HMAC-SHA-512",
            HashAlg::Sha3_512 => "SHA3-512",
        }
    }
    /// Natural output size in bytes.
    pub fn out_len(self) -> usize {
        match self {
            HashAlg::Crc16 | HashAlg::Csum16 => 2,
            HashAlg::Crc32 | HashAlg::Crc32c | HashAlg::HalfSipHash24 => 4,
            HashAlg::SipHash24 => 8,
            HashAlg::Poly1305Aes => 16,
            HashAlg::HmacSha256 => 32,
            HashAlg::Blake2b | HashAlg::HmacSha512 | HashAlg::Sha3_512 => 64,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HashError {
    BadKey(&'static str),
    BadOutput(&'static str),
}

impl std::fmt::Display for HashError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HashError::BadKey(m) | HashError::BadOutput(m) => write!(f, "{m}"),
        }
    }
}

const CRC16_ARC: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_ARC);

fn put_number(out: &mut [u8], bytes: &[u8]) {
    // right-aligned big-endian number, truncated to the low bytes if `out` is shorter
    out.iter_mut().for_each(|b| *b = 0);
    let n = bytes.len().min(out.len());
    let ol = out.len();
    out[ol - n..].copy_from_slice(&bytes[bytes.len() - n..]);
}

fn put_digest(out: &mut [u8], d: &[u8]) {
    let n = d.len().min(out.len());
    out[..n].copy_from_slice(&d[..n]);
    out[n..].iter_mut().for_each(|b| *b = 0);
}

/// RFC 1071 checksum ([`crate::checksum`]).
pub use crate::checksum::csum16;

/// HalfSipHash-2-4 with a 32-bit output (Aumasson's reference construction: 32-bit words, rotations
/// 5, 16, 8, 7 and 13, 16; `b = len << 24`; final xor with 0xff).
pub fn halfsiphash24(key: &[u8; 8], data: &[u8]) -> u32 {
    let k0 = u32::from_le_bytes([key[0], key[1], key[2], key[3]]);
    let k1 = u32::from_le_bytes([key[4], key[5], key[6], key[7]]);
    let mut v = [k0, k1, 0x6c79_6765 ^ k0, 0x7465_6462 ^ k1];
    fn round(v: &mut [u32; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(5) ^ v[0];
        v[0] = v[0].rotate_left(16);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(8) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(7) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[2];
        v[2] = v[2].rotate_left(16);
    }
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let m = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        v[3] ^= m;
        round(&mut v);
        round(&mut v);
        v[0] ^= m;
    }
    let mut b = (data.len() as u32) << 24;
    for (i, x) in chunks.remainder().iter().enumerate() {
        b |= (*x as u32) << (8 * i);
    }
    v[3] ^= b;
    round(&mut v);
    round(&mut v);
    v[0] ^= b;
    v[2] ^= 0xff;
    for _ in 0..4 {
        round(&mut v);
    }
    v[1] ^ v[3]
}

/// SipHash-2-4 of `data` under the key words `k0`, `k1` (the 16-byte key's halves read
/// little-endian, as the reference implementation does), one-shot over the whole message (the
/// streaming `Hasher::write` path buffers a tail per call). The digest is the result's 8 bytes
/// little-endian.
#[inline]
pub fn siphash24(k0: u64, k1: u64, data: &[u8]) -> u64 {
    siphasher::sip::SipHasher24::new_with_keys(k0, k1).hash(data)
}

/// Compute `alg` over `data` with `key` into `out` (its length chooses the output size where that
/// is variable: BLAKE2b 1..=64 bytes).
pub fn compute(alg: HashAlg, key: &[u8], data: &[u8], out: &mut [u8]) -> Result<(), HashError> {
    match alg {
        HashAlg::Crc16 => put_number(out, &CRC16_ARC.checksum(data).to_be_bytes()),
        HashAlg::Crc32 => put_number(out, &crc32fast::hash(data).to_be_bytes()),
        HashAlg::Crc32c => put_number(out, &crc32c::crc32c(data).to_be_bytes()),
        HashAlg::Csum16 => put_number(out, &csum16(data).to_be_bytes()),
        HashAlg::SipHash24 => {
            let k: [u8; 16] = key
                .try_into()
                .map_err(|_| HashError::BadKey("SipHash-2-4 needs a 16-byte key"))?;
            let (k0, k1) = (
                u64::from_le_bytes(k[..8].try_into().expect("8 bytes")),
                u64::from_le_bytes(k[8..].try_into().expect("8 bytes")),
            );
            put_digest(out, &siphash24(k0, k1, data).to_le_bytes());
        }
        HashAlg::HalfSipHash24 => {
            let k: [u8; 8] = key
                .try_into()
                .map_err(|_| HashError::BadKey("HalfSipHash-2-4 needs an 8-byte key"))?;
            put_digest(out, &halfsiphash24(&k, data).to_le_bytes());
        }
        HashAlg::Blake2b => {
            use blake2::digest::{Update, VariableOutput};
            if out.is_empty() || out.len() > 64 {
                return Err(HashError::BadOutput("BLAKE2b output must be 1..=64 bytes"));
            }
            if key.is_empty() {
                let mut h = blake2::Blake2bVar::new(out.len())
                    .map_err(|_| HashError::BadOutput("BLAKE2b output must be 1..=64 bytes"))?;
                h.update(data);
                h.finalize_variable(out)
                    .map_err(|_| HashError::BadOutput("BLAKE2b output size"))?;
            } else {
                if key.len() > 64 {
                    return Err(HashError::BadKey("BLAKE2b keys are at most 64 bytes"));
                }
                let mut h =
                    blake2::Blake2bMac::<blake2::digest::consts::U64>::new_with_salt_and_personal(
                        key,
                        &[],
                        &[],
                    )
                    .map_err(|_| HashError::BadKey("BLAKE2b key"))?;
                if out.len() != 64 {
                    // keyed BLAKE2b with a shorter output: the parameter block encodes the length
                    return keyed_blake2b_var(key, data, out);
                }
                blake2::digest::Mac::update(&mut h, data);
                out.copy_from_slice(&blake2::digest::Mac::finalize(h).into_bytes());
            }
        }
        HashAlg::Poly1305Aes => {
            use aes::cipher::{BlockEncrypt, KeyInit};
            if key.len() != 48 {
                return Err(HashError::BadKey(
                    "Poly1305-AES needs k (16) || r (16) || nonce (16)",
                ));
            }
            let aes = aes::Aes128::new_from_slice(&key[..16])
                .map_err(|_| HashError::BadKey("AES key"))?;
            let mut s = aes::Block::clone_from_slice(&key[32..48]);
            aes.encrypt_block(&mut s);
            let mut otk = [0u8; 32];
            otk[..16].copy_from_slice(&key[16..32]);
            otk[16..].copy_from_slice(&s);
            put_digest(out, &poly1305_tag(&otk, data));
        }
        HashAlg::HmacSha256 | HashAlg::HmacSha512 => with_hmac_key(alg, key, |k| {
            put_digest(out, ring::hmac::sign(k, data).as_ref())
        }),
        HashAlg::Sha3_512 => {
            use sha3::Digest;
            put_digest(out, &sha3::Sha3_512::digest(data));
        }
    }
    Ok(())
}

/// `compute` over the message `head ++ tail` without assembling it, for the algorithms whose
/// implementations take a message in pieces; `None` for the others (the caller concatenates).
pub fn compute2(
    alg: HashAlg,
    key: &[u8],
    head: &[u8],
    tail: &[u8],
    out: &mut [u8],
) -> Option<Result<(), HashError>> {
    let r = match alg {
        HashAlg::Crc32 => {
            let mut h = crc32fast::Hasher::new();
            h.update(head);
            h.update(tail);
            put_number(out, &h.finalize().to_be_bytes());
            Ok(())
        }
        HashAlg::SipHash24 => {
            let Ok(k) = <[u8; 16]>::try_from(key) else {
                return Some(Err(HashError::BadKey("SipHash-2-4 needs a 16-byte key")));
            };
            use std::hash::Hasher;
            let mut h = siphasher::sip::SipHasher24::new_with_key(&k);
            h.write(head);
            h.write(tail);
            put_digest(out, &h.finish().to_le_bytes());
            Ok(())
        }
        HashAlg::HmacSha256 | HashAlg::HmacSha512 => {
            with_hmac_key(alg, key, |k| {
                let mut c = ring::hmac::Context::with_key(k);
                c.update(head);
                c.update(tail);
                put_digest(out, c.sign().as_ref());
            });
            Ok(())
        }
        HashAlg::Sha3_512 => {
            use sha3::Digest;
            let mut h = sha3::Sha3_512::new();
            h.update(head);
            h.update(tail);
            put_digest(out, &h.finalize());
            Ok(())
        }
        _ => return None,
    };
    Some(r)
}

/// Run `f` with the HMAC key for (`alg`, `key`). Preparing an HMAC key hashes the padded key twice
/// (the inner and outer states): as much as the MAC of a short message. Keys change rarely (they
/// are table or register contents), so each thread keeps its last few prepared keys. The copies of
/// the raw keys it keeps for comparison are wiped when they leave the cache (`Zeroizing`).
fn with_hmac_key<R>(alg: HashAlg, key: &[u8], f: impl FnOnce(&ring::hmac::Key) -> R) -> R {
    use std::cell::RefCell;
    use zeroize::Zeroizing;
    const KEEP: usize = 4;
    thread_local! {
        static KEYS: RefCell<Vec<(HashAlg, Zeroizing<Vec<u8>>, ring::hmac::Key)>> = const { RefCell::new(Vec::new()) };
    }
    KEYS.with(|keys| {
        let mut keys = keys.borrow_mut();
        let i = match keys.iter().position(|(a, k, _)| *a == alg && k[..] == *key) {
            Some(i) => i,
            None => {
                let a = if alg == HashAlg::HmacSha256 {
                    ring::hmac::HMAC_SHA256
                } else {
                    ring::hmac::HMAC_SHA512
                };
                if keys.len() == KEEP {
                    keys.remove(0);
                }
                keys.push((
                    alg,
                    Zeroizing::new(key.to_vec()),
                    ring::hmac::Key::new(a, key),
                ));
                keys.len() - 1
            }
        };
        f(&keys[i].2)
    })
}

/// Poly1305 with a 32-byte one-time key (r || s) over a message of any length.
pub fn poly1305_tag(otk: &[u8; 32], data: &[u8]) -> [u8; 16] {
    use poly1305::universal_hash::KeyInit;
    let p = poly1305::Poly1305::new(poly1305::Key::from_slice(otk));
    p.compute_unpadded(data).into()
}

/// Keyed BLAKE2b (RFC 7693 keyed mode) with the output sizes the `blake2` crate provides as types.
fn keyed_blake2b_var(key: &[u8], data: &[u8], out: &mut [u8]) -> Result<(), HashError> {
    use blake2::digest::consts::{U16, U20, U28, U32, U48, U8};
    macro_rules! mac {
        ($n:ty) => {{
            let mut h = blake2::Blake2bMac::<$n>::new_with_salt_and_personal(key, &[], &[])
                .map_err(|_| HashError::BadKey("BLAKE2b key"))?;
            blake2::digest::Mac::update(&mut h, data);
            out.copy_from_slice(&blake2::digest::Mac::finalize(h).into_bytes());
        }};
    }
    match out.len() {
        8 => mac!(U8),
        16 => mac!(U16),
        20 => mac!(U20),
        28 => mac!(U28),
        32 => mac!(U32),
        48 => mac!(U48),
        _ => {
            return Err(HashError::BadOutput(
                "keyed BLAKE2b supports outputs of 8, 16, 20, 28, 32, 48 or 64 bytes",
            ))
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_values() {
        let mut o = [0u8; 2];
        compute(HashAlg::Crc16, &[], b"123456789", &mut o).unwrap();
        assert_eq!(o, [0xBB, 0x3D]);
        let mut o = [0u8; 4];
        compute(HashAlg::Crc32, &[], b"123456789", &mut o).unwrap();
        assert_eq!(o, 0xCBF43926u32.to_be_bytes());
        compute(HashAlg::Crc32c, &[], b"123456789", &mut o).unwrap();
        assert_eq!(o, 0xE3069283u32.to_be_bytes());
    }

    #[test]
    fn key_errors_are_values() {
        let mut o = [0u8; 8];
        assert!(compute(HashAlg::SipHash24, &[1, 2], b"x", &mut o).is_err());
        assert!(compute(HashAlg::Poly1305Aes, &[0; 10], b"x", &mut o).is_err());
        let mut big = [0u8; 65];
        assert!(compute(HashAlg::Blake2b, &[], b"x", &mut big).is_err());
    }

    /// The message in two pieces hashes like the whole message, at every split point (SipHash
    /// buffers partial 8-byte words, HMAC and SHA3 partial blocks).
    #[test]
    fn pieces_hash_like_the_whole() {
        let msg: Vec<u8> = (0..300u32).map(|i| (i * 31 + 7) as u8).collect();
        let key: Vec<u8> = (0..16u8).collect();
        for alg in [
            HashAlg::Crc32,
            HashAlg::SipHash24,
            HashAlg::HmacSha256,
            HashAlg::HmacSha512,
            HashAlg::Sha3_512,
        ] {
            let n = alg.out_len();
            let mut whole = vec![0u8; n];
            compute(alg, &key, &msg, &mut whole).unwrap();
            for split in [0, 1, 7, 8, 9, 64, 127, 128, 129, 200, 300] {
                let mut parts = vec![0u8; n];
                compute2(alg, &key, &msg[..split], &msg[split..], &mut parts)
                    .expect("streaming")
                    .unwrap();
                assert_eq!(parts, whole, "{} split at {split}", alg.name());
            }
        }
        assert!(compute2(HashAlg::Blake2b, &key, b"a", b"b", &mut [0u8; 8]).is_none());
        assert!(
            compute2(HashAlg::SipHash24, &[1], b"a", b"b", &mut [0u8; 8])
                .expect("answered")
                .is_err()
        );
    }

    #[test]
    fn hmac_keys_kept_per_thread_never_mix() {
        // more keys than the thread keeps, in rotation, both algorithms, and keys that are prefixes
        // of others
        let keys: Vec<Vec<u8>> = (0..7u8)
            .map(|i| vec![i; 16 + i as usize % 3])
            .chain([vec![1u8; 17][..16].to_vec()])
            .collect();
        for round in 0..3 {
            for (i, k) in keys.iter().enumerate() {
                for (alg, ring_alg) in [
                    (HashAlg::HmacSha256, ring::hmac::HMAC_SHA256),
                    (HashAlg::HmacSha512, ring::hmac::HMAC_SHA512),
                ] {
                    let msg = [round as u8, i as u8, 42];
                    let want = ring::hmac::sign(&ring::hmac::Key::new(ring_alg, k), &msg);
                    let mut out = vec![0u8; want.as_ref().len()];
                    compute(alg, k, &msg, &mut out).unwrap();
                    assert_eq!(out, want.as_ref(), "{alg:?} key {i} round {round}");
                    compute2(alg, k, &msg[..1], &msg[1..], &mut out)
                        .unwrap()
                        .unwrap();
                    assert_eq!(
                        out,
                        want.as_ref(),
                        "{alg:?} key {i} round {round} in two pieces"
                    );
                }
            }
        }
    }
}
