//! The router benchmark's material: the program loaded with its routes (programs/ipv4_router.p4,
//! or programs/ipv4_vrf_router.p4 with the routes spread over VRFs; the IPv6 router's in
//! `super::ipv6`), the packets towards them and the ports they arrive on, and the same forwarding
//! written directly in Rust ([`Native`], [`VrfNative`], [`V6Native`]).

use p4sec_engine::{Backend, Engine};
use p4sec_ir::{ActionCall, FieldMatch, TableEntry, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

const ROUTER: &str = include_str!("../../../../programs/ipv4_router.p4");
const VRF_ROUTER: &str = include_str!("../../../../programs/ipv4_vrf_router.p4");

pub(crate) fn lcg(s: &mut u64) -> u64 {
    *s = s
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *s >> 16
}

/// A 64-byte UDP/IPv4 packet towards `dst`, its header checksum right.
pub(crate) fn packet(dst: u32) -> Vec<u8> {
    let mut p = vec![0u8; 64];
    p[12] = 0x08;
    p[14] = 0x45;
    p[16..18].copy_from_slice(&(50u16).to_be_bytes());
    p[22] = 64;
    p[23] = 17;
    p[26..30].copy_from_slice(&[192, 168, 0, 1]);
    p[30..34].copy_from_slice(&dst.to_be_bytes());
    let c = p4sec_engine::hash::csum16(&p[14..34]);
    p[24..26].copy_from_slice(&c.to_be_bytes());
    p
}

/// A hand-written router: what it does with a packet arriving on `port`.
pub(crate) trait Forward {
    /// The egress port, the packet rewritten; `None`: dropped.
    fn forward(&self, port: u32, pkt: &mut [u8]) -> Option<u16>;
}

/// The same router written directly in Rust: per-prefix-length hash maps, TTL, checksum.
pub(crate) struct Native {
    by_len: Vec<(u32, HashMap<u32, (u64, u64, u16)>)>,
}

/// Whether `pkt` is an IPv4 packet of a 20-byte header, its checksum right, TTL above 1.
#[inline(always)]
fn ipv4_ok(pkt: &[u8]) -> bool {
    pkt.len() >= 34
        && pkt[12] == 0x08
        && pkt[13] == 0
        && pkt[14] == 0x45
        && p4sec_engine::hash::csum16(&pkt[14..34]) == 0
        && pkt[22] > 1
}

/// `pkt` sent on to next hop `(dmac, smac, port)`: its MAC addresses, TTL and checksum.
#[inline(always)]
fn to_next_hop(pkt: &mut [u8], &(dmac, smac, port): &(u64, u64, u16)) -> u16 {
    pkt[0..6].copy_from_slice(&dmac.to_be_bytes()[2..]);
    pkt[6..12].copy_from_slice(&smac.to_be_bytes()[2..]);
    pkt[22] -= 1;
    pkt[24] = 0;
    pkt[25] = 0;
    let c = p4sec_engine::hash::csum16(&pkt[14..34]);
    pkt[24..26].copy_from_slice(&c.to_be_bytes());
    port
}

/// The destination's mask of prefix length `len`.
#[inline(always)]
fn mask(len: u32) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - len)
    }
}

impl Forward for Native {
    #[inline(always)]
    fn forward(&self, _: u32, pkt: &mut [u8]) -> Option<u16> {
        if !ipv4_ok(pkt) {
            return None;
        }
        let dst = u32::from_be_bytes([pkt[30], pkt[31], pkt[32], pkt[33]]);
        for (len, m) in &self.by_len {
            if let Some(nh) = m.get(&(dst & mask(*len))) {
                return Some(to_next_hop(pkt, nh));
            }
        }
        None
    }
}

/// The VRF router written directly in Rust: the ingress port's VRF from an array, per prefix
/// length a hash map of (VRF, prefix), TTL, checksum.
pub(crate) struct VrfNative {
    by_len: Vec<(u32, HashMap<(u16, u32), (u64, u64, u16)>)>,
    vrf_of_port: Vec<u16>,
}

impl Forward for VrfNative {
    #[inline(always)]
    fn forward(&self, port: u32, pkt: &mut [u8]) -> Option<u16> {
        if !ipv4_ok(pkt) {
            return None;
        }
        let vrf = self.vrf_of_port.get(port as usize).copied().unwrap_or(0);
        let dst = u32::from_be_bytes([pkt[30], pkt[31], pkt[32], pkt[33]]);
        for (len, m) in &self.by_len {
            if let Some(nh) = m.get(&(vrf, dst & mask(*len))) {
                return Some(to_next_hop(pkt, nh));
            }
        }
        None
    }
}

/// The IPv6 router written directly in Rust: per prefix length a hash map of the prefix, longest
/// first; the MAC addresses rewritten and the hop limit decremented.
pub(crate) struct V6Native {
    by_len: Vec<(u32, HashMap<u128, (u64, u64, u16)>)>,
}

