//! TUN and TAP devices made through /dev/net/tun (`--port N=tap:NAME`, `--port N=tun:NAME`). The devices
//! are not persistent: the kernel removes them when the switch closes its descriptors (at exit, however it
//! ends). With several workers the device is multi-queue and each worker has its own queue.
//!
//! TUN framing: a TUN device carries IP packets, which enter the pipeline with a synthetic Ethernet header
//! ([`ip_to_ethernet`]) and leave it without one ([`ethernet_to_ip`]).
//!
//! Batches: the packet loop reads a queue until it is empty, at most a batch per wake-up (one `poll` per
//! batch); what a batch sends to a queue is held in its [`TxBatch`] and written when the batch ends (or the
//! batch buffer is full), one `write` per frame (a TUN/TAP queue takes one packet per `write`). The devices'
//! transmit queues (the frames the kernel hands to the switch) are made [`TX_QUEUE_LEN`] packets long
//! ([`set_tx_queue_len`]) so that a burst waits there instead of being dropped while the worker is busy.

use crate::port::io::Ctx;
use std::cell::RefCell;
use std::ffi::CString;
use std::sync::atomic::Ordering;

const SIOCGIFFLAGS: u64 = 0x8913;
const SIOCSIFFLAGS: u64 = 0x8914;
const SIOCGIFTXQLEN: u64 = 0x8942;
const SIOCSIFTXQLEN: u64 = 0x8943;

/// The transmit queue length given to the TUN/TAP devices the switch opens (the kernel's default for them is
/// 500 packets, per queue): the frames that wait for a busy worker.
pub const TX_QUEUE_LEN: u32 = 4096;

#[repr(C)]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

fn ifreq(name: &str) -> IfReq {
    let mut r = IfReq { name: [0; libc::IFNAMSIZ], flags: 0, _pad: [0; 22] };
    for (d, s) in r.name.iter_mut().zip(name.bytes().take(libc::IFNAMSIZ - 1)) {
        *d = s as libc::c_char;
    }
    r
}

/// `struct ifreq` with an `int` member (`ifr_qlen`).
#[repr(C)]
struct IfReqInt {
    name: [libc::c_char; libc::IFNAMSIZ],
    value: libc::c_int,
    _pad: [u8; 20],
}

fn kind(tap: bool) -> &'static str {
    if tap {
        "TAP"
    } else {
        "TUN"
    }
}

/// Does an interface of this name exist (in the switch's network namespace)?
pub fn exists(name: &str) -> bool {
    let Ok(c) = CString::new(name) else { return false };
    unsafe { libc::if_nametoindex(c.as_ptr()) != 0 }
}

/// Open one queue of the TUN (`tap == false`) or TAP device `name`, creating the device if it does not
/// exist; a non-blocking descriptor.
pub fn open_queue(name: &str, tap: bool, multi_queue: bool) -> Result<i32, String> {
    let k = kind(tap);
    let path = b"/dev/net/tun\0";
    let fd = unsafe { libc::open(path.as_ptr() as *const libc::c_char, libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        let hint = match e.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) => " (creating TUN/TAP devices needs root or CAP_NET_ADMIN)",
            Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::ENXIO) => " (no TUN/TAP support in this kernel: modprobe tun)",
            _ => "",
        };
        return Err(format!("cannot create {k} device `{name}`: cannot open /dev/net/tun: {e}{hint}"));
    }
    let mut r = ifreq(name);
    let mut flags = if tap { libc::IFF_TAP } else { libc::IFF_TUN } | libc::IFF_NO_PI;
    if multi_queue {
        flags |= libc::IFF_MULTI_QUEUE;
    }
    r.flags = flags as libc::c_short;
    let existed = exists(name);
    if unsafe { libc::ioctl(fd, libc::TUNSETIFF as _, &mut r as *mut IfReq) } < 0 {
        let e = std::io::Error::last_os_error();
        unsafe { libc::close(fd) };
        return Err(match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => format!("cannot create {k} device `{name}`: {e} (needs root or CAP_NET_ADMIN)"),
            Some(libc::EINVAL) | Some(libc::EBUSY) if existed => {
                format!("cannot create {k} device `{name}`: an interface of that name already exists and is not a free {k} device")
            }
            _ => format!("cannot create {k} device `{name}`: {e}"),
        });
    }
    Ok(fd)
}

/// Bring the interface up.
pub fn set_up(name: &str) -> Result<(), String> {
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return Err(format!("cannot bring `{name}` up: {}", std::io::Error::last_os_error()));
    }
    let mut r = ifreq(name);
    let mut res = unsafe { libc::ioctl(s, SIOCGIFFLAGS as _, &mut r as *mut IfReq) };
    if res >= 0 {
        r.flags |= libc::IFF_UP as libc::c_short;
        res = unsafe { libc::ioctl(s, SIOCSIFFLAGS as _, &mut r as *mut IfReq) };
    }
    let e = std::io::Error::last_os_error();
    unsafe { libc::close(s) };
    if res < 0 {
        return Err(format!("cannot bring `{name}` up: {e}"));
    }
    Ok(())
}

