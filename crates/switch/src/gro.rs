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
pub(crate) mod tests;
