//! TUN ports (`--port N=tun:NAME`): one queue of a TUN device the switch creates ([`crate::tuntap`]),
//! which carries IP packets: each enters the pipeline with a synthetic Ethernet header and leaves
//! it without one ([`crate::tuntap::ip_to_ethernet`], [`crate::tuntap::ethernet_to_ip`]). Packets are
//! read one `read` each, as many as wait (up to the loop's batch) per wake-up; packets sent are
//! held during the batch and written when it ends ([`txbatch::TxBatch`]).

use super::io::{Ctx, PortIo};
use super::txbatch;
use crate::log::Level;
use crate::pcap_file::Ts;
use crate::{gso, tuntap};
use std::sync::atomic::Ordering;

/// A queue of a TUN device, as one worker has it.
pub struct Tun {
    fd: i32,
    tx: txbatch::TxBatch,
    /// Opened with `IFF_VNET_HDR`: a virtio-net header in front of every packet.
    vnet: bool,
    /// The segments of the last super-frame read.
    segs: gso::Segments,
}

impl Tun {
    /// The port on queue `fd` of a TUN device (from [`tuntap::open_queue`], with the virtio-net header
    /// when `vnet`); closed when dropped.
    pub fn new(fd: i32, vnet: bool) -> Tun {
        Tun {
            fd,
            tx: txbatch::TxBatch::with_vnet(vnet, crate::gro::wanted(), 14),
            vnet,
            segs: gso::Segments::default(),
        }
    }
}

impl Drop for Tun {
    fn drop(&mut self) {
        unsafe { libc::close(self.fd) };
    }
}

impl PortIo for Tun {
    #[inline]
    fn fd(&self) -> i32 {
        self.fd
    }

    /// The packet is read after room for its Ethernet header (and its virtio-net header before
    /// that, which the Ethernet header then overwrites); packets neither IPv4 nor IPv6 are dropped.
    /// Super-frames are cut into segments, checksums left to offload completed.
    fn recv(
        &mut self,
        cx: &Ctx,
        buf: &mut [u8],
        _woken: bool,
    ) -> Option<(*const u8, usize, Option<Ts>)> {
        if let Some((p, n)) = self.segs.next_seg() {
            return Some((p, n, None));
        }
        let at = if self.vnet {
            14 - gso::VNET_HDR_LEN
        } else {
            14
        };
        loop {
            let n = unsafe {
                libc::read(
                    self.fd,
                    buf[at..].as_mut_ptr() as *mut libc::c_void,
                    buf.len() - at,
                )
            };
            if n <= 0 {
                return None;
            }
            let n = n as usize + at;
            if n < 14 {
                continue;
            }
            let h = if self.vnet {
                gso::VnetHdr::parse(&buf[at..14])
            } else {
                None
            };
            if !tuntap::ip_to_ethernet(&mut buf[..n], cx.number) {
                cx.stats.errors.fetch_add(1, Ordering::Relaxed);
                p4log!(
                    Level::Debug,
                    "port {}: dropped a packet from `{}` that is neither IPv4 nor IPv6",
                    cx.number,
                    cx.iface
                );
                continue;
            }
            let Some(h) = h else {
                return Some((buf.as_ptr(), n, None));
            };
            if let Some((p, len)) =
                super::tap::take_offloaded(cx, &mut self.segs, &mut buf[..n], &h, 14)
            {
                return Some((p, len, None));
            }
        }
    }

    #[inline]
    fn rx_ready(&self) -> bool {
        self.segs.pending()
    }

    #[inline]
    fn segments_pending(&self) -> bool {
        self.segs.pending()
    }

    /// Held until the batch ends (the IP packet, without the Ethernet header).
    fn send(&self, cx: &Ctx, frame: &[u8], _ts: Ts) -> Option<bool> {
        // (the coalescer takes untagged IPv4/IPv6 TCP segments only: their Ethernet header is 14
        // bytes)
        if self.tx.coalesce(cx, self.fd, frame) {
            return None;
        }
        Some(match tuntap::ethernet_to_ip(frame) {
            Some(p) => return self.tx.send(cx, self.fd, p),
            None => {
                p4log!(Level::Debug, "port {}: a frame that is not IPv4 or IPv6 cannot go out on TUN device `{}`; dropped", cx.number, cx.iface);
                false
            }
        })
    }

    fn tx_pending(&self) -> usize {
        self.tx.pending()
    }

    fn flush_tx(&self, cx: &Ctx) {
        self.tx.flush(cx, self.fd)
    }

    /// Attached to its device, which is up.
    fn up(&self, cx: &Ctx) -> bool {
        tuntap::attached(self.fd) && tuntap::oper_up(cx.iface).unwrap_or(false)
    }

    /// Is the device still there, wherever it was moved?
    fn alive(&self, _cx: &Ctx) -> bool {
        tuntap::attached(self.fd)
    }
}
