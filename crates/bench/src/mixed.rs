//! `p4sec bench-mixed`: the gateway paper's Table 3 on programs/ipsec_gateway.p4: throughput of the
//! decrypting gateway with k of every 16 packets ESP (AES-GCM-128, to decrypt) and the rest plain
//! IP (BYPASS), and the same while SAs are renewed continuously through the control path the
//! controller uses, in the same run.
//!
//! Two engines in process: the peer gateway A encrypts (SPD protect, one SA per tunnel) and the
//! measured gateway B decrypts (SAD-dec + esp_sad) and forwards. The data thread makes a batch of
//! packets through A (not timed), then sends it through B (timed), checking every output: an ESP
//! packet must come out decrypted on the LAN port with its tunnel and sequence marker, a plain
//! packet forwarded as it is. A control thread renews the tunnels' SAs round robin at a stated
//! rate, in the controller's loss-free order: new SA + SAD-dec entry on B, SAD-enc swap on A (in
//! place, one atomic swap in the extern), and the old SAD-dec entry and SA removed from B after a
//! grace period, and only once every packet made under the old SA has been through B (the packets
//! "in flight").

use p4sec_engine::{Engine, Outputs, Worker};
use p4sec_ir::{ActionCall, FieldMatch, TableEntry, Value};
use std::collections::VecDeque;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PROGRAM: &str = include_str!("../../../programs/ipsec_gateway.p4");
const PEER: [u8; 4] = [192, 0, 2, 1];
const ME: [u8; 4] = [198, 51, 100, 1];
const ESP_SRC: [u8; 4] = [10, 1, 0, 5];
const PLAIN_SRC: [u8; 4] = [10, 3, 0, 5];
const BATCH: usize = 512;
const SLOTS: u32 = 4096;
/// Offset of the (tunnel, sequence) marker in an inner frame: Ethernet + IPv4 + UDP.
const MARK: usize = 14 + 20 + 8;
/// The gateway paper's Table 3 (Mbit/s, two 1 Gbit/s ports, 64-byte IP packets and 80-byte
/// AES-CBC+HMAC ESP): (a) by secured packets per 16, (b) by IP packets between the last packet of
/// the old SA and the first of the new.
const PAPER_A: [(u32, f64); 7] = [
    (1, 1999.8),
    (2, 1993.3),
    (4, 1981.2),
    (8, 1973.3),
    (10, 1928.2),
    (12, 1907.0),
    (16, 1823.9),
];
const PAPER_B: [(u32, f64); 7] = [
    (20, 1999.8),
    (16, 1985.2),
    (14, 1951.2),
    (8, 1920.7),
    (4, 1914.2),
    (2, 1871.0),
    (0, 1783.9),
];

pub struct Opts {
    pub sizes: Vec<usize>,
    pub ks: Vec<u32>,
    pub tunnels: u32,
    pub seconds: f64,
    pub rounds: u32,
    pub rekey_rate: f64,
    pub grace_ms: f64,
}

fn sa_json(index: u32, spi: u32) -> String {
    let key: Vec<u8> = (0..20u32)
        .map(|b| (b.wrapping_mul(31) ^ spi.wrapping_mul(2654435761)) as u8)
        .collect();
    let ip = |a: [u8; 4]| std::net::Ipv4Addr::from(a).to_string();
    serde_json::json!({"index": index, "sa": {
        "spi": spi, "cipher": "AesGcm128", "integ": "None", "enc_key": key, "auth_key": [], "esn": true, "replay_window": 1024,
        "tunnel": [ip(PEER), ip(ME)],
        "soft": {"packets": null, "bytes": null, "seconds": null}, "hard": {"packets": null, "bytes": null, "seconds": null}, "initial_seq": 0}})
    .to_string()
}

fn be(a: [u8; 4]) -> u64 {
    u32::from_be_bytes(a) as u64
}

