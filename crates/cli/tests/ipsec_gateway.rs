//! Two p4sec engines running programs/ipsec_gateway.p4 as a site-to-site VPN: LAN traffic of site A is
//! encrypted by gateway A, crosses the WAN as ESP, is decrypted by gateway B and routed into site B.
//! Replayed and tampered ESP packets are dropped and counted per status.

use p4sec_engine::{Engine, Outputs, Worker};
use p4sec_ir::{ActionCall, FieldMatch, TableEntry, Value};
use std::sync::Arc;

const GW: &str = include_str!("../../../programs/ipsec_gateway.p4");

fn engine() -> Engine {
    let prog = p4sec_frontend::compile_str("programs/ipsec_gateway.p4", GW, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    Engine::new(Arc::new(prog), &p4sec_externs::p4::registry()).unwrap()
}

fn action(e: &Engine, name: &str) -> u32 {
    e.prog.actions.iter().position(|a| a.name == name).unwrap_or_else(|| panic!("no action {name}")) as u32
}

fn ip(a: [u8; 4]) -> u64 {
    u32::from_be_bytes(a) as u64
}

fn route(e: &Engine, prefix: [u8; 4], len: u32, mac: u64, port: u64) {
    let t = e.table_index("GwIngress.ipv4_lpm").unwrap();
    let a = action(e, "GwIngress.set_nhop");
    e.table_insert(t, TableEntry {
        matches: vec![FieldMatch::Lpm { value: Value::new(32, ip(prefix)), prefix_len: len }],
        action: ActionCall { action: a, args: vec![Value::new(48, mac), Value::new(48, 0x02_00_00_00_00_01), Value::new(9, port)] },
        priority: 0,
    })
    .unwrap();
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

/// Gateway with own address `me`, local site `lan` (port 1), peer gateway `peer` on the WAN (port 2).
fn gateway(me: [u8; 4], lan: [u8; 4], peer: [u8; 4], remote: [u8; 4], out_spi: u32, in_spi: u32) -> Engine {
    let e = engine();
    let t = e.table_index("GwIngress.local_addr").unwrap();
    e.table_insert(t, TableEntry { matches: vec![FieldMatch::Exact(Value::new(32, ip(me)))], action: ActionCall { action: action(&e, "GwIngress.to_me"), args: vec![] }, priority: 0 }).unwrap();
    let spd = e.table_index("GwIngress.spd").unwrap();
    e.table_insert(spd, TableEntry {
        matches: vec![
            FieldMatch::Ternary { value: Value::new(32, ip(lan)), mask: Value::new(32, 0xffff_0000) },
            FieldMatch::Ternary { value: Value::new(32, ip(remote)), mask: Value::new(32, 0xffff_0000) },
            FieldMatch::Any,
            FieldMatch::Any,
            FieldMatch::Any,
        ],
        action: ActionCall { action: action(&e, "GwIngress.protect"), args: vec![Value::new(32, 0)] },
        priority: 10,
    })
    .unwrap();
    route(&e, lan, 16, 0x02_00_00_00_00_aa, 1);
    route(&e, [peer[0], peer[1], peer[2], 0], 24, 0x02_00_00_00_00_bb, 2);
    let fmt = |a: [u8; 4]| format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3]);
    e.extern_control("GwIngress.sad", "add_sa", &sa_json(0, out_spi, &fmt(me), &fmt(peer))).unwrap();
    e.extern_control("GwIngress.sad", "add_sa", &sa_json(1, in_spi, &fmt(peer), &fmt(me))).unwrap();
    let dec = e.table_index("GwIngress.sad_dec").unwrap();
    e.table_insert(dec, TableEntry {
        matches: vec![
            FieldMatch::Exact(Value::new(32, ip(peer))),
            FieldMatch::Exact(Value::new(32, ip(me))),
            FieldMatch::Exact(Value::new(32, in_spi as u64)),
        ],
        action: ActionCall { action: action(&e, "GwIngress.dec_sa"), args: vec![Value::new(32, 1)] },
        priority: 0,
    })
    .unwrap();
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
    let a = gateway([192, 0, 2, 1], [10, 1, 0, 0], [198, 51, 100, 1], [10, 2, 0, 0], 0x100, 0x200);
    let b = gateway([198, 51, 100, 1], [10, 2, 0, 0], [192, 0, 2, 1], [10, 1, 0, 0], 0x200, 0x100);
    let payload: Vec<u8> = (0..100u8).collect();
    let pkt = host_packet([10, 1, 0, 5], [10, 2, 0, 7], &payload);

    let wan = run(&a, 1, &pkt);
    assert_eq!(wan.len(), 1, "A sends one packet");
    let (port, esp) = &wan[0];
    assert_eq!(*port, 2, "towards the WAN");
    assert_eq!(&esp[12..14], &[0x08, 0x00]);
    assert_eq!(esp[14 + 9], 50, "outer protocol is ESP");
    assert_eq!(&esp[14 + 12..14 + 20], &[192, 0, 2, 1, 198, 51, 100, 1], "outer addresses from the SA");
    assert_eq!(&esp[34..38], &0x100u32.to_be_bytes(), "SPI");
    assert_eq!(esp[14 + 8], 63, "outer TTL decremented by the forwarding pass");
    assert_eq!(p4sec_engine::hash::csum16(&esp[14..34]), 0, "outer checksum");
    assert!(!esp.windows(payload.len()).any(|w| w == &payload[..]), "payload is encrypted");

    let lan = run(&b, 2, esp);
    assert_eq!(lan.len(), 1, "B delivers the inner packet");
    let (port, inner) = &lan[0];
    assert_eq!(*port, 1);
    assert_eq!(&inner[0..6], &[2, 0, 0, 0, 0, 0xaa]);
    assert_eq!(&inner[14 + 12..14 + 20], &[10, 1, 0, 5, 10, 2, 0, 7], "inner addresses");
    assert_eq!(inner[14 + 8], 63, "inner TTL decremented once");
    assert_eq!(p4sec_engine::hash::csum16(&inner[14..34]), 0);
    assert_eq!(&inner[42..], &payload[..], "payload intact");

    // replay: dropped, counted as P4SEC_REPLAY (7)
    assert!(run(&b, 2, esp).is_empty());
    let c = b.prog.counters.iter().position(|c| c.name == "GwIngress.esp_status").unwrap();
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
    let per_sa = b.prog.counters.iter().position(|c| c.name == "GwIngress.sa_counters").unwrap();
    assert_eq!(b.counter_read(per_sa, 16).unwrap().0, 1, "SA 1: one good packet");
    assert_eq!(b.counter_read(per_sa, 16 + 7).unwrap().0, 1, "SA 1: one replay");
    assert_eq!(b.counter_read(per_sa, 16 + 4).unwrap().0, 1, "SA 1: one ICV failure");

    // traffic no policy covers is discarded; a BYPASS policy (here: UDP to ports 50..60) forwards it in the clear
    let plain = host_packet([10, 1, 0, 5], [198, 51, 100, 9], &payload);
    assert!(run(&a, 1, &plain).is_empty(), "no policy: DISCARD");
    let spd = a.table_index("GwIngress.spd").unwrap();
    a.table_insert(spd, TableEntry {
        matches: vec![
            FieldMatch::Any,
            FieldMatch::Ternary { value: Value::new(32, ip([198, 51, 100, 0])), mask: Value::new(32, 0xffff_ff00) },
            FieldMatch::Any,
            FieldMatch::Any,
            FieldMatch::Range { lo: Value::new(16, 50), hi: Value::new(16, 60) },
        ],
        action: ActionCall { action: action(&a, "GwIngress.bypass"), args: vec![] },
        priority: 20,
    })
    .unwrap();
    let out = run(&a, 1, &plain);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].1[14 + 9], 17, "bypass: still UDP");

    // SA statistics through the control interface
    let stats = a.extern_control("GwIngress.sad", "sa_stats", br#"{"index": 0}"#).unwrap();
    let s: serde_json::Value = serde_json::from_slice(&stats).unwrap();
    assert_eq!(s["packets"], 2, "two packets encapsulated by A");
    // bad control requests are precise errors
    assert!(a.extern_control("GwIngress.sad", "add_sa", b"{}").unwrap_err().contains("add_sa"));
    assert!(a.extern_control("GwIngress.sad", "del_sa", br#"{"index": 999}"#).is_err());
}
