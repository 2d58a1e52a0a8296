//! ESP (RFC 4303) in tunnel mode: security associations with their key schedules, sequence numbers
//! (32-bit and extended), the anti-replay window (RFC 6479 bitmap) and lifetimes.
//!
//! Cipher suites: NULL (RFC 2410) with or without authentication; AES-CBC-128/256 (RFC 3602) and
//! AES-CTR-128/256 (RFC 3686) with HMAC-SHA1-96 (RFC 2404), HMAC-SHA-256-128 (RFC 4868) or HMAC-MD5-96
//! (RFC 2403); AES-GCM-128/256 with a 16-byte ICV (RFC 4106); ChaCha20-Poly1305 (RFC 7634).
//! Primitives come from `ring` (AES-GCM, ChaCha20-Poly1305, HMAC-SHA) and RustCrypto (AES-CBC/CTR, MD5).

use hmac::Mac;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Cipher {
    Null,
    AesCbc128,
    AesCbc256,
    AesCtr128,
    AesCtr256,
    AesGcm128,
    AesGcm256,
    ChaCha20Poly1305,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Integ {
    None,
    HmacSha1_96,
    HmacSha256_128,
    HmacMd5_96,
}

impl Cipher {
    pub fn is_aead(self) -> bool {
        matches!(self, Cipher::AesGcm128 | Cipher::AesGcm256 | Cipher::ChaCha20Poly1305)
    }
    /// Key material length: the cipher key plus the 4-byte salt/nonce for CTR, GCM and ChaCha20.
    pub fn keymat_len(self) -> usize {
        match self {
            Cipher::Null => 0,
            Cipher::AesCbc128 => 16,
            Cipher::AesCbc256 => 32,
            Cipher::AesCtr128 | Cipher::AesGcm128 => 20,
            Cipher::AesCtr256 | Cipher::AesGcm256 | Cipher::ChaCha20Poly1305 => 36,
        }
    }
    pub fn iv_len(self) -> usize {
        match self {
            Cipher::Null => 0,
            Cipher::AesCbc128 | Cipher::AesCbc256 => 16,
            _ => 8,
        }
    }
    /// Alignment of (payload + pad + 2).
    fn block(self) -> usize {
        match self {
            Cipher::AesCbc128 | Cipher::AesCbc256 => 16,
            _ => 4,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Cipher::Null => "NULL",
            Cipher::AesCbc128 => "AES-CBC-128",
            Cipher::AesCbc256 => "AES-CBC-256",
            Cipher::AesCtr128 => "AES-CTR-128",
            Cipher::AesCtr256 => "AES-CTR-256",
            Cipher::AesGcm128 => "AES-GCM-128",
            Cipher::AesGcm256 => "AES-GCM-256",
            Cipher::ChaCha20Poly1305 => "ChaCha20-Poly1305",
        }
    }
}

impl Integ {
    pub fn icv_len(self) -> usize {
        match self {
            Integ::None => 0,
            Integ::HmacSha1_96 | Integ::HmacMd5_96 => 12,
            Integ::HmacSha256_128 => 16,
        }
    }
    pub fn key_len(self) -> usize {
        match self {
            Integ::None => 0,
            Integ::HmacSha1_96 => 20,
            Integ::HmacSha256_128 => 32,
            Integ::HmacMd5_96 => 16,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Integ::None => "none",
            Integ::HmacSha1_96 => "HMAC-SHA1-96",
            Integ::HmacSha256_128 => "HMAC-SHA-256-128",
            Integ::HmacMd5_96 => "HMAC-MD5-96",
        }
    }
}

/// Soft and hard limits; `None` = unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Limits {
    pub packets: Option<u64>,
    pub bytes: Option<u64>,
    pub seconds: Option<u64>,
}

