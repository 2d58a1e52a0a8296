//! AF_PACKET ports: a Linux interface (e.g. a veth) through a raw packet socket, with memory-mapped
//! receive and transmit rings ([`crate::ring`]) where the kernel gives them, virtio-net headers
//! (GSO super-frames received are segmented, [`crate::gso`]; TCP segments sent may be joined,
//! [`crate::gro`]), and frames whose checksum was left to offload completed on the way in. This
//! file moves the frames; opening the socket and setting it up is in [`open`].

use super::io::{Ctx, PortIo};
use crate::log::Level;
use crate::pcap_file::Ts;
use crate::{gro, gso, ring, tuntap};
use std::sync::atomic::Ordering;

mod open;

const PACKET_AUXDATA: libc::c_int = 8;

/// `struct tpacket_auxdata`: what PACKET_AUXDATA tells about a frame read with `recvmsg`.
#[repr(C)]
#[derive(Clone, Copy)]
struct AuxData {
    status: u32,
    len: u32,
    snaplen: u32,
    mac: u16,
    net: u16,
    vlan_tci: u16,
    vlan_tpid: u16,
}

/// Set (to anything but `0`) to keep interface ports off memory-mapped rings: one `recvmsg`/`send`
/// per frame.
pub const NO_MMAP_ENV: &str = "P4SEC_NO_MMAP";

/// Receive buffer of an interface port's packet socket (see [`AfPacket::open`]).
const RCVBUF_BYTES: usize = 16 << 20;

/// Frames a port hands to the kernel before it counts as blocked (backpressure, `crate::tm`):
/// about what BMv2's packet socket has in flight with the default send buffer (212,992 bytes) at
/// full-size frames, so a slow link builds the switch's egress queue about as soon as BMv2's.
const TX_IN_FLIGHT_MAX: usize = 96;

fn mmap_wanted() -> bool {
    !matches!(std::env::var(NO_MMAP_ENV), Ok(v) if !v.is_empty() && v != "0")
}

/// Joining TCP segments on transmit: the super-frame being built, and the socket it is sent on (a
/// packet socket without rings, as a super-frame does not fit a transmit slot; bound to no
/// protocol, so nothing is received on it).
struct GroTx {
    fd: i32,
    c: std::cell::RefCell<gro::Coalescer>,
}

impl Drop for GroTx {
    fn drop(&mut self) {
        unsafe { libc::close(self.fd) };
    }
}

/// An interface port's packet socket, as one worker has it.
pub struct AfPacket {
    fd: i32,
    /// The memory-mapped rings, unless the kernel refused them.
    ring: Option<ring::Rings>,
    /// PACKET_VNET_HDR is on (frames come with a `virtio_net_hdr`, and go out with one).
    vnet: bool,
    /// The segments of the last GSO super-frame received.
    segs: gso::Segments,
    /// TCP segments joined on transmit ([`AfPacket::enable_gro`]).
    gro: Option<GroTx>,
}

impl Drop for AfPacket {
    fn drop(&mut self) {
        self.ring = None;
        unsafe { libc::close(self.fd) };
    }
}

impl AfPacket {
    /// Receive one frame as the kernel hands it over, with its virtio-net header (PACKET_VNET_HDR).
    fn recv_one(
        &mut self,
        cx: &Ctx,
        buf: &mut [u8],
        woken: bool,
    ) -> Option<(*const u8, usize, Option<Ts>, Option<gso::VnetHdr>)> {
        let vnet = self.vnet;
        let at = |(start, n, h): (usize, usize, Option<gso::VnetHdr>), buf: &[u8]| {
            (buf[start..].as_ptr(), n, None, h)
        };
        let fd = self.fd;
        match &mut self.ring {
            None => packet_recv(fd, buf, vnet).map(|r| at(r, buf)),
            Some(r) => loop {
                match r.next_rx() {
                    Some(ring::Rx::Frame { ptr, len, ts, vnet }) => {
                        return Some((ptr, len, Some(ts), vnet))
                    }
                    Some(ring::Rx::FromQueue) => match packet_recv(fd, buf, vnet) {
                        Some(got) => return Some(at(got, buf)),
                        None => {
                            cx.stats.errors.fetch_add(1, Ordering::Relaxed);
                            p4log!(Level::Debug, "port {}: a frame larger than a ring slot was not queued on `{}`; lost", cx.number, cx.iface);
                        }
                    },
                    Some(ring::Rx::Truncated(n)) => {
                        cx.stats.errors.fetch_add(1, Ordering::Relaxed);
                        p4log!(Level::Debug, "port {}: a frame of {n} bytes from `{}` did not fit a ring slot; dropped", cx.number, cx.iface);
                    }
                    // nothing in the ring; something may still wait on the socket
                    None if woken => return packet_recv(fd, buf, vnet).map(|got| at(got, buf)),
                    None => return None,
                }
            },
        }
    }

