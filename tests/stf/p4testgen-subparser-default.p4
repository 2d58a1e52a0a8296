// A sub-parser parameter with a default value (`in bit<8> y = 5`), the default an untyped constant that takes the
// parameter's type (issue1937-2-bmv2 of the p4testgen corpus); given explicitly the argument wins.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; }
struct hs { h_t h; }
struct m { }

parser Shift(out bit<8> x, in bit<8> y = 5) {
    state start {
        x = y << 1;
        transition accept;
    }
}
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start {
        p.extract(hdr.h);
        Shift.apply(hdr.h.a);
        Shift.apply(hdr.h.b, hdr.h.b);
        transition accept;
    }
}
control C(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { sm.egress_spec = 1; } }
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
