// A table with more keys than the engine's fast key buffer holds (20 fields, each a 64-bit word of the
// lookup key): BMv2 has no such limit, and switch.p4-style ACLs have 25 and more.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<1> k0;
    bit<1> k1;
    bit<1> k2;
    bit<1> k3;
    bit<1> k4;
    bit<1> k5;
    bit<1> k6;
    bit<1> k7;
    bit<1> k8;
    bit<1> k9;
    bit<1> k10;
    bit<1> k11;
    bit<1> k12;
    bit<1> k13;
    bit<1> k14;
    bit<1> k15;
    bit<1> k16;
    bit<1> k17;
    bit<1> k18;
    bit<1> k19;
    bit<4> pad;
    bit<8> res;
}
struct headers_t { h_t h; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action set(bit<8> v) { hdr.h.res = v; }
    action miss() { hdr.h.res = 0xee; }
    table t {
        key = {
            hdr.h.k0: exact;
            hdr.h.k1: exact;
            hdr.h.k2: exact;
            hdr.h.k3: exact;
            hdr.h.k4: exact;
            hdr.h.k5: exact;
            hdr.h.k6: exact;
            hdr.h.k7: exact;
            hdr.h.k8: exact;
            hdr.h.k9: exact;
            hdr.h.k10: exact;
            hdr.h.k11: exact;
            hdr.h.k12: exact;
            hdr.h.k13: exact;
            hdr.h.k14: exact;
            hdr.h.k15: exact;
            hdr.h.k16: exact;
            hdr.h.k17: exact;
            hdr.h.k18: exact;
            hdr.h.k19: exact;
        }
        actions = { set; miss; }
        default_action = miss();
    }
    apply {
        sm.egress_spec = 1;
        t.apply();
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
