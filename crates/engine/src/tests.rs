//! Engine tests on programs compiled from P4 source.
use super::*;

fn engine(src: &str) -> Engine {
    let prog = p4sec_frontend::compile_str("test.p4", src, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    Engine::new(Arc::new(prog), &test_externs::registry()).unwrap()
}

const ROUTER: &str = include_str!("../../../programs/ipv4_router.p4");

fn ipv4_packet(dst: [u8; 4], ttl: u8) -> Vec<u8> {
    let mut p = vec![0u8; 14 + 20 + 6];
    p[12] = 0x08;
    p[14] = 0x45;
    p[16..18].copy_from_slice(&(26u16).to_be_bytes());
    p[22] = ttl;
    p[23] = 17;
    p[26..30].copy_from_slice(&[10, 0, 0, 1]);
    p[30..34].copy_from_slice(&dst);
    let c = hash::csum16(&p[14..34]);
    p[24..26].copy_from_slice(&c.to_be_bytes());
    p
}

fn route(e: &Engine, prefix: u32, len: u32, port: u64) {
    let t = e.table_index("RouterIngress.ipv4_lpm").unwrap();
    let set_nhop = e.prog.actions.iter().position(|a| a.name == "RouterIngress.set_nhop").unwrap() as u32;
    e.table_insert(
        t,
        TableEntry {
            matches: vec![FieldMatch::Lpm { value: Value::new(32, prefix as u64), prefix_len: len }],
            action: ActionCall { action: set_nhop, args: vec![Value::new(48, 0xaabbccddeeff), Value::new(48, 0x112233445566), Value::new(9, port)] },
            priority: 0,
        },
    )
    .unwrap();
}

#[test]
fn router_lpm_ttl_and_checksum() {
    let e = engine(ROUTER);
    route(&e, 0x0a000000, 8, 1);
    route(&e, 0x0a010000, 16, 2);
    let mut w = Worker::new(&e);
    let mut out = Outputs::default();
    e.process(&mut w, 0, &ipv4_packet([10, 1, 2, 3], 64), &mut out);
    e.process(&mut w, 0, &ipv4_packet([10, 2, 2, 3], 64), &mut out);
    e.process(&mut w, 0, &ipv4_packet([11, 2, 2, 3], 64), &mut out); // no route: dropped
    e.process(&mut w, 0, &ipv4_packet([10, 1, 2, 3], 1), &mut out); // ttl 1: dropped
    let frames: Vec<(u32, Vec<u8>)> = out.iter().map(|(p, b)| (p, b.to_vec())).collect();
    assert_eq!(frames.len(), 2);
    assert_eq!(frames[0].0, 2, "longest prefix wins");
    assert_eq!(frames[1].0, 1);
    let f = &frames[0].1;
    assert_eq!(&f[0..6], &[0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff]);
    assert_eq!(f[22], 63, "ttl decremented");
    assert_eq!(hash::csum16(&f[14..34]), 0, "checksum recomputed");
    assert_eq!(f.len(), 40, "payload kept");
}

#[test]
fn parser_error_keeps_payload() {
    let e = engine(ROUTER);
    let mut w = Worker::new(&e);
    let mut out = Outputs::default();
    // 20 bytes: Ethernet + 6 bytes, IPv4 extract fails with PacketTooShort; ingress drops non-IPv4
    let mut p = vec![0u8; 20];
    p[12] = 0x08;
    e.process(&mut w, 0, &p, &mut out);
    assert!(out.is_empty());
}

#[test]
fn table_writes_do_not_block_lookups() {
    let e = Arc::new(engine(ROUTER));
    let writer = {
        let e = e.clone();
        std::thread::spawn(move || {
            for i in 0..2000u32 {
                route(&e, 0x0b000000 | (i << 8), 24, 3);
            }
        })
    };
    let mut w = Worker::new(&e);
    let mut out = Outputs::default();
    for _ in 0..2000 {
        e.process(&mut w, 0, &ipv4_packet([11, 0, 5, 1], 64), &mut out);
    }
    writer.join().unwrap();
    out.clear();
    e.process(&mut w, 0, &ipv4_packet([11, 0, 5, 1], 64), &mut out);
    assert_eq!(out.iter().next().map(|f| f.0), Some(3));
}