fn entry(matches: Vec<FieldMatch>, action: u32, args: Vec<Value>, priority: i32) -> TableEntry {
    TableEntry {
        matches,
        action: ActionCall { action, args },
        priority,
    }
}

fn act(e: &Engine, name: &str) -> Result<u32, String> {
    e.prog
        .actions
        .iter()
        .position(|a| a.name == name)
        .map(|i| i as u32)
        .ok_or(format!("no action {name}"))
}

fn table(e: &Engine, name: &str) -> Result<usize, String> {
    e.table_index(name).ok_or(format!("no table {name}"))
}

fn nhop(e: &Engine, port: u64) -> Result<(u32, Vec<Value>), String> {
    Ok((
        act(e, "GwIngress.set_nhop")?,
        vec![
            Value::new(48, 0x0200_0000_00aa + port),
            Value::new(48, 0x0200_0000_0001),
            Value::new(9, port),
        ],
    ))
}

fn sad_dec_entry(b: &Engine, spi: u32, slot: u32) -> Result<TableEntry, String> {
    let m = vec![
        FieldMatch::Exact(Value::new(32, be(PEER))),
        FieldMatch::Exact(Value::new(32, be(ME))),
        FieldMatch::Exact(Value::new(32, spi as u64)),
    ];
    Ok(entry(
        m,
        act(b, "GwIngress.dec_sa")?,
        vec![Value::new(32, slot as u64)],
        0,
    ))
}

/// The selectors of B's inbound SA in `slot`: 10.1.0.0/16 -> 10.2.0.0/16 (the tunnels of
/// `setup_a`).
fn selector_entry(b: &Engine, slot: u32) -> Result<TableEntry, String> {
    let m = vec![
        FieldMatch::Exact(Value::new(32, slot as u64)),
        FieldMatch::Ternary {
            value: Value::new(32, be([10, 1, 0, 0])),
            mask: Value::new(32, 0xffff_0000),
        },
        FieldMatch::Ternary {
            value: Value::new(32, be([10, 2, 0, 0])),
            mask: Value::new(32, 0xffff_0000),
        },
        FieldMatch::Any,
    ];
    Ok(entry(m, act(b, "GwIngress.selector_ok")?, vec![], 10))
}

/// The peer gateway A: tunnel t protects 10.1.0.0/16 -> 10.2.t.0/24 with the SA in slot t; the WAN
/// route.
fn setup_a(a: &Engine, tunnels: u32) -> Result<(), String> {
    let (set_nhop, args) = nhop(a, 2)?;
    a.table_insert(
        table(a, "GwIngress.ipv4_lpm")?,
        entry(
            vec![FieldMatch::Lpm {
                value: Value::new(32, be([198, 51, 100, 0])),
                prefix_len: 24,
            }],
            set_nhop,
            args,
            0,
        ),
    )?;
    let spd = table(a, "GwIngress.spd")?;
    let protect = act(a, "GwIngress.protect")?;
    for t in 0..tunnels {
        let m = vec![
            FieldMatch::Ternary {
                value: Value::new(32, be([10, 1, 0, 0])),
                mask: Value::new(32, 0xffff_0000),
            },
            FieldMatch::Ternary {
                value: Value::new(32, be([10, 2, t as u8, 0])),
                mask: Value::new(32, 0xffff_ff00),
            },
            FieldMatch::Any,
            FieldMatch::Any,
            FieldMatch::Any,
        ];
        a.table_insert(spd, entry(m, protect, vec![Value::new(32, t as u64)], 10))?;
    }
    Ok(())
}

