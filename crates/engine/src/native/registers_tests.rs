//! Registers and indexed counters from native code against the closures: reads, writes (masked
//! to the register's width), out-of-range indexes (read 0, write nothing, count nothing), indexes
//! wider than 32 bits, and the state the control plane reads back afterwards.

use super::tests::{coverage, engines, run};
use crate::Engine;

const STATE: &str = r#"#include <v1model.p4>
header h_t { bit<8> i; bit<40> j; bit<16> v; bit<16> r0; bit<8> r1; bit<16> r2; }
struct hs { h_t h; }
struct m { bit<12> x; bit<64> y; }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    register<bit<16>>(32) r16;
    register<bit<12>>(8) r12;
    register<bit<64>>(4) r64;
    counter(16, CounterType.packets_and_bytes) c;
    apply {
        sm.egress_spec = 1;
        r16.read(hdr.h.r0, (bit<32>)hdr.h.i);
        r16.write((bit<32>)hdr.h.i, hdr.h.v + hdr.h.r0);
        r12.write((bit<32>)hdr.h.i, (bit<12>)hdr.h.v);
        r12.read(meta.x, (bit<32>)hdr.h.i);
        hdr.h.r1 = (bit<8>)meta.x;
        r64.read(meta.y, (bit<32>)(hdr.h.j[2:0]));
        hdr.h.r2 = (bit<16>)(meta.y >> 40);
        r64.write((bit<32>)hdr.h.j, (bit<64>)hdr.h.v << 40);
        c.count((bit<32>)hdr.h.i);
        c.count((bit<32>)hdr.h.j);
    }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), V(), D()) main;
"#;

fn state(e: &Engine) -> Vec<String> {
    let mut out = vec![];
    for (reg, n) in [(0, 32), (1, 8), (2, 4)] {
        for i in 0..n {
            out.push(format!("{reg}[{i}]={:?}", e.register_read(reg, i).unwrap()));
        }
    }
    for i in 0..16 {
        out.push(format!("c[{i}]={:?}", e.counter_read(0, i).unwrap()));
    }
    out
}

#[test]
fn registers_and_counters_from_native_code_agree() {
    // every statement of the control is native
    let c = coverage(STATE);
    let without = coverage(&STATE.replace(
        "        c.count((bit<32>)hdr.h.i);\n        c.count((bit<32>)hdr.h.j);\n",
        "",
    ));
    assert!(
        c.failed == 0 && c.fallback == without.fallback,
        "{c:?} against {without:?}"
    );
    let (x, y) = engines(STATE);
    let frame = |i: u8, j: u64, v: u16| {
        let mut f = vec![i];
        f.extend(&j.to_be_bytes()[3..]);
        f.extend(v.to_be_bytes());
        f.extend([0u8; 5]);
        f
    };
    // the first packet to cell 3 reads 0, writes 0x1234; the second reads it back
    let a = run(&x, &y, &frame(3, 1, 0x1234)).unwrap();
    assert_eq!(&a[8..10], &[0, 0]);
    let b = run(&x, &y, &frame(3, 1, 0x0001)).unwrap();
    assert_eq!(&b[8..10], &[0x12, 0x34]);
    // r12 keeps 12 bits of 0xffff (cut by the cast); read back and cut to 8
    let c1 = run(&x, &y, &frame(5, 2, 0xffff)).unwrap();
    assert_eq!(c1[10], 0xff);
    assert_eq!(
        x.register_read(1, 5).unwrap(),
        y.register_read(1, 5).unwrap()
    );
    assert_eq!(y.register_read(1, 5).unwrap().as_u64(), 0xfff);
    // indexes out of range (r12 has 8 cells, the counter 16; j beyond 32 bits saturates)
    for (i, j) in [
        (8u8, 4u64),
        (31, 16),
        (200, 1 << 33),
        (255, (1 << 40) - 1),
        (7, 1 << 32),
    ] {
        run(&x, &y, &frame(i, j, 0xbeef)).unwrap();
    }
    let mut s = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..300 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        run(
            &x,
            &y,
            &frame(
                s as u8 & 0x3f,
                (s >> 8) & 0xff_ffff_ffff & if s & 1 == 0 { 7 } else { !0 },
                (s >> 48) as u16,
            ),
        );
    }
    assert_eq!(state(&x), state(&y));
    // the counter counted packets and bytes (both engines alike, and not nothing)
    assert!(y.counter_read(0, 3).unwrap().0 >= 2);
}
