//! Inbound: the full sequence number from its low bits, the ICV and the replay check, decryption,
//! the padding and the next header checked; and finding the ESP part of an IP packet.

use super::*;

impl Sa {
    /// Infer the full 64-bit sequence number from its low 32 bits (RFC 4303 appendix A2.2).
    fn full_seq(&self, s: &State, lo: u32) -> u64 {
        if !self.cfg.esn {
            return lo as u64;
        }
        let (top, w) = match &s.window {
            Some(win) => (win.top(), win.size()),
            None => (s.seq, 1 << 30),
        };
        let tl = top as u32;
        let th = (top >> 32) as u32;
        let bl = tl.wrapping_sub(w as u32).wrapping_add(1);
        let hi = if tl as u64 >= w - 1 {
            if lo >= bl {
                th
            } else {
                th.wrapping_add(1)
            }
        } else if lo >= bl {
            th.wrapping_sub(1)
        } else {
            th
        };
        ((hi as u64) << 32) | lo as u64
    }

    /// Decapsulate an ESP packet that starts at the ESP header. Verifies the ICV before decrypting,
    /// then the padding and next header, then updates the replay window. `out` receives the inner
    /// packet.
    pub fn decapsulate(&self, esp: &[u8], out: &mut Vec<u8>) -> Result<u64, EspError> {
        self.decapsulate_mode(esp, out, true, 0).map(|(seq, _)| seq)
    }

    /// [`Sa::decapsulate`] with `headroom` bytes (zeros) in `out` in front of the inner packet:
    /// room for the headers a switch puts in front of it on the way out.
    pub fn decapsulate_at(
        &self,
        esp: &[u8],
        out: &mut Vec<u8>,
        headroom: usize,
    ) -> Result<u64, EspError> {
        self.decapsulate_mode(esp, out, true, headroom)
            .map(|(seq, _)| seq)
    }

    /// Like [`Sa::decapsulate`] but for any next header (transport mode); returns (sequence, next
    /// header).
    pub fn decapsulate_any(&self, esp: &[u8], out: &mut Vec<u8>) -> Result<(u64, u8), EspError> {
        self.decapsulate_mode(esp, out, false, 0)
    }