/// An SA's configuration. Its keys are wiped when it is dropped ([`SaConfig::wipe_keys`]) and left out of its
/// `Debug` form.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SaConfig {
    pub spi: u32,
    pub cipher: Cipher,
    pub integ: Integ,
    /// Cipher key material (key || 4-byte salt for CTR/GCM/ChaCha20).
    pub enc_key: Vec<u8>,
    pub auth_key: Vec<u8>,
    /// Extended (64-bit) sequence numbers.
    pub esn: bool,
    /// Anti-replay window in packets (0 disables anti-replay); at most 4096.
    pub replay_window: u32,
    /// Tunnel endpoints for the outer header (source, destination); both IPv4 or both IPv6.
    pub tunnel: Option<(IpAddr, IpAddr)>,
    pub soft: Limits,
    pub hard: Limits,
    /// First sequence number to send is `initial_seq + 1`.
    pub initial_seq: u64,
}

impl SaConfig {
    /// Overwrite both keys with zeros and empty them (what dropping the configuration does).
    pub fn wipe_keys(&mut self) {
        use zeroize::Zeroize;
        self.enc_key.zeroize();
        self.auth_key.zeroize();
    }
}

impl Drop for SaConfig {
    fn drop(&mut self) {
        self.wipe_keys();
    }
}

impl std::fmt::Debug for SaConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // the keys by their length only
        f.debug_struct("SaConfig")
            .field("spi", &self.spi)
            .field("cipher", &self.cipher)
            .field("integ", &self.integ)
            .field("enc_key", &format_args!("<{} bytes>", self.enc_key.len()))
            .field("auth_key", &format_args!("<{} bytes>", self.auth_key.len()))
            .field("esn", &self.esn)
            .field("replay_window", &self.replay_window)
            .field("tunnel", &self.tunnel)
            .field("soft", &self.soft)
            .field("hard", &self.hard)
            .field("initial_seq", &self.initial_seq)
            .finish()
    }
}

/// Everything that can go wrong, each its own value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EspError {
    /// The packet is shorter than its headers, IV, trailer and ICV need.
    Truncated,
    /// The ciphertext length is not a multiple of the cipher's block.
    BadLength,
    /// The SPI is not this SA's.
    WrongSpi,
    /// The integrity check (HMAC or AEAD tag) failed.
    IcvMismatch,
    /// The padding bytes are not 1, 2, 3, ...
    BadPadding,
    /// The next header is not an inner IPv4 (4) or IPv6 (41) packet.
    BadNextHeader,
    /// The sequence number was seen before.
    Replay,
    /// The sequence number is left of the replay window.
    TooOld,
    /// Sending would wrap the sequence number counter.
    SeqOverflow,
    /// The SA reached a hard lifetime limit.
    HardExpired,
    /// The inner packet is not IPv4 or IPv6.
    BadInner,
    /// Configuration error (key lengths, window size).
    BadConfig,
}

impl EspError {
    /// The status code a P4 program sees (`p4sec.p4`: `ESP_*`).
    pub fn code(self) -> u8 {
        match self {
            EspError::Truncated => 2,
            EspError::BadLength => 2,
            EspError::WrongSpi => 3,
            EspError::IcvMismatch => 4,
            EspError::BadPadding => 5,
            EspError::BadNextHeader => 6,
            EspError::Replay => 7,
            EspError::TooOld => 8,
            EspError::SeqOverflow => 9,
            EspError::HardExpired => 10,
            EspError::BadInner => 11,
            EspError::BadConfig => 12,
        }
    }
}

impl std::fmt::Display for EspError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

/// Sliding anti-replay window (RFC 4303 3.4.3) as the RFC 6479 ring of 64-bit blocks: one bit test and
/// at most `blocks` word clears per packet.
#[derive(Clone, Debug)]
pub struct ReplayWindow {
    size: u64,
    /// Highest sequence number accepted so far (full 64-bit value).
    top: u64,
    blocks: Vec<u64>,
}

