// resubmit and recirculate with preserved field lists (BMv2 simple_switch semantics).
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> tag; bit<8> itype; bit<8> pass; bit<8> data; }
struct headers_t { h_t h; }
struct meta_t { @field_list(1) bit<8> count; bit<8> scratch; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.h.itype = (bit<8>) sm.instance_type;
        if (hdr.h.tag == 2) {
            if (sm.instance_type == 0) {
                meta.count = 7;
                meta.scratch = 9;                 // not preserved
                hdr.h.data = 0xFF;                // lost: resubmit re-parses the original bytes
                resubmit_preserving_field_list(1);
            } else {
                hdr.h.data = meta.count + meta.scratch;
                sm.egress_spec = 2;
            }
        } else if (hdr.h.tag == 3) {
            hdr.h.data = meta.count;
            sm.egress_spec = 3;
        } else {
            sm.egress_spec = 1;
        }
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.h.tag == 3 && hdr.h.pass < 3) {
            hdr.h.pass = hdr.h.pass + 1;
            meta.count = hdr.h.pass + 0x10;
            recirculate_preserving_field_list(1);
        }
    }
}
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
