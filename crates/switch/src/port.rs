//! Ports: [`Port`], a port of any kind as one worker has it, with what all kinds share (number,
//! name, counters, the `--pcap-dir` capture). Each kind is a type of its own behind one interface
//! ([`io::PortIo`]): [`afpacket::AfPacket`] (Linux interfaces), [`tap::Tap`], [`tun::Tun`] (devices
//! the switch creates), [`pcap::Pcap`] (files) and [`xdp::Xdp`] (Linux interfaces through AF_XDP
//! sockets). [`Io`] holds one of them and dispatches to it with a `match`, so that the per-frame
//! calls stay static (inlined, no virtual call).

pub mod afpacket;
pub mod io;
pub mod pcap;
pub mod tap;
pub mod tun;
pub mod txbatch;
pub mod xdp;

use crate::log::{self, Level};
use crate::pcap_file::{Ts, Writer};
use afpacket::AfPacket;
use io::{Ctx, PortIo, PortStats};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// The `--pcap-dir` files of one port, shared by all workers.
pub struct Capture {
    pub rx: Mutex<Writer>,
    pub tx: Mutex<Writer>,
}

/// How a port moves frames: one of the port kinds.
pub enum Io {
    Packet(AfPacket),
    Tap(tap::Tap),
    Tun(tun::Tun),
    Pcap(pcap::Pcap),
    Xdp(xdp::Xdp),
}

/// `$body` with `$p` bound to the port kind `$io` holds.
macro_rules! each {
    ($io:expr, $p:ident => $body:expr) => {
        match $io {
            Io::Packet($p) => $body,
            Io::Tap($p) => $body,
            Io::Tun($p) => $body,
            Io::Pcap($p) => $body,
            Io::Xdp($p) => $body,
        }
    };
}

impl PortIo for Io {
    #[inline]
    fn fd(&self) -> i32 {
        each!(self, p => p.fd())
    }
    #[inline]
    fn recv(
        &mut self,
        cx: &Ctx,
        buf: &mut [u8],
        woken: bool,
    ) -> Option<(*const u8, usize, Option<Ts>)> {
        each!(self, p => p.recv(cx, buf, woken))
    }
    #[inline]
    fn release(&mut self) {
        each!(self, p => p.release())
    }
    #[inline]
    fn rx_ready(&self) -> bool {
        each!(self, p => p.rx_ready())
    }
    #[inline]
    fn segments_pending(&self) -> bool {
        each!(self, p => p.segments_pending())
    }
    #[inline]
    fn send(&self, cx: &Ctx, frame: &[u8], ts: Ts) -> Option<bool> {
        each!(self, p => p.send(cx, frame, ts))
    }
    #[inline]
    fn tx_pending(&self) -> usize {
        each!(self, p => p.tx_pending())
    }
    #[inline]
    fn tx_blocked(&self) -> bool {
        each!(self, p => p.tx_blocked())
    }
    #[inline]
    fn flush_tx(&self, cx: &Ctx) {
        each!(self, p => p.flush_tx(cx))
    }
    fn refresh_mtu(&self, cx: &Ctx) {
        each!(self, p => p.refresh_mtu(cx))
    }
    fn take_error(&self) {
        each!(self, p => p.take_error())
    }
    fn up(&self, cx: &Ctx) -> bool {
        each!(self, p => p.up(cx))
    }
    fn alive(&self, cx: &Ctx) -> bool {
        each!(self, p => p.alive(cx))
    }
    #[inline]
    fn has_input(&self) -> bool {
        each!(self, p => p.has_input())
    }
    fn writes(&self) -> bool {
        each!(self, p => p.writes())
    }
    fn flush(&self) {
        each!(self, p => p.flush())
    }
}

/// A port as one worker has it.
pub struct Port {
    pub number: u32,
    /// The interface name (AF_PACKET ports) or what followed `N=` in `--port`.
    pub iface: String,
    pub(crate) io: Io,
    pub stats: Arc<PortStats>,
    pub(crate) capture: Option<Arc<Capture>>,
    /// The interface is gone (deleted, moved to another namespace): frames to it are dropped and
    /// counted as transmit errors, not handed to a socket that can no longer send them.
    gone: std::cell::Cell<bool>,
}

impl Port {
    /// Port `number` named `iface` moving its frames through `io`, with counters of its own and no
    /// capture.
    pub fn new(number: u32, iface: &str, io: Io) -> Port {
        Port {
            number,
            iface: iface.to_string(),
            io,
            stats: Arc::default(),
            capture: None,
            gone: std::cell::Cell::new(false),
        }
    }

    /// Open `iface` (e.g. a veth) as port `number`: an AF_PACKET socket with memory-mapped receive
    /// and transmit rings ([`crate::ring`]) on Ethernet interfaces, unless the kernel refuses them
    /// or `P4SEC_NO_MMAP` is set ([`Port::mmap`] tells which it got).
    pub fn open(number: u32, iface: &str) -> Result<Port, String> {
        Ok(Port::new(
            number,
            iface,
            Io::Packet(AfPacket::open(number, iface)?),
        ))
    }

