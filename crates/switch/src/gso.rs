//! PACKET_VNET_HDR on interface ports: every frame the kernel hands over is preceded by a
//! `virtio_net_hdr` telling whether its checksum is left to offload (CHECKSUM_PARTIAL:
//! `csum_start`/`csum_offset`) and whether it is a GSO/GRO super-frame (a TCP stream's segments, or
//! UDP datagrams, in one frame larger than the MTU, with `gso_size` bytes of payload per segment).
//! Peers with offloads on (TSO/GSO, checksum offload: a veth's default) send such frames; the
//! switch completes the checksum and cuts super-frames into the frames the wire would have carried
//! before the pipeline sees them. Frames the switch sends carry a zero header (nothing left to do).

use p4sec_externs::checksum::{fold, ones_sum};

/// The socket option (SOL_PACKET) that turns the headers on.
pub const PACKET_VNET_HDR: libc::c_int = 15;

/// `struct virtio_net_hdr` (10 bytes, little-endian on the hosts this runs on: the kernel uses the
/// host's byte order for packet sockets).
pub const VNET_HDR_LEN: usize = 10;

pub const F_NEEDS_CSUM: u8 = 1;
pub const GSO_NONE: u8 = 0;
pub const GSO_TCPV4: u8 = 1;
pub const GSO_UDP: u8 = 3;
pub const GSO_TCPV6: u8 = 4;
pub const GSO_UDP_L4: u8 = 5;
pub const GSO_ECN: u8 = 0x80;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VnetHdr {
    pub flags: u8,
    pub gso_type: u8,
    pub hdr_len: u16,
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

impl VnetHdr {
    pub fn parse(b: &[u8]) -> Option<VnetHdr> {
        if b.len() < VNET_HDR_LEN {
            return None;
        }
        let u = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        Some(VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u(2),
            gso_size: u(4),
            csum_start: u(6),
            csum_offset: u(8),
        })
    }
    /// Is the frame a super-frame to cut into segments?
    pub fn is_gso(&self) -> bool {
        self.gso_type & !GSO_ECN != GSO_NONE
    }
}

/// Complete a checksum left to offload: the one's complement of the sum from `start` to the end of
/// the frame (the field at `start + offset` holds the pseudo-header's sum) goes to that field.
/// False when the offsets do not fit the frame.
pub fn complete_csum(f: &mut [u8], start: usize, offset: usize) -> bool {
    let field = start + offset;
    if field + 2 > f.len() {
        return false;
    }
    let c = !ones_sum(&f[start..]);
    f[field..field + 2].copy_from_slice(&c.to_be_bytes());
    true
}

/// Where a frame's layers start: (offset of the IP header, IP version, offset of the L4 header, L4
/// protocol). Ethernet with up to two VLAN tags, IPv4 (any options, not a fragment) or IPv6 (no
/// extension headers).
fn layers(f: &[u8]) -> Option<(usize, u8, usize, u8)> {
    let mut off = 12;
    loop {
        let et = u16::from_be_bytes([*f.get(off)?, *f.get(off + 1)?]);
        match et {
            0x8100 | 0x88a8 => off += 4,
            0x0800 => {
                let ip = off + 2;
                let ihl = (*f.get(ip)? & 0x0f) as usize * 4;
                if ihl < 20 || f.len() < ip + ihl {
                    return None;
                }
                return Some((ip, 4, ip + ihl, f[ip + 9]));
            }
            0x86dd => {
                let ip = off + 2;
                if f.len() < ip + 40 {
                    return None;
                }
                return Some((ip, 6, ip + 40, f[ip + 6]));
            }
            _ => return None,
        }
    }
}

/// The sum of the pseudo-header of an L4 segment of `len` bytes.
fn pseudo(f: &[u8], ip: usize, version: u8, proto: u8, len: usize) -> u32 {
    let mut sum = if version == 4 {
        ones_sum(&f[ip + 12..ip + 20]) as u32
    } else {
        ones_sum(&f[ip + 8..ip + 40]) as u32
    };
    sum += proto as u32;
    sum += (len as u32) >> 16;
    sum += len as u32 & 0xffff;
    sum
}

/// The segments of the last GSO super-frame a port received, handed to the packet loop one per
/// `recv` (the buffers are reused from frame to frame).
#[derive(Default)]
pub struct Segments {
    segs: Vec<Vec<u8>>,
    count: usize,
    next: usize,
}

