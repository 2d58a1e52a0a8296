//! `ipsec_crypt`: the extern interface of the P4-IPsec prototype (BMv2), so that programs written
//! for it run on p4sec unchanged. The program declares the extern itself:
//!
//! ```p4
//! extern ipsec_crypt {
//!     ipsec_crypt();
//!     void decrypt_aes_ctr(inout ipv4_t ipv4, inout esp_t esp, inout standard_metadata_t standard_metadata,
//!                          in bit<160> key, in bit<128> key_hmac);
//!     void encrypt_aes_ctr(inout ipv4_t ipv4, inout esp_t esp, in bit<160> key, in bit<128> key_hmac);
//!     void encrypt_null(inout ipv4_t ipv4, inout esp_t esp);
//!     void decrypt_null(inout ipv4_t ipv4, inout esp_t esp, inout standard_metadata_t standard_metadata);
//! }
//! ```
//!
//! Wire format, as the prototype produces it (ESP tunnel mode, RFC 4303 framing):
//! - encrypt: the ESP payload is the parsed IPv4 header (the inner one) + the packet payload, zero
//!   padding to a multiple of 16 bytes (AES-CTR) or none (NULL), pad length, next header 4. AES-CTR
//!   (RFC 3686): `key` is the 128-bit AES key followed by the 32-bit nonce; counter block nonce |
//!   IV | 1; a random 8-byte IV precedes the ciphertext. The ICV is HMAC-MD5 over ESP header | IV |
//!   ciphertext, truncated to 12 bytes. The payload becomes IV | ciphertext | ICV and
//!   `ipv4.totalLen` the outer length; the program then rewrites the other IPv4 fields.
//! - decrypt: the ICV is checked first (in constant time); on a mismatch, a truncated packet or bad
//!   padding the packet is marked for drop (`egress_spec` = 511) and left as it is (the prototype
//!   went on decrypting). Else the inner IPv4 header replaces `ipv4` and the payload becomes the
//!   inner payload.
//!
//! Crypto: RustCrypto's `aes`/`ctr`, `hmac`/`md-5`; the IV from the OS CSPRNG.

use crate::iface::{BitBuf, Dir, ExternError, ExternObject, ExternType, MethodSig, Payload};
use hmac::Mac;

pub struct IpsecCryptType;

impl ExternType for IpsecCryptType {
    fn name(&self) -> &str {
        "ipsec_crypt"
    }
    fn instantiate(&self, _: &str, _: &[BitBuf]) -> Result<Box<dyn ExternObject>, String> {
        Ok(Box::new(IpsecCrypt))
    }
}

struct IpsecCrypt;

const ENCRYPT_CTR: u32 = 0;
const DECRYPT_CTR: u32 = 1;
const ENCRYPT_NULL: u32 = 2;
const DECRYPT_NULL: u32 = 3;
const ICV_LEN: usize = 12;
const IV_LEN: usize = 8;
const NEXT_HEADER_IPV4: u8 = 4;

/// standard_metadata_t starts with ingress_port (9 bits), then egress_spec (9 bits).
fn mark_drop(sm: &mut BitBuf) {
    let pad = sm.bytes.len() * 8 - sm.width as usize;
    let start = pad + 9;
    for i in 0..9 {
        let bit = start + i;
        sm.bytes[bit / 8] |= 0x80 >> (bit % 8);
    }
}

fn aes_ctr(key: &[u8], nonce: &[u8], iv: &[u8], data: &mut [u8]) {
    use ctr::cipher::{KeyIvInit, StreamCipher};
    let mut block = [0u8; 16];
    block[..4].copy_from_slice(nonce);
    block[4..12].copy_from_slice(iv);
    block[15] = 1;
    let mut c = ctr::Ctr32BE::<aes::Aes128>::new(key.into(), (&block).into());
    c.apply_keystream(data);
}

fn icv(key: &[u8], esp: &[u8], body: &[u8]) -> [u8; ICV_LEN] {
    let mut m =
        <hmac::Hmac<md5::Md5> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    m.update(esp);
    m.update(body);
    let full = m.finalize().into_bytes();
    let mut out = [0u8; ICV_LEN];
    out.copy_from_slice(&full[..ICV_LEN]);
    out
}

/// The outer IPv4 total length: the prototype's 20-byte header + 8-byte ESP header + the ESP
/// payload.
fn set_total_len(ipv4: &mut BitBuf, payload_len: usize) {
    let v = (payload_len + 28) as u16;
    ipv4.bytes[2..4].copy_from_slice(&v.to_be_bytes());
}

