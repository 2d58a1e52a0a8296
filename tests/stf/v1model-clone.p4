// I2E and E2E clones through mirror sessions (BMv2 simple_switch semantics).
// Egress writes the instance type into the packet: 0 normal, 1 I2E clone, 2 E2E clone.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> tag; bit<8> itype; bit<8> port; bit<8> data; }
struct headers_t { h_t h; }
struct meta_t { @field_list(1) bit<8> mark; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (hdr.h.tag == 1) {
            clone(CloneType.I2E, 5);
        } else if (hdr.h.tag == 2) {
            meta.mark = 0x42;
            clone_preserving_field_list(CloneType.I2E, 5, 1);
        } else if (hdr.h.tag == 3) {
            clone(CloneType.I2E, 9);      // session not configured: no copy
        }
        hdr.h.data = 0xEE;                // the I2E clone carries the original bytes, not this
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.h.itype = (bit<8>) sm.instance_type;
        hdr.h.port = (bit<8>) sm.egress_port;
        if (sm.instance_type == 1 && hdr.h.tag == 2) {
            hdr.h.data = meta.mark;
        }
        if (sm.instance_type == 0 && hdr.h.tag == 1) {
            clone(CloneType.E2E, 6);
        }
    }
}
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