impl Segments {
    /// Segments not handed over yet?
    #[inline]
    pub fn pending(&self) -> bool {
        self.next < self.count
    }

    /// The next segment.
    #[inline]
    pub fn next_seg(&mut self) -> Option<(*const u8, usize)> {
        let s = self
            .segs
            .get(self.next)
            .filter(|_| self.next < self.count)?;
        self.next += 1;
        Some((s.as_ptr(), s.len()))
    }

    /// Cut `frame` (a super-frame as `h` describes it) into segments ([`segment_into`]) and hand
    /// over the first; `Ok(None)` when it makes none. Segments of an earlier frame not handed over
    /// are dropped.
    pub fn cut(&mut self, frame: &[u8], h: &VnetHdr) -> Result<Option<(*const u8, usize)>, String> {
        self.count = 0;
        self.next = 0;
        self.count = segment_into(frame, h, &mut self.segs)?;
        Ok(self.next_seg())
    }

    /// A frame read after its virtio-net header `h` (a TUN/TAP queue's): a super-frame is cut into
    /// segments and the first one handed over; otherwise a checksum left to offload is completed
    /// and the frame handed over as it is. `csum_start` counts from the frame's byte `csum_base` (a
    /// TUN packet's offsets count from its IP header, after the Ethernet header the port put in
    /// front: 14).
    pub fn offloaded(
        &mut self,
        frame: &mut [u8],
        h: &VnetHdr,
        csum_base: usize,
    ) -> Result<(*const u8, usize), String> {
        if h.is_gso() {
            return self
                .cut(frame, h)?
                .ok_or_else(|| "a GSO frame without payload".to_string());
        }
        if h.flags & F_NEEDS_CSUM != 0
            && !complete_csum(
                frame,
                csum_base + h.csum_start as usize,
                h.csum_offset as usize,
            )
        {
            return Err(format!(
                "checksum offsets {}+{} outside a frame of {} bytes",
                h.csum_start,
                h.csum_offset,
                frame.len()
            ));
        }
        Ok((frame.as_ptr(), frame.len()))
    }
}

/// Cut a GSO super-frame into the frames it stands for, each with `h.gso_size` bytes of payload at
/// most (the last one the rest), appended to `out`: TCP over IPv4 or IPv6 (sequence numbers
/// advanced, FIN and PSH on the last segment only, CWR on the first only, IPv4 ids counted up) and
/// UDP (GSO_UDP_L4: each segment its own datagram). Every segment gets its IP and L4 checksums
/// computed. UFO (GSO_UDP, IP fragmentation) and frames whose headers cannot be read are errors
/// (the frame is dropped).
pub fn segment(f: &[u8], h: &VnetHdr, out: &mut Vec<Vec<u8>>) -> Result<(), String> {
    let mut segs = vec![];
    let n = segment_into(f, h, &mut segs)?;
    out.extend(segs.into_iter().take(n));
    Ok(())
}

