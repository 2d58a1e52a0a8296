//! AF_XDP ports (`--port N=xdp:IFACE`): a Linux interface through an XDP socket. The switch's own
//! XDP program ([`prog`], on a BPF link: gone with the switch, even a killed one) redirects every
//! frame of the bound receive queue into the socket through an XSK map; where it cannot be attached
//! (the interface holds another program), the system's libxdp loads or reuses its default program
//! instead. libxdp (Debian `libxdp1`, opened at run time with `dlopen`, so the switch builds and
//! runs without it) creates the socket and its UMEM. The UMEM's four rings (fill, completion, RX,
//! TX) are driven here directly: frames are received where the kernel put them and their buffers go
//! back to the fill ring once per batch; frames sent are copied into UMEM buffers, queued in the TX
//! ring and handed over with one `sendto` kick per batch.
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

use super::io::{Ctx, PortIo};
use crate::log::Level;
use crate::pcap_file::Ts;
use crate::tuntap;
use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// Set (to anything but `0`) to make every AF_XDP setup fail, as if libxdp were missing: the port
/// falls back to the packet socket (for tests of the fallback path).
pub const NO_XDP_ENV: &str = "P4SEC_NO_XDP";

/// Size of one UMEM buffer (a page: without multi-buffer a frame must fit one).
pub const FRAME_SIZE: u32 = 4096;
/// What the kernel keeps in front of a frame in a UMEM buffer (`XDP_PACKET_HEADROOM`).
const KERNEL_HEADROOM: u32 = 256;
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
const FILL_RING: u32 = 2 * RX_FRAMES;
const TX_RING: u32 = 2 * TX_FRAMES;
/// Frames taken from the RX ring at a time (the packet loop takes at most 64 per port per round).
const RX_BATCH: u32 = 64;
/// `sendto` kicks per flush at most: in copy mode the kernel sends at most 32 frames per kick.
const KICKS_MAX: usize = 16;

// from linux/if_xdp.h and linux/if_link.h
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
const XDP_COPY: u16 = 1 << 1;
const XDP_ZEROCOPY: u16 = 1 << 2;
const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
/// Multi-buffer socket (frames in several descriptors).
const XDP_USE_SG: u16 = 1 << 4;
/// `options` of a descriptor: the frame goes on in the next one.
const XDP_PKT_CONTD: u32 = 1;
/// `XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD`: libxdp loads no program (the switch's own is attached).
const INHIBIT_PROG_LOAD: u32 = 1;
/// The largest frame a multi-buffer port moves (as a packet socket or pcap file does).
pub const MAX_SG_FRAME: usize = crate::pcap_file::MAX_FRAME;
const XDP_RING_NEED_WAKEUP: u32 = 1;
const SOL_XDP: c_int = 283;
const XDP_STATISTICS: c_int = 7;
const XDP_OPTIONS: c_int = 8;
const XDP_OPTIONS_ZEROCOPY: u32 = 1;

/// `struct xsk_ring_prod` / `struct xsk_ring_cons` of libxdp's `xsk.h`: one side's view of a ring.
#[repr(C)]
struct XskRing {
    cached_prod: u32,
    cached_cons: u32,
    mask: u32,
    size: u32,
    producer: *mut u32,
    consumer: *mut u32,
    ring: *mut c_void,
    flags: *mut u32,
}

