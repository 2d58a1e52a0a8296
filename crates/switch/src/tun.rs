//! TUN and TAP devices made through /dev/net/tun (`--port N=tap:NAME`, `--port N=tun:NAME`). The devices
//! are not persistent: the kernel removes them when the switch closes its descriptors (at exit, however it
//! ends). With several workers the device is multi-queue and each worker has its own queue.

use std::ffi::CString;

const SIOCGIFFLAGS: u64 = 0x8913;
const SIOCSIFFLAGS: u64 = 0x8914;

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
