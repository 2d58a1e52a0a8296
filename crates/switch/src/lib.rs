//! The switch data plane: its ports and the packet loop that feeds received frames to the engine installed
//! on the P4Runtime device and transmits what it emits. The engine is taken from the device for every
//! batch, so a new pipeline pushed by the controller takes effect without restarting the loop.
//!
//! Ports ([`PortSpec`]): Linux interfaces through AF_PACKET raw sockets, TUN and TAP devices the switch
//! creates, and pcap files (frames read from one, frames sent written to another). Every port's traffic
//! can also be captured to pcap files (`--pcap-dir`).

use p4sec_engine::{Outputs, Worker};
use p4sec_p4runtime::server::Device;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub mod gro;
pub mod gso;
pub mod log;
pub mod metrics;
pub mod pcap;
pub mod ring;
pub mod tun;

use log::Level;
use pcap::Ts;

const PACKET_AUXDATA: libc::c_int = 8;

/// `struct tpacket_auxdata`: what PACKET_AUXDATA tells about a frame read with `recvmsg`.
#[repr(C)]
#[derive(Clone, Copy)]
struct AuxData {
    status: u32,
    len: u32,
    snaplen: u32,
    mac: u16,
    net: u16,
    vlan_tci: u16,
    vlan_tpid: u16,
}

/// Set (to anything but `0`) to keep interface ports off memory-mapped rings: one `recvmsg`/`send` per frame.
pub const NO_MMAP_ENV: &str = "P4SEC_NO_MMAP";

/// Set (to anything but `0`) to send TCP segments to interface ports as they come out of the pipeline,
/// one frame each, instead of joining those of one stream into GSO super-frames ([`gro`]).
pub const NO_GRO_ENV: &str = "P4SEC_NO_GRO";
/// Receive buffer of an interface port's packet socket (see `Port::open`).
const RCVBUF_BYTES: usize = 16 << 20;

fn gro_wanted() -> bool {
    !matches!(std::env::var(NO_GRO_ENV), Ok(v) if !v.is_empty() && v != "0")
}

fn mmap_wanted() -> bool {
    !matches!(std::env::var(NO_MMAP_ENV), Ok(v) if !v.is_empty() && v != "0")
}

/// The 16-bit one's complement sum of `data` (big-endian words, an odd last byte padded with zero), folded.
/// Eight bytes at a time in native order: the one's complement sum does not depend on the byte order except
/// for a swap of the result (RFC 1071).
fn ones_sum(data: &[u8]) -> u16 {
    let mut acc: u64 = 0;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        acc += (w & 0xffff_ffff) + (w >> 32);
    }
    let mut tail = [0u8; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    let w = u64::from_ne_bytes(tail);
    acc += (w & 0xffff_ffff) + (w >> 32);
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    u16::from_be(acc as u16)
}

/// Finish a TCP/UDP checksum over IPv4 or IPv6 whose field holds only the pseudo-header sum.
pub fn complete_l4_checksum(f: &mut [u8]) {
    let mut off = 12;
    let mut et = u16::from_be_bytes([f.get(12).copied().unwrap_or(0), f.get(13).copied().unwrap_or(0)]);
    if et == 0x8100 && f.len() >= 18 {
        et = u16::from_be_bytes([f[16], f[17]]);
        off = 16;
    }
    let ip = off + 2;
    let (proto, l4) = match et {
        0x0800 if f.len() >= ip + 20 => (f[ip + 9], ip + (f[ip] & 0x0f) as usize * 4),
        0x86dd if f.len() >= ip + 40 => (f[ip + 6], ip + 40),
        _ => return,
    };
    let field = match proto {
        6 => l4 + 16,
        17 => l4 + 6,
        _ => return,
    };
    if f.len() < field + 2 {
        return;
    }
    let mut c = !ones_sum(&f[l4..]);
    if c == 0 && proto == 17 {
        c = 0xffff;
    }
    f[field..field + 2].copy_from_slice(&c.to_be_bytes());
}

/// Counters of one port, shared by the sockets every worker has on it.
#[derive(Default, Debug)]
pub struct PortStats {
    pub rx: AtomicU64,
    pub tx: AtomicU64,
    pub errors: AtomicU64,
    /// GSO super-frames received and segmented (PACKET_VNET_HDR).
    pub gso: AtomicU64,
    /// GSO super-frames sent: TCP segments joined on transmit ([`gro`]); their segments count in `tx`.
    pub gro: AtomicU64,
}

/// The destination MAC address of frames made from packets of a TUN port (or a raw-IP pcap input):
/// 02:70:34:73:65:63 ("p4sec" in a locally administered address).
pub const TUN_SWITCH_MAC: [u8; 6] = [0x02, 0x70, 0x34, 0x73, 0x65, 0x63];

/// The source MAC address of frames made from packets of TUN port `port`: 02:74:75:6e:HH:LL ("tun" and the
/// port number's low 16 bits).
pub fn tun_host_mac(port: u32) -> [u8; 6] {
    [0x02, 0x74, 0x75, 0x6e, (port >> 8) as u8, port as u8]
}

/// `buf[14..]` holds an IP packet: write an Ethernet header in front of it (destination [`TUN_SWITCH_MAC`],
/// source [`tun_host_mac`], EtherType from the IP version). False if it is neither IPv4 nor IPv6.
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

/// The IP packet inside an Ethernet frame (after any VLAN tags), for a TUN port; `None` if it is not IP.
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

/// What a `--port` argument names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortKind {
    /// A Linux interface, opened through an AF_PACKET socket.
    Iface(String),
    /// A TAP device the switch creates: Ethernet frames.
    Tap(String),
    /// A TUN device the switch creates: IP packets, given a synthetic Ethernet header on the way in and
    /// stripped of it on the way out.
    Tun(String),
    /// pcap files: frames read from `input` enter on the port, frames sent to it are written to `output`.
    Pcap { input: Option<PathBuf>, output: Option<PathBuf> },
}

/// One `--port N=...` argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortSpec {
    pub number: u32,
    pub kind: PortKind,
    /// What followed `N=`: the port's name in messages and metrics.
    pub label: String,
}

fn check_ifname(name: &str, what: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err(format!("{what}: the interface name is empty"));
    }
    if name.len() >= libc::IFNAMSIZ {
        return Err(format!("{what}: interface name `{name}` is too long (at most {} bytes)", libc::IFNAMSIZ - 1));
    }
    if name == "." || name == ".." || name.chars().any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control()) {
        return Err(format!("{what}: `{name}` is not a valid interface name"));
    }
    Ok(())
}

