//! What TUN/TAP ports send during a batch of the packet loop ([`TxBatch`]), written to the device's queue
//! when the batch ends: one `write` per frame, as a TUN/TAP queue takes one packet per `write`.

use super::io::Ctx;
use std::cell::RefCell;
use std::sync::atomic::Ordering;

/// Frames held for one TUN/TAP queue during a batch of the packet loop, written when the batch ends
/// ([`TxBatch::flush`]) or when the buffer is full. Its buffers are allocated once, when the port opens.
pub struct TxBatch {
    held: RefCell<Held>,
}

struct Held {
    data: Vec<u8>,
    /// Each frame's end in `data` (frames follow each other).
    ends: Vec<usize>,
}

impl TxBatch {
    /// At most this many frames are held.
    pub const FRAMES: usize = 64;
    /// Bytes of held frames (a larger frame is written at once, after those held).
    pub const BYTES: usize = 64 * 2048;

    pub fn new() -> TxBatch {
        TxBatch { held: RefCell::new(Held { data: Vec::with_capacity(Self::BYTES), ends: Vec::with_capacity(Self::FRAMES) }) }
    }

    /// Hold `frame` for queue `fd` (what is held is written first when there is no room for it; a frame
    /// larger than the buffer is written at once). `Some(ok)` when it was written now (the caller counts
    /// it), `None` when it is held, to be counted when written.
    pub fn send(&self, cx: &Ctx, fd: i32, frame: &[u8]) -> Option<bool> {
        if frame.len() > Self::BYTES {
            self.flush(cx, fd);
            return Some(write_frame(fd, frame));
        }
        let mut h = self.held.borrow_mut();
        if h.ends.len() == Self::FRAMES || h.data.len() + frame.len() > Self::BYTES {
            drop(h);
            self.flush(cx, fd);
            h = self.held.borrow_mut();
        }
        h.data.extend_from_slice(frame);
        let end = h.data.len();
        h.ends.push(end);
        None
    }

    /// Frames held.
    pub fn pending(&self) -> usize {
        self.held.borrow().ends.len()
    }

    /// Write the frames held to queue `fd`, one `write` each, and count them (sent, or failed).
    pub fn flush(&self, cx: &Ctx, fd: i32) {
        let mut h = self.held.borrow_mut();
        if h.ends.is_empty() {
            return;
        }
        let (mut ok, mut failed) = (0u64, 0u64);
        let mut start = 0;
        for &end in &h.ends {
            if write_frame(fd, &h.data[start..end]) {
                ok += 1;
            } else {
                failed += 1;
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

/// One packet to a TUN/TAP queue (retried when a signal interrupts it).
fn write_frame(fd: i32, frame: &[u8]) -> bool {
    loop {
        let n = unsafe { libc::write(fd, frame.as_ptr() as *const libc::c_void, frame.len()) };
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

    /// A batch held for one end of a SOCK_SEQPACKET pair (one message per write, as a TUN/TAP queue takes
    /// one packet per write): nothing is written until the batch is flushed or full, then everything in order,
    /// counted once; a frame larger than the buffer goes at once, after what was held.
    #[test]
    fn tx_batch_holds_then_writes_in_order() {
        let mut sv = [0i32; 2];
        assert_eq!(unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_NONBLOCK, 0, sv.as_mut_ptr()) }, 0);
        let big = 1 << 20;
        for fd in sv {
            unsafe { libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, &big as *const i32 as *const libc::c_void, 4) };
            unsafe { libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &big as *const i32 as *const libc::c_void, 4) };
        }
        let stats = PortStats::default();
        let cx = Ctx { number: 7, iface: "test", stats: &stats };
        let mut buf = vec![0u8; TxBatch::BYTES + 100];
        let recv = |buf: &mut [u8]| -> Option<usize> {
            let n = unsafe { libc::recv(sv[1], buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0) };
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
        assert_eq!((b.pending(), stats.tx.load(Ordering::Relaxed)), (1, 10 + TxBatch::FRAMES as u64));
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
}
