//! What TUN/TAP ports send during a batch of the packet loop ([`TxBatch`]), written to the device's
//! queue when the batch ends: one `write` per frame, as a TUN/TAP queue takes one packet per
//! `write`. On queues with a virtio-net header, consecutive TCP segments of one stream are joined
//! into one GSO super-frame ([`crate::gro`], as on interface ports): the host behind the device
//! takes them in one pass through its stack.

use super::io::Ctx;
use crate::gro;
use std::cell::RefCell;
use std::sync::atomic::Ordering;

/// Frames held for one TUN/TAP queue during a batch of the packet loop, written when the batch ends
/// ([`TxBatch::flush`]) or when the buffer is full. Its buffers are allocated once, when the port
/// opens.
pub struct TxBatch {
    held: RefCell<Held>,
    /// Each frame is written with a virtio-net header in front (a queue opened with
    /// `IFF_VNET_HDR`): a zero one, or a super-frame's.
    vnet: bool,
    /// TCP segments being joined (queues with the header, unless `P4SEC_NO_GRO` is set).
    gro: Option<RefCell<gro::Coalescer>>,
    /// Bytes of Ethernet header the device does not take (14 for TUN: the coalescer works on
    /// Ethernet frames).
    strip: usize,
}

struct Held {
    data: Vec<u8>,
    /// Each frame's end in `data` (frames follow each other, each after its virtio-net header if
    /// any).
    ends: Vec<usize>,
    /// The segments each frame stands for (1, or a super-frame's count).
    segs: Vec<u32>,
}

impl TxBatch {
    /// At most this many frames are held.
    pub const FRAMES: usize = 64;
    /// Bytes of held frames (a larger frame is written at once, after those held).
    pub const BYTES: usize = 64 * 2048;

    pub fn new() -> TxBatch {
        Self::with_vnet(false, false, 0)
    }

    /// A batch for a queue that takes a virtio-net header in front of every frame (`vnet`); with
    /// `join`, TCP segments offered through [`TxBatch::coalesce`] are joined; `strip`: bytes of
    /// Ethernet header the device does not take.
    pub fn with_vnet(vnet: bool, join: bool, strip: usize) -> TxBatch {
        let room = Self::BYTES + Self::FRAMES * crate::gso::VNET_HDR_LEN;
        TxBatch {
            held: RefCell::new(Held {
                data: Vec::with_capacity(room),
                ends: Vec::with_capacity(Self::FRAMES),
                segs: Vec::with_capacity(Self::FRAMES),
            }),
            vnet,
            gro: (vnet && join).then(|| RefCell::new(gro::Coalescer::default())),
            strip,
        }
    }

    /// Are TCP segments joined?
    pub fn joins(&self) -> bool {
        self.gro.is_some()
    }

    /// Hold `frame` for queue `fd` (what is held is written first when there is no room for it; a
    /// frame larger than the buffer is written at once). `Some(ok)` when it was written now (the
    /// caller counts it), `None` when it is held, to be counted when written.
    pub fn send(&self, cx: &Ctx, fd: i32, frame: &[u8]) -> Option<bool> {
        if frame.len() > Self::BYTES {
            self.flush(cx, fd);
            return Some(write_frame(
                fd,
                self.vnet.then_some(&[0; crate::gso::VNET_HDR_LEN]),
                frame,
            ));
        }
        self.hold(
            cx,
            fd,
            self.vnet.then_some(&[0; crate::gso::VNET_HDR_LEN]),
            frame,
            1,
        );
        None
    }

    /// Offer an Ethernet frame to the coalescer: true when it was taken (joined to the super-frame
    /// held, or the start of a new one), false when it is no TCP segment to join and must be sent
    /// as usual (what was held has then been moved into the batch, before it: order is kept).
    pub fn coalesce(&self, cx: &Ctx, fd: i32, frame: &[u8]) -> bool {
        let Some(g) = &self.gro else { return false };
        let mut g = g.borrow_mut();
        let s = gro::parse(frame, false);
        if let Some(s) = &s {
            if g.join(frame, s) {
                return true;
            }
        }
        self.hold_super(cx, fd, &mut g);
        matches!(&s, Some(s) if g.start(frame, s))
    }

    /// The super-frame the coalescer holds into the batch (a single segment as a plain frame).
    fn hold_super(&self, cx: &Ctx, fd: i32, g: &mut gro::Coalescer) {
        let strip = self.strip;
        let Some(sup) = g.take() else { return };
        let mut vnet = sup.vnet;
        if sup.segs > 1 && strip > 0 {
            // the header's offsets (hdr_len, csum_start) count from the first byte written
            for at in [2, 6] {
                let v = u16::from_le_bytes([vnet[at], vnet[at + 1]]).saturating_sub(strip as u16);
                vnet[at..at + 2].copy_from_slice(&v.to_le_bytes());
            }
        }
        let Some(frame) = sup.frame.get(strip..) else {
            return;
        };
        if sup.segs > 1 {
            cx.stats.gro.fetch_add(1, Ordering::Relaxed);
        }
        // (a super-frame is at most 64 KiB of IP packet: it always fits the buffer once what is
        // held is written)
        self.hold(cx, fd, Some(&vnet), frame, sup.segs as u32);
    }

