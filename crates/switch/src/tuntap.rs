//! TUN and TAP devices made through /dev/net/tun (`--port N=tap:NAME`, `--port N=tun:NAME`). The
//! devices are not persistent: the kernel removes them when the switch closes its descriptors (at
//! exit, however it ends). With several workers the device is multi-queue and each worker has its
//! own queue.
//!
//! TUN framing: a TUN device carries IP packets, which enter the pipeline with a synthetic Ethernet
//! header ([`ip_to_ethernet`]) and leave it without one ([`ethernet_to_ip`]).
//!
//! Batches: the packet loop reads a queue until it is empty, at most a batch per wake-up (one
//! `poll` per batch); what a batch sends to a queue is held in its
//! [`crate::port::txbatch::TxBatch`] and written when the batch ends (or the batch buffer is full),
//! one `write` per frame (a TUN/TAP queue takes one packet per `write`). The devices' transmit
//! queues (the frames the kernel hands to the switch) are made [`TX_QUEUE_LEN`] packets long
//! ([`set_tx_queue_len`]) so that a burst waits there instead of being dropped while the worker is
//! busy.
//!
//! Offloads: the queues are opened with a virtio-net header in front of every packet
//! (`IFF_VNET_HDR`) and the switch tells the kernel it takes checksums left to offload and TCP
//! super-frames (`TUNSETOFFLOAD`: TUN_F_CSUM, TSO4, TSO6, TSO_ECN). The device then offers TSO and
//! checksum offload to the host's stack, which hands a TCP stream over in frames of up to 64 KiB
//! instead of one per MSS-sized segment; the port cuts them into the segments the wire would carry
//! ([`crate::gso`]) before the pipeline sees them. `P4SEC_NO_OFFLOADS=1` in the switch's
//! environment opens the queues without the header (every packet its own frame, checksums computed
//! by the host).

const SIOCGIFFLAGS: u64 = 0x8913;
const SIOCSIFFLAGS: u64 = 0x8914;
const SIOCGIFTXQLEN: u64 = 0x8942;
const SIOCSIFTXQLEN: u64 = 0x8943;
/// `IFF_VNET_HDR` (linux/if_tun.h): a `virtio_net_hdr` in front of every packet.
const IFF_VNET_HDR: libc::c_int = 0x4000;
/// `TUNSETOFFLOAD` = `_IOW('T', 208, unsigned int)`.
const TUNSETOFFLOAD: u64 = 0x4004_54d0;
/// `TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN`: what the switch takes from the host.
const OFFLOADS: libc::c_uint = 0x01 | 0x02 | 0x04 | 0x08;

/// Set (to anything but `0`) to open TUN/TAP queues without the virtio-net header and offloads.
pub const NO_OFFLOADS_ENV: &str = "P4SEC_NO_OFFLOADS";

/// Are TUN/TAP queues opened with the virtio-net header and offloads ([`NO_OFFLOADS_ENV`] not set)?
pub fn offloads_wanted() -> bool {
    !matches!(std::env::var(NO_OFFLOADS_ENV), Ok(v) if !v.is_empty() && v != "0")
}

/// The transmit queue length given to the TUN/TAP devices the switch opens (the kernel's default
/// for them is 500 packets, per queue): the frames that wait for a busy worker.
pub const TX_QUEUE_LEN: u32 = 4096;

#[repr(C)]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

fn ifreq(name: &str) -> IfReq {
    let mut r = IfReq {
        name: [0; libc::IFNAMSIZ],
        flags: 0,
        _pad: [0; 22],
    };
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

/// Does an interface of this name exist (in the switch's network namespace)? Without a heap
/// allocation: the packet loop asks this of its ports once a second.
pub fn exists(name: &str) -> bool {
    // a name that is too long or has a NUL byte names no interface
    if name.len() >= libc::IFNAMSIZ || name.bytes().any(|b| b == 0) {
        return false;
    }
    let r = ifreq(name);
    unsafe { libc::if_nametoindex(r.name.as_ptr()) != 0 }
}

/// Open one queue of the TUN (`tap == false`) or TAP device `name`, creating the device if it does
/// not exist; a non-blocking descriptor. With `vnet`, every packet read or written has a virtio-net
/// header in front, and the kernel is told the switch takes checksum and TCP segmentation offloads
/// (see the module's doc); the second value says whether it took them (without them the header is
/// there, always empty on receive).
pub fn open_queue(
    name: &str,
    tap: bool,
    multi_queue: bool,
    vnet: bool,
) -> Result<(i32, bool), String> {
    let k = kind(tap);
    let path = b"/dev/net/tun\0";
    let fd = unsafe {
        libc::open(
            path.as_ptr() as *const libc::c_char,
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        let hint = match e.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) => {
                " (creating TUN/TAP devices needs root or CAP_NET_ADMIN)"
            }
            Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::ENXIO) => {
                " (no TUN/TAP support in this kernel: modprobe tun)"
            }
            _ => "",
        };
        return Err(format!(
            "cannot create {k} device `{name}`: cannot open /dev/net/tun: {e}{hint}"
        ));
    }
    let mut r = ifreq(name);
    let mut flags = if tap { libc::IFF_TAP } else { libc::IFF_TUN } | libc::IFF_NO_PI;
    if multi_queue {
        flags |= libc::IFF_MULTI_QUEUE;
    }
    if vnet {
        flags |= IFF_VNET_HDR;
    }
    r.flags = flags as libc::c_short;
    let existed = exists(name);
    if unsafe { libc::ioctl(fd, libc::TUNSETIFF as _, &mut r as *mut IfReq) } < 0 {
        let e = std::io::Error::last_os_error();
        unsafe { libc::close(fd) };
        return Err(match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => {
                format!("cannot create {k} device `{name}`: {e} (needs root or CAP_NET_ADMIN)")
            }
            Some(libc::EINVAL) | Some(libc::EBUSY) if existed => {
                format!("cannot create {k} device `{name}`: an interface of that name already exists and is not a free {k} device")
            }
            _ => format!("cannot create {k} device `{name}`: {e}"),
        });
    }
    let offloads =
        vnet && unsafe { libc::ioctl(fd, TUNSETOFFLOAD as _, OFFLOADS as libc::c_ulong) } == 0;
    Ok((fd, offloads))
}

