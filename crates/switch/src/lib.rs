//! The switch data plane: Linux interfaces as ports through AF_PACKET raw sockets, and the packet loop
//! that feeds received frames to the engine installed on the P4Runtime device and transmits what it
//! emits. The engine is taken from the device for every batch, so a new pipeline pushed by the controller
//! takes effect without restarting the loop.

use p4sec_engine::{Outputs, Worker};
use p4sec_p4runtime::server::Device;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

pub mod metrics;

const PACKET_AUXDATA: libc::c_int = 8;
const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;

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
    let mut sum: u64 = 0;
    let mut chunks = f[l4..].chunks_exact(2);
    for c in &mut chunks {
        sum += u16::from_be_bytes([c[0], c[1]]) as u64;
    }
    if let [b] = chunks.remainder() {
        sum += (*b as u64) << 8;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let mut c = !(sum as u16);
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
}

/// A port: an AF_PACKET socket bound to one interface.
pub struct Port {
    pub number: u32,
    pub iface: String,
    fd: i32,
    pub stats: Arc<PortStats>,
}

impl Port {
    /// Open `iface` (e.g. a veth) as port `number`.
    pub fn open(number: u32, iface: &str) -> Result<Port, String> {
        let name = std::ffi::CString::new(iface).map_err(|_| format!("bad interface name `{iface}`"))?;
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if index == 0 {
            return Err(format!("port {number}: no interface named `{iface}`"));
        }
        let proto = (libc::ETH_P_ALL as u16).to_be();
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK, proto as i32) };
        if fd < 0 {
            return Err(format!("port {number}: cannot open a packet socket on `{iface}`: {}", std::io::Error::last_os_error()));
        }
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = index as i32;
        let r = unsafe { libc::bind(fd, &sll as *const _ as *const libc::sockaddr, std::mem::size_of::<libc::sockaddr_ll>() as u32) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            unsafe { libc::close(fd) };
            return Err(format!("port {number}: cannot bind to `{iface}`: {e}"));
        }
        let one: libc::c_int = 1;
        unsafe {
            libc::setsockopt(fd, libc::SOL_PACKET, PACKET_AUXDATA, &one as *const _ as *const libc::c_void, std::mem::size_of::<libc::c_int>() as u32)
        };
        Ok(Port { number, iface: iface.to_string(), fd, stats: Arc::default() })
    }

    /// Open `iface` as one of several sockets of a PACKET_FANOUT group: the kernel spreads received frames
    /// over the group's sockets by flow hash, so each worker gets whole flows (packet order within a flow
    /// is kept).
    pub fn open_fanout(number: u32, iface: &str, group: u16) -> Result<Port, String> {
        let p = Port::open(number, iface)?;
        let arg: libc::c_int = (group as libc::c_int) | ((libc::PACKET_FANOUT_HASH as libc::c_int) << 16);
        let r = unsafe {
            libc::setsockopt(p.fd, libc::SOL_PACKET, libc::PACKET_FANOUT, &arg as *const _ as *const libc::c_void, std::mem::size_of::<libc::c_int>() as u32)
        };
        if r < 0 {
            return Err(format!("port {number}: cannot join fanout group {group} on `{iface}`: {}", std::io::Error::last_os_error()));
        }
        Ok(p)
    }

    /// Read and clear the socket's pending error.
    fn take_error(&self) {
        let mut e: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as u32;
        unsafe { libc::getsockopt(self.fd, libc::SOL_SOCKET, libc::SO_ERROR, &mut e as *mut _ as *mut libc::c_void, &mut len) };
    }

    /// Does the interface still exist?
    fn alive(&self) -> bool {
        let Ok(name) = std::ffi::CString::new(self.iface.as_str()) else { return false };
        unsafe { libc::if_nametoindex(name.as_ptr()) != 0 }
    }

    /// Receive one frame (not our own transmissions); `None` when nothing is waiting. Frames whose TCP/UDP
    /// checksum the sender left to offload (veths and other virtual devices hand such frames to packet
    /// sockets with only the pseudo-header sum in place) get their checksum completed here, as a NIC would.
    fn recv(&self, buf: &mut [u8]) -> Option<usize> {
        loop {
            let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut iov = libc::iovec { iov_base: buf.as_mut_ptr() as *mut _, iov_len: buf.len() };
            let mut ctrl = [0u64; 16];
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_name = &mut sll as *mut _ as *mut libc::c_void;
            msg.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as u32;
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = ctrl.as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = std::mem::size_of_val(&ctrl);
            let n = unsafe { libc::recvmsg(self.fd, &mut msg, 0) };
            if n < 0 {
                return None;
            }
            if sll.sll_pkttype == libc::PACKET_OUTGOING as u8 {
                continue;
            }
            let n = (n as usize).min(buf.len());
            let mut csum_not_ready = false;
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(&msg);
                while !c.is_null() {
                    if (*c).cmsg_level == libc::SOL_PACKET && (*c).cmsg_type == PACKET_AUXDATA {
                        let status = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const u32);
                        csum_not_ready = status & TP_STATUS_CSUMNOTREADY != 0;
                    }
                    c = libc::CMSG_NXTHDR(&msg, c);
                }
            }
            if csum_not_ready {
                complete_l4_checksum(&mut buf[..n]);
            }
            return Some(n);
        }
    }

    fn send(&self, frame: &[u8]) {
        let n = unsafe { libc::send(self.fd, frame.as_ptr() as *const _, frame.len(), 0) };
        if n < 0 {
            self.stats.errors.fetch_add(1, Ordering::Relaxed);
        } else {
            self.stats.tx.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Drop for Port {
    fn drop(&mut self) {
        unsafe { libc::close(self.fd) };
    }
}

fn log_trace(w: &mut Worker, port: u32, len: usize) {
    let lines = w.take_trace();
    let name = std::thread::current().name().unwrap_or("worker").to_string();
    eprintln!("[{name}] packet of {len} bytes on port {port}: {}", lines.join("; "));
}

/// Send what one packet produced: to ports, or to the controller for the CPU port.
fn transmit(device: &Device, engine: &p4sec_engine::Engine, ports: &[Port], by_number: &HashMap<u32, usize>, out: &Outputs, unknown: &mut u64) {
    for (port, frame) in out.iter() {
        if Some(port) == device.cpu_port {
            device.packet_in(engine, frame);
            continue;
        }
        match by_number.get(&port) {
            Some(j) => ports[*j].send(frame),
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
    let by_number: HashMap<u32, usize> = ports.iter().enumerate().map(|(i, p)| (p.number, i)).collect();
    let mut fds: Vec<libc::pollfd> = ports.iter().map(|p| libc::pollfd { fd: p.fd, events: libc::POLLIN, revents: 0 }).collect();
    // the last descriptor: PacketOut frames from the controller
    use std::os::fd::AsRawFd;
    fds.push(libc::pollfd { fd: device.packet_out_rx.as_raw_fd(), events: libc::POLLIN, revents: 0 });
    let mut buf = vec![0u8; 65536];
    let mut out = Outputs::default();
    let mut worker: Option<(usize, Worker)> = None;
    let mut unknown_port = 0u64;
    let mut suspect = vec![false; ports.len()];
    while !stop.load(Ordering::Relaxed) {
        let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as u64, 50) };
        // A socket error (the interface went down or away) is consumed here so that poll does not keep
        // reporting it; the port is then checked on every wake-up until it is either back (frames arrive
        // again) or gone (deleted, moved to another namespace): then it is reported once and no longer polled.
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
                eprintln!("p4sec switch: port {} (`{}`) is gone; frames to it are dropped from now on", p.number, p.iface);
                fds[i].fd = -1;
                fds[i].revents = 0;
                suspect[i] = false;
                p.stats.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        if r <= 0 {
            continue;
        }
        let Some(engine) = device.engine() else {
            // no pipeline yet: drain and drop
            for p in &ports {
                while p.recv(&mut buf).is_some() {}
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
        for (i, p) in ports.iter().enumerate() {
            if fds[i].revents == 0 {
                continue;
            }
            // a batch per port per wake-up keeps one port from starving the others
            for _ in 0..64 {
                let Some(n) = p.recv(&mut buf) else { break };
                p.stats.rx.fetch_add(1, Ordering::Relaxed);
                out.clear();
                engine.process(w, p.number, &buf[..n], &mut out);
                if trace {
                    log_trace(w, p.number, n);
                }
                transmit(&device, &engine, &ports, &by_number, &out, &mut unknown_port);
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
                transmit(&device, &engine, &ports, &by_number, &out, &mut unknown_port);
            }
        } else {
            while device.packet_out_rx.recv(&mut buf).is_ok() {
                unknown_port += 1;
            }
        }
        device.deliver_digests(&engine);
        let _ = unknown_port;
    }
}

/// Run `workers` packet loops, each with its own sockets on every port (joined in a PACKET_FANOUT group per
/// port, so flows are spread over the workers) and its own engine worker state.
pub fn run_workers(device: Arc<Device>, ports: &[(u32, String)], workers: usize, stop: Arc<AtomicBool>, trace: bool) -> Result<Vec<(u32, String, Arc<PortStats>)>, String> {
    if workers == 0 {
        return Err("at least one worker is needed".into());
    }
    // fanout group ids: unique per process and port
    let base = (std::process::id() as u16).wrapping_mul(31);
    let stats: Vec<(u32, String, Arc<PortStats>)> = ports.iter().map(|(n, i)| (*n, i.clone(), Arc::default())).collect();
    let mut sets = vec![];
    for _ in 0..workers {
        let mut set = vec![];
        for (k, (n, iface)) in ports.iter().enumerate() {
            let mut p = if workers == 1 { Port::open(*n, iface)? } else { Port::open_fanout(*n, iface, base.wrapping_add(k as u16))? };
            p.stats = stats[k].2.clone();
            set.push(p);
        }
        sets.push(set);
    }
    for (i, set) in sets.into_iter().enumerate() {
        let (d, stop) = (device.clone(), stop.clone());
        std::thread::Builder::new()
            .name(format!("p4sec-worker-{i}"))
            .spawn(move || run_with(d, set, stop, trace))
            .map_err(|e| format!("cannot start a worker thread: {e}"))?;
    }
    Ok(stats)
}
