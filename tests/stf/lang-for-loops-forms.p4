// `for` header forms of P4_16 1.2.5 and of p4c's dumps: no clauses at all (`for (;;)`, left by `break`), a
// condition only, a for-in over a typed list `(list<bit<8>>){...}` with an annotation on the loop, and an
// initializer list mixing a declaration with an assignment to a variable declared before the loop.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> r1; bit<8> r2; bit<8> r3; bit<8> r4; }
struct headers_t { h_t h; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        bit<8> i = 0;
        for (;;) {
            i = i + 1;
            if (i == hdr.h.a) {
                break;
            }
        }
        hdr.h.r1 = i;
        for (; i < 10;) {
            i = i + 1;
        }
        hdr.h.r2 = i;
        @unroll for (bit<8> k in (list<bit<8>>){1, 2, hdr.h.a}) {
            hdr.h.r3 = hdr.h.r3 + k;
        }
        for (bit<8> k = 0, i = 2; k < 2; k = k + 1) {
            hdr.h.r4 = hdr.h.r4 + i;
            i = i + 1;
        }
        hdr.h.r4 = hdr.h.r4 * 16 + i;
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
