//! The AF_XDP socket and its UMEM as libxdp makes them, for [`super::Xdp`]: the UMEM's layout
//! (buffers, ring sizes), the kernel's flags and structs (`linux/if_xdp.h`), the view of a ring
//! that libxdp fills in ([`XskRing`]: producer and consumer indices, entries), libxdp's few
//! functions (opened at run time with `dlopen`), the UMEM's memory (on huge pages where the kernel
//! gives them) and the socket that owns all of it ([`Sock`], freed when dropped).

use crate::log::Level;
use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// Size of one UMEM buffer (a page: without multi-buffer a frame must fit one).
pub const FRAME_SIZE: u32 = 4096;
/// What the kernel keeps in front of a frame in a UMEM buffer (`XDP_PACKET_HEADROOM`).
pub(super) const KERNEL_HEADROOM: u32 = 256;
/// The largest frame an AF_XDP port moves: a UMEM buffer less the kernel's headroom.
pub const MAX_FRAME: usize = (FRAME_SIZE - KERNEL_HEADROOM) as usize;
/// UMEM buffers for receiving (all in the fill ring when idle; the RX ring has as many entries): as
/// many as the packet socket's receive ring has slots, so that a worker kept off its CPU for a
/// while loses no more frames than there (with 2048, a busy machine dropped frames for want of a
/// fill buffer at 50 kpps).
pub const RX_FRAMES: u32 = 8192;
/// UMEM buffers for sending (the completion ring has as many entries).
pub const TX_FRAMES: u32 = 2048;
/// Entries of the fill and TX rings (we produce, the kernel consumes): twice the buffers, because
/// the kernel tells how far it has read only when it has used up what it last saw. With a ring just
/// as large as the buffers, all of them given at the start, the fill ring looks full until the
/// kernel has taken every one, and the buffers given back meanwhile would have no room.
pub(super) const FILL_RING: u32 = 2 * RX_FRAMES;
pub(super) const TX_RING: u32 = 2 * TX_FRAMES;

// from linux/if_xdp.h and linux/if_link.h
pub(super) const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
pub(super) const XDP_COPY: u16 = 1 << 1;
pub(super) const XDP_ZEROCOPY: u16 = 1 << 2;
pub(super) const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
/// Multi-buffer socket (frames in several descriptors).
pub(super) const XDP_USE_SG: u16 = 1 << 4;
/// `options` of a descriptor: the frame goes on in the next one.
pub(super) const XDP_PKT_CONTD: u32 = 1;
/// `XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD`: libxdp loads no program (the switch's own is attached).
pub(super) const INHIBIT_PROG_LOAD: u32 = 1;
pub(super) const XDP_RING_NEED_WAKEUP: u32 = 1;
pub(super) const SOL_XDP: c_int = 283;
pub(super) const XDP_STATISTICS: c_int = 7;
pub(super) const XDP_OPTIONS: c_int = 8;
pub(super) const XDP_OPTIONS_ZEROCOPY: u32 = 1;

/// `struct xsk_ring_prod` / `struct xsk_ring_cons` of libxdp's `xsk.h`: one side's view of a ring.
#[repr(C)]
pub(super) struct XskRing {
    pub(super) cached_prod: u32,
    pub(super) cached_cons: u32,
    pub(super) mask: u32,
    pub(super) size: u32,
    pub(super) producer: *mut u32,
    pub(super) consumer: *mut u32,
    pub(super) ring: *mut c_void,
    pub(super) flags: *mut u32,
}

impl XskRing {
    pub(super) fn zeroed() -> Box<XskRing> {
        Box::new(XskRing {
            cached_prod: 0,
            cached_cons: 0,
            mask: 0,
            size: 0,
            producer: std::ptr::null_mut(),
            consumer: std::ptr::null_mut(),
            ring: std::ptr::null_mut(),
            flags: std::ptr::null_mut(),
        })
    }

    #[inline]
    pub(super) fn producer(&self) -> &AtomicU32 {
        // SAFETY: the kernel's ring index, mapped for as long as the socket (or UMEM) lives
        unsafe { AtomicU32::from_ptr(self.producer) }
    }

