// `{...}` / `{a, ...}` / `{f = a, ...}` default initializers (P4_16 1.2.5: the other fields take their default
// values: 0, false, an invalid header) and `@field_list(CONST)` with a named constant and a serializable enum
// member (the reference compiler accepts any compile-time constant there; an undeclared name is an error).
#include <core.p4>
#include <v1model.p4>

const bit<8> FL_KEEP = 3;
enum bit<8> Lists { OTHER = 4 }

header h_t { bit<8> a; bit<8> b; bit<8> c; bit<8> d; bit<8> itype; bit<8> kept; bit<8> other; }
header x_t { bit<8> v; }
struct inner_t { bit<8> p; bool f; x_t x; }
struct headers_t { h_t h; }
struct meta_t { @field_list(FL_KEEP) bit<8> kept; @field_list(Lists.OTHER) bit<8> other; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.h.itype = (bit<8>)sm.instance_type;
        inner_t all = {...};
        inner_t some = { p = hdr.h.a, ... };
        inner_t first = { hdr.h.b, ... };
        x_t hx = { 0x77 };
        x_t dx = {...};
        if (!all.f && !all.x.isValid() && all.p == 0 && !some.f && some.p == hdr.h.a && !first.x.isValid()) {
            hdr.h.a = some.p + first.p;
        }
        // a header from `{...}` is valid, its fields 0
        if (dx.isValid() && hx.isValid()) {
            hdr.h.c = dx.v + hx.v;
        }
        if (sm.instance_type == 0) {
            meta.kept = 0x5A;
            meta.other = 0x6B;
            resubmit_preserving_field_list(FL_KEEP);
        } else {
            hdr.h.kept = meta.kept;
            hdr.h.other = meta.other;
        }
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
