//! Helpers the engine's stage tests share: an engine from P4 source, a one-header program, the
//! IPv4 router and its packets; `pair`: both engines of a program, each with a worker and an output
//! kept across packets, and the table entries tests insert into both; `two_tables`: the program
//! of the one-key apply tests.

use crate::*;
use p4sec_ir::*;
use std::sync::Arc;

pub(crate) mod pair;
pub(crate) mod two_tables;

pub(crate) fn engine(src: &str) -> Engine {
    let prog = p4sec_frontend::compile_str("test.p4", src, &Default::default())
        .unwrap_or_else(|e| panic!("{e}"));
    Engine::new(Arc::new(prog), &test_externs::registry()).unwrap()
}

/// A v1model program with one header `h` of `fields`, extracted and emitted, no metadata, and
/// `ingress` as the body of control `I` (its actions, tables and `apply` block).
pub(crate) fn one_header_program(fields: &str, ingress: &str) -> String {
    format!(
        r#"#include <v1model.p4>
header h_t {{ {fields} }}
struct hs {{ h_t h; }}
struct m {{ }}
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {{ state start {{ p.extract(hdr.h); transition accept; }} }}
control V(inout hs hdr, inout m meta) {{ apply {{ }} }}
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {{
{ingress}
}}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) {{ apply {{ }} }}
control D(packet_out p, in hs hdr) {{ apply {{ p.emit(hdr.h); }} }}
V1Switch(P(), V(), I(), E(), V(), D()) main;
"#
    )
}

pub(crate) const ROUTER: &str = include_str!("../../../programs/ipv4_router.p4");

pub(crate) fn ipv4_packet(dst: [u8; 4], ttl: u8) -> Vec<u8> {
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

pub(crate) fn route(e: &Engine, prefix: u32, len: u32, port: u64) {
    let t = e.table_index("RouterIngress.ipv4_lpm").unwrap();
    e.table_insert(t, route_entry(e, prefix, len, port, 0xaabbccddeeff))
        .unwrap();
}

/// The router's route `prefix/len` to `port`, its next hop's MAC address `dst_mac`.
pub(crate) fn route_entry(
    e: &Engine,
    prefix: u32,
    len: u32,
    port: u64,
    dst_mac: u64,
) -> TableEntry {
    let set_nhop = e
        .prog
        .actions
        .iter()
        .position(|a| a.name == "RouterIngress.set_nhop")
        .unwrap() as u32;
    TableEntry {
        matches: vec![FieldMatch::Lpm {
            value: Value::new(32, prefix as u64),
            prefix_len: len,
        }],
        action: ActionCall {
            action: set_nhop,
            args: vec![
                Value::new(48, dst_mac),
                Value::new(48, 0x112233445566),
                Value::new(9, port),
            ],
        },
        priority: 0,
    }
}