impl PortSpec {
    /// Parse `N=IFACE`, `N=tap:NAME`, `N=tun:NAME` or `N=pcap:in=FILE,out=FILE` (either part optional).
    pub fn parse(spec: &str) -> Result<PortSpec, String> {
        let usage = "NUMBER=INTERFACE, NUMBER=tap:NAME, NUMBER=tun:NAME or NUMBER=pcap:in=FILE,out=FILE";
        let Some((n, rest)) = spec.split_once('=') else {
            return Err(format!("--port needs {usage}, got `{spec}`"));
        };
        let number = n.trim().parse::<u32>().map_err(|_| format!("bad port number `{n}` in `--port {spec}`"))?;
        let what = format!("port {number}");
        let kind = match rest.split_once(':') {
            None => {
                check_ifname(rest, &what)?;
                PortKind::Iface(rest.to_string())
            }
            Some(("tap", name)) => {
                check_ifname(name, &what)?;
                PortKind::Tap(name.to_string())
            }
            Some(("tun", name)) => {
                check_ifname(name, &what)?;
                PortKind::Tun(name.to_string())
            }
            Some(("pcap", args)) => {
                // FILE may hold commas: a new part starts only at `,KEY=` (KEY made of letters and `_`)
                let starts_part =
                    |p: &str| p.split_once('=').map(|(k, _)| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphabetic() || c == '_')).unwrap_or(false);
                let mut parts: Vec<String> = vec![];
                for piece in args.split(',') {
                    match parts.last_mut() {
                        Some(last) if !starts_part(piece) => {
                            last.push(',');
                            last.push_str(piece);
                        }
                        _ => parts.push(piece.to_string()),
                    }
                }
                let (mut input, mut output) = (None, None);
                for part in parts.iter().filter(|p| !p.is_empty()) {
                    let (key, file) = part.split_once('=').unwrap_or((part.as_str(), ""));
                    let slot = match key {
                        "in" => &mut input,
                        "out" => &mut output,
                        _ => return Err(format!("{what}: unknown pcap option `{part}` (in=FILE and out=FILE are known)")),
                    };
                    if file.is_empty() {
                        return Err(format!("{what}: `{key}=` needs a file name"));
                    }
                    if slot.is_some() {
                        return Err(format!("{what}: `{key}=` is given twice"));
                    }
                    *slot = Some(PathBuf::from(file));
                }
                if input.is_none() && output.is_none() {
                    return Err(format!("{what}: a pcap port needs in=FILE, out=FILE or both (pcap:in=FILE,out=FILE)"));
                }
                PortKind::Pcap { input, output }
            }
            Some((k, _)) => {
                return Err(format!("{what}: unknown port kind `{k}` in `{rest}` (expected an interface name, tap:NAME, tun:NAME or pcap:in=FILE,out=FILE)"))
            }
        };
        Ok(PortSpec { number, kind, label: rest.to_string() })
    }

    /// A port that can receive frames at any time (an interface, TUN or TAP), as opposed to a pcap port.
    pub fn is_live(&self) -> bool {
        !matches!(self.kind, PortKind::Pcap { .. })
    }
}

/// A path to compare files by: canonical where the file (or its folder) exists.
fn file_key(p: &Path) -> PathBuf {
    if let Ok(c) = p.canonicalize() {
        return c;
    }
    let parent = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match (parent.canonicalize(), p.file_name()) {
        (Ok(d), Some(f)) => d.join(f),
        _ => p.to_path_buf(),
    }
}

/// The capture files of port `n` under `--pcap-dir`.
pub fn capture_paths(dir: &Path, n: u32) -> (PathBuf, PathBuf) {
    (dir.join(format!("port{n}-in.pcap")), dir.join(format!("port{n}-out.pcap")))
}

/// Reject port lists that cannot work: a port number given twice or equal to the CPU port, an interface
/// named twice, a file written by two ports (or the capture) or both read and written.
pub fn check_ports(specs: &[PortSpec], cpu_port: Option<u32>, pcap_dir: Option<&Path>) -> Result<(), String> {
    let mut numbers: HashMap<u32, ()> = HashMap::new();
    let mut names: HashMap<&str, u32> = HashMap::new();
    let mut written: HashMap<PathBuf, String> = HashMap::new();
    for s in specs {
        if Some(s.number) == cpu_port {
            return Err(format!("port {} is the CPU port (--cpu-port) and cannot also be given with --port", s.number));
        }
        if numbers.insert(s.number, ()).is_some() {
            return Err(format!("port {} is given twice", s.number));
        }
        match &s.kind {
            PortKind::Iface(n) | PortKind::Tap(n) | PortKind::Tun(n) => {
                if let Some(other) = names.insert(n, s.number) {
                    return Err(format!("interface `{n}` is named by two ports ({other} and {})", s.number));
                }
            }
            PortKind::Pcap { output: Some(f), .. } => {
                if let Some(other) = written.insert(file_key(f), format!("port {}", s.number)) {
                    return Err(format!("{} is written by two ports ({other} and port {})", f.display(), s.number));
                }
            }
            PortKind::Pcap { .. } => {}
        }
    }
    if let Some(dir) = pcap_dir {
        for s in specs {
            let (i, o) = capture_paths(dir, s.number);
            for f in [i, o] {
                if let Some(other) = written.insert(file_key(&f), "--pcap-dir".into()) {
                    return Err(format!("{} is written by {other} and by --pcap-dir", f.display()));
                }
            }
        }
    }
    for s in specs {
        if let PortKind::Pcap { input: Some(f), .. } = &s.kind {
            if let Some(other) = written.get(&file_key(f)) {
                if *other == format!("port {}", s.number) {
                    return Err(format!("port {}: {} is both read and written by the port", s.number, f.display()));
                }
                return Err(format!("port {}: {} is read by the port and written by {other}", s.number, f.display()));
            }
        }
    }
    Ok(())
}

/// The `--pcap-dir` files of one port, shared by all workers.
struct Capture {
    rx: Mutex<pcap::Writer>,
    tx: Mutex<pcap::Writer>,
}

/// How a port moves frames.
enum Io {
    /// An AF_PACKET socket, with its memory-mapped rings unless the kernel refused them.
    Packet { fd: i32, ring: Option<ring::Rings> },
    /// A queue of a TUN (`ip`) or TAP device.
    Tun { fd: i32, ip: bool },
    /// pcap files: the input (read by the first worker only) and the output (shared).
    Pcap { input: Option<pcap::Reader>, output: Option<Arc<Mutex<pcap::Writer>>> },
}

impl Drop for Io {
    fn drop(&mut self) {
        match self {
            Io::Packet { fd, ring } => {
                *ring = None;
                unsafe { libc::close(*fd) };
            }
            Io::Tun { fd, .. } => unsafe {
                libc::close(*fd);
            },
            Io::Pcap { .. } => {}
        }
    }
}

/// A port as one worker has it.
pub struct Port {
    pub number: u32,
    /// The interface name (AF_PACKET ports) or what followed `N=` in `--port`.
    pub iface: String,
    io: Io,
    pub stats: Arc<PortStats>,
    capture: Option<Arc<Capture>>,
    /// Interface ports: PACKET_VNET_HDR is on (frames come with a `virtio_net_hdr`, and go out with one).
    vnet: bool,
    /// The segments of the last GSO super-frame received (`segs[..seg_count]`; the buffers are reused), and
    /// the next to hand over.
    segs: Vec<Vec<u8>>,
    seg_count: usize,
    seg_next: usize,
    /// Interface ports with TCP segments joined on transmit ([`Port::enable_gro`]).
    gro: Option<GroTx>,
}

/// Joining TCP segments on transmit: the super-frame being built, and the socket it is sent on (a packet
/// socket without rings, as a super-frame does not fit a transmit slot; bound to no protocol, so nothing is
/// received on it).
struct GroTx {
    fd: i32,
    c: std::cell::RefCell<gro::Coalescer>,
}

impl Drop for GroTx {
    fn drop(&mut self) {
        unsafe { libc::close(self.fd) };
    }
}

