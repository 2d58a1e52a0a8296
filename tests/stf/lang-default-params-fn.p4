// An extern function with a default parameter value (the STF runner's test extern `extern_func`, which copies
// `s` into `d`), called without the defaulted argument and with named arguments in another order.
#include <core.p4>
#include <v1model.p4>

extern void extern_func(out bit<32> d, in bit<32> s = 7);

header h_t { bit<32> a; bit<32> b; bit<32> c; }
struct headers_t { h_t h; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        extern_func(hdr.h.a);
        extern_func(s = hdr.h.c, d = hdr.h.b);
        extern_func(hdr.h.c, 32w0xABCD);
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
