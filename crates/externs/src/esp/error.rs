//! The errors of ESP processing, each its own value and code.

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
    /// The packet's encapsulation is not its SA's: plain ESP for an SA that receives ESP in UDP
    /// (RFC 3948), or the other way round, or a UDP header to another port or with a wrong length.
    WrongEncap,
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
            EspError::WrongEncap => 13,
        }
    }
}

impl std::fmt::Display for EspError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}
