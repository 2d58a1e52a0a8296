//! AF_XDP ports (`--port N=xdp:IFACE`): a Linux interface through an XDP socket. The switch's own
//! XDP program ([`prog`], on a BPF link: gone with the switch, even a killed one) redirects every
//! frame of the bound receive queue into the socket through an XSK map; where it cannot be attached
//! (the interface holds another program), the system's libxdp loads or reuses its default program
//! instead. libxdp (Debian `libxdp1`, opened at run time with `dlopen`, so the switch builds and
//! runs without it) creates the socket and its UMEM. The UMEM's four rings (fill, completion, RX,
//! TX) are driven here directly: frames are received where the kernel put them and their buffers go
//! back to the fill ring once per batch; frames sent are copied into UMEM buffers, queued in the TX
//! ring and handed over with one `sendto` kick per batch. The socket, its UMEM and rings as libxdp
//! makes them, and libxdp's binding, are in [`xsk`]; the XDP program in [`prog`].
//!
//! Zero-copy mode is asked for first, copy mode next (veth offers only copy mode); the XDP program
//! runs in the driver (native mode). A frame that fits one UMEM buffer (4096 bytes less the
//! kernel's headroom) is one descriptor. Interfaces whose MTU is larger (jumbo frames) get
//! multi-buffer sockets (`XDP_USE_SG`, Linux 6.6): a frame is a chain of descriptors, gathered into
//! one buffer on receive and cut into buffers on transmit, and the switch's program is loaded
//! frags-aware (libxdp 1.3's cannot be: no fallback there). Where none of this works, the error
//! says why; the caller ([`crate::start`]) then falls back to the packet-socket port
//! ([`super::afpacket`]) and logs it.

mod prog;
mod xsk;

use super::io::{Ctx, PortIo};
use crate::log::Level;
use crate::pcap_file::Ts;
use crate::tuntap;
use std::cell::{Cell, RefCell};
use std::ffi::{c_void, CString};
use std::sync::atomic::Ordering;
use xsk::{
    lib, Sock, XdpDesc, XdpStatistics, XskRing, INHIBIT_PROG_LOAD, SOL_XDP, XDP_COPY,
    XDP_PKT_CONTD, XDP_STATISTICS, XDP_USE_NEED_WAKEUP, XDP_USE_SG, XDP_ZEROCOPY,
};
pub use xsk::{FRAME_SIZE, MAX_FRAME, RX_FRAMES, TX_FRAMES};

/// Set (to anything but `0`) to make every AF_XDP setup fail, as if libxdp were missing: the port
/// falls back to the packet socket (for tests of the fallback path).
pub const NO_XDP_ENV: &str = "P4SEC_NO_XDP";

/// Frames taken from the RX ring at a time (the packet loop takes at most 64 per port per round).
const RX_BATCH: u32 = 64;
/// `sendto` kicks per flush at most: in copy mode the kernel sends at most 32 frames per kick.
const KICKS_MAX: usize = 16;

/// The largest frame a multi-buffer port moves (as a packet socket or pcap file does).
pub const MAX_SG_FRAME: usize = crate::pcap_file::MAX_FRAME;

fn forced_off() -> bool {
    matches!(std::env::var(NO_XDP_ENV), Ok(v) if !v.is_empty() && v != "0")
}

/// The transmit side: the TX and completion rings and the UMEM buffers free for sending.
struct TxState {
    /// The rings (libxdp keeps the completion ring's address until the UMEM is deleted: these boxes
    /// are dropped after [`Xdp::sock`]).
    tx: Box<XskRing>,
    comp: Box<XskRing>,
    fd: i32,
    area: *mut u8,
    free: Vec<u64>,
    /// Descriptors written to the TX ring and not yet submitted, and the frames they make.
    queued: u32,
    frames: u32,
    /// The kernel stopped before the TX ring was empty: kick again.
    kick: bool,
    /// The last kick found the interface down (no carrier, or not running): frames to send are
    /// dropped (counted as errors) until a kick goes through again, rather than queued in a ring
    /// the kernel does not read, to leave late, all at once, when the link comes back. A frame sent
    /// while down probes the link with a kick, once per batch (`probed`).
    down: bool,
    probed: bool,
}

