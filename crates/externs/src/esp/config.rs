//! An SA's configuration: the cipher suites (ciphers and integrity algorithms, their key and ICV
//! lengths), lifetimes, and the keys, wiped when the configuration is dropped.

use std::net::IpAddr;

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
        matches!(
            self,
            Cipher::AesGcm128 | Cipher::AesGcm256 | Cipher::ChaCha20Poly1305
        )
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
    pub(super) fn block(self) -> usize {
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

/// An SA's configuration. Its keys are wiped when it is dropped ([`SaConfig::wipe_keys`]) and left
/// out of its `Debug` form.
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
    /// UDP encapsulation (RFC 3948, for NAT traversal): the (source, destination) ports of the UDP
    /// datagrams the ESP packets travel in. Sending: a UDP header with these ports goes between the
    /// outer IP header and the ESP header (checksum 0 over IPv4, as RFC 3948 asks; computed over
    /// IPv6). Receiving: the packet must start with a UDP header to the destination port, else it
    /// is refused as [`EspError::WrongEncap`] (its source port is not checked: a NAT may have
    /// changed it). Absent: plain ESP (IP protocol 50).
    #[serde(default)]
    pub udp_encap: Option<(u16, u16)>,
}

impl SaConfig {
    /// Why this configuration cannot make an SA, in words (for the control plane's error), or
    /// `None`: key material of the cipher's length, an integrity key of the algorithm's length
    /// (none with an AEAD cipher), an anti-replay window of at most 4096 packets, tunnel endpoints
    /// of one IP version, and UDP encapsulation only in tunnel mode, with ports other than 0.
    pub fn problem(&self) -> Option<String> {
        let (c, i) = (self.cipher, self.integ);
        if self.enc_key.len() != c.keymat_len() {
            return Some(format!(
                "{} takes {} bytes of key material, not {}",
                c.name(),
                c.keymat_len(),
                self.enc_key.len()
            ));
        }
        let integ = if c.is_aead() { Integ::None } else { i };
        if self.auth_key.len() != integ.key_len() {
            return Some(if c.is_aead() {
                format!(
                    "{} authenticates by itself: no integrity key, not {} bytes",
                    c.name(),
                    self.auth_key.len()
                )
            } else {
                format!(
                    "{} takes a {}-byte key, not {}",
                    i.name(),
                    i.key_len(),
                    self.auth_key.len()
                )
            });
        }
        if self.replay_window > 4096 {
            return Some(format!(
                "an anti-replay window of {} packets (at most 4096)",
                self.replay_window
            ));
        }
        if let Some((a, b)) = self.tunnel {
            if a.is_ipv4() != b.is_ipv4() {
                return Some(format!(
                    "tunnel endpoints {a} and {b} are not of one IP version"
                ));
            }
        }
        match self.udp_encap {
            Some((s, d)) if s == 0 || d == 0 => {
                Some(format!("UDP encapsulation with port 0 ({s} -> {d})"))
            }
            Some(_) if self.tunnel.is_none() => {
                Some("UDP encapsulation (ESP in UDP) needs tunnel mode: tunnel endpoints".into())
            }
            _ => None,
        }
    }

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
            .field("udp_encap", &self.udp_encap)
            .finish()
    }
}