    /// Send what the coalescer holds: one segment into the ring as it is; a super-frame, after the
    /// frames already in the ring (order is kept), with its virtio-net header on the port's GRO
    /// socket; should the kernel refuse it, its segments, cut again here, into the ring.
    fn send_held(&self, cx: &Ctx, g: &mut gro::Coalescer) {
        let (Some(r), Some(gt)) = (&self.ring, &self.gro) else {
            return;
        };
        let fd = self.fd;
        let Some(s) = g.take() else { return };
        if s.segs == 1 {
            self.ring_queue(cx, fd, r, s.frame);
            return;
        }
        self.flush_ring(cx);
        let mut iov = [
            libc::iovec {
                iov_base: s.vnet.as_ptr() as *mut _,
                iov_len: s.vnet.len(),
            },
            libc::iovec {
                iov_base: s.frame.as_ptr() as *mut _,
                iov_len: s.frame.len(),
            },
        ];
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = iov.as_mut_ptr();
        msg.msg_iovlen = 2;
        if unsafe { libc::sendmsg(gt.fd, &msg, libc::MSG_DONTWAIT) } >= 0 {
            cx.stats.tx.fetch_add(s.segs as u64, Ordering::Relaxed);
            cx.stats.gro.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let e = std::io::Error::last_os_error();
        p4log!(
            Level::Debug,
            "port {}: a GSO frame of {} segments not taken on `{}` ({e}); sent as segments",
            cx.number,
            s.segs,
            cx.iface
        );
        let mut segs = vec![];
        let h = gso::VnetHdr::parse(&s.vnet).unwrap_or_default();
        if gso::segment(s.frame, &h, &mut segs).is_err() || segs.len() != s.segs {
            cx.stats.errors.fetch_add(s.segs as u64, Ordering::Relaxed);
            return;
        }
        for seg in &segs {
            self.ring_queue(cx, fd, r, seg);
        }
    }

    /// Hand the frames queued in the transmit ring to the kernel (one system call) and count them.
    fn flush_ring(&self, cx: &Ctx) {
        let Some(r) = &self.ring else { return };
        if r.pending() == 0 {
            return;
        }
        let f = r.flush(self.fd);
        cx.stats.tx.fetch_add(f.sent as u64, Ordering::Relaxed);
        if f.dropped > 0 {
            cx.stats
                .errors
                .fetch_add(f.dropped as u64, Ordering::Relaxed);
        }
        if let Some(e) = f.error {
            p4log!(
                Level::Debug,
                "port {}: cannot send {} frames on `{}`: {e}",
                cx.number,
                f.dropped + r.pending(),
                cx.iface
            );
        }
    }

    /// Copy a frame into the transmit ring (counted as sent when flushed): first its size is
    /// checked against the interface's MTU, and a full ring is flushed.
    fn ring_queue(&self, cx: &Ctx, fd: i32, r: &ring::Rings, frame: &[u8]) {
        if !r.fits(frame) {
            if let Some((mtu, _)) = ring::link_info(fd, cx.iface) {
                r.set_mtu(mtu);
            }
        }
        if !r.fits(frame) {
            cx.stats.errors.fetch_add(1, Ordering::Relaxed);
            p4log!(
                Level::Debug,
                "port {}: cannot send a frame of {} bytes on `{}`: larger than its MTU",
                cx.number,
                frame.len(),
                cx.iface
            );
            return;
        }
        if !r.queue(frame) {
            self.flush_ring(cx);
            if !r.queue(frame) {
                cx.stats.errors.fetch_add(1, Ordering::Relaxed);
                p4log!(
                    Level::Debug,
                    "port {}: transmit ring of `{}` full; a frame of {} bytes dropped",
                    cx.number,
                    cx.iface,
                    frame.len()
                );
            }
        }
    }
}

impl PortIo for AfPacket {
    #[inline]
    fn fd(&self) -> i32 {
        self.fd
    }

