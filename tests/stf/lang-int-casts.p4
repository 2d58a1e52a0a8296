// Casts between `int` and `int<W>` / `bit<W>` of run-time values (the reference compiler accepts them; p4testgen's
// parser-unroll-test1): `(int<8>)((int)x + 1)` is x + 1 modulo 2^8, `(bit<8>)((int)s - 3)` of a signed value
// keeps its sign before the cast back, and a comparison in `int` sees the exact value (no wrap at 8 bits).
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; int<8> s; bit<8> r0; bit<8> r1; bit<8> r2; }
struct headers_t { h_t h; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.h.r0 = (bit<8>)((int)hdr.h.a + 1);
        hdr.h.s = (int<8>)((int)hdr.h.s - 3);
        // a + 1 in int is 256 for a = 255: no wrap before the comparison
        if ((int)hdr.h.a + 1 > 255) {
            hdr.h.r1 = 1;
        } else {
            hdr.h.r1 = 0;
        }
        hdr.h.r2 = (bit<8>)((int)hdr.h.s * 2);
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
