//! Zero heap allocations per frame in the switch's steady state, measured on the worker's own
//! packet loop (`p4sec_switch::start` with one worker): a counting global allocator counts every
//! `alloc`/`realloc` of the process, the frames enter through a pcap port whose input is a FIFO the
//! test writes to, so the worker can be held between a warm-up and a measured run of 100,000
//! frames. The count taken when the worker has taken every warm-up frame and sleeps waiting for
//! more must equal the count taken when it has taken every measured frame and sleeps again.
//!
//! Paths covered (each a separate switch with its own program):
//! - `ipv4_router.p4` (the `p4sec bench` router): several flows, LPM hits to two ports, misses and
//!   TTL drops; frames written to a pcap output and (as root) to a TAP device (its transmit
//!   batches).
//! - `url_filter.p4`: I2E clone of every HTTP packet, the clone recirculating once per payload
//!   byte, the original recirculating until the verdict, plus unscanned frames forwarded at once.
//! - `ipsec_gateway.p4` with the `esp_sad` extern: ESP tunnel encapsulation and AES-GCM-128
//!   encryption of LAN packets (sent, as root, to a TUN device: the Ethernet header stripped,
//!   transmit batches), and decryption and decapsulation of ESP packets (with the anti-replay
//!   window moving).
//!
//! Not covered: receiving from AF_PACKET, AF_XDP, TAP and TUN ports and sending to AF_PACKET and
//! AF_XDP ports (their per-frame code is system calls and ring accesses on buffers allocated when
//! the port opens), the traffic manager's queues, PacketIn/digests to a controller (protobuf
//! messages are allocated per message by design) and `--log trace`.

use p4sec_engine::Engine;
use p4sec_ir::{ActionCall, FieldMatch, TableEntry, Value};
use p4sec_p4runtime::server::Device;
use p4sec_switch::{start, Config, PortKind, PortSpec, PortStats};
use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);

