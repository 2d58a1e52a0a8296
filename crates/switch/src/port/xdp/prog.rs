//! The switch's own XDP program for AF_XDP ports: an XSK map and a five-instruction program that
//! redirects each frame to the socket of its receive queue, or passes it to the kernel's stack
//! where that queue has none (as libxdp's default program does), loaded through the system's libbpf
//! (Debian `libbpf1`, a dependency of `libxdp1`; opened with `dlopen` as libxdp is).
//!
//! It is attached through a BPF link, which the kernel removes when its last descriptor closes:
//! when the port closes, and also when the switch dies (SIGKILL, a crash), so no program of a dead
//! switch is left on an interface (libxdp attaches its program without a link: it stays after a
//! killed switch until someone removes it). One program serves every worker's queue of an
//! interface; the last port to close detaches it.
//!
//! Multi-buffer ports (frames larger than one UMEM buffer: jumbo frames) get it loaded as
//! frags-aware (`BPF_F_XDP_HAS_FRAGS`): only such a program hands multi-buffer frames to an XDP
//! socket, and a veth refuses a program that is not when its MTU exceeds a page (libxdp 1.3's
//! default program is not one). Single-buffer ports get it without the flag, so that the driver
//! keeps refusing an MTU whose frames would not fit a buffer.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// `BPF_MAP_TYPE_XSKMAP` of linux/bpf.h.
const BPF_MAP_TYPE_XSKMAP: c_int = 17;
/// `BPF_PROG_TYPE_XDP`.
const BPF_PROG_TYPE_XDP: c_int = 6;
/// `BPF_XDP` (attach type of an XDP link).
const BPF_XDP: c_int = 37;
/// `BPF_F_XDP_HAS_FRAGS`: the program accepts frames in several buffers.
const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;
/// `XDP_FLAGS_DRV_MODE`: in the driver (native XDP).
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// `bpf_redirect_map` (helper number 51).
const HELPER_REDIRECT_MAP: i32 = 51;
/// `XDP_PASS`: what `bpf_redirect_map` returns when the queue has no socket in the map.
const XDP_PASS: i32 = 2;

/// `struct bpf_insn`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    code: u8,
    /// dst_reg in the low nibble, src_reg in the high one.
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | (dst & 0xf),
        off,
        imm,
    }
}

/// The program: `return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);` with the map
/// `map_fd`.
pub fn program(map_fd: i32) -> [Insn; 6] {
    [
        // r2 = *(u32 *)(r1 + 16): struct xdp_md's rx_queue_index
        insn(0x61, 2, 1, 16, 0),
        // r1 = the map (a 64-bit immediate in two instructions; src 1 = BPF_PSEUDO_MAP_FD)
        insn(0x18, 1, 1, 0, map_fd),
        insn(0, 0, 0, 0, 0),
        // r3 = XDP_PASS
        insn(0xb7, 3, 0, 0, XDP_PASS),
        // call bpf_redirect_map
        insn(0x85, 0, 0, 0, HELPER_REDIRECT_MAP),
        // return r0
        insn(0x95, 0, 0, 0, 0),
    ]
}

/// `struct bpf_prog_load_opts` of libbpf 1.x (its size first: later versions take shorter ones).
#[repr(C)]
struct ProgLoadOpts {
    sz: usize,
    attempts: c_int,
    expected_attach_type: c_int,
    prog_btf_fd: u32,
    prog_flags: u32,
    prog_ifindex: u32,
    kern_version: u32,
    attach_btf_id: u32,
    attach_prog_fd: u32,
    attach_btf_obj_fd: u32,
    _pad: u32,
    fd_array: *const c_int,
    func_info: *const c_void,
    func_info_cnt: u32,
    func_info_rec_size: u32,
    line_info: *const c_void,
    line_info_cnt: u32,
    line_info_rec_size: u32,
    log_level: u32,
    log_size: u32,
    log_buf: *mut c_char,
}

/// `struct bpf_link_create_opts` of libbpf 1.x, as far as an XDP link uses it (the size and the
/// flags; the rest is a union of other link kinds' fields, left zero).
#[repr(C)]
struct LinkCreateOpts {
    sz: usize,
    flags: u32,
    /// (explicit: libbpf refuses options whose bytes after `flags` are not all zero, padding
    /// included)
    _pad: u32,
    rest: [u64; 6],
}