impl ReplayWindow {
    pub fn new(size: u32) -> Result<Self, EspError> {
        if size == 0 || size > 4096 {
            return Err(EspError::BadConfig);
        }
        let size = (size as u64).div_ceil(64) * 64;
        Ok(ReplayWindow { size, top: 0, blocks: vec![0; (size / 64 + 1) as usize] })
    }
    pub fn top(&self) -> u64 {
        self.top
    }
    pub fn size(&self) -> u64 {
        self.size
    }
    fn bit(&self, seq: u64) -> (usize, u64) {
        let n = self.blocks.len() as u64;
        (((seq / 64) % n) as usize, 1u64 << (seq % 64))
    }
    /// Would `seq` be accepted? (Does not change the window.)
    pub fn check(&self, seq: u64) -> Result<(), EspError> {
        if seq > self.top {
            return Ok(());
        }
        if seq + self.size <= self.top {
            return Err(EspError::TooOld);
        }
        let (b, m) = self.bit(seq);
        if self.blocks[b] & m != 0 {
            Err(EspError::Replay)
        } else {
            Ok(())
        }
    }
    /// Record `seq` (after its ICV was verified).
    pub fn update(&mut self, seq: u64) {
        if seq > self.top {
            let n = self.blocks.len() as u64;
            let cur = self.top / 64;
            let new = seq / 64;
            let diff = (new - cur).min(n);
            for i in 1..=diff {
                let idx = ((cur + i) % n) as usize;
                self.blocks[idx] = 0;
            }
            self.top = seq;
        }
        let (b, m) = self.bit(seq);
        self.blocks[b] |= m;
    }
}

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
    /// CBC IVs are AES_ivkey(sequence number) under a random per-SA key: unpredictable, never repeated.
    iv_key: aes::Aes128,
    /// The lifetime event not yet taken by the data plane (`take_event`): 0 none, 1 soft, 2 hard.
    pending: AtomicU8,
}

