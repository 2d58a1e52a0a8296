// Two run-time indices into a two-dimensional array (`bit<8> g[2][3]` in a header, as p4c's array5 indexes
// `arr[w][x]`): an access is out of range, reading 0 and writing nothing, when either index is out of its own
// range (g[0][3] is not g[1][0]).
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> i; bit<8> j; bit<8> g[2][3]; bit<8> r; }
struct headers_t { h_t h; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.h.r = hdr.h.g[hdr.h.i][hdr.h.j];
        hdr.h.g[hdr.h.j][hdr.h.i] = 0xEE;
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
