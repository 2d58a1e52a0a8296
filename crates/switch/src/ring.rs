//! Memory-mapped AF_PACKET rings (TPACKET_V2) for interface ports: the kernel writes received
//! frames into a receive ring shared with the switch and takes frames to send from a transmit ring,
//! so a frame costs no system call of its own. Received frames are handed to the pipeline where
//! they lie in the ring; frames to send are copied into the transmit ring and go out with one
//! `send` per batch ([`Rings::flush`]).
//!
//! TPACKET_V2 rather than V3: V3 hands frames over a block at a time, when the block is full or its
//! timer (a millisecond at least) expires, which delays every frame of a sparse or request/response
//! flow (TCP ACKs); V2 hands each frame over as it arrives and wakes `poll` for it.
//!
//! Frames larger than a receive slot (after GRO, or on interfaces whose MTU is larger than the
//! slot) still arrive whole: with PACKET_COPY_THRESH the kernel also queues them on the socket,
//! marked TP_STATUS_COPY in the ring, and they are read with `recvmsg`.

use crate::pcap_file::Ts;

/// A hint to bring the cache line at `p` into the cache (no effect where the CPU has no such
/// instruction; never faults, whatever `p` is).
#[inline(always)]
pub(crate) fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch does not access memory architecturally: it cannot fault
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};

const PACKET_RX_RING: libc::c_int = 5;
const PACKET_COPY_THRESH: libc::c_int = 7;
const PACKET_VERSION: libc::c_int = 10;
const PACKET_TX_RING: libc::c_int = 13;
const PACKET_LOSS: libc::c_int = 14;
/// Not to receive frames sent on the interface by others (the host, other workers): our own are
/// never delivered to us.
pub const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const TPACKET_V2: libc::c_int = 1;

// tp_status of receive slots
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
const TP_STATUS_COPY: u32 = 1 << 1;
pub const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;
pub const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
pub const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
// tp_status of transmit slots
const TP_STATUS_AVAILABLE: u32 = 0;
const TP_STATUS_SEND_REQUEST: u32 = 1;

/// `struct tpacket2_hdr`: the head of every slot.
#[repr(C)]
struct Hdr {
    status: u32,
    len: u32,
    snaplen: u32,
    mac: u16,
    net: u16,
    sec: u32,
    nsec: u32,
    vlan_tci: u16,
    vlan_tpid: u16,
    _pad: [u8; 4],
}

/// `struct tpacket_req`.
#[repr(C)]
struct Req {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
}

/// TPACKET_ALIGN(sizeof(struct tpacket2_hdr)): where the `sockaddr_ll` of a receive slot starts,
/// and where the frame of a transmit slot starts (TPACKET2_HDRLEN - sizeof(struct sockaddr_ll)).
const HDR_LEN: usize = 32;
/// Offset of `sll_pkttype` in `struct sockaddr_ll`.
const SLL_PKTTYPE: usize = 10;
const BLOCK: usize = 1 << 16;
/// The receive ring's size unless [`RX_RING_ENV`] says otherwise: 8192 slots of 2 KiB, i.e. 8192
/// frames (80 ms at 100 kpps) that can wait while the worker is not running (the kernel drops what
/// finds the ring full, at any rate, when a busy machine keeps the worker's thread from a CPU for
/// longer than that).
const RX_BYTES: usize = 16 << 20;
/// Set to a number of MiB (1 to 1024) for the receive ring of every interface port and worker.
pub const RX_RING_ENV: &str = "P4SEC_RX_RING_MB";