impl std::fmt::Debug for Sa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sa(spi={:#x}, {} / {})", self.cfg.spi, self.cfg.cipher.name(), self.cfg.integ.name())
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
        let integ = if cfg.cipher.is_aead() { Integ::None } else { cfg.integ };
        if cfg.auth_key.len() != integ.key_len() {
            return Err(EspError::BadConfig);
        }
        let k = &cfg.enc_key;
        let salt = |k: &[u8]| -> [u8; 4] { k[k.len() - 4..].try_into().unwrap() };
        let keys = match cfg.cipher {
            Cipher::Null => Keys::Null,
            Cipher::AesCbc128 => Keys::Cbc128(aes::Aes128::new_from_slice(k).map_err(|_| EspError::BadConfig)?),
            Cipher::AesCbc256 => Keys::Cbc256(aes::Aes256::new_from_slice(k).map_err(|_| EspError::BadConfig)?),
            Cipher::AesCtr128 => Keys::Ctr128(aes::Aes128::new_from_slice(&k[..16]).map_err(|_| EspError::BadConfig)?, salt(k)),
            Cipher::AesCtr256 => Keys::Ctr256(aes::Aes256::new_from_slice(&k[..32]).map_err(|_| EspError::BadConfig)?, salt(k)),
            Cipher::AesGcm128 | Cipher::AesGcm256 | Cipher::ChaCha20Poly1305 => {
                let alg = match cfg.cipher {
                    Cipher::AesGcm128 => &ring::aead::AES_128_GCM,
                    Cipher::AesGcm256 => &ring::aead::AES_256_GCM,
                    _ => &ring::aead::CHACHA20_POLY1305,
                };
                let unbound = ring::aead::UnboundKey::new(alg, &k[..k.len() - 4]).map_err(|_| EspError::BadConfig)?;
                Keys::Aead(ring::aead::LessSafeKey::new(unbound), salt(k))
            }
        };
        let auth = match integ {
            Integ::None => Auth::None,
            Integ::HmacSha1_96 => Auth::Sha1(ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, &cfg.auth_key)),
            Integ::HmacSha256_128 => Auth::Sha256(ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &cfg.auth_key)),
            Integ::HmacMd5_96 => Auth::Md5(<hmac::Hmac<md5::Md5> as Mac>::new_from_slice(&cfg.auth_key).map_err(|_| EspError::BadConfig)?),
        };
        // a receiving SA's window starts at the initial sequence number (so ESN high bits can be inferred)
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
        let mut seed = [0u8; 16];
        getrandom::getrandom(&mut seed).map_err(|_| EspError::BadConfig)?;
        let iv_key = aes::Aes128::new_from_slice(&seed).map_err(|_| EspError::BadConfig)?;
        let state = State { seq: cfg.initial_seq, window, ..Default::default() };
        let mut cfg = cfg;
        cfg.integ = integ;
        Ok(Sa { cfg, keys, auth, created: Instant::now(), state: Mutex::new(state), iv_key, pending: AtomicU8::new(0) })
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

    /// The lifetime event reached since the last call, once: 0 none, 1 soft (renew me), 2 hard (stop using
    /// me). A cheap atomic read when there is none (the per-packet case).
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
                || l.seconds.map(|t| created.elapsed() >= Duration::from_secs(t)).unwrap_or(false)
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

    fn icv(&self, data: &[u8], seq_hi: Option<u32>, out: &mut [u8]) {
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
            Keys::Ctr128(k, _) => ctr::cipher::StreamCipherCoreWrapper::from_core(
                ctr::CtrCore::<aes::Aes128, ctr::flavors::Ctr32BE>::inner_iv_init(k.clone(), (&block).into()),
            )
            .apply_keystream(data),
            Keys::Ctr256(k, _) => ctr::cipher::StreamCipherCoreWrapper::from_core(
                ctr::CtrCore::<aes::Aes256, ctr::flavors::Ctr32BE>::inner_iv_init(k.clone(), (&block).into()),
            )
            .apply_keystream(data),
            _ => {}
        }
    }

    /// Encapsulate an inner IPv4/IPv6 packet. `out` receives the outer IP header (if the SA has tunnel
    /// endpoints), the ESP header, IV, ciphertext and ICV.
    pub fn encapsulate(&self, inner: &[u8], out: &mut Vec<u8>) -> Result<u64, EspError> {
        let next_header = match inner.first().map(|b| b >> 4) {
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
            self.account(&mut s, inner.len())?;
            s.seq = next;
            next
        };
        out.clear();
        let c = self.cfg.cipher;
        let iv_len = c.iv_len();
        let icv_len = if c.is_aead() { 16 } else { self.cfg.integ.icv_len() };
        let blk = c.block();
        let pad = (blk - (inner.len() + 2) % blk) % blk;
        let payload_len = inner.len() + pad + 2;
        let esp_len = 8 + iv_len + payload_len + icv_len;
        // outer header
        let outer = match self.cfg.tunnel {
            Some((IpAddr::V4(s), IpAddr::V4(d))) => {
                let total = 20 + esp_len;
                if total > 65535 {
                    return Err(EspError::BadInner);
                }
                let mut h = [0u8; 20];
                h[0] = 0x45;
                h[2..4].copy_from_slice(&(total as u16).to_be_bytes());
                h[6] = 0x40; // DF
                h[8] = 64;
                h[9] = 50;
                h[12..16].copy_from_slice(&s.octets());
                h[16..20].copy_from_slice(&d.octets());
                let ck = crate::hash::csum16(&h);
                h[10..12].copy_from_slice(&ck.to_be_bytes());
                out.extend_from_slice(&h);
                20
            }
            Some((IpAddr::V6(s), IpAddr::V6(d))) => {
                if esp_len > 65535 {
                    return Err(EspError::BadInner);
                }
                let mut h = [0u8; 40];
                h[0] = 0x60;
                h[4..6].copy_from_slice(&(esp_len as u16).to_be_bytes());
                h[6] = 50;
                h[7] = 64;
                h[8..24].copy_from_slice(&s.octets());
                h[24..40].copy_from_slice(&d.octets());
                out.extend_from_slice(&h);
                40
            }
            _ => 0,
        };
        let esp = outer;
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
        out.extend_from_slice(inner);
        for i in 1..=pad {
            out.push(i as u8);
        }
        out.push(pad as u8);
        out.push(next_header);
        let seq_hi = if self.cfg.esn { Some((seq >> 32) as u32) } else { None };
        match &self.keys {
            Keys::Null => {}
            Keys::Cbc128(_) | Keys::Cbc256(_) => {
                use cbc::cipher::BlockEncryptMut;
                let iv: [u8; 16] = out[iv_at..iv_at + 16].try_into().unwrap();
                let buf = &mut out[pt_at..];
                let n = buf.len();
                use cbc::cipher::InnerIvInit;
                let r = match &self.keys {
                    Keys::Cbc128(k) => cbc::Encryptor::<aes::Aes128>::inner_iv_init(k.clone(), (&iv).into())
                        .encrypt_padded_mut::<cbc::cipher::block_padding::NoPadding>(buf, n)
                        .map(|_| ()),
                    Keys::Cbc256(k) => cbc::Encryptor::<aes::Aes256>::inner_iv_init(k.clone(), (&iv).into())
                        .encrypt_padded_mut::<cbc::cipher::block_padding::NoPadding>(buf, n)
                        .map(|_| ()),
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
                    .seal_in_place_separate_tag(ring::aead::Nonce::assume_unique_for_key(nonce), ring::aead::Aad::from(&aad[..n]), &mut out[pt_at..])
                    .map_err(|_| EspError::BadLength)?;
                out.extend_from_slice(tag.as_ref());
                return Ok(seq);
            }
        }
        if icv_len > 0 {
            let mut icv = [0u8; 16];
            self.icv(&out[esp..], seq_hi, &mut icv[..icv_len]);
            out.extend_from_slice(&icv[..icv_len]);
        }
        Ok(seq)
    }

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
    /// then the padding and next header, then updates the replay window. `out` receives the inner packet.
    pub fn decapsulate(&self, esp: &[u8], out: &mut Vec<u8>) -> Result<u64, EspError> {
        self.decapsulate_mode(esp, out, true).map(|(seq, _)| seq)
    }

    /// Like [`Sa::decapsulate`] but for any next header (transport mode); returns (sequence, next header).
    pub fn decapsulate_any(&self, esp: &[u8], out: &mut Vec<u8>) -> Result<(u64, u8), EspError> {
        self.decapsulate_mode(esp, out, false)
    }

    fn decapsulate_mode(&self, esp: &[u8], out: &mut Vec<u8>, tunnel: bool) -> Result<(u64, u8), EspError> {
        let c = self.cfg.cipher;
        let iv_len = c.iv_len();
        let icv_len = if c.is_aead() { 16 } else { self.cfg.integ.icv_len() };
        if esp.len() < 8 + iv_len + 2 + icv_len {
            return Err(EspError::Truncated);
        }
        let spi = u32::from_be_bytes(esp[0..4].try_into().unwrap());
        if spi != self.cfg.spi {
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
        let seq_hi = if self.cfg.esn { Some((seq >> 32) as u32) } else { None };
        out.clear();
        match &self.keys {
            Keys::Aead(key, salt) => {
                let mut nonce = [0u8; 12];
                nonce[..4].copy_from_slice(salt);
                nonce[4..].copy_from_slice(&esp[8..16]);
                let mut aad = [0u8; 12];
                let n = aad_for(spi, seq, self.cfg.esn, &mut aad);
                out.extend_from_slice(&esp[16..]);
                let pt = key
                    .open_in_place(ring::aead::Nonce::assume_unique_for_key(nonce), ring::aead::Aad::from(&aad[..n]), out)
                    .map_err(|_| EspError::IcvMismatch)?;
                let l = pt.len();
                out.truncate(l);
            }
            _ => {
                if icv_len > 0 {
                    let mut want = [0u8; 16];
                    self.icv(&esp[..body_end], seq_hi, &mut want[..icv_len]);
                    let diff = want[..icv_len].iter().zip(&esp[body_end..]).fold(0u8, |a, (x, y)| a | (x ^ y));
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
                            Keys::Cbc128(k) => cbc::Decryptor::<aes::Aes128>::inner_iv_init(k.clone(), (&iv).into())
                                .decrypt_padded_mut::<cbc::cipher::block_padding::NoPadding>(out)
                                .map(|_| ()),
                            Keys::Cbc256(k) => cbc::Decryptor::<aes::Aes256>::inner_iv_init(k.clone(), (&iv).into())
                                .decrypt_padded_mut::<cbc::cipher::block_padding::NoPadding>(out)
                                .map(|_| ()),
                            _ => Ok(()),
                        };
                        r.map_err(|_| EspError::BadLength)?;
                    }
                    Keys::Ctr128(..) | Keys::Ctr256(..) => {
                        let iv: [u8; 8] = esp[8..16].try_into().unwrap();
                        self.ctr_xor(&iv, out);
                    }
                    _ => {}
                }
            }
        }
        // trailer: padding 1, 2, 3, ..., pad length, next header
        if out.len() < 2 {
            return Err(EspError::Truncated);
        }
        let nh = out[out.len() - 1];
        let pl = out[out.len() - 2] as usize;
        if pl + 2 > out.len() {
            return Err(EspError::BadPadding);
        }
        let pad_start = out.len() - 2 - pl;
        if out[pad_start..out.len() - 2].iter().enumerate().any(|(i, b)| *b as usize != i + 1) {
            return Err(EspError::BadPadding);
        }
        if tunnel && nh != 4 && nh != 41 {
            return Err(EspError::BadNextHeader);
        }
        out.truncate(pad_start);
        let mut s = self.lock();
        if let Some(w) = &s.window {
            // re-check under the lock: another worker may have accepted the same number meanwhile
            w.check(seq)?;
        }
        self.account(&mut s, out.len())?;
        if let Some(w) = s.window.as_mut() {
            w.update(seq);
        }
        Ok((seq, nh))
    }
}

