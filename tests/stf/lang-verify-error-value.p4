// `verify(cond, e)` with an error known only at run time (a metadata field of type error set by earlier parser
// states): the parser error raised is the value `e` holds. v1model: after a parser error the packet goes on to
// ingress with standard_metadata.parser_error set.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; bit<8> c; }
struct headers_t { h_t h; }
struct meta_t { error err; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.a) {
            1: e1;
            2: e2;
            default: accept;
        }
    }
    state e1 { meta.err = error.HeaderTooShort; transition check; }
    state e2 { meta.err = error.StackOutOfBounds; transition check; }
    state check {
        verify(hdr.h.b == 0, meta.err);
        transition accept;
    }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (sm.parser_error == error.HeaderTooShort) {
            hdr.h.c = 1;
        } else if (sm.parser_error == error.StackOutOfBounds) {
            hdr.h.c = 2;
        } else if (sm.parser_error == error.NoError) {
            hdr.h.c = 0xAA;
        }
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
