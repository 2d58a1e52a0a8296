//! Two p4sec engines running programs/ipsec_gateway.p4 as a site-to-site VPN: LAN traffic of site A
//! is encrypted by gateway A, crosses the WAN as ESP, is decrypted by gateway B and routed into
//! site B. Replayed and tampered ESP packets are dropped and counted per status. Clear traffic
//! arriving on the WAN port is never protected, and a decrypted packet outside its SA's selectors
//! is dropped and counted.

use p4sec_engine::{Engine, Outputs, Worker};
use p4sec_ir::{ActionCall, FieldMatch, TableEntry, Value};
use std::sync::Arc;

const GW: &str = include_str!("../../../programs/ipsec_gateway.p4");

fn engine() -> Engine {
    let prog = p4sec_frontend::compile_str("programs/ipsec_gateway.p4", GW, &Default::default())
        .unwrap_or_else(|e| panic!("{e}"));
    Engine::new(Arc::new(prog), &p4sec_externs::p4::registry()).unwrap()
}

fn action(e: &Engine, name: &str) -> u32 {
    e.prog
        .actions
        .iter()
        .position(|a| a.name == name)
        .unwrap_or_else(|| panic!("no action {name}")) as u32
}

fn ip(a: [u8; 4]) -> u64 {
    u32::from_be_bytes(a) as u64
}

fn route(e: &Engine, prefix: [u8; 4], len: u32, mac: u64, port: u64) {
    let t = e.table_index("GwIngress.ipv4_lpm").unwrap();
    let a = action(e, "GwIngress.set_nhop");
    e.table_insert(
        t,
        TableEntry {
            matches: vec![FieldMatch::Lpm {
                value: Value::new(32, ip(prefix)),
                prefix_len: len,
            }],
            action: ActionCall {
                action: a,
                args: vec![
                    Value::new(48, mac),
                    Value::new(48, 0x02_00_00_00_00_01),
                    Value::new(9, port),
                ],
            },
            priority: 0,
        },
    )
    .unwrap();
}

/// Mark `port` as a WAN port (port_side).
fn wan_port(e: &Engine, port: u64) {
    let t = e.table_index("GwIngress.port_side").unwrap();
    e.table_insert(
        t,
        TableEntry {
            matches: vec![FieldMatch::Exact(Value::new(9, port))],
            action: ActionCall {
                action: action(e, "GwIngress.from_wan"),
                args: vec![],
            },
            priority: 0,
        },
    )
    .unwrap();
}

/// The selectors of inbound SA `sa`: inner source and destination (ternary, of either version), any
/// protocol.
fn selectors(e: &Engine, sa: u32, src: FieldMatch, dst: FieldMatch) {
    let six = matches!(&src, FieldMatch::Ternary { value, .. } if value.width == 128);
    let t = e
        .table_index(if six {
            "GwIngress.sa_selectors6"
        } else {
            "GwIngress.sa_selectors"
        })
        .unwrap();
    e.table_insert(
        t,
        TableEntry {
            matches: vec![
                FieldMatch::Exact(Value::new(32, sa as u64)),
                src,
                dst,
                FieldMatch::Any,
            ],
            action: ActionCall {
                action: action(e, "GwIngress.selector_ok"),
                args: vec![],
            },
            priority: 10,
        },
    )
    .unwrap();
}

fn prefix16(a: [u8; 4]) -> FieldMatch {
    FieldMatch::Ternary {
        value: Value::new(32, ip(a) & 0xffff_0000),
        mask: Value::new(32, 0xffff_0000),
    }
}

fn sa_json(index: u32, spi: u32, src: &str, dst: &str) -> Vec<u8> {
    format!(
        r#"{{"index": {index}, "sa": {{"spi": {spi}, "cipher": "AesGcm128", "integ": "None",
            "enc_key": [{key}], "auth_key": [], "esn": false, "replay_window": 64,
            "tunnel": ["{src}", "{dst}"], "soft": {{"packets": null, "bytes": null, "seconds": null}},
            "hard": {{"packets": null, "bytes": null, "seconds": null}}, "initial_seq": 0}}}}"#,
        key = (0..20).map(|i| ((i * 3 + spi) & 0xff).to_string()).collect::<Vec<_>>().join(",")
    )
    .into_bytes()
}