/// The measured gateway B: its own address, the LAN route, BYPASS for the plain traffic 10.3.0.0/16
/// -> 10.2.0.0/16.
fn setup_b(b: &Engine) -> Result<(), String> {
    b.table_insert(
        table(b, "GwIngress.local_addr")?,
        entry(
            vec![FieldMatch::Exact(Value::new(32, be(ME)))],
            act(b, "GwIngress.to_me")?,
            vec![],
            0,
        ),
    )?;
    let (set_nhop, args) = nhop(b, 1)?;
    b.table_insert(
        table(b, "GwIngress.ipv4_lpm")?,
        entry(
            vec![FieldMatch::Lpm {
                value: Value::new(32, be([10, 2, 0, 0])),
                prefix_len: 16,
            }],
            set_nhop,
            args,
            0,
        ),
    )?;
    let m = vec![
        FieldMatch::Ternary {
            value: Value::new(32, be([10, 3, 0, 0])),
            mask: Value::new(32, 0xffff_0000),
        },
        FieldMatch::Ternary {
            value: Value::new(32, be([10, 2, 0, 0])),
            mask: Value::new(32, 0xffff_0000),
        },
        FieldMatch::Any,
        FieldMatch::Any,
        FieldMatch::Any,
    ];
    b.table_insert(
        table(b, "GwIngress.spd")?,
        entry(m, act(b, "GwIngress.bypass")?, vec![], 10),
    )?;
    Ok(())
}