/// Make the transmit queue of interface `name` at least `len` packets long (a longer one is left as it is);
/// the length it has now.
pub fn set_tx_queue_len(name: &str, len: u32) -> Result<u32, String> {
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return Err(format!("cannot set the transmit queue length of `{name}`: {}", std::io::Error::last_os_error()));
    }
    let mut r = IfReqInt { name: ifreq(name).name, value: 0, _pad: [0; 20] };
    let mut res = unsafe { libc::ioctl(s, SIOCGIFTXQLEN as _, &mut r as *mut IfReqInt) };
    if res >= 0 && (r.value as u32) < len {
        r.value = len as libc::c_int;
        res = unsafe { libc::ioctl(s, SIOCSIFTXQLEN as _, &mut r as *mut IfReqInt) };
    }
    let e = std::io::Error::last_os_error();
    unsafe { libc::close(s) };
    if res < 0 {
        return Err(format!("cannot set the transmit queue length of `{name}` to {len}: {e}"));
    }
    Ok(r.value as u32)
}

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

/// Is the interface up and running (administratively up, with carrier: a veth whose peer is down is not)?
/// `None` when there is no interface of that name.
pub fn oper_up(name: &str) -> Option<bool> {
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return None;
    }
    let mut r = ifreq(name);
    let res = unsafe { libc::ioctl(s, SIOCGIFFLAGS as _, &mut r as *mut IfReq) };
    unsafe { libc::close(s) };
    if res < 0 {
        return None;
    }
    let f = r.flags as libc::c_int;
    Some(f & libc::IFF_UP != 0 && f & libc::IFF_RUNNING != 0)
}

/// Is the queue still attached to its device (false once the device was deleted)?
pub fn attached(fd: i32) -> bool {
    let mut r = ifreq("");
    unsafe { libc::ioctl(fd, libc::TUNGETIFF as _, &mut r as *mut IfReq) >= 0 }
}

/// The destination MAC address of frames made from packets of a TUN port (or a raw-IP pcap input):
/// 02:70:34:73:65:63 ("p4sec" in a locally administered address).
pub const TUN_SWITCH_MAC: [u8; 6] = [0x02, 0x70, 0x34, 0x73, 0x65, 0x63];

/// The source MAC address of frames made from packets of TUN port `port`: 02:74:75:6e:HH:LL ("tun" and the
/// port number's low 16 bits).
pub fn tun_host_mac(port: u32) -> [u8; 6] {
    [0x02, 0x74, 0x75, 0x6e, (port >> 8) as u8, port as u8]
}

/// `buf[14..]` holds an IP packet: write an Ethernet header in front of it (destination [`TUN_SWITCH_MAC`],
/// source [`tun_host_mac`], EtherType from the IP version). False if it is neither IPv4 nor IPv6.
pub fn ip_to_ethernet(buf: &mut [u8], port: u32) -> bool {
    if buf.len() < 15 {
        return false;
    }
    let et: u16 = match buf[14] >> 4 {
        4 => 0x0800,
        6 => 0x86dd,
        _ => return false,
    };
    buf[0..6].copy_from_slice(&TUN_SWITCH_MAC);
    buf[6..12].copy_from_slice(&tun_host_mac(port));
    buf[12..14].copy_from_slice(&et.to_be_bytes());
    true
}

/// The IP packet inside an Ethernet frame (after any VLAN tags), for a TUN port; `None` if it is not IP.
pub fn ethernet_to_ip(frame: &[u8]) -> Option<&[u8]> {
    let mut off = 12;
    loop {
        if frame.len() < off + 2 {
            return None;
        }
        match u16::from_be_bytes([frame[off], frame[off + 1]]) {
            0x8100 | 0x88a8 => off += 4,
            0x0800 | 0x86dd if frame.len() > off + 2 => return Some(&frame[off + 2..]),
            _ => return None,
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

    #[test]
    fn tun_headers() {
        let mut b = vec![0u8; 14 + 20];
        b[14] = 0x45;
        assert!(ip_to_ethernet(&mut b, 4));
        assert_eq!(&b[12..14], &[0x08, 0x00]);
        assert_eq!(&b[0..6], &TUN_SWITCH_MAC);
        assert_eq!(&b[6..12], &[2, 0x74, 0x75, 0x6e, 0, 4]);
        assert_eq!(ethernet_to_ip(&b).unwrap(), &b[14..]);
        b[14] = 0x15;
        assert!(!ip_to_ethernet(&mut b, 4));
        let mut v = vec![0u8; 18 + 40];
        v[12..14].copy_from_slice(&[0x81, 0]);
        v[16..18].copy_from_slice(&[0x86, 0xdd]);
        assert_eq!(ethernet_to_ip(&v).unwrap().len(), 40);
        assert!(ethernet_to_ip(&[0u8; 10]).is_none());
    }
}