/// The inner packet after decryption, `payload[from..to]` = inner packet || padding || pad length
/// || next header: its IPv4 header into `ipv4`, the rest becomes the payload (moved to the front).
/// False when the padding or the length is impossible.
fn take_inner(ipv4: &mut BitBuf, payload: &mut Vec<u8>, from: usize, to: usize) -> bool {
    if to < from + 2 {
        return false;
    }
    let pad = payload[to - 2] as usize;
    if from + 2 + pad + 20 > to {
        return false;
    }
    let end = to - 2 - pad;
    ipv4.bytes.copy_from_slice(&payload[from..from + 20]);
    payload.copy_within(from + 20..end, 0);
    payload.truncate(end - from - 20);
    true
}

impl ExternObject for IpsecCrypt {
    fn resolve(&self, sig: &MethodSig) -> Result<u32, String> {
        let a = sig.args.as_slice();
        match (sig.name.as_str(), a) {
            ("encrypt_aes_ctr", [(Dir::InOut, 160), (Dir::InOut, 64), (Dir::In, 160), (Dir::In, 128)]) => Ok(ENCRYPT_CTR),
            ("decrypt_aes_ctr", [(Dir::InOut, 160), (Dir::InOut, 64), (Dir::InOut, sm), (Dir::In, 160), (Dir::In, 128)]) if *sm > 18 => Ok(DECRYPT_CTR),
            ("encrypt_null", [(Dir::InOut, 160), (Dir::InOut, 64)]) => Ok(ENCRYPT_NULL),
            ("decrypt_null", [(Dir::InOut, 160), (Dir::InOut, 64), (Dir::InOut, sm)]) if *sm > 18 => Ok(DECRYPT_NULL),
            (n, _) => Err(format!(
                "ipsec_crypt.{n}: expected the P4-IPsec prototype's signature (a 20-byte ipv4_t, an 8-byte esp_t, standard_metadata_t, \
                 bit<160> key and nonce, bit<128> HMAC key)"
            )),
        }
    }