    /// The ESP packet in `esp`: for an SA with UDP encapsulation, what follows the UDP header in
    /// front of it (to the SA's destination port, its length within the packet: bytes after it are
    /// padding); else `esp` itself.
    fn unwrap_udp<'a>(&self, esp: &'a [u8]) -> Result<&'a [u8], EspError> {
        let Some((_, port)) = self.cfg.udp_encap else {
            return Ok(esp);
        };
        if esp.len() < 8 {
            return Err(EspError::Truncated);
        }
        let len = u16::from_be_bytes([esp[4], esp[5]]) as usize;
        if u16::from_be_bytes([esp[2], esp[3]]) != port || len < 8 || len > esp.len() {
            return Err(EspError::WrongEncap);
        }
        Ok(&esp[8..len])
    }

    /// Decapsulate into `out` after `h` bytes of headroom.
    fn decapsulate_mode(
        &self,
        esp: &[u8],
        out: &mut Vec<u8>,
        tunnel: bool,
        h: usize,
    ) -> Result<(u64, u8), EspError> {
        let esp = self.unwrap_udp(esp)?;
        let c = self.cfg.cipher;
        let iv_len = c.iv_len();
        let icv_len = if c.is_aead() {
            16
        } else {
            self.cfg.integ.icv_len()
        };
        if esp.len() < 8 + iv_len + 2 + icv_len {
            return Err(EspError::Truncated);
        }
        let spi = u32::from_be_bytes(esp[0..4].try_into().unwrap());
        if spi != self.cfg.spi {
            // ESP in UDP for a plain ESP SA: this SA's SPI after a UDP header
            if self.cfg.udp_encap.is_none()
                && esp.get(8..12) == Some(&self.cfg.spi.to_be_bytes()[..])
            {
                return Err(EspError::WrongEncap);
            }
            return Err(EspError::WrongSpi);
        }
        let lo = u32::from_be_bytes(esp[4..8].try_into().unwrap());
        let body_end = esp.len() - icv_len;
        let ct = &esp[8 + iv_len..body_end];
        if ct.len() % c.block() != 0 && matches!(c, Cipher::AesCbc128 | Cipher::AesCbc256) {
            return Err(EspError::BadLength);
        }
        let seq = {
            let s = self.lock();
            if s.hard {
                return Err(EspError::HardExpired);
            }
            let seq = self.full_seq(&s, lo);
            if !self.cfg.esn && lo == 0 {
                return Err(EspError::Replay);
            }
            if let Some(w) = &s.window {
                w.check(seq)?;
            }
            seq
        };
        let seq_hi = if self.cfg.esn {
            Some((seq >> 32) as u32)
        } else {
            None
        };
        out.clear();
        out.resize(h, 0);
        match &self.keys {
            Keys::Aead(key, salt) => {
                let mut nonce = [0u8; 12];
                nonce[..4].copy_from_slice(salt);
                nonce[4..].copy_from_slice(&esp[8..16]);
                let mut aad = [0u8; 12];
                let n = aad_for(spi, seq, self.cfg.esn, &mut aad);
                out.extend_from_slice(&esp[16..]);
                let pt = key
                    .open_in_place(
                        ring::aead::Nonce::assume_unique_for_key(nonce),
                        ring::aead::Aad::from(&aad[..n]),
                        &mut out[h..],
                    )
                    .map_err(|_| EspError::IcvMismatch)?;
                let l = pt.len();
                out.truncate(h + l);
            }
            _ => {
                if icv_len > 0 {
                    let mut want = [0u8; 16];
                    self.icv(&esp[..body_end], seq_hi, &mut want[..icv_len]);
                    let diff = want[..icv_len]
                        .iter()
                        .zip(&esp[body_end..])
                        .fold(0u8, |a, (x, y)| a | (x ^ y));
                    if diff != 0 {
                        return Err(EspError::IcvMismatch);
                    }
                }
                out.extend_from_slice(ct);
                match &self.keys {
                    Keys::Cbc128(_) | Keys::Cbc256(_) => {
                        use cbc::cipher::BlockDecryptMut;
                        let iv: [u8; 16] = esp[8..24].try_into().unwrap();
                        use cbc::cipher::InnerIvInit;
                        let r = match &self.keys {
                            Keys::Cbc128(k) => cbc::Decryptor::<aes::Aes128>::inner_iv_init(
                                k.clone(),
                                (&iv).into(),
                            )
                            .decrypt_padded_mut::<cbc::cipher::block_padding::NoPadding>(
                                &mut out[h..],
                            )
                            .map(|_| ()),
                            Keys::Cbc256(k) => cbc::Decryptor::<aes::Aes256>::inner_iv_init(
                                k.clone(),
                                (&iv).into(),
                            )
                            .decrypt_padded_mut::<cbc::cipher::block_padding::NoPadding>(
                                &mut out[h..],
                            )
                            .map(|_| ()),
                            _ => Ok(()),
                        };
                        r.map_err(|_| EspError::BadLength)?;
                    }
                    Keys::Ctr128(..) | Keys::Ctr256(..) => {
                        let iv: [u8; 8] = esp[8..16].try_into().unwrap();
                        self.ctr_xor(&iv, &mut out[h..]);
                    }
                    _ => {}
                }
            }
        }
        // trailer: padding 1, 2, 3, ..., pad length, next header
        let body = &out[h..];
        if body.len() < 2 {
            return Err(EspError::Truncated);
        }
        let nh = body[body.len() - 1];
        let pl = body[body.len() - 2] as usize;
        if pl + 2 > body.len() {
            return Err(EspError::BadPadding);
        }
        let pad_start = body.len() - 2 - pl;
        if body[pad_start..body.len() - 2]
            .iter()
            .enumerate()
            .any(|(i, b)| *b as usize != i + 1)
        {
            return Err(EspError::BadPadding);
        }
        if tunnel && nh != 4 && nh != 41 {
            return Err(EspError::BadNextHeader);
        }
        out.truncate(h + pad_start);
        let mut s = self.lock();
        if let Some(w) = &s.window {
            // re-check under the lock: another worker may have accepted the same number meanwhile
            w.check(seq)?;
        }
        self.account(&mut s, out.len() - h)?;
        if let Some(w) = s.window.as_mut() {
            w.update(seq);
        }
        Ok((seq, nh))
    }
}

/// Strip an outer IPv4/IPv6 header carrying ESP (protocol 50), or ESP in UDP (17: the SA checks the
/// UDP header), and return what follows it.
pub fn esp_of_ip(packet: &[u8]) -> Result<&[u8], EspError> {
    match packet.first().map(|b| b >> 4) {
        Some(4) => {
            let ihl = (packet[0] & 0xf) as usize * 4;
            if packet.len() < 20 || ihl < 20 || packet.len() < ihl {
                return Err(EspError::Truncated);
            }
            if packet[9] != 50 && packet[9] != 17 {
                return Err(EspError::BadNextHeader);
            }
            let total = u16::from_be_bytes([packet[2], packet[3]]) as usize;
            Ok(&packet[ihl..total.clamp(ihl, packet.len())])
        }
        Some(6) => {
            if packet.len() < 40 {
                return Err(EspError::Truncated);
            }
            if packet[6] != 50 && packet[6] != 17 {
                return Err(EspError::BadNextHeader);
            }
            Ok(&packet[40..])
        }
        _ => Err(EspError::Truncated),
    }
}
