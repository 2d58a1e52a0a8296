//! Tests of GRO on transmit: streams joined and cut back into the same segments (TCP, UDP), what
//! must not be joined, the 64 KiB bound, bad input; the frame builders are shared with the
//! tests of [`crate::gso`] and [`crate::port::txbatch`].

use super::*;
use crate::gso::{segment, VnetHdr};

fn csum_into(f: &mut [u8], v6: bool) {
    let ip = 14;
    let l4 = if v6 { ip + 40 } else { ip + 20 };
    if !v6 {
        f[ip + 10..ip + 12].copy_from_slice(&[0, 0]);
        let c = !fold(ones_sum(&f[ip..l4]) as u32);
        f[ip + 10..ip + 12].copy_from_slice(&c.to_be_bytes());
    }
    f[l4 + 16..l4 + 18].copy_from_slice(&[0, 0]);
    let c = !fold(pseudo(f, ip, v6, false, f.len() - l4) + ones_sum(&f[l4..]) as u32);
    f[l4 + 16..l4 + 18].copy_from_slice(&c.to_be_bytes());
}

/// An Ethernet frame (02:..:01 -> 02:..:02) carrying an IPv4 (header checksum right, DF, TTL
/// 64, 10.0.1.1 -> 10.0.2.2) or IPv6 (fd00::1 -> fd00::2, hop limit 64) packet of protocol
/// `proto` whose payload is `l4`.
pub(crate) fn ip_frame(v6: bool, id: u16, proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    if v6 {
        f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
        f.extend_from_slice(&(l4.len() as u16).to_be_bytes());
        f.extend_from_slice(&[proto, 64]);
        f.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    } else {
        f.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
        f.extend_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
        f.extend_from_slice(&id.to_be_bytes());
        f.extend_from_slice(&[0x40, 0, 64, proto, 0, 0, 10, 0, 1, 1, 10, 0, 2, 2]);
        let c = !fold(ones_sum(&f[14..34]) as u32);
        f[24..26].copy_from_slice(&c.to_be_bytes());
    }
    f.extend_from_slice(l4);
    f
}

/// A TCP segment with a timestamp option, checksums right.
pub(crate) fn seg(v6: bool, seq: u32, id: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut t = vec![0x13, 0x89, 0x9c, 0x40];
    t.extend_from_slice(&seq.to_be_bytes());
    t.extend_from_slice(&[0, 0, 0x10, 0, 0x80, flags, 0x01, 0xf5, 0, 0, 0, 0]);
    t.extend_from_slice(&[1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 4]);
    t.extend_from_slice(payload);
    let mut f = ip_frame(v6, id, 6, &t);
    csum_into(&mut f, v6);
    f
}

fn push(c: &mut Coalescer, f: &[u8], out: &mut Vec<(Vec<u8>, Option<VnetHdr>)>) {
    let s = parse(f, c.udp);
    if let Some(s) = &s {
        if c.join(f, s) {
            return;
        }
    }
    flush(c, out);
    if let Some(s) = &s {
        if c.start(f, s) {
            return;
        }
    }
    out.push((f.to_vec(), None));
}

fn flush(c: &mut Coalescer, out: &mut Vec<(Vec<u8>, Option<VnetHdr>)>) {
    if let Some(s) = c.take() {
        let h = VnetHdr::parse(&s.vnet).filter(|h| h.is_gso());
        assert_eq!(h.is_some(), s.segs > 1);
        out.push((s.frame.to_vec(), h));
    }
}