    /// Into the buffer (written first when full), after `vnet`.
    fn hold(
        &self,
        cx: &Ctx,
        fd: i32,
        vnet: Option<&[u8; crate::gso::VNET_HDR_LEN]>,
        frame: &[u8],
        segs: u32,
    ) {
        let mut h = self.held.borrow_mut();
        if h.ends.len() == Self::FRAMES || h.data.len() + frame.len() > Self::BYTES {
            drop(h);
            self.write_held(cx, fd);
            h = self.held.borrow_mut();
        }
        if let Some(v) = vnet {
            h.data.extend_from_slice(v);
        }
        h.data.extend_from_slice(frame);
        let end = h.data.len();
        h.ends.push(end);
        h.segs.push(segs);
    }

    /// Frames held (a super-frame being joined counts its segments).
    pub fn pending(&self) -> usize {
        self.held.borrow().ends.len() + self.gro.as_ref().map_or(0, |g| g.borrow().held())
    }

    /// Write the frames held to queue `fd` (the super-frame being joined last), one `write` each,
    /// and count them (sent, or failed; a super-frame as its segments).
    pub fn flush(&self, cx: &Ctx, fd: i32) {
        if let Some(g) = &self.gro {
            self.hold_super(cx, fd, &mut g.borrow_mut());
        }
        self.write_held(cx, fd);
    }

    fn write_held(&self, cx: &Ctx, fd: i32) {
        let mut h = self.held.borrow_mut();
        if h.ends.is_empty() {
            return;
        }
        let (mut ok, mut failed) = (0u64, 0u64);
        let mut start = 0;
        for (&end, &segs) in h.ends.iter().zip(&h.segs) {
            if write_frame(fd, None, &h.data[start..end]) {
                ok += segs as u64;
            } else {
                failed += segs as u64;
                crate::p4log!(
                    crate::log::Level::Debug,
                    "port {}: cannot send a frame of {} bytes on `{}`: {}",
                    cx.number,
                    end - start,
                    cx.iface,
                    std::io::Error::last_os_error()
                );
            }
            start = end;
        }
        h.data.clear();
        h.ends.clear();
        h.segs.clear();
        cx.stats.tx.fetch_add(ok, Ordering::Relaxed);
        if failed > 0 {
            cx.stats.errors.fetch_add(failed, Ordering::Relaxed);
        }
    }
}

impl Default for TxBatch {
    fn default() -> Self {
        Self::new()
    }
}