/// An interface port's XDP socket, as one worker has it.
pub struct Xdp {
    /// (declared first: dropped before the rings of `tx`)
    sock: Sock,
    queue: u32,
    /// Received frames taken from the RX ring: `rx_n` of them from ring index `rx_at`; `rx_next`
    /// handed over.
    rx_at: u32,
    rx_n: u32,
    rx_next: u32,
    tx: RefCell<TxState>,
    /// Receive buffers to give back to the fill ring.
    refill: Vec<u64>,
    /// The kernel's drop counters last read (to count only what is new): receive, invalid transmit
    /// descriptors.
    dropped: Cell<u64>,
    tx_invalid: Cell<u64>,
    /// A multi-buffer socket: frames may span several descriptors.
    multi: bool,
    /// The largest Ethernet frame (without a VLAN tag) the interface takes, MTU + 14; refreshed
    /// once a second. A larger one is a transmit error here, as on a packet socket (a veth would
    /// drop it silently).
    tx_max: Cell<usize>,
    /// The switch's own XDP program on the interface (dropped after the socket); `None` where
    /// libxdp's is used.
    prog: Option<std::sync::Arc<prog::XskProg>>,
}

// SAFETY: the raw pointers are the socket's own mappings and libxdp's handles, used by one thread
// at a time (the worker that owns the port).
unsafe impl Send for Xdp {}

