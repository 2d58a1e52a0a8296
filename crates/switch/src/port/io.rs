//! What every port kind implements ([`PortIo`]), what its methods are told about the port they
//! serve ([`Ctx`]), and the counters of a port ([`PortStats`]).

use crate::pcap_file::Ts;
use std::sync::atomic::AtomicU64;

/// Counters of one port, shared by the sockets every worker has on it.
#[derive(Default, Debug)]
pub struct PortStats {
    pub rx: AtomicU64,
    pub tx: AtomicU64,
    /// Frames the port failed to transmit.
    pub errors: AtomicU64,
    /// Frames lost on receive: dropped by the kernel for want of room in the port's rings (AF_XDP),
    /// or received broken (a multi-buffer chain that does not make a frame).
    pub rx_errors: AtomicU64,
    /// GSO super-frames received and segmented (PACKET_VNET_HDR).
    pub gso: AtomicU64,
    /// GSO super-frames sent: TCP segments joined on transmit ([`crate::gro`]); their segments
    /// count in `tx`.
    pub gro: AtomicU64,
}

/// The port a kind's method works for: its number and name (for messages) and its counters.
pub struct Ctx<'a> {
    pub number: u32,
    /// The interface name (AF_PACKET ports) or what followed `N=` in `--port`.
    pub iface: &'a str,
    pub stats: &'a PortStats,
}

/// How frames enter and leave through one kind of port (an AF_PACKET socket, a TAP or TUN queue,
/// pcap files), as one worker has it. The packet loop sees every kind through this interface; the
/// methods with a default are those only some kinds need.
pub trait PortIo {
    /// The descriptor to poll; -1 when there is none (pcap ports: their input is read without
    /// waiting).
    fn fd(&self) -> i32;

    /// Receive one frame: where it is (in `buf`, or in the port's receive ring until
    /// [`PortIo::release`] or the next `recv`), its length and, where known, its timestamp; `None`
    /// when nothing is waiting. `woken`: poll said the descriptor is readable.
    fn recv(
        &mut self,
        cx: &Ctx,
        buf: &mut [u8],
        woken: bool,
    ) -> Option<(*const u8, usize, Option<Ts>)>;

    /// Give the ring slot of the frame last received back to the kernel.
    fn release(&mut self) {}

    /// Is a frame waiting (known without a system call)?
    fn rx_ready(&self) -> bool {
        false
    }

    /// Are segments of a received super-frame still to be handed over (the loop must not sleep)?
    fn segments_pending(&self) -> bool {
        false
    }

    /// Send one frame: `Some(ok)` when it went out or failed at once (the caller counts it), `None`
    /// when it was queued, to be counted when flushed ([`PortIo::flush_tx`]).
    fn send(&self, cx: &Ctx, frame: &[u8], ts: Ts) -> Option<bool>;

    /// Frames queued for transmission and not yet handed to the kernel.
    fn tx_pending(&self) -> usize {
        0
    }

    /// Hand the frames queued for transmission to the kernel and count them.
    fn flush_tx(&self, _cx: &Ctx) {}

    /// Did the kernel refuse frames at the last flush (the socket's send buffer full: the link
    /// cannot take frames as fast as they come)? Those frames wait in the transmit ring.
    fn tx_blocked(&self) -> bool {
        false
    }

    /// Look at the interface's MTU again.
    fn refresh_mtu(&self, _cx: &Ctx) {}

    /// Read and clear the descriptor's pending error.
    fn take_error(&self) {}

    /// Is the port up (for watch ports of selector members)?
    fn up(&self, cx: &Ctx) -> bool;

    /// Does the port's interface or device still exist?
    fn alive(&self, cx: &Ctx) -> bool;

    /// Does this port still have file input to read?
    fn has_input(&self) -> bool {
        false
    }

    /// Does this port write files (apart from the capture)?
    fn writes(&self) -> bool {
        false
    }

    /// Flush the files it writes.
    fn flush(&self) {}
}
