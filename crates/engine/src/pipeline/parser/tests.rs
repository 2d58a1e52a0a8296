//! Tests of the parser stage.

use crate::testutil::*;
use crate::*;

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
