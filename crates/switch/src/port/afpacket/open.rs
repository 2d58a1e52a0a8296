//! Opening an AF_PACKET port ([`AfPacket::open`], [`AfPacket::open_fanout`]): the packet socket
//! bound to the interface, its options (auxiliary data, receive buffer, virtio-net headers), the
//! memory-mapped rings where the kernel gives them, and the second socket of GRO on transmit
//! ([`AfPacket::enable_gro`]); and what the port got.

use super::{mmap_wanted, AfPacket, GroTx, PACKET_AUXDATA, RCVBUF_BYTES};
use crate::log::Level;
use crate::{gro, gso, ring};

impl AfPacket {
    /// Open `iface` (e.g. a veth) for port `number`: an AF_PACKET socket with memory-mapped receive
    /// and transmit rings ([`ring`]) on Ethernet interfaces, unless the kernel refuses them or
    /// `P4SEC_NO_MMAP` is set ([`AfPacket::mmap`] tells which it got).
    pub fn open(number: u32, iface: &str) -> Result<AfPacket, String> {
        let name =
            std::ffi::CString::new(iface).map_err(|_| format!("bad interface name `{iface}`"))?;
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if index == 0 {
            return Err(format!("port {number}: no interface named `{iface}`"));
        }
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // no protocol until bound: nothing is queued on the socket before its ring is in place
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            let hint = if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) {
                " (needs root or CAP_NET_RAW)"
            } else {
                ""
            };
            return Err(format!(
                "port {number}: cannot open a packet socket on `{iface}`: {e}{hint}"
            ));
        }
        let one: libc::c_int = 1;
        let setopt = |name: libc::c_int| unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_PACKET,
                name,
                &one as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as u32,
            )
        };
        setopt(PACKET_AUXDATA);
        // frames others send on the interface are not ours to forward (checked per frame too, for
        // old kernels)
        setopt(ring::PACKET_IGNORE_OUTGOING);
        // virtio-net headers (before the rings, which the kernel sizes with them): peers with
        // offloads on hand over GSO super-frames and partial checksums, which are completed and
        // segmented here
        let vnet = setopt(gso::PACKET_VNET_HDR) == 0;
        let mut ring = None;
        if mmap_wanted() {
            match ring::link_info(fd, iface) {
                Some((mtu, libc::ARPHRD_ETHER)) => match ring::Rings::setup(fd, mtu, vnet) {
                    Ok(r) => ring = Some(r),
                    Err(e) => p4log!(Level::Info, "port {number}: no memory-mapped rings on `{iface}` ({e}); frames are received and sent one by one"),
                },
                Some(_) => p4log!(Level::Debug, "port {number}: `{iface}` is not an Ethernet interface: no memory-mapped rings"),
                None => {}
            }
        }
        // What the socket queues itself is bounded by its receive buffer: every frame without a
        // ring, and with one the frames too large for a slot (a TSO/GSO super-frame from a host
        // with offloads on comes whole through the queue). At the default (~200 KB) a burst of
        // three 64 KB super-frames fills it and the next ones arrive cut to the slot, i.e. lost:
        // TCP through the switch retransmitted ~5 % of its segments.
        let rcv = RCVBUF_BYTES as libc::c_int;
        if ring::setopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &rcv).is_err() {
            let _ = ring::setopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &rcv);
        }
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = index as i32;
        let r = unsafe {
            libc::bind(
                fd,
                &sll as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            drop(ring);
            unsafe { libc::close(fd) };
            return Err(format!("port {number}: cannot bind to `{iface}`: {e}"));
        }
        Ok(AfPacket {
            fd,
            ring,
            vnet,
            segs: gso::Segments::default(),
            gro: None,
        })
    }
    /// Does this port move frames through memory-mapped rings?
    pub fn mmap(&self) -> bool {
        self.ring.is_some()
    }

    /// Are TCP segments joined on transmit ([`AfPacket::enable_gro`])?
    pub fn gro(&self) -> bool {
        self.gro.is_some()
    }

    /// Are UDP datagrams joined too ([`gro::UDP_GRO_ENV`])?
    pub fn udp_gro(&self) -> bool {
        self.gro.as_ref().is_some_and(|g| g.c.borrow().udp)
    }

    /// The receive and transmit ring slots, with rings.
    pub fn slots(&self) -> Option<(usize, usize)> {
        self.ring.as_ref().map(|r| r.slots())
    }

    /// Join consecutive TCP segments sent to this port in one batch into GSO super-frames
    /// ([`gro`]). Only with rings and PACKET_VNET_HDR; an error says why not (the port works as
    /// before).
    pub fn enable_gro(&mut self, iface: &str) -> Result<(), String> {
        if !self.vnet || !self.mmap() {
            return Err("needs memory-mapped rings and PACKET_VNET_HDR".into());
        }
        let name = std::ffi::CString::new(iface).map_err(|_| "bad interface name".to_string())?;
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if index == 0 {
            return Err(format!("no interface named `{iface}`"));
        }
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        if fd < 0 {
            return Err(format!(
                "packet socket: {}",
                std::io::Error::last_os_error()
            ));
        }
        let g = GroTx {
            fd,
            c: std::cell::RefCell::new(gro::Coalescer::new(gro::udp_wanted())),
        };
        let one: libc::c_int = 1;
        let size: libc::c_int = 4 << 20;
        let set = |level: libc::c_int, name: libc::c_int, v: &libc::c_int| unsafe {
            libc::setsockopt(
                fd,
                level,
                name,
                v as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as u32,
            )
        };
        if set(libc::SOL_PACKET, gso::PACKET_VNET_HDR, &one) < 0 {
            return Err(format!(
                "PACKET_VNET_HDR: {}",
                std::io::Error::last_os_error()
            ));
        }
        if set(libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &size) < 0 {
            set(libc::SOL_SOCKET, libc::SO_SNDBUF, &size);
        }
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = 0;
        sll.sll_ifindex = index as i32;
        if unsafe {
            libc::bind(
                fd,
                &sll as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        } < 0
        {
            return Err(format!("bind: {}", std::io::Error::last_os_error()));
        }
        self.gro = Some(g);
        Ok(())
    }

    /// Open `iface` as one of several sockets of a PACKET_FANOUT group: the kernel spreads received
    /// frames over the group's sockets by flow hash, so each worker gets whole flows (packet order
    /// within a flow is kept).
    pub fn open_fanout(number: u32, iface: &str, group: u16) -> Result<AfPacket, String> {
        let p = AfPacket::open(number, iface)?;
        let arg: libc::c_int =
            (group as libc::c_int) | ((libc::PACKET_FANOUT_HASH as libc::c_int) << 16);
        let r = unsafe {
            libc::setsockopt(
                p.fd,
                libc::SOL_PACKET,
                libc::PACKET_FANOUT,
                &arg as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as u32,
            )
        };
        if r < 0 {
            return Err(format!(
                "port {number}: cannot join fanout group {group} on `{iface}`: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(p)
    }
}