impl Xdp {
    /// Open receive queue `queue` of `iface` for port `number`; the error says why AF_XDP cannot be
    /// used (no libxdp, no permission, an MTU too large for a UMEM buffer, the driver refuses XDP).
    pub fn open(number: u32, iface: &str, queue: u32) -> Result<Xdp, String> {
        if forced_off() {
            return Err(format!("{NO_XDP_ENV} is set"));
        }
        let name = CString::new(iface).map_err(|_| format!("bad interface name `{iface}`"))?;
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(format!("port {number}: no interface named `{iface}`"));
        }
        let mtu = tuntap::mtu(iface).unwrap_or(1500) as u32;
        let lib = lib()?;
        // The switch's own program, on a BPF link (gone with the switch, even a killed one); where
        // it cannot be attached (libbpf missing, the interface holding another program, e.g.
        // libxdp's left by a switch killed before it had its own), libxdp loads (or reuses) its
        // default program.
        let single = || -> Result<(Sock, Option<std::sync::Arc<prog::XskProg>>), String> {
            let wake = XDP_USE_NEED_WAKEUP;
            let own = prog::XskProg::on(iface, ifindex, false).and_then(|prog| {
                let sock = Sock::create(lib, &name, queue, XDP_ZEROCOPY | wake, INHIBIT_PROG_LOAD)
                    .or_else(|_| {
                        Sock::create(lib, &name, queue, XDP_COPY | wake, INHIBIT_PROG_LOAD)
                    })?;
                prog.insert(queue, sock.fd)?;
                Ok((sock, Some(prog)))
            });
            own.or_else(|why| {
                p4log!(Level::Debug, "port {number}: queue {queue} of `{iface}`: not the switch's own XDP program ({why}); libxdp's");
                Sock::create(lib, &name, queue, XDP_ZEROCOPY | wake, 0)
                    .or_else(|_| Sock::create(lib, &name, queue, XDP_COPY | wake, 0))
                    .map(|sock| (sock, None))
            })
            .map_err(|e| {
                let hint = if e.contains("ermission") { " (needs root or CAP_NET_ADMIN, CAP_BPF)" } else { "" };
                format!("native XDP with an XDP socket on queue {queue} of `{iface}`: {e}{hint}")
            })
        };
        let multi = || -> Result<(Sock, std::sync::Arc<prog::XskProg>), String> {
            let prog = prog::XskProg::on(iface, ifindex, true)?;
            let sg = XDP_USE_NEED_WAKEUP | XDP_USE_SG;
            let sock = Sock::create(lib, &name, queue, XDP_ZEROCOPY | sg, INHIBIT_PROG_LOAD)
                .or_else(|_| Sock::create(lib, &name, queue, XDP_COPY | sg, INHIBIT_PROG_LOAD))
                .map_err(|e| {
                    let hint = if e.contains("not supported") || e.contains("nvalid argument") {
                        " (multi-buffer XDP sockets need Linux 6.6)"
                    } else {
                        ""
                    };
                    format!("a multi-buffer XDP socket on queue {queue} of `{iface}`: {e}{hint}")
                })?;
            prog.insert(queue, sock.fd)?;
            Ok((sock, prog))
        };
        // Ethernet header and a VLAN tag on top of the MTU
        let (sock, prog, multi) = if mtu as usize + 18 > MAX_FRAME {
            let (sock, prog) =
                multi().map_err(|e| format!("MTU {mtu} does not fit a {FRAME_SIZE}-byte UMEM buffer, and multi-buffer AF_XDP cannot be used: {e}"))?;
            (sock, Some(prog), true)
        } else {
            match single() {
                Ok((sock, prog)) => (sock, prog, false),
                // a driver may take only frags-aware programs above a smaller MTU (a veth above
                // about 3500)
                Err(e) if mtu > 1500 => {
                    let (sock, prog) = multi()
                        .map_err(|m| format!("{e}; multi-buffer AF_XDP for MTU {mtu}: {m}"))?;
                    (sock, Some(prog), true)
                }
                Err(e) => return Err(e),
            }
        };
        let mut x = Xdp {
            sock,
            queue,
            rx_at: 0,
            rx_n: 0,
            rx_next: 0,
            tx: RefCell::new(TxState {
                tx: XskRing::zeroed(),
                comp: XskRing::zeroed(),
                fd: -1,
                area: std::ptr::null_mut(),
                free: (0..TX_FRAMES)
                    .map(|i| ((RX_FRAMES + i) * FRAME_SIZE) as u64)
                    .collect(),
                queued: 0,
                frames: 0,
                kick: false,
                down: false,
                probed: false,
            }),
            refill: Vec::with_capacity(RX_FRAMES as usize),
            dropped: Cell::new(0),
            tx_invalid: Cell::new(0),
            multi,
            tx_max: Cell::new(mtu as usize + 14),
            prog,
        };
        {
            let t = x.tx.get_mut();
            t.tx = std::mem::replace(&mut x.sock.tx, XskRing::zeroed());
            t.comp = std::mem::replace(&mut x.sock.comp, XskRing::zeroed());
            t.fd = x.sock.fd;
            t.area = x.sock.area as *mut u8;
        }
        // every receive buffer into the fill ring
        let fill = &mut x.sock.fill;
        if fill.prod_free(RX_FRAMES) < RX_FRAMES {
            return Err("the fill ring is smaller than the receive buffers".into());
        }
        for i in 0..RX_FRAMES {
            unsafe { *fill.addr(fill.cached_prod.wrapping_add(i)) = (i * FRAME_SIZE) as u64 };
        }
        fill.cached_prod = fill.cached_prod.wrapping_add(RX_FRAMES);
        fill.prod_submit();
        Ok(x)
    }

    /// Zero-copy (the driver's own) or copy mode?
    pub fn zero_copy(&self) -> bool {
        self.sock.zero_copy
    }

    /// The switch's own XDP program on the interface (on a BPF link), rather than libxdp's?
    pub fn own_program(&self) -> bool {
        self.prog.is_some()
    }

    /// Frames may span several descriptors (an interface whose MTU does not fit one buffer)?
    pub fn multi_buffer(&self) -> bool {
        self.multi
    }

    /// The receive queue the socket is bound to.
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// Hand the buffers of the frames handed over back to the kernel (fill ring), and their RX
    /// entries.
    #[inline]
    fn recycle(&mut self) {
        let n = self.rx_next;
        if n == 0 {
            return;
        }
        let s = &mut self.sock;
        for k in 0..n {
            let d = unsafe { *s.rx.desc(self.rx_at.wrapping_add(k)) };
            // the buffer's start (the kernel hands out its own offset in it)
            self.refill.push(d.addr - d.addr % FRAME_SIZE as u64);
        }
        // into the fill ring as far as it has room (with twice as many entries as buffers it has;
        // what does not fit waits for the next batch rather than overwrite entries the kernel has
        // not read)
        let room = (s.fill.prod_free(self.refill.len() as u32) as usize).min(self.refill.len());
        for (k, a) in self.refill.drain(..room).enumerate() {
            unsafe { *s.fill.addr(s.fill.cached_prod.wrapping_add(k as u32)) = a };
        }
        s.fill.cached_prod = s.fill.cached_prod.wrapping_add(room as u32);
        s.fill.prod_submit();
        // frames taken but not handed over (the loop stopped early) are read again next time
        s.rx.cached_cons = self.rx_at.wrapping_add(n);
        s.rx.cons_release();
        self.rx_at = s.rx.cached_cons;
        self.rx_n = 0;
        self.rx_next = 0;
        if s.fill.needs_wakeup() {
            unsafe {
                libc::recvfrom(
                    s.fd,
                    std::ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            };
        }
    }

    /// Buffers of frames the kernel has sent back to the free list.
    #[inline]
    fn complete(comp: &mut XskRing, free: &mut Vec<u64>) {
        let n = comp.cons_avail(TX_FRAMES);
        if n == 0 {
            return;
        }
        for k in 0..n {
            let a = unsafe { *comp.addr(comp.cached_cons.wrapping_add(k)) };
            free.push(a - a % FRAME_SIZE as u64);
        }
        comp.cached_cons = comp.cached_cons.wrapping_add(n);
        comp.cons_release();
    }

    /// Count the `n` frames a kick handed over: as sent, or as transmit errors when it found the
    /// link down (the kernel does not take them then; they may still leave when the link is back).
    fn count_kicked(cx: &Ctx, tx: &TxState, n: u32) {
        (if tx.down {
            &cx.stats.errors
        } else {
            &cx.stats.tx
        })
        .fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Submit the queued descriptors and kick the kernel until the TX ring is empty (copy mode
    /// sends at most 32 frames per kick) or it says it is busy.
    fn kick(tx: &mut TxState) {
        if tx.queued > 0 {
            tx.tx.prod_submit();
            tx.queued = 0;
            tx.frames = 0;
        }
        let mut busy = false;
        for _ in 0..KICKS_MAX {
            // (a link found down is probed even with nothing to send)
            if tx.tx.consumer().load(Ordering::Acquire) == tx.tx.cached_prod && !tx.down {
                break;
            }
            if !tx.tx.needs_wakeup() && !busy && !tx.down {
                // the driver picks them up by itself (zero-copy)
                break;
            }
            let r = unsafe {
                libc::sendto(
                    tx.fd,
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            busy = false;
            if r < 0 {
                match std::io::Error::last_os_error().raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS)
                    | Some(libc::EINTR) => {
                        busy = true;
                        Self::complete(&mut tx.comp, &mut tx.free);
                    }
                    Some(libc::ENETDOWN) | Some(libc::ENXIO) => {
                        tx.down = true;
                        break;
                    }
                    _ => break,
                }
            } else {
                tx.down = false;
            }
        }
        // (not while the link is down: the next frame to send probes it, the loop need not wake up
        // for it)
        tx.kick = !tx.down
            && tx.tx.consumer().load(Ordering::Acquire) != tx.tx.cached_prod
            && tx.tx.needs_wakeup();
        Self::complete(&mut tx.comp, &mut tx.free);
    }

    /// A frame in several descriptors (multi-buffer), the first `first`: its parts copied one after
    /// the other into `buf`. The kernel writes every descriptor of a frame before it moves the
    /// producer index, so the rest are in the RX ring, possibly beyond the batch taken: the batch
    /// grows to them. A chain that is longer than `buf`, or points outside the UMEM, is consumed
    /// whole and handed over empty (the loop counts it as an error and drops it).
    fn gather(&mut self, first: XdpDesc, buf: &mut [u8]) -> (*const u8, usize, Option<Ts>) {
        let mut d = first;
        let mut len = 0usize;
        let mut bad = false;
        loop {
            let (at, n) = (d.addr as usize, d.len as usize);
            if bad || at + n > self.sock.area_len || len + n > buf.len() {
                bad = true;
            } else {
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        (self.sock.area as *const u8).add(at),
                        buf.as_mut_ptr().add(len),
                        n,
                    )
                };
                len += n;
            }
            if d.options & XDP_PKT_CONTD == 0 {
                break;
            }
            if self.rx_next == self.rx_n {
                // the rest of the chain is past the batch: take it too
                let more = self.sock.rx.cons_more(self.rx_n);
                if more == self.rx_n {
                    // never seen: the kernel does not publish half a frame
                    bad = true;
                    break;
                }
                self.rx_n = more;
            }
            d = unsafe { *self.sock.rx.desc(self.rx_at.wrapping_add(self.rx_next)) };
            self.rx_next += 1;
        }
        (buf.as_ptr(), if bad { 0 } else { len }, None)
    }
}