    #[inline]
    pub(super) fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`
        unsafe { AtomicU32::from_ptr(self.consumer) }
    }

    #[inline]
    pub(super) fn needs_wakeup(&self) -> bool {
        // SAFETY: as for `producer`
        unsafe { AtomicU32::from_ptr(self.flags) }.load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP
            != 0
    }

    /// Producer side: free entries (at least `want` when that many are free).
    #[inline]
    pub(super) fn prod_free(&mut self, want: u32) -> u32 {
        let free = self.cached_cons.wrapping_sub(self.cached_prod);
        if free >= want {
            return free;
        }
        self.cached_cons = self
            .consumer()
            .load(Ordering::Acquire)
            .wrapping_add(self.size);
        self.cached_cons.wrapping_sub(self.cached_prod)
    }

    /// Producer side: make the entries written so far (up to `cached_prod`) visible to the kernel.
    #[inline]
    pub(super) fn prod_submit(&mut self) {
        self.producer().store(self.cached_prod, Ordering::Release);
    }

    /// Consumer side: entries available, at most `max`; they start at `cached_cons`.
    #[inline]
    pub(super) fn cons_avail(&mut self, max: u32) -> u32 {
        let mut n = self.cached_prod.wrapping_sub(self.cached_cons);
        if n == 0 {
            self.cached_prod = self.producer().load(Ordering::Acquire);
            n = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        n.min(max)
    }

    /// Consumer side: entries available from `cached_cons` once the producer index is read again
    /// (at least `have`, which were available before).
    #[inline]
    pub(super) fn cons_more(&mut self, have: u32) -> u32 {
        self.cached_prod = self.producer().load(Ordering::Acquire);
        self.cached_prod.wrapping_sub(self.cached_cons).max(have)
    }

    /// Consumer side: hand the entries read so far (up to `cached_cons`) back to the kernel.
    #[inline]
    pub(super) fn cons_release(&mut self) {
        self.consumer().store(self.cached_cons, Ordering::Release);
    }

    /// Entry `i` of an address ring (fill, completion).
    #[inline]
    pub(super) fn addr(&self, i: u32) -> *mut u64 {
        // SAFETY: masked into the ring
        unsafe { (self.ring as *mut u64).add((i & self.mask) as usize) }
    }

    /// Entry `i` of a descriptor ring (RX, TX).
    #[inline]
    pub(super) fn desc(&self, i: u32) -> *mut XdpDesc {
        // SAFETY: masked into the ring
        unsafe { (self.ring as *mut XdpDesc).add((i & self.mask) as usize) }
    }
}

/// `struct xdp_desc`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct XdpDesc {
    pub(super) addr: u64,
    pub(super) len: u32,
    pub(super) options: u32,
}

/// `struct xsk_umem_config`.
#[repr(C)]
pub(super) struct UmemConfig {
    pub(super) fill_size: u32,
    pub(super) comp_size: u32,
    pub(super) frame_size: u32,
    pub(super) frame_headroom: u32,
    pub(super) flags: u32,
}

/// `struct xsk_socket_config`.
#[repr(C)]
pub(super) struct SocketConfig {
    pub(super) rx_size: u32,
    pub(super) tx_size: u32,
    pub(super) libxdp_flags: u32,
    pub(super) xdp_flags: u32,
    pub(super) bind_flags: u16,
}

/// `struct xdp_statistics`.
#[repr(C)]
#[derive(Default)]
pub(super) struct XdpStatistics {
    pub(super) rx_dropped: u64,
    pub(super) rx_invalid_descs: u64,
    pub(super) tx_invalid_descs: u64,
    pub(super) rx_ring_full: u64,
    pub(super) rx_fill_ring_empty_descs: u64,
    pub(super) tx_ring_empty_descs: u64,
}

type UmemCreate = unsafe extern "C" fn(
    *mut *mut c_void,
    *mut c_void,
    u64,
    *mut XskRing,
    *mut XskRing,
    *const UmemConfig,
) -> c_int;
type SocketCreate = unsafe extern "C" fn(
    *mut *mut c_void,
    *const c_char,
    u32,
    *mut c_void,
    *mut XskRing,
    *mut XskRing,
    *const SocketConfig,
) -> c_int;
type SocketFd = unsafe extern "C" fn(*const c_void) -> c_int;
type SocketDelete = unsafe extern "C" fn(*mut c_void);
type UmemDelete = unsafe extern "C" fn(*mut c_void) -> c_int;

/// A print callback of libxdp/libbpf (the last argument is a `va_list`, never touched here).
type Print = unsafe extern "C" fn(c_int, *const c_char, *mut c_void) -> c_int;
type SetPrint = unsafe extern "C" fn(Option<Print>) -> Option<Print>;

unsafe extern "C" fn quiet(_level: c_int, _fmt: *const c_char, _args: *mut c_void) -> c_int {
    0
}

/// The few functions of libxdp used here.
pub(super) struct Lib {
    pub(super) umem_create: UmemCreate,
    pub(super) socket_create: SocketCreate,
    pub(super) socket_fd: SocketFd,
    pub(super) socket_delete: SocketDelete,
    pub(super) umem_delete: UmemDelete,
}

/// libxdp, opened once; the error says why it cannot be used.
pub(super) fn lib() -> Result<&'static Lib, String> {
    static LIB: OnceLock<Result<Lib, String>> = OnceLock::new();
    LIB.get_or_init(|| {
        let dl = crate::dl::Dl::open(
            &[c"libxdp.so.1", c"libxdp.so"],
            "libxdp is not installed (Debian: apt-get install libxdp1)",
        )?;
        let sym = |name: &std::ffi::CStr| dl.sym(name, "libxdp");
        // libxdp and libbpf say what they try (and that they fall back) on stderr: only at `--log
        // debug`
        if !crate::log::enabled(Level::Debug) {
            for set in [c"libxdp_set_print", c"libbpf_set_print"] {
                if let Ok(f) = sym(set) {
                    // SAFETY: `xxx_set_print(fn)` takes a print callback and returns the previous
                    // one
                    let f = unsafe { std::mem::transmute::<*mut c_void, SetPrint>(f) };
                    unsafe { f(Some(quiet)) };
                }
            }
        }
        // SAFETY: the signatures of libxdp's xsk.h (1.x)
        unsafe {
            Ok(Lib {
                umem_create: std::mem::transmute::<*mut c_void, UmemCreate>(sym(
                    c"xsk_umem__create",
                )?),
                socket_create: std::mem::transmute::<*mut c_void, SocketCreate>(sym(
                    c"xsk_socket__create",
                )?),
                socket_fd: std::mem::transmute::<*mut c_void, SocketFd>(sym(c"xsk_socket__fd")?),
                socket_delete: std::mem::transmute::<*mut c_void, SocketDelete>(sym(
                    c"xsk_socket__delete",
                )?),
                umem_delete: std::mem::transmute::<*mut c_void, UmemDelete>(sym(
                    c"xsk_umem__delete",
                )?),
            })
        }
    })
    .as_ref()
    .map_err(|e| e.clone())
}