/// [`segment`] into the buffers of `out` (reused from frame to frame: no allocation per segment
/// once they are large enough; more are added when needed): the segments are `out[..n]`.
pub fn segment_into(f: &[u8], h: &VnetHdr, out: &mut Vec<Vec<u8>>) -> Result<usize, String> {
    let kind = h.gso_type & !GSO_ECN;
    let (ip, version, l4, proto) =
        layers(f).ok_or("a GSO frame whose Ethernet/IP headers cannot be read")?;
    let want = match kind {
        GSO_TCPV4 | GSO_TCPV6 => 6,
        GSO_UDP_L4 => 17,
        GSO_UDP => return Err("UDP fragmentation offload (UFO) frames are not segmented".into()),
        k => return Err(format!("GSO type {k} is not supported")),
    };
    if proto != want {
        return Err(format!(
            "a GSO frame of type {kind} carries IP protocol {proto}"
        ));
    }
    if version == 4 && u16::from_be_bytes([f[ip + 6], f[ip + 7]]) & 0x3fff != 0 {
        return Err("a GSO frame that is an IP fragment".into());
    }
    let l4_len = if proto == 6 {
        (*f.get(l4 + 12).ok_or("a truncated TCP header")? >> 4) as usize * 4
    } else {
        8
    };
    let hdrs = l4 + l4_len;
    if l4_len < if proto == 6 { 20 } else { 8 } || f.len() < hdrs {
        return Err("a truncated or malformed L4 header".into());
    }
    let mss = h.gso_size as usize;
    if mss == 0 {
        return Err("a GSO frame with gso_size 0".into());
    }
    // the IP packet may be shorter than the frame (Ethernet padding): the IP length says where it
    // ends
    let end = if version == 4 {
        (ip + u16::from_be_bytes([f[ip + 2], f[ip + 3]]) as usize).min(f.len())
    } else {
        (ip + 40 + u16::from_be_bytes([f[ip + 4], f[ip + 5]]) as usize).min(f.len())
    };
    // super-frames made by the kernel may carry 0 in the IP length fields (larger than 64 KiB): the
    // frame length then stands
    let end = if end <= hdrs { f.len() } else { end };
    let payload = &f[hdrs..end];
    let n = payload.len().div_ceil(mss).max(1);
    let seq0 = if proto == 6 {
        u32::from_be_bytes([f[l4 + 4], f[l4 + 5], f[l4 + 6], f[l4 + 7]])
    } else {
        0
    };
    let id0 = if version == 4 {
        u16::from_be_bytes([f[ip + 4], f[ip + 5]])
    } else {
        0
    };
    for i in 0..n {
        let chunk = &payload[(i * mss).min(payload.len())..((i + 1) * mss).min(payload.len())];
        if out.len() <= i {
            out.push(Vec::with_capacity(hdrs + mss));
        }
        let s = &mut out[i];
        s.clear();
        s.extend_from_slice(&f[..hdrs]);
        s.extend_from_slice(chunk);
        let seg_l4 = l4_len + chunk.len();
        if version == 4 {
            s[ip + 2..ip + 4].copy_from_slice(&((l4 - ip + seg_l4) as u16).to_be_bytes());
            s[ip + 4..ip + 6].copy_from_slice(&id0.wrapping_add(i as u16).to_be_bytes());
            s[ip + 10..ip + 12].copy_from_slice(&[0, 0]);
            let c = !ones_sum(&s[ip..l4]);
            s[ip + 10..ip + 12].copy_from_slice(&c.to_be_bytes());
        } else {
            s[ip + 4..ip + 6].copy_from_slice(&(seg_l4 as u16).to_be_bytes());
        }
        let field = if proto == 6 {
            s[l4 + 4..l4 + 8].copy_from_slice(&seq0.wrapping_add((i * mss) as u32).to_be_bytes());
            if i + 1 < n {
                s[l4 + 13] &= !0x09; // FIN, PSH
            }
            if i > 0 {
                s[l4 + 13] &= !0x80; // CWR
            }
            l4 + 16
        } else {
            s[l4 + 4..l4 + 6].copy_from_slice(&(seg_l4 as u16).to_be_bytes());
            l4 + 6
        };
        s[field..field + 2].copy_from_slice(&[0, 0]);
        let mut c = !fold(pseudo(s, ip, version, proto, seg_l4) + ones_sum(&s[l4..]) as u32);
        if proto == 17 && c == 0 {
            c = 0xffff;
        }
        s[field..field + 2].copy_from_slice(&c.to_be_bytes());
    }
    Ok(n)
}

