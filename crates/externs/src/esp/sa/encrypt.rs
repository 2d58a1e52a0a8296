//! Outbound: encapsulating an inner packet into ESP (tunnel mode), with padding, encryption and the
//! ICV.

use super::*;

impl Sa {
    /// Encapsulate an inner IPv4/IPv6 packet. `out` receives the outer IP header (if the SA has
    /// tunnel endpoints), the ESP header, IV, ciphertext and ICV.
    pub fn encapsulate(&self, inner: &[u8], out: &mut Vec<u8>) -> Result<u64, EspError> {
        self.seal(&[], inner, out, None, 0).map(|(seq, _)| seq)
    }

    /// [`Sa::encapsulate`] of the inner packet `head ++ body`, read where its two parts lie.
    pub fn encapsulate_parts(
        &self,
        head: &[u8],
        body: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<u64, EspError> {
        self.seal(head, body, out, None, 0).map(|(seq, _)| seq)
    }

    /// Encapsulate the inner packet `head ++ body` (e.g. a parsed IP header and the rest of the
    /// packet, read where they lie: the inner packet is copied once, into `out`, and encrypted
    /// there). The outer IP header goes to `outer` (the SA's tunnel endpoints: 20 bytes for IPv4,
    /// 40 for IPv6, 0 without a tunnel; the length is returned with the sequence number); `out`
    /// receives the ESP header, IV, ciphertext and ICV. The same bytes as [`Sa::encapsulate`] of
    /// the concatenation, split after the outer header.
    pub fn encapsulate_split(
        &self,
        head: &[u8],
        body: &[u8],
        outer: &mut [u8; 40],
        out: &mut Vec<u8>,
    ) -> Result<(u64, usize), EspError> {
        self.seal(head, body, out, Some(outer), 0)
    }

    /// [`Sa::encapsulate_split`] with `headroom` bytes (zeros) in `out` in front of the ESP: room
    /// for the headers a switch puts in front of it on the way out.
    pub fn encapsulate_split_at(
        &self,
        head: &[u8],
        body: &[u8],
        outer: &mut [u8; 40],
        out: &mut Vec<u8>,
        headroom: usize,
    ) -> Result<(u64, usize), EspError> {
        self.seal(head, body, out, Some(outer), headroom)
    }

    /// [`Sa::encapsulate`] of `head ++ body`, the outer header into `outer` when given (else in
    /// front of the ESP in `out`); the sequence number and the outer header's length. `headroom`
    /// zero bytes go in front of everything in `out`.
    fn seal(
        &self,
        head: &[u8],
        body: &[u8],
        out: &mut Vec<u8>,
        outer_to: Option<&mut [u8; 40]>,
        headroom: usize,
    ) -> Result<(u64, usize), EspError> {
        let inner_len = head.len() + body.len();
        let next_header = match head.first().or(body.first()).map(|b| b >> 4) {
            Some(4) => 4u8,
            Some(6) => 41u8,
            _ => return Err(EspError::BadInner),
        };
        let seq = {
            let mut s = self.lock();
            let next = s.seq.checked_add(1).ok_or(EspError::SeqOverflow)?;
            if !self.cfg.esn && next > u32::MAX as u64 {
                return Err(EspError::SeqOverflow);
            }
            self.account(&mut s, inner_len)?;
            s.seq = next;
            next
        };
        out.clear();
        let c = self.cfg.cipher;
        let iv_len = c.iv_len();
        let icv_len = if c.is_aead() {
            16
        } else {
            self.cfg.integ.icv_len()
        };
        let blk = c.block();
        let pad = (blk - (inner_len + 2) % blk) % blk;
        let payload_len = inner_len + pad + 2;
        let esp_len = 8 + iv_len + payload_len + icv_len;
        // ESP in UDP: a UDP header in front of the ESP header
        let udp = self.cfg.udp_encap;
        let udp_len = if udp.is_some() { 8 } else { 0 };
        let proto = if udp.is_some() { 17 } else { 50 };
        // outer header
        let mut h = [0u8; 40];
        let outer_len = match self.cfg.tunnel {
            Some((IpAddr::V4(s), IpAddr::V4(d))) => {
                let total = 20 + udp_len + esp_len;
                if total > 65535 {
                    return Err(EspError::BadInner);
                }
                h[0] = 0x45;
                h[2..4].copy_from_slice(&(total as u16).to_be_bytes());
                // the identification counts up with the sequence number (DF is set: RFC 6864 lets
                // it be anything), so that consecutive packets of an SA can be joined into GSO
                // super-frames and cut again into the same packets
                h[4..6].copy_from_slice(&(seq as u16).to_be_bytes());
                h[6] = 0x40; // DF
                h[8] = 64;
                h[9] = proto;
                h[12..16].copy_from_slice(&s.octets());
                h[16..20].copy_from_slice(&d.octets());
                let ck = crate::hash::csum16(&h[..20]);
                h[10..12].copy_from_slice(&ck.to_be_bytes());
                20
            }
            Some((IpAddr::V6(s), IpAddr::V6(d))) => {
                if udp_len + esp_len > 65535 {
                    return Err(EspError::BadInner);
                }
                h[0] = 0x60;
                h[4..6].copy_from_slice(&((udp_len + esp_len) as u16).to_be_bytes());
                h[6] = proto;
                h[7] = 64;
                h[8..24].copy_from_slice(&s.octets());
                h[24..40].copy_from_slice(&d.octets());
                40
            }
            _ => 0,
        };
        out.reserve(headroom + outer_len + udp_len + esp_len);
        out.resize(headroom, 0);
        let udp_at = match outer_to {
            Some(o) => {
                *o = h;
                headroom
            }
            None => {
                out.extend_from_slice(&h[..outer_len]);
                headroom + outer_len
            }
        };
        if let Some((sport, dport)) = udp {
            out.extend_from_slice(&sport.to_be_bytes());
            out.extend_from_slice(&dport.to_be_bytes());
            out.extend_from_slice(&((8 + esp_len) as u16).to_be_bytes());
            out.extend_from_slice(&[0, 0]);
        }
        let esp = udp_at + udp_len;
        out.extend_from_slice(&self.cfg.spi.to_be_bytes());
        out.extend_from_slice(&(seq as u32).to_be_bytes());
        // IV: the sequence number for counter-based modes (unique per SA), random for CBC
        let iv_at = out.len();
        match c {
            Cipher::Null => {}
            Cipher::AesCbc128 | Cipher::AesCbc256 => {
                let mut iv = [0u8; 16];
                self.random_iv(seq, &mut iv);
                out.extend_from_slice(&iv);
            }
            _ => out.extend_from_slice(&seq.to_be_bytes()),
        }
        let pt_at = out.len();
        out.extend_from_slice(head);
        out.extend_from_slice(body);
        // padding 1, 2, 3, ... (shorter than a cipher block, at most 16 bytes), pad length, next
        // header
        const PAD: [u8; 16] = {
            let mut p = [0u8; 16];
            let mut i = 0;
            while i < 16 {
                p[i] = i as u8 + 1;
                i += 1;
            }
            p
        };
        out.extend_from_slice(&PAD[..pad]);
        out.extend_from_slice(&[pad as u8, next_header]);
        let seq_hi = if self.cfg.esn {
            Some((seq >> 32) as u32)
        } else {
            None
        };
        match &self.keys {
            Keys::Null => {}
            Keys::Cbc128(_) | Keys::Cbc256(_) => {
                use cbc::cipher::BlockEncryptMut;
                let iv: [u8; 16] = out[iv_at..iv_at + 16].try_into().unwrap();
                let buf = &mut out[pt_at..];
                let n = buf.len();
                use cbc::cipher::InnerIvInit;
                let r = match &self.keys {
                    Keys::Cbc128(k) => {
                        cbc::Encryptor::<aes::Aes128>::inner_iv_init(k.clone(), (&iv).into())
                            .encrypt_padded_mut::<cbc::cipher::block_padding::NoPadding>(buf, n)
                            .map(|_| ())
                    }
                    Keys::Cbc256(k) => {
                        cbc::Encryptor::<aes::Aes256>::inner_iv_init(k.clone(), (&iv).into())
                            .encrypt_padded_mut::<cbc::cipher::block_padding::NoPadding>(buf, n)
                            .map(|_| ())
                    }
                    _ => Ok(()),
                };
                r.map_err(|_| EspError::BadLength)?;
            }
            Keys::Ctr128(..) | Keys::Ctr256(..) => {
                let iv: [u8; 8] = out[iv_at..iv_at + 8].try_into().unwrap();
                let (_, rest) = out.split_at_mut(pt_at);
                self.ctr_xor(&iv, rest);
            }
            Keys::Aead(key, salt) => {
                let mut nonce = [0u8; 12];
                nonce[..4].copy_from_slice(salt);
                nonce[4..].copy_from_slice(&out[iv_at..iv_at + 8]);
                let mut aad = [0u8; 12];
                let n = aad_for(self.cfg.spi, seq, self.cfg.esn, &mut aad);
                let tag = key
                    .seal_in_place_separate_tag(
                        ring::aead::Nonce::assume_unique_for_key(nonce),
                        ring::aead::Aad::from(&aad[..n]),
                        &mut out[pt_at..],
                    )
                    .map_err(|_| EspError::BadLength)?;
                out.extend_from_slice(tag.as_ref());
                self.udp_checksum(&h, out, udp_at);
                return Ok((seq, outer_len));
            }
        }
        if icv_len > 0 {
            let mut icv = [0u8; 16];
            self.icv(&out[esp..], seq_hi, &mut icv[..icv_len]);
            out.extend_from_slice(&icv[..icv_len]);
        }
        self.udp_checksum(&h, out, udp_at);
        Ok((seq, outer_len))
    }

    /// The checksum of the UDP header at `at` in `out` (ESP in UDP), over the rest of `out`, when
    /// the outer header `h` is IPv6 (UDP over IPv6 must have one); over IPv4 it stays 0 (RFC 3948
    /// 3.1.1).
    fn udp_checksum(&self, h: &[u8; 40], out: &mut [u8], at: usize) {
        if self.cfg.udp_encap.is_none() || h[0] >> 4 != 6 {
            return;
        }
        use crate::checksum::{fold, ones_sum};
        let len = (out.len() - at) as u32;
        let sum = ones_sum(&h[8..40]) as u32
            + 17
            + (len >> 16)
            + (len & 0xffff)
            + ones_sum(&out[at..]) as u32;
        let c = match !fold(sum) {
            0 => 0xffff,
            c => c,
        };
        out[at + 6..at + 8].copy_from_slice(&c.to_be_bytes());
    }
}
