//! ESP (RFC 4303) in tunnel mode: security associations with their key schedules, sequence numbers
//! (32-bit and extended), the anti-replay window (RFC 6479 bitmap) and lifetimes.
//!
//! Cipher suites: NULL (RFC 2410) with or without authentication; AES-CBC-128/256 (RFC 3602) and
//! AES-CTR-128/256 (RFC 3686) with HMAC-SHA1-96 (RFC 2404), HMAC-SHA-256-128 (RFC 4868) or
//! HMAC-MD5-96 (RFC 2403); AES-GCM-128/256 with a 16-byte ICV (RFC 4106); ChaCha20-Poly1305 (RFC
//! 7634). Primitives come from `ring` (AES-GCM, ChaCha20-Poly1305, HMAC-SHA) and RustCrypto
//! (AES-CBC/CTR, MD5).
//!
//! `config.rs` holds the suites and an SA's configuration, `sa.rs` the SA with `sa/encrypt.rs` and
//! `sa/decrypt.rs` its two directions, `replay.rs` the anti-replay window, `error.rs` the errors.

mod config;
mod error;
mod replay;
mod sa;

pub use config::{Cipher, Integ, Limits, SaConfig};
pub use error::EspError;
pub use replay::ReplayWindow;
pub use sa::{esp_of_ip, Sa, SaStats};

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(cipher: Cipher, integ: Integ, esn: bool) -> SaConfig {
        SaConfig {
            spi: 0x1234,
            cipher,
            integ,
            enc_key: (0..cipher.keymat_len() as u8).collect(),
            auth_key: (0..if cipher.is_aead() { 0 } else { integ.key_len() } as u8)
                .map(|x| x ^ 0x5a)
                .collect(),
            esn,
            replay_window: 64,
            tunnel: Some(("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap())),
            soft: Limits::default(),
            hard: Limits::default(),
            initial_seq: 0,
            udp_encap: None,
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
                    rx.decapsulate(esp_of_ip(&enc).unwrap(), &mut dec)
                        .unwrap_or_else(|e| panic!("{c:?}/{i:?} esn={esn} n={n}: {e:?}"));
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
        assert_eq!(
            rx.decapsulate(&esp[..20], &mut out),
            Err(EspError::Truncated)
        );
        // every flipped bit fails the ICV and leaves the window alone
        for i in 8..esp.len() {
            let mut bad = esp.clone();
            bad[i] ^= 0x10;
            assert_eq!(
                rx.decapsulate(&bad, &mut out),
                Err(EspError::IcvMismatch),
                "byte {i}"
            );
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
        assert_eq!(
            rx.decapsulate(&forge(&[1, 3, 2, 4], 1), &mut out),
            Err(EspError::BadPadding)
        );
        assert_eq!(
            rx.decapsulate(&forge(&[1, 2, 2, 17], 2), &mut out),
            Err(EspError::BadNextHeader)
        );
        assert_eq!(rx.stats().packets, 0, "failed packets change no state");
        assert!(rx.decapsulate(&forge(&[1, 2, 2, 4], 3), &mut out).is_ok());
    }

    /// Key material stays out of logs and does not outlive the configuration: `Debug` shows the
    /// keys' lengths only, and wiping (what dropping does) zeroes and empties both keys.
    #[test]
    fn sa_keys_are_not_printed_and_are_wiped() {
        let mut c = cfg(Cipher::AesCbc128, Integ::HmacSha256_128, false);
        c.enc_key = vec![0xab; 16];
        c.auth_key = vec![0xcd; 32];
        let shown = format!("{c:?}");
        assert!(
            shown.contains("enc_key: <16 bytes>") && shown.contains("auth_key: <32 bytes>"),
            "{shown}"
        );
        assert!(
            !shown.contains("171")
                && !shown.contains("205")
                && !shown.to_lowercase().contains("ab, ab"),
            "{shown}"
        );
        let sa = Sa::new(c.clone()).unwrap();
        assert!(format!("{:?}", sa.cfg).contains("<16 bytes>"));
        c.wipe_keys();
        assert!(c.enc_key.is_empty() && c.auth_key.is_empty());
        // the SA built from the configuration keeps working on its own copy
        let mut out = vec![];
        assert!(sa
            .encapsulate(
                &[0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2],
                &mut out
            )
            .is_ok());
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

    /// ESP in UDP (RFC 3948): the UDP header sits between the outer header and the ESP header, with
    /// the SA's ports, its length, checksum 0 over IPv4 and a right one over IPv6; the receiver
    /// takes it off; a packet whose encapsulation is not its SA's is refused as WrongEncap,
    /// whichever way round.
    #[test]
    fn esp_in_udp() {
        use crate::checksum::{fold, ones_sum};
        for (a, b) in [("10.0.0.1", "10.0.0.2"), ("fd00::1", "fd00::2")] {
            let v6 = a.contains(':');
            for (cipher, integ) in [
                (Cipher::AesGcm128, Integ::None),
                (Cipher::AesCbc128, Integ::HmacSha256_128),
            ] {
                let mut c = cfg(cipher, integ, true);
                c.tunnel = Some((a.parse().unwrap(), b.parse().unwrap()));
                c.udp_encap = Some((4501, 4500));
                let tx = Sa::new(c.clone()).unwrap();
                let rx = Sa::new(c.clone()).unwrap();
                let mut plain = c.clone();
                plain.udp_encap = None;
                let plain_rx = Sa::new(plain).unwrap();
                for n in [0usize, 1, 100, 1400] {
                    let p = inner(n);
                    let mut out = vec![];
                    let seq = tx.encapsulate(&p, &mut out).unwrap();
                    let hl = if v6 { 40 } else { 20 };
                    assert_eq!(out[if v6 { 6 } else { 9 }], 17, "the outer protocol is UDP");
                    if !v6 {
                        assert_eq!(
                            u16::from_be_bytes([out[4], out[5]]),
                            seq as u16,
                            "the IPv4 id counts with the sequence number"
                        );
                        assert_eq!(fold(ones_sum(&out[..20]) as u32), 0xffff);
                    }
                    let u = &out[hl..];
                    assert_eq!(&u[..4], &[0x11, 0x95, 0x11, 0x94]);
                    assert_eq!(u16::from_be_bytes([u[4], u[5]]) as usize, u.len());
                    assert_eq!(
                        &u[8..12],
                        &0x1234u32.to_be_bytes(),
                        "the ESP header follows the UDP header"
                    );
                    let ck = u16::from_be_bytes([u[6], u[7]]);
                    if v6 {
                        let len = u.len() as u32;
                        let sum = ones_sum(&out[8..40]) as u32
                            + 17
                            + (len >> 16)
                            + (len & 0xffff)
                            + ones_sum(u) as u32;
                        assert_eq!(fold(sum), 0xffff, "the UDP checksum over IPv6 is right");
                    } else {
                        assert_eq!(ck, 0, "no UDP checksum over IPv4");
                    }
                    let mut d = vec![];
                    rx.decapsulate(esp_of_ip(&out).unwrap(), &mut d).unwrap();
                    assert_eq!(d, p);
                    // Ethernet padding after the datagram is not part of it
                    let mut padded = u.to_vec();
                    padded.extend_from_slice(&[0; 7]);
                    assert_eq!(
                        rx.decapsulate(&padded, &mut d),
                        Err(EspError::Replay),
                        "decrypted (then refused as a replay)"
                    );
                    // an SA without UDP encapsulation refuses it, and the other way round
                    assert_eq!(plain_rx.decapsulate(u, &mut d), Err(EspError::WrongEncap));
                    assert_eq!(rx.decapsulate(&u[8..], &mut d), Err(EspError::WrongEncap));
                    // another destination port, a length beyond the packet or shorter than the UDP
                    // header
                    for (i, v) in [(3usize, 0x95u8), (4, 0xff), (4, 0)] {
                        let mut bad = u.to_vec();
                        bad[i] = v;
                        if i == 4 && v == 0 {
                            bad[5] = 7;
                        }
                        assert_eq!(
                            rx.decapsulate(&bad, &mut d),
                            Err(EspError::WrongEncap),
                            "byte {i} = {v}"
                        );
                    }
                    assert_eq!(rx.decapsulate(&u[..5], &mut d), Err(EspError::Truncated));
                }
            }
        }
        // port 0 is refused
        let mut c = cfg(Cipher::AesGcm128, Integ::None, true);
        c.udp_encap = Some((0, 4500));
        assert_eq!(Sa::new(c.clone()).err(), Some(EspError::BadConfig));
        c.udp_encap = Some((4500, 0));
        assert_eq!(Sa::new(c).err(), Some(EspError::BadConfig));
    }

    /// A configuration that cannot make an SA says why, and Sa::new refuses exactly those.
    #[test]
    fn bad_configurations_say_why() {
        let good = || {
            let mut c = cfg(Cipher::AesGcm128, Integ::None, true);
            c.tunnel = Some((
                "192.0.2.1".parse().unwrap(),
                "198.51.100.1".parse().unwrap(),
            ));
            c
        };
        assert_eq!(good().problem(), None);
        Sa::new(good()).unwrap();
        let cases: Vec<(Box<dyn Fn(&mut SaConfig)>, &str)> = vec![
            (
                Box::new(|c| c.enc_key.truncate(16)),
                "AES-GCM-128 takes 20 bytes of key material, not 16",
            ),
            (
                Box::new(|c| c.auth_key = vec![1; 32]),
                "AES-GCM-128 authenticates by itself: no integrity key, not 32 bytes",
            ),
            (
                Box::new(|c| {
                    c.cipher = Cipher::AesCbc128;
                    c.enc_key = vec![1; 16];
                    c.integ = Integ::HmacSha256_128;
                    c.auth_key = vec![1; 20];
                }),
                "HMAC-SHA-256-128 takes a 32-byte key, not 20",
            ),
            (
                Box::new(|c| c.replay_window = 5000),
                "an anti-replay window of 5000 packets (at most 4096)",
            ),
            (
                Box::new(|c| {
                    c.tunnel = Some(("192.0.2.1".parse().unwrap(), "2001:db8::1".parse().unwrap()))
                }),
                "not of one IP version",
            ),
            (
                Box::new(|c| c.udp_encap = Some((0, 4500))),
                "UDP encapsulation with port 0 (0 -> 4500)",
            ),
            (
                Box::new(|c| {
                    c.tunnel = None;
                    c.udp_encap = Some((4500, 4500));
                }),
                "needs tunnel mode",
            ),
        ];
        for (bad, why) in cases {
            let mut c = good();
            bad(&mut c);
            let got = c.problem().unwrap_or_default();
            assert!(got.contains(why), "{got:?} should say {why:?}");
            assert_eq!(Sa::new(c).err(), Some(EspError::BadConfig), "{why}");
        }
    }

    #[test]
    fn sequence_overflow_without_esn() {
        let mut c = cfg(Cipher::AesGcm128, Integ::None, false);
        c.initial_seq = u32::MAX as u64 - 1;
        let tx = Sa::new(c).unwrap();
        let mut out = vec![];
        tx.encapsulate(&inner(1), &mut out).unwrap();
        assert_eq!(
            tx.encapsulate(&inner(1), &mut out),
            Err(EspError::SeqOverflow)
        );
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
        assert!(
            r.is_err(),
            "high-order bits differ: the receiver infers seq_hi = 0 and the ICV fails"
        );
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
        assert_eq!(
            tx.encapsulate(&inner(1), &mut out),
            Err(EspError::HardExpired)
        );
        assert_eq!(tx.drain_events(), vec!["hard spi=0x00001234".to_string()]);
    }
}
