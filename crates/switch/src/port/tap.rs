//! TAP ports (`--port N=tap:NAME`): one queue of a TAP device the switch creates ([`crate::tun`]), which
//! carries Ethernet frames as they are. Frames are read one `read` each, as many as wait (up to the loop's
//! batch) per wake-up; frames sent are held during the batch and written when it ends ([`txbatch::TxBatch`]).

use super::io::{Ctx, PortIo};
use super::txbatch;
use crate::pcap::Ts;
use crate::tun;

/// A queue of a TAP device, as one worker has it.
pub struct Tap {
    fd: i32,
    tx: txbatch::TxBatch,
}

impl Tap {
    /// The port on queue `fd` of a TAP device (from [`tun::open_queue`]); closed when dropped.
    pub fn new(fd: i32) -> Tap {
        Tap { fd, tx: txbatch::TxBatch::new() }
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
    fn recv(&mut self, _cx: &Ctx, buf: &mut [u8], _woken: bool) -> Option<(*const u8, usize, Option<Ts>)> {
        let n = unsafe { libc::read(self.fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
        (n > 0).then_some((buf.as_ptr(), n as usize, None))
    }

    /// Held until the batch ends.
    #[inline]
    fn send(&self, cx: &Ctx, frame: &[u8], _ts: Ts) -> Option<bool> {
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
        tun::attached(self.fd) && tun::oper_up(cx.iface).unwrap_or(false)
    }

    /// Is the device still there, wherever it was moved?
    fn alive(&self, _cx: &Ctx) -> bool {
        tun::attached(self.fd)
    }
}