/// Strip an outer IPv4/IPv6 header carrying ESP (protocol 50) and return the ESP part.
pub fn esp_of_ip(packet: &[u8]) -> Result<&[u8], EspError> {
    match packet.first().map(|b| b >> 4) {
        Some(4) => {
            let ihl = (packet[0] & 0xf) as usize * 4;
            if packet.len() < 20 || ihl < 20 || packet.len() < ihl {
                return Err(EspError::Truncated);
            }
            if packet[9] != 50 {
                return Err(EspError::BadNextHeader);
            }
            let total = u16::from_be_bytes([packet[2], packet[3]]) as usize;
            Ok(&packet[ihl..total.clamp(ihl, packet.len())])
        }
        Some(6) => {
            if packet.len() < 40 {
                return Err(EspError::Truncated);
            }
            if packet[6] != 50 {
                return Err(EspError::BadNextHeader);
            }
            Ok(&packet[40..])
        }
        _ => Err(EspError::Truncated),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(cipher: Cipher, integ: Integ, esn: bool) -> SaConfig {
        SaConfig {
            spi: 0x1234,
            cipher,
            integ,
            enc_key: (0..cipher.keymat_len() as u8).collect(),
            auth_key: (0..if cipher.is_aead() { 0 } else { integ.key_len() } as u8).map(|x| x ^ 0x5a).collect(),
            esn,
            replay_window: 64,
            tunnel: Some(("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap())),
            soft: Limits::default(),
            hard: Limits::default(),
            initial_seq: 0,
        }
    }

    fn inner(n: usize) -> Vec<u8> {
        let mut p = vec![0u8; 20 + n];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&((20 + n) as u16).to_be_bytes());
        p[9] = 17;
        p
    }

    #[test]
    fn round_trip_every_suite() {
        let suites = [
            (Cipher::Null, Integ::None),
            (Cipher::Null, Integ::HmacSha256_128),
            (Cipher::AesCbc128, Integ::HmacSha1_96),
            (Cipher::AesCbc256, Integ::HmacMd5_96),
            (Cipher::AesCtr128, Integ::HmacSha256_128),
            (Cipher::AesCtr256, Integ::HmacSha1_96),
            (Cipher::AesGcm128, Integ::None),
            (Cipher::AesGcm256, Integ::None),
            (Cipher::ChaCha20Poly1305, Integ::None),
        ];
        for (c, i) in suites {
            for esn in [false, true] {
                let tx = Sa::new(cfg(c, i, esn)).unwrap();
                let rx = Sa::new(cfg(c, i, esn)).unwrap();
                for n in [0usize, 1, 15, 16, 17, 100, 1400] {
                    let p = inner(n);
                    let mut enc = vec![];
                    tx.encapsulate(&p, &mut enc).unwrap();
                    let mut dec = vec![];
                    rx.decapsulate(esp_of_ip(&enc).unwrap(), &mut dec).unwrap_or_else(|e| panic!("{c:?}/{i:?} esn={esn} n={n}: {e:?}"));
                    assert_eq!(dec, p);
                }
            }
        }
    }

    #[test]
    fn negative_cases_have_their_own_errors() {
        let tx = Sa::new(cfg(Cipher::AesCbc128, Integ::HmacSha256_128, false)).unwrap();
        let rx = Sa::new(cfg(Cipher::AesCbc128, Integ::HmacSha256_128, false)).unwrap();
        let mut enc = vec![];
        tx.encapsulate(&inner(40), &mut enc).unwrap();
        let esp = esp_of_ip(&enc).unwrap().to_vec();
        let mut out = vec![];
        // truncated
        assert_eq!(rx.decapsulate(&esp[..20], &mut out), Err(EspError::Truncated));
        // every flipped bit fails the ICV and leaves the window alone
        for i in 8..esp.len() {
            let mut bad = esp.clone();
            bad[i] ^= 0x10;
            assert_eq!(rx.decapsulate(&bad, &mut out), Err(EspError::IcvMismatch), "byte {i}");
        }
        assert_eq!(rx.stats().replay_top, 0);
        // wrong SPI
        let mut bad = esp.clone();
        bad[3] ^= 1;
        assert_eq!(rx.decapsulate(&bad, &mut out), Err(EspError::WrongSpi));
        // accepted once, then a replay
        rx.decapsulate(&esp, &mut out).unwrap();
        assert_eq!(rx.decapsulate(&esp, &mut out), Err(EspError::Replay));
        assert_eq!(rx.stats().packets, 1);
    }

    #[test]
    fn bad_padding_and_next_header() {
        // NULL cipher with authentication: forge trailers with a valid ICV
        let c = cfg(Cipher::Null, Integ::HmacSha256_128, false);
        let rx = Sa::new(c.clone()).unwrap();
        let forge = |trailer: &[u8], seq: u32| {
            let mut esp = vec![];
            esp.extend_from_slice(&0x1234u32.to_be_bytes());
            esp.extend_from_slice(&seq.to_be_bytes());
            esp.extend_from_slice(&inner(2));
            esp.extend_from_slice(trailer);
            let mut icv = [0u8; 16];
            rx.icv(&esp, None, &mut icv);
            esp.extend_from_slice(&icv);
            esp
        };
        let mut out = vec![];
        assert_eq!(rx.decapsulate(&forge(&[1, 3, 2, 4], 1), &mut out), Err(EspError::BadPadding));
        assert_eq!(rx.decapsulate(&forge(&[1, 2, 2, 17], 2), &mut out), Err(EspError::BadNextHeader));
        assert_eq!(rx.stats().packets, 0, "failed packets change no state");
        assert!(rx.decapsulate(&forge(&[1, 2, 2, 4], 3), &mut out).is_ok());
    }

    /// Key material stays out of logs and does not outlive the configuration: `Debug` shows the keys' lengths
    /// only, and wiping (what dropping does) zeroes and empties both keys.
    #[test]
    fn sa_keys_are_not_printed_and_are_wiped() {
        let mut c = cfg(Cipher::AesCbc128, Integ::HmacSha256_128, false);
        c.enc_key = vec![0xab; 16];
        c.auth_key = vec![0xcd; 32];
        let shown = format!("{c:?}");
        assert!(shown.contains("enc_key: <16 bytes>") && shown.contains("auth_key: <32 bytes>"), "{shown}");
        assert!(!shown.contains("171") && !shown.contains("205") && !shown.to_lowercase().contains("ab, ab"), "{shown}");
        let sa = Sa::new(c.clone()).unwrap();
        assert!(format!("{:?}", sa.cfg).contains("<16 bytes>"));
        c.wipe_keys();
        assert!(c.enc_key.is_empty() && c.auth_key.is_empty());
        // the SA built from the configuration keeps working on its own copy
        let mut out = vec![];
        assert!(sa.encapsulate(&[0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2], &mut out).is_ok());
    }

    #[test]
    fn replay_window_rfc6479() {
        let mut w = ReplayWindow::new(128).unwrap();
        for s in [5u64, 3, 200, 150] {
            w.check(s).unwrap();
            w.update(s);
        }
        assert_eq!(w.check(5), Err(EspError::TooOld));
        assert_eq!(w.check(150), Err(EspError::Replay));
        assert!(w.check(100).is_ok());
        assert!(w.check(73).is_ok());
        assert_eq!(w.check(72), Err(EspError::TooOld));
        w.update(10_000);
        assert!(w.check(9_999).is_ok());
        assert_eq!(w.check(10_000), Err(EspError::Replay));
        assert!(ReplayWindow::new(5000).is_err());
    }

    #[test]
    fn sequence_overflow_without_esn() {
        let mut c = cfg(Cipher::AesGcm128, Integ::None, false);
        c.initial_seq = u32::MAX as u64 - 1;
        let tx = Sa::new(c).unwrap();
        let mut out = vec![];
        tx.encapsulate(&inner(1), &mut out).unwrap();
        assert_eq!(tx.encapsulate(&inner(1), &mut out), Err(EspError::SeqOverflow));
        let mut c = cfg(Cipher::AesGcm128, Integ::None, true);
        c.initial_seq = u32::MAX as u64;
        let tx = Sa::new(c.clone()).unwrap();
        let mut c = c;
        c.initial_seq = 0;
        let rx = Sa::new(c).unwrap();
        tx.encapsulate(&inner(1), &mut out).unwrap();
        assert_eq!(tx.stats().seq, 1 << 32, "ESN continues past 2^32");
        // the receiver (window top 0) infers the high bits: 2^32 is ahead of it only with ESN
        let mut d = vec![];
        let r = rx.decapsulate(esp_of_ip(&out).unwrap(), &mut d);
        assert!(r.is_err(), "high-order bits differ: the receiver infers seq_hi = 0 and the ICV fails");
    }

    #[test]
    fn lifetimes() {
        let mut c = cfg(Cipher::AesGcm128, Integ::None, false);
        c.soft.packets = Some(2);
        c.hard.packets = Some(3);
        let tx = Sa::new(c).unwrap();
        let mut out = vec![];
        tx.encapsulate(&inner(1), &mut out).unwrap();
        tx.encapsulate(&inner(1), &mut out).unwrap();
        assert_eq!(tx.drain_events(), vec!["soft spi=0x00001234".to_string()]);
        assert_eq!(tx.take_event(), 1);
        assert_eq!(tx.take_event(), 0, "an event is taken once");
        tx.encapsulate(&inner(1), &mut out).unwrap();
        assert_eq!(tx.encapsulate(&inner(1), &mut out), Err(EspError::HardExpired));
        assert_eq!(tx.drain_events(), vec!["hard spi=0x00001234".to_string()]);
    }
}
