//! Coalescing of TCP segments on transmit (GRO in the switch): consecutive segments of one TCP
//! stream that the pipeline sends to the same interface port within one batch are joined into one
//! GSO super-frame, sent with a `virtio_net_hdr` (PACKET_VNET_HDR) that tells the kernel how to cut
//! it again. A host behind a veth then takes the whole stream of a batch as one packet (as after
//! GRO in its own stack): one pass through veth, IP and TCP instead of one per segment, and one ACK
//! instead of one per two segments. Where the frame goes on to a device without TSO, the kernel
//! segments it again (the segments it makes are those that went in: same payloads, sequence
//! numbers, IPv4 ids counted up, checksums computed).
//!
//! The rules follow the kernel's `tcp_gro_receive`: the same Ethernet header (no VLAN tag), IP
//! addresses, TOS/ECN, TTL, DF, ports, ACK number, window and TCP options byte for byte; sequence
//! numbers (and IPv4 ids) following on; every segment but the last of the MSS of the first; only
//! ACK (and ECE) set, PSH allowed on the last one; no IP options or IPv6 extension headers, no
//! fragments. Segments whose IP or TCP checksum is wrong are never joined (the kernel computes the
//! super-frame's checksums afresh, which would hide the damage): they go out as they are, for the
//! receiver to drop.
//!
//! UDP datagrams are joined the same way where asked for ([`UDP_GRO_ENV`], interface ports):
//! consecutive datagrams of one flow (the same headers but for the lengths, IPv4 ids counting up
//! and checksums), every one but the last of the first one's length, go out as one UDP GSO
//! super-frame (GSO_UDP_L4), which the kernel, or a switch receiving it, cuts into the same
//! datagrams again. This is what lets ESP in UDP (RFC 3948) between two gateways cross the link a
//! stream at a time. A datagram sent without a checksum (0, IPv4) gets one computed when it is cut;
//! a wrong checksum is never joined.

use p4sec_externs::checksum::{fold, ones_sum};

/// Set (to anything but `0`) to send TCP segments to interface, TAP and TUN ports as they come out
/// of the pipeline, one frame each, instead of joining those of one stream into GSO super-frames.
pub const NO_GRO_ENV: &str = "P4SEC_NO_GRO";

/// Whether segments are joined on transmit ([`NO_GRO_ENV`] not set).
pub fn wanted() -> bool {
    !matches!(std::env::var(NO_GRO_ENV), Ok(v) if !v.is_empty() && v != "0")
}

/// Set (to anything but `0`) to join the UDP datagrams of a flow too, on interface ports (off by
/// default, as the kernel's UDP GRO on forwarding is: a capture on the link sees the super-frames,
/// which only a receiver that takes GSO frames can cut again). Between two switches it carries ESP
/// in UDP a stream at a time.
pub const UDP_GRO_ENV: &str = "P4SEC_UDP_GRO";

/// Whether UDP datagrams are joined on transmit ([`UDP_GRO_ENV`] set, [`NO_GRO_ENV`] not).
pub fn udp_wanted() -> bool {
    wanted() && matches!(std::env::var(UDP_GRO_ENV), Ok(v) if !v.is_empty() && v != "0")
}

/// What one TCP segment looks like, once checked to be a candidate.
#[derive(Clone, Copy, Debug)]
pub struct Seg {
    /// A UDP datagram (else a TCP segment).
    udp: bool,
    /// Offsets in the frame: IP header, TCP header, payload; the end of the IP packet.
    ip: usize,
    l4: usize,
    hdrs: usize,
    end: usize,
    v6: bool,
    seq: u32,
    id: u16,
    flags: u8,
}

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;
const URG: u8 = 0x20;
const CWR: u8 = 0x80;

/// The IP packet (total or payload length field) may not exceed 65,535 bytes.
const MAX_IP: usize = 65_535;

fn be16(f: &[u8], i: usize) -> u16 {
    u16::from_be_bytes([f[i], f[i + 1]])
}

/// The one's complement sum (not folded) of the pseudo-header of a TCP segment (UDP datagram:
/// `udp`) of `len` bytes.
fn pseudo(f: &[u8], ip: usize, v6: bool, udp: bool, len: usize) -> u32 {
    let addrs = if v6 {
        &f[ip + 8..ip + 40]
    } else {
        &f[ip + 12..ip + 20]
    };
    ones_sum(addrs) as u32 + if udp { 17 } else { 6 } + (len as u32 >> 16) + (len as u32 & 0xffff)
}

/// At most this many datagrams in one UDP GSO super-frame (the kernel's UDP_MAX_SEGMENTS).
const MAX_UDP_SEGS: usize = 64;

