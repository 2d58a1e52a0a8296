//! The anti-replay window (RFC 4303 3.4.3) as an RFC 6479 ring of 64-bit blocks.

use super::error::EspError;

/// Sliding anti-replay window (RFC 4303 3.4.3) as the RFC 6479 ring of 64-bit blocks: one bit test
/// and at most `blocks` word clears per packet.
#[derive(Clone, Debug)]
pub struct ReplayWindow {
    size: u64,
    /// Highest sequence number accepted so far (full 64-bit value).
    pub(super) top: u64,
    blocks: Vec<u64>,
}

impl ReplayWindow {
    pub fn new(size: u32) -> Result<Self, EspError> {
        if size == 0 || size > 4096 {
            return Err(EspError::BadConfig);
        }
        let size = (size as u64).div_ceil(64) * 64;
        Ok(ReplayWindow {
            size,
            top: 0,
            blocks: vec![0; (size / 64 + 1) as usize],
        })
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