impl Port {
    /// Open `iface` (e.g. a veth) as port `number`: an AF_PACKET socket with memory-mapped receive and
    /// transmit rings ([`ring`]) on Ethernet interfaces, unless the kernel refuses them or
    /// `P4SEC_NO_MMAP` is set ([`Port::mmap`] tells which it got).
    pub fn open(number: u32, iface: &str) -> Result<Port, String> {
        let name = std::ffi::CString::new(iface).map_err(|_| format!("bad interface name `{iface}`"))?;
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if index == 0 {
            return Err(format!("port {number}: no interface named `{iface}`"));
        }
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // no protocol until bound: nothing is queued on the socket before its ring is in place
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            let hint = if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) { " (needs root or CAP_NET_RAW)" } else { "" };
            return Err(format!("port {number}: cannot open a packet socket on `{iface}`: {e}{hint}"));
        }
        let one: libc::c_int = 1;
        let setopt = |name: libc::c_int| unsafe {
            libc::setsockopt(fd, libc::SOL_PACKET, name, &one as *const _ as *const libc::c_void, std::mem::size_of::<libc::c_int>() as u32)
        };
        setopt(PACKET_AUXDATA);
        // frames others send on the interface are not ours to forward (checked per frame too, for old kernels)
        setopt(ring::PACKET_IGNORE_OUTGOING);
        // virtio-net headers (before the rings, which the kernel sizes with them): peers with offloads on
        // hand over GSO super-frames and partial checksums, which are completed and segmented here
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
        // What the socket queues itself is bounded by its receive buffer: every frame without a ring, and with
        // one the frames too large for a slot (a TSO/GSO super-frame from a host with offloads on comes whole
        // through the queue). At the default (~200 KB) a burst of three 64 KB super-frames fills it and the
        // next ones arrive cut to the slot, i.e. lost: TCP through the switch retransmitted ~5 % of its segments.
        let rcv = RCVBUF_BYTES as libc::c_int;
        if ring::setopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &rcv).is_err() {
            let _ = ring::setopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &rcv);
        }
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = index as i32;
        let r = unsafe { libc::bind(fd, &sll as *const _ as *const libc::sockaddr, std::mem::size_of::<libc::sockaddr_ll>() as u32) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            drop(ring);
            unsafe { libc::close(fd) };
            return Err(format!("port {number}: cannot bind to `{iface}`: {e}"));
        }
        Ok(Port {
            number,
            iface: iface.to_string(),
            io: Io::Packet { fd, ring },
            stats: Arc::default(),
            capture: None,
            vnet,
            segs: vec![],
            seg_count: 0,
            seg_next: 0,
            gro: None,
        })
    }

    /// Does this port move frames through memory-mapped rings?
    pub fn mmap(&self) -> bool {
        matches!(&self.io, Io::Packet { ring: Some(_), .. })
    }

    /// Join consecutive TCP segments sent to this port in one batch into GSO super-frames ([`gro`]). Only
    /// interface ports with rings and PACKET_VNET_HDR; an error says why not (the port works as before).
    pub fn enable_gro(&mut self) -> Result<(), String> {
        if !self.vnet || !self.mmap() {
            return Err("needs memory-mapped rings and PACKET_VNET_HDR".into());
        }
        let name = std::ffi::CString::new(self.iface.as_str()).map_err(|_| "bad interface name".to_string())?;
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if index == 0 {
            return Err(format!("no interface named `{}`", self.iface));
        }
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(format!("packet socket: {}", std::io::Error::last_os_error()));
        }
        let g = GroTx { fd, c: Default::default() };
        let one: libc::c_int = 1;
        let size: libc::c_int = 4 << 20;
        let set = |level: libc::c_int, name: libc::c_int, v: &libc::c_int| unsafe {
            libc::setsockopt(fd, level, name, v as *const _ as *const libc::c_void, std::mem::size_of::<libc::c_int>() as u32)
        };
        if set(libc::SOL_PACKET, gso::PACKET_VNET_HDR, &one) < 0 {
            return Err(format!("PACKET_VNET_HDR: {}", std::io::Error::last_os_error()));
        }
        if set(libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &size) < 0 {
            set(libc::SOL_SOCKET, libc::SO_SNDBUF, &size);
        }
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = 0;
        sll.sll_ifindex = index as i32;
        if unsafe { libc::bind(fd, &sll as *const _ as *const libc::sockaddr, std::mem::size_of::<libc::sockaddr_ll>() as u32) } < 0 {
            return Err(format!("bind: {}", std::io::Error::last_os_error()));
        }
        self.gro = Some(g);
        Ok(())
    }

    /// Open `iface` as one of several sockets of a PACKET_FANOUT group: the kernel spreads received frames
    /// over the group's sockets by flow hash, so each worker gets whole flows (packet order within a flow
    /// is kept).
    pub fn open_fanout(number: u32, iface: &str, group: u16) -> Result<Port, String> {
        let p = Port::open(number, iface)?;
        let arg: libc::c_int = (group as libc::c_int) | ((libc::PACKET_FANOUT_HASH as libc::c_int) << 16);
        let r = unsafe {
            libc::setsockopt(p.fd(), libc::SOL_PACKET, libc::PACKET_FANOUT, &arg as *const _ as *const libc::c_void, std::mem::size_of::<libc::c_int>() as u32)
        };
        if r < 0 {
            return Err(format!("port {number}: cannot join fanout group {group} on `{iface}`: {}", std::io::Error::last_os_error()));
        }
        Ok(p)
    }

    /// The descriptor to poll; -1 for pcap ports (their input is read without waiting).
    fn fd(&self) -> i32 {
        match &self.io {
            Io::Packet { fd, .. } | Io::Tun { fd, .. } => *fd,
            Io::Pcap { .. } => -1,
        }
    }

    /// Does this port still have pcap input to read?
    fn has_input(&self) -> bool {
        matches!(&self.io, Io::Pcap { input: Some(_), .. })
    }

    /// Does this port write files (pcap output or capture)?
    fn writes(&self) -> bool {
        self.capture.is_some() || matches!(&self.io, Io::Pcap { output: Some(_), .. })
    }

    fn flush(&self) {
        if let Some(c) = &self.capture {
            let _ = c.rx.lock().unwrap_or_else(|p| p.into_inner()).flush();
            let _ = c.tx.lock().unwrap_or_else(|p| p.into_inner()).flush();
        }
        if let Io::Pcap { output: Some(w), .. } = &self.io {
            let _ = w.lock().unwrap_or_else(|p| p.into_inner()).flush();
        }
    }

    /// Read and clear the socket's pending error.
    fn take_error(&self) {
        if let Io::Packet { fd, .. } = self.io {
            let mut e: libc::c_int = 0;
            let mut len = std::mem::size_of::<libc::c_int>() as u32;
            unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_ERROR, &mut e as *mut _ as *mut libc::c_void, &mut len) };
        }
    }

    /// Is the port up (for watch ports of selector members): an interface that exists, is up and has its
    /// carrier (TUN/TAP: attached and up); pcap ports always are.
    fn up(&self) -> bool {
        match &self.io {
            Io::Packet { .. } => tun::oper_up(&self.iface).unwrap_or(false),
            Io::Tun { fd, .. } => tun::attached(*fd) && tun::oper_up(&self.iface).unwrap_or(false),
            Io::Pcap { .. } => true,
        }
    }

    /// Does the interface still exist (for TUN/TAP: is the device still there, wherever it was moved)?
    fn alive(&self) -> bool {
        match &self.io {
            Io::Packet { .. } => tun::exists(&self.iface),
            Io::Tun { fd, .. } => tun::attached(*fd),
            Io::Pcap { .. } => true,
        }
    }

    /// Receive one frame: where it is (in `buf`, or in the port's receive ring until [`Port::release`] or the
    /// next `recv`), its length and, for pcap input and rings, its timestamp; `None` when nothing is waiting
    /// (or the pcap input is finished). `woken`: poll said the socket is readable, so a ring port whose
    /// ring is empty also looks at the socket's queue.
    fn recv(&mut self, buf: &mut [u8], woken: bool) -> Option<(*const u8, usize, Option<Ts>)> {
        // the segments of a GSO super-frame first
        if self.seg_next < self.seg_count {
            let s = &self.segs[self.seg_next];
            self.seg_next += 1;
            return Some((s.as_ptr(), s.len(), None));
        }
        if !matches!(self.io, Io::Packet { .. }) || !self.vnet {
            return self.recv_one(buf, woken).map(|(p, n, ts, _)| (p, n, ts));
        }
        let mut woken = woken;
        loop {
            let (ptr, n, ts, h) = self.recv_one(buf, std::mem::take(&mut woken))?;
            let Some(h) = h.filter(|h| h.is_gso()) else { return Some((ptr, n, ts)) };
            // SAFETY: as in the packet loop, the frame stays where it is until the next `recv_one`/`release`
            let frame = unsafe { std::slice::from_raw_parts(ptr, n) };
            self.seg_count = 0;
            self.seg_next = 0;
            match gso::segment_into(frame, &h, &mut self.segs) {
                Ok(n) if n > 0 => {
                    self.seg_count = n;
                    self.stats.gso.fetch_add(1, Ordering::Relaxed);
                    self.release();
                    self.seg_next = 1;
                    let s = &self.segs[0];
                    return Some((s.as_ptr(), s.len(), ts));
                }
                Ok(_) => {}
                Err(e) => {
                    self.stats.errors.fetch_add(1, Ordering::Relaxed);
                    p4log!(Level::Debug, "port {}: a GSO frame of {n} bytes from `{}` could not be segmented ({e}); dropped", self.number, self.iface);
                }
            }
        }
    }

    /// Receive one frame as the kernel hands it over, with its virtio-net header (PACKET_VNET_HDR).
    fn recv_one(&mut self, buf: &mut [u8], woken: bool) -> Option<(*const u8, usize, Option<Ts>, Option<gso::VnetHdr>)> {
        let vnet = self.vnet;
        let at = |(start, n, h): (usize, usize, Option<gso::VnetHdr>), buf: &[u8]| (buf[start..].as_ptr(), n, None, h);
        match &mut self.io {
            Io::Packet { fd, ring: None } => packet_recv(*fd, buf, vnet).map(|r| at(r, buf)),
            Io::Packet { fd, ring: Some(r) } => loop {
                match r.next_rx() {
                    Some(ring::Rx::Frame { ptr, len, ts, vnet }) => return Some((ptr, len, Some(ts), vnet)),
                    Some(ring::Rx::FromQueue) => match packet_recv(*fd, buf, vnet) {
                        Some(got) => return Some(at(got, buf)),
                        None => {
                            self.stats.errors.fetch_add(1, Ordering::Relaxed);
                            p4log!(Level::Debug, "port {}: a frame larger than a ring slot was not queued on `{}`; lost", self.number, self.iface);
                        }
                    },
                    Some(ring::Rx::Truncated(n)) => {
                        self.stats.errors.fetch_add(1, Ordering::Relaxed);
                        p4log!(Level::Debug, "port {}: a frame of {n} bytes from `{}` did not fit a ring slot; dropped", self.number, self.iface);
                    }
                    // nothing in the ring; something may still wait on the socket
                    None if woken => return packet_recv(*fd, buf, vnet).map(|got| at(got, buf)),
                    None => return None,
                }
            },
            Io::Tun { fd, ip: false } => {
                let n = unsafe { libc::read(*fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
                (n > 0).then_some((buf.as_ptr(), n as usize, None, None))
            }
            Io::Tun { fd, ip: true } => loop {
                let n = unsafe { libc::read(*fd, buf[14..].as_mut_ptr() as *mut libc::c_void, buf.len() - 14) };
                if n <= 0 {
                    return None;
                }
                let n = n as usize + 14;
                if ip_to_ethernet(&mut buf[..n], self.number) {
                    return Some((buf.as_ptr(), n, None, None));
                }
                self.stats.errors.fetch_add(1, Ordering::Relaxed);
                p4log!(Level::Debug, "port {}: dropped a packet from `{}` that is neither IPv4 nor IPv6", self.number, self.iface);
            },
            Io::Pcap { input, .. } => {
                let r = input.as_mut()?;
                match r.next(buf, self.number) {
                    Ok(Some((n, ts))) => Some((buf.as_ptr(), n, Some(ts), None)),
                    Ok(None) => {
                        p4log!(Level::Info, "port {}: end of {} ({} frames)", self.number, r.path.display(), r.frames);
                        *input = None;
                        None
                    }
                    Err(e) => {
                        p4log!(Level::Error, "port {}: {e}; no more frames are read from it", self.number);
                        self.stats.errors.fetch_add(1, Ordering::Relaxed);
                        *input = None;
                        None
                    }
                }
            }
        }
    }

    /// Give the ring slot of the frame last received back to the kernel.
    fn release(&mut self) {
        if let Io::Packet { ring: Some(r), .. } = &mut self.io {
            r.release();
        }
    }

    /// Is a frame waiting in the port's receive ring, or a segment of a super-frame (known without a system
    /// call)?
    fn rx_ready(&self) -> bool {
        self.seg_next < self.seg_count || matches!(&self.io, Io::Packet { ring: Some(r), .. } if r.rx_ready())
    }

    /// Frames queued in the transmit ring (or held to be joined) and not yet handed to the kernel.
    fn tx_pending(&self) -> usize {
        let held = self.gro.as_ref().map(|g| g.c.borrow().held()).unwrap_or(0);
        match &self.io {
            Io::Packet { ring: Some(r), .. } => r.pending() + held,
            _ => 0,
        }
    }

    /// Hand what is held to be joined and the frames queued in the transmit ring to the kernel and count them.
    fn flush_tx(&self) {
        if let Some(g) = &self.gro {
            self.send_held(&mut g.c.borrow_mut());
        }
        self.flush_ring();
    }

    /// Send what the coalescer holds: one segment into the ring as it is; a super-frame, after the frames
    /// already in the ring (order is kept), with its virtio-net header on the port's GRO socket; should the
    /// kernel refuse it, its segments, cut again here, into the ring.
    fn send_held(&self, g: &mut gro::Coalescer) {
        let (Io::Packet { fd, ring: Some(r) }, Some(gt)) = (&self.io, &self.gro) else { return };
        let Some(s) = g.take() else { return };
        if s.segs == 1 {
            self.ring_queue(*fd, r, s.frame);
            return;
        }
        self.flush_ring();
        let mut iov = [
            libc::iovec { iov_base: s.vnet.as_ptr() as *mut _, iov_len: s.vnet.len() },
            libc::iovec { iov_base: s.frame.as_ptr() as *mut _, iov_len: s.frame.len() },
        ];
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = iov.as_mut_ptr();
        msg.msg_iovlen = 2;
        if unsafe { libc::sendmsg(gt.fd, &msg, libc::MSG_DONTWAIT) } >= 0 {
            self.stats.tx.fetch_add(s.segs as u64, Ordering::Relaxed);
            self.stats.gro.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let e = std::io::Error::last_os_error();
        p4log!(Level::Debug, "port {}: a GSO frame of {} segments not taken on `{}` ({e}); sent as segments", self.number, s.segs, self.iface);
        let mut segs = vec![];
        let h = gso::VnetHdr::parse(&s.vnet).unwrap_or_default();
        if gso::segment(s.frame, &h, &mut segs).is_err() || segs.len() != s.segs {
            self.stats.errors.fetch_add(s.segs as u64, Ordering::Relaxed);
            return;
        }
        for seg in &segs {
            self.ring_queue(*fd, r, seg);
        }
    }

    /// Hand the frames queued in the transmit ring to the kernel (one system call) and count them.
    fn flush_ring(&self) {
        let Io::Packet { fd, ring: Some(r) } = &self.io else { return };
        if r.pending() == 0 {
            return;
        }
        let f = r.flush(*fd);
        self.stats.tx.fetch_add(f.sent as u64, Ordering::Relaxed);
        if f.dropped > 0 {
            self.stats.errors.fetch_add(f.dropped as u64, Ordering::Relaxed);
        }
        if let Some(e) = f.error {
            p4log!(Level::Debug, "port {}: cannot send {} frames on `{}`: {e}", self.number, f.dropped + r.pending(), self.iface);
        }
    }

    /// Look at the interface's MTU again (frames larger than it are not handed to the kernel).
    fn refresh_mtu(&self) {
        if let Io::Packet { fd, ring: Some(r) } = &self.io {
            if let Some((mtu, _)) = ring::link_info(*fd, &self.iface) {
                r.set_mtu(mtu);
            }
        }
    }

    /// Copy a frame into the transmit ring (counted as sent when flushed): first its size is checked against
    /// the interface's MTU, and a full ring is flushed.
    fn ring_queue(&self, fd: i32, r: &ring::Rings, frame: &[u8]) {
        if !r.fits(frame) {
            if let Some((mtu, _)) = ring::link_info(fd, &self.iface) {
                r.set_mtu(mtu);
            }
        }
        if !r.fits(frame) {
            self.stats.errors.fetch_add(1, Ordering::Relaxed);
            p4log!(Level::Debug, "port {}: cannot send a frame of {} bytes on `{}`: larger than its MTU", self.number, frame.len(), self.iface);
            return;
        }
        if !r.queue(frame) {
            self.flush_ring();
            if !r.queue(frame) {
                self.stats.errors.fetch_add(1, Ordering::Relaxed);
                p4log!(Level::Debug, "port {}: transmit ring of `{}` full; a frame of {} bytes dropped", self.number, self.iface, frame.len());
            }
        }
    }

    /// Send one frame (and capture it).
    fn send(&self, frame: &[u8], ts: Ts) {
        if let Some(c) = &self.capture {
            let _ = c.tx.lock().unwrap_or_else(|p| p.into_inner()).write(ts, frame);
        }
        let ok = match &self.io {
            Io::Packet { fd, ring: Some(r) } => {
                if let Some(g) = &self.gro {
                    // a TCP segment joins the super-frame held, or starts one (what was held goes first)
                    let mut g = g.c.borrow_mut();
                    let s = if r.fits(frame) { gro::parse(frame) } else { None };
                    if let Some(s) = &s {
                        if g.join(frame, s) {
                            return;
                        }
                    }
                    self.send_held(&mut g);
                    if let Some(s) = &s {
                        if g.start(frame, s) {
                            return;
                        }
                    }
                }
                self.ring_queue(*fd, r, frame);
                return;
            }
            Io::Packet { fd, ring: None } if self.vnet => {
                // a zero virtio-net header in front: nothing for the kernel to do
                let hdr = [0u8; gso::VNET_HDR_LEN];
                let mut iov = [
                    libc::iovec { iov_base: hdr.as_ptr() as *mut _, iov_len: hdr.len() },
                    libc::iovec { iov_base: frame.as_ptr() as *mut _, iov_len: frame.len() },
                ];
                let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
                msg.msg_iov = iov.as_mut_ptr();
                msg.msg_iovlen = 2;
                unsafe { libc::sendmsg(*fd, &msg, 0) >= 0 }
            }
            Io::Packet { fd, ring: None } => unsafe { libc::send(*fd, frame.as_ptr() as *const _, frame.len(), 0) >= 0 },
            Io::Tun { fd, ip: false } => unsafe { libc::write(*fd, frame.as_ptr() as *const _, frame.len()) >= 0 },
            Io::Tun { fd, ip: true } => match ethernet_to_ip(frame) {
                Some(p) => unsafe { libc::write(*fd, p.as_ptr() as *const _, p.len()) >= 0 },
                None => {
                    p4log!(Level::Debug, "port {}: a frame that is not IPv4 or IPv6 cannot go out on TUN device `{}`; dropped", self.number, self.iface);
                    false
                }
            },
            Io::Pcap { output: Some(w), .. } => w.lock().unwrap_or_else(|p| p.into_inner()).write(ts, frame).is_ok(),
            Io::Pcap { output: None, .. } => true,
        };
        if ok {
            self.stats.tx.fetch_add(1, Ordering::Relaxed);
        } else {
            self.stats.errors.fetch_add(1, Ordering::Relaxed);
            if log::enabled(Level::Debug) && !matches!(&self.io, Io::Pcap { .. }) {
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

/// Receive one frame from an AF_PACKET socket (not our own transmissions) into `buf`: where it starts and its
/// length; `None` when nothing is waiting. Frames whose TCP/UDP checksum the sender left to offload (veths
/// and other virtual devices hand such frames to packet sockets with only the pseudo-header sum in place)
/// get their checksum completed here, as a NIC would, and a VLAN tag the kernel took out is put back.
fn packet_recv(fd: i32, buf: &mut [u8], vnet: bool) -> Option<(usize, usize, Option<gso::VnetHdr>)> {
    // with PACKET_VNET_HDR the frame follows its virtio-net header
    let h_len = if vnet { gso::VNET_HDR_LEN } else { 0 };
    loop {
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        // 4 bytes of room in front for a VLAN tag
        let mut iov = libc::iovec { iov_base: buf[4..].as_mut_ptr() as *mut _, iov_len: buf.len() - 4 };
        let mut ctrl = [0u64; 16];
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = &mut sll as *mut _ as *mut libc::c_void;
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as u32;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = ctrl.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = std::mem::size_of_val(&ctrl);
        let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
        if n < 0 {
            return None;
        }
        if sll.sll_pkttype == libc::PACKET_OUTGOING {
            continue;
        }
        let n = (n as usize).min(buf.len() - 4);
        if n < h_len {
            continue;
        }
        let h = if vnet { gso::VnetHdr::parse(&buf[4..4 + h_len]) } else { None };
        // the frame: buf[f..f + n]
        let (f, n) = (4 + h_len, n - h_len);
        let mut aux: Option<AuxData> = None;
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_PACKET && (*c).cmsg_type == PACKET_AUXDATA {
                    aux = Some(std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const AuxData));
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        let Some(aux) = aux else { return Some((f, n, h)) };
        // (super-frames get their checksums computed per segment)
        if aux.status & ring::TP_STATUS_CSUMNOTREADY != 0 && !h.is_some_and(|h| h.is_gso()) {
            complete_l4_checksum(&mut buf[f..f + n]);
        }
        if let Some(tag) = ring::vlan_tag(aux.status, aux.vlan_tci, aux.vlan_tpid) {
            if n >= 12 {
                buf.copy_within(f..f + 12, f - 4);
                buf[f + 8..f + 12].copy_from_slice(&tag);
                return Some((f - 4, n + 4, h));
            }
        }
        return Some((f, n, h));
    }
}

fn log_trace(w: &mut Worker, port: u32, len: usize) {
    let lines = w.take_trace();
    let name = std::thread::current().name().unwrap_or("worker").to_string();
    eprintln!("[{name}] packet of {len} bytes on port {port}: {}", lines.join("; "));
}

/// The `--log trace` line of one packet: where it came from and where its frames went.
fn log_packet(port: u32, len: usize, out: &Outputs, cpu: Option<u32>, by_number: &HashMap<u32, usize>) {
    let mut to = vec![];
    for (p, f) in out.iter() {
        let what = if Some(p) == cpu {
            "CPU port".to_string()
        } else if by_number.contains_key(&p) {
            format!("port {p}")
        } else {
            format!("port {p} (no such port, dropped)")
        };
        to.push(format!("{what} ({} bytes)", f.len()));
    }
    let to = if to.is_empty() { "dropped".to_string() } else { to.join(", ") };
    p4log!(Level::Trace, "port {port}: {len} bytes in -> {to}");
}

/// Send what one packet produced: to ports, or to the controller for the CPU port.
fn transmit(device: &Device, engine: &p4sec_engine::Engine, ports: &[Port], by_number: &HashMap<u32, usize>, out: &Outputs, unknown: &mut u64, ts: Ts) {
    for (port, frame) in out.iter() {
        if Some(port) == device.cpu_port {
            device.packet_in(engine, frame);
            continue;
        }
        match by_number.get(&port) {
            Some(j) => ports[*j].send(frame, ts),
            None => *unknown += 1,
        }
    }
}

/// Run the packet loop until `stop` is set. Frames sent to ports that do not exist are counted and dropped.
pub fn run(device: Arc<Device>, ports: Vec<Port>, stop: Arc<AtomicBool>) {
    run_with(device, ports, stop, false)
}

/// The packet loop; with `trace`, every packet's path through the pipeline is written to stderr.
pub fn run_with(device: Arc<Device>, ports: Vec<Port>, stop: Arc<AtomicBool>, trace: bool) {
    worker_loop(device, ports, stop, trace, None)
}

/// The packet loop of one worker. With `batch` (only pcap ports, some with input), the loop ends once every
/// input is consumed and its frames processed, and sets the flag.
fn worker_loop(device: Arc<Device>, mut ports: Vec<Port>, stop: Arc<AtomicBool>, trace: bool, batch: Option<Arc<AtomicBool>>) {
    let by_number: HashMap<u32, usize> = ports.iter().enumerate().map(|(i, p)| (p.number, i)).collect();
    let mut fds: Vec<libc::pollfd> = ports.iter().map(|p| libc::pollfd { fd: p.fd(), events: libc::POLLIN, revents: 0 }).collect();
    // the last descriptor: PacketOut frames from the controller
    use std::os::fd::AsRawFd;
    fds.push(libc::pollfd { fd: device.packet_out_rx.as_raw_fd(), events: libc::POLLIN, revents: 0 });
    let mut buf = vec![0u8; pcap::MAX_FRAME + 64];
    let mut out = Outputs::default();
    let mut worker: Option<(usize, Worker)> = None;
    let mut unknown_port = 0u64;
    let mut suspect = vec![false; ports.len()];
    let writes = ports.iter().any(|p| p.writes());
    let packet_lines = log::enabled(Level::Trace);
    let mut waiting_said = false;
    let mut frames_in = 0u64;
    let rings = ports.iter().any(|p| p.mmap());
    // (the first check at once: port liveness is known from the start)
    let mut checked_at = std::time::Instant::now().checked_sub(std::time::Duration::from_secs(2)).unwrap_or_else(std::time::Instant::now);
    while !stop.load(Ordering::Relaxed) {
        // once a second: MTUs of ring ports, and every port's existence (a deleted interface does not always
        // leave an error on its socket, above all with rings)
        if checked_at.elapsed() >= std::time::Duration::from_secs(1) {
            for (i, p) in ports.iter().enumerate() {
                if rings {
                    p.refresh_mtu();
                }
                suspect[i] = true;
                // port liveness, for the watch ports of selector members (a port that is gone is down)
                device.set_port_up(p.number, fds[i].fd >= 0 && p.up());
            }
            checked_at = std::time::Instant::now();
        }
        let engine = device.engine();
        let pcap_pending = engine.is_some() && ports.iter().any(|p| p.has_input());
        if let Some(done) = &batch {
            if engine.is_none() && !waiting_said {
                p4log!(Level::Info, "waiting for a pipeline before reading the pcap inputs");
                waiting_said = true;
            }
            if engine.is_some() && !pcap_pending {
                p4log!(Level::Info, "all pcap inputs consumed ({frames_in} frames); stopping");
                done.store(true, Ordering::Release);
                break;
            }
        }
        // frames left in a transmit ring (the kernel was out of buffer space) are retried soon
        let timeout = if pcap_pending || ports.iter().any(|p| p.seg_next < p.seg_count) {
            0
        } else if rings && ports.iter().any(|p| p.tx_pending() > 0) {
            for p in &ports {
                p.flush_tx();
            }
            1
        } else {
            50
        };
        let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as u64, timeout) };
        // A socket error (the interface went down or away) is consumed here so that poll does not keep
        // reporting it, and the port is checked at once; every port is also checked once a second. A port
        // that is gone (deleted, moved to another namespace) is reported once and no longer polled.
        for (i, p) in ports.iter().enumerate() {
            if fds[i].fd < 0 {
                continue;
            }
            if fds[i].revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
                p.take_error();
                suspect[i] = true;
                fds[i].revents &= !(libc::POLLERR | libc::POLLHUP | libc::POLLNVAL);
            }
            if suspect[i] && !p.alive() {
                p4log!(Level::Warn, "port {} (`{}`) is gone; frames to it are dropped from now on", p.number, p.iface);
                fds[i].fd = -1;
                fds[i].revents = 0;
                p.stats.errors.fetch_add(1, Ordering::Relaxed);
            }
            suspect[i] = false;
        }
        if r <= 0 && !pcap_pending {
            continue;
        }
        // the pipeline as it is now: one pushed while we waited applies to what woke us up
        let engine = if pcap_pending { engine } else { device.engine() };
        let Some(engine) = engine else {
            // no pipeline yet: drain and drop (pcap inputs wait for one)
            for (i, p) in ports.iter_mut().enumerate() {
                if fds[i].fd >= 0 && !matches!(p.io, Io::Pcap { .. }) {
                    let mut woken = fds[i].revents & libc::POLLIN != 0;
                    while p.recv(&mut buf, std::mem::take(&mut woken)).is_some() {}
                    p.release();
                }
            }
            while device.packet_out_rx.recv(&mut buf).is_ok() {}
            continue;
        };
        let key = Arc::as_ptr(&engine) as usize;
        if worker.as_ref().map(|(k, _)| *k != key).unwrap_or(true) {
            let mut w = Worker::new(&engine);
            w.set_trace(trace);
            worker = Some((key, w));
        }
        let w = &mut worker.as_mut().unwrap().1;
        let mut processed = 0usize;
        for i in 0..ports.len() {
            // (a ring is also looked at when frames reached it after poll returned)
            if fds[i].revents == 0 && !ports[i].has_input() && !(fds[i].fd >= 0 && ports[i].rx_ready()) {
                continue;
            }
            // a batch per port per wake-up keeps one port from starving the others
            let mut woken = fds[i].revents & libc::POLLIN != 0;
            for _ in 0..64 {
                let Some((at, n, ts)) = ports[i].recv(&mut buf, std::mem::take(&mut woken)) else { break };
                // SAFETY: the frame is in `buf` or in the port's receive ring, where it stays until the next
                // `recv` or `release` of the port; neither happens before this iteration ends
                let frame = unsafe { std::slice::from_raw_parts(at, n) };
                let ts = match ts {
                    Some(t) => t,
                    None if writes => Ts::now(),
                    None => Ts::default(),
                };
                let p = &ports[i];
                p.stats.rx.fetch_add(1, Ordering::Relaxed);
                if let Some(c) = &p.capture {
                    let _ = c.rx.lock().unwrap_or_else(|p| p.into_inner()).write(ts, frame);
                }
                out.clear();
                engine.process(w, p.number, frame, &mut out);
                if trace {
                    log_trace(w, p.number, n);
                }
                if packet_lines {
                    log_packet(p.number, n, &out, device.cpu_port, &by_number);
                }
                transmit(&device, &engine, &ports, &by_number, &out, &mut unknown_port, ts);
                processed += 1;
                if p.has_input() {
                    frames_in += 1;
                }
            }
            ports[i].release();
            // what this batch produced goes out now: one system call per port with frames in its ring
            if rings {
                for p in &ports {
                    p.flush_tx();
                }
            }
        }
        // PacketOut: enters the pipeline as received on the CPU port
        if let Some(cpu) = device.cpu_port {
            for _ in 0..64 {
                let Ok(n) = device.packet_out_rx.recv(&mut buf) else { break };
                out.clear();
                engine.process(w, cpu, &buf[..n], &mut out);
                if trace {
                    log_trace(w, cpu, n);
                }
                if packet_lines {
                    log_packet(cpu, n, &out, device.cpu_port, &by_number);
                }
                transmit(&device, &engine, &ports, &by_number, &out, &mut unknown_port, if writes { Ts::now() } else { Ts::default() });
                processed += 1;
            }
            if rings {
                for p in &ports {
                    p.flush_tx();
                }
            }
        } else {
            while device.packet_out_rx.recv(&mut buf).is_ok() {
                unknown_port += 1;
            }
        }
        device.deliver_digests(&engine);
        if writes && processed > 0 {
            for p in &ports {
                p.flush();
            }
        }
        let _ = unknown_port;
    }
    for p in &ports {
        p.flush_tx();
        p.flush();
    }
}

/// What [`start`] runs.
#[derive(Clone, Debug, Default)]
pub struct Config {
    pub ports: Vec<PortSpec>,
    /// Packet threads (at least 1).
    pub workers: usize,
    /// Log every packet's path through the pipeline.
    pub trace: bool,
    /// Capture every port's received and sent frames to DIR/port<N>-in.pcap and DIR/port<N>-out.pcap.
    pub pcap_dir: Option<PathBuf>,
}

/// The running data plane.
pub struct Switch {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    /// Every port's number, name and counters (for the metrics).
    pub stats: Vec<(u32, String, Arc<PortStats>)>,
    batch: Option<Arc<AtomicBool>>,
    pcap_stats: Vec<Arc<PortStats>>,
}

impl Switch {
    /// A batch run: only pcap ports (some with input) and no CPU port; it ends by itself.
    pub fn is_batch(&self) -> bool {
        self.batch.is_some()
    }

    /// Has a batch run consumed all its input?
    pub fn finished(&self) -> bool {
        self.batch.as_ref().map(|d| d.load(Ordering::Acquire)).unwrap_or(false)
    }

    /// Errors of the pcap ports so far: inputs that could not be read to their end, frames that could not
    /// be written (a batch run with errors should end with a failure).
    pub fn pcap_errors(&self) -> u64 {
        self.pcap_stats.iter().map(|s| s.errors.load(Ordering::Relaxed)).sum()
    }

    /// Stop the packet threads and wait for them: files are flushed, TUN/TAP devices removed.
    pub fn shutdown(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Open all ports (for `cfg.workers` workers) and start the packet threads. Nothing is left open on error.
pub fn start(device: Arc<Device>, cfg: &Config) -> Result<Switch, String> {
    start_with_stop(device, cfg, Arc::new(AtomicBool::new(false)))
}

fn start_with_stop(device: Arc<Device>, cfg: &Config, stop: Arc<AtomicBool>) -> Result<Switch, String> {
    let workers = cfg.workers;
    if workers == 0 {
        return Err("at least one worker is needed".into());
    }
    check_ports(&cfg.ports, device.cpu_port, cfg.pcap_dir.as_deref())?;
    // pcap inputs first (nothing to undo when one is bad), then the live ports, then the files written
    let mut inputs: Vec<Option<pcap::Reader>> = vec![];
    for s in &cfg.ports {
        inputs.push(match &s.kind {
            PortKind::Pcap { input: Some(f), .. } => Some(pcap::Reader::open(f).map_err(|e| format!("port {}: {e}", s.number))?),
            _ => None,
        });
    }
    // fanout group ids: unique per process and port
    let base = (std::process::id() as u16).wrapping_mul(31);
    let stats: Vec<Arc<PortStats>> = cfg.ports.iter().map(|_| Arc::default()).collect();
    let mut per_port: Vec<Vec<Port>> = vec![];
    for (k, s) in cfg.ports.iter().enumerate() {
        let n = s.number;
        let mut v = vec![];
        match &s.kind {
            PortKind::Iface(iface) => {
                for _ in 0..workers {
                    v.push(if workers == 1 { Port::open(n, iface)? } else { Port::open_fanout(n, iface, base.wrapping_add(k as u16))? });
                }
                if gro_wanted() {
                    for p in v.iter_mut() {
                        if let Err(e) = p.enable_gro() {
                            p4log!(Level::Debug, "port {n}: TCP segments are not joined on `{iface}`: {e}");
                        }
                    }
                }
                let gro = if v[0].gro.is_some() { ", TCP segments of a stream joined into GSO super-frames on transmit" } else { "" };
                let how = match &v[0].io {
                    Io::Packet { ring: Some(r), .. } => format!("memory-mapped rings, {} receive and {} transmit slots{gro}", r.slots().0, r.slots().1),
                    _ => "one recvmsg/send per frame".into(),
                };
                p4log!(Level::Info, "port {n}: interface `{iface}` ({how})");
            }
            PortKind::Tap(name) | PortKind::Tun(name) => {
                let tap = matches!(s.kind, PortKind::Tap(_));
                let existed = tun::exists(name);
                for _ in 0..workers {
                    let fd = tun::open_queue(name, tap, workers > 1).map_err(|e| format!("port {n}: {e}"))?;
                    v.push(Port {
                        number: n,
                        iface: s.label.clone(),
                        io: Io::Tun { fd, ip: !tap },
                        stats: Arc::default(),
                        capture: None,
                        vnet: false,
                        segs: vec![],
                        seg_count: 0,
                        seg_next: 0,
                        gro: None,
                    });
                }
                tun::set_up(name).map_err(|e| format!("port {n}: {e}"))?;
                let k = if tap { "TAP" } else { "TUN" };
                if existed {
                    p4log!(Level::Info, "port {n}: {k} device `{name}` (an existing persistent device, left in place at exit)");
                } else {
                    p4log!(Level::Info, "port {n}: {k} device `{name}` created (removed at exit)");
                }
            }
            PortKind::Pcap { .. } => {}
        }
        per_port.push(v);
    }
    let mut written = vec![];
    for (k, s) in cfg.ports.iter().enumerate() {
        let n = s.number;
        if let PortKind::Pcap { input, output } = &s.kind {
            let w = match output {
                Some(f) => Some(Arc::new(Mutex::new(pcap::Writer::create(f).map_err(|e| format!("port {n}: {e}"))?))),
                None => None,
            };
            let mut input_reader = inputs[k].take();
            for _ in 0..workers {
                let io = Io::Pcap { input: input_reader.take(), output: w.clone() };
                per_port[k].push(Port {
                    number: n,
                    iface: s.label.clone(),
                    io,
                    stats: Arc::default(),
                    capture: None,
                    vnet: false,
                    segs: vec![],
                    seg_count: 0,
                    seg_next: 0,
                    gro: None,
                });
            }
            let from = input.as_ref().map(|f| format!("frames from {}", f.display())).unwrap_or_else(|| "no input".into());
            let to = output.as_ref().map(|f| format!("frames sent written to {}", f.display())).unwrap_or_else(|| "frames sent discarded".into());
            p4log!(Level::Info, "port {n}: pcap, {from}, {to}");
        }
        if let Some(dir) = &cfg.pcap_dir {
            if written.is_empty() {
                std::fs::create_dir_all(dir).map_err(|e| format!("--pcap-dir: cannot create {}: {e}", dir.display()))?;
            }
            let (i, o) = capture_paths(dir, n);
            let c = Arc::new(Capture { rx: Mutex::new(pcap::Writer::create(&i)?), tx: Mutex::new(pcap::Writer::create(&o)?) });
            for p in per_port[k].iter_mut() {
                p.capture = Some(c.clone());
            }
            written.push(n);
        }
        for p in per_port[k].iter_mut() {
            p.stats = stats[k].clone();
        }
    }
    if let Some(dir) = &cfg.pcap_dir {
        p4log!(Level::Info, "capturing the frames of ports {written:?} to {}", dir.display());
    }
    let batch_run = cfg.ports.iter().any(|s| matches!(s.kind, PortKind::Pcap { input: Some(_), .. }))
        && !cfg.ports.iter().any(|s| s.is_live())
        && device.cpu_port.is_none();
    let batch = batch_run.then(|| Arc::new(AtomicBool::new(false)));
    let mut sets: Vec<Vec<Port>> = (0..workers).map(|_| vec![]).collect();
    for v in per_port {
        for (w, p) in v.into_iter().enumerate() {
            sets[w].push(p);
        }
    }
    let mut threads = vec![];
    for (i, set) in sets.into_iter().enumerate() {
        let (d, st) = (device.clone(), stop.clone());
        let b = if i == 0 { batch.clone() } else { None };
        let trace = cfg.trace;
        let t = std::thread::Builder::new()
            .name(format!("p4sec-worker-{i}"))
            .spawn(move || worker_loop(d, set, st, trace, b))
            .map_err(|e| format!("cannot start a worker thread: {e}"));
        match t {
            Ok(t) => threads.push(t),
            Err(e) => {
                stop.store(true, Ordering::Relaxed);
                for t in threads {
                    let _ = t.join();
                }
                return Err(e);
            }
        }
    }
    let pcap_stats = cfg.ports.iter().zip(&stats).filter(|(s, _)| !s.is_live()).map(|(_, st)| st.clone()).collect();
    let stats = cfg.ports.iter().zip(stats).map(|(s, st)| (s.number, s.label.clone(), st)).collect();
    Ok(Switch { stop, threads, stats, batch, pcap_stats })
}

/// Run `workers` packet loops, each with its own sockets on every port (joined in a PACKET_FANOUT group per
/// port, so flows are spread over the workers) and its own engine worker state. The threads run until
/// `stop` is set.
pub fn run_workers(
    device: Arc<Device>,
    ports: &[(u32, String)],
    workers: usize,
    stop: Arc<AtomicBool>,
    trace: bool,
) -> Result<Vec<(u32, String, Arc<PortStats>)>, String> {
    let specs = ports.iter().map(|(n, i)| PortSpec { number: *n, kind: PortKind::Iface(i.clone()), label: i.clone() }).collect();
    let mut sw = start_with_stop(device, &Config { ports: specs, workers, trace, pcap_dir: None }, stop)?;
    sw.threads.clear(); // detached: they stop with `stop`
    Ok(std::mem::take(&mut sw.stats))
}

static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    // a second signal ends the process at once
    if SIGNALLED.swap(true, Ordering::SeqCst) {
        unsafe { libc::_exit(130) };
    }
}

/// Catch SIGINT and SIGTERM so that the switch can stop cleanly (see [`signalled`]).
pub fn install_signal_handlers() {
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_flags = libc::SA_RESTART;
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
    }
}

/// Has SIGINT or SIGTERM arrived since [`install_signal_handlers`]?
pub fn signalled() -> bool {
    SIGNALLED.load(Ordering::SeqCst)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_specs() {
        let p = PortSpec::parse("3=tap:t0").unwrap();
        assert_eq!((p.number, p.kind), (3, PortKind::Tap("t0".into())));
        assert_eq!(PortSpec::parse("4=tun:x").unwrap().kind, PortKind::Tun("x".into()));
        assert_eq!(PortSpec::parse("1=veth1").unwrap().kind, PortKind::Iface("veth1".into()));
        assert_eq!(
            PortSpec::parse("5=pcap:in=a,b.pcap,out=c.pcap").unwrap().kind,
            PortKind::Pcap { input: Some("a,b.pcap".into()), output: Some("c.pcap".into()) }
        );
        assert_eq!(PortSpec::parse("5=pcap:out=c.pcap").unwrap().kind, PortKind::Pcap { input: None, output: Some("c.pcap".into()) });
        for (bad, msg) in [
            ("1=foo:bar", "unknown port kind `foo`"),
            ("x=veth1", "bad port number"),
            ("veth1", "--port needs"),
            ("1=pcap:", "needs in=FILE"),
            ("1=pcap:in=a,in=b", "given twice"),
            ("1=pcap:size=3", "unknown pcap option"),
            ("1=pcap:in=a.pcap,snaplen=3", "unknown pcap option `snaplen=3`"),
            ("1=tap:", "empty"),
            ("1=tun:abcdefghijklmnopq", "too long"),
        ] {
            let e = PortSpec::parse(bad).unwrap_err();
            assert!(e.contains(msg), "{bad}: {e}");
        }
    }

    #[test]
    fn duplicates_are_rejected() {
        let specs = |v: &[&str]| v.iter().map(|s| PortSpec::parse(s).unwrap()).collect::<Vec<_>>();
        assert!(check_ports(&specs(&["1=a", "1=b"]), None, None).unwrap_err().contains("port 1 is given twice"));
        assert!(check_ports(&specs(&["1=a", "2=tap:a"]), None, None).unwrap_err().contains("interface `a` is named by two ports"));
        assert!(check_ports(&specs(&["1=pcap:out=/tmp/x.pcap", "2=pcap:out=/tmp/x.pcap"]), None, None).unwrap_err().contains("written by two ports"));
        assert!(check_ports(&specs(&["1=pcap:in=/tmp/x.pcap", "2=pcap:out=/tmp/x.pcap"]), None, None).unwrap_err().contains("read by the port"));
        assert!(check_ports(&specs(&["1=a"]), Some(1), None).unwrap_err().contains("CPU port"));
        assert!(check_ports(&specs(&["1=a", "2=b"]), Some(3), None).is_ok());
    }

    #[test]
    fn ones_complement_sums() {
        let simple = |d: &[u8]| {
            let mut sum: u64 = d.chunks(2).map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u64).sum();
            while sum >> 16 != 0 {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            sum as u16
        };
        let mut x: u32 = 12345;
        let data: Vec<u8> = (0..3000)
            .map(|_| {
                x = x.wrapping_mul(1103515245).wrapping_add(12345);
                (x >> 16) as u8
            })
            .collect();
        for start in 0..9 {
            for len in [0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1499, 1500, 2991] {
                let d = &data[start..start + len];
                assert_eq!(ones_sum(d), simple(d), "start {start} len {len}");
            }
        }
        assert_eq!(ones_sum(&[0xff; 64]), 0xffff);
    }

    #[test]
    fn vlan_tags_from_the_kernel() {
        assert_eq!(ring::vlan_tag(0, 5, 0x8100), None);
        assert_eq!(ring::vlan_tag(ring::TP_STATUS_VLAN_VALID, 0x6007, 0), Some([0x81, 0x00, 0x60, 0x07]));
        let both = ring::TP_STATUS_VLAN_VALID | ring::TP_STATUS_VLAN_TPID_VALID;
        assert_eq!(ring::vlan_tag(both, 7, 0x88a8), Some([0x88, 0xa8, 0, 7]));
        assert_eq!(ring::vlan_tag(both, 7, 0), Some([0x81, 0x00, 0, 7]));
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

    #[test]
    fn pcap_round_trip() {
        let dir = std::env::temp_dir().join(format!("p4sec-pcap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("a.pcap");
        {
            let mut w = pcap::Writer::create(&f).unwrap();
            w.write(Ts { sec: 5, usec: 6 }, &[1, 2, 3]).unwrap();
            w.write(Ts { sec: 7, usec: 8 }, &[4; 60]).unwrap();
        }
        let mut r = pcap::Reader::open(&f).unwrap();
        let mut buf = vec![0u8; pcap::MAX_FRAME + 64];
        assert_eq!(r.next(&mut buf, 1).unwrap(), Some((3, Ts { sec: 5, usec: 6 })));
        assert_eq!(&buf[..3], &[1, 2, 3]);
        assert_eq!(r.next(&mut buf, 1).unwrap(), Some((60, Ts { sec: 7, usec: 8 })));
        assert_eq!(r.next(&mut buf, 1).unwrap(), None);
        std::fs::write(&f, b"hello, this is not a pcap file at all").unwrap();
        assert!(pcap::Reader::open(&f).err().unwrap().contains("not a pcap file"));
        std::fs::write(&f, b"\xd4\xc3").unwrap();
        assert!(pcap::Reader::open(&f).err().unwrap().contains("not a pcap file"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