/// Is this frame a TCP segment (or UDP datagram) that could be joined with others? Untagged
/// Ethernet, IPv4 without options (not a fragment) or IPv6 without extension headers, a payload,
/// both checksums right (a UDP datagram over IPv4 may have none: 0). UDP datagrams only with `udp`
/// (a coalescer that joins them: [`Coalescer::udp`]); otherwise they are not looked at.
pub fn parse(f: &[u8], udp: bool) -> Option<Seg> {
    if f.len() < 14 + 20 {
        return None;
    }
    let ip = 14;
    let (v6, l4, end, id, proto) = match be16(f, 12) {
        0x0800 => {
            let proto = f[ip + 9];
            if f[ip] != 0x45
                || (proto != 6 && !(udp && proto == 17))
                || be16(f, ip + 6) & 0x3fff != 0
            {
                return None;
            }
            let end = ip + be16(f, ip + 2) as usize;
            if end > f.len() || end < ip + 28 || fold(ones_sum(&f[ip..ip + 20]) as u32) != 0xffff {
                return None;
            }
            (false, ip + 20, end, be16(f, ip + 4), proto)
        }
        0x86dd => {
            let proto = f[ip + 6];
            if f.len() < ip + 48 || f[ip] >> 4 != 6 || (proto != 6 && !(udp && proto == 17)) {
                return None;
            }
            let end = ip + 40 + be16(f, ip + 4) as usize;
            if end > f.len() || end < ip + 48 {
                return None;
            }
            (true, ip + 40, end, 0, proto)
        }
        _ => return None,
    };
    if proto == 17 {
        // UDP: its length is the IP payload's, a payload, the checksum right or (IPv4) none
        let hdrs = l4 + 8;
        if hdrs >= end || be16(f, l4 + 4) as usize != end - l4 {
            return None;
        }
        let none = be16(f, l4 + 6) == 0;
        if (none && v6)
            || (!none
                && fold(pseudo(f, ip, v6, true, end - l4) + ones_sum(&f[l4..end]) as u32) != 0xffff)
        {
            return None;
        }
        return Some(Seg {
            udp: true,
            ip,
            l4,
            hdrs,
            end,
            v6,
            seq: 0,
            id,
            flags: 0,
        });
    }
    if end < l4 + 20 {
        return None;
    }
    let doff = (f[l4 + 12] >> 4) as usize * 4;
    let hdrs = l4 + doff;
    if doff < 20 || hdrs >= end {
        return None;
    }
    let sum = pseudo(f, ip, v6, false, end - l4) + ones_sum(&f[l4..end]) as u32;
    if fold(sum) != 0xffff {
        return None;
    }
    let seq = u32::from_be_bytes([f[l4 + 4], f[l4 + 5], f[l4 + 6], f[l4 + 7]]);
    Some(Seg {
        udp: false,
        ip,
        l4,
        hdrs,
        end,
        v6,
        seq,
        id,
        flags: f[l4 + 13],
    })
}

/// A super-frame being built from the segments of one TCP stream.
#[derive(Default)]
pub struct Coalescer {
    /// The first segment (its headers) followed by the payload of every segment joined.
    buf: Vec<u8>,
    /// Segments in `buf`; 0 when it holds nothing.
    segs: usize,
    first: Option<Seg>,
    /// The payload of the first segment: every other but the last has this much.
    mss: usize,
    next_seq: u32,
    next_id: u16,
    /// PSH seen, or a segment shorter than the MSS: nothing more may join.
    closed: bool,
    psh: bool,
    /// Super-frames made and segments in them (for the port's counters).
    pub made: u64,
    /// UDP datagrams are joined too (GSO_UDP_L4), not only TCP segments.
    pub udp: bool,
}

/// A super-frame ready to go: the frame and its `virtio_net_hdr`.
pub struct Super<'a> {
    pub frame: &'a [u8],
    pub vnet: [u8; crate::gso::VNET_HDR_LEN],
    /// Segments in it (1: a plain frame, `vnet` all zero).
    pub segs: usize,
}

impl Coalescer {
    /// A coalescer that joins UDP datagrams too (`udp`), or only TCP segments.
    pub fn new(udp: bool) -> Coalescer {
        Coalescer {
            udp,
            ..Default::default()
        }
    }

    /// Segments held.
    pub fn held(&self) -> usize {
        self.segs
    }