/// Gateway with own address `me`, local site `lan` (port 1), peer gateway `peer` on the WAN (port
/// 2).
fn gateway(
    me: [u8; 4],
    lan: [u8; 4],
    peer: [u8; 4],
    remote: [u8; 4],
    out_spi: u32,
    in_spi: u32,
) -> Engine {
    let e = engine();
    let t = e.table_index("GwIngress.local_addr").unwrap();
    e.table_insert(
        t,
        TableEntry {
            matches: vec![FieldMatch::Exact(Value::new(32, ip(me)))],
            action: ActionCall {
                action: action(&e, "GwIngress.to_me"),
                args: vec![],
            },
            priority: 0,
        },
    )
    .unwrap();
    let spd = e.table_index("GwIngress.spd").unwrap();
    e.table_insert(
        spd,
        TableEntry {
            matches: vec![
                FieldMatch::Ternary {
                    value: Value::new(32, ip(lan)),
                    mask: Value::new(32, 0xffff_0000),
                },
                FieldMatch::Ternary {
                    value: Value::new(32, ip(remote)),
                    mask: Value::new(32, 0xffff_0000),
                },
                FieldMatch::Any,
                FieldMatch::Any,
                FieldMatch::Any,
            ],
            action: ActionCall {
                action: action(&e, "GwIngress.protect"),
                args: vec![Value::new(32, 0)],
            },
            priority: 10,
        },
    )
    .unwrap();
    route(&e, lan, 16, 0x02_00_00_00_00_aa, 1);
    route(
        &e,
        [peer[0], peer[1], peer[2], 0],
        24,
        0x02_00_00_00_00_bb,
        2,
    );
    let fmt = |a: [u8; 4]| format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3]);
    e.extern_control(
        "GwIngress.sad",
        "add_sa",
        &sa_json(0, out_spi, &fmt(me), &fmt(peer)),
    )
    .unwrap();
    e.extern_control(
        "GwIngress.sad",
        "add_sa",
        &sa_json(1, in_spi, &fmt(peer), &fmt(me)),
    )
    .unwrap();
    let dec = e.table_index("GwIngress.sad_dec").unwrap();
    e.table_insert(
        dec,
        TableEntry {
            matches: vec![
                FieldMatch::Exact(Value::new(32, ip(peer))),
                FieldMatch::Exact(Value::new(32, ip(me))),
                FieldMatch::Exact(Value::new(32, in_spi as u64)),
            ],
            action: ActionCall {
                action: action(&e, "GwIngress.dec_sa"),
                args: vec![Value::new(32, 1)],
            },
            priority: 0,
        },
    )
    .unwrap();
    // the inbound SA carries remote site -> local site; port 2 is the WAN
    selectors(&e, 1, prefix16(remote), prefix16(lan));
    wan_port(&e, 2);
    e
}

