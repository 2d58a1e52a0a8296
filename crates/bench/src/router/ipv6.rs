//! The IPv6 router benchmark's material (`p4sec bench --ipv6`): programs/ipv6_router.p4 loaded
//! with its routes (128-bit destinations, prefix lengths as in Internet IPv6 tables), 64-byte
//! packets towards them, and the same forwarding written directly in Rust
//! ([`super::forwarding::V6Native`]).

use super::forwarding::{action, lcg, mask128, publish, table, Hand, Setup, V6Native};
use p4sec_engine::{Backend, Engine};
use p4sec_ir::{ActionCall, FieldMatch, TableEntry, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

const ROUTER: &str = include_str!("../../../../programs/ipv6_router.p4");

/// A 64-byte UDP/IPv6 packet towards `dst`, hop limit 64.
pub(crate) fn packet(dst: u128) -> Vec<u8> {
    let mut p = vec![0u8; 64];
    p[12..14].copy_from_slice(&[0x86, 0xdd]);
    p[14] = 0x60;
    p[18..20].copy_from_slice(&(10u16).to_be_bytes());
    p[20] = 17;
    p[21] = 64;
    p[22..38].copy_from_slice(&0x2001_0db8_0000_0000_0000_0000_0000_0001u128.to_be_bytes());
    p[38..54].copy_from_slice(&dst.to_be_bytes());
    p
}

/// A random prefix length, weighted as in Internet IPv6 tables (mostly /48 and /32), with some
/// /64 and host routes.
fn prefix_len(r: u64) -> u32 {
    match r % 20 {
        0..=7 => 48,
        8..=10 => 32,
        11 | 12 => 40,
        13 | 14 => 44,
        15 => 36,
        16 => 56,
        17 | 18 => 64,
        _ => 128,
    }
}

/// `routes` IPv6 routes on `backend`, in batches of 1000 as a controller's Write requests would
/// carry them; the packets arrive on port 0.
pub(crate) fn setup(routes: u32, backend: Backend) -> Result<Setup, String> {
    let prog = p4sec_frontend::compile_str("programs/ipv6_router.p4", ROUTER, &Default::default())
        .map_err(|e| e.to_string())?;
    let engine = Engine::with_backend(Arc::new(prog), &[], backend)?;
    let ti = table(&engine, "RouterIngress.ipv6_lpm")?;
    let set_nhop = action(&engine, "RouterIngress.set_nhop")?;
    let mut seed = 42u64;
    let mut by_len: BTreeMap<u32, HashMap<u128, (u64, u64, u16)>> = BTreeMap::new();
    let (mut installed, mut seen, mut batch) = (vec![], HashSet::new(), vec![]);
    let t0 = Instant::now();
    while installed.len() < routes as usize {
        let len = prefix_len(lcg(&mut seed));
        // global unicast (2000::/3)
        let r = ((lcg(&mut seed) as u128) << 96) ^ ((lcg(&mut seed) as u128) << 48);
        let r = r ^ lcg(&mut seed) as u128;
        let prefix = ((r & (u128::MAX >> 3)) | (1u128 << 125)) & mask128(len);
        let port = (lcg(&mut seed) % 8) as u16 + 1;
        if !seen.insert((prefix, len)) {
            continue;
        }
        installed.push((prefix, len));
        let next_hop = (0x0200_0000_0000 | port as u64, 0x0200_0000_00ff, port);
        by_len.entry(len).or_default().insert(prefix, next_hop);
        batch.push(TableEntry {
            matches: vec![FieldMatch::Lpm {
                value: Value {
                    width: 128,
                    words: vec![prefix as u64, (prefix >> 64) as u64],
                },
                prefix_len: len,
            }],
            action: ActionCall {
                action: set_nhop,
                args: vec![
                    Value::new(48, next_hop.0),
                    Value::new(48, next_hop.1),
                    Value::new(9, port as u64),
                ],
            },
            priority: 0,
        });
        if batch.len() == 1000 || installed.len() == routes as usize {
            publish(&engine, ti, std::mem::take(&mut batch))?;
        }
    }
    let insert_s = t0.elapsed().as_secs_f64();
    let mut pkts = vec![];
    for _ in 0..4096 {
        let (p, len) = installed[(lcg(&mut seed) as usize) % installed.len()];
        let host = ((lcg(&mut seed) as u128) << 64 | lcg(&mut seed) as u128) & !mask128(len);
        pkts.push(packet(p | host));
    }
    Ok(Setup {
        engine,
        ports: vec![0; pkts.len()],
        pkts,
        native: Hand::V6(V6Native::new(by_len)),
        insert_s,
    })
}