type MapCreate = unsafe extern "C" fn(c_int, *const c_char, u32, u32, u32, *const c_void) -> c_int;
type ProgLoad = unsafe extern "C" fn(
    c_int,
    *const c_char,
    *const c_char,
    *const Insn,
    usize,
    *mut ProgLoadOpts,
) -> c_int;
type LinkCreate = unsafe extern "C" fn(c_int, c_int, c_int, *const LinkCreateOpts) -> c_int;
type MapUpdate = unsafe extern "C" fn(c_int, *const c_void, *const c_void, u64) -> c_int;

/// The few functions of libbpf used here.
struct Bpf {
    map_create: MapCreate,
    prog_load: ProgLoad,
    link_create: LinkCreate,
    map_update: MapUpdate,
}

fn bpf() -> Result<&'static Bpf, String> {
    static LIB: OnceLock<Result<Bpf, String>> = OnceLock::new();
    LIB.get_or_init(|| {
        let dl = crate::dl::Dl::open(
            &[c"libbpf.so.1", c"libbpf.so"],
            "libbpf is not installed (Debian: apt-get install libbpf1)",
        )?;
        let sym = |name: &std::ffi::CStr| dl.sym(name, "libbpf (0.8 or later)");
        // SAFETY: the signatures of libbpf's bpf.h (1.x)
        unsafe {
            Ok(Bpf {
                map_create: std::mem::transmute::<*mut c_void, MapCreate>(sym(c"bpf_map_create")?),
                prog_load: std::mem::transmute::<*mut c_void, ProgLoad>(sym(c"bpf_prog_load")?),
                link_create: std::mem::transmute::<*mut c_void, LinkCreate>(sym(
                    c"bpf_link_create",
                )?),
                map_update: std::mem::transmute::<*mut c_void, MapUpdate>(sym(
                    c"bpf_map_update_elem",
                )?),
            })
        }
    })
    .as_ref()
    .map_err(|e| e.clone())
}

/// libbpf returns `-errno` (and sets errno).
fn os_err(r: c_int) -> std::io::Error {
    std::io::Error::from_raw_os_error(if r < 0 { -r } else { libc::EIO })
}

/// The program, its XSK map and its link on one interface; detached when the last port holding it
/// drops it.
pub struct XskProg {
    ifindex: u32,
    map_fd: c_int,
    prog_fd: c_int,
    link_fd: c_int,
}

impl Drop for XskProg {
    fn drop(&mut self) {
        for fd in [self.link_fd, self.prog_fd, self.map_fd] {
            if fd >= 0 {
                unsafe { libc::close(fd) };
            }
        }
    }
}

/// Receive queues the map has room for: the interface's (from sysfs), at least 64.
fn queues(iface: &str) -> u32 {
    let n = std::fs::read_dir(format!("/sys/class/net/{iface}/queues"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                .count()
        })
        .unwrap_or(0);
    (n as u32).clamp(64, 4096)
}

impl XskProg {
    /// The program on `iface` (index `ifindex`), frags-aware or not: the one already attached by
    /// another port of this switch, or a new one. The error says why it cannot be (no libbpf, no
    /// permission, another XDP program on the interface, the driver refuses native XDP or frags,
    /// the verifier's words).
    pub fn on(iface: &str, ifindex: u32, frags: bool) -> Result<Arc<XskProg>, String> {
        static ATTACHED: OnceLock<Mutex<HashMap<(u32, bool), Weak<XskProg>>>> = OnceLock::new();
        let mut attached = ATTACHED
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(p) = attached.get(&(ifindex, frags)).and_then(Weak::upgrade) {
            return Ok(p);
        }
        let p = Arc::new(XskProg::attach(iface, ifindex, frags)?);
        attached.retain(|_, w| w.strong_count() > 0);
        attached.insert((ifindex, frags), Arc::downgrade(&p));
        Ok(p)
    }