    /// Join `f` (parsed as `s`) to the super-frame held; false if it does not belong to it (then
    /// [`Coalescer::take`] what is held and [`Coalescer::start`] anew).
    pub fn join(&mut self, f: &[u8], s: &Seg) -> bool {
        let Some(h) = self.first else { return false };
        let b = &self.buf;
        let pay = s.end - s.hdrs;
        if self.closed
            || s.udp != h.udp
            || (s.udp && self.segs >= MAX_UDP_SEGS)
            || s.v6 != h.v6
            || s.hdrs != h.hdrs
            || (!s.udp && s.seq != self.next_seq)
            || (!s.v6 && s.id != self.next_id)
            || s.flags & !PSH != h.flags
            || pay > self.mss
            || b.len() - h.ip + pay > MAX_IP
            || f[..h.ip] != b[..h.ip]
        {
            return false;
        }
        let (ip, l4) = (h.ip, h.l4);
        let same_ip = if s.v6 {
            f[ip..ip + 4] == b[ip..ip + 4] && f[ip + 6..ip + 40] == b[ip + 6..ip + 40]
        } else {
            // TOS, DF, TTL, protocol, addresses (not the length, id or checksum)
            f[ip + 1] == b[ip + 1]
                && f[ip + 6..ip + 10] == b[ip + 6..ip + 10]
                && f[ip + 12..ip + 20] == b[ip + 12..ip + 20]
        };
        // ports, ACK number, data offset, window, urgent pointer, options (not the sequence number,
        // flags or checksum)
        let same_tcp = || {
            f[l4..l4 + 4] == b[l4..l4 + 4]
                && f[l4 + 8..l4 + 13] == b[l4 + 8..l4 + 13]
                && f[l4 + 14..l4 + 16] == b[l4 + 14..l4 + 16]
                && f[l4 + 18..h.hdrs] == b[l4 + 18..h.hdrs]
        };
        // UDP: the ports (the length and checksum differ)
        let same_l4 = if s.udp {
            f[l4..l4 + 4] == b[l4..l4 + 4]
        } else {
            same_tcp()
        };
        if !same_ip || !same_l4 {
            return false;
        }
        self.buf.extend_from_slice(&f[s.hdrs..s.end]);
        self.segs += 1;
        self.next_seq = s.seq.wrapping_add(pay as u32);
        self.next_id = s.id.wrapping_add(1);
        if s.flags & PSH != 0 {
            self.psh = true;
            self.closed = true;
        }
        if pay < self.mss {
            self.closed = true;
        }
        true
    }

    /// Hold `f` as the first segment of a new super-frame (nothing may be held); false if it cannot
    /// start one (not ACK only; a UDP datagram where they are not joined): send it as it is.
    pub fn start(&mut self, f: &[u8], s: &Seg) -> bool {
        let can = if s.udp {
            self.udp
        } else {
            s.flags & ACK != 0 && s.flags & (FIN | SYN | RST | PSH | URG | CWR) == 0
        };
        if self.segs != 0 || !can {
            return false;
        }
        self.buf.clear();
        self.buf.extend_from_slice(&f[..s.end]);
        self.segs = 1;
        self.first = Some(*s);
        self.mss = s.end - s.hdrs;
        self.next_seq = s.seq.wrapping_add(self.mss as u32);
        self.next_id = s.id.wrapping_add(1);
        self.closed = false;
        self.psh = false;
        true
    }

    /// What is held, ready to send (headers fixed up for the whole super-frame); nothing is held
    /// afterwards.
    pub fn take(&mut self) -> Option<Super<'_>> {
        let segs = std::mem::take(&mut self.segs);
        let h = self.first.take()?;
        if segs == 0 {
            return None;
        }
        let mut vnet = [0u8; crate::gso::VNET_HDR_LEN];
        if segs > 1 {
            self.made += 1;
            let b = &mut self.buf;
            let (ip, l4) = (h.ip, h.l4);
            let len = b.len();
            if h.v6 {
                b[ip + 4..ip + 6].copy_from_slice(&((len - ip - 40) as u16).to_be_bytes());
            } else {
                b[ip + 2..ip + 4].copy_from_slice(&((len - ip) as u16).to_be_bytes());
                b[ip + 10..ip + 12].copy_from_slice(&[0, 0]);
                let c = !fold(ones_sum(&b[ip..l4]) as u32);
                b[ip + 10..ip + 12].copy_from_slice(&c.to_be_bytes());
            }
            if self.psh {
                b[l4 + 13] |= PSH;
            }
            // checksum left to the kernel (CHECKSUM_PARTIAL): the field holds the pseudo-header's
            // sum (of a UDP super-frame: over its whole length, which its UDP length field says
            // too)
            let p = fold(pseudo(b, ip, h.v6, h.udp, len - l4));
            let (field, gso_type) = if h.udp {
                b[l4 + 4..l4 + 6].copy_from_slice(&((len - l4) as u16).to_be_bytes());
                (6, crate::gso::GSO_UDP_L4)
            } else {
                (
                    16,
                    if h.v6 {
                        crate::gso::GSO_TCPV6
                    } else {
                        crate::gso::GSO_TCPV4
                    },
                )
            };
            b[l4 + field..l4 + field + 2].copy_from_slice(&p.to_be_bytes());
            let fields = [h.hdrs as u16, self.mss as u16, l4 as u16, field as u16];
            vnet[0] = crate::gso::F_NEEDS_CSUM;
            vnet[1] = gso_type;
            for (i, v) in fields.iter().enumerate() {
                vnet[2 + 2 * i..4 + 2 * i].copy_from_slice(&v.to_le_bytes());
            }
        }
        Some(Super {
            frame: &self.buf,
            vnet,
            segs,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
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
}