/// What the kernel makes of the output: super-frames cut again (as its GSO does), others as
/// they are.
fn wire(out: &[(Vec<u8>, Option<VnetHdr>)]) -> Vec<Vec<u8>> {
    let mut w = vec![];
    for (f, h) in out {
        match h {
            Some(h) => {
                // the checksum field holds the pseudo-header sum: complete it as the kernel
                // would first
                let mut f = f.clone();
                assert!(crate::gso::complete_csum(
                    &mut f,
                    h.csum_start as usize,
                    h.csum_offset as usize
                ));
                // ... which makes the super-frame's own TCP checksum right (the pseudo-header
                // over its length)
                let (ip, l4) = (14, h.csum_start as usize);
                let v6 = f[12] == 0x86;
                let udp = h.gso_type == crate::gso::GSO_UDP_L4;
                assert_eq!(
                    fold(pseudo(&f, ip, v6, udp, f.len() - l4) + ones_sum(&f[l4..]) as u32),
                    0xffff
                );
                if udp {
                    assert_eq!(
                        be16(&f, l4 + 4) as usize,
                        f.len() - l4,
                        "the UDP length is the super-frame's"
                    );
                }
                if !v6 {
                    assert_eq!(fold(ones_sum(&f[ip..l4]) as u32), 0xffff);
                }
                segment(&f, h, &mut w).unwrap();
            }
            None => w.push(f.clone()),
        }
    }
    w
}

#[test]
fn a_stream_is_joined_and_cut_back_into_the_same_segments() {
    for v6 in [false, true] {
        let p: Vec<u8> = (0..1000u32).map(|i| (i * 13) as u8).collect();
        let mut input = vec![];
        for i in 0..5u32 {
            input.push(seg(v6, 1000 + i * 1000, 7 + i as u16, ACK, &p));
        }
        // the last, shorter, with PSH
        input.push(seg(v6, 6000, 12, ACK | PSH, &p[..300]));
        let mut c = Coalescer::default();
        let mut out = vec![];
        for f in &input {
            push(&mut c, f, &mut out);
        }
        flush(&mut c, &mut out);
        assert_eq!(out.len(), 1, "v6 {v6}");
        let h = out[0].1.unwrap();
        assert_eq!((h.gso_size, h.csum_offset), (1000, 16));
        assert_eq!(out[0].0.len(), input[0].len() + 4 * 1000 + 300);
        assert_eq!(wire(&out), input, "v6 {v6}");
        assert_eq!(c.made, 1);
    }
}

#[test]
fn what_does_not_follow_on_is_not_joined() {
    let p = [5u8; 100];
    let base = seg(false, 100, 1, ACK, &p);
    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        ("a gap in the sequence", seg(false, 300, 2, ACK, &p)),
        ("an id not counted up", seg(false, 200, 5, ACK, &p)),
        ("FIN", seg(false, 200, 2, ACK | FIN, &p)),
        (
            "longer than the first",
            seg(false, 200, 2, ACK, &[5u8; 101]),
        ),
        ("no payload", seg(false, 200, 2, ACK, &[])),
    ];
    let mut other_port = seg(false, 200, 2, ACK, &p);
    other_port[14 + 20] ^= 1;
    csum_into(&mut other_port, false);
    cases.push(("another port", other_port));
    let mut other_ack = seg(false, 200, 2, ACK, &p);
    other_ack[14 + 20 + 11] ^= 1;
    csum_into(&mut other_ack, false);
    cases.push(("another ACK number", other_ack));
    let mut other_ts = seg(false, 200, 2, ACK, &p);
    other_ts[14 + 20 + 27] ^= 1;
    csum_into(&mut other_ts, false);
    cases.push(("another timestamp", other_ts));
    let mut ce = seg(false, 200, 2, ACK, &p);
    ce[15] |= 3;
    csum_into(&mut ce, false);
    cases.push(("ECN CE marked", ce));
    let mut bad = seg(false, 200, 2, ACK, &p);
    bad[70] ^= 0xff;
    cases.push(("a wrong TCP checksum", bad));
    let mut bad_ip = seg(false, 200, 2, ACK, &p);
    bad_ip[22] ^= 1;
    cases.push(("a wrong IP checksum", bad_ip));
    let mut mac = seg(false, 200, 2, ACK, &p);
    mac[0] = 4;
    cases.push(("another MAC address", mac));
    for (what, f) in cases {
        let mut c = Coalescer::default();
        let mut out = vec![];
        push(&mut c, &base, &mut out);
        push(&mut c, &f, &mut out);
        flush(&mut c, &mut out);
        assert_eq!(out.len(), 2, "{what}");
        assert!(out.iter().all(|(_, h)| h.is_none()), "{what}");
        assert_eq!(out[0].0, base, "{what}");
        assert_eq!(out[1].0, f, "{what}");
    }
    // after PSH or a short segment nothing more joins
    for first_two in [
        [
            seg(false, 100, 1, ACK, &p),
            seg(false, 200, 2, ACK | PSH, &p),
        ],
        [
            seg(false, 100, 1, ACK, &p),
            seg(false, 200, 2, ACK, &p[..50]),
        ],
    ] {
        let mut c = Coalescer::default();
        let mut out = vec![];
        push(&mut c, &first_two[0], &mut out);
        push(&mut c, &first_two[1], &mut out);
        let next = seg(false, 250, 3, ACK, &p[..50]);
        push(&mut c, &next, &mut out);
        flush(&mut c, &mut out);
        assert_eq!(out.len(), 2);
        assert!(out[0].1.is_some() && out[1].1.is_none());
    }
}