impl XskRing {
    fn zeroed() -> Box<XskRing> {
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
    fn producer(&self) -> &AtomicU32 {
        // SAFETY: the kernel's ring index, mapped for as long as the socket (or UMEM) lives
        unsafe { AtomicU32::from_ptr(self.producer) }
    }

    #[inline]
    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`
        unsafe { AtomicU32::from_ptr(self.consumer) }
    }

    #[inline]
    fn needs_wakeup(&self) -> bool {
        // SAFETY: as for `producer`
        unsafe { AtomicU32::from_ptr(self.flags) }.load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP
            != 0
    }

    /// Producer side: free entries (at least `want` when that many are free).
    #[inline]
    fn prod_free(&mut self, want: u32) -> u32 {
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
    fn prod_submit(&mut self) {
        self.producer().store(self.cached_prod, Ordering::Release);
    }

    /// Consumer side: entries available, at most `max`; they start at `cached_cons`.
    #[inline]
    fn cons_avail(&mut self, max: u32) -> u32 {
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
    fn cons_more(&mut self, have: u32) -> u32 {
        self.cached_prod = self.producer().load(Ordering::Acquire);
        self.cached_prod.wrapping_sub(self.cached_cons).max(have)
    }

    /// Consumer side: hand the entries read so far (up to `cached_cons`) back to the kernel.
    #[inline]
    fn cons_release(&mut self) {
        self.consumer().store(self.cached_cons, Ordering::Release);
    }

    /// Entry `i` of an address ring (fill, completion).
    #[inline]
    fn addr(&self, i: u32) -> *mut u64 {
        // SAFETY: masked into the ring
        unsafe { (self.ring as *mut u64).add((i & self.mask) as usize) }
    }

    /// Entry `i` of a descriptor ring (RX, TX).
    #[inline]
    fn desc(&self, i: u32) -> *mut XdpDesc {
        // SAFETY: masked into the ring
        unsafe { (self.ring as *mut XdpDesc).add((i & self.mask) as usize) }
    }
}

/// `struct xdp_desc`.
#[repr(C)]
#[derive(Clone, Copy)]
struct XdpDesc {
    addr: u64,
    len: u32,
    options: u32,
}

/// `struct xsk_umem_config`.
#[repr(C)]
struct UmemConfig {
    fill_size: u32,
    comp_size: u32,
    frame_size: u32,
    frame_headroom: u32,
    flags: u32,
}

/// `struct xsk_socket_config`.
#[repr(C)]
struct SocketConfig {
    rx_size: u32,
    tx_size: u32,
    libxdp_flags: u32,
    xdp_flags: u32,
    bind_flags: u16,
}

/// `struct xdp_statistics`.
#[repr(C)]
#[derive(Default)]
struct XdpStatistics {
    rx_dropped: u64,
    rx_invalid_descs: u64,
    tx_invalid_descs: u64,
    rx_ring_full: u64,
    rx_fill_ring_empty_descs: u64,
    tx_ring_empty_descs: u64,
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
struct Lib {
    umem_create: UmemCreate,
    socket_create: SocketCreate,
    socket_fd: SocketFd,
    socket_delete: SocketDelete,
    umem_delete: UmemDelete,
}

/// libxdp, opened once; the error says why it cannot be used.
fn lib() -> Result<&'static Lib, String> {
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

fn forced_off() -> bool {
    matches!(std::env::var(NO_XDP_ENV), Ok(v) if !v.is_empty() && v != "0")
}

/// Size of a transparent huge page on x86-64 (and most other 64-bit targets with 4 KiB pages).
const HUGE_PAGE: usize = 2 << 20;
/// `MADV_POPULATE_WRITE` (Linux 5.14): fault the pages in now, writable.
const MADV_POPULATE_WRITE: c_int = 23;

/// Memory for a UMEM of `len` bytes: (the mapping, its length, the UMEM's start in it). The UMEM
/// starts on a huge-page boundary and is advised to be backed by transparent huge pages: every
/// frame lies in a buffer of its own 4 KiB page, so with small pages nearly every frame the
/// pipeline reads costs a TLB miss (a page walk, measured as the first read of each frame); a 2 MiB
/// page covers 512 buffers. Where the kernel gives no huge pages (THP off) the memory is the same,
/// in small pages. The pages are faulted in here, before the kernel pins them for the UMEM.
fn umem_area(len: usize) -> Result<(*mut c_void, usize, *mut c_void), String> {
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
struct Sock {
    lib: &'static Lib,
    area: *mut c_void,
    area_len: usize,
    /// The whole mapping `area` lies in (it is aligned to a huge page inside it).
    map: *mut c_void,
    map_len: usize,
    umem: *mut c_void,
    xsk: *mut c_void,
    fd: i32,
    fill: Box<XskRing>,
    comp: Box<XskRing>,
    rx: Box<XskRing>,
    tx: Box<XskRing>,
    zero_copy: bool,
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
    fn create(
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
