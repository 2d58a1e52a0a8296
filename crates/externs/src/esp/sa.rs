//! A security association: its key schedule, sequence numbers, lifetimes and counters, and the
//! primitives its packet paths share (IVs, ICVs, the CTR keystream). Encapsulation is in
//! `sa/encrypt.rs`, decapsulation in `sa/decrypt.rs`.

mod decrypt;
mod encrypt;

pub use decrypt::esp_of_ip;

use super::config::*;
use super::error::EspError;
use super::replay::ReplayWindow;
use hmac::Mac;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

enum Keys {
    Null,
    Cbc128(aes::Aes128),
    Cbc256(aes::Aes256),
    Ctr128(aes::Aes128, [u8; 4]),
    Ctr256(aes::Aes256, [u8; 4]),
    Aead(ring::aead::LessSafeKey, [u8; 4]),
}

enum Auth {
    None,
    Sha1(ring::hmac::Key),
    Sha256(ring::hmac::Key),
    Md5(hmac::Hmac<md5::Md5>),
}

#[derive(Debug, Default)]
struct State {
    /// Last sequence number sent.
    seq: u64,
    window: Option<ReplayWindow>,
    packets: u64,
    bytes: u64,
    soft_reported: bool,
    hard: bool,
    events: Vec<String>,
}

/// Counters an SA keeps (for the control plane).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SaStats {
    pub seq: u64,
    pub packets: u64,
    pub bytes: u64,
    pub replay_top: u64,
    pub soft_expired: bool,
    pub hard_expired: bool,
}

/// A security association (one direction).
pub struct Sa {
    pub cfg: SaConfig,
    keys: Keys,
    auth: Auth,
    created: Instant,
    state: Mutex<State>,
    /// CBC IVs are AES_ivkey(sequence number) under a random per-SA key: unpredictable, never
    /// repeated.
    iv_key: aes::Aes128,
    /// The lifetime event not yet taken by the data plane (`take_event`): 0 none, 1 soft, 2 hard.
    pending: AtomicU8,
}

impl std::fmt::Debug for Sa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Sa(spi={:#x}, {} / {})",
            self.cfg.spi,
            self.cfg.cipher.name(),
            self.cfg.integ.name()
        )
    }
}

fn aad_for(spi: u32, seq: u64, esn: bool, out: &mut [u8; 12]) -> usize {
    out[..4].copy_from_slice(&spi.to_be_bytes());
    if esn {
        out[4..8].copy_from_slice(&((seq >> 32) as u32).to_be_bytes());
        out[8..12].copy_from_slice(&(seq as u32).to_be_bytes());
        12
    } else {
        out[4..8].copy_from_slice(&(seq as u32).to_be_bytes());
        8
    }
}

