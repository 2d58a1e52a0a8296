//! The two gateways of `p4sec bench-mixed` set up: the program, the peer A's SPD and SAD-enc (one SA
//! per tunnel), the measured B's SAD-dec, SA selectors and routes, and the table entries and SA
//! descriptions the control thread installs and removes.

use crate::setup::{act, be, entry, table};
use p4sec_engine::Engine;
use p4sec_ir::{FieldMatch, TableEntry, Value};

pub(super) const PROGRAM: &str = include_str!("../../../../programs/ipsec_gateway.p4");
const PEER: [u8; 4] = [192, 0, 2, 1];
const ME: [u8; 4] = [198, 51, 100, 1];
pub(super) const ESP_SRC: [u8; 4] = [10, 1, 0, 5];
pub(super) const PLAIN_SRC: [u8; 4] = [10, 3, 0, 5];
pub(super) const SLOTS: u32 = 4096;

pub(super) fn sa_json(index: u32, spi: u32) -> String {
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

pub(super) fn sad_dec_entry(b: &Engine, spi: u32, slot: u32) -> Result<TableEntry, String> {
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
pub(super) fn selector_entry(b: &Engine, slot: u32) -> Result<TableEntry, String> {
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

/// The route to `prefix`/`prefix_len` out of `port` (`GwIngress.ipv4_lpm`).
fn add_route(e: &Engine, prefix: [u8; 4], prefix_len: u32, port: u64) -> Result<(), String> {
    let (set_nhop, args) = nhop(e, port)?;
    e.table_insert(
        table(e, "GwIngress.ipv4_lpm")?,
        entry(
            vec![FieldMatch::Lpm {
                value: Value::new(32, be(prefix)),
                prefix_len,
            }],
            set_nhop,
            args,
            0,
        ),
    )?;
    Ok(())
}

/// The peer gateway A: tunnel t protects 10.1.0.0/16 -> 10.2.t.0/24 with the SA in slot t; the WAN
/// route.
pub(super) fn setup_a(a: &Engine, tunnels: u32) -> Result<(), String> {
    add_route(a, [198, 51, 100, 0], 24, 2)?;
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
pub(super) fn setup_b(b: &Engine) -> Result<(), String> {
    b.table_insert(
        table(b, "GwIngress.local_addr")?,
        entry(
            vec![FieldMatch::Exact(Value::new(32, be(ME)))],
            act(b, "GwIngress.to_me")?,
            vec![],
            0,
        ),
    )?;
    add_route(b, [10, 2, 0, 0], 16, 1)?;
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