    /// Open `iface` as one of several sockets of a PACKET_FANOUT group: the kernel spreads received
    /// frames over the group's sockets by flow hash, so each worker gets whole flows (packet order
    /// within a flow is kept).
    pub fn open_fanout(number: u32, iface: &str, group: u16) -> Result<Port, String> {
        Ok(Port::new(
            number,
            iface,
            Io::Packet(AfPacket::open_fanout(number, iface, group)?),
        ))
    }

    /// The AF_PACKET socket of an interface port.
    pub fn packet(&self) -> Option<&AfPacket> {
        match &self.io {
            Io::Packet(p) => Some(p),
            _ => None,
        }
    }

    /// The XDP socket of an AF_XDP port.
    pub fn xdp(&self) -> Option<&xdp::Xdp> {
        match &self.io {
            Io::Xdp(p) => Some(p),
            _ => None,
        }
    }

    /// Does this port move frames through memory-mapped rings (a packet socket's, or an XDP
    /// socket's)?
    pub fn mmap(&self) -> bool {
        self.packet().is_some_and(|p| p.mmap()) || self.xdp().is_some()
    }

    /// Does this port hold frames between [`Port::send`] and [`Port::flush_tx`], or find frames
    /// waiting without a system call ([`Port::rx_ready`])? Memory-mapped rings, and the transmit
    /// batches of TAP and TUN ports: the packet loop flushes such ports after every batch.
    pub(crate) fn batched(&self) -> bool {
        self.mmap() || matches!(self.io, Io::Tap(_) | Io::Tun(_))
    }

    /// Join consecutive TCP segments sent to this port in one batch into GSO super-frames
    /// ([`crate::gro`]). Only interface ports with rings and PACKET_VNET_HDR; an error says why not
    /// (the port works as before).
    pub fn enable_gro(&mut self) -> Result<(), String> {
        match &mut self.io {
            Io::Packet(p) => p.enable_gro(&self.iface),
            _ => Err("needs memory-mapped rings and PACKET_VNET_HDR".into()),
        }
    }

    #[inline]
    fn cx(&self) -> Ctx<'_> {
        Ctx {
            number: self.number,
            iface: &self.iface,
            stats: &self.stats,
        }
    }

    /// Is this a pcap port?
    pub(crate) fn is_pcap(&self) -> bool {
        matches!(self.io, Io::Pcap(_))
    }

    /// The descriptor to poll; -1 for pcap ports (their input is read without waiting).
    #[inline]
    pub(crate) fn fd(&self) -> i32 {
        self.io.fd()
    }

    /// Does this port still have pcap input to read?
    #[inline]
    pub(crate) fn has_input(&self) -> bool {
        self.io.has_input()
    }

    /// Does this port write files (pcap output or capture)?
    pub(crate) fn writes(&self) -> bool {
        self.capture.is_some() || self.io.writes()
    }

    pub(crate) fn flush(&self) {
        if let Some(c) = &self.capture {
            let _ = c.rx.lock().unwrap_or_else(|p| p.into_inner()).flush();
            let _ = c.tx.lock().unwrap_or_else(|p| p.into_inner()).flush();
        }
        self.io.flush();
    }

    /// Read and clear the socket's pending error.
    pub(crate) fn take_error(&self) {
        self.io.take_error()
    }

    /// Is the port up (for watch ports of selector members): an interface that exists, is up and
    /// has its carrier (TUN/TAP: attached and up); pcap ports always are.
    pub(crate) fn up(&self) -> bool {
        self.io.up(&self.cx())
    }

    /// Does the interface still exist (for TUN/TAP: is the device still there, wherever it was
    /// moved)?
    pub(crate) fn alive(&self) -> bool {
        self.io.alive(&self.cx())
    }

    /// The interface is gone for good: from now on frames sent to the port are dropped and counted
    /// as errors.
    pub(crate) fn set_gone(&self) {
        self.gone.set(true);
    }

    /// Receive one frame: where it is (in `buf`, or in the port's receive ring until
    /// [`Port::release`] or the next `recv`), its length and, for pcap input and rings, its
    /// timestamp; `None` when nothing is waiting (or the pcap input is finished). `woken`: poll
    /// said the socket is readable, so a ring port whose ring is empty also looks at the socket's
    /// queue.
    #[inline]
    pub(crate) fn recv(
        &mut self,
        buf: &mut [u8],
        woken: bool,
    ) -> Option<(*const u8, usize, Option<Ts>)> {
        let cx = Ctx {
            number: self.number,
            iface: &self.iface,
            stats: &self.stats,
        };
        self.io.recv(&cx, buf, woken)
    }

    /// Give the ring slot of the frame last received back to the kernel.
    #[inline]
    pub(crate) fn release(&mut self) {
        self.io.release()
    }

    /// Is a frame waiting in the port's receive ring, or a segment of a super-frame (known without
    /// a system call)?
    #[inline]
    pub(crate) fn rx_ready(&self) -> bool {
        self.io.rx_ready()
    }

    /// Are segments of a received super-frame still to be handed over?
    #[inline]
    pub(crate) fn segments_pending(&self) -> bool {
        self.io.segments_pending()
    }

    /// Frames queued in the transmit ring (or held to be joined) and not yet handed to the kernel.
    #[inline]
    pub(crate) fn tx_pending(&self) -> usize {
        self.io.tx_pending()
    }

    /// Are frames waiting in the transmit ring because the kernel refused them (a slow link)?
    #[inline]
    pub(crate) fn tx_blocked(&self) -> bool {
        self.io.tx_blocked()
    }

    /// Hand what is held to be joined and the frames queued in the transmit ring to the kernel and
    /// count them.
    #[inline]
    pub(crate) fn flush_tx(&self) {
        self.io.flush_tx(&self.cx())
    }

    /// Look at the interface's MTU again (frames larger than it are not handed to the kernel).
    pub(crate) fn refresh_mtu(&self) {
        self.io.refresh_mtu(&self.cx())
    }

    /// Send one frame (and capture it).
    pub(crate) fn send(&self, frame: &[u8], ts: Ts) {
        if self.gone.get() {
            self.stats.errors.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if let Some(c) = &self.capture {
            let _ =
                c.tx.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .write(ts, frame);
        }
        let Some(ok) = self.io.send(&self.cx(), frame, ts) else {
            return;
        };
        if ok {
            self.stats.tx.fetch_add(1, Ordering::Relaxed);
        } else {
            self.stats.errors.fetch_add(1, Ordering::Relaxed);
            if log::enabled(Level::Debug) && !self.is_pcap() {
                p4log!(
                    Level::Debug,
                    "port {}: cannot send a frame of {} bytes on `{}`: {}",
                    self.number,
                    frame.len(),
                    self.iface,
                    std::io::Error::last_os_error()
                );
            }
        }
    }
}

