// Language semantics our own tests pin down: exit inside an applied sub-control still copies inout
// arguments back; a function's side effect happens before the operand to its right is read; switch
// fall-through labels; saturating and signed arithmetic; slices as assignment targets.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> op; bit<8> a; bit<8> b; bit<8> c; }
struct headers_t { h_t h; }
struct meta_t { }

bit<8> bump(inout bit<8> x) {
    x = x + 1;
    return 10;
}

control Sub(inout bit<8> v) {
    apply {
        v = 0x55;
        if (v == 0x55) {
            exit;
        }
        v = 0x66;
    }
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    Sub() sub;
    apply {
        sm.egress_spec = 1;
        if (hdr.h.op == 1) {
            hdr.h.c = 0x11;
            sub.apply(hdr.h.a);
            hdr.h.c = 0x22;          // not reached: exit ends ingress
        } else if (hdr.h.op == 2) {
            hdr.h.c = hdr.h.a + bump(hdr.h.a);   // reads a before bump changes it
        } else if (hdr.h.op == 3) {
            switch (hdr.h.a) {
                1:
                2: { hdr.h.c = 0x12; }
                default: { hdr.h.c = 0xdd; }
            }
        } else if (hdr.h.op == 4) {
            hdr.h.c = hdr.h.a |+| hdr.h.b;
            int<8> s = (int<8>) hdr.h.a;
            hdr.h.b = (bit<8>) (s >> 1);
            hdr.h.a[3:0] = 4w0x9;
        }
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