    /// The segments of a GSO super-frame received come first, one per call; then what the socket or
    /// its ring holds (for rings, with its timestamp). `woken`: a ring port whose ring is empty
    /// also looks at the socket's queue.
    fn recv(
        &mut self,
        cx: &Ctx,
        buf: &mut [u8],
        woken: bool,
    ) -> Option<(*const u8, usize, Option<Ts>)> {
        // the segments of a GSO super-frame first
        if let Some((p, n)) = self.segs.next_seg() {
            return Some((p, n, None));
        }
        if !self.vnet {
            return self
                .recv_one(cx, buf, woken)
                .map(|(p, n, ts, _)| (p, n, ts));
        }
        let mut woken = woken;
        loop {
            let (ptr, n, ts, h) = self.recv_one(cx, buf, std::mem::take(&mut woken))?;
            let Some(h) = h.filter(|h| h.is_gso()) else {
                return Some((ptr, n, ts));
            };
            // SAFETY: as in the packet loop, the frame stays where it is until the next
            // `recv_one`/`release`
            let frame = unsafe { std::slice::from_raw_parts(ptr, n) };
            match self.segs.cut(frame, &h) {
                Ok(Some((p, len))) => {
                    cx.stats.gso.fetch_add(1, Ordering::Relaxed);
                    self.release();
                    return Some((p, len, ts));
                }
                Ok(None) => {}
                Err(e) => {
                    cx.stats.errors.fetch_add(1, Ordering::Relaxed);
                    p4log!(Level::Debug, "port {}: a GSO frame of {n} bytes from `{}` could not be segmented ({e}); dropped", cx.number, cx.iface);
                }
            }
        }
    }

    #[inline]
    fn release(&mut self) {
        if let Some(r) = &mut self.ring {
            r.release();
        }
    }

    /// A frame waiting in the receive ring, or a segment of a super-frame.
    #[inline]
    fn rx_ready(&self) -> bool {
        self.segs.pending() || matches!(&self.ring, Some(r) if r.rx_ready())
    }

    #[inline]
    fn segments_pending(&self) -> bool {
        self.segs.pending()
    }

    /// With rings: into the transmit ring (or joined with other TCP segments), counted when
    /// flushed.
    fn send(&self, cx: &Ctx, frame: &[u8], _ts: Ts) -> Option<bool> {
        let fd = self.fd;
        Some(match &self.ring {
            Some(r) => {
                if let Some(g) = &self.gro {
                    // a TCP segment joins the super-frame held, or starts one (what was held goes
                    // first)
                    let mut g = g.c.borrow_mut();
                    let s = if r.fits(frame) {
                        gro::parse(frame, g.udp)
                    } else {
                        None
                    };
                    if let Some(s) = &s {
                        if g.join(frame, s) {
                            return None;
                        }
                    }
                    self.send_held(cx, &mut g);
                    if let Some(s) = &s {
                        if g.start(frame, s) {
                            return None;
                        }
                    }
                }
                self.ring_queue(cx, fd, r, frame);
                return None;
            }
            None if self.vnet => {
                // a zero virtio-net header in front: nothing for the kernel to do
                let hdr = [0u8; gso::VNET_HDR_LEN];
                let mut iov = [
                    libc::iovec {
                        iov_base: hdr.as_ptr() as *mut _,
                        iov_len: hdr.len(),
                    },
                    libc::iovec {
                        iov_base: frame.as_ptr() as *mut _,
                        iov_len: frame.len(),
                    },
                ];
                let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
                msg.msg_iov = iov.as_mut_ptr();
                msg.msg_iovlen = 2;
                unsafe { libc::sendmsg(fd, &msg, 0) >= 0 }
            }
            None => unsafe { libc::send(fd, frame.as_ptr() as *const _, frame.len(), 0) >= 0 },
        })
    }