/// A UDP datagram (checksum computed, or 0: none, over IPv4).
pub(crate) fn dgram(v6: bool, id: u16, sport: u16, payload: &[u8], with_csum: bool) -> Vec<u8> {
    let mut u = sport.to_be_bytes().to_vec();
    u.extend_from_slice(&4500u16.to_be_bytes());
    u.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(payload);
    let mut f = ip_frame(v6, id, 17, &u);
    if with_csum {
        let l4 = f.len() - u.len();
        let mut c = !fold(pseudo(&f, 14, v6, true, u.len()) + ones_sum(&f[l4..]) as u32);
        if c == 0 {
            c = 0xffff;
        }
        f[l4 + 6..l4 + 8].copy_from_slice(&c.to_be_bytes());
    }
    f
}

fn udp_coalescer() -> Coalescer {
    Coalescer {
        udp: true,
        ..Default::default()
    }
}

#[test]
fn a_udp_flow_is_joined_and_cut_back_into_the_same_datagrams() {
    let p: Vec<u8> = (0..1400u32).map(|i| (i * 7) as u8).collect();
    for (v6, with_csum) in [(false, true), (true, true), (false, false)] {
        let mut input: Vec<Vec<u8>> = (0..5u16)
            .map(|i| dgram(v6, 100 + i, 4500, &p, with_csum))
            .collect();
        input.push(dgram(v6, 105, 4500, &p[..333], with_csum));
        let mut c = udp_coalescer();
        let mut out = vec![];
        for f in &input {
            push(&mut c, f, &mut out);
        }
        flush(&mut c, &mut out);
        assert_eq!(out.len(), 1, "v6 {v6}");
        let h = out[0].1.unwrap();
        assert_eq!(
            (h.gso_type, h.gso_size, h.csum_offset),
            (crate::gso::GSO_UDP_L4, 1400, 6)
        );
        let w = wire(&out);
        if with_csum {
            assert_eq!(w, input, "v6 {v6}");
        } else {
            // the same datagrams, with a checksum computed where there was none
            assert_eq!(w.len(), input.len());
            for (a, b) in w.iter().zip(&input) {
                let l4 = 14 + 20;
                assert_ne!(be16(a, l4 + 6), 0);
                assert_eq!(
                    fold(pseudo(a, 14, false, true, a.len() - l4) + ones_sum(&a[l4..]) as u32),
                    0xffff
                );
                assert_eq!((&a[..l4 + 6], &a[l4 + 8..]), (&b[..l4 + 6], &b[l4 + 8..]));
            }
        }
    }
}