/// Bring the interface up.
pub fn set_up(name: &str) -> Result<(), String> {
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return Err(format!(
            "cannot bring `{name}` up: {}",
            std::io::Error::last_os_error()
        ));
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

/// Make the transmit queue of interface `name` at least `len` packets long (a longer one is left as
/// it is); the length it has now.
pub fn set_tx_queue_len(name: &str, len: u32) -> Result<u32, String> {
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return Err(format!(
            "cannot set the transmit queue length of `{name}`: {}",
            std::io::Error::last_os_error()
        ));
    }
    let mut r = IfReqInt {
        name: ifreq(name).name,
        value: 0,
        _pad: [0; 20],
    };
    let mut res = unsafe { libc::ioctl(s, SIOCGIFTXQLEN as _, &mut r as *mut IfReqInt) };
    if res >= 0 && (r.value as u32) < len {
        r.value = len as libc::c_int;
        res = unsafe { libc::ioctl(s, SIOCSIFTXQLEN as _, &mut r as *mut IfReqInt) };
    }
    let e = std::io::Error::last_os_error();
    unsafe { libc::close(s) };
    if res < 0 {
        return Err(format!(
            "cannot set the transmit queue length of `{name}` to {len}: {e}"
        ));
    }
    Ok(r.value as u32)
}

/// Is the interface up and running (administratively up, with carrier: a veth whose peer is down is
/// not)? `None` when there is no interface of that name.
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

/// The interface's MTU; `None` when there is no interface of that name. (No heap allocation: the
/// packet loop asks this once a second.)
pub fn mtu(name: &str) -> Option<usize> {
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return None;
    }
    let mut r = IfReqInt {
        name: ifreq(name).name,
        value: 0,
        _pad: [0; 20],
    };
    let res = unsafe { libc::ioctl(s, libc::SIOCGIFMTU as _, &mut r as *mut IfReqInt) };
    unsafe { libc::close(s) };
    (res >= 0).then_some(r.value.max(0) as usize)
}

/// Is the queue still attached to its device (false once the device was deleted)?
pub fn attached(fd: i32) -> bool {
    let mut r = ifreq("");
    unsafe { libc::ioctl(fd, libc::TUNGETIFF as _, &mut r as *mut IfReq) >= 0 }
}

/// The destination MAC address of frames made from packets of a TUN port (or a raw-IP pcap input):
/// 02:70:34:73:65:63 ("p4sec" in a locally administered address).
pub const TUN_SWITCH_MAC: [u8; 6] = [0x02, 0x70, 0x34, 0x73, 0x65, 0x63];

/// The source MAC address of frames made from packets of TUN port `port`: 02:74:75:6e:HH:LL ("tun"
/// and the port number's low 16 bits).
pub fn tun_host_mac(port: u32) -> [u8; 6] {
    [0x02, 0x74, 0x75, 0x6e, (port >> 8) as u8, port as u8]
}

/// `buf[14..]` holds an IP packet: write an Ethernet header in front of it (destination
/// [`TUN_SWITCH_MAC`], source [`tun_host_mac`], EtherType from the IP version). False if it is
/// neither IPv4 nor IPv6.
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

/// The IP packet inside an Ethernet frame (after any VLAN tags), for a TUN port; `None` if it is
/// not IP.
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

    #[test]
    fn exists_knows_loopback_and_refuses_impossible_names() {
        assert!(exists("lo"));
        assert!(!exists("p4sec-no-such"));
        assert!(!exists("lo\0x"));
        assert!(!exists(&"l".repeat(libc::IFNAMSIZ)));
        assert!(!exists(""));
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