/// Size of a transparent huge page on x86-64 (and most other 64-bit targets with 4 KiB pages).
pub(super) const HUGE_PAGE: usize = 2 << 20;
/// `MADV_POPULATE_WRITE` (Linux 5.14): fault the pages in now, writable.
pub(super) const MADV_POPULATE_WRITE: c_int = 23;

/// Memory for a UMEM of `len` bytes: (the mapping, its length, the UMEM's start in it). The UMEM
/// starts on a huge-page boundary and is advised to be backed by transparent huge pages: every
/// frame lies in a buffer of its own 4 KiB page, so with small pages nearly every frame the
/// pipeline reads costs a TLB miss (a page walk, measured as the first read of each frame); a 2 MiB
/// page covers 512 buffers. Where the kernel gives no huge pages (THP off) the memory is the same,
/// in small pages. The pages are faulted in here, before the kernel pins them for the UMEM.
pub(super) fn umem_area(len: usize) -> Result<(*mut c_void, usize, *mut c_void), String> {
    let map_len = len + HUGE_PAGE;
    let map = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            map_len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if map == libc::MAP_FAILED {
        return Err(format!(
            "cannot map {len} bytes of UMEM: {}",
            std::io::Error::last_os_error()
        ));
    }
    let skip = (HUGE_PAGE - (map as usize) % HUGE_PAGE) % HUGE_PAGE;
    let area = (map as *mut u8).wrapping_add(skip) as *mut c_void;
    unsafe {
        // (advice only: without THP the pages are small ones)
        libc::madvise(area, len, libc::MADV_HUGEPAGE);
        if libc::madvise(area, len, MADV_POPULATE_WRITE) != 0 {
            // an older kernel: touch every page
            for off in (0..len).step_by(4096) {
                std::ptr::write_volatile((area as *mut u8).add(off), 0);
            }
        }
    }
    Ok((map, map_len, area))
}

/// The UMEM and its socket as libxdp made them, with the memory they use; freed when dropped.
pub(super) struct Sock {
    pub(super) lib: &'static Lib,
    pub(super) area: *mut c_void,
    pub(super) area_len: usize,
    /// The whole mapping `area` lies in (it is aligned to a huge page inside it).
    pub(super) map: *mut c_void,
    pub(super) map_len: usize,
    pub(super) umem: *mut c_void,
    pub(super) xsk: *mut c_void,
    pub(super) fd: i32,
    pub(super) fill: Box<XskRing>,
    pub(super) comp: Box<XskRing>,
    pub(super) rx: Box<XskRing>,
    pub(super) tx: Box<XskRing>,
    pub(super) zero_copy: bool,
}

