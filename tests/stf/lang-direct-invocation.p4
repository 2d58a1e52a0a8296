// Direct type invocation (P4_16 spec 1.2, "Direct type invocation"): `Ctl.apply(...)` and `Prs.apply(...)`
// without a declared instance. Each call site is its own instance: the two call sites of Count keep separate
// registers, while one call site applied for two packets keeps its register.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> op; bit<8> a; bit<8> b; }
header t_t { bit<8> v; }
struct headers_t { h_t h; t_t t; }
struct meta_t { }

parser Tail(packet_in pkt, out t_t t) {
    state start { pkt.extract(t); transition accept; }
}

control AddOne(inout bit<8> v) {
    apply { v = v + 1; }
}

control Count(out bit<8> n) {
    register<bit<8>>(1) r;
    apply {
        bit<8> x;
        r.read(x, 0);
        x = x + 1;
        r.write(0, x);
        n = x;
    }
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        Tail.apply(pkt, hdr.t);
        transition accept;
    }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        AddOne.apply(hdr.h.a);
        AddOne.apply(hdr.h.a);
        if (hdr.h.op == 1) {
            Count.apply(hdr.h.b);
        } else {
            Count.apply(hdr.h.b);
        }
        hdr.t.v = hdr.t.v + 1;
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); pkt.emit(hdr.t); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