/// The ports of `--port N=xdp:IFACE` for `workers` workers: worker `w` gets an XDP socket on
/// receive queue `w` of the interface. Where AF_XDP cannot be used on every queue, the reason is
/// logged and the port is an AF_PACKET one as `--port N=IFACE` would be (a PACKET_FANOUT group
/// `group` for several workers): the switch forwards either way. A user who wants to know which one
/// it got reads the log line or the `port N: interface ... (AF_XDP ...)` line at start-up.
pub fn open_xdp_ports(
    number: u32,
    iface: &str,
    workers: usize,
    group: u16,
) -> Result<Vec<Port>, String> {
    // no interface of that name: neither kind of port can open it (the same error as `N=IFACE`
    // gives)
    if !crate::tuntap::exists(iface) {
        return Err(format!("port {number}: no interface named `{iface}`"));
    }
    let mut v = vec![];
    let mut why = None;
    for w in 0..workers {
        match xdp::Xdp::open(number, iface, w as u32) {
            Ok(x) => v.push(Port::new(number, iface, Io::Xdp(x))),
            Err(e) => {
                why = Some(e);
                break;
            }
        }
    }
    if let Some(why) = why {
        drop(v);
        p4log!(Level::Warn, "port {number}: AF_XDP not used on `{iface}` ({why}); falling back to the packet socket");
        let mut v = vec![];
        for _ in 0..workers {
            v.push(if workers == 1 {
                Port::open(number, iface)?
            } else {
                Port::open_fanout(number, iface, group)?
            });
        }
        let how = match v[0].packet().and_then(|p| p.slots()) {
            Some((rx, tx)) => format!("memory-mapped rings, {rx} receive and {tx} transmit slots"),
            _ => "one recvmsg/send per frame".into(),
        };
        p4log!(
            Level::Info,
            "port {number}: interface `{iface}` (packet socket, {how})"
        );
        return Ok(v);
    }
    let mode = if v[0].xdp().is_some_and(|x| x.zero_copy()) {
        "zero-copy"
    } else {
        "copy mode"
    };
    let multi = if v[0].xdp().is_some_and(|x| x.multi_buffer()) {
        format!(", multi-buffer: frames up to {} bytes in several buffers, the switch's frags-aware XDP program", xdp::MAX_SG_FRAME)
    } else if v.iter().all(|p| p.xdp().is_some_and(|x| x.own_program())) {
        ", the switch's XDP program".to_string()
    } else {
        ", libxdp's XDP program".to_string()
    };
    p4log!(
        Level::Info,
        "port {number}: interface `{iface}` (AF_XDP, native XDP, {mode}{multi}, {} receive queue(s), {} receive and {} transmit buffers of {} bytes)",
        workers,
        xdp::RX_FRAMES,
        xdp::TX_FRAMES,
        xdp::FRAME_SIZE
    );
    Ok(v)
}