/// The receive ring's size in bytes: [`RX_RING_ENV`] or the default; an error for a value that is
/// not a number of MiB from 1 to 1024.
pub fn rx_ring_bytes() -> Result<usize, String> {
    match std::env::var(RX_RING_ENV) {
        Err(_) => Ok(RX_BYTES),
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(mb @ 1..=1024) => Ok(mb << 20),
            _ => Err(format!(
                "{RX_RING_ENV}: expected a receive ring size in MiB from 1 to 1024, got `{v}`"
            )),
        },
    }
}
const TX_BYTES: usize = 1 << 20;
/// Receive slots are at most this large; larger frames come through the socket (TP_STATUS_COPY).
const RX_SLOT_MAX: usize = 1 << 14;

/// The VLAN tag the kernel took out of a received frame (it reports it beside the frame: in the
/// slot header, or in PACKET_AUXDATA for `recvmsg`), to be put back after the MAC addresses. The
/// kernel strips the outer tag on receive (VLAN offload, or `skb_vlan_untag` for any device), so
/// without this the pipeline would see tagged traffic untagged.
pub fn vlan_tag(status: u32, tci: u16, tpid: u16) -> Option<[u8; 4]> {
    if status & TP_STATUS_VLAN_VALID == 0 {
        return None;
    }
    let tpid = if status & TP_STATUS_VLAN_TPID_VALID != 0 && tpid != 0 {
        tpid
    } else {
        0x8100
    };
    let t = tpid.to_be_bytes();
    let c = tci.to_be_bytes();
    Some([t[0], t[1], c[0], c[1]])
}

/// The MTU and link type (ARPHRD_*) of interface `name`.
pub fn link_info(fd: i32, name: &str) -> Option<(usize, u16)> {
    #[repr(C)]
    struct IfReq {
        name: [libc::c_char; libc::IFNAMSIZ],
        data: [u8; 24],
    }
    let mut r = IfReq {
        name: [0; libc::IFNAMSIZ],
        data: [0; 24],
    };
    for (d, s) in r.name.iter_mut().zip(name.bytes().take(libc::IFNAMSIZ - 1)) {
        *d = s as libc::c_char;
    }
    if unsafe { libc::ioctl(fd, libc::SIOCGIFMTU as _, &mut r) } < 0 {
        return None;
    }
    let mtu = i32::from_ne_bytes([r.data[0], r.data[1], r.data[2], r.data[3]]);
    if unsafe { libc::ioctl(fd, libc::SIOCGIFHWADDR as _, &mut r) } < 0 {
        return None;
    }
    let family = u16::from_ne_bytes([r.data[0], r.data[1]]);
    Some((mtu.max(0) as usize, family))
}

/// Does `frame` fit an interface that takes Ethernet frames of up to `max` bytes (its MTU + 14), 4
/// more with an 802.1Q tag?
#[inline]
pub(crate) fn within_mtu(frame: &[u8], max: usize) -> bool {
    let tagged = frame.len() >= 14 && frame[12] == 0x81 && frame[13] == 0x00;
    frame.len() <= max + if tagged { 4 } else { 0 }
}

pub(crate) fn setopt<T>(
    fd: i32,
    level: libc::c_int,
    name: libc::c_int,
    v: &T,
) -> std::io::Result<()> {
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as u32,
        )
    };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// What the next receive slot holds.
pub enum Rx {
    /// A frame, in the ring (valid until [`Rings::release`] or the next [`Rings::next_rx`]); its
    /// checksum completed (unless it is a GSO super-frame) and its VLAN tag re-inserted; with
    /// PACKET_VNET_HDR, the virtio-net header the kernel put in front of it.
    Frame {
        ptr: *const u8,
        len: usize,
        ts: Ts,
        vnet: Option<crate::gso::VnetHdr>,
    },
    /// A frame larger than the slot: it waits whole on the socket (read it with `recvmsg`).
    FromQueue,
    /// A frame larger than the slot that the kernel could not also queue (receive buffer full):
    /// lost.
    Truncated(usize),
}

/// What a [`Rings::flush`] did with the frames queued since the last one.
pub struct Flushed {
    pub sent: usize,
    pub dropped: usize,
    pub error: Option<std::io::Error>,
}

