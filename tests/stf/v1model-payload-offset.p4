// The payload after a parser that stops inside a byte (here a failed extract after a 12-bit header)
// starts at the byte holding the first unparsed bit, as in BMv2: the deparser emits nothing, so the
// output is that payload.
#include <core.p4>
#include <v1model.p4>

header a_t { bit<12> x; }
header b_t { bit<16> y; }
struct headers_t { a_t a; b_t b; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.a); pkt.extract(hdr.b); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { sm.egress_spec = 1; }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
