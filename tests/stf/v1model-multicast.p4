// Multicast through the packet replication engine: one copy per (rid, port) with instance_type 5.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> tag; bit<8> itype; bit<8> port; bit<8> rid; }
struct headers_t { h_t h; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 7;
        if (hdr.h.tag != 0) {
            sm.mcast_grp = (bit<16>) hdr.h.tag;
        }
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.h.itype = (bit<8>) sm.instance_type;
        hdr.h.port = (bit<8>) sm.egress_port;
        hdr.h.rid = (bit<8>) sm.egress_rid;
        if (sm.egress_port == 2 && sm.egress_rid == 20) {
            mark_to_drop(sm);          // dropping one replica in egress leaves the others
        }
    }
}
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