    fn call(
        &self,
        method: u32,
        args: &mut [BitBuf],
        _ret: Option<&mut BitBuf>,
        payload: &mut Payload<'_>,
    ) -> Result<(), ExternError> {
        // everything happens in the packet's own payload buffer (no allocation once it has grown to
        // size)
        let (ipv4, rest) = args.split_at_mut(1);
        let ipv4 = &mut ipv4[0];
        let mut esp = [0u8; 8];
        esp.copy_from_slice(&rest[0].bytes[..8]);
        let p: &mut Vec<u8> = payload.vec_mut();
        match method {
            ENCRYPT_NULL => {
                // ipv4 header || payload || pad length 0 || next header
                let n = p.len();
                p.resize(20 + n + 2, 0);
                p.copy_within(0..n, 20);
                p[..20].copy_from_slice(&ipv4.bytes);
                p[20 + n + 1] = NEXT_HEADER_IPV4;
                set_total_len(ipv4, p.len());
                Ok(())
            }
            ENCRYPT_CTR => {
                // IV || AES-CTR(ipv4 header || payload || padding || pad length || next header) ||
                // ICV
                let n = 20 + p.len();
                let pad = (16 - n % 16) % 16;
                let body = IV_LEN + n + pad + 2;
                let old = p.len();
                p.resize(body + ICV_LEN, 0);
                p.copy_within(0..old, IV_LEN + 20);
                p[IV_LEN..IV_LEN + 20].copy_from_slice(&ipv4.bytes);
                p[IV_LEN + n..IV_LEN + n + pad].fill(0);
                p[body - 2] = pad as u8;
                p[body - 1] = NEXT_HEADER_IPV4;
                let (key, hkey) = (&rest[1].bytes, &rest[2].bytes);
                let mut iv = [0u8; IV_LEN];
                getrandom::getrandom(&mut iv).map_err(|e| {
                    ExternError::BadArgument(format!("no randomness for the IV: {e}"))
                })?;
                p[..IV_LEN].copy_from_slice(&iv);
                aes_ctr(&key[..16], &key[16..20], &iv, &mut p[IV_LEN..body]);
                let tag = icv(hkey, &esp, &p[..body]);
                p[body..].copy_from_slice(&tag);
                set_total_len(ipv4, p.len());
                Ok(())
            }
            DECRYPT_CTR => {
                let (sm, keys) = rest[1..].split_at_mut(1);
                let (key, hkey) = (&keys[0].bytes, &keys[1].bytes);
                if p.len() < IV_LEN + 2 + ICV_LEN {
                    mark_drop(&mut sm[0]);
                    return Ok(());
                }
                let body = p.len() - ICV_LEN;
                let mut m = <hmac::Hmac<md5::Md5> as Mac>::new_from_slice(hkey)
                    .expect("HMAC takes any key length");
                m.update(&esp);
                m.update(&p[..body]);
                if m.verify_truncated_left(&p[body..]).is_err() {
                    mark_drop(&mut sm[0]);
                    return Ok(());
                }
                let mut iv = [0u8; IV_LEN];
                iv.copy_from_slice(&p[..IV_LEN]);
                aes_ctr(&key[..16], &key[16..20], &iv, &mut p[IV_LEN..body]);
                if !take_inner(ipv4, p, IV_LEN, body) {
                    mark_drop(&mut sm[0]);
                }
                Ok(())
            }
            DECRYPT_NULL => {
                let n = p.len();
                if !take_inner(ipv4, p, 0, n) {
                    mark_drop(&mut rest[1]);
                }
                Ok(())
            }
            m => Err(ExternError::UnknownMethod(m)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buf(width: u32, bytes: &[u8]) -> BitBuf {
        let mut b = BitBuf::zero(width);
        b.set_bytes(bytes);
        b
    }

    fn ipv4() -> Vec<u8> {
        let mut h = vec![
            0x45, 0, 0, 40, 0, 1, 0, 0, 64, 17, 0, 0, 10, 1, 0, 1, 10, 2, 0, 2,
        ];
        let c = crate::checksum::csum16(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        h
    }

    fn sm() -> BitBuf {
        BitBuf::zero(300)
    }

    fn egress_spec(sm: &BitBuf) -> u64 {
        let pad = sm.bytes.len() * 8 - sm.width as usize;
        (0..9).fold(0, |v, i| {
            let bit = pad + 9 + i;
            (v << 1) | ((sm.bytes[bit / 8] >> (7 - bit % 8)) & 1) as u64
        })
    }

    #[test]
    fn aes_ctr_round_trip_and_tamper() {
        let key: Vec<u8> = (0..20).collect();
        let hkey: Vec<u8> = (100..116).collect();
        let inner_payload = b"twenty bytes of udp!".to_vec();
        let mut args = vec![
            buf(160, &ipv4()),
            buf(64, &[0, 0, 1, 0, 0, 0, 0, 1]),
            buf(160, &key),
            buf(128, &hkey),
        ];
        let mut p = inner_payload.clone();
        IpsecCrypt
            .call(ENCRYPT_CTR, &mut args, None, &mut Payload::owned(&mut p))
            .unwrap();
        // IV + (20 + 20 -> 40, padded to 48) + 2 + ICV
        assert_eq!(p.len(), 8 + 48 + 2 + 12);
        assert_eq!(
            u16::from_be_bytes([args[0].bytes[2], args[0].bytes[3]]) as usize,
            p.len() + 28
        );
        assert!(!p
            .windows(inner_payload.len())
            .any(|w| w == &inner_payload[..]));

        let wire = p.clone();
        let mut d = vec![
            buf(160, &[0; 20]),
            buf(64, &[0, 0, 1, 0, 0, 0, 0, 1]),
            sm(),
            buf(160, &key),
            buf(128, &hkey),
        ];
        IpsecCrypt
            .call(DECRYPT_CTR, &mut d, None, &mut Payload::owned(&mut p))
            .unwrap();
        assert_eq!(d[0].bytes, ipv4());
        assert_eq!(p, inner_payload);
        assert_eq!(egress_spec(&d[2]), 0);

        // a flipped bit or another sequence number in the ESP header: dropped, the packet left
        // alone
        for (i, seq) in [(10usize, 1u8), (0, 2)] {
            let mut t = wire.clone();
            t[i] ^= if seq == 1 { 0x01 } else { 0 };
            let mut d = vec![
                buf(160, &[0; 20]),
                buf(64, &[0, 0, 1, 0, 0, 0, 0, seq]),
                sm(),
                buf(160, &key),
                buf(128, &hkey),
            ];
            IpsecCrypt
                .call(DECRYPT_CTR, &mut d, None, &mut Payload::owned(&mut t))
                .unwrap();
            assert_eq!(egress_spec(&d[2]), 511);
            assert_eq!(d[0].bytes, vec![0; 20]);
        }
        // truncated
        let mut t = wire[..15].to_vec();
        let mut d = vec![
            buf(160, &[0; 20]),
            buf(64, &[0; 8]),
            sm(),
            buf(160, &key),
            buf(128, &hkey),
        ];
        IpsecCrypt
            .call(DECRYPT_CTR, &mut d, None, &mut Payload::owned(&mut t))
            .unwrap();
        assert_eq!(egress_spec(&d[2]), 511);
    }

    #[test]
    fn null_round_trip() {
        let mut args = vec![buf(160, &ipv4()), buf(64, &[0; 8])];
        let mut p = b"hello".to_vec();
        IpsecCrypt
            .call(ENCRYPT_NULL, &mut args, None, &mut Payload::owned(&mut p))
            .unwrap();
        assert_eq!(p.len(), 20 + 5 + 2);
        assert_eq!(&p[..20], &ipv4()[..]);
        let mut d = vec![buf(160, &[0; 20]), buf(64, &[0; 8]), sm()];
        IpsecCrypt
            .call(DECRYPT_NULL, &mut d, None, &mut Payload::owned(&mut p))
            .unwrap();
        assert_eq!(p, b"hello");
        assert_eq!(d[0].bytes, ipv4());
    }
}