/// Finish a TCP/UDP checksum over IPv4 or IPv6 whose field holds only the pseudo-header sum.
pub fn complete_l4_checksum(f: &mut [u8]) {
    let mut off = 12;
    let mut et = u16::from_be_bytes([
        f.get(12).copied().unwrap_or(0),
        f.get(13).copied().unwrap_or(0),
    ]);
    if et == 0x8100 && f.len() >= 18 {
        et = u16::from_be_bytes([f[16], f[17]]);
        off = 16;
    }
    let ip = off + 2;
    let (proto, l4) = match et {
        0x0800 if f.len() >= ip + 20 => (f[ip + 9], ip + (f[ip] & 0x0f) as usize * 4),
        0x86dd if f.len() >= ip + 40 => (f[ip + 6], ip + 40),
        _ => return,
    };
    let field = match proto {
        6 => l4 + 16,
        17 => l4 + 6,
        _ => return,
    };
    if f.len() < field + 2 {
        return;
    }
    let mut c = !ones_sum(&f[l4..]);
    if c == 0 && proto == 17 {
        c = 0xffff;
    }
    f[field..field + 2].copy_from_slice(&c.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Verify a segment's IP header and L4 checksums from scratch.
    fn checksums_ok(s: &[u8]) -> bool {
        let (ip, version, l4, proto) = layers(s).unwrap();
        if version == 4 && ones_sum(&s[ip..l4]) != 0xffff {
            return false;
        }
        fold(pseudo(s, ip, version, proto, s.len() - l4) + ones_sum(&s[l4..]) as u32) == 0xffff
    }

    fn tcp_frame(v6: bool, payload: &[u8], flags: u8) -> Vec<u8> {
        let mut tcp = vec![
            0x13, 0x89, 0x9c, 0x40, 0, 0, 0x10, 0, 0, 0, 0, 7, 0x50, flags, 0xff, 0xff, 0, 0, 0, 0,
        ];
        tcp.extend_from_slice(payload);
        crate::gro::tests::ip_frame(v6, 0x1234, 6, &tcp)
    }

    #[test]
    fn tcp_super_frames_are_cut_into_segments() {
        let payload: Vec<u8> = (0..3500u32).map(|i| (i * 7) as u8).collect();
        for v6 in [false, true] {
            let f = tcp_frame(v6, &payload, 0x19 | 0x80); // FIN, PSH, ACK, CWR
            let h = VnetHdr {
                gso_type: if v6 { GSO_TCPV6 } else { GSO_TCPV4 },
                gso_size: 1448,
                ..Default::default()
            };
            let mut out = vec![];
            segment(&f, &h, &mut out).unwrap();
            assert_eq!(out.len(), 3);
            let (_, _, l4, _) = layers(&f).unwrap();
            let mut joined = vec![];
            for (i, s) in out.iter().enumerate() {
                assert!(checksums_ok(s), "segment {i} (v6 {v6})");
                assert!(s.len() <= l4 + 20 + 1448);
                let seq = u32::from_be_bytes([s[l4 + 4], s[l4 + 5], s[l4 + 6], s[l4 + 7]]);
                assert_eq!(seq, 0x1000 + i as u32 * 1448, "seq of segment {i}");
                let flags = s[l4 + 13];
                assert_eq!(
                    flags & 0x09 != 0,
                    i == 2,
                    "FIN/PSH on the last segment only"
                );
                assert_eq!(flags & 0x80 != 0, i == 0, "CWR on the first only");
                if !v6 {
                    assert_eq!(u16::from_be_bytes([s[18], s[19]]), 0x1234 + i as u16);
                    assert_eq!(u16::from_be_bytes([s[16], s[17]]) as usize, s.len() - 14);
                } else {
                    assert_eq!(u16::from_be_bytes([s[18], s[19]]) as usize, s.len() - 54);
                }
                joined.extend_from_slice(&s[l4 + 20..]);
            }
            assert_eq!(joined, payload);
        }
    }

    #[test]
    fn udp_l4_super_frames_become_datagrams() {
        let mut f = vec![
            2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45, 0, 0, 0, 0, 1, 0, 0, 64, 17, 0,
            0, 10, 0, 1, 1, 10, 0, 2, 2,
        ];
        f.extend_from_slice(&[0x10, 0x92, 0x10, 0x92, 0, 0, 0, 0]);
        f.extend_from_slice(&[0xab; 2500]);
        let len = (f.len() - 14) as u16;
        f[16..18].copy_from_slice(&len.to_be_bytes());
        let mut out = vec![];
        segment(
            &f,
            &VnetHdr {
                gso_type: GSO_UDP_L4,
                gso_size: 1000,
                ..Default::default()
            },
            &mut out,
        )
        .unwrap();
        assert_eq!(
            out.iter().map(|s| s.len() - 42).collect::<Vec<_>>(),
            [1000, 1000, 500]
        );
        assert!(out.iter().all(|s| checksums_ok(s)));
        assert!(out
            .iter()
            .all(|s| u16::from_be_bytes([s[38], s[39]]) as usize == s.len() - 34));
        assert!(segment(
            &f,
            &VnetHdr {
                gso_type: GSO_UDP,
                gso_size: 1000,
                ..Default::default()
            },
            &mut out
        )
        .is_err());
        assert!(segment(
            &f[..30],
            &VnetHdr {
                gso_type: GSO_TCPV4,
                gso_size: 1000,
                ..Default::default()
            },
            &mut out
        )
        .is_err());
        // a TCP header shorter than 20 bytes (data offset 2), and every truncation of a frame:
        // errors, no panic
        let mut t = tcp_frame(false, &[1, 2, 3], 0x10);
        t[14 + 20 + 12] = 0x20;
        assert!(segment(
            &t,
            &VnetHdr {
                gso_type: GSO_TCPV4,
                gso_size: 1,
                ..Default::default()
            },
            &mut out
        )
        .is_err());
        let t = tcp_frame(true, &[7; 100], 0x10);
        for n in 0..t.len() {
            let _ = segment(
                &t[..n],
                &VnetHdr {
                    gso_type: GSO_TCPV6,
                    gso_size: 7,
                    ..Default::default()
                },
                &mut out,
            );
        }
    }

    #[test]
    fn partial_checksums_are_completed() {
        let mut f = tcp_frame(false, b"hello", 0x18);
        let (ip, _, l4, _) = layers(&f).unwrap();
        let seg = f.len() - l4;
        // what a sender leaving the checksum to offload puts there: the pseudo-header's sum
        let p = fold(pseudo(&f, ip, 4, 6, seg));
        f[l4 + 16..l4 + 18].copy_from_slice(&p.to_be_bytes());
        assert!(complete_csum(&mut f, l4, 16));
        assert_eq!(
            fold(pseudo(&f, ip, 4, 6, seg) + ones_sum(&f[l4..]) as u32),
            0xffff
        );
        assert!(!complete_csum(&mut f, 60, 16));
        let h = VnetHdr::parse(&[1, 1, 54, 0, 0xa8, 5, 34, 0, 16, 0]).unwrap();
        assert_eq!(
            h,
            VnetHdr {
                flags: 1,
                gso_type: 1,
                hdr_len: 54,
                gso_size: 1448,
                csum_start: 34,
                csum_offset: 16
            }
        );
        assert!(h.is_gso() && !VnetHdr::default().is_gso());
    }

    /// What a TUN/TAP queue reads (a virtio-net header, then a frame) is taken apart without a
    /// panic whatever the header says: random headers over real TCP/UDP frames, truncated and
    /// damaged ones. Every result is either an error or frames that lie inside what was handed over
    /// or in the port's own segment buffers.
    #[test]
    fn offloaded_takes_any_header_and_frame_without_panicking() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut segs = Segments::default();
        let bases = [
            tcp_frame(false, &[7; 3000], 0x18),
            tcp_frame(true, &[9; 2000], 0x10),
            tcp_frame(false, &[], 0x02),
        ];
        for round in 0..20_000 {
            let r = rnd();
            let mut f = bases[round % bases.len()].clone();
            match r % 4 {
                0 => f.truncate((rnd() as usize) % (f.len() + 1)),
                1 => {
                    let i = (rnd() as usize) % f.len();
                    f[i] = rnd() as u8;
                }
                2 => f = (0..(rnd() % 200) as usize).map(|_| rnd() as u8).collect(),
                _ => {}
            }
            let b = rnd().to_le_bytes();
            let kinds = [
                GSO_NONE,
                GSO_TCPV4,
                GSO_TCPV6,
                GSO_UDP_L4,
                GSO_UDP,
                GSO_TCPV4 | GSO_ECN,
                b[1],
            ];
            let h = VnetHdr {
                flags: b[0] & 1,
                gso_type: kinds[(b[2] as usize) % kinds.len()],
                hdr_len: u16::from_le_bytes([b[3], b[4]]) % 200,
                gso_size: if b[5] % 4 == 0 {
                    0
                } else {
                    u16::from_le_bytes([b[5], b[6]]) % 3000
                },
                csum_start: u16::from_le_bytes([b[6], b[7]]) % 120,
                csum_offset: (b[7] % 24) as u16,
            };
            let len = f.len();
            let range = f.as_ptr() as usize..f.as_ptr() as usize + len + 1;
            if let Ok((p, n)) = segs.offloaded(&mut f, &h, if round % 2 == 0 { 0 } else { 14 }) {
                if !h.is_gso() {
                    assert!(range.contains(&(p as usize)) && n == len);
                }
                while let Some((_, n)) = segs.next_seg() {
                    assert!(n <= 65_536 + 64);
                }
            }
        }
    }
}