impl Sa {
    pub fn new(cfg: SaConfig) -> Result<Sa, EspError> {
        use aes::cipher::KeyInit;
        if cfg.enc_key.len() != cfg.cipher.keymat_len() {
            return Err(EspError::BadConfig);
        }
        let integ = if cfg.cipher.is_aead() {
            Integ::None
        } else {
            cfg.integ
        };
        if cfg.auth_key.len() != integ.key_len() {
            return Err(EspError::BadConfig);
        }
        let k = &cfg.enc_key;
        let salt = |k: &[u8]| -> [u8; 4] { k[k.len() - 4..].try_into().unwrap() };
        let keys = match cfg.cipher {
            Cipher::Null => Keys::Null,
            Cipher::AesCbc128 => {
                Keys::Cbc128(aes::Aes128::new_from_slice(k).map_err(|_| EspError::BadConfig)?)
            }
            Cipher::AesCbc256 => {
                Keys::Cbc256(aes::Aes256::new_from_slice(k).map_err(|_| EspError::BadConfig)?)
            }
            Cipher::AesCtr128 => Keys::Ctr128(
                aes::Aes128::new_from_slice(&k[..16]).map_err(|_| EspError::BadConfig)?,
                salt(k),
            ),
            Cipher::AesCtr256 => Keys::Ctr256(
                aes::Aes256::new_from_slice(&k[..32]).map_err(|_| EspError::BadConfig)?,
                salt(k),
            ),
            Cipher::AesGcm128 | Cipher::AesGcm256 | Cipher::ChaCha20Poly1305 => {
                let alg = match cfg.cipher {
                    Cipher::AesGcm128 => &ring::aead::AES_128_GCM,
                    Cipher::AesGcm256 => &ring::aead::AES_256_GCM,
                    _ => &ring::aead::CHACHA20_POLY1305,
                };
                let unbound = ring::aead::UnboundKey::new(alg, &k[..k.len() - 4])
                    .map_err(|_| EspError::BadConfig)?;
                Keys::Aead(ring::aead::LessSafeKey::new(unbound), salt(k))
            }
        };
        let auth = match integ {
            Integ::None => Auth::None,
            Integ::HmacSha1_96 => Auth::Sha1(ring::hmac::Key::new(
                ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
                &cfg.auth_key,
            )),
            Integ::HmacSha256_128 => {
                Auth::Sha256(ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &cfg.auth_key))
            }
            Integ::HmacMd5_96 => Auth::Md5(
                <hmac::Hmac<md5::Md5> as Mac>::new_from_slice(&cfg.auth_key)
                    .map_err(|_| EspError::BadConfig)?,
            ),
        };
        // a receiving SA's window starts at the initial sequence number (so ESN high bits can be
        // inferred)
        let window = if cfg.replay_window > 0 {
            let mut w = ReplayWindow::new(cfg.replay_window)?;
            w.top = cfg.initial_seq;
            Some(w)
        } else {
            None
        };
        if let Some((a, b)) = cfg.tunnel {
            if a.is_ipv4() != b.is_ipv4() {
                return Err(EspError::BadConfig);
            }
        }
        if cfg.problem().is_some() {
            return Err(EspError::BadConfig);
        }
        let mut seed = [0u8; 16];
        getrandom::getrandom(&mut seed).map_err(|_| EspError::BadConfig)?;
        let iv_key = aes::Aes128::new_from_slice(&seed).map_err(|_| EspError::BadConfig)?;
        let state = State {
            seq: cfg.initial_seq,
            window,
            ..Default::default()
        };
        let mut cfg = cfg;
        cfg.integ = integ;
        Ok(Sa {
            cfg,
            keys,
            auth,
            created: Instant::now(),
            state: Mutex::new(state),
            iv_key,
            pending: AtomicU8::new(0),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn stats(&self) -> SaStats {
        let s = self.lock();
        SaStats {
            seq: s.seq,
            packets: s.packets,
            bytes: s.bytes,
            replay_top: s.window.as_ref().map(|w| w.top()).unwrap_or(0),
            soft_expired: s.soft_reported,
            hard_expired: s.hard,
        }
    }

    /// The lifetime event reached since the last call, once: 0 none, 1 soft (renew me), 2 hard
    /// (stop using me). A cheap atomic read when there is none (the per-packet case).
    pub fn take_event(&self) -> u8 {
        if self.pending.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        self.pending.swap(0, Ordering::AcqRel)
    }

    /// Lifetime events since the last call ("soft" = renew me, "hard" = stop using me).
    pub fn drain_events(&self) -> Vec<String> {
        std::mem::take(&mut self.lock().events)
    }

    /// Account a packet and check the lifetimes; returns HardExpired when a hard limit is reached.
    fn account(&self, s: &mut State, bytes: usize) -> Result<(), EspError> {
        let created = self.created;
        let over = |l: &Limits, packets: u64, bytes: u64| {
            l.packets.map(|p| packets >= p).unwrap_or(false)
                || l.bytes.map(|b| bytes >= b).unwrap_or(false)
                || l.seconds
                    .map(|t| created.elapsed() >= Duration::from_secs(t))
                    .unwrap_or(false)
        };
        if s.hard || over(&self.cfg.hard, s.packets, s.bytes) {
            if !s.hard {
                s.hard = true;
                s.events.push(format!("hard spi={:#010x}", self.cfg.spi));
                self.pending.store(2, Ordering::Release);
            }
            return Err(EspError::HardExpired);
        }
        s.packets += 1;
        s.bytes += bytes as u64;
        if !s.soft_reported && over(&self.cfg.soft, s.packets, s.bytes) {
            s.soft_reported = true;
            s.events.push(format!("soft spi={:#010x}", self.cfg.spi));
            self.pending.store(1, Ordering::Release);
        }
        Ok(())
    }

    fn random_iv(&self, seq: u64, iv: &mut [u8; 16]) {
        use aes::cipher::BlockEncrypt;
        let mut b = aes::Block::default();
        b[8..].copy_from_slice(&seq.to_be_bytes());
        self.iv_key.encrypt_block(&mut b);
        iv.copy_from_slice(&b);
    }

    pub(super) fn icv(&self, data: &[u8], seq_hi: Option<u32>, out: &mut [u8]) {
        match &self.auth {
            Auth::None => {}
            Auth::Sha1(k) | Auth::Sha256(k) => {
                let mut c = ring::hmac::Context::with_key(k);
                c.update(data);
                if let Some(h) = seq_hi {
                    c.update(&h.to_be_bytes());
                }
                let t = c.sign();
                out.copy_from_slice(&t.as_ref()[..out.len()]);
            }
            Auth::Md5(m) => {
                let mut m = m.clone();
                m.update(data);
                if let Some(h) = seq_hi {
                    m.update(&h.to_be_bytes());
                }
                out.copy_from_slice(&m.finalize().into_bytes()[..out.len()]);
            }
        }
    }

    fn ctr_xor(&self, iv: &[u8], data: &mut [u8]) {
        use ctr::cipher::StreamCipher;
        let mut block = [0u8; 16];
        match &self.keys {
            Keys::Ctr128(_, nonce) | Keys::Ctr256(_, nonce) => {
                block[..4].copy_from_slice(nonce);
                block[4..12].copy_from_slice(iv);
                block[15] = 1;
            }
            _ => return,
        }
        use ctr::cipher::InnerIvInit;
        match &self.keys {
            Keys::Ctr128(k, _) => ctr::cipher::StreamCipherCoreWrapper::from_core(ctr::CtrCore::<
                aes::Aes128,
                ctr::flavors::Ctr32BE,
            >::inner_iv_init(
                k.clone(),
                (&block).into(),
            ))
            .apply_keystream(data),
            Keys::Ctr256(k, _) => ctr::cipher::StreamCipherCoreWrapper::from_core(ctr::CtrCore::<
                aes::Aes256,
                ctr::flavors::Ctr32BE,
            >::inner_iv_init(
                k.clone(),
                (&block).into(),
            ))
            .apply_keystream(data),
            _ => {}
        }
    }
}