impl PortIo for Xdp {
    #[inline]
    fn fd(&self) -> i32 {
        self.sock.fd
    }

    /// The next frame of the RX ring, where the kernel put it in the UMEM; it stays there until the
    /// next `recv` after the batch taken is used up, or [`PortIo::release`].
    #[inline]
    fn recv(
        &mut self,
        _cx: &Ctx,
        buf: &mut [u8],
        _woken: bool,
    ) -> Option<(*const u8, usize, Option<Ts>)> {
        if self.rx_next == self.rx_n {
            self.recycle();
            let n = self.sock.rx.cons_avail(RX_BATCH);
            if n == 0 {
                return None;
            }
            self.rx_at = self.sock.rx.cached_cons;
            self.rx_n = n;
        }
        let d = unsafe { *self.sock.rx.desc(self.rx_at.wrapping_add(self.rx_next)) };
        self.rx_next += 1;
        if d.options & XDP_PKT_CONTD != 0 && self.multi {
            return Some(self.gather(d, buf));
        }
        // the next frame of the batch into the cache while this one goes through the pipeline (the
        // kernel wrote it on another CPU: its first read would be a cache miss)
        if self.rx_next < self.rx_n {
            let next = unsafe { *self.sock.rx.desc(self.rx_at.wrapping_add(self.rx_next)) };
            let at = (self.sock.area as *const u8).wrapping_add(next.addr as usize);
            crate::ring::prefetch(at);
            crate::ring::prefetch(at.wrapping_add(64));
        }
        if d.addr as usize + d.len as usize > self.sock.area_len {
            return Some((self.sock.area as *const u8, 0, None));
        }
        Some((
            unsafe { (self.sock.area as *const u8).add(d.addr as usize) },
            d.len as usize,
            None,
        ))
    }