/// With `P4SEC_ALLOC_TRACE` set, the first allocations of each measured stretch print where they
/// happen (to find them; the test fails either way).
static TRACE: AtomicU64 = AtomicU64::new(0);
thread_local! {
    static IN_TRACE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn count() {
    ALLOCS.fetch_add(1, Ordering::Relaxed);
    if TRACE.load(Ordering::Relaxed) > 0 && !IN_TRACE.with(|t| t.replace(true)) {
        if TRACE.fetch_sub(1, Ordering::Relaxed) > 0 {
            eprintln!(
                "allocation at:\n{}",
                std::backtrace::Backtrace::force_capture()
            );
        }
        IN_TRACE.with(|t| t.set(false));
    }
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const WARM_UP: usize = 5_000;
const MEASURED: usize = 100_000;

fn action(e: &Engine, name: &str) -> u32 {
    e.prog
        .actions
        .iter()
        .position(|a| a.name == name)
        .unwrap_or_else(|| panic!("no action {name}")) as u32
}

fn insert(
    e: &Engine,
    table: &str,
    matches: Vec<FieldMatch>,
    act: &str,
    args: Vec<Value>,
    priority: i32,
) {
    let t = e
        .table_index(table)
        .unwrap_or_else(|| panic!("no table {table}"));
    let entry = TableEntry {
        matches,
        action: ActionCall {
            action: action(e, act),
            args,
        },
        priority,
    };
    e.table_insert(t, entry)
        .unwrap_or_else(|err| panic!("{table}: {err}"));
}

fn ip(a: [u8; 4]) -> u64 {
    u32::from_be_bytes(a) as u64
}

/// An Ethernet/IPv4 frame carrying `proto` (17 UDP or 6 TCP) between the ports, with `payload`.
fn ipv4_frame(
    src: [u8; 4],
    dst: [u8; 4],
    ttl: u8,
    proto: u8,
    sport: u16,
    dport: u16,
    payload: &[u8],
) -> Vec<u8> {
    let l4 = if proto == 6 { 20 } else { 8 };
    let total = 20 + l4 + payload.len();
    let mut p = vec![0u8; 14 + total];
    p[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    p[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    p[12] = 0x08;
    let h = &mut p[14..34];
    h[0] = 0x45;
    h[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    h[8] = ttl;
    h[9] = proto;
    h[12..16].copy_from_slice(&src);
    h[16..20].copy_from_slice(&dst);
    let c = p4sec_engine::hash::csum16(h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    p[34..36].copy_from_slice(&sport.to_be_bytes());
    p[36..38].copy_from_slice(&dport.to_be_bytes());
    if proto == 6 {
        p[46] = 5 << 4; // data offset
        p[47] = 0x18;
    } else {
        p[38..40].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    }
    p[14 + 20 + l4..].copy_from_slice(payload);
    p
}

/// pcap records (Ethernet) of `frames`, one byte string.
fn records(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut b = Vec::with_capacity(frames.iter().map(|f| f.len() + 16).sum());
    for (i, f) in frames.iter().enumerate() {
        b.extend_from_slice(&(i as u32 / 1000).to_le_bytes());
        b.extend_from_slice(&(i as u32 % 1000).to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(f);
    }
    b
}

/// The scheduler state letter of thread `tid` of this process (`S`: asleep), read without
/// allocating.
fn thread_state(path: &std::ffi::CStr) -> u8 {
    let mut buf = [0u8; 256];
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY) };
    if fd < 0 {
        return 0;
    }
    let n = unsafe { libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
    unsafe { libc::close(fd) };
    if n <= 0 {
        return 0;
    }
    // "TID (COMM) STATE ...": the state follows the last ')'
    let s = &buf[..n as usize];
    match s.iter().rposition(|&c| c == b')') {
        Some(i) if i + 2 < s.len() => s[i + 2],
        _ => 0,
    }
}

/// The stat file of the switch's worker thread (named `p4sec-worker-0`).
fn worker_stat_path() -> std::ffi::CString {
    for _ in 0..500 {
        for e in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            if comm.trim() == "p4sec-worker-0" {
                let p = e.path().join("stat");
                return std::ffi::CString::new(p.to_str().unwrap()).unwrap();
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("no worker thread");
}

/// Wait (at most 60 s) until `engine` took `n` frames and the worker has since been asleep (blocked
/// reading the FIFO for more) for several looks in a row. Allocates nothing.
fn wait_idle(engine: &Engine, n: u64, stat: &std::ffi::CStr) {
    let t0 = std::time::Instant::now();
    let mut asleep = 0;
    while asleep < 5 {
        assert!(
            t0.elapsed().as_secs() < 60,
            "the worker did not take the frames"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
        if engine.stats().packets_in >= n && thread_state(stat) == b'S' {
            asleep += 1;
        } else {
            asleep = 0;
        }
    }
    assert_eq!(engine.stats().packets_in, n, "frames taken by the pipeline");
}

struct Run {
    /// Heap allocations between the end of the warm-up and the end of the measured frames.
    allocs: u64,
    /// Frames sent by each port (by port number 1, 2, 3), warm-up and measured frames together.
    tx: [u64; 3],
    /// Frames measured.
    frames: usize,
}

/// A switch with `device`'s pipeline and one worker: port 1 reads a FIFO and writes a pcap file,
/// ports 2 and 3 write pcap files, or are the TAP or TUN devices `live` names for them (see
/// [`live_ports`]). The warm-up frames, then the measured ones, enter on port 1.
fn run(
    name: &str,
    device: Arc<Device>,
    warm: &[Vec<u8>],
    measured: &[Vec<u8>],
    live: &[(u32, PortKind)],
) -> Run {
    let dir = std::env::temp_dir().join(format!("p4sec-no-alloc-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("in.pcap");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(
        unsafe { libc::mkfifo(c.as_ptr(), 0o600) },
        0,
        "mkfifo: {}",
        std::io::Error::last_os_error()
    );
    // read-write: opening neither blocks nor waits for the switch; closing it is the input's end
    let mut w = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(&fifo)
        .unwrap();
    let mut header = vec![];
    header.extend_from_slice(&0xa1b2c3d4u32.to_le_bytes());
    header.extend_from_slice(&[2, 0, 4, 0]);
    header.extend_from_slice(&[0; 8]);
    header.extend_from_slice(&65535u32.to_le_bytes());
    header.extend_from_slice(&1u32.to_le_bytes());
    w.write_all(&header).unwrap();
    let out = |n: u32| -> PathBuf { dir.join(format!("out{n}.pcap")) };
    let mut ports = vec![
        PortSpec {
            number: 1,
            kind: PortKind::Pcap {
                input: Some(fifo.clone()),
                output: Some(out(1)),
            },
            label: "in".into(),
        },
        PortSpec {
            number: 2,
            kind: PortKind::Pcap {
                input: None,
                output: Some(out(2)),
            },
            label: "out2".into(),
        },
        PortSpec {
            number: 3,
            kind: PortKind::Pcap {
                input: None,
                output: Some(out(3)),
            },
            label: "out3".into(),
        },
    ];
    for (n, kind) in live {
        ports[*n as usize - 1] = PortSpec {
            number: *n,
            kind: kind.clone(),
            label: format!("live{n}"),
        };
    }
    let batch = live.is_empty();
    let engine = device.engine().unwrap();
    let sw = start(
        device,
        &Config {
            ports,
            workers: 1,
            ..Config::default()
        },
    )
    .unwrap();
    let stats: Vec<Arc<PortStats>> = sw.stats.iter().map(|(_, _, s)| s.clone()).collect();
    let stat = worker_stat_path();
    let warm_bytes = records(warm);
    let measured_bytes = records(measured);
    w.write_all(&warm_bytes).unwrap();
    wait_idle(&engine, warm.len() as u64, &stat);
    let trace = std::env::var_os("P4SEC_ALLOC_TRACE").is_some();
    let before = ALLOCS.load(Ordering::Relaxed);
    if trace {
        TRACE.store(3, Ordering::Relaxed);
    }
    // (nothing in this stretch allocates on the test's side: the bytes are ready, waiting reads
    // atomics)
    w.write_all(&measured_bytes).unwrap();
    wait_idle(&engine, (warm.len() + measured.len()) as u64, &stat);
    let after = ALLOCS.load(Ordering::Relaxed);
    TRACE.store(0, Ordering::Relaxed);
    drop(w);
    // (with a live port the switch runs on after its input ends; everything was processed by now)
    let t0 = std::time::Instant::now();
    while batch && !sw.finished() {
        assert!(
            t0.elapsed().as_secs() < 30,
            "the switch did not end at the end of its input"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(sw.pcap_errors(), 0);
    sw.shutdown();
    let tx: Vec<u64> = stats.iter().map(|s| s.tx.load(Ordering::Relaxed)).collect();
    for (n, _) in live {
        assert_eq!(
            stats[*n as usize - 1].errors.load(Ordering::Relaxed),
            0,
            "errors on port {n}"
        );
    }
    // the frames written are all there: the measured run's output really went through the pcap
    // writers
    for n in (1..=3u32).filter(|n| !live.iter().any(|(l, _)| l == n)) {
        let mut r = p4sec_switch::pcap_file::Reader::open(&out(n)).unwrap();
        let mut buf = vec![0u8; 65536];
        let mut frames = 0u64;
        while r.next(&mut buf, n).unwrap().is_some() {
            frames += 1;
        }
        assert_eq!(
            frames,
            stats[n as usize - 1].tx.load(Ordering::Relaxed),
            "frames written to port {n}'s file"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    Run {
        allocs: after - before,
        tx: [tx[0], tx[1], tx[2]],
        frames: measured.len(),
    }
}

fn device(name: &str, text: &str) -> Arc<Device> {
    let prog = p4sec_frontend::compile_str(name, text, &Default::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let device = Device::new(1, None, p4sec_externs::p4::registry());
    let pl = device
        .build_pipeline(prog.to_json().into_bytes(), None, 0)
        .unwrap();
    *device.pipeline.write().unwrap() = Some(Arc::new(pl));
    device
}

fn router() -> (Arc<Device>, Vec<Vec<u8>>, Vec<Option<u64>>) {
    let device = device(
        "programs/ipv4_router.p4",
        include_str!("../../../programs/ipv4_router.p4"),
    );
    let e = device.engine().unwrap();
    let route = |prefix: [u8; 4], len: u32, port: u64| {
        insert(
            &e,
            "RouterIngress.ipv4_lpm",
            vec![FieldMatch::Lpm {
                value: Value::new(32, ip(prefix)),
                prefix_len: len,
            }],
            "RouterIngress.set_nhop",
            vec![
                Value::new(48, 0x02_00_00_00_00_a0 + port),
                Value::new(48, 0x02_00_00_00_00_ff),
                Value::new(9, port),
            ],
            0,
        )
    };
    route([10, 2, 0, 0], 16, 2);
    route([10, 2, 7, 0], 24, 3);
    route([10, 3, 0, 0], 16, 3);
    route([10, 4, 0, 9], 32, 2);
    // 16 frames repeated: flows to both ports through routes of several lengths, a miss and a TTL
    // drop
    let mut frames = vec![];
    let mut expect = vec![];
    for i in 0..16u8 {
        let (dst, ttl, port) = match i % 8 {
            0 | 1 => ([10, 2, i, 1], 64, Some(2)),
            2 => ([10, 2, 7, i], 64, Some(3)),
            3 => ([10, 3, 1, i], 64, Some(3)),
            4 => ([10, 4, 0, 9], 64, Some(2)),
            5 => ([10, 9, 0, i], 64, None), // no route
            6 => ([10, 2, 0, i], 1, None),  // TTL 1
            _ => ([10, 2, 200, i], 64, Some(2)),
        };
        let payload = vec![i; 18 + 40 * (i as usize % 3)];
        frames.push(ipv4_frame(
            [10, 1, 0, i],
            dst,
            ttl,
            17,
            1000 + i as u16,
            53,
            &payload,
        ));
        expect.push(port);
    }
    (device, frames, expect)
}

fn url_filter() -> (Arc<Device>, Vec<Vec<u8>>, [u64; 3]) {
    let device = device(
        "programs/url_filter.p4",
        include_str!("../../../programs/url_filter.p4"),
    );
    let e = device.engine().unwrap();
    insert(
        &e,
        "UfrIngress.ufr_port",
        vec![FieldMatch::Exact(Value::new(9, 1))],
        "UfrIngress.forward",
        vec![Value::new(9, 2)],
        0,
    );
    e.mirroring_add(100, 3);
    // HTTP requests (cloned and scanned byte by byte, then passed) and DNS-port-free UDP (forwarded
    // at once)
    let mut frames = vec![];
    for i in 0..8u8 {
        if i % 2 == 0 {
            let payload = format!("GET /{i} HTTP/1.1\r\n");
            frames.push(ipv4_frame(
                [10, 1, 0, i],
                [10, 2, 0, 1],
                64,
                6,
                40000 + i as u16,
                80,
                payload.as_bytes(),
            ));
        } else {
            frames.push(ipv4_frame(
                [10, 1, 0, i],
                [10, 2, 0, 1],
                64,
                17,
                40000 + i as u16,
                9,
                &[i; 30],
            ));
        }
    }
    (device, frames, [0, 8, 0])
}

const GW_A: ([u8; 4], [u8; 4], [u8; 4], [u8; 4], u32, u32) = (
    [192, 0, 2, 1],
    [10, 1, 0, 0],
    [198, 51, 100, 1],
    [10, 2, 0, 0],
    0x100,
    0x200,
);
const GW_B: ([u8; 4], [u8; 4], [u8; 4], [u8; 4], u32, u32) = (
    [198, 51, 100, 1],
    [10, 2, 0, 0],
    [192, 0, 2, 1],
    [10, 1, 0, 0],
    0x200,
    0x100,
);

fn sa_json(index: u32, spi: u32, src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
    let a = |x: [u8; 4]| format!("{}.{}.{}.{}", x[0], x[1], x[2], x[3]);
    format!(
        r#"{{"index": {index}, "sa": {{"spi": {spi}, "cipher": "AesGcm128", "integ": "None",
            "enc_key": [{key}], "auth_key": [], "esn": false, "replay_window": 64,
            "tunnel": ["{}", "{}"], "soft": {{"packets": null, "bytes": null, "seconds": null}},
            "hard": {{"packets": null, "bytes": null, "seconds": null}}, "initial_seq": 0}}}}"#,
        a(src),
        a(dst),
        key = (0..20)
            .map(|i| ((i * 3 + spi) & 0xff).to_string())
            .collect::<Vec<_>>()
            .join(",")
    )
    .into_bytes()
}

/// An IPsec gateway (programs/ipsec_gateway.p4): own address `me`, its site `lan` on port 1, the
/// peer gateway on the WAN (port 2), protecting traffic to `remote` with SA 0 (`out_spi`) and
/// accepting SA 1 (`in_spi`) from the peer.
fn gateway(
    (me, lan, peer, remote, out_spi, in_spi): ([u8; 4], [u8; 4], [u8; 4], [u8; 4], u32, u32),
) -> Arc<Device> {
    let device = device(
        "programs/ipsec_gateway.p4",
        include_str!("../../../programs/ipsec_gateway.p4"),
    );
    let e = device.engine().unwrap();
    let m16 = |a: [u8; 4]| FieldMatch::Ternary {
        value: Value::new(32, ip(a) & 0xffff_0000),
        mask: Value::new(32, 0xffff_0000),
    };
    insert(
        &e,
        "GwIngress.local_addr",
        vec![FieldMatch::Exact(Value::new(32, ip(me)))],
        "GwIngress.to_me",
        vec![],
        0,
    );
    insert(
        &e,
        "GwIngress.spd",
        vec![
            m16(lan),
            m16(remote),
            FieldMatch::Any,
            FieldMatch::Any,
            FieldMatch::Any,
        ],
        "GwIngress.protect",
        vec![Value::new(32, 0)],
        10,
    );
    let nhop = |prefix: [u8; 4], len: u32, port: u64| {
        insert(
            &e,
            "GwIngress.ipv4_lpm",
            vec![FieldMatch::Lpm {
                value: Value::new(32, ip(prefix)),
                prefix_len: len,
            }],
            "GwIngress.set_nhop",
            vec![
                Value::new(48, 0x02_00_00_00_00_a0 + port),
                Value::new(48, 0x02_00_00_00_00_01),
                Value::new(9, port),
            ],
            0,
        )
    };
    nhop(lan, 16, 1);
    nhop([peer[0], peer[1], peer[2], 0], 24, 2);
    e.extern_control("GwIngress.sad", "add_sa", &sa_json(0, out_spi, me, peer))
        .unwrap();
    e.extern_control("GwIngress.sad", "add_sa", &sa_json(1, in_spi, peer, me))
        .unwrap();
    let exact = |v: u64| FieldMatch::Exact(Value::new(32, v));
    insert(
        &e,
        "GwIngress.sad_dec",
        vec![exact(ip(peer)), exact(ip(me)), exact(in_spi as u64)],
        "GwIngress.dec_sa",
        vec![Value::new(32, 1)],
        0,
    );
    insert(
        &e,
        "GwIngress.sa_selectors",
        vec![exact(1), m16(remote), m16(lan), FieldMatch::Any],
        "GwIngress.selector_ok",
        vec![],
        10,
    );
    insert(
        &e,
        "GwIngress.port_side",
        vec![FieldMatch::Exact(Value::new(9, 2))],
        "GwIngress.from_wan",
        vec![],
        0,
    );
    device
}

/// LAN packets of site A (to site B) of a few flows and sizes.
fn lan_packets(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            ipv4_frame(
                [10, 1, 0, 5 + (i % 4) as u8],
                [10, 2, 0, 7],
                64,
                17,
                1000 + (i % 4) as u16,
                4000,
                &vec![i as u8; 64 + (i % 3) * 300],
            )
        })
        .collect()
}

/// Can this test make TAP and TUN devices? As root, in a network namespace of its own (made here:
/// the switch's threads, started from this one, live in it too), where IPv6 is off so that the
/// kernel sends nothing to the devices on its own. `Some(())` then; `None` (only pcap ports)
/// otherwise.
fn live_ports() -> Option<()> {
    if unsafe { libc::geteuid() } != 0 || unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        eprintln!("(not root, or no network namespace: the TAP and TUN ports are not covered)");
        return None;
    }
    std::fs::write("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1").ok()?;
    std::fs::write("/proc/sys/net/ipv6/conf/all/disable_ipv6", "1").ok()?;
    Some(())
}

fn assert_no_alloc(what: &str, r: &Run) {
    eprintln!(
        "{what}: {} heap allocations in {} frames; frames sent per port {:?}",
        r.allocs, r.frames, r.tx
    );
    assert_eq!(
        r.allocs, 0,
        "{what}: heap allocations in the steady state ({} in {} frames)",
        r.allocs, r.frames
    );
}

#[test]
fn no_heap_allocation_per_frame() {
    // the router: 16 frames of hits, misses and drops, repeated
    // (port 3 a TAP device where the test may make one)
    let live = live_ports();
    let (dev, frames, expect) = router();
    let warm: Vec<Vec<u8>> = frames.iter().cycle().take(WARM_UP).cloned().collect();
    let measured: Vec<Vec<u8>> = frames
        .iter()
        .cycle()
        .skip(WARM_UP)
        .take(MEASURED)
        .cloned()
        .collect();
    let tap: Vec<(u32, PortKind)> = live
        .iter()
        .map(|_| (3, PortKind::Tap("p4noalloc3".into())))
        .collect();
    let r = run("router", dev, &warm, &measured, &tap);
    let mut want = [0u64; 3];
    for p in expect.iter().cycle().take(WARM_UP + MEASURED).flatten() {
        want[*p as usize - 1] += 1;
    }
    assert_eq!(r.tx, want, "router: frames per port");
    assert_no_alloc(
        if tap.is_empty() {
            "router"
        } else {
            "router (port 3 a TAP device)"
        },
        &r,
    );

    // clone and recirculate: the URL filter
    let (dev, frames, expect) = url_filter();
    let warm: Vec<Vec<u8>> = frames.iter().cycle().take(1000).cloned().collect();
    let measured: Vec<Vec<u8>> = frames.iter().cycle().take(MEASURED / 4).cloned().collect();
    let r = run("url_filter", dev.clone(), &warm, &measured, &[]);
    assert_eq!(
        r.tx,
        [
            0,
            expect[1] * ((warm.len() + measured.len()) / frames.len()) as u64,
            0
        ],
        "url_filter: every packet passed, none of the clones out"
    );
    // the clones really scanned: one scanner pass per payload byte (and one at its end) of every
    // HTTP request
    let e = dev.engine().unwrap();
    let c = e
        .prog
        .counters
        .iter()
        .position(|c| c.name == "UfrIngress.ufr_stats")
        .unwrap();
    let scanned: u64 = frames
        .iter()
        .step_by(2)
        .map(|f| (f.len() - 54 + 1) as u64)
        .sum::<u64>()
        * ((warm.len() + measured.len()) / frames.len()) as u64;
    assert_eq!(
        e.counter_read(c, 3).unwrap().0,
        scanned,
        "url_filter: scanner passes"
    );
    assert_no_alloc("url_filter", &r);

    // ESP encryption: gateway A's LAN traffic leaves on its WAN port encrypted
    let lan = lan_packets(WARM_UP + MEASURED);
    // (port 2 a TUN device where the test may make one: the ESP packets leave without Ethernet
    // header)
    let tun: Vec<(u32, PortKind)> = live
        .iter()
        .map(|_| (2, PortKind::Tun("p4noalloc2".into())))
        .collect();
    let r = run(
        "esp-encrypt",
        gateway(GW_A),
        &lan[..WARM_UP],
        &lan[WARM_UP..],
        &tun,
    );
    assert_eq!(
        r.tx,
        [0, (WARM_UP + MEASURED) as u64, 0],
        "esp-encrypt: every packet to the WAN"
    );
    assert_no_alloc(
        if tun.is_empty() {
            "ESP encryption"
        } else {
            "ESP encryption (port 2 a TUN device)"
        },
        &r,
    );

    // ESP decryption: the same packets encrypted by gateway A (in process, before) enter gateway
    // B's WAN port
    let a = gateway(GW_A).engine().unwrap();
    let mut w = p4sec_engine::Worker::new(&a);
    let mut out = p4sec_engine::Outputs::default();
    let esp: Vec<Vec<u8>> = lan
        .iter()
        .map(|f| {
            out.clear();
            a.process(&mut w, 1, f, &mut out);
            let (port, b) = out.iter().next().expect("A encrypts");
            assert_eq!(port, 2);
            b.to_vec()
        })
        .collect();
    let dev = gateway(GW_B);
    // (these enter on port 1 of the switch: the gateway's WAN port is 2, so make port 1 the WAN
    // side too)
    let e = dev.engine().unwrap();
    insert(
        &e,
        "GwIngress.port_side",
        vec![FieldMatch::Exact(Value::new(9, 1))],
        "GwIngress.from_wan",
        vec![],
        0,
    );
    drop(e);
    let r = run("esp-decrypt", dev, &esp[..WARM_UP], &esp[WARM_UP..], &[]);
    assert_eq!(
        r.tx,
        [(WARM_UP + MEASURED) as u64, 0, 0],
        "esp-decrypt: every packet decrypted to the LAN"
    );
    assert_no_alloc("ESP decryption", &r);
}