    /// Frames queued in the transmit ring (or held to be joined) and not yet handed to the kernel.
    #[inline]
    fn tx_pending(&self) -> usize {
        let held = self.gro.as_ref().map(|g| g.c.borrow().held()).unwrap_or(0);
        match &self.ring {
            Some(r) => r.pending() + held,
            None => 0,
        }
    }

    /// The link cannot take frames as fast as they come: frames the kernel refused wait in the
    /// transmit ring, or [`TX_IN_FLIGHT_MAX`] frames handed over are still waiting in its qdisc.
    #[inline]
    fn tx_blocked(&self) -> bool {
        self.ring
            .as_ref()
            .is_some_and(|r| r.pending() > 0 || r.tx_in_flight(TX_IN_FLIGHT_MAX))
    }

    /// Hand what is held to be joined and the frames queued in the transmit ring to the kernel and
    /// count them.
    fn flush_tx(&self, cx: &Ctx) {
        if let Some(g) = &self.gro {
            self.send_held(cx, &mut g.c.borrow_mut());
        }
        self.flush_ring(cx);
    }

    /// Frames larger than the MTU are not handed to the kernel.
    fn refresh_mtu(&self, cx: &Ctx) {
        if let Some(r) = &self.ring {
            if let Some((mtu, _)) = ring::link_info(self.fd, cx.iface) {
                r.set_mtu(mtu);
            }
        }
    }

    fn take_error(&self) {
        let mut e: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as u32;
        unsafe {
            libc::getsockopt(
                self.fd,
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                &mut e as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
    }

    /// The interface exists, is up and has its carrier.
    fn up(&self, cx: &Ctx) -> bool {
        tuntap::oper_up(cx.iface).unwrap_or(false)
    }

    fn alive(&self, cx: &Ctx) -> bool {
        tuntap::exists(cx.iface)
    }
}

/// Receive one frame from an AF_PACKET socket (not our own transmissions) into `buf`: where it
/// starts and its length; `None` when nothing is waiting. Frames whose TCP/UDP checksum the sender
/// left to offload (veths and other virtual devices hand such frames to packet sockets with only
/// the pseudo-header sum in place) get their checksum completed here, as a NIC would, and a VLAN
/// tag the kernel took out is put back.
fn packet_recv(
    fd: i32,
    buf: &mut [u8],
    vnet: bool,
) -> Option<(usize, usize, Option<gso::VnetHdr>)> {
    // with PACKET_VNET_HDR the frame follows its virtio-net header
    let h_len = if vnet { gso::VNET_HDR_LEN } else { 0 };
    loop {
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        // 4 bytes of room in front for a VLAN tag
        let mut iov = libc::iovec {
            iov_base: buf[4..].as_mut_ptr() as *mut _,
            iov_len: buf.len() - 4,
        };
        let mut ctrl = [0u64; 16];
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = &mut sll as *mut _ as *mut libc::c_void;
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as u32;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = ctrl.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = std::mem::size_of_val(&ctrl);
        let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
        if n < 0 {
            return None;
        }
        if sll.sll_pkttype == libc::PACKET_OUTGOING {
            continue;
        }
        let n = (n as usize).min(buf.len() - 4);
        if n < h_len {
            continue;
        }
        let h = if vnet {
            gso::VnetHdr::parse(&buf[4..4 + h_len])
        } else {
            None
        };
        // the frame: buf[f..f + n]
        let (f, n) = (4 + h_len, n - h_len);
        let mut aux: Option<AuxData> = None;
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_PACKET && (*c).cmsg_type == PACKET_AUXDATA {
                    aux = Some(std::ptr::read_unaligned(
                        libc::CMSG_DATA(c) as *const AuxData
                    ));
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        let Some(aux) = aux else {
            return Some((f, n, h));
        };
        // (super-frames get their checksums computed per segment)
        if aux.status & ring::TP_STATUS_CSUMNOTREADY != 0 && !h.is_some_and(|h| h.is_gso()) {
            gso::complete_l4_checksum(&mut buf[f..f + n]);
        }
        if let Some(tag) = ring::vlan_tag(aux.status, aux.vlan_tci, aux.vlan_tpid) {
            if n >= 12 {
                buf.copy_within(f..f + 12, f - 4);
                buf[f + 8..f + 12].copy_from_slice(&tag);
                return Some((f - 4, n + 4, h));
            }
        }
        return Some((f, n, h));
    }
}
