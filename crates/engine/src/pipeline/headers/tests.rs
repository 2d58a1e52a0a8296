//! Tests of extract, emit and the checksums computed from bytes or fields.

use crate::testutil::*;
use crate::*;

/// The word-at-a-time checksum path must agree with checksumming the concatenated bytes, for field
/// widths that straddle 16-bit words and a tail that is not a whole word.
#[test]
fn csum16_over_odd_width_fields_matches_the_byte_form() {
    let src = r#"#include <v1model.p4>
header h_t { bit<4> a; bit<7> b; bit<13> c; bit<56> d; bit<64> e; bit<16> ck; bit<8> f; }
struct hs { h_t h; }
struct m { }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) { state start { p.extract(hdr.h); transition accept; } }
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { sm.egress_spec = 1; } }
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs hdr, inout m meta) {
    apply { update_checksum(true, { hdr.h.a, hdr.h.b, hdr.h.c, hdr.h.d, hdr.h.e, hdr.h.f, 3w5 }, hdr.h.ck, HashAlgorithm.csum16); }
}
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;
    let e = engine(src);
    let mut w = Worker::new(&e);
    let mut out = Outputs::default();
    let mut rng = 0x1234_5678u64;
    for _ in 0..200 {
        let pkt: Vec<u8> = (0..22)
            .map(|_| (hash::next_random(&mut rng) >> 24) as u8)
            .collect();
        out.clear();
        e.process(&mut w, 0, &pkt, &mut out);
        let (_, f) = out.iter().next().unwrap();
        // the checksummed bits: everything but the 16-bit checksum (bits 144..160), then 3w5
        let mut bits: Vec<u8> = vec![];
        for i in 0..168 {
            if !(144..160).contains(&i) {
                bits.push((pkt[i / 8] >> (7 - i % 8)) & 1);
            }
        }
        bits.extend([1, 0, 1]);
        let mut bytes = vec![0u8; bits.len().div_ceil(8)];
        for (i, b) in bits.iter().enumerate() {
            bytes[i / 8] |= b << (7 - i % 8);
        }
        let want = hash::csum16(&bytes);
        assert_eq!(u16::from_be_bytes([f[18], f[19]]), want);
        assert_eq!(&f[..18], &pkt[..18]);
        assert_eq!(f[20], pkt[20]);
    }
}

/// verify_checksum over a whole header is computed from the packet bytes when the header came
/// straight from the packet: every single-bit error in the header must still be detected, and a
/// correct checksum accepted, including for a header whose other words are nearly all zero.
#[test]
fn header_checksum_from_bytes_agrees_with_fields() {
    let e = engine(ROUTER);
    route(&e, 0, 0, 1);
    let mut w = Worker::new(&e);
    let good = ipv4_packet([10, 1, 2, 3], 64);
    let mut out = Outputs::default();
    e.process(&mut w, 0, &good, &mut out);
    assert_eq!(
        out.len(),
        1,
        "a packet with a correct checksum is forwarded"
    );
    // every single-bit error in the IPv4 header makes the checksum wrong (the router then drops)
    for bit in 0..160 {
        let mut p = good.clone();
        p[14 + bit / 8] ^= 0x80 >> (bit % 8);
        if p[14] >> 4 != 4 || p[14] & 15 != 5 || p[22] <= 1 {
            continue; // not IPv4 with ihl 5 any more, or ttl too low: dropped for other reasons
        }
        let mut out = Outputs::default();
        e.process(&mut w, 0, &p, &mut out);
        assert_eq!(
            out.len(),
            0,
            "bit {bit} flipped: checksum error not detected"
        );
    }
    // a header that is zero but for version, ihl and ttl
    let mut z = vec![0u8; 40];
    z[12] = 0x08;
    z[14] = 0x45;
    z[22] = 64;
    let c = hash::csum16(&z[14..34]);
    z[24..26].copy_from_slice(&c.to_be_bytes());
    let mut out = Outputs::default();
    e.process(&mut w, 0, &z, &mut out);
    assert_eq!(
        out.len(),
        1,
        "correct checksum of a nearly empty header accepted"
    );
}

/// update_checksum over a whole header is left to the deparser, which sums the emitted bytes;
/// behind a 4-bit header (not on a byte boundary) the deparser cannot patch its bytes and computes
/// it from the fields first. Both must give the header a correct checksum, and a false condition
/// none.
#[test]
fn deferred_header_checksum() {
    let src = |pre: &str| {
        ROUTER
            .replace(
                "header ipv4_t {",
                "header nib_t { bit<4> x; bit<4> y; }\nheader ipv4_t {",
            )
            .replace("ipv4_t     ipv4;", "ipv4_t     ipv4;\n    nib_t nib;")
            .replace(
                "pkt.emit(hdr.ethernet);",
                &format!("pkt.emit(hdr.ethernet); {pre}"),
            )
    };
    for (pre, nib) in [("", false), ("pkt.emit(hdr.nib);", true)] {
        let mut p = src(pre);
        if nib {
            // the nibble header becomes valid in ingress and is emitted before IPv4 (4 + 4 bits:
            // IPv4 then starts on a byte again, so emit the 4-bit part alone: shrink y to nothing)
            p = p.replace("bit<4> y; ", "").replace(
                "ipv4_lpm.apply();",
                "ipv4_lpm.apply(); hdr.nib.setValid(); hdr.nib.x = 0xa;",
            );
        }
        let e = engine(&p);
        route(&e, 0, 0, 1);
        let mut w = Worker::new(&e);
        let mut out = Outputs::default();
        e.process(&mut w, 0, &ipv4_packet([10, 1, 2, 3], 64), &mut out);
        let (_, f) = out.iter().next().expect("forwarded");
        if nib {
            // 14 bytes Ethernet, then the nibble and IPv4 shifted by 4 bits: undo the shift to
            // check
            assert_eq!(f[14] >> 4, 0xa);
            let ip: Vec<u8> = (0..20)
                .map(|i| (f[14 + i] << 4) | (f[15 + i] >> 4))
                .collect();
            assert_eq!(ip[8], 63, "ttl decremented");
            assert_eq!(
                hash::csum16(&ip),
                0,
                "checksum computed from the fields before an unaligned emit"
            );
        } else {
            assert_eq!(f[22], 63);
            assert_eq!(
                hash::csum16(&f[14..34]),
                0,
                "checksum patched into the emitted bytes"
            );
        }
    }
    // a false condition (ihl != 5 is not verified either, so it is forwarded) leaves the checksum
    // alone
    let e = engine(ROUTER);
    route(&e, 0, 0, 1);
    let mut w = Worker::new(&e);
    let mut p = ipv4_packet([10, 1, 2, 3], 64);
    p[14] = 0x46;
    p.extend_from_slice(&[0; 4]);
    let mut out = Outputs::default();
    e.process(&mut w, 0, &p, &mut out);
    let (_, f) = out.iter().next().expect("forwarded");
    assert_eq!(
        &f[24..26],
        &p[24..26],
        "checksum field untouched when the condition is false"
    );
}
