// A run-time loop that never ends for some packets: the engine stops it after MAX_LOOP_STEPS iterations in the
// pass and drops the packet (rather than hanging the switch); the other packets run the loop to its end. Also a
// loop in a parser state, bounded by a field.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> step; bit<8> stop; bit<8> r; bit<8> p; }
struct headers_t { h_t h; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        for (bit<8> k = 0; k < hdr.h.stop; k = k + 1) {
            hdr.h.p = hdr.h.p + 1;
        }
        transition accept;
    }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        // with step = 0 the counter never reaches stop (unless it starts there)
        for (bit<8> i = 0; i != hdr.h.stop; i = i + hdr.h.step) {
            hdr.h.r = hdr.h.r + 1;
        }
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