#[test]
fn udp_datagrams_that_do_not_follow_on_are_not_joined() {
    let p = [3u8; 200];
    let base = dgram(false, 1, 4500, &p, true);
    let mut bad = dgram(false, 2, 4500, &p, true);
    bad[60] ^= 0xff;
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("another source port", dgram(false, 2, 4501, &p, true)),
        ("an id not counted up", dgram(false, 3, 4500, &p, true)),
        (
            "longer than the first",
            dgram(false, 2, 4500, &[3u8; 201], true),
        ),
        ("a wrong UDP checksum", bad),
        ("IPv6", dgram(true, 2, 4500, &p, true)),
        ("a TCP segment", seg(false, 1, 2, ACK, &p)),
    ];
    for (what, f) in cases {
        let mut c = udp_coalescer();
        let mut out = vec![];
        push(&mut c, &base, &mut out);
        push(&mut c, &f, &mut out);
        flush(&mut c, &mut out);
        assert_eq!(out.len(), 2, "{what}");
        assert!(out.iter().all(|(_, h)| h.is_none()), "{what}");
        assert_eq!((&out[0].0, &out[1].0), (&base, &f), "{what}");
    }
    // no checksum over IPv6 is wrong; a UDP length other than the IP payload's is not joined
    assert!(parse(&dgram(true, 0, 4500, &p, false), true).is_none());
    let mut len = dgram(false, 1, 4500, &p, false);
    len[14 + 20 + 5] ^= 1;
    assert!(parse(&len, true).is_none());
    // a port that does not join UDP does not look at datagrams (no checksum pass for them)
    assert!(parse(&dgram(false, 1, 4500, &p, true), true).is_some());
    assert!(parse(&dgram(false, 1, 4500, &p, true), false).is_none());
    // where UDP is not asked for, datagrams go as they are
    let mut c = Coalescer::default();
    let mut out = vec![];
    for i in 0..3 {
        push(&mut c, &dgram(false, i, 4500, &p, true), &mut out);
    }
    flush(&mut c, &mut out);
    assert_eq!(out.len(), 3);
    assert!(out.iter().all(|(_, h)| h.is_none()));
    // at most 64 datagrams in one super-frame
    let mut c = udp_coalescer();
    let mut out = vec![];
    let input: Vec<Vec<u8>> = (0..100u16)
        .map(|i| dgram(false, i, 4500, &[1u8; 10], true))
        .collect();
    for f in &input {
        push(&mut c, f, &mut out);
    }
    flush(&mut c, &mut out);
    assert_eq!(out.len(), 2);
    assert_eq!(wire(&out), input);
}

#[test]
fn super_frames_stay_within_64k() {
    let p = [1u8; 1400];
    let mut c = Coalescer::default();
    let mut out = vec![];
    let mut input = vec![];
    for i in 0..100u32 {
        input.push(seg(false, i * 1400, i as u16, ACK, &p));
    }
    for f in &input {
        push(&mut c, f, &mut out);
    }
    flush(&mut c, &mut out);
    assert!(out.len() >= 3);
    assert!(out.iter().all(|(f, _)| f.len() - 14 <= MAX_IP));
    assert_eq!(wire(&out), input);
}

#[test]
fn other_frames_and_bad_input_are_left_alone() {
    assert!(parse(&[], true).is_none());
    let f = seg(false, 1, 1, ACK, &[1, 2, 3]);
    for n in 0..f.len() {
        // truncated: the IP length no longer fits (never a panic)
        assert!(parse(&f[..n], true).is_none(), "{n}");
    }
    let f6 = seg(true, 1, 1, ACK, &[1, 2, 3]);
    for n in 0..f6.len() {
        assert!(parse(&f6[..n], true).is_none(), "{n}");
    }
    // a data offset beyond the packet, a TCP header shorter than 20 bytes, an IP fragment, IP
    // options
    for (i, v) in [
        (14 + 20 + 12, 0xf0u8),
        (14 + 20 + 12, 0x40),
        (14 + 6, 0x20),
        (14, 0x46),
    ] {
        let mut g = f.clone();
        g[i] = v;
        csum_into(&mut g, false);
        assert!(parse(&g, true).is_none());
    }
    let mut udp = f.clone();
    udp[14 + 9] = 17;
    assert!(parse(&udp, true).is_none());
    // SYN does not start a super-frame
    let syn = seg(false, 1, 1, SYN | ACK, &[1]);
    let s = parse(&syn, true).unwrap();
    assert!(!Coalescer::default().start(&syn, &s));
    // Ethernet padding after a short IP packet is not part of the segment
    let mut padded = seg(false, 1, 1, ACK, &[9]);
    padded.extend_from_slice(&[0; 6]);
    let mut c = Coalescer::default();
    let s = parse(&padded, true).unwrap();
    assert!(c.start(&padded, &s));
    assert_eq!(c.take().unwrap().frame, &padded[..padded.len() - 6]);
}