fn host_packet(src: [u8; 4], dst: [u8; 4], payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 14];
    p[12] = 0x08;
    let total = 20 + 8 + payload.len();
    let mut h = [0u8; 20];
    h[0] = 0x45;
    h[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    h[8] = 64;
    h[9] = 17;
    h[12..16].copy_from_slice(&src);
    h[16..20].copy_from_slice(&dst);
    let c = p4sec_engine::hash::csum16(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    p.extend_from_slice(&h);
    p.extend_from_slice(&[0x30, 0x39, 0x00, 0x35, 0, (8 + payload.len()) as u8, 0, 0]);
    p.extend_from_slice(payload);
    p
}

fn run(e: &Engine, port: u32, frame: &[u8]) -> Vec<(u32, Vec<u8>)> {
    let mut w = Worker::new(e);
    let mut out = Outputs::default();
    e.process(&mut w, port, frame, &mut out);
    out.iter().map(|(p, b)| (p, b.to_vec())).collect()
}

#[test]
fn site_to_site_tunnel() {
    let a = gateway(
        [192, 0, 2, 1],
        [10, 1, 0, 0],
        [198, 51, 100, 1],
        [10, 2, 0, 0],
        0x100,
        0x200,
    );
    let b = gateway(
        [198, 51, 100, 1],
        [10, 2, 0, 0],
        [192, 0, 2, 1],
        [10, 1, 0, 0],
        0x200,
        0x100,
    );
    let payload: Vec<u8> = (0..100u8).collect();
    let pkt = host_packet([10, 1, 0, 5], [10, 2, 0, 7], &payload);

    let wan = run(&a, 1, &pkt);
    assert_eq!(wan.len(), 1, "A sends one packet");
    let (port, esp) = &wan[0];
    assert_eq!(*port, 2, "towards the WAN");
    assert_eq!(&esp[12..14], &[0x08, 0x00]);
    assert_eq!(esp[14 + 9], 50, "outer protocol is ESP");
    assert_eq!(
        &esp[14 + 12..14 + 20],
        &[192, 0, 2, 1, 198, 51, 100, 1],
        "outer addresses from the SA"
    );
    assert_eq!(&esp[34..38], &0x100u32.to_be_bytes(), "SPI");
    assert_eq!(
        esp[14 + 8],
        63,
        "outer TTL decremented by the forwarding pass"
    );
    assert_eq!(
        p4sec_engine::hash::csum16(&esp[14..34]),
        0,
        "outer checksum"
    );
    assert!(
        !esp.windows(payload.len()).any(|w| w == &payload[..]),
        "payload is encrypted"
    );

    let lan = run(&b, 2, esp);
    assert_eq!(lan.len(), 1, "B delivers the inner packet");
    let (port, inner) = &lan[0];
    assert_eq!(*port, 1);
    assert_eq!(&inner[0..6], &[2, 0, 0, 0, 0, 0xaa]);
    assert_eq!(
        &inner[14 + 12..14 + 20],
        &[10, 1, 0, 5, 10, 2, 0, 7],
        "inner addresses"
    );
    assert_eq!(inner[14 + 8], 63, "inner TTL decremented once");
    assert_eq!(p4sec_engine::hash::csum16(&inner[14..34]), 0);
    assert_eq!(&inner[42..], &payload[..], "payload intact");

    // replay: dropped, counted as P4SEC_REPLAY (7)
    assert!(run(&b, 2, esp).is_empty());
    let c = b
        .prog
        .counters
        .iter()
        .position(|c| c.name == "GwIngress.esp_status")
        .unwrap();
    let all: Vec<u64> = (0..16).map(|i| b.counter_read(c, i).unwrap().0).collect();
    assert_eq!(b.counter_read(c, 7).unwrap().0, 1, "{all:?}");
    // tampered ciphertext of a fresh packet: dropped, counted as P4SEC_ICV_FAIL (4)
    let second = run(&a, 1, &pkt);
    let mut bad = second[0].1.clone();
    let n = bad.len();
    bad[n - 30] ^= 0x40;
    assert!(run(&b, 2, &bad).is_empty());
    assert_eq!(b.counter_read(c, 4).unwrap().0, 1);
    assert_eq!(b.counter_read(c, 0).unwrap().0, 1, "one good decapsulation");

    // per SA and status (index sa * 16 + status): SA 1 is B's inbound SA
    let per_sa = b
        .prog
        .counters
        .iter()
        .position(|c| c.name == "GwIngress.sa_counters")
        .unwrap();
    assert_eq!(
        b.counter_read(per_sa, 16).unwrap().0,
        1,
        "SA 1: one good packet"
    );
    assert_eq!(
        b.counter_read(per_sa, 16 + 7).unwrap().0,
        1,
        "SA 1: one replay"
    );
    assert_eq!(
        b.counter_read(per_sa, 16 + 4).unwrap().0,
        1,
        "SA 1: one ICV failure"
    );

    // traffic no policy covers is discarded; a BYPASS policy (here: UDP to ports 50..60) forwards
    // it in the clear
    let plain = host_packet([10, 1, 0, 5], [198, 51, 100, 9], &payload);
    assert!(run(&a, 1, &plain).is_empty(), "no policy: DISCARD");
    let spd = a.table_index("GwIngress.spd").unwrap();
    a.table_insert(
        spd,
        TableEntry {
            matches: vec![
                FieldMatch::Any,
                FieldMatch::Ternary {
                    value: Value::new(32, ip([198, 51, 100, 0])),
                    mask: Value::new(32, 0xffff_ff00),
                },
                FieldMatch::Any,
                FieldMatch::Any,
                FieldMatch::Range {
                    lo: Value::new(16, 50),
                    hi: Value::new(16, 60),
                },
            ],
            action: ActionCall {
                action: action(&a, "GwIngress.bypass"),
                args: vec![],
            },
            priority: 20,
        },
    )
    .unwrap();
    let out = run(&a, 1, &plain);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].1[14 + 9], 17, "bypass: still UDP");

    // SA statistics through the control interface
    let stats = a
        .extern_control("GwIngress.sad", "sa_stats", br#"{"index": 0}"#)
        .unwrap();
    let s: serde_json::Value = serde_json::from_slice(&stats).unwrap();
    assert_eq!(s["packets"], 2, "two packets encapsulated by A");
    // every occupied slot with its SPI (what a controller compares with its own state)
    let sas: serde_json::Value =
        serde_json::from_slice(&a.extern_control("GwIngress.sad", "get_sas", b"{}").unwrap())
            .unwrap();
    let slots: Vec<(u64, u64)> = sas["sas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_u64().unwrap(), p[1].as_u64().unwrap()))
        .collect();
    assert_eq!(
        slots,
        vec![(0, 0x100), (1, 0x200)],
        "slots 0 (outbound) and 1 (inbound) with their SPIs"
    );
    a.extern_control("GwIngress.sad", "del_sa", br#"{"index": 1}"#)
        .unwrap();
    let sas: serde_json::Value =
        serde_json::from_slice(&a.extern_control("GwIngress.sad", "get_sas", b"{}").unwrap())
            .unwrap();
    assert_eq!(
        sas["sas"].as_array().unwrap().len(),
        1,
        "a deleted slot is not listed"
    );
    // bad control requests are precise errors
    assert!(a
        .extern_control("GwIngress.sad", "add_sa", b"{}")
        .unwrap_err()
        .contains("add_sa"));
    assert!(a
        .extern_control("GwIngress.sad", "del_sa", br#"{"index": 999}"#)
        .is_err());
}

// ------------------------------------------------------------------------------------------------
// IPv6

fn v6(last: u16, net: u16) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[0..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    a[4..6].copy_from_slice(&net.to_be_bytes());
    a[14..16].copy_from_slice(&last.to_be_bytes());
    a
}

fn v6_value(a: [u8; 16]) -> Value {
    let mut v = Value::new(128, 0);
    v.words = vec![
        u64::from_be_bytes(a[8..16].try_into().unwrap()),
        u64::from_be_bytes(a[0..8].try_into().unwrap()),
    ];
    v
}

/// A host packet of either version: UDP with `payload`.
fn host_packet_any(src: &[u8], dst: &[u8], payload: &[u8]) -> Vec<u8> {
    if src.len() == 4 {
        return host_packet(src.try_into().unwrap(), dst.try_into().unwrap(), payload);
    }
    let mut p = vec![0u8; 14];
    p[12..14].copy_from_slice(&[0x86, 0xdd]);
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    h.extend_from_slice(&[17, 64]);
    h.extend_from_slice(src);
    h.extend_from_slice(dst);
    p.extend_from_slice(&h);
    p.extend_from_slice(&[0x30, 0x39, 0x00, 0x35, 0, (8 + payload.len()) as u8, 0, 0]);
    p.extend_from_slice(payload);
    p
}

fn fmt_addr(a: &[u8]) -> String {
    if a.len() == 4 {
        format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
    } else {
        std::net::Ipv6Addr::from(<[u8; 16]>::try_from(a).unwrap()).to_string()
    }
}

fn exact(a: &[u8]) -> FieldMatch {
    if a.len() == 4 {
        FieldMatch::Exact(Value::new(32, ip(a.try_into().unwrap())))
    } else {
        FieldMatch::Exact(v6_value(a.try_into().unwrap()))
    }
}

/// A gateway for sites of version `lan` (4 or 6) over a WAN of version `wan`: me/peer are tunnel
/// endpoints.
fn gateway_any(
    me: &[u8],
    peer: &[u8],
    lan: &[u8],
    remote: &[u8],
    out_spi: u32,
    in_spi: u32,
) -> Engine {
    let e = engine();
    let v4 = lan.len() == 4;
    // SPD: protect site -> remote site (/16 for v4, /48 for v6)
    let spd = e
        .table_index(if v4 {
            "GwIngress.spd"
        } else {
            "GwIngress.spd6"
        })
        .unwrap();
    let mask = if v4 {
        Value::new(32, 0xffff_0000)
    } else {
        v6_value([
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ])
    };
    let val = |a: &[u8]| {
        if v4 {
            Value::new(32, ip(a.try_into().unwrap()) & 0xffff_0000)
        } else {
            v6_value(a.try_into().unwrap())
        }
    };
    e.table_insert(
        spd,
        TableEntry {
            matches: vec![
                FieldMatch::Ternary {
                    value: val(lan),
                    mask: mask.clone(),
                },
                FieldMatch::Ternary {
                    value: val(remote),
                    mask,
                },
                FieldMatch::Any,
                FieldMatch::Any,
                FieldMatch::Any,
            ],
            action: ActionCall {
                action: action(&e, "GwIngress.protect"),
                args: vec![Value::new(32, 0)],
            },
            priority: 10,
        },
    )
    .unwrap();
    // routes: the site out of port 1 (by the LAN version), the peer out of port 2 (by the WAN
    // version)
    for (prefix, len, port) in [
        (lan, if v4 { 16 } else { 48 }, 1u64),
        (peer, if peer.len() == 4 { 24 } else { 64 }, 2),
    ] {
        let six = prefix.len() == 16;
        let t = e
            .table_index(if six {
                "GwIngress.ipv6_lpm"
            } else {
                "GwIngress.ipv4_lpm"
            })
            .unwrap();
        let value = if six {
            v6_value(prefix.try_into().unwrap())
        } else {
            Value::new(32, ip(prefix.try_into().unwrap()))
        };
        e.table_insert(
            t,
            TableEntry {
                matches: vec![FieldMatch::Lpm {
                    value,
                    prefix_len: len,
                }],
                action: ActionCall {
                    action: action(
                        &e,
                        if six {
                            "GwIngress.set_nhop6"
                        } else {
                            "GwIngress.set_nhop"
                        },
                    ),
                    args: vec![
                        Value::new(48, 0x02_00_00_00_00_a0 + port),
                        Value::new(48, 0x02_00_00_00_00_01),
                        Value::new(9, port),
                    ],
                },
                priority: 0,
            },
        )
        .unwrap();
    }
    e.extern_control(
        "GwIngress.sad",
        "add_sa",
        &sa_json(0, out_spi, &fmt_addr(me), &fmt_addr(peer)),
    )
    .unwrap();
    e.extern_control(
        "GwIngress.sad",
        "add_sa",
        &sa_json(1, in_spi, &fmt_addr(peer), &fmt_addr(me)),
    )
    .unwrap();
    let dec = e
        .table_index(if me.len() == 4 {
            "GwIngress.sad_dec"
        } else {
            "GwIngress.sad_dec6"
        })
        .unwrap();
    e.table_insert(
        dec,
        TableEntry {
            matches: vec![
                exact(peer),
                exact(me),
                FieldMatch::Exact(Value::new(32, in_spi as u64)),
            ],
            action: ActionCall {
                action: action(&e, "GwIngress.dec_sa"),
                args: vec![Value::new(32, 1)],
            },
            priority: 0,
        },
    )
    .unwrap();
    let site = |a: &[u8]| FieldMatch::Ternary {
        value: val(a),
        mask: if v4 {
            Value::new(32, 0xffff_0000)
        } else {
            v6_value(
                [0xff; 6]
                    .iter()
                    .copied()
                    .chain([0; 10])
                    .collect::<Vec<u8>>()
                    .try_into()
                    .unwrap(),
            )
        },
    };
    selectors(&e, 1, site(remote), site(lan));
    wan_port(&e, 2);
    e
}

#[test]
fn ipv4_and_ipv6_inner_and_outer_in_every_combination() {
    for (lan_v6, wan_v6) in [(false, false), (true, false), (false, true), (true, true)] {
        let (a_me, b_me): (Vec<u8>, Vec<u8>) = if wan_v6 {
            (v6(1, 0xa).to_vec(), v6(1, 0xb).to_vec())
        } else {
            (vec![192, 0, 2, 1], vec![198, 51, 100, 1])
        };
        let (a_lan, b_lan, src, dst): (Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>) = if lan_v6 {
            (
                v6(0, 1).to_vec(),
                v6(0, 2).to_vec(),
                v6(5, 1).to_vec(),
                v6(7, 2).to_vec(),
            )
        } else {
            (
                vec![10, 1, 0, 0],
                vec![10, 2, 0, 0],
                vec![10, 1, 0, 5],
                vec![10, 2, 0, 7],
            )
        };
        let a = gateway_any(&a_me, &b_me, &a_lan, &b_lan, 0x100, 0x200);
        let b = gateway_any(&b_me, &a_me, &b_lan, &a_lan, 0x200, 0x100);
        let payload: Vec<u8> = (0..64u8).collect();
        let pkt = host_packet_any(&src, &dst, &payload);
        let case = format!(
            "inner {}, outer {}",
            if lan_v6 { "v6" } else { "v4" },
            if wan_v6 { "v6" } else { "v4" }
        );

        let wan = run(&a, 1, &pkt);
        assert_eq!(wan.len(), 1, "{case}: A sends one packet");
        let (port, esp) = &wan[0];
        assert_eq!(*port, 2, "{case}");
        if wan_v6 {
            assert_eq!(&esp[12..14], &[0x86, 0xdd], "{case}: outer EtherType");
            assert_eq!(esp[14 + 6], 50, "{case}: next header ESP");
            assert_eq!(&esp[14 + 8..14 + 24], &a_me[..], "{case}: outer source");
            assert_eq!(&esp[54..58], &0x100u32.to_be_bytes(), "{case}: SPI");
        } else {
            assert_eq!(&esp[12..14], &[0x08, 0x00], "{case}: outer EtherType");
            assert_eq!(esp[14 + 9], 50, "{case}");
            assert_eq!(
                p4sec_engine::hash::csum16(&esp[14..34]),
                0,
                "{case}: outer checksum"
            );
            assert_eq!(&esp[34..38], &0x100u32.to_be_bytes(), "{case}: SPI");
        }
        assert!(
            !esp.windows(payload.len()).any(|w| w == &payload[..]),
            "{case}: encrypted"
        );

        let lan = run(&b, 2, esp);
        assert_eq!(lan.len(), 1, "{case}: B delivers the inner packet");
        let (port, inner) = &lan[0];
        assert_eq!(*port, 1, "{case}");
        if lan_v6 {
            assert_eq!(
                &inner[12..14],
                &[0x86, 0xdd],
                "{case}: inner EtherType restored"
            );
            assert_eq!(
                &inner[14 + 8..14 + 40],
                &[&src[..], &dst[..]].concat()[..],
                "{case}: inner addresses"
            );
            assert_eq!(inner[14 + 7], 63, "{case}: hop limit decremented once");
            assert_eq!(&inner[62..], &payload[..], "{case}: payload");
        } else {
            assert_eq!(&inner[12..14], &[0x08, 0x00], "{case}");
            assert_eq!(
                &inner[14 + 12..14 + 20],
                &[&src[..], &dst[..]].concat()[..],
                "{case}"
            );
            assert_eq!(inner[14 + 8], 63, "{case}");
            assert_eq!(p4sec_engine::hash::csum16(&inner[14..34]), 0, "{case}");
            assert_eq!(&inner[42..], &payload[..], "{case}");
        }
        // replayed: dropped
        assert!(run(&b, 2, esp).is_empty(), "{case}: replay dropped");
    }
}

fn counter(e: &Engine, name: &str, index: usize) -> u64 {
    let c = e
        .prog
        .counters
        .iter()
        .position(|c| c.name == name)
        .unwrap_or_else(|| panic!("no counter {name}"));
    e.counter_read(c, index).unwrap().0
}

/// A clear packet injected on A's WAN port with a source in A's own site and a destination in B's
/// matches A's protect policy: it must not be encrypted towards B (nor forwarded), only dropped and
/// counted.
#[test]
fn clear_traffic_from_the_wan_is_never_protected() {
    let a = gateway(
        [192, 0, 2, 1],
        [10, 1, 0, 0],
        [198, 51, 100, 1],
        [10, 2, 0, 0],
        0x100,
        0x200,
    );
    let b = gateway(
        [198, 51, 100, 1],
        [10, 2, 0, 0],
        [192, 0, 2, 1],
        [10, 1, 0, 0],
        0x200,
        0x100,
    );
    let spoofed = host_packet([10, 1, 0, 5], [10, 2, 0, 7], b"spoofed");
    let out = run(&a, 2, &spoofed);
    assert!(
        out.is_empty(),
        "spoofed clear packet from the WAN forwarded: {out:?}"
    );
    assert_eq!(
        counter(&a, "GwIngress.wan_drops", 1),
        1,
        "counted as WAN_SPOOFED"
    );
    // the same packet from the LAN is protected and reaches B's site
    let esp = run(&a, 1, &spoofed);
    assert_eq!(esp.len(), 1);
    assert_eq!(esp[0].1[14 + 9], 50, "ESP");
    let lan = run(&b, 2, &esp[0].1);
    assert_eq!(lan.len(), 1, "legit traffic still flows");
    assert_eq!(lan[0].0, 1);
    // clear traffic from the WAN that no bypass policy allows is dropped and counted as WAN_DENIED
    assert!(run(&a, 2, &host_packet([203, 0, 113, 9], [10, 1, 0, 5], b"x")).is_empty());
    assert_eq!(counter(&a, "GwIngress.wan_drops", 0), 1);
}

/// Whoever holds an SA's keys (here: a gateway with the same SA that protects more than its site)
/// sends ESP whose inner source is outside the SA's selectors: B drops it and counts
/// SELECTOR_MISMATCH; inside them it passes.
#[test]
fn decrypted_packets_outside_the_selectors_are_dropped_and_counted() {
    let a = gateway(
        [192, 0, 2, 1],
        [10, 1, 0, 0],
        [198, 51, 100, 1],
        [10, 2, 0, 0],
        0x100,
        0x200,
    );
    let b = gateway(
        [198, 51, 100, 1],
        [10, 2, 0, 0],
        [192, 0, 2, 1],
        [10, 1, 0, 0],
        0x200,
        0x100,
    );
    // A protects 10.9.0.0/16 -> B's site too (its SPD is A's to write; B's selectors say
    // 10.1.0.0/16)
    let spd = a.table_index("GwIngress.spd").unwrap();
    a.table_insert(
        spd,
        TableEntry {
            matches: vec![
                prefix16([10, 9, 0, 0]),
                prefix16([10, 2, 0, 0]),
                FieldMatch::Any,
                FieldMatch::Any,
                FieldMatch::Any,
            ],
            action: ActionCall {
                action: action(&a, "GwIngress.protect"),
                args: vec![Value::new(32, 0)],
            },
            priority: 20,
        },
    )
    .unwrap();
    let forged = run(&a, 1, &host_packet([10, 9, 0, 5], [10, 2, 0, 7], b"forged"));
    assert_eq!(forged.len(), 1);
    assert!(
        run(&b, 2, &forged[0].1).is_empty(),
        "inner source outside the selectors delivered"
    );
    assert_eq!(
        counter(&b, "GwIngress.esp_status", 12),
        1,
        "SELECTOR_MISMATCH counted"
    );
    assert_eq!(counter(&b, "GwIngress.sa_counters", 16 + 12), 1, "per SA");
    // a destination outside them too
    let forged = run(&a, 1, &host_packet([10, 1, 0, 5], [10, 2, 0, 7], b"ok"));
    assert_eq!(
        run(&b, 2, &forged[0].1).len(),
        1,
        "inside the selectors: delivered"
    );
    assert_eq!(counter(&b, "GwIngress.esp_status", 12), 1);
}

/// Selectors with ports: the inner packet is parsed again (recirculated) to read its ports, then
/// checked.
#[test]
fn port_selectors_are_checked_on_the_inner_ports() {
    let a = gateway(
        [192, 0, 2, 1],
        [10, 1, 0, 0],
        [198, 51, 100, 1],
        [10, 2, 0, 0],
        0x100,
        0x200,
    );
    let b = gateway(
        [198, 51, 100, 1],
        [10, 2, 0, 0],
        [192, 0, 2, 1],
        [10, 1, 0, 0],
        0x200,
        0x100,
    );
    // replace B's address-only selector of SA 1 by one for UDP to port 53 only
    let t = b.table_index("GwIngress.sa_selectors").unwrap();
    let mut m = vec![
        FieldMatch::Exact(Value::new(32, 1)),
        prefix16([10, 1, 0, 0]),
        prefix16([10, 2, 0, 0]),
        FieldMatch::Any,
    ];
    let ok = ActionCall {
        action: action(&b, "GwIngress.selector_ok"),
        args: vec![],
    };
    b.table_delete(
        t,
        &TableEntry {
            matches: m.clone(),
            action: ok,
            priority: 10,
        },
    )
    .unwrap();
    m[3] = FieldMatch::Ternary {
        value: Value::new(8, 17),
        mask: Value::new(8, 0xff),
    };
    b.table_insert(
        t,
        TableEntry {
            matches: m,
            action: ActionCall {
                action: action(&b, "GwIngress.selector_ports"),
                args: vec![
                    Value::new(16, 0),
                    Value::new(16, 65535),
                    Value::new(16, 53),
                    Value::new(16, 53),
                ],
            },
            priority: 10,
        },
    )
    .unwrap();
    let dns = run(&a, 1, &host_packet([10, 1, 0, 5], [10, 2, 0, 7], b"query"));
    let lan = run(&b, 2, &dns[0].1);
    assert_eq!(lan.len(), 1, "UDP to port 53: delivered");
    assert_eq!(&lan[0].1[14 + 12..14 + 20], &[10, 1, 0, 5, 10, 2, 0, 7]);
    assert_eq!(lan[0].1[14 + 8], 63, "TTL decremented once");
    let mut other = host_packet([10, 1, 0, 5], [10, 2, 0, 7], b"query");
    other[14 + 20 + 3] = 54; // destination port 54
    let esp = run(&a, 1, &other);
    assert!(run(&b, 2, &esp[0].1).is_empty(), "UDP to port 54 delivered");
    assert_eq!(counter(&b, "GwIngress.esp_status", 12), 1);
}