/// An inner frame of `size` bytes (Ethernet + IPv4 + UDP), from `src` to 10.2.t.7, the marker left
/// zero.
fn template(size: usize, src: [u8; 4], t: u32) -> Vec<u8> {
    let mut f = vec![0u8; size];
    f[..12].copy_from_slice(&[2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0x11]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip_len = (size - 14) as u16;
    let mut h = [
        0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 0, 0, 0, 0, 10, 2, t as u8, 7,
    ];
    h[2..4].copy_from_slice(&ip_len.to_be_bytes());
    h[12..16].copy_from_slice(&src);
    let c = p4sec_engine::hash::csum16(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    f[14..34].copy_from_slice(&h);
    f[34..36].copy_from_slice(&(1000 + t as u16).to_be_bytes());
    f[36..38].copy_from_slice(&4242u16.to_be_bytes());
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f
}

/// Shared state of one measurement between the data thread and the control thread.
struct Shared {
    /// batches whose generation (through A) has started / that have been through B
    started: AtomicU64,
    done: AtomicU64,
    stop: AtomicBool,
}

/// The control plane of the run: B's free SA slots, each tunnel's live SA (SPI, slot on B), the
/// next SPI.
struct Control {
    free: Vec<u32>,
    live: Vec<(u32, u32)>,
    next_spi: u32,
    renewals: u64,
    retired: u64,
    no_slot: u64,
}

impl Control {
    fn install(&mut self, a: &Engine, b: &Engine, t: u32) -> Result<(u32, u32), String> {
        let slot = self.free.pop().ok_or("no free SA slot on B")?;
        let spi = self.next_spi;
        self.next_spi += 1;
        // SAD-dec first (the SA, then its entry), then the SAD-enc swap on the sender
        b.extern_control("GwIngress.sad", "add_sa", sa_json(slot, spi).as_bytes())?;
        b.table_insert(
            table(b, "GwIngress.sa_selectors")?,
            selector_entry(b, slot)?,
        )?;
        b.table_insert(table(b, "GwIngress.sad_dec")?, sad_dec_entry(b, spi, slot)?)?;
        a.extern_control("GwIngress.sad", "add_sa", sa_json(t, spi).as_bytes())?;
        Ok((spi, slot))
    }

    fn remove(&mut self, b: &Engine, spi: u32, slot: u32) -> Result<(), String> {
        b.table_delete(
            table(b, "GwIngress.sad_dec")?,
            &sad_dec_entry(b, spi, slot)?,
        )?;
        b.table_delete(
            table(b, "GwIngress.sa_selectors")?,
            &selector_entry(b, slot)?,
        )?;
        b.extern_control(
            "GwIngress.sad",
            "del_sa",
            format!("{{\"index\": {slot}}}").as_bytes(),
        )?;
        self.free.push(slot);
        self.retired += 1;
        Ok(())
    }

    /// Renew tunnels round robin at `rate` per second until told to stop; old SAs leave B after the
    /// grace period and once every batch begun before the swap has been through B. Leftovers are
    /// removed at the end (the data thread has stopped: nothing is in flight).
    fn run(
        &mut self,
        a: &Engine,
        b: &Engine,
        sh: &Shared,
        rate: f64,
        grace: Duration,
    ) -> Result<(), String> {
        let mut pending: VecDeque<(Instant, u64, u32, u32)> = VecDeque::new();
        let start = Instant::now();
        let mut i = 0u64;
        let mut err = Ok(());
        while !sh.stop.load(SeqCst) {
            let now = Instant::now();
            while let Some(&(at, batch, spi, slot)) = pending.front() {
                if now.duration_since(at) < grace || sh.done.load(SeqCst) < batch {
                    break;
                }
                pending.pop_front();
                self.remove(b, spi, slot)?;
            }
            let due = start + Duration::from_secs_f64(i as f64 / rate);
            if now >= due {
                let t = (i % self.live.len() as u64) as u32;
                i += 1;
                if self.free.is_empty() {
                    self.no_slot += 1;
                    continue;
                }
                let (old_spi, old_slot) = self.live[t as usize];
                match self.install(a, b, t) {
                    Ok(new) => {
                        // every batch begun from now on uses the new SA; the ones begun before may
                        // hold old packets
                        pending.push_back((
                            Instant::now(),
                            sh.started.load(SeqCst),
                            old_spi,
                            old_slot,
                        ));
                        self.live[t as usize] = new;
                        self.renewals += 1;
                    }
                    Err(e) => {
                        err = Err(e);
                        break;
                    }
                }
                continue;
            }
            std::thread::sleep((due - now).min(Duration::from_millis(1)));
        }
        while let Some((_, _, spi, slot)) = pending.pop_front() {
            self.remove(b, spi, slot)?;
        }
        err
    }
}

#[derive(Default, Clone, Copy)]
struct Tally {
    packets: u64,
    esp_in: u64,
    esp_ok: u64,
    plain_in: u64,
    plain_ok: u64,
    bytes_out: u64,
    bytes_in: u64,
    secs: f64,
    /// the data thread's CPU time in the timed part (from /proc/thread-self/schedstat; 0 where
    /// unavailable)
    cpu: f64,
}

/// This thread's CPU time so far (ns on a CPU, from the scheduler's statistics), if the kernel
/// reports it.
fn thread_cpu() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    Some(s.split_whitespace().next()?.parse::<f64>().ok()? / 1e9)
}

/// The data thread: batches with k of every 16 packets ESP (positions drawn at random in each group
/// of 16), through A (not timed) then B (timed), until `seconds` of B's time have been measured.
#[allow(clippy::too_many_arguments)]
fn traffic(
    a: &Engine,
    b: &Engine,
    size: usize,
    k: u32,
    tunnels: u32,
    seconds: f64,
    sh: &Shared,
    seq: &mut [u32],
    rng: &mut u64,
) -> Result<Tally, String> {
    let esp_t: Vec<Vec<u8>> = (0..tunnels).map(|t| template(size, ESP_SRC, t)).collect();
    let plain_t: Vec<Vec<u8>> = (0..tunnels).map(|t| template(size, PLAIN_SRC, t)).collect();
    let (mut wa, mut wb) = (Worker::new(a), Worker::new(b));
    let (mut oa, mut ob) = (Outputs::default(), Outputs::default());
    let mut batch = Outputs::default();
    let mut expect: Vec<(bool, u32, u32)> = Vec::with_capacity(BATCH);
    let mut tally = Tally::default();
    let mut inner = vec![0u8; size];
    let mut next_t = 0u32;
    let mut group = [false; 16];
    while tally.secs < seconds {
        sh.started.fetch_add(1, SeqCst);
        batch.clear();
        expect.clear();
        for j in 0..BATCH {
            if j % 16 == 0 {
                // k ESP positions among the next 16, drawn at random
                group = [false; 16];
                let mut idx: [usize; 16] = std::array::from_fn(|i| i);
                for i in (1..16).rev() {
                    *rng ^= *rng << 13;
                    *rng ^= *rng >> 7;
                    *rng ^= *rng << 17;
                    idx.swap(i, (*rng % (i as u64 + 1)) as usize);
                }
                for &p in &idx[..k as usize] {
                    group[p] = true;
                }
            }
            let t = next_t;
            next_t = (next_t + 1) % tunnels;
            let esp = group[j % 16];
            let s = seq[t as usize];
            seq[t as usize] = s.wrapping_add(1);
            let tpl = if esp {
                &esp_t[t as usize]
            } else {
                &plain_t[t as usize]
            };
            inner.copy_from_slice(tpl);
            inner[MARK..MARK + 2].copy_from_slice(&(t as u16).to_be_bytes());
            inner[MARK + 2..MARK + 6].copy_from_slice(&s.to_be_bytes());
            if esp {
                oa.clear();
                a.process(&mut wa, 1, &inner, &mut oa);
                match oa.iter().next() {
                    Some((2, f)) if f.len() > 14 + 20 && f[14 + 9] == 50 => batch.push(2, f),
                    _ => {
                        return Err(format!(
                            "the peer gateway did not encrypt a packet of tunnel {t}"
                        ))
                    }
                }
            } else {
                batch.push(2, &inner);
            }
            expect.push((esp, t, s));
        }
        // B, timed: every output checked (port, length, tunnel and sequence marker, source)
        let c0 = thread_cpu();
        let t0 = Instant::now();
        for (i, (_, f)) in batch.iter().enumerate() {
            ob.clear();
            b.process(&mut wb, 2, f, &mut ob);
            let (esp, t, s) = expect[i];
            let ok = match ob.frames.first() {
                Some((1, r)) => {
                    let o = &ob.data[r.clone()];
                    o.len() == size
                        && o[MARK..MARK + 2] == (t as u16).to_be_bytes()
                        && o[MARK + 2..MARK + 6] == s.to_be_bytes()
                        && o[26..30] == if esp { ESP_SRC } else { PLAIN_SRC }
                }
                _ => false,
            };
            if esp {
                tally.esp_in += 1;
                tally.esp_ok += ok as u64;
            } else {
                tally.plain_in += 1;
                tally.plain_ok += ok as u64;
            }
            tally.bytes_in += f.len() as u64;
            tally.bytes_out += if ok { size as u64 } else { 0 };
        }
        tally.secs += t0.elapsed().as_secs_f64();
        if let (Some(c0), Some(c1)) = (c0, thread_cpu()) {
            tally.cpu += c1 - c0;
        }
        tally.packets += BATCH as u64;
        sh.done.fetch_add(1, SeqCst);
    }
    Ok(tally)
}

pub fn run(o: &Opts, json: Option<&Path>) -> ExitCode {
    match run_inner(o, json) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("p4sec bench-mixed: packets were lost (see above)");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("p4sec bench-mixed: {e}");
            ExitCode::FAILURE
        }
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

fn run_inner(o: &Opts, json: Option<&Path>) -> Result<bool, String> {
    if o.sizes.is_empty() || o.sizes.iter().any(|&s| !(64..=1518).contains(&s)) {
        return Err("--sizes takes frame sizes from 64 to 1518 bytes".into());
    }
    if o.ks.is_empty() || o.ks.iter().any(|&k| k > 16) {
        return Err("--ks takes ESP packets per 16 from 0 to 16".into());
    }
    if o.tunnels == 0 || o.tunnels > 256 {
        return Err("--tunnels takes 1 to 256".into());
    }
    if !(o.seconds > 0.0 && o.seconds <= 600.0) || o.rounds == 0 || o.rounds > 100 {
        return Err("--seconds takes (0, 600] and --rounds 1 to 100".into());
    }
    if !(o.rekey_rate > 0.0 && o.rekey_rate <= 100_000.0)
        || !(o.grace_ms >= 0.0 && o.grace_ms <= 10_000.0)
    {
        return Err("--rekey-rate takes (0, 100000] renewals/s and --grace-ms [0, 10000]".into());
    }
    let mut opts = p4sec_frontend::CompileOptions::default();
    opts.defines
        .push(("SA_SLOTS".into(), Some(SLOTS.to_string())));
    let prog = Arc::new(
        p4sec_frontend::compile_str("programs/ipsec_gateway.p4", PROGRAM, &opts)
            .map_err(|e| e.to_string())?,
    );
    let a = Engine::new(prog.clone(), &p4sec_externs::p4::registry())?;
    let b = Engine::new(prog, &p4sec_externs::p4::registry())?;
    setup_a(&a, o.tunnels)?;
    setup_b(&b)?;
    let mut ctl = Control {
        free: (0..SLOTS).rev().collect(),
        live: vec![],
        next_spi: 0x1_0000,
        renewals: 0,
        retired: 0,
        no_slot: 0,
    };
    for t in 0..o.tunnels {
        let sa = ctl.install(&a, &b, t)?;
        ctl.live.push(sa);
    }
    let status = b
        .prog
        .counters
        .iter()
        .position(|c| c.name == "GwIngress.esp_status")
        .ok_or("no counter GwIngress.esp_status")?;
    let grace = Duration::from_secs_f64(o.grace_ms / 1000.0);
    let mut seq = vec![0u32; o.tunnels as usize];
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;

    println!("p4sec bench-mixed: programs/ipsec_gateway.p4 as the decrypting gateway, in process; k of every 16 packets ESP");
    println!("(AES-GCM-128, {} tunnels, to decrypt), the rest plain IP (BYPASS); every output checked. Re-keying: SAs renewed", o.tunnels);
    println!(
        "round robin at {:.0}/s (new SA + SAD-dec, SAD-enc swap, old SAD-dec removed after {} ms); {} rounds of {} s",
        o.rekey_rate, o.grace_ms, o.rounds, o.seconds
    );
    println!("of gateway time per figure, alternating without and with re-keying; medians. Size: the plain and decrypted frames");
    println!("(ESP on the wire is 54-57 bytes longer); Gbit/s: output frames.");
    println!(
        "  {:>5} {:>5} {:>8} {:>8} {:>11} {:>11} {:>6} {:>7} {:>8} {:>7} {:>9} {:>5} {:>14}",
        "size",
        "k/16",
        "kpps",
        "Gbit/s",
        "rekey kpps",
        "rekey Gb/s",
        "ratio",
        "cpu ns",
        "rekey ns",
        "ratio",
        "renewal/s",
        "lost",
        "paper (a) Mb/s"
    );
    let mut rows = vec![];
    let mut all_ok = true;
    let (mut esp_ok_total, c0) = (0u64, b.counter_read(status, 0)?.0);
    for &size in &o.sizes {
        // warm-up: caches, table snapshots
        let sh = Shared {
            started: AtomicU64::new(0),
            done: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        };
        let w = traffic(
            &a,
            &b,
            size,
            8,
            o.tunnels,
            (o.seconds / 5.0).min(0.2),
            &sh,
            &mut seq,
            &mut rng,
        )?;
        esp_ok_total += w.esp_ok;
        for &k in &o.ks {
            let (mut base, mut rekey) = (vec![], vec![]);
            let (mut tb, mut tr) = (Tally::default(), Tally::default());
            let (mut renewals, mut rekey_wall, mut no_slot) = (0u64, 0.0f64, 0u64);
            for _ in 0..o.rounds {
                for with_rekey in [false, true] {
                    let sh = Shared {
                        started: AtomicU64::new(0),
                        done: AtomicU64::new(0),
                        stop: AtomicBool::new(false),
                    };
                    let t0 = Instant::now();
                    let r0 = (ctl.renewals, ctl.no_slot);
                    let tally = if with_rekey {
                        std::thread::scope(|s| {
                            let c = s.spawn(|| ctl.run(&a, &b, &sh, o.rekey_rate, grace));
                            let r = traffic(
                                &a, &b, size, k, o.tunnels, o.seconds, &sh, &mut seq, &mut rng,
                            );
                            sh.stop.store(true, SeqCst);
                            let c = c
                                .join()
                                .map_err(|_| "the control thread panicked".to_string())?;
                            c.and(r)
                        })?
                    } else {
                        traffic(
                            &a, &b, size, k, o.tunnels, o.seconds, &sh, &mut seq, &mut rng,
                        )?
                    };
                    let into = if with_rekey { &mut tr } else { &mut tb };
                    for (x, y) in [
                        (&mut into.packets, tally.packets),
                        (&mut into.esp_in, tally.esp_in),
                        (&mut into.esp_ok, tally.esp_ok),
                        (&mut into.plain_in, tally.plain_in),
                        (&mut into.plain_ok, tally.plain_ok),
                        (&mut into.bytes_in, tally.bytes_in),
                        (&mut into.bytes_out, tally.bytes_out),
                    ] {
                        *x += y;
                    }
                    into.secs += tally.secs;
                    into.cpu += tally.cpu;
                    esp_ok_total += tally.esp_ok;
                    if with_rekey {
                        renewals += ctl.renewals - r0.0;
                        no_slot += ctl.no_slot - r0.1;
                        rekey_wall += t0.elapsed().as_secs_f64();
                        rekey.push(tally);
                    } else {
                        base.push(tally);
                    }
                }
            }
            let pps = |v: &[Tally]| median(v.iter().map(|t| t.packets as f64 / t.secs).collect());
            let gbps = |v: &[Tally]| {
                median(
                    v.iter()
                        .map(|t| t.bytes_out as f64 * 8.0 / t.secs / 1e9)
                        .collect(),
                )
            };
            let (bp, rp) = (pps(&base), pps(&rekey));
            // the data plane's own cost: CPU time per packet (not the time the thread waited for a
            // CPU)
            let cpu_ns = |v: &[Tally]| {
                median(
                    v.iter()
                        .map(|t| {
                            if t.cpu > 0.0 {
                                t.cpu / t.packets as f64 * 1e9
                            } else {
                                f64::NAN
                            }
                        })
                        .collect(),
                )
            };
            let (bc, rc) = (cpu_ns(&base), cpu_ns(&rekey));
            let lost_base = (tb.esp_in - tb.esp_ok) + (tb.plain_in - tb.plain_ok);
            let lost_rekey_esp = tr.esp_in - tr.esp_ok;
            let lost_rekey = lost_rekey_esp + (tr.plain_in - tr.plain_ok);
            all_ok &= lost_base == 0 && lost_rekey == 0;
            let paper = PAPER_A.iter().find(|p| p.0 == k).map(|p| p.1);
            println!(
                "  {:>5} {:>5} {:>8.0} {:>8.3} {:>11.0} {:>11.3} {:>6.3} {:>7.0} {:>8.0} {:>7.3} {:>9.0} {:>5} {:>14}",
                size,
                k,
                bp / 1e3,
                gbps(&base),
                rp / 1e3,
                gbps(&rekey),
                rp / bp,
                bc,
                rc,
                bc / rc,
                renewals as f64 / rekey_wall,
                lost_base + lost_rekey,
                paper.map(|p| format!("{p:.1}")).unwrap_or("-".into())
            );
            rows.push(serde_json::json!({
                "size": size, "k": k,
                "base": {"pps": bp, "gbps_out": gbps(&base), "gbps_in": median(base.iter().map(|t| t.bytes_in as f64 * 8.0 / t.secs / 1e9).collect()),
                         "packets": tb.packets, "esp_in": tb.esp_in, "esp_decrypted": tb.esp_ok, "plain_in": tb.plain_in, "plain_out": tb.plain_ok,
                         "lost": lost_base, "seconds": tb.secs, "cpu_ns_per_packet": bc, "cpu_seconds": tb.cpu},
                "rekey": {"pps": rp, "gbps_out": gbps(&rekey), "gbps_in": median(rekey.iter().map(|t| t.bytes_in as f64 * 8.0 / t.secs / 1e9).collect()),
                          "packets": tr.packets, "esp_in": tr.esp_in, "esp_decrypted": tr.esp_ok, "plain_in": tr.plain_in, "plain_out": tr.plain_ok,
                          "lost": lost_rekey, "lost_esp_live_sas": lost_rekey_esp, "seconds": tr.secs, "cpu_ns_per_packet": rc, "cpu_seconds": tr.cpu,
                          "renewals": renewals, "renewals_per_s": renewals as f64 / rekey_wall, "renewals_skipped_no_slot": no_slot},
                "ratio": rp / bp,
                "cpu_ratio": bc / rc,
                "paper_a_mbps": paper,
            }));
        }
    }
    let esp_ok_counter = b.counter_read(status, 0)?.0 - c0;
    let worst = rows
        .iter()
        .filter_map(|r| r["ratio"].as_f64())
        .fold(f64::INFINITY, f64::min);
    let worst_cpu = rows
        .iter()
        .filter_map(|r| r["cpu_ratio"].as_f64())
        .fold(f64::INFINITY, f64::min);
    let ratios: Vec<f64> = rows.iter().filter_map(|r| r["ratio"].as_f64()).collect();
    let cpu_ratios: Vec<f64> = rows
        .iter()
        .filter_map(|r| r["cpu_ratio"].as_f64())
        .collect();
    println!(
        "  ratio with/without re-keying (throughput, wall clock): median {:.3}, worst {worst:.3}; on the data thread's CPU time per packet: median {:.3}, worst {worst_cpu:.3}",
        median(ratios.clone()),
        median(cpu_ratios.clone())
    );
    println!(
        "  paper (b), during a re-key: {:.1} Mbit/s with no interim packets vs {:.1} (ratio {:.3})",
        PAPER_B[6].1,
        PAPER_B[0].1,
        PAPER_B[6].1 / PAPER_B[0].1
    );
    println!(
        "  renewals: {} (old SAD-dec entries removed: {}); ESP decrypted (checked): {esp_ok_total}, B's esp_status OK counter: {esp_ok_counter}",
        ctl.renewals, ctl.retired
    );
    if let Some(p) = json {
        let doc = serde_json::json!({
            "program": "programs/ipsec_gateway.p4", "suite": "aes-gcm-128", "tunnels": o.tunnels, "seconds": o.seconds, "rounds": o.rounds,
            "rekey_rate": o.rekey_rate, "grace_ms": o.grace_ms, "batch": BATCH,
            "rows": rows, "worst_ratio": worst, "median_ratio": median(ratios), "worst_cpu_ratio": worst_cpu, "median_cpu_ratio": median(cpu_ratios), "renewals": ctl.renewals, "retired": ctl.retired,
            "esp_decrypted_checked": esp_ok_total, "esp_status_ok_counter": esp_ok_counter,
            "paper": {"table3a_mbps": PAPER_A.iter().map(|(k, v)| serde_json::json!({"k": k, "mbps": v})).collect::<Vec<_>>(),
                      "table3b_mbps": PAPER_B.iter().map(|(n, v)| serde_json::json!({"interim": n, "mbps": v})).collect::<Vec<_>>()},
        });
        std::fs::write(p, serde_json::to_string_pretty(&doc).unwrap_or_default())
            .map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(all_ok)
}