    fn attach(iface: &str, ifindex: u32, frags: bool) -> Result<XskProg, String> {
        let b = bpf()?;
        let mut p = XskProg {
            ifindex,
            map_fd: -1,
            prog_fd: -1,
            link_fd: -1,
        };
        let r = unsafe {
            (b.map_create)(
                BPF_MAP_TYPE_XSKMAP,
                c"p4sec_xsks".as_ptr(),
                4,
                4,
                queues(iface),
                std::ptr::null(),
            )
        };
        if r < 0 {
            let e = os_err(r);
            let hint = if r == -libc::EPERM {
                " (needs root or CAP_BPF, CAP_NET_ADMIN)"
            } else {
                ""
            };
            return Err(format!("cannot create an XSK map: {e}{hint}"));
        }
        p.map_fd = r;
        let insns = program(p.map_fd);
        let mut log = vec![0u8; 16 * 1024];
        let mut opts = ProgLoadOpts {
            sz: std::mem::size_of::<ProgLoadOpts>(),
            attempts: 0,
            expected_attach_type: BPF_XDP,
            prog_btf_fd: 0,
            prog_flags: if frags { BPF_F_XDP_HAS_FRAGS } else { 0 },
            prog_ifindex: 0,
            kern_version: 0,
            attach_btf_id: 0,
            attach_prog_fd: 0,
            attach_btf_obj_fd: 0,
            _pad: 0,
            fd_array: std::ptr::null(),
            func_info: std::ptr::null(),
            func_info_cnt: 0,
            func_info_rec_size: 0,
            line_info: std::ptr::null(),
            line_info_cnt: 0,
            line_info_rec_size: 0,
            log_level: 1,
            log_size: log.len() as u32,
            log_buf: log.as_mut_ptr() as *mut c_char,
        };
        let r = unsafe {
            (b.prog_load)(
                BPF_PROG_TYPE_XDP,
                c"p4sec_xsk".as_ptr(),
                c"GPL".as_ptr(),
                insns.as_ptr(),
                insns.len(),
                &mut opts,
            )
        };
        if r < 0 {
            let e = os_err(r);
            let words =
                String::from_utf8_lossy(&log[..log.iter().position(|&c| c == 0).unwrap_or(0)])
                    .trim()
                    .replace('\n', "; ");
            let words = if words.is_empty() {
                String::new()
            } else {
                format!(" (verifier: {words})")
            };
            let kind = if frags {
                "a frags-aware XDP program"
            } else {
                "the XDP program"
            };
            return Err(format!("the kernel refuses {kind}: {e}{words}"));
        }
        p.prog_fd = r;
        let lopts = LinkCreateOpts {
            sz: std::mem::size_of::<LinkCreateOpts>(),
            flags: XDP_FLAGS_DRV_MODE,
            _pad: 0,
            rest: [0; 6],
        };
        let r = unsafe { (b.link_create)(p.prog_fd, ifindex as c_int, BPF_XDP, &lopts) };
        if r < 0 {
            let why = match -r {
                libc::EBUSY | libc::EEXIST => "another XDP program is attached to it".to_string(),
                libc::EOPNOTSUPP => "its driver has no native XDP".to_string(),
                _ => os_err(r).to_string(),
            };
            let kind = if frags { "a multi-buffer" } else { "an" };
            return Err(format!(
                "cannot attach {kind} XDP program to `{iface}`: {why}"
            ));
        }
        p.link_fd = r;
        Ok(p)
    }

    /// Direct the frames of receive queue `queue` to the XDP socket `xsk_fd`.
    pub fn insert(&self, queue: u32, xsk_fd: c_int) -> Result<(), String> {
        let b = bpf()?;
        let r = unsafe {
            (b.map_update)(
                self.map_fd,
                &queue as *const u32 as *const c_void,
                &xsk_fd as *const c_int as *const c_void,
                0,
            )
        };
        if r < 0 {
            return Err(format!(
                "cannot put the socket of queue {queue} into the XSK map of interface {}: {}",
                self.ifindex,
                os_err(r)
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_encoding() {
        let p = program(7);
        // a load of rx_queue_index into r2 from r1
        assert_eq!(
            p[0],
            Insn {
                code: 0x61,
                regs: 0x12,
                off: 16,
                imm: 0
            }
        );
        // the map's fd as a pseudo map-fd immediate into r1, in two slots
        assert_eq!((p[1].code, p[1].regs, p[1].imm), (0x18, 0x11, 7));
        assert_eq!(
            p[2],
            Insn {
                code: 0,
                regs: 0,
                off: 0,
                imm: 0
            }
        );
        assert_eq!(
            p[3],
            Insn {
                code: 0xb7,
                regs: 0x03,
                off: 0,
                imm: XDP_PASS
            }
        );
        assert_eq!(p[4].imm, HELPER_REDIRECT_MAP);
        assert_eq!(p[5].code, 0x95);
        assert_eq!(std::mem::size_of::<Insn>(), 8);
    }
}
