// Structs (and structs of structs) as header fields, and a header field of serializable enum type (P4_16 spec,
// "Header types"): a struct-typed field is laid out flattened, its leaves in declaration order, on the wire as in
// the reference compiler. Extract, emit, read and write nested fields, assign whole nested structs between a
// header and metadata, compare them, and use a nested field as a table key.
#include <core.p4>
#include <v1model.p4>

enum bit<8> Kind { PLAIN = 1, OUTER = 2 }
struct pair_t { bit<4> hi; bit<4> lo; }
struct row_t { pair_t p0; bit<1> flag; bit<7> port; pair_t p1; }
// 8 + (8 + 1 + 7 + 8) + 8 = 40 bits
header h_t { Kind kind; row_t row; bit<8> tail; }
// 24 bits
header o_t { row_t row; }
struct headers_t { h_t h; o_t o; }
struct meta_t { row_t saved; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.kind) {
            Kind.OUTER: parse_o;
            default: accept;
        }
    }
    state parse_o { pkt.extract(hdr.o); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action set_port(bit<7> p) { hdr.h.row.port = p; }
    table t {
        key = { hdr.h.row.p0.hi : exact; }
        actions = { set_port; NoAction; }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 1;
        meta.saved = hdr.h.row;
        // swap the two nested pairs
        hdr.h.row.p0 = hdr.h.row.p1;
        hdr.h.row.p1 = meta.saved.p0;
        if (hdr.o.isValid()) {
            // whole nested structs compared field by field
            if (hdr.o.row == meta.saved) {
                hdr.h.tail = 0xEE;
            } else {
                hdr.h.tail = 0x11;
            }
            hdr.o.row.flag = ~hdr.o.row.flag;
            hdr.o.row.p1 = { 4w0xA, 4w0xB };
        }
        // keyed on the pair after the swap
        t.apply();
        if (hdr.h.kind == Kind.PLAIN) {
            hdr.h.row.flag = 1;
        }
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