/// One packet to a TUN/TAP queue (retried when a signal interrupts it), after the virtio-net header
/// `vnet`.
fn write_frame(fd: i32, vnet: Option<&[u8; crate::gso::VNET_HDR_LEN]>, frame: &[u8]) -> bool {
    let hdr = vnet.copied().unwrap_or_default();
    let iov = [
        libc::iovec {
            iov_base: hdr.as_ptr() as *mut libc::c_void,
            iov_len: if vnet.is_some() { hdr.len() } else { 0 },
        },
        libc::iovec {
            iov_base: frame.as_ptr() as *mut libc::c_void,
            iov_len: frame.len(),
        },
    ];
    loop {
        let n = unsafe { libc::writev(fd, iov.as_ptr(), 2) };
        if n >= 0 {
            return true;
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::io::PortStats;

    /// A batch held for one end of a SOCK_SEQPACKET pair (one message per write, as a TUN/TAP queue
    /// takes one packet per write): nothing is written until the batch is flushed or full, then
    /// everything in order, counted once; a frame larger than the buffer goes at once, after what
    /// was held.
    #[test]
    fn tx_batch_holds_then_writes_in_order() {
        let mut sv = [0i32; 2];
        assert_eq!(
            unsafe {
                libc::socketpair(
                    libc::AF_UNIX,
                    libc::SOCK_SEQPACKET | libc::SOCK_NONBLOCK,
                    0,
                    sv.as_mut_ptr(),
                )
            },
            0
        );
        let big = 1 << 20;
        for fd in sv {
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    libc::SO_SNDBUF,
                    &big as *const i32 as *const libc::c_void,
                    4,
                )
            };
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    libc::SO_RCVBUF,
                    &big as *const i32 as *const libc::c_void,
                    4,
                )
            };
        }
        let stats = PortStats::default();
        let cx = Ctx {
            number: 7,
            iface: "test",
            stats: &stats,
        };
        let mut buf = vec![0u8; TxBatch::BYTES + 100];
        let recv = |buf: &mut [u8]| -> Option<usize> {
            let n =
                unsafe { libc::recv(sv[1], buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0) };
            (n >= 0).then_some(n as usize)
        };
        let frame = |i: usize| vec![i as u8; 60 + i % 7];
        let b = TxBatch::new();
        for i in 0..10 {
            assert_eq!(b.send(&cx, sv[0], &frame(i)), None);
        }
        assert_eq!(b.pending(), 10);
        assert_eq!(recv(&mut buf), None, "nothing written before the flush");
        b.flush(&cx, sv[0]);
        assert_eq!((b.pending(), stats.tx.load(Ordering::Relaxed)), (0, 10));
        for i in 0..10 {
            let n = recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], &frame(i)[..]);
        }
        // a full batch is written when the next frame comes
        for i in 0..TxBatch::FRAMES + 1 {
            assert_eq!(b.send(&cx, sv[0], &frame(i)), None);
        }
        assert_eq!(
            (b.pending(), stats.tx.load(Ordering::Relaxed)),
            (1, 10 + TxBatch::FRAMES as u64)
        );
        // a frame larger than the buffer: what is held first, then it
        let large = vec![0xab; TxBatch::BYTES + 1];
        assert_eq!(b.send(&cx, sv[0], &large), Some(true));
        assert_eq!(b.pending(), 0);
        for i in 0..TxBatch::FRAMES + 1 {
            let n = recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], &frame(i)[..], "frame {i}");
        }
        assert_eq!(recv(&mut buf), Some(large.len()));
        // a failed write is counted as an error
        unsafe { libc::close(sv[1]) };
        assert_eq!(b.send(&cx, sv[0], &frame(1)), None);
        b.flush(&cx, sv[0]);
        assert_eq!(stats.errors.load(Ordering::Relaxed), 1);
        unsafe { libc::close(sv[0]) };
    }

    /// TCP segments of one stream offered to a TAP batch (with the header) and a TUN batch (which
    /// strips the Ethernet header): one write each, a super-frame whose virtio-net header cuts it
    /// back into exactly the segments that went in (for TUN: the IP packets), counted as that many
    /// frames sent; a frame that is not a TCP segment goes after it, with a zero header.
    #[test]
    fn tcp_segments_are_joined_on_queues_with_the_header() {
        use crate::gso::{segment, VnetHdr, GSO_TCPV4, VNET_HDR_LEN};
        for strip in [0usize, 14] {
            let mut sv = [0i32; 2];
            assert_eq!(
                unsafe {
                    libc::socketpair(
                        libc::AF_UNIX,
                        libc::SOCK_SEQPACKET | libc::SOCK_NONBLOCK,
                        0,
                        sv.as_mut_ptr(),
                    )
                },
                0
            );
            let stats = PortStats::default();
            let cx = Ctx {
                number: 3,
                iface: "test",
                stats: &stats,
            };
            let b = TxBatch::with_vnet(true, true, strip);
            assert!(b.joins());
            let mss = 1000;
            let segs: Vec<Vec<u8>> = (0..4u32)
                .map(|i| {
                    crate::gro::tests::seg(
                        false,
                        1000 + i * mss as u32,
                        7 + i as u16,
                        0x10,
                        &vec![i as u8; mss],
                    )
                })
                .collect();
            for s in &segs {
                assert!(
                    b.coalesce(&cx, sv[0], s),
                    "a segment of the stream is taken"
                );
            }
            let other = vec![0x55u8; 60];
            assert!(!b.coalesce(&cx, sv[0], &other), "not a TCP segment");
            assert_eq!(b.send(&cx, sv[0], &other[strip..]), None);
            assert_eq!(b.pending(), 2);
            b.flush(&cx, sv[0]);
            assert_eq!(
                stats.tx.load(Ordering::Relaxed),
                5,
                "four segments and the other frame"
            );
            assert_eq!(stats.gro.load(Ordering::Relaxed), 1);
            let mut buf = vec![0u8; 1 << 16];
            let n =
                unsafe { libc::recv(sv[1], buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0) };
            assert!(n > 0);
            let h = VnetHdr::parse(&buf[..VNET_HDR_LEN]).unwrap();
            assert_eq!((h.gso_type, h.gso_size as usize), (GSO_TCPV4, mss));
            assert_eq!(h.hdr_len as usize, segs[0].len() - mss - strip);
            // cut it back (as an Ethernet frame: put back what was stripped) and compare
            let mut sup = segs[0][..strip].to_vec();
            sup.extend_from_slice(&buf[VNET_HDR_LEN..n as usize]);
            let h = VnetHdr {
                hdr_len: h.hdr_len + strip as u16,
                csum_start: h.csum_start + strip as u16,
                ..h
            };
            let mut back = vec![];
            segment(&sup, &h, &mut back).unwrap();
            assert_eq!(
                back, segs,
                "the super-frame stands for exactly the segments sent (strip {strip})"
            );
            let n =
                unsafe { libc::recv(sv[1], buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0) };
            assert_eq!(&buf[..VNET_HDR_LEN], &[0; VNET_HDR_LEN]);
            assert_eq!(&buf[VNET_HDR_LEN..n as usize], &other[strip..]);
            unsafe { libc::close(sv[0]) };
            unsafe { libc::close(sv[1]) };
        }
    }
}
