//! TAP ports (`--port N=tap:NAME`): one queue of a TAP device the switch creates ([`crate::tuntap`]),
//! which carries Ethernet frames as they are. Frames are read one `read` each, as many as wait (up
//! to the loop's batch) per wake-up; frames sent are held during the batch and written when it ends
//! ([`txbatch::TxBatch`]). With offloads (the default, [`crate::tuntap`]), each frame read has a
//! virtio-net header: super-frames from the host's TSO are cut into segments, checksums left to
//! offload completed ([`gso::Segments::offloaded`]).

use super::io::{Ctx, PortIo};
use super::txbatch;
use crate::log::Level;
use crate::pcap_file::Ts;
use crate::{gso, tuntap};
use std::sync::atomic::Ordering;

/// A frame read after its virtio-net header `h` on a TUN/TAP queue ([`gso::Segments::offloaded`]):
/// the frame (or the first segment of a super-frame) to hand over, counted; `None` when it is
/// dropped, counted as a receive error and said at `--log debug`.
pub(super) fn take_offloaded(
    cx: &Ctx,
    segs: &mut gso::Segments,
    frame: &mut [u8],
    h: &gso::VnetHdr,
    csum_base: usize,
) -> Option<(*const u8, usize)> {
    let n = frame.len();
    match segs.offloaded(frame, h, csum_base) {
        Ok(got) => {
            if h.is_gso() {
                cx.stats.gso.fetch_add(1, Ordering::Relaxed);
            }
            Some(got)
        }
        Err(e) => {
            cx.stats.rx_errors.fetch_add(1, Ordering::Relaxed);
            p4log!(
                Level::Debug,
                "port {}: a frame of {n} bytes from `{}` dropped: {e}",
                cx.number,
                cx.iface
            );
            None
        }
    }
}

/// A queue of a TAP device, as one worker has it.
pub struct Tap {
    fd: i32,
    tx: txbatch::TxBatch,
    /// Opened with `IFF_VNET_HDR`: a virtio-net header in front of every frame.
    vnet: bool,
    /// The segments of the last super-frame read.
    segs: gso::Segments,
}

impl Tap {
    /// The port on queue `fd` of a TAP device (from [`tuntap::open_queue`], with the virtio-net header
    /// when `vnet`); closed when dropped.
    pub fn new(fd: i32, vnet: bool) -> Tap {
        Tap {
            fd,
            tx: txbatch::TxBatch::with_vnet(vnet, crate::gro::wanted(), 0),
            vnet,
            segs: gso::Segments::default(),
        }
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        unsafe { libc::close(self.fd) };
    }
}

impl PortIo for Tap {
    #[inline]
    fn fd(&self) -> i32 {
        self.fd
    }

    #[inline]
    fn recv(
        &mut self,
        cx: &Ctx,
        buf: &mut [u8],
        _woken: bool,
    ) -> Option<(*const u8, usize, Option<Ts>)> {
        if let Some((p, n)) = self.segs.next_seg() {
            return Some((p, n, None));
        }
        loop {
            let n =
                unsafe { libc::read(self.fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
            if n <= 0 {
                return None;
            }
            if !self.vnet {
                return Some((buf.as_ptr(), n as usize, None));
            }
            let n = n as usize;
            let Some(h) = gso::VnetHdr::parse(&buf[..n]) else {
                continue;
            };
            let frame = &mut buf[gso::VNET_HDR_LEN..n];
            if let Some((p, len)) = take_offloaded(cx, &mut self.segs, frame, &h, 0) {
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

    /// Held until the batch ends (TCP segments joined into super-frames, with the virtio-net
    /// header).
    #[inline]
    fn send(&self, cx: &Ctx, frame: &[u8], _ts: Ts) -> Option<bool> {
        if self.tx.coalesce(cx, self.fd, frame) {
            return None;
        }
        self.tx.send(cx, self.fd, frame)
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