impl Drop for Sock {
    fn drop(&mut self) {
        unsafe {
            if !self.xsk.is_null() {
                (self.lib.socket_delete)(self.xsk);
            }
            if !self.umem.is_null() {
                (self.lib.umem_delete)(self.umem);
            }
            libc::munmap(self.map, self.map_len);
        }
    }
}

impl Sock {
    /// A UMEM and a socket bound to `queue` of `iface` with `bind_flags`.
    pub(super) fn create(
        lib: &'static Lib,
        iface: &CString,
        queue: u32,
        bind_flags: u16,
        libxdp_flags: u32,
    ) -> Result<Sock, String> {
        let area_len = ((RX_FRAMES + TX_FRAMES) * FRAME_SIZE) as usize;
        let (map, map_len, area) = umem_area(area_len)?;
        let mut s = Sock {
            lib,
            area,
            area_len,
            map,
            map_len,
            umem: std::ptr::null_mut(),
            xsk: std::ptr::null_mut(),
            fd: -1,
            fill: XskRing::zeroed(),
            comp: XskRing::zeroed(),
            rx: XskRing::zeroed(),
            tx: XskRing::zeroed(),
            zero_copy: false,
        };
        let ucfg = UmemConfig {
            fill_size: FILL_RING,
            comp_size: TX_FRAMES,
            frame_size: FRAME_SIZE,
            frame_headroom: 0,
            flags: 0,
        };
        let r = unsafe {
            (lib.umem_create)(
                &mut s.umem,
                area,
                area_len as u64,
                &mut *s.fill,
                &mut *s.comp,
                &ucfg,
            )
        };
        if r != 0 {
            s.umem = std::ptr::null_mut();
            return Err(format!("UMEM: {}", std::io::Error::from_raw_os_error(-r)));
        }
        let scfg = SocketConfig {
            rx_size: RX_FRAMES,
            tx_size: TX_RING,
            libxdp_flags,
            xdp_flags: XDP_FLAGS_DRV_MODE,
            bind_flags,
        };
        let r = unsafe {
            (lib.socket_create)(
                &mut s.xsk,
                iface.as_ptr(),
                queue,
                s.umem,
                &mut *s.rx,
                &mut *s.tx,
                &scfg,
            )
        };
        if r != 0 {
            s.xsk = std::ptr::null_mut();
            return Err(std::io::Error::from_raw_os_error(-r).to_string());
        }
        s.fd = unsafe { (lib.socket_fd)(s.xsk) };
        let mut opts: u32 = 0;
        let mut len = std::mem::size_of::<u32>() as u32;
        if unsafe {
            libc::getsockopt(
                s.fd,
                SOL_XDP,
                XDP_OPTIONS,
                &mut opts as *mut _ as *mut c_void,
                &mut len,
            )
        } == 0
        {
            s.zero_copy = opts & XDP_OPTIONS_ZEROCOPY != 0;
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_indices_wrap() {
        let idx = Box::into_raw(Box::new([0u32; 4]));
        let (prod, cons, p2, c2) = unsafe {
            (
                &raw mut (*idx)[0],
                &raw mut (*idx)[1],
                &raw mut (*idx)[2],
                &raw mut (*idx)[3],
            )
        };
        let mut r = XskRing::zeroed();
        r.size = 8;
        r.mask = 7;
        r.producer = prod;
        r.consumer = cons;
        r.cached_cons = 8;
        // producer side: 8 free, then none until the consumer moves
        assert_eq!(r.prod_free(8), 8);
        r.cached_prod = 8;
        r.prod_submit();
        assert_eq!(unsafe { *prod }, 8);
        assert_eq!(r.prod_free(1), 0);
        unsafe { *cons = 3 };
        assert_eq!(r.prod_free(1), 3);
        // near the end of u32: differences stay right
        let mut c = XskRing::zeroed();
        unsafe { (*p2, *c2) = (u32::MAX - 1, u32::MAX - 1) };
        c.producer = p2;
        c.consumer = c2;
        c.cached_cons = u32::MAX - 1;
        c.cached_prod = u32::MAX - 1;
        assert_eq!(c.cons_avail(64), 0);
        unsafe { *p2 = 2 };
        assert_eq!(c.cons_avail(64), 4);
        assert_eq!(c.cons_avail(3), 3);
        drop(unsafe { Box::from_raw(idx) });
    }
}