    #[inline]
    fn release(&mut self) {
        self.recycle();
    }

    /// Frames taken and not handed over, or waiting in the RX ring.
    #[inline]
    fn rx_ready(&self) -> bool {
        self.rx_next < self.rx_n
            || self.sock.rx.producer().load(Ordering::Acquire) != self.rx_at.wrapping_add(self.rx_n)
    }

    /// Copied into a free UMEM buffer and queued in the TX ring, counted when flushed.
    #[inline]
    fn send(&self, cx: &Ctx, frame: &[u8], _ts: Ts) -> Option<bool> {
        if !crate::ring::within_mtu(frame, self.tx_max.get()) {
            return Some(false);
        }
        // descriptors the frame takes: one, or (multi-buffer) one per UMEM buffer it fills
        let parts = if frame.len() <= MAX_FRAME {
            1
        } else if self.multi && frame.len() <= MAX_SG_FRAME {
            frame.len().div_ceil(FRAME_SIZE as usize) as u32
        } else {
            return Some(false);
        };
        let mut tx = self.tx.borrow_mut();
        let tx = &mut *tx;
        if tx.down {
            if !tx.probed {
                tx.probed = true;
                Self::kick(tx);
            }
            if tx.down {
                return Some(false);
            }
        }
        if (tx.free.len() as u32) < parts {
            Self::complete(&mut tx.comp, &mut tx.free);
        }
        if (tx.free.len() as u32) < parts || tx.tx.prod_free(parts) < parts {
            let n = tx.frames;
            Self::kick(tx);
            Self::count_kicked(cx, tx, n);
            if tx.down || (tx.free.len() as u32) < parts || tx.tx.prod_free(parts) < parts {
                return Some(false);
            }
        }
        let mut at = tx.tx.cached_prod;
        // (at least `parts` free buffers: counted above)
        let base = tx.free.len() - parts as usize;
        let chunk = if frame.len() <= MAX_FRAME {
            MAX_FRAME
        } else {
            FRAME_SIZE as usize
        };
        for (k, (chunk, &addr)) in frame.chunks(chunk).zip(&tx.free[base..]).enumerate() {
            let options = if (k as u32) + 1 < parts {
                XDP_PKT_CONTD
            } else {
                0
            };
            unsafe {
                std::ptr::copy_nonoverlapping(
                    chunk.as_ptr(),
                    tx.area.add(addr as usize),
                    chunk.len(),
                );
                *tx.tx.desc(at) = XdpDesc {
                    addr,
                    len: chunk.len() as u32,
                    options,
                };
            }
            at = at.wrapping_add(1);
        }
        tx.free.truncate(base);
        tx.tx.cached_prod = at;
        tx.queued += parts;
        tx.frames += 1;
        None
    }