/// The receive and transmit rings of one AF_PACKET socket, mapped into the switch.
pub struct Rings {
    map: *mut u8,
    map_len: usize,
    rx: *mut u8,
    rx_slot: usize,
    rx_slots: usize,
    rx_next: usize,
    rx_held: Option<usize>,
    tx: *mut u8,
    tx_slot: usize,
    tx_slots: usize,
    tx_next: Cell<usize>,
    tx_pending: Cell<usize>,
    /// Of the pending frames, those given a length of 0 to be discarded (at the front): not counted
    /// as sent.
    tx_void: Cell<usize>,
    /// The largest Ethernet frame (without a VLAN tag) the interface takes: MTU + 14.
    tx_max: Cell<usize>,
    /// PACKET_VNET_HDR is on: a virtio-net header precedes every frame (received and sent).
    vnet: usize,
}

// The mapping belongs to one worker's port; it is moved to the worker's thread once and used there
// only.
unsafe impl Send for Rings {}

impl Drop for Rings {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.map as *mut libc::c_void, self.map_len) };
    }
}

fn slot_status(p: *mut u8) -> &'static AtomicU32 {
    unsafe { &*(p as *const AtomicU32) }
}

impl Rings {
    /// Set up both rings on `fd` (an AF_PACKET socket not bound to a protocol yet, so that nothing
    /// is queued on it before the ring exists) for an Ethernet interface of this MTU. An error
    /// means the kernel refused (then the socket is left as it was, for plain `recvmsg`/`send`).
    pub fn setup(fd: i32, mtu: usize, vnet: bool) -> Result<Rings, String> {
        let vnet = if vnet { crate::gso::VNET_HDR_LEN } else { 0 };
        setopt(fd, libc::SOL_PACKET, PACKET_VERSION, &TPACKET_V2)
            .map_err(|e| format!("TPACKET_V2: {e}"))?;
        // receive slots: header, sockaddr_ll, padding to 16 + the frame; larger frames are queued
        // whole
        let rx_slot = (HDR_LEN + 20 + 16 + vnet + 14 + mtu)
            .next_power_of_two()
            .clamp(2048, RX_SLOT_MAX);
        let rx_block = rx_slot.max(BLOCK);
        let rx_blocks = (rx_ring_bytes().unwrap_or(RX_BYTES) / rx_block).max(1);
        let tx_slot = (HDR_LEN + vnet + 14 + 4 + mtu)
            .next_power_of_two()
            .max(2048);
        let tx_block = tx_slot.max(BLOCK);
        let tx_blocks = (TX_BYTES / tx_block).max(1);
        let rx_req = Req {
            block_size: rx_block as u32,
            block_nr: rx_blocks as u32,
            frame_size: rx_slot as u32,
            frame_nr: (rx_blocks * (rx_block / rx_slot)) as u32,
        };
        let tx_req = Req {
            block_size: tx_block as u32,
            block_nr: tx_blocks as u32,
            frame_size: tx_slot as u32,
            frame_nr: (tx_blocks * (tx_block / tx_slot)) as u32,
        };
        // a frame that does not fit a slot is also queued on the socket (TP_STATUS_COPY)
        let one: libc::c_int = 1;
        setopt(fd, libc::SOL_PACKET, PACKET_COPY_THRESH, &one)
            .map_err(|e| format!("PACKET_COPY_THRESH: {e}"))?;
        // a frame the kernel cannot send is skipped instead of stopping the ring
        setopt(fd, libc::SOL_PACKET, PACKET_LOSS, &one).map_err(|e| format!("PACKET_LOSS: {e}"))?;
        setopt(fd, libc::SOL_PACKET, PACKET_RX_RING, &rx_req)
            .map_err(|e| format!("PACKET_RX_RING: {e}"))?;
        if let Err(e) = setopt(fd, libc::SOL_PACKET, PACKET_TX_RING, &tx_req) {
            Rings::undo(fd);
            return Err(format!("PACKET_TX_RING: {e}"));
        }
        let rx_len = rx_block * rx_blocks;
        let map_len = rx_len + tx_block * tx_blocks;
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            Rings::undo(fd);
            return Err(format!("mmap: {e}"));
        }
        // transmitted frames are charged to the send buffer until the kernel is done with them:
        // room for the ring
        let want = (map_len - rx_len) as libc::c_int;
        if setopt(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &want).is_err() {
            let _ = setopt(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, &want);
        }
        let map = map as *mut u8;
        Ok(Rings {
            map,
            map_len,
            rx: map,
            rx_slot,
            rx_slots: rx_req.frame_nr as usize,
            rx_next: 0,
            rx_held: None,
            tx: unsafe { map.add(rx_len) },
            tx_slot,
            tx_slots: tx_req.frame_nr as usize,
            tx_next: Cell::new(0),
            tx_pending: Cell::new(0),
            tx_void: Cell::new(0),
            tx_max: Cell::new(mtu + 14),
            vnet,
        })
    }

    /// Take the rings off the socket again (after a partial setup).
    fn undo(fd: i32) {
        let zero = Req {
            block_size: 0,
            block_nr: 0,
            frame_size: 0,
            frame_nr: 0,
        };
        let _ = setopt(fd, libc::SOL_PACKET, PACKET_RX_RING, &zero);
        let _ = setopt(fd, libc::SOL_PACKET, PACKET_TX_RING, &zero);
    }

    /// Slots of each ring (for messages).
    pub fn slots(&self) -> (usize, usize) {
        (self.rx_slots, self.tx_slots)
    }

    /// The interface's MTU changed: frames up to MTU + 14 bytes (+ 4 with an 802.1Q tag) are sent.
    pub fn set_mtu(&self, mtu: usize) {
        self.tx_max.set(mtu + 14);
    }

    /// Ask for the start of the slot after `i` (its header and a short frame) to be brought into
    /// the cache while slot `i`'s frame goes through the pipeline: a frame the kernel wrote on
    /// another CPU is a cache miss on its first read otherwise.
    #[inline]
    fn prefetch_after(&self, i: usize) {
        let next = if i + 1 == self.rx_slots { 0 } else { i + 1 };
        let at = self.rx_at(next);
        prefetch(at);
        prefetch(at.wrapping_add(64));
        prefetch(at.wrapping_add(128));
    }

    fn rx_at(&self, i: usize) -> *mut u8 {
        unsafe { self.rx.add(i * self.rx_slot) }
    }

    fn tx_at(&self, i: usize) -> *mut u8 {
        unsafe { self.tx.add(i * self.tx_slot) }
    }

    /// Is a received frame waiting in the ring?
    pub fn rx_ready(&self) -> bool {
        slot_status(self.rx_at(self.rx_next)).load(Ordering::Acquire) & TP_STATUS_USER != 0
    }

    /// Give the slot of the frame last returned back to the kernel.
    pub fn release(&mut self) {
        if let Some(i) = self.rx_held.take() {
            slot_status(self.rx_at(i)).store(TP_STATUS_KERNEL, Ordering::Release);
        }
    }

    /// The next received frame (not our own transmissions), releasing the one before; `None` when
    /// the ring holds nothing.
    pub fn next_rx(&mut self) -> Option<Rx> {
        self.release();
        loop {
            let i = self.rx_next;
            let slot = self.rx_at(i);
            let status = slot_status(slot).load(Ordering::Acquire);
            if status & TP_STATUS_USER == 0 {
                return None;
            }
            self.rx_next = if i + 1 == self.rx_slots { 0 } else { i + 1 };
            self.rx_held = Some(i);
            self.prefetch_after(i);
            let h = unsafe { &*(slot as *const Hdr) };
            let pkttype = unsafe { *slot.add(HDR_LEN + SLL_PKTTYPE) };
            if pkttype == libc::PACKET_OUTGOING {
                self.release();
                continue;
            }
            if status & TP_STATUS_COPY != 0 {
                self.release();
                return Some(Rx::FromQueue);
            }
            let (len, mac) = (h.snaplen as usize, h.mac as usize);
            if len < h.len as usize || mac + len > self.rx_slot {
                let n = h.len as usize;
                self.release();
                return Some(Rx::Truncated(n));
            }
            let ts = Ts {
                sec: h.sec,
                usec: h.nsec / 1000,
            };
            // the virtio-net header, right before the frame
            let vnet = (self.vnet > 0 && mac >= HDR_LEN + self.vnet)
                .then(|| {
                    crate::gso::VnetHdr::parse(unsafe {
                        std::slice::from_raw_parts(slot.add(mac - self.vnet), self.vnet)
                    })
                })
                .flatten();
            let frame = unsafe { std::slice::from_raw_parts_mut(slot.add(mac), len) };
            if status & TP_STATUS_CSUMNOTREADY != 0 && !vnet.is_some_and(|h| h.is_gso()) {
                crate::gso::complete_l4_checksum(frame);
            }
            match vlan_tag(status, h.vlan_tci, h.vlan_tpid) {
                // the slot has room before the frame (its sockaddr_ll and virtio-net header have
                // been read): move the addresses back
                Some(tag) if len >= 12 && mac >= HDR_LEN + 4 => unsafe {
                    let start = slot.add(mac - 4);
                    std::ptr::copy(slot.add(mac), start, 12);
                    std::ptr::copy_nonoverlapping(tag.as_ptr(), start.add(12), 4);
                    return Some(Rx::Frame {
                        ptr: start,
                        len: len + 4,
                        ts,
                        vnet,
                    });
                },
                _ => {
                    return Some(Rx::Frame {
                        ptr: frame.as_ptr(),
                        len,
                        ts,
                        vnet,
                    })
                }
            }
        }
    }

    /// Frames queued and not yet flushed.
    pub fn pending(&self) -> usize {
        self.tx_pending.get()
    }

    /// Can this frame be sent (not larger than the interface takes)?
    pub fn fits(&self, frame: &[u8]) -> bool {
        within_mtu(frame, self.tx_max.get()) && frame.len() + HDR_LEN + self.vnet <= self.tx_slot
    }

    /// Copy a frame into the next transmit slot; false if that slot is still in the kernel's hands
    /// (flush, then try again). Check [`Rings::fits`] first.
    /// Are at least `n` frames handed to the kernel still in its hands (queued in its qdisc, not yet
    /// on the wire), or waiting to be handed over? The slot `n` behind the next one is not free
    /// again. One load from the ring: no system call.
    #[inline]
    pub fn tx_in_flight(&self, n: usize) -> bool {
        let slots = self.tx_slots;
        if n == 0 || n >= slots {
            return false;
        }
        let i = (self.tx_next.get() + slots - n) % slots;
        slot_status(self.tx_at(i)).load(Ordering::Acquire) != TP_STATUS_AVAILABLE
    }

    pub fn queue(&self, frame: &[u8]) -> bool {
        let i = self.tx_next.get();
        let slot = self.tx_at(i);
        let st = slot_status(slot);
        if st.load(Ordering::Acquire) != TP_STATUS_AVAILABLE {
            return false;
        }
        unsafe {
            // with PACKET_VNET_HDR, a virtio-net header first: nothing for the kernel to do, and
            // the whole frame as the header length (`hdr_len`), which the kernel copies into the
            // socket buffer's own data. Without it only the Ethernet header is copied and the rest
            // is attached as pages of the ring, which a veth (or any device that hands the frame on
            // to another socket) must copy into freshly allocated pages again before it may release
            // the slot.
            std::ptr::write_bytes(slot.add(HDR_LEN), 0, self.vnet);
            if self.vnet >= 4 {
                let hdr_len = (frame.len() as u16).to_le_bytes();
                std::ptr::copy_nonoverlapping(hdr_len.as_ptr(), slot.add(HDR_LEN + 2), 2);
            }
            std::ptr::copy_nonoverlapping(
                frame.as_ptr(),
                slot.add(HDR_LEN + self.vnet),
                frame.len(),
            );
            (*(slot as *mut Hdr)).len = (self.vnet + frame.len()) as u32;
        }
        st.store(TP_STATUS_SEND_REQUEST, Ordering::Release);
        self.tx_next
            .set(if i + 1 == self.tx_slots { 0 } else { i + 1 });
        self.tx_pending.set(self.tx_pending.get() + 1);
        true
    }

    /// Hand the queued frames to the kernel (one `send`). When it stops at a frame: out of buffer
    /// space (EAGAIN) leaves the rest queued for the next flush; a frame the interface refused
    /// (ENOBUFS: a queue or filter dropped it) is dropped and the others go on; any other error
    /// (the interface down or gone) drops them all. The kernel takes the slots in order and stops
    /// at the first that is not a request, so a dropped frame must not leave a hole: it is either
    /// taken back (with all behind it) or given a length of 0, which the kernel discards
    /// (PACKET_LOSS) on its way to the next.
    pub fn flush(&self, fd: i32) -> Flushed {
        let mut f = Flushed {
            sent: 0,
            dropped: 0,
            error: None,
        };
        let n = self.tx_slots;
        loop {
            let pending = self.tx_pending.get();
            if pending == 0 {
                return f;
            }
            let r = unsafe { libc::send(fd, std::ptr::null(), 0, libc::MSG_DONTWAIT) };
            if r >= 0 {
                f.sent += pending - self.tx_void.replace(0);
                self.tx_pending.set(0);
                return f;
            }
            let e = std::io::Error::last_os_error();
            // the kernel stopped at the first slot still marked SEND_REQUEST: everything before it
            // went out
            let first = (self.tx_next.get() + n - pending) % n;
            let mut k = 0;
            while k < pending
                && slot_status(self.tx_at((first + k) % n)).load(Ordering::Acquire)
                    != TP_STATUS_SEND_REQUEST
            {
                k += 1;
            }
            let void = k.min(self.tx_void.get());
            self.tx_void.set(self.tx_void.get() - void);
            f.sent += k - void;
            self.tx_pending.set(pending - k);
            let head = (first + k) % n;
            match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => {
                    f.error = Some(e);
                    return f;
                }
                Some(libc::ENOBUFS) if k < pending && self.tx_void.get() == 0 => {
                    unsafe { (*(self.tx_at(head) as *mut Hdr)).len = 0 };
                    self.tx_void.set(1);
                    f.dropped += 1;
                    f.error = Some(e);
                }
                _ => {
                    for j in k..pending {
                        slot_status(self.tx_at((first + j) % n))
                            .store(TP_STATUS_AVAILABLE, Ordering::Release);
                    }
                    self.tx_next.set(head);
                    self.tx_pending.set(0);
                    f.dropped += pending - k - self.tx_void.replace(0);
                    f.error = Some(e);
                    return f;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vlan_tags_from_the_kernel() {
        assert_eq!(vlan_tag(0, 5, 0x8100), None);
        assert_eq!(
            vlan_tag(TP_STATUS_VLAN_VALID, 0x6007, 0),
            Some([0x81, 0x00, 0x60, 0x07])
        );
        let both = TP_STATUS_VLAN_VALID | TP_STATUS_VLAN_TPID_VALID;
        assert_eq!(vlan_tag(both, 7, 0x88a8), Some([0x88, 0xa8, 0, 7]));
        assert_eq!(vlan_tag(both, 7, 0), Some([0x81, 0x00, 0, 7]));
    }
}
