//! TUN ports (`--port N=tun:NAME`): one queue of a TUN device the switch creates ([`crate::tun`]), which
//! carries IP packets: each enters the pipeline with a synthetic Ethernet header and leaves it without one
//! ([`crate::tun::ip_to_ethernet`], [`crate::tun::ethernet_to_ip`]). Packets are read one `read` each, as
//! many as wait (up to the loop's batch) per wake-up; packets sent are held during the batch and written when
//! it ends ([`txbatch::TxBatch`]).

use super::io::{Ctx, PortIo};
use super::txbatch;
use crate::log::Level;
use crate::pcap::Ts;
use crate::tun;
use std::sync::atomic::Ordering;

/// A queue of a TUN device, as one worker has it.
pub struct Tun {
    fd: i32,
    tx: txbatch::TxBatch,
}

impl Tun {
    /// The port on queue `fd` of a TUN device (from [`tun::open_queue`]); closed when dropped.
    pub fn new(fd: i32) -> Tun {
        Tun { fd, tx: txbatch::TxBatch::new() }
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

    /// The packet is read after room for its Ethernet header; packets neither IPv4 nor IPv6 are dropped.
    fn recv(&mut self, cx: &Ctx, buf: &mut [u8], _woken: bool) -> Option<(*const u8, usize, Option<Ts>)> {
        loop {
            let n = unsafe { libc::read(self.fd, buf[14..].as_mut_ptr() as *mut libc::c_void, buf.len() - 14) };
            if n <= 0 {
                return None;
            }
            let n = n as usize + 14;
            if tun::ip_to_ethernet(&mut buf[..n], cx.number) {
                return Some((buf.as_ptr(), n, None));
            }
            cx.stats.errors.fetch_add(1, Ordering::Relaxed);
            p4log!(Level::Debug, "port {}: dropped a packet from `{}` that is neither IPv4 nor IPv6", cx.number, cx.iface);
        }
    }

    /// Held until the batch ends (the IP packet, without the Ethernet header).
    fn send(&self, cx: &Ctx, frame: &[u8], _ts: Ts) -> Option<bool> {
        Some(match tun::ethernet_to_ip(frame) {
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
        tun::attached(self.fd) && tun::oper_up(cx.iface).unwrap_or(false)
    }

    /// Is the device still there, wherever it was moved?
    fn alive(&self, _cx: &Ctx) -> bool {
        tun::attached(self.fd)
    }
}