impl V6Native {
    /// The router of the routes `by_len` (prefix length -> prefix -> next hop).
    pub(crate) fn new(
        by_len: std::collections::BTreeMap<u32, HashMap<u128, (u64, u64, u16)>>,
    ) -> Self {
        V6Native {
            by_len: by_len.into_iter().rev().collect(),
        }
    }
}

/// The mask of prefix length `len` of a 128-bit address.
#[inline(always)]
pub(crate) fn mask128(len: u32) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - len)
    }
}

impl Forward for V6Native {
    #[inline(always)]
    fn forward(&self, _: u32, pkt: &mut [u8]) -> Option<u16> {
        if pkt.len() < 54 || pkt[12..14] != [0x86, 0xdd] || pkt[14] >> 4 != 6 || pkt[21] <= 1 {
            return None;
        }
        let dst = u128::from_be_bytes(pkt[38..54].try_into().ok()?);
        for (len, m) in &self.by_len {
            if let Some(&(dmac, smac, port)) = m.get(&(dst & mask128(*len))) {
                pkt[0..6].copy_from_slice(&dmac.to_be_bytes()[2..]);
                pkt[6..12].copy_from_slice(&smac.to_be_bytes()[2..]);
                pkt[21] -= 1;
                return Some(port);
            }
        }
        None
    }
}

/// The hand-written router of each program.
pub(crate) enum Hand {
    Plain(Native),
    Vrf(VrfNative),
    V6(V6Native),
}

impl Hand {
    /// [`Forward::forward`] of the router this is.
    #[inline(always)]
    pub(crate) fn forward(&self, port: u32, pkt: &mut [u8]) -> Option<u16> {
        match self {
            Hand::Plain(n) => n.forward(port, pkt),
            Hand::Vrf(n) => n.forward(port, pkt),
            Hand::V6(n) => n.forward(port, pkt),
        }
    }
}

/// The router program loaded on a backend with its routes, the packets towards them (and the
/// ports they arrive on), and the same routes in the hand-written router. The same arguments give
/// the same routes and packets.
pub(crate) struct Setup {
    pub engine: Engine,
    pub pkts: Vec<Vec<u8>>,
    pub ports: Vec<u32>,
    pub native: Hand,
    /// Seconds the routes took to install.
    pub insert_s: f64,
}

/// The router a benchmark runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Router {
    /// programs/ipv4_router.p4.
    Ipv4,
    /// programs/ipv4_vrf_router.p4, the routes spread over this many VRFs (at least 1).
    Vrf(u32),
    /// programs/ipv6_router.p4.
    Ipv6,
}

impl Router {
    /// The router of `p4sec bench`'s flags: `--vrfs N` (0: none), `--ipv6`.
    pub fn of_flags(vrfs: u32, ipv6: bool) -> Router {
        match (vrfs, ipv6) {
            (_, true) => Router::Ipv6,
            (0, false) => Router::Ipv4,
            (n, false) => Router::Vrf(n),
        }
    }

    /// The program's name, for the figures.
    pub(crate) fn program_name(self) -> &'static str {
        match self {
            Router::Ipv4 => "programs/ipv4_router.p4",
            Router::Vrf(_) => "programs/ipv4_vrf_router.p4",
            Router::Ipv6 => "programs/ipv6_router.p4",
        }
    }

    /// The VRFs the routes are spread over (0: none).
    pub(crate) fn vrfs(self) -> u32 {
        match self {
            Router::Vrf(n) => n,
            _ => 0,
        }
    }
}

/// A packet of VRF `v` (of `vrfs`, 1 and up) arrives on port `v + 1`.
fn port_of(v: u16) -> u32 {
    v as u32 + 1
}

/// A batch of routes validated as the control plane's API validates them, then installed into
/// table `ti` in one write.
pub(crate) fn publish(engine: &Engine, ti: usize, batch: Vec<TableEntry>) -> Result<(), String> {
    for e in &batch {
        p4sec_engine::tables::validate_entry(&engine.prog, &engine.prog.tables[ti], e)
            .map_err(|err| format!("bad route: {err}"))?;
    }
    engine
        .table_insert_batch(ti, batch)
        .map_err(|err| format!("installing routes failed: {err}"))
}

pub(crate) fn action(engine: &Engine, name: &str) -> Result<u32, String> {
    engine
        .prog
        .actions
        .iter()
        .position(|a| a.name == name)
        .map(|a| a as u32)
        .ok_or(format!("no action {name}"))
}

pub(crate) fn table(engine: &Engine, name: &str) -> Result<usize, String> {
    engine.table_index(name).ok_or(format!("no table {name}"))
}