    #[inline]
    fn tx_pending(&self) -> usize {
        let tx = self.tx.borrow();
        tx.frames as usize + tx.kick as usize
    }

    /// Submit what is queued with one kick (more in copy mode for large batches) and count it as
    /// sent.
    fn flush_tx(&self, cx: &Ctx) {
        let mut tx = self.tx.borrow_mut();
        tx.probed = false;
        if tx.queued == 0 && !tx.kick {
            return;
        }
        let n = tx.frames;
        Self::kick(&mut tx);
        Self::count_kicked(cx, &tx, n);
    }

    /// Once a second: the interface's MTU; frames the kernel dropped for want of room in the RX
    /// ring or of fill buffers count as receive errors of the port, invalid transmit descriptors as
    /// transmit errors.
    fn refresh_mtu(&self, cx: &Ctx) {
        if let Some(mtu) = tuntap::mtu(cx.iface) {
            self.tx_max.set(mtu + 14);
        }
        let mut st = XdpStatistics::default();
        let mut len = std::mem::size_of::<XdpStatistics>() as u32;
        if unsafe {
            libc::getsockopt(
                self.sock.fd,
                SOL_XDP,
                XDP_STATISTICS,
                &mut st as *mut _ as *mut c_void,
                &mut len,
            )
        } == 0
        {
            let (rx, tx) = (
                st.rx_dropped + st.rx_ring_full + st.rx_invalid_descs,
                st.tx_invalid_descs,
            );
            let (rx_before, tx_before) = (self.dropped.replace(rx), self.tx_invalid.replace(tx));
            cx.stats
                .errors
                .fetch_add(tx.saturating_sub(tx_before), Ordering::Relaxed);
            if rx > rx_before {
                cx.stats
                    .rx_errors
                    .fetch_add(rx - rx_before, Ordering::Relaxed);
                p4log!(
                    Level::Debug,
                    "port {}: XDP socket on `{}`: so far {} frames dropped for want of a fill buffer, {} for a full RX ring, {} invalid descriptors (rx {}, tx {}); fill ring empty {} times",
                    cx.number,
                    cx.iface,
                    st.rx_dropped,
                    st.rx_ring_full,
                    st.rx_invalid_descs + st.tx_invalid_descs,
                    st.rx_invalid_descs,
                    st.tx_invalid_descs,
                    st.rx_fill_ring_empty_descs
                );
            }
        }
    }

    /// The interface exists, is up and has its carrier.
    fn up(&self, cx: &Ctx) -> bool {
        tuntap::oper_up(cx.iface).unwrap_or(false)
    }

    fn alive(&self, cx: &Ctx) -> bool {
        tuntap::exists(cx.iface)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forced_off_is_a_reason() {
        std::env::set_var(NO_XDP_ENV, "1");
        let e = Xdp::open(1, "lo", 0)
            .err()
            .expect("AF_XDP must be refused when forced off");
        assert!(e.contains(NO_XDP_ENV), "{e}");
        std::env::remove_var(NO_XDP_ENV);
        let e = Xdp::open(1, "no-such-if0", 0).err().expect("no interface");
        assert!(e.contains("no interface named"), "{e}");
    }
}