/// `routes` routes on `backend`: the plain router (`vrfs` 0), or the VRF router with the routes
/// spread over `vrfs` VRFs (VRF `v` on port `v + 1`).
pub(crate) fn setup_ipv4(routes: u32, vrfs: u32, backend: Backend) -> Result<Setup, String> {
    let router = if vrfs == 0 {
        Router::Ipv4
    } else {
        Router::Vrf(vrfs)
    };
    let src = if vrfs == 0 { ROUTER } else { VRF_ROUTER };
    let name = router.program_name();
    let prog =
        p4sec_frontend::compile_str(name, src, &Default::default()).map_err(|e| e.to_string())?;
    let engine = Engine::with_backend(Arc::new(prog), &[], backend)?;
    let ti = table(&engine, "RouterIngress.ipv4_lpm")?;
    let set_nhop = action(&engine, "RouterIngress.set_nhop")?;
    let mut vrf_of_port = vec![];
    if vrfs > 0 {
        let (pt, set_vrf) = (
            table(&engine, "RouterIngress.port_vrf")?,
            action(&engine, "RouterIngress.set_vrf")?,
        );
        let vrfs = u16::try_from(vrfs)
            .ok()
            .filter(|v| port_of(*v) < 512)
            .ok_or("--vrfs takes at most 510 (a VRF per port)")?;
        vrf_of_port = vec![0; port_of(vrfs) as usize];
        for v in 0..vrfs {
            let e = TableEntry {
                matches: vec![FieldMatch::Exact(Value::new(9, port_of(v) as u64))],
                action: ActionCall {
                    action: set_vrf,
                    args: vec![Value::new(16, v as u64)],
                },
                priority: 0,
            };
            engine
                .table_insert(pt, e)
                .map_err(|err| format!("installing port_vrf failed: {err}"))?;
            vrf_of_port[port_of(v) as usize] = v;
        }
    }
    // routes: prefix lengths 8..32 weighted towards /24, as in Internet tables; each in a VRF
    let mut seed = 42u64;
    let mut installed = vec![];
    // (each router's maps filled route by route, the plain one's as they always were)
    let mut by_len: std::collections::BTreeMap<u32, HashMap<u32, (u64, u64, u16)>> =
        Default::default();
    let mut by_vrf_len: std::collections::BTreeMap<u32, HashMap<(u16, u32), (u64, u64, u16)>> =
        Default::default();
    let mut seen = std::collections::HashSet::new();
    let mut batch = vec![];
    let t0 = Instant::now();
    while installed.len() < routes as usize {
        let r = lcg(&mut seed);
        let len = match r % 10 {
            0 => 16,
            1 => 20,
            2 | 3 => 22,
            9 => 32,
            _ => 24,
        } as u32;
        let prefix = ((lcg(&mut seed) as u32) | 0x0100_0000) & (u32::MAX << (32 - len));
        let port = (lcg(&mut seed) % 8) as u16 + 1;
        let vrf = if vrfs == 0 {
            0
        } else {
            (lcg(&mut seed) % vrfs as u64) as u16
        };
        let lpm = FieldMatch::Lpm {
            value: Value::new(32, prefix as u64),
            prefix_len: len,
        };
        let matches = if vrfs == 0 {
            vec![lpm]
        } else {
            vec![FieldMatch::Exact(Value::new(16, vrf as u64)), lpm]
        };
        let entry = TableEntry {
            matches,
            action: ActionCall {
                action: set_nhop,
                args: vec![
                    Value::new(48, 0x0200_0000_0000 | port as u64),
                    Value::new(48, 0x0200_0000_00ff),
                    Value::new(9, port as u64),
                ],
            },
            priority: 0,
        };
        if seen.insert((vrf, prefix, len)) {
            installed.push((vrf, prefix, len));
            let next_hop = (0x0200_0000_0000 | port as u64, 0x0200_0000_00ff, port);
            if vrfs == 0 {
                by_len.entry(len).or_default().insert(prefix, next_hop);
            } else {
                by_vrf_len
                    .entry(len)
                    .or_default()
                    .insert((vrf, prefix), next_hop);
            }
            batch.push(entry);
        }
        // published in batches of 1000, as a controller's P4Runtime Write requests would carry them
        if batch.len() == 1000 || installed.len() == routes as usize {
            publish(&engine, ti, std::mem::take(&mut batch))?;
        }
    }
    let insert_s = t0.elapsed().as_secs_f64();
    let native = if vrfs == 0 {
        Hand::Plain(Native {
            by_len: by_len.into_iter().rev().collect(),
        })
    } else {
        Hand::Vrf(VrfNative {
            by_len: by_vrf_len.into_iter().rev().collect(),
            vrf_of_port,
        })
    };
    // packets towards installed routes, each on its VRF's port
    let (mut pkts, mut ports) = (vec![], vec![]);
    for _ in 0..4096 {
        let (vrf, p, len) = installed[(lcg(&mut seed) as usize) % installed.len()];
        let host = if len >= 32 {
            0
        } else {
            (lcg(&mut seed) as u32) & (u32::MAX >> len)
        };
        pkts.push(packet(p | host));
        ports.push(if vrfs == 0 { 0 } else { port_of(vrf) });
    }
    Ok(Setup {
        engine,
        pkts,
        ports,
        native,
        insert_s,
    })
}
